"""The SVG roofline chart, number by number: the axes' ranges, the roofs, each point's place, size and tooltip, the
labels' places and the legend, each worked out here from the layout the chart documents (a log-log plot of 510 x
364 px inside margins of 70 left, 240 right, 30 top, 46 bottom; x from min(smallest intensity / 4, 0.05) to
max(largest intensity x 4, peak / bandwidth x 4); y from the lowest point or peak / 5 to the highest x 3; a point's
radius 3 + 14 sqrt(its share of the time)).

The report: the hand-worked timed report of tests/test_mutants_render.py (ceilings: matrix 100 FLOP/s, vector
10 FLOP/s, DRAM 5 B/s): the mm (intensity 400/30, 50 FLOP/s achieved over 8 s) and the add (intensity 1,
10 FLOP/s over 2 s) are points; the copy (no FLOPs) is not."""

import math
import re
import sys
import types

import numpy as np
import pytest

from roofline._datamodel._records import DTYPE_CODES, RECORD_DTYPE
from roofline.render._svg import place_labels, point_label
from roofline.report import OpInfo, Report
from test_mutants_render import _ceil, timed, untimed

# the chart's frame
ML, MT, PW, PH = 70, 30, 820 - 70 - 240, 440 - 30 - 46


def _axes(x_lo, x_hi, y_lo, y_hi):
    def X(x):
        return ML + (math.log10(x) - math.log10(x_lo)) / (math.log10(x_hi) - math.log10(x_lo)) * PW

    def Y(y):
        return MT + (math.log10(y_hi) - math.log10(y)) / (math.log10(y_hi) - math.log10(y_lo)) * PH

    return X, Y


def _attrs(tag, svg):
    return [dict(re.findall(r'([\w-]+)="([^"]*)"', m)) for m in re.findall(rf"<{tag} ([^>]*)>", svg)]


def _near(got, want, tol=0.051):
    assert len(got) == len(want), (got, want)
    for g, w in zip(got, want):
        assert abs(float(g) - w) <= tol, (got, want)


def test_the_chart_of_a_timed_report():
    svg = timed().roofline_chart().svg
    # x: min(1 / 4, 0.05) = 0.05 .. max(13.33 x 4, 100 / 5 x 4) = 80; y: min(50, 10, 10, 100) / 5 = 2 .. 100 x 3
    X, Y = _axes(0.05, 80.0, 2.0, 300.0)
    assert svg.startswith('<svg xmlns="http://www.w3.org/2000/svg" width="820" height="440" viewBox="0 0 820 440"')
    assert ">roofline on test (best): 2 ops (1 without FLOPs not shown)</text>" in svg  # the copy has no FLOPs
    assert '<rect x="70" y="30" width="510" height="364" fill="none" stroke="#bbb"/>' in svg
    lines = _attrs("line", svg)
    # the decade grid: x at 0.1, 1, 10; y at 10, 100
    grid_x = [ln for ln in lines if ln.get("stroke") == "#eee" and ln["x1"] == ln["x2"]]
    _near([ln["x1"] for ln in grid_x], [X(0.1), X(1), X(10)])
    assert all((ln["y1"], ln["y2"]) == ("30", "394") for ln in grid_x)
    grid_y = [ln for ln in lines if ln.get("stroke") == "#eee" and ln["y1"] == ln["y2"]]
    _near([ln["y1"] for ln in grid_y], [Y(10), Y(100)])
    assert re.findall(r'text-anchor="middle">([^<]*)</text>', svg)[:3] == ["0.1", "1", "10"]
    assert re.findall(r'text-anchor="end">([^<]*)</text>', svg) == ["10", "100"]
    _near([a["y"] for a in _attrs("text", svg) if a.get("text-anchor") == "end"], [Y(10) + 4, Y(100) + 4])
    _near([a["x"] for a in _attrs("text", svg) if a.get("text-anchor") == "middle" and "x" in a][:3],
          [X(0.1), X(1), X(10)])
    assert '<text x="325.0" y="432" text-anchor="middle">arithmetic intensity' in svg
    assert 'translate(14,212.0) rotate(-90)" text-anchor="middle">FLOP/s achieved</text>' in svg
    # the DRAM roof from x = 0.05 up to the top peak's ridge 100 / 5 = 20; the vector roof from its ridge 10 / 5 = 2,
    # the matrix one from 20, both to the right edge
    roofs = [ln for ln in lines if ln.get("stroke") in ("#888", "#444") and "stroke-width" in ln
             and ln["stroke-width"] in ("1.2", "1.5") and float(ln["x1"]) < 590]
    _near([float(v) for ln in roofs for v in (ln["x1"], ln["y1"], ln["x2"], ln["y2"])],
          [X(0.05), Y(5 * 0.05), X(20), Y(100),
           X(2), Y(10), X(80), Y(10),
           X(20), Y(100), X(80), Y(100)])
    assert [ln.get("stroke-dasharray") for ln in roofs] == [None, "6,3", None]
    assert re.findall(r"<title>([^<]*)</title></line>", svg) == ["DRAM bandwidth 5 B/s",
                                                                 "peak vector/float32 10 FLOP/s",
                                                                 "peak matrix/float32 100 FLOP/s"]
    # points, largest first: shares of the measured time 8 / 10 and 2 / 10
    pts = _attrs("circle", svg)[:2]
    _near([float(v) for p in pts for v in (p["cx"], p["cy"], p["r"])],
          [X(400 / 30), Y(50), 3 + 14 * math.sqrt(0.8), X(1), Y(10), 3 + 14 * math.sqrt(0.2)])
    assert [p["fill"] for p in pts] == ["#2471a3", "#2471a3"]  # both memory-bound
    titles = re.findall(r'class="rl-point"><title>([^<]*)</title>', svg)
    assert titles == [
        "aten.mm.default (1 calls)\nmodule: Net.fc\ndtype: float32\nFLOPs 400 FLOP, bytes 30 B, intensity 13.33 "
        "FLOP/B\ntime 8.00 s, achieved 50 FLOP/s, 75.0% of roof\nroofline time 6.00 s, memory-bound",
        "aten.add.Tensor (1 calls)\nmodule: Net\ndtype: float32\nFLOPs 20 FLOP, bytes 20 B, intensity 1.00 FLOP/B\n"
        "time 2.00 s, achieved 10 FLOP/s, 200.0% of roof\nroofline time 4.00 s, memory-bound; 1 call(s) above the "
        "ceiling (!)"]
    # labels: up and to the right of each point (its first free place): x + r + 2 + 1, y - r - 2 - 12 + 12 - 2.5
    labels = [a for a in _attrs("text", svg) if a.get("class") == "rl-label"]
    assert re.findall(r'class="rl-label">([^<]*)<', svg) == ["mm", "add.Tensor"]
    r0, r1 = 3 + 14 * math.sqrt(0.8), 3 + 14 * math.sqrt(0.2)
    _near([float(v) for a in labels for v in (a["x"], a["y"])],
          [X(400 / 30) + r0 + 3, Y(50) - r0 - 2 - 2.5, X(1) + r1 + 3, Y(10) - r1 - 2 - 2.5])
    # the legend: one entry per roof, then the bound colours, 16 px apart from y = 40
    legend = re.findall(r'<line x1="592" y1="(\d+)" x2="614" y2="(\d+)"', svg)
    assert legend == [("40", "40"), ("56", "56"), ("72", "72")]
    assert re.findall(r'<text x="618" y="(\d+)" font-size="10">([^<]*)</text>', svg) == [
        ("44", "DRAM 5 B/s"), ("60", "peak vector/float32: 10 FLOP/s"), ("76", "peak matrix/float32: 100 FLOP/s"),
        ("92", "compute-bound"), ("108", "memory-bound"), ("124", "mixed-bound")]
    assert re.findall(r'<circle cx="603" cy="(\d+)" r="5" fill="([^"]*)"', svg) == [
        ("88", "#c0392b"), ("104", "#2471a3"), ("120", "#7d3c98")]
    assert '<text x="592" y="142" font-size="9" fill="#666">point area: share of time;</text>' in svg
    assert '<text x="592" y="154" font-size="9" fill="#666">hover a point for details</text>' in svg


