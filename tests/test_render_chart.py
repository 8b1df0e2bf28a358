"""One chart model (roofline/render/_chart.py), computed once from a report's roofs, drawn by the SVG, matplotlib and
plotly charts: the three draw the same roofs and points. The report here is the hand-made one of test_html.py:
matrix float32 peak 100 GFLOP/s, vector float32 20 GFLOP/s, DRAM 20 GB/s."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from roofline.render import _chart, _svg
from test_html import _report


def test_the_model_holds_the_roofs_of_the_report():
    r = _report()
    model = _chart.chart(r)
    roofs = {roof.gid: roof for roof in model.roofs}
    assert set(roofs) == {"roof:matrix/float32", "roof:vector/float32", "bandwidth:DRAM"}
    assert roofs["roof:matrix/float32"].value == 100e9 and roofs["roof:vector/float32"].value == 20e9
    assert roofs["bandwidth:DRAM"].value == 20e9
    # the DRAM slope meets the highest peak at 100e9 / 20e9 = 5 FLOP/B; each peak starts on the slope:
    # matrix at 100e9 / 20e9 = 5 FLOP/B, vector at 20e9 / 20e9 = 1 FLOP/B
    dram = roofs["bandwidth:DRAM"]
    assert dram.x[1] == pytest.approx(5.0) and dram.y[1] == pytest.approx(100e9)
    assert roofs["roof:matrix/float32"].x[0] == pytest.approx(5.0)
    assert roofs["roof:vector/float32"].x[0] == pytest.approx(1.0)
    # the peaks the classification judged each record against: the maximum per (unit, dtype) is the roof drawn
    # (the charts computed it this way before the roofs had an owner)
    cls = r.classification()
    mm = r.records["matrix_flops"] > 0
    assert float(np.nanmax(cls["peak"][mm])) == roofs["roof:matrix/float32"].value
    assert float(np.nanmax(cls["peak"][~mm & (r.records["vector_flops"] > 0)])) == roofs["roof:vector/float32"].value
    # points: the ops with FLOPs and bytes (mm and add; the view has neither), sized by their share of time
    assert sorted(p.name for p in model.points) == ["aten.add.Tensor", "aten.mm.default"]
    assert math.isclose(sum(p.share for p in model.points), 1.0)
    assert model.title == "roofline on handmade (best): 2 ops (1 without FLOPs not shown)"
    assert model.x_range[0] <= min(p.x for p in model.points) and model.x_range[1] >= max(p.x for p in model.points)


def test_svg_and_matplotlib_draw_the_same_model(tmp_path):
    r = _report()
    model = _chart.chart(r)
    svg = _svg.roofline_svg(r)
    assert len(re.findall(r'class="rl-point"', svg)) == len(model.points)
    assert len(re.findall(r"<title>peak ", svg)) == len(model.peaks)
    assert len(re.findall(r" bandwidth \d", svg)) == len(model.bandwidths)
    assert model.title in svg
    pytest.importorskip("matplotlib")
    ax = r.plot(tmp_path / "c.png").axes[0]
    lines = {line.get_gid(): line for line in ax.get_lines() if line.get_gid()}
    assert set(lines) == {roof.gid for roof in model.roofs}
    for roof in model.roofs:
        assert tuple(lines[roof.gid].get_xdata()) == pytest.approx(roof.x)
        assert tuple(lines[roof.gid].get_ydata()) == pytest.approx(roof.y)
    (pts,) = [c for c in ax.collections if c.get_gid() == "ops"]
    assert len(pts.get_offsets()) == len(model.points)
    assert ax.get_title() == model.title and ax.get_xlim() == pytest.approx(model.x_range)


def test_plotly_draws_the_same_model():
    pytest.importorskip("plotly")
    r = _report()
    model = _chart.chart(r)
    fig = r.roofline_chart(backend="plotly")
    lines = [t for t in fig.data if t.mode == "lines"]
    assert sorted(t.name for t in lines) == sorted(roof.label for roof in model.roofs)
    assert sum(len(t.x) for t in fig.data if t.mode == "markers") == len(model.points)
    assert fig.layout.title.text == model.title


def test_a_projection_is_drawn_against_its_target():
    """project() chooses the target's roofs once; the projected report's chart reads them (H100 SXM datasheet:
    989 TFLOP/s dense bf16, 67 TFLOP/s fp32 vector, 3.35 TB/s)."""
    p = _report().project("H100 SXM")
    roofs = {roof.gid: roof.value for roof in _chart.chart(p).roofs}
    assert roofs["bandwidth:DRAM"] == 3.35e12 and roofs["roof:vector/float32"] == 67e12
    assert p.roofs.source == "datasheet" and p.roofs is p.roofs
