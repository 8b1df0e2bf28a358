"""What a user sees in the plotly and matplotlib charts, the compiled-kernel table and the merged (per-rank) report,
figure by figure. The report is the hand-made one of test_html.py (matrix float32 peak 100 GFLOP/s, vector float32
20 GFLOP/s, DRAM 20 GB/s), here with an L2 level of 80 GB/s as well, so that a dotted cache line is drawn; every
expected value is arithmetic or literal text written here."""

from __future__ import annotations

import math
import sys

import pytest

import roofline
from test_html import GFLOP, _report

# the hand-made report's two points (test_html.ROWS):
#   aten.mm.default: 512 + 2,000,000 + 1,000,000 = 3,000,512 FLOP, bytes 1200 + 60,000 + 30,000 = 91,200 B,
#     timed 2e-6 + 1e-4 + 5e-5 = 152e-6 s; intensity 3,000,512 / 91,200 = 32.9004 FLOP/B > 5 (the matrix ridge):
#     compute-bound, achieved 3,000,512 / 152e-6 = 19.7402e9 FLOP/s
#   aten.add.Tensor: 32 FLOP, 384 B, 1e-6 s; intensity 32 / 384 = 1/12 < 1 (the vector ridge): memory-bound,
#     achieved 32 / 1e-6 = 32e6 FLOP/s
#   shares of time: 152 / 153 and 1 / 153
MM_X, MM_Y = 3_000_512 / 91_200, 3_000_512 / 152e-6
ADD_X, ADD_Y = 32 / 384, 32 / 1e-6
MM_SHARE, ADD_SHARE = 152 / 153, 1 / 153
# the x range: min(ADD_X / 4, 0.05) = 1/48; max(MM_X * 4, (100e9 / 20e9) * 4) = 131.60
X_LO, X_HI = (32 / 384) / 4, 4 * 3_000_512 / 91_200
TITLE = "roofline on handmade (best): 2 ops (1 without FLOPs not shown)"


def _ceil_l2():
    return roofline.Ceilings(device="cpu", name="handmade", fingerprint="handmade",
                             peaks={("matrix", "float32"): roofline.Ceiling(100 * GFLOP),
                                    ("vector", "float32"): roofline.Ceiling(20 * GFLOP)},
                             bandwidths={"DRAM": roofline.Ceiling(20e9), "L2": roofline.Ceiling(80e9)})


@pytest.fixture(scope="module")
def report():
    return _report(ceil=_ceil_l2())


# ---- plotly -----------------------------------------------------------------------------------------------------

def test_plotly_lines_are_the_roofs_with_their_styles(report):
    pytest.importorskip("plotly")
    fig = report.roofline_chart(backend="plotly")
    lines = [t for t in fig.data if t.mode == "lines"]
    # the bandwidths first (innermost level first), then the peaks
    assert [t.name for t in lines] == ["L2 80.00 GB/s", "DRAM 20.00 GB/s", "peak vector/float32: 20.00 GFLOP/s",
                                       "peak matrix/float32: 100.00 GFLOP/s"]
    # a bandwidth is grey #888, dotted (a cache) or solid (DRAM); a peak is dark #444, dashed (vector) or solid
    assert [(t.line.color, t.line.dash) for t in lines] == [("#888", "dot"), ("#888", "solid"), ("#444", "dash"),
                                                             ("#444", "solid")]
    l2, dram, vec, mat = lines
    # L2 from X_LO up to where it meets the top peak: 100e9 / 80e9 = 1.25 FLOP/B, at 80e9 * x FLOP/s
    assert tuple(l2.x) == pytest.approx((X_LO, 1.25)) and tuple(l2.y) == pytest.approx((80e9 * X_LO, 100e9))
    assert tuple(dram.x) == pytest.approx((X_LO, 5.0)) and tuple(dram.y) == pytest.approx((20e9 * X_LO, 100e9))
    # each peak from its ridge on the DRAM line (20/20 = 1, 100/20 = 5) to X_HI
    assert tuple(vec.x) == pytest.approx((1.0, X_HI)) and tuple(vec.y) == (20e9, 20e9)
    assert tuple(mat.x) == pytest.approx((5.0, X_HI)) and tuple(mat.y) == (100e9, 100e9)


def test_plotly_markers_one_trace_per_bound(report):
    pytest.importorskip("plotly")
    fig = report.roofline_chart(backend="plotly")
    marks = [t for t in fig.data if t.mode == "markers"]
    assert [t.name for t in marks] == ["compute-bound", "memory-bound"]  # no empty trace for the other bounds
    comp, mem = marks
    assert tuple(comp.x) == pytest.approx((MM_X,)) and tuple(comp.y) == pytest.approx((MM_Y,))
    assert tuple(mem.x) == pytest.approx((ADD_X,)) and tuple(mem.y) == pytest.approx((ADD_Y,))
    assert comp.marker.color == "#c0392b" and mem.marker.color == "#2471a3"
    # size 6 + 40 * sqrt(share)
    assert tuple(comp.marker.size) == pytest.approx((6 + 40 * math.sqrt(MM_SHARE),))
    assert tuple(mem.marker.size) == pytest.approx((6 + 40 * math.sqrt(ADD_SHARE),))
    for t in marks:
        assert t.marker.opacity == 0.75 and t.marker.line.width == 0.5 and t.marker.line.color == "#222"
        assert t.hoverinfo == "text"
    assert tuple(mem.hovertext) == ("aten.add.Tensor (1 calls)<br>module: Net.blocks.0<br>dtype: float32<br>"
                                    "FLOPs 32 FLOP, bytes 384 B, intensity 0.08 FLOP/B<br>"
                                    "time 1.00 us, achieved 32.00 MFLOP/s, 1.9% of roof<br>"
                                    "roofline time 19.2 ns, memory-bound",)


def test_plotly_layout(report):
    pio = pytest.importorskip("plotly.io")
    fig = report.roofline_chart(backend="plotly")
    assert fig.layout.title.text == TITLE
    assert fig.layout.template == pio.templates["plotly_white"]
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert fig.layout.xaxis.title.text == "arithmetic intensity (FLOP / compulsory byte)"
    assert fig.layout.yaxis.title.text == "FLOP/s achieved"


def test_plotly_missing_is_an_import_error_naming_it(report, monkeypatch):
    monkeypatch.setitem(sys.modules, "plotly.graph_objects", None)
    with pytest.raises(ImportError, match=r"^roofline_chart\(backend='plotly'\) needs plotly: pip install plotly$"):
        report.roofline_chart(backend="plotly")