def test_an_untimed_chart_places_points_at_their_attainable_rate():
    svg = untimed().roofline_chart().svg
    # attainable: mm 400 / 6 s = 66.7 FLOP/s, add 20 / 4 s = 5 FLOP/s; y from 5 / 5 = 1 to 100 x 3
    X, Y = _axes(0.05, 80.0, 1.0, 300.0)
    pts = _attrs("circle", svg)[:2]
    # shares of the roofline time: 6 / 10 and 4 / 10
    _near([float(v) for p in pts for v in (p["cx"], p["cy"], p["r"])],
          [X(400 / 30), Y(400 / 6), 3 + 14 * math.sqrt(0.6), X(1), Y(5), 3 + 14 * math.sqrt(0.4)])
    assert "FLOP/s attainable (not timed)</text>" in svg
    titles = re.findall(r'class="rl-point"><title>([^<]*)</title>', svg)
    assert titles[0].splitlines()[-2:] == ["FLOPs 400 FLOP, bytes 30 B, intensity 13.33 FLOP/B",
                                           "roofline time 6.00 s, memory-bound"]


def test_a_projected_chart():
    p = timed().project(_ceil(), name="X")
    svg = p.roofline_chart().svg
    assert ">roofline on X (projected): 2 ops (1 without FLOPs not shown)</text>" in svg
    titles = re.findall(r'class="rl-point"><title>([^<]*)</title>', svg)
    # projected: each op at its roofline time, never flagged
    assert titles[1].splitlines()[-2:] == ["projected time 4.00 s, achieved 5 FLOP/s, 100.0% of roof",
                                           "roofline time 4.00 s, memory-bound"]


def test_the_chart_by_module_and_by_op_shape():
    r = timed()
    svg = r.roofline_chart(by="module").svg
    # no level has more than one node: the chain Net -> Net.fc is followed down to its leaf
    assert ">roofline on test (best): 1 modules at depth 2</text>" in svg
    assert re.findall(r'class="rl-point"><title>([^<]*)</title>', svg)[0].splitlines()[:2] == [
        "Net.fc", "dtype: float32"]
    assert re.findall(r'class="rl-label">([^<]*)<', svg) == ["fc"]
    rs = Report(r.records, r._ops, r.module_sets, wall_time=20.0, ceilings=_ceil(),
                signatures=["", "f32[2,3]", "f32[3]"])
    rs.records["sig"] = [1, 2, 0]
    svg = rs.roofline_chart(by="op_shape").svg
    assert re.findall(r'class="rl-label">([^<]*)<', svg) == ["mm [f32[2,3]]", "add.Tensor [f32[3]]"]
    t = re.findall(r'class="rl-point"><title>([^<]*)</title>', svg)[0].splitlines()
    assert t[:3] == ["aten.mm.default [f32[2,3]]", "module: Net.fc", "dtype: float32"]
    # by op, the shapes are listed in the tooltip
    t = re.findall(r'class="rl-point"><title>([^<]*)</title>', rs.roofline_chart().svg)[0].splitlines()
    assert t[:3] == ["aten.mm.default (1 calls)", "module: Net.fc", "shapes: f32[2,3]"]


def test_tooltips_list_three_modules_and_two_shapes_at_most():
    n = 5
    rec = np.zeros(n, dtype=RECORD_DTYPE)
    rec["vector_flops"] = 10
    rec["bytes_read"] = 4
    rec["dtype"] = DTYPE_CODES["float32"]
    rec["module"] = [1, 2, 3, 4, 4]
    rec["sig"] = [1, 2, 3, 3, 3]
    rec["t_start"] = [0, 1, 2, 3, 4]
    rec["t_end"] = [1, 3, 4, 6, 9]   # times 1, 2, 2, 3, 5: module d 8 s, b and c 2 s each, a 1 s
    sets = [("Global",), ("Global", "a"), ("Global", "b"), ("Global", "c"), ("Global", "d")]
    r = Report(rec, [OpInfo("aten.add.Tensor", "aten.add", "ewise")], sets, wall_time=9.0, ceilings=_ceil(),
               signatures=["", "f32[1]", "f32[2]", "f32[3]"])
    t = re.findall(r'class="rl-point"><title>([^<]*)</title>', r.roofline_chart().svg)[0].splitlines()
    assert t[1] == "module: d, b, c (+1 more)"
    assert t[2] == "shapes: f32[3] | f32[1] (+1 more)"
    assert t[3] == "dtype: float32"


def test_a_report_with_points_but_no_ceilings_has_no_chart():
    r = timed(ceilings=False)
    from roofline.render._svg import roofline_svg

    with pytest.raises(ValueError, match="no ceilings to draw"):
        roofline_svg(r)


def test_ticks_far_from_one_are_powers_of_ten():
    r = timed()
    # FLOPs x 1e6 and 1e-6 ... keep the points, move the peaks: a 1e9 FLOP/s matrix peak
    import roofline

    c = roofline.Ceilings(device="cpu", name="big", fingerprint="big",
                          peaks={("matrix", "float32"): roofline.Ceiling(1e9),
                                 ("vector", "float32"): roofline.Ceiling(10.0)},
                          bandwidths={"DRAM": roofline.Ceiling(5.0)})
    r = Report(r.records, r._ops, r.module_sets, wall_time=20.0, ceilings=c)
    svg = r.roofline_chart().svg
    # x up to 1e9 / 5 x 4 = 8e8: ticks 0.1 ... 1e4 as numbers, then 1e5 ... 1e8
    ticks = re.findall(r'<text x="[\d.]+" y="408" text-anchor="middle">([^<]*)</text>', svg)
    assert ticks == ["0.1", "1", "10", "100", "1000", "10000", "1e5", "1e6", "1e7", "1e8"]


