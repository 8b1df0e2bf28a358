"""The chart model every renderer draws (roofline/render/_chart.py), where tests/test_mutants_svg.py leaves it open:
the groups a chart leaves out (and says so in its title), the points' heights and sizes, the roofs, the label
placement at the plot's edges. The reports are tests/test_mutants_render.py's hand-worked ones (ceilings: matrix
100 FLOP/s, vector 10 FLOP/s, DRAM 5 B/s; the mm: 400 FLOP, 30 B over 8 s; the add: 20 FLOP, 20 B over 2 s; the
copy: no FLOPs, 20 B over 4 s)."""

import re

from roofline.render import _chart
from roofline.report import Report
from test_mutants_render import _ceil, timed
from test_mutants_svg import KERNELS


def _title(svg):
    (t,) = re.findall(r">(roofline on [^<]*)</text>", svg)
    return t


def test_a_kernel_chart_says_how_many_kernels_without_flops_it_leaves_out():
    # a copy kernel (bytes, no FLOPs) is left out and counted in the title; so is a kernel with FLOPs and no bytes
    # (no intensity to place it at)
    copy = {"name": "cpp_fused_clone_1", "phase": "forward", "calls": 1, "ops": ["aten.clone.default"],
            "bytes_read": 40, "bytes_written": 40, "time": 1.0}
    no_bytes = {"name": "cpp_fused_fill_2", "phase": "forward", "calls": 1, "ops": [], "vector_flops": 10,
                "time": 1.0}
    r = timed(meta={"compiled": {"kernels": KERNELS + [copy]}})
    assert _title(r.roofline_chart(by="kernel").svg) == ("roofline on test (best): 2 compiled kernels "
                                                         "(1 without FLOPs not shown)")
    r = timed(meta={"compiled": {"kernels": KERNELS + [copy, no_bytes]}})
    assert _title(r.roofline_chart(by="kernel").svg) == ("roofline on test (best): 2 compiled kernels "
                                                         "(2 without FLOPs not shown)")
    # every kernel drawn: no note
    r = timed(meta={"compiled": {"kernels": KERNELS}})
    assert _title(r.roofline_chart(by="kernel").svg) == "roofline on test (best): 2 compiled kernels"


def test_a_module_chart_says_how_many_modules_without_flops_it_leaves_out():
    # Net has two children: fc runs the mm and the add, act only the copy (no FLOPs): the level shown is Net's
    # children (depth 2), of which fc is drawn and act left out
    r = timed()
    r.records["module"] = [2, 2, 3]
    r = Report(r.records, r._ops, [("Global",), ("Global", "Net"), ("Global", "Net", "Net.fc"),
                                   ("Global", "Net", "Net.act")], wall_time=20.0, ceilings=_ceil())
    svg = r.roofline_chart(by="module").svg
    assert _title(svg) == "roofline on test (best): 1 modules at depth 2 (1 without FLOPs not shown)"
    assert re.findall(r'class="rl-label">([^<]*)<', svg) == ["fc"]
    # at depth 1 Net holds all three: drawn, nothing left out
    assert _title(r.roofline_chart(by="module", depth=1).svg) == "roofline on test (best): 1 modules at depth 1"


def _point(name, x, y, share):
    return _chart.Point(name=name, label=name, row={}, mask=None, x=x, y=y, time=share, share=share,
                        bound="memory", color="#000", tooltip=name)


def test_a_label_with_no_room_inside_the_plot_is_left_out_rather_than_drawn_below_it():
    from roofline.render import _svg

    # the plot: 510 x 364 px from (70, 30); y from 1 to 1000 (121.3 px a decade). p sits on the bottom edge (r 3 px:
    # no share of the time), q 20 px above it (r 3 + 14 = 17 px): every place for p's label above it overlaps q,
    # and every other place reaches below the bottom edge (y 394)
    up = 10 ** (20 / (364 / 3))
    model = _chart.Chart(by="op", timed=True, title="t", x_label="x", y_label="y", x_range=(0.1, 1000.0),
                         y_range=(1.0, 1000.0), roofs=(), points=(_point("p", 10.0, 1.0, 0.0),
                                                                  _point("q", 10.0, up, 1.0)),
                         by_time=(1, 0), skipped=0)
    svg = _svg.draw(model, 10, 820, 440)
    assert re.findall(r'class="rl-label">([^<]*)<', svg) == ["q"]
    for x, y in re.findall(r'<text x="([\d.]+)" y="([\d.]+)" font-size="10" class="rl-label">', svg):
        assert 70 <= float(x) <= 580 and 30 <= float(y) <= 394