# ---- the pure helpers -------------------------------------------------------------------------------------------------
def test_point_labels():
    assert point_label("aten.mm.default", "op") == "mm"
    assert point_label("Net.blocks.0", "module") == "blocks.0"
    assert point_label("Net.fc", "module") == "fc"
    assert point_label("Net", "module") == "Net"
    assert point_label("extern_kernels.mm[buf2]", "kernel") == "mm[buf2]"
    assert point_label("torch.ops.aten.addmm.default[op8]", "kernel") == "addmm[op8]"
    assert point_label("k" * 40, "kernel") == "k" * 40
    assert point_label("k" * 41, "kernel") == "k" * 37 + "..."
    assert point_label("aten.mm.default [f32[2,3]]", "op_shape") == "mm [f32[2,3]]"
    assert point_label("aten.mm.default", "op_shape") == "mm"


def test_labels_take_the_first_free_place():
    # a point at (100, 100) of radius 5; "ab": 0.62 x 10 x 2 + 2 = 14.4 px wide, 12 px high; d = 5 + 2 = 7
    pts = [(100.0, 100.0, 5.0)]
    out = place_labels(pts, [(0, "ab")], 10.0, (0, 0, 1000, 1000))
    # up and right: (107, 100 - 7 - 12) .. (121.4, 93); drawn at x + 1, baseline at the bottom - 2.5
    assert out[0][2] == pytest.approx((107.0, 81.0, 121.4, 93.0))
    assert out[0][:2] == pytest.approx((108.0, 90.5))
    # the top edge at 82: the first place is out; down and right: (107, 107) .. (121.4, 119)
    out = place_labels(pts, [(0, "ab")], 10.0, (0, 82, 1000, 1000))
    assert out[0][2] == pytest.approx((107.0, 107.0, 121.4, 119.0))
    # the right edge at 121: both right places are out; up and left: (100 - 7 - 14.4, 81) .. (93, 93)
    out = place_labels(pts, [(0, "ab")], 10.0, (0, 0, 121, 1000))
    assert out[0][2] == pytest.approx((78.6, 81.0, 93.0, 93.0))
    # a box exactly at the edge fits: right edge 121.4
    assert place_labels(pts, [(0, "ab")], 10.0, (0, 0, 121.4, 1000))[0][2] == pytest.approx((107, 81, 121.4, 93))
    # no room anywhere: left out
    assert place_labels(pts, [(0, "ab")], 10.0, (95, 95, 105, 105)) == {}


def test_labels_do_not_overlap_each_other_or_points():
    # two points side by side; the second label cannot take the place of the first
    pts = [(100.0, 100.0, 5.0), (100.0, 100.0, 5.0)]
    out = place_labels(pts, [(0, "ab"), (1, "ab")], 10.0, (0, 0, 1000, 1000))
    assert out[0][2] == pytest.approx((107.0, 81.0, 121.4, 93.0))
    assert out[1][2] == pytest.approx((107.0, 107.0, 121.4, 119.0))
    # a box touching another (sharing an edge) is free: a point whose box ends where the label's begins
    pts = [(100.0, 100.0, 5.0), (150.0, 87.0, 28.6)]   # its box starts at x = 121.4
    out = place_labels(pts, [(0, "ab")], 10.0, (0, 0, 1000, 1000))
    assert out[0][2] == pytest.approx((107.0, 81.0, 121.4, 93.0))
    # a point overlapping both right places by a little (its box from x = 121.3, y 58.3 .. 115.7) pushes the label
    # to the third: up and left
    pts = [(100.0, 100.0, 5.0), (150.0, 87.0, 28.7)]
    out = place_labels(pts, [(0, "ab")], 10.0, (0, 0, 1000, 1000))
    assert out[0][2] == pytest.approx((78.6, 81.0, 93.0, 93.0))


def test_the_chart_saves_as_svg_or_html(tmp_path):
    ch = timed().roofline_chart()
    assert ch._repr_html_() == f"<div>{ch.svg}</div>"
    ch.save(tmp_path / "c.svg")
    assert (tmp_path / "c.svg").read_text() == ch.svg
    ch.save(tmp_path / "c.HTML")
    assert (tmp_path / "c.HTML").read_text() == (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>roofline"
                                                 f"</title></head><body>{ch.svg}</body></html>")


# ---- the plotly figure, built against a stand-in for plotly that records what it is given ----------------------------
class _Figure:
    def __init__(self):
        self.traces, self.layout = [], {}

    def add_trace(self, t):
        self.traces.append(t)

    def update_layout(self, **kw):
        self.layout.update(kw)


@pytest.fixture
def fake_plotly(monkeypatch):
    go = types.ModuleType("plotly.graph_objects")
    go.Figure = _Figure
    go.Scatter = lambda **kw: kw
    plotly = types.ModuleType("plotly")
    plotly.graph_objects = go
    monkeypatch.setitem(sys.modules, "plotly", plotly)
    monkeypatch.setitem(sys.modules, "plotly.graph_objects", go)


def test_the_plotly_figure(fake_plotly):
    r = timed()
    fig = r.roofline_chart(backend="plotly")
    # x from 0.05 to 80 as in the SVG chart; the DRAM roof up to the top peak's ridge 100 / 5 = 20
    assert fig.traces[:3] == [
        {"x": [0.05, 20.0], "y": [5 * 0.05, 100.0], "mode": "lines", "name": "DRAM 5 B/s",
         "line": {"color": "#888", "dash": "solid"}},
        # the peaks start on the DRAM slope: at 10 / 5 = 2 and 100 / 5 = 20
        {"x": [2.0, 80.0], "y": [10.0, 10.0], "mode": "lines", "name": "peak vector/float32: 10 FLOP/s",
         "line": {"color": "#444", "dash": "dash"}},
        {"x": [20.0, 80.0], "y": [100.0, 100.0], "mode": "lines", "name": "peak matrix/float32: 100 FLOP/s",
         "line": {"color": "#444", "dash": "solid"}}]
    (pts,) = fig.traces[3:]
    assert pts["x"] == [400 / 30, 1.0] and pts["y"] == [50.0, 10.0]
    assert pts["mode"] == "markers" and pts["name"] == "memory-bound" and pts["hoverinfo"] == "text"
    # sizes 6 + 40 sqrt(share of the measured time): 8 / 10 and 2 / 10
    assert pts["marker"]["size"] == pytest.approx([6 + 40 * math.sqrt(0.8), 6 + 40 * math.sqrt(0.2)])
    assert pts["marker"]["color"] == "#2471a3" and pts["marker"]["opacity"] == 0.75
    assert pts["marker"]["line"] == {"width": 0.5, "color": "#222"}
    assert pts["hovertext"][0].startswith("aten.mm.default (1 calls)<br>module: Net.fc<br>dtype: float32<br>")
    # the same title as the SVG chart's
    assert fig.layout == {"title": "roofline on test (best): 2 ops (1 without FLOPs not shown)", "template": "plotly_white",
                          "xaxis": {"type": "log", "title": "arithmetic intensity (FLOP / compulsory byte)"},
                          "yaxis": {"type": "log", "title": "FLOP/s achieved"}}


def test_the_plotly_figure_of_an_untimed_and_a_projected_report(fake_plotly):
    r = untimed()
    r.records["matrix_flops"][0] = 4000  # the mm: intensity 4000 / 30 = 133.3, compute-bound (40 s vs 6 s)
    fig = r.roofline_chart(backend="plotly")
    # x up to max(133.3 x 4, 20 x 4) = 533.3; shares of the roofline time 40 / 44 and 4 / 44
    assert fig.traces[1]["x"] == [10 / 5, pytest.approx(4000 / 30 * 4)]  # the vector peak from the DRAM slope
    by_name = {t["name"]: t for t in fig.traces[3:]}
    assert list(by_name) == ["compute-bound", "memory-bound"]
    assert by_name["compute-bound"]["y"] == [100.0]  # attainable: 4000 FLOP / 40 s
    assert by_name["compute-bound"]["marker"]["size"] == pytest.approx([6 + 40 * math.sqrt(40 / 44)])
    assert by_name["memory-bound"]["marker"]["size"] == pytest.approx([6 + 40 * math.sqrt(4 / 44)])
    assert fig.layout["yaxis"]["title"] == "FLOP/s attainable (not timed)"
    p = timed().project(_ceil(), name="X")
    assert p.roofline_chart(backend="plotly").layout["title"] == "roofline on X (projected): 2 ops (1 without FLOPs not shown)"


def test_the_plotly_figure_needs_plotly_and_ceilings(monkeypatch, fake_plotly):
    from roofline.render._svg import roofline_plotly

    with pytest.raises(ValueError, match="no ceilings to draw"):
        roofline_plotly(timed(ceilings=False))
    monkeypatch.setitem(sys.modules, "plotly.graph_objects", None)
    with pytest.raises(ImportError, match=r"^roofline_chart\(backend='plotly'\) needs plotly: pip install plotly$"):
        timed().roofline_chart(backend="plotly")


# the places a label is tried at, in order, around a point of radius r (d = r + 2), for a label w wide and h high:
# offsets of the label box's top-left corner from the point's centre
def _places(d, w, h):
    return [(d, -d - h), (d, d), (-d - w, -d - h), (-d - w, d), (-w / 2, -d - h), (-w / 2, d),
            (d + 2, -h / 2), (-d - 2 - w, -h / 2), (d + 6, -d - h - 8), (-d - 6 - w, d + 8)]


def _inside_only(box, other):
    """A point strictly inside ``box`` and outside ``other`` (both (x0, y0, x1, y1)), or None."""
    x0, y0, x1, y1 = box
    for i in range(1, 40):
        for j in range(1, 40):
            x, y = x0 + (x1 - x0) * i / 40, y0 + (y1 - y0) * j / 40
            if not (other[0] - 0.02 <= x <= other[2] + 0.02 and other[1] - 0.02 <= y <= other[3] + 0.02):
                return x, y
    return None


def test_each_place_is_tried_in_turn():
    x, y, r = 500.0, 500.0, 5.0
    w, h = 0.62 * 10.0 * 2 + 2, 10.0 * 1.2
    boxes = [(x + dx, y + dy, x + dx + w, y + dy + h) for dx, dy in _places(r + 2.0, w, h)]
    for k, want in enumerate(boxes):
        # a speck of radius 0.01 inside each earlier place, outside place k
        inside = [_inside_only(b, want) for b in boxes[:k]]
        assert None not in inside
        specks = [(*xy, 0.01) for xy in inside]
        out = place_labels([(x, y, r)] + specks, [(0, "ab")], 10.0, (0, 0, 1000, 1000))
        assert out[0][2] == pytest.approx(want), k
        assert out[0][:2] == pytest.approx((want[0] + 1, want[3] - 2.5))


def test_a_points_box_spans_its_radius_on_every_side():
    # place 1 of a label of the point (100, 100, r 5) is (107, 81) .. (121.4, 93)
    p = (100.0, 100.0, 5.0)
    # a point left of it reaching in by its radius (box to x = 112), one above it reaching down to y = 81.5,
    # one right of it reaching left to x = 121.3, one below reaching up to 92.9
    for q in [(100.0, 70.0, 12.0), (115.0, 70.0, 11.5), (133.3, 87.0, 12.0), (115.0, 104.9, 12.0)]:
        out = place_labels([p, q], [(0, "ab")], 10.0, (0, 0, 1000, 1000))
        assert out[0][2] != pytest.approx((107.0, 81.0, 121.4, 93.0)), q
    # the same points a little further off leave place 1 free
    for q in [(100.0, 70.0, 6.9), (115.0, 70.0, 10.9), (133.3, 87.0, 11.8), (115.0, 105.1, 12.0)]:
        out = place_labels([p, q], [(0, "ab")], 10.0, (0, 0, 1000, 1000))
        assert out[0][2] == pytest.approx((107.0, 81.0, 121.4, 93.0)), q


def test_a_label_box_may_touch_the_bounds():
    p = [(100.0, 100.0, 5.0)]
    w = 0.62 * 10.0 * 2 + 2
    first = (100.0 + 7.0, 100.0 - 7.0 - 12.0, 100.0 + 7.0 + w, 100.0 - 7.0 - 12.0 + 12.0)
    for bounds in [(first[0], 0, 1000, 1000), (0, first[1], 1000, 1000), (0, 0, first[2], 1000),
                   (0, 0, 1000, first[3])]:
        assert place_labels(p, [(0, "ab")], 10.0, bounds)[0][2] == first, bounds


KERNELS = [{"name": "cpp_fused_add_relu_0", "phase": "forward", "calls": 2,
            "ops": ["aten.add.Tensor", "aten.relu.default"], "vector_flops": 20, "bytes_read": 40,
            "bytes_written": 20, "module": "Net", "time": 30.0, "dtype": "float32"},
           {"name": "extern_kernels.mm", "phase": "backward", "calls": 1, "ops": [], "matrix_flops": 400,
            "bytes_read": 30, "extern": True}]


def test_the_chart_of_compiled_kernels():
    r = timed(meta={"compiled": {"kernels": KERNELS}})
    svg = r.roofline_chart(by="kernel").svg
    assert ">roofline on test (best): 2 compiled kernels</text>" in svg
    assert "FLOP/s achieved</text>" in svg  # a kernel has a time
    # kernel 1: 20 FLOP, 60 B per call (intensity 1/3); roof max(20 / 10, 60 / 5) = 12 s per call, 24 s over its 2
    # calls, measured 30 s: 80% of roof, 40 FLOP / 30 s achieved. Kernel 2 (untimed): 400 FLOP, 30 B, roof 6 s, at
    # its attainable 400 / 6 FLOP/s. Shares of time: 30 / 36 and 6 / 36
    X, Y = _axes(0.05, 80.0, (40 / 30) / 5, 300.0)
    pts = _attrs("circle", svg)[:2]
    _near([float(v) for p in pts for v in (p["cx"], p["cy"], p["r"])],
          [X(1 / 3), Y(40 / 30), 3 + 14 * math.sqrt(30 / 36), X(400 / 30), Y(400 / 6), 3 + 14 * math.sqrt(6 / 36)])
    assert re.findall(r"<title>([^<]*)</title></circle>", svg) == [
        "cpp_fused_add_relu_0 (2 calls, forward)\nmodule: Net\nops: add.Tensor, relu\ndtype: float32\n"
        "FLOPs 20 FLOP, bytes 60 B per call, intensity 0.33 FLOP/B\ntime 30.00 s, achieved 1 FLOP/s, 80.0% of roof\n"
        "roofline time 12.00 s per call, memory-bound",
        "extern_kernels.mm (1 calls, backward, extern)\nmodule: Global\nops: (no op of the graph: added by Inductor)\n"
        "FLOPs 400 FLOP, bytes 30 B per call, intensity 13.33 FLOP/B\nroofline time 6.00 s per call, memory-bound"]
    assert re.findall(r'class="rl-label">([^<]*)<', svg) == ["cpp_fused_add_relu_0", "mm"]


def test_kernel_tooltips_cut_long_op_lists_and_flag_fast_kernels():
    ops = [f"aten.op{i:02d}.default" for i in range(20)]  # "op00, op01, ...": 20 x 4 + 19 x 2 = 118 characters
    k = dict(KERNELS[0], ops=ops, time=1.0)  # 24 s of roof in 1 s: above the ceiling
    r = timed(meta={"compiled": {"kernels": [k]}})
    (t,) = re.findall(r"<title>([^<]*)</title></circle>", r.roofline_chart(by="kernel").svg)
    lines = t.splitlines()
    assert lines[2] == "ops: " + ", ".join(f"op{i:02d}" for i in range(20))[:87] + "..."
    assert lines[-1] == "roofline time 12.00 s per call, memory-bound; above the ceiling (!)"
    # no time anywhere: attainable rates
    r = timed(meta={"compiled": {"kernels": [dict(KERNELS[0], time=None), KERNELS[1]]}})
    svg = r.roofline_chart(by="kernel").svg
    assert "FLOP/s attainable (not timed)</text>" in svg
    r = timed(meta={"compiled": {"kernels": [dict(KERNELS[0], time=0.0)]}})
    assert "FLOP/s attainable (not timed)</text>" in r.roofline_chart(by="kernel").svg


def test_chart_points_refuse_what_they_cannot_draw():
    from roofline.render._svg import chart_points

    r = timed()
    with pytest.raises(ValueError, match=r"^by='kernel' needs a report of a block that ran torch.compile'd code"):
        chart_points(r, "kernel")
    with pytest.raises(ValueError, match=r"^depth applies to by='module' only, not by='kernel'$"):
        chart_points(r, "kernel", 1)
    with pytest.raises(ValueError, match=r"^depth applies to by='module' only, not by='op'$"):
        chart_points(r, "op", 1)
    with pytest.raises(ValueError, match=r"^by must be 'op', 'op_shape', 'module' or 'kernel', got 'x'$"):
        chart_points(r, "x")
    # a group with FLOPs but no bytes, or bytes but no FLOPs, is no point
    r.records["bytes_read"][0] = 0
    assert [n for n, _, _ in chart_points(r, "op")] == ["aten.add.Tensor"]


def test_a_label_may_touch_a_point_on_any_side():
    # place 1 of the point (100, 100, r 5) is (107, 81) .. (121.4, 93); each point below has a box with one edge on
    # one of its edges (and overlaps it along that edge)
    p = (100.0, 100.0, 5.0)
    for q in [(100.0, 87.0, 7.0),    # box 93 .. 107 wide: its right edge on the label's left
              (115.0, 100.0, 7.0),   # box from y = 93: its top on the label's bottom
              (115.0, 74.0, 7.0)]:   # box to y = 81: its bottom on the label's top
        out = place_labels([p, q], [(0, "ab")], 10.0, (0, 0, 1000, 1000))
        assert out[0][2] == pytest.approx((107.0, 81.0, 121.4, 93.0)), q


def test_cache_roofs_and_peaks_shared_by_two_dtypes():
    import roofline

    c = roofline.Ceilings(device="cpu", name="t", fingerprint="t",
                          peaks={("matrix", "float32"): roofline.Ceiling(100.0),
                                 ("vector", "float32"): roofline.Ceiling(10.0),
                                 ("vector", "float16"): roofline.Ceiling(10.0)},
                          bandwidths={"L1": roofline.Ceiling(50.0), "L2": roofline.Ceiling(None, datasheet=20.0),
                                      "DRAM": roofline.Ceiling(5.0)})
    r = timed()
    r = Report(r.records, r._ops, r.module_sets, wall_time=20.0, ceilings=c)
    r.records["dtype"][2] = DTYPE_CODES["float16"]  # the copy: no FLOPs, no roof of its own
    r.records["vector_flops"][2] = 10  # now a float16 vector op at the same 10 FLOP/s: no second vector roof
    r.records["bytes_read"][2] = 20
    svg = r.roofline_chart().svg
    assert re.findall(r"<title>([^<]*)</title></line>", svg) == [
        "L1 bandwidth 50 B/s", "L2 bandwidth 20 B/s", "DRAM bandwidth 5 B/s", "peak vector/float32 10 FLOP/s",
        "peak matrix/float32 100 FLOP/s"]
    # x up to max(13.33 x 4, 100 / 5 x 4) = 80; each bandwidth roof ends at the top peak's ridge 100 / bw or at 80
    roofs = [ln for ln in _attrs("line", svg) if ln.get("stroke") == "#888" and ln.get("stroke-width") == "1.2"]
    assert [ln.get("stroke-dasharray") for ln in roofs] == ["2,3", "2,3", None]
    # points: mm 50 FLOP/s, add 10, the float16 op 10 FLOP / 4 s = 2.5: y from 2.5 / 5 = 0.5 to 300; x from 0.05
    # (intensities 13.3, 1, 10 / 30) to 80. Each bandwidth roof from x = 0.05 to the top peak's ridge 100 / bw
    X, Y = _axes(0.05, 80.0, 0.5, 300.0)
    _near([float(v) for ln in roofs for v in (ln["x1"], ln["y1"], ln["x2"], ln["y2"])],
          [X(0.05), Y(50 * 0.05), X(2), Y(100), X(0.05), Y(20 * 0.05), X(5), Y(100),
           X(0.05), Y(5 * 0.05), X(20), Y(100)])
    legend = re.findall(r'<text x="618" y="\d+" font-size="10">([^<]*)</text>', svg)
    assert legend[:5] == ["L1 50 B/s", "L2 20 B/s", "DRAM 5 B/s", "peak vector/float32: 10 FLOP/s",
                          "peak matrix/float32: 100 FLOP/s"]
    # judged on measured figures only, the L2 roof (a datasheet figure) is not drawn
    d = r.to_dict()
    d["ceilings_source"] = "measured"
    m = Report.from_dict(d)
    assert re.findall(r"<title>([^<]*) bandwidth", m.roofline_chart().svg) == ["L1", "DRAM"]


def test_tiny_ticks_are_powers_of_ten():
    from roofline.render._svg import _tick

    assert [_tick(v) for v in (1e-4, 1e-3, 0.01, 1.0, 99999.0, 1e5, 1e12)] == [
        "1e-4", "0.001", "0.01", "1", "99999", "1e5", "1e12"]


def _report(rows, ceilings=None, wall=10.0):
    """One op per row: (name, matrix FLOPs, vector FLOPs, bytes read, t_start, t_end, dtype)."""
    rec = np.zeros(len(rows), dtype=RECORD_DTYPE)
    rec["op"] = np.arange(len(rows))
    for f, k in (("matrix_flops", 1), ("vector_flops", 2), ("bytes_read", 3), ("t_start", 4), ("t_end", 5)):
        rec[f] = [row[k] for row in rows]
    rec["dtype"] = [DTYPE_CODES[row[6]] for row in rows]
    ops = [OpInfo(row[0], row[0], "ewise") for row in rows]
    return Report(rec, ops, [("Global",)], wall_time=wall, ceilings=ceilings or _ceil())


def test_axes_reach_a_low_intensity_and_a_point_above_the_peaks():
    # mm: 400 FLOP, 30 B in 1 s (400 FLOP/s, above the 100 FLOP/s peak); add: 20 FLOP, 500 B (intensity 0.04) in 2 s
    r = _report([("aten.mm.default", 400, 0, 30, 0.0, 1.0, "float32"),
                 ("aten.add.Tensor", 0, 20, 500, 1.0, 3.0, "float32")])
    svg = r.roofline_chart().svg
    # x from min(0.04 / 4, 0.05) = 0.01 to 80; y from min(400, 10, 10, 100) / 5 = 2 to 400 x 3
    X, Y = _axes(0.01, 80.0, 2.0, 1200.0)
    pts = _attrs("circle", svg)[:2]
    # the add (2 of the 3 s) is larger, drawn first
    _near([float(v) for p in pts for v in (p["cx"], p["cy"], p["r"])],
          [X(0.04), Y(10.0), 3 + 14 * math.sqrt(2 / 3), X(400 / 30), Y(400.0), 3 + 14 * math.sqrt(1 / 3)])
    dram = [ln for ln in _attrs("line", svg) if ln.get("stroke-width") == "1.2"][0]
    _near([dram["x1"], dram["y1"], dram["x2"], dram["y2"]], [X(0.01), Y(5 * 0.01), X(20), Y(100)])
    # the grid: decades 0.01 .. 10 and 10 .. 1000; the y labels right-aligned at x = 66
    assert re.findall(r'y="408" text-anchor="middle">([^<]*)</text>', svg) == ["0.01", "0.1", "1", "10"]
    assert [a["x"] for a in _attrs("text", svg) if a.get("text-anchor") == "end"] == ["66", "66", "66"]
    assert '<clipPath id="rl-clip"><rect x="70" y="30" width="510" height="364"/></clipPath>' in svg
    # a high intensity: 4000 FLOP over 10 B = 400 FLOP/B, x up to 1600
    r = _report([("aten.verylongname.default", 4000, 0, 10, 0.0, 100.0, "float32")])
    X, Y = _axes(0.05, 1600.0, 40.0 / 5, 300.0)
    svg = r.roofline_chart().svg
    (p,) = _attrs("circle", svg)[:1]
    _near([p["cx"], p["cy"], p["r"]], [X(400.0), Y(40.0), 17.0])
    # its label (12 characters: 0.62 x 10 x 12 + 2 = 76.4 px) would pass the plot's right edge (x = 580) on the
    # right: it goes up and to the left
    (lab,) = [a for a in _attrs("text", svg) if a.get("class") == "rl-label"]
    assert X(400.0) + 19 + 76.4 > 580
    _near([lab["x"], lab["y"]], [X(400.0) - 19 - 76.4 + 1, Y(40.0) - 19 - 2.5])


def test_a_chart_without_points():
    # a copy only: no FLOPs, no point, no peak. x from 0.05 to max(1 x 4, 1e12 / 5 x 4); y from 1 / 5 to 1 x 3
    r = _report([("aten.copy_.default", 0, 0, 20, 0.0, 4.0, "float32")])
    svg = r.roofline_chart().svg
    assert ">roofline on test (best): 0 ops (1 without FLOPs not shown)</text>" in svg
    X, Y = _axes(0.05, 8e11, 0.2, 3.0)
    (dram,) = [ln for ln in _attrs("line", svg) if ln.get("stroke-width") == "1.2"]
    # the DRAM roof ends at the default top peak's ridge 1e12 / 5
    _near([dram["x1"], dram["y1"], dram["x2"], dram["y2"]], [X(0.05), Y(5 * 0.05), X(2e11), Y(1e12)], tol=0.1)
    assert 'class="rl-point"' not in svg


def test_peaks_without_a_dram_roof_start_at_the_left_edge():
    import roofline

    c = roofline.Ceilings(device="cpu", name="t", fingerprint="t",
                          peaks={("vector", "float32"): roofline.Ceiling(10.0)}, bandwidths={})
    r = _report([("aten.add.Tensor", 0, 20, 20, math.nan, math.nan, "float32")], ceilings=c)
    svg = r.roofline_chart().svg
    # untimed without a bandwidth: no roofline time, no point; x from 0.05 to max(1 x 4, 1); y from 10 / 5 to 10 x 3
    X, Y = _axes(0.05, 4.0, 2.0, 30.0)
    (peak,) = [ln for ln in _attrs("line", svg) if ln.get("stroke-width") == "1.5" and ln.get("stroke") == "#444"
               and float(ln["x1"]) < 590]
    _near([peak["x1"], peak["y1"], peak["x2"], peak["y2"]], [X(0.05), Y(10), X(4.0), Y(10)])
    assert "bandwidth" not in re.findall(r"<title>([^<]*)</title></line>", svg)[0]


def test_points_of_equal_zero_times_share_equally_and_unroofed_points_are_left_out():
    r = _report([("aten.mm.default", 400, 0, 30, 1.0, 1.0, "float32"),
                 ("aten.add.Tensor", 0, 20, 20, 2.0, 2.0, "float32")])
    pts = _attrs("circle", r.roofline_chart().svg)[:2]
    # both took 0 s: the time is shared equally
    assert [float(p["r"]) for p in pts] == pytest.approx([3 + 14 * math.sqrt(0.5)] * 2, abs=0.051)
    # without a DRAM bandwidth, untimed ops have no roofline time, so no height: not drawn
    import roofline

    c = roofline.Ceilings(device="cpu", name="t", fingerprint="t",
                          peaks={("vector", "float32"): roofline.Ceiling(10.0)}, bandwidths={})
    r = _report([("aten.add.Tensor", 0, 20, 20, math.nan, math.nan, "float32"),
                 ("aten.sub.Tensor", 0, 20, 20, math.nan, math.nan, "float64")], ceilings=c)
    assert ">roofline on t (best): 0 ops</text>" in r.roofline_chart().svg


def test_the_notebook_views_chart_labels_ten_points():
    n = 12
    rec = np.zeros(n, dtype=RECORD_DTYPE)
    rec["op"] = np.arange(n)
    rec["vector_flops"] = 10 * 3 ** np.arange(n)  # intensities far apart: no label hides another
    rec["bytes_read"] = 4
    rec["dtype"] = DTYPE_CODES["float32"]
    r = Report(rec, [OpInfo(f"aten.op{i:02d}.default", "x", "ewise") for i in range(n)], [("Global",)],
               ceilings=_ceil())
    # the ten with most roofline time: op02 .. op11
    assert re.findall(r'class="rl-label">op(\d+)<', r._repr_html_()) == [f"{i:02d}" for i in range(11, 1, -1)]


def test_tooltips_rank_modules_by_time_and_count_untimed_calls_after_them():
    # one op in three modules: a (one call of 0.05 s), b (two untimed calls), c (one untimed call); shapes: two calls
    # without tensor arguments, one of f32[2], one just past the signature table (index 2 of 2)
    rec = np.zeros(4, dtype=RECORD_DTYPE)
    rec["vector_flops"] = 10
    rec["bytes_read"] = 4
    rec["dtype"] = DTYPE_CODES["float32"]
    rec["module"] = [1, 2, 2, 3]
    rec["sig"] = [0, 0, 1, 2]
    rec["t_start"] = [0.0, np.nan, np.nan, np.nan]
    rec["t_end"] = [0.05, np.nan, np.nan, np.nan]
    sets = [("Global",), ("Global", "a"), ("Global", "b"), ("Global", "c")]
    r = Report(rec, [OpInfo("aten.add.Tensor", "aten.add", "ewise")], sets, wall_time=1.0, ceilings=_ceil(),
               signatures=["", "f32[2]"])
    t = re.findall(r'class="rl-point"><title>([^<]*)</title>', r.roofline_chart().svg)[0].splitlines()
    assert t[1] == "module: a, b, c"
    assert t[2] == "shapes: (no tensor inputs) | f32[2] (+1 more)"

    # two shapes: both listed, nothing more
    r.records["sig"] = [0, 0, 1, 1]
    t = re.findall(r'class="rl-point"><title>([^<]*)</title>', r.roofline_chart().svg)[0].splitlines()
    assert t[2] == "shapes: (no tensor inputs) | f32[2]"  # two calls each: in the order first seen


def test_kernel_op_lists_of_90_characters_are_kept_whole():
    # 14 ops of 4 characters and one of 6, joined by ", ": 14 x 4 + 6 + 14 x 2 = 90 characters
    ops = [f"aten.op{i:02d}.default" for i in range(14)] + ["aten.op1234.default"]
    text = ", ".join([f"op{i:02d}" for i in range(14)] + ["op1234"])
    assert len(text) == 90
    r = timed(meta={"compiled": {"kernels": [dict(KERNELS[0], ops=ops)]}})
    (t,) = re.findall(r"<title>([^<]*)</title></circle>", r.roofline_chart(by="kernel").svg)
    assert t.splitlines()[2] == "ops: " + text
    # one more character: cut to 87 and "..."
    r = timed(meta={"compiled": {"kernels": [dict(KERNELS[0], ops=ops[:-1] + ["aten.op12345.default"])]}})
    (t,) = re.findall(r"<title>([^<]*)</title></circle>", r.roofline_chart(by="kernel").svg)
    assert t.splitlines()[2] == "ops: " + (text + "5")[:87] + "..."


def test_a_roof_for_each_unit_and_dtype_with_flops_however_few():
    import warnings

    import roofline

    c = roofline.Ceilings(device="cpu", name="t", fingerprint="t",
                          peaks={("matrix", "float32"): roofline.Ceiling(100.0),
                                 ("vector", "float16"): roofline.Ceiling(20.0),
                                 ("matrix", "bfloat16"): roofline.Ceiling(300.0)},
                          bandwidths={"DRAM": roofline.Ceiling(5.0)})
    # a matrix op of 1 FLOP (float32), a vector op of 1 FLOP (float16), an op of 20 matrix + 20 vector FLOPs
    # (bfloat16), and a float64 op: no float64 peak, no roof, and no warning about it
    rec = np.zeros(4, dtype=RECORD_DTYPE)
    rec["op"] = [0, 1, 2, 3]
    rec["matrix_flops"] = [1, 0, 20, 0]
    rec["vector_flops"] = [0, 1, 20, 5]
    rec["bytes_read"] = 4
    rec["dtype"] = [DTYPE_CODES[d] for d in ("float32", "float16", "bfloat16", "float64")]
    r = Report(rec, [OpInfo(f"aten.op{i}.default", "x", "ewise") for i in range(4)], [("Global",)],
               ceilings=c)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        svg = r.roofline_chart().svg
    assert re.findall(r"<title>peak ([^<]*)</title></line>", svg) == [
        "vector/float16 20 FLOP/s", "matrix/float32 100 FLOP/s", "matrix/bfloat16 300 FLOP/s"]


def test_the_dram_roof_falls_back_on_the_bandwidth_the_ops_were_judged_with():
    # judged on datasheet figures with only a measured DRAM bandwidth: the classification's bandwidth (5 B/s)
    r = _report([("aten.add.Tensor", 0, 20, 20, 0.0, 1.0, "float32")])
    d = r.to_dict()
    d["ceilings_source"] = "datasheet"
    m = Report.from_dict(d)
    assert re.findall(r"<title>([^<]*)</title></line>", m.roofline_chart().svg) == ["DRAM bandwidth 5 B/s"]


def test_a_chart_of_sub_second_and_sub_unit_rates():
    # the mm in 1 ms and the add in 2 ms: shares 1/3 and 2/3 of 3 ms
    r = _report([("aten.mm.default", 400, 0, 30, 0.0, 0.001, "float32"),
                 ("aten.add.Tensor", 0, 20, 500, 0.001, 0.003, "float32")])
    radii = [float(p["r"]) for p in _attrs("circle", r.roofline_chart().svg)[:2]]
    assert radii == pytest.approx([3 + 14 * math.sqrt(2 / 3), 3 + 14 * math.sqrt(1 / 3)], abs=0.051)
    # an op of 1 FLOP over 2 s: 0.5 FLOP/s, drawn
    r = _report([("aten.sub.Tensor", 0, 1, 4, 1.0, 3.0, "float32")])
    assert ">roofline on test (best): 1 ops</text>" in r.roofline_chart().svg


def test_the_x_axis_of_a_chart_whose_roofs_are_left_of_one():
    import roofline

    # a vector peak of 1 FLOP/s and DRAM 5 B/s: ridge 0.2; the one op has no bytes (no point)
    c = roofline.Ceilings(device="cpu", name="t", fingerprint="t", peaks={("vector", "float32"): roofline.Ceiling(1.0)},
                          bandwidths={"DRAM": roofline.Ceiling(5.0)})
    r = _report([("aten.add.Tensor", 0, 20, 0, 0.0, 1.0, "float32")], ceilings=c)
    svg = r.roofline_chart().svg
    # x from 0.05 to max(1 x 4, 0.2 x 4) = 4: decades at 0.1 and 1
    X, _ = _axes(0.05, 4.0, 0.2, 3.0)
    grid_x = [ln for ln in _attrs("line", svg) if ln.get("stroke") == "#eee" and ln["x1"] == ln["x2"]]
    _near([ln["x1"] for ln in grid_x], [X(0.1), X(1.0)])
    # without any roof either: x from 0.05 to 4 still
    c = roofline.Ceilings(device="cpu", name="t", fingerprint="t", peaks={("vector", "float32"): roofline.Ceiling(1.0)},
                          bandwidths={})
    svg = _report([("aten.add.Tensor", 0, 20, 0, 0.0, 1.0, "float32")], ceilings=c).roofline_chart().svg
    grid_x = [ln for ln in _attrs("line", svg) if ln.get("stroke") == "#eee" and ln["x1"] == ln["x2"]]
    _near([ln["x1"] for ln in grid_x], [X(0.1), X(1.0)])


def test_the_plotly_axes_at_their_limits(fake_plotly):
    import roofline

    # a point of intensity 20 / 500 = 0.04: x from 0.04 / 4 = 0.01
    r = _report([("aten.mm.default", 400, 0, 30, 0.0, 1.0, "float32"),
                 ("aten.add.Tensor", 0, 20, 500, 1.0, 3.0, "float32")])
    fig = r.roofline_chart(backend="plotly")
    assert fig.traces[0]["x"] == [pytest.approx(0.01), 20.0]
    # no point and no peak: the DRAM roof runs to the default top peak's ridge 1e12 / 5
    fig = _report([("aten.copy_.default", 0, 0, 20, 0.0, 4.0, "float32")]).roofline_chart(backend="plotly")
    assert fig.traces[0]["x"] == [0.05, 1e12 / 5] and fig.traces[0]["y"] == [5 * 0.05, 1e12]
    # no point, a peak of 1 FLOP/s, DRAM 5 B/s: x from min(1 / 4, 0.05) to max(1 x 4, 0.2 x 4) = 4
    c = roofline.Ceilings(device="cpu", name="t", fingerprint="t", peaks={("vector", "float32"): roofline.Ceiling(1.0)},
                          bandwidths={"DRAM": roofline.Ceiling(5.0)})
    fig = _report([("aten.add.Tensor", 0, 20, 0, 0.0, 1.0, "float32")], ceilings=c).roofline_chart(backend="plotly")
    assert fig.traces[1]["x"] == [1 / 5, 4.0] and fig.traces[1]["y"] == [1.0, 1.0]  # from the DRAM slope
    assert fig.traces[0]["x"] == [0.05, 0.2]


def test_the_plotly_marker_sizes(fake_plotly):
    import roofline

    def sizes(r):
        return [s for t in r.roofline_chart(backend="plotly").traces[1:] if t.get("mode") == "markers"
                for s in t["marker"]["size"]]

    # both took 0 s: equal shares
    r = _report([("aten.mm.default", 400, 0, 30, 1.0, 1.0, "float32"),
                 ("aten.add.Tensor", 0, 20, 20, 2.0, 2.0, "float32")])
    assert sizes(r) == pytest.approx([6 + 40 * math.sqrt(0.5)] * 2)
    # 1 ms and 2 ms: shares of 3 ms
    r = _report([("aten.mm.default", 400, 0, 30, 0.0, 0.001, "float32"),
                 ("aten.add.Tensor", 0, 20, 500, 0.001, 0.003, "float32")])
    assert sorted(sizes(r)) == pytest.approx([6 + 40 * math.sqrt(1 / 3), 6 + 40 * math.sqrt(2 / 3)])
    # in a timed report, an untimed point weighs its roofline time: the mm 1 s, the add max(2, 4) = 4 s
    r = _report([("aten.mm.default", 400, 0, 30, 0.0, 1.0, "float32"),
                 ("aten.add.Tensor", 0, 20, 20, math.nan, math.nan, "float32")])
    assert sorted(sizes(r)) == pytest.approx([6 + 40 * math.sqrt(0.2), 6 + 40 * math.sqrt(0.8)])
    # no bandwidth, one timed point of intensity 10 / 20 = 0.5: x to max(0.5 x 4, 1 x 4) = 4
    c = roofline.Ceilings(device="cpu", name="t", fingerprint="t", peaks={("vector", "float32"): roofline.Ceiling(1.0)},
                          bandwidths={})
    fig = _report([("aten.add.Tensor", 0, 10, 20, 0.0, 1.0, "float32")], ceilings=c).roofline_chart(backend="plotly")
    assert fig.traces[0]["x"] == [0.05, 4.0]


def test_small_kernel_times_single_points_and_one_byte():
    # a kernel measured at 0.5 s: the chart is of achieved rates
    r = timed(meta={"compiled": {"kernels": [dict(KERNELS[0], time=0.5)]}})
    assert "FLOP/s achieved</text>" in r.roofline_chart(by="kernel").svg
    # one point that took 0 s: all the time is its own
    r = _report([("aten.mm.default", 400, 0, 30, 1.0, 1.0, "float32")])
    assert float(_attrs("circle", r.roofline_chart().svg)[0]["r"]) == pytest.approx(17.0, abs=0.051)
    # an op reading 1 byte is a point
    r = _report([("aten.mm.default", 400, 0, 1, 0.0, 1.0, "float32")])
    assert ">roofline on test (best): 1 ops</text>" in r.roofline_chart().svg


def test_a_shape_past_the_signature_table_is_not_listed():
    # the commonest index (2, twice) is one past the table of 2 signatures: left out, and counted among the others
    rec = np.zeros(4, dtype=RECORD_DTYPE)
    rec["vector_flops"] = 10
    rec["bytes_read"] = 4
    rec["dtype"] = DTYPE_CODES["float32"]
    rec["sig"] = [2, 2, 0, 1]
    r = Report(rec, [OpInfo("aten.add.Tensor", "aten.add", "ewise")], [("Global",)], ceilings=_ceil(),
               signatures=["", "f32[2]"])
    t = re.findall(r'class="rl-point"><title>([^<]*)</title>', r.roofline_chart().svg)[0].splitlines()
    assert t[2] == "shapes: (no tensor inputs) (+1 more)"


def test_a_timed_point_left_of_one_without_a_bandwidth(fake_plotly):
    import roofline

    # intensity 10 / 20 = 0.5, timed: drawn at its achieved 10 FLOP/s; x from 0.05 to max(0.5 x 4, 1 x 4) = 4
    c = roofline.Ceilings(device="cpu", name="t", fingerprint="t", peaks={("vector", "float32"): roofline.Ceiling(1.0)},
                          bandwidths={})
    r = _report([("aten.add.Tensor", 0, 10, 20, 0.0, 1.0, "float32")], ceilings=c)
    svg = r.roofline_chart().svg
    X, _ = _axes(0.05, 4.0, 0.2, 30.0)
    grid_x = [ln for ln in _attrs("line", svg) if ln.get("stroke") == "#eee" and ln["x1"] == ln["x2"]]
    _near([ln["x1"] for ln in grid_x], [X(0.1), X(1.0)])
    # one point that took 0 s: all the time is its own (plotly marker 6 + 40 x 1)
    r = _report([("aten.mm.default", 400, 0, 30, 1.0, 1.0, "float32")])
    (pts,) = [t for t in r.roofline_chart(backend="plotly").traces if t.get("mode") == "markers"]
    assert pts["marker"]["size"] == pytest.approx([46.0])
