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
NAMES = ["mm", "add.Tensor"]  # the points' labels
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


# ---- the merged report's views ----------------------------------------------------------------------------------

_H100 = None


def _rank(rows, colls, rank=None, wall_time=None, ceilings=True, meta=None):
    """A rank's report (without torch): ``rows`` of (op, bytes_read, bytes_written, vector FLOPs, t_start, t_end),
    op 0 an all-reduce, 1 a broadcast, 2 an add; ``colls``: {record: message (= bus) bytes} (groups of 2), judged
    by the H100 SXM datasheet (NVLink 450e9 B/s per direction, DRAM 3.35e12 B/s)."""
    import numpy as np

    from roofline import devices
    from roofline._datamodel._records import DTYPE_CODES, RECORD_DTYPE
    from roofline.report import OpInfo, Report

    global _H100
    if _H100 is None:
        _H100 = roofline.Ceilings.from_datasheet(devices.get("H100 SXM"))
    ops = [OpInfo("c10d.allreduce_.default", "c10d.allreduce_", "collective"),
           OpInfo("c10d.broadcast_.default", "c10d.broadcast_", "collective"),
           OpInfo("aten.add.Tensor", "aten.add", "ewise")]
    rec = np.zeros(len(rows), dtype=RECORD_DTYPE)
    for i, (op, br, bw, vf, t0, t1) in enumerate(rows):
        rec[i]["op"], rec[i]["bytes_read"], rec[i]["bytes_written"] = op, br, bw
        rec[i]["vector_flops"], rec[i]["t_start"], rec[i]["t_end"] = vf, t0, t1
    rec["dtype"] = DTYPE_CODES["float32"]
    m = dict(meta or {})
    recs = sorted(colls)
    m["collectives"] = {"record": recs, "collective": [("all_reduce", "broadcast")[rows[r][0]] for r in recs],
                        "group_size": [2] * len(recs), "message_bytes": [colls[r] for r in recs],
                        "bus_bytes": [colls[r] for r in recs], "async_op": [False] * len(recs),
                        "uncertain": [False] * len(recs)}
    if rank is not None:
        m["distributed"] = {"rank": rank, "world_size": 2, "backend": "gloo"}
    return Report(rec, ops, [("Global",)], wall_time, m, ceilings=_H100 if ceilings else None)


# rank 0: all-reduces of 4000 and 2000 bytes, a broadcast of 9000 bytes, adds of 800 + 400 and 3350 bytes
ROWS0 = [(0, 4000, 4000, 0, 1.0, 1.5), (2, 800, 400, 100, 2.0, 3.0), (1, 9000, 0, 0, 3.0, 3.25),
         (0, 2000, 2000, 0, 4.0, 4.125), (2, 3350, 0, 0, 5.0, 5.0625)]
COLLS0 = {0: 4000, 2: 9000, 3: 2000}
# rank 1: an all-reduce of 3000 bytes, an add of 6700 + 3350 bytes
ROWS1 = [(0, 3000, 3000, 0, 10.0, 10.75), (2, 6700, 3350, 50, 11.0, 13.0)]
COLLS1 = {0: 3000}


def _merged():
    from roofline import distributed as rd

    return rd.merge([_rank(ROWS0, COLLS0, rank=0, wall_time=0.25),
                     _rank(ROWS1, COLLS1, rank=1, wall_time=3.0,
                           meta={"incomplete": ["2 graph <calls> not counted"]})])


# rank 0: bytes 8000 + 1200 + 9000 + 4000 + 3350 = 25,550 = 0.03 MB; messages
# 4000 + 9000 + 2000 = 15,000 B = 0.015 MB; rank 1: bytes 6000 + 10,050 = 16,050 = 0.02 MB, messages 3000 B;
# total 41,600 B = 0.04 MB, 18,000 B = 0.018 MB of messages (= bus bytes, groups of 2)
# comm %: t_comm / (t_comm + t_compute) at NVLink 450e9 B/s and DRAM 3.35e12 B/s:
#   rank 0: 15,000 B over the link, 4550 B over DRAM; rank 1: 3000 B over the link, 10,050 B over DRAM
_SHARE0 = 100 * (15_000 / 450e9) / (15_000 / 450e9 + 4550 / 3.35e12)
_SHARE1 = 100 * (3000 / 450e9) / (3000 / 450e9 + 10_050 / 3.35e12)
_RANK_TABLE = ('<table class="rl-ranks"><tr><th>rank</th><th>wall s</th><th>GFLOP</th><th>mem MB</th><th>colls</th>'
               "<th>msg MB</th><th>bus MB</th><th>t_comp ms</th><th>t_comm ms</th><th>comm %</th></tr>"
               "<tr><td>0</td><td>0.2500</td><td>0.000</td><td>0.03</td><td>3</td><td>0.015</td><td>0.015</td>"
               f"<td>0.000</td><td>0.000</td><td>{_SHARE0:.1f}</td></tr>"
               "<tr><td>1</td><td>3.0000</td><td>0.000</td><td>0.02</td><td>1</td><td>0.003</td><td>0.003</td>"
               f"<td>0.000</td><td>0.000</td><td>{_SHARE1:.1f}</td></tr></table>")
_TOTALS = ("<p>total: 0.000 GFLOP, 0.04 MB memory, 4 collectives, 0.018 MB messages, 0.018 MB bus "
           "[INCOMPLETE: a lower bound]; slowest rank: 1</p>")


def test_merged_notebook_view_text():
    h = _merged()._repr_html_()
    head = ('<div class="rl-merged"><h3>roofline merged report: 2 ranks, world size 2, backend gloo</h3>'
            + _RANK_TABLE + _TOTALS
            + '<p class="rl-incomplete">INCOMPLETE: rank 1: 2 graph &lt;calls&gt; not counted</p>'
            + "<div><b>every rank's ops together</b> (each op's time summed over the ranks)</div>"
            + '<div class="rl-report">')
    assert h.startswith(head)
    assert h.endswith("</div>") and h.count('<div class="rl-merged">') == 1


def test_merged_without_ceilings_says_why_no_ops_are_shown_and_the_page_wraps_it():
    from roofline import distributed as rd

    m = rd.merge([_rank(ROWS0, COLLS0, ceilings=False), _rank(ROWS1, COLLS1, ceilings=False)])
    nulls = "<td>-</td><td>-</td><td>-</td>"  # no wall time, no roofline times, no share
    view = ('<div class="rl-merged"><h3>roofline merged report: 2 ranks</h3>'
            '<table class="rl-ranks"><tr><th>rank</th><th>wall s</th><th>GFLOP</th><th>mem MB</th><th>colls</th>'
            "<th>msg MB</th><th>bus MB</th><th>t_comp ms</th><th>t_comm ms</th><th>comm %</th></tr>"
            "<tr><td>0</td><td>-</td><td>0.000</td><td>0.03</td><td>3</td><td>0.015</td><td>0.015</td>" + nulls
            + "</tr><tr><td>1</td><td>-</td><td>0.000</td><td>0.02</td><td>1</td><td>0.003</td><td>0.003</td>"
            + nulls + "</tr></table>"
            "<p>total: 0.000 GFLOP, 0.04 MB memory, 4 collectives, 0.018 MB messages, 0.018 MB bus; "
            "slowest rank: 0</p>"
            "<p>(no rank has ceilings: the job&#x27;s ops are not judged; project a rank onto a device)</p></div>")
    assert m._repr_html_() == view
    head = '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>'
    tail = '</title><meta name="viewport" content="width=device-width, initial-scale=1"></head>\n<body>\n'
    assert m.to_html() == head + "roofline merged report (2 ranks)" + tail + view + "\n</body></html>\n"
    assert m.to_html(title="job <7>") == head + "job &lt;7&gt;" + tail + view + "\n</body></html>\n"


# ---- matplotlib -------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def mpl():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    return matplotlib


def _axes(mpl, dpi=100):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 6), dpi=dpi)
    return fig, fig.subplots()


def test_matplotlib_roofs_points_legend_and_grid(mpl, report):
    from matplotlib.colors import to_rgba

    import warnings

    fig, ax = _axes(mpl)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # drawn without a warning (matplotlib warns of contradictory grid settings)
        assert report.plot(ax=ax) is fig
    lines = [ln for ln in ax.get_lines() if ln.get_gid()]
    # the peaks first (vector, then matrix), then the bandwidths (innermost first)
    assert [ln.get_gid() for ln in lines] == ["roof:vector/float32", "roof:matrix/float32", "bandwidth:L2",
                                              "bandwidth:DRAM"]
    # a peak: dark grey, 1.5 points, dashed (vector) or solid (matrix); a bandwidth: light grey, 1.2 points, dotted
    # (a cache) or solid (DRAM)
    assert [(ln.get_linestyle(), ln.get_linewidth(), ln.get_color()) for ln in lines] == [
        ("--", 1.5, "#444"), ("-", 1.5, "#444"), (":", 1.2, "#888"), ("-", 1.2, "#888")]
    assert tuple(lines[2].get_xdata()) == pytest.approx((X_LO, 1.25))
    assert tuple(lines[2].get_ydata()) == pytest.approx((80e9 * X_LO, 100e9))
    (pts,) = [c for c in ax.collections if c.get_gid() == "ops"]
    assert pts.get_offsets().ravel().tolist() == pytest.approx([MM_X, MM_Y, ADD_X, ADD_Y])
    # marker areas 20 + 600 * share (points^2)
    assert pts.get_sizes().tolist() == pytest.approx([20 + 600 * MM_SHARE, 20 + 600 * ADD_SHARE])
    assert pts.get_facecolors().ravel().tolist() == pytest.approx([*to_rgba("#c0392b", 0.75), *to_rgba("#2471a3", 0.75)])
    assert pts.get_alpha() == 0.75 and pts.get_zorder() == 3
    assert pts.get_edgecolors().ravel().tolist() == pytest.approx([*to_rgba("k", 0.75)])
    assert pts.get_linewidths().tolist() == [0.5]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_xlim() == pytest.approx((X_LO, X_HI))
    # y range: the lowest height / 5 (the add's 32e6 FLOP/s), the highest * 3 (the 100 GFLOP/s peak)
    assert ax.get_ylim() == pytest.approx((32e6 / 5, 3 * 100e9))
    assert ax.get_title() == TITLE
    assert ax.get_xlabel() == "arithmetic intensity (FLOP / compulsory byte)"
    assert ax.get_ylabel() == "FLOP/s achieved"
    leg = ax.get_legend()
    assert [t.get_text() for t in leg.get_texts()] == [
        "peak vector/float32: 20.00 GFLOP/s", "peak matrix/float32: 100.00 GFLOP/s", "L2 80.00 GB/s",
        "DRAM 20.00 GB/s", "compute-bound", "memory-bound", "mixed-bound"]
    assert {t.get_fontsize() for t in leg.get_texts()} == {8}
    bounds = leg.legend_handles[-3:]
    assert [h.get_color() for h in bounds] == ["#c0392b", "#2471a3", "#7d3c98"]
    assert all(h.get_marker() == "o" and h.get_linestyle() == "None" for h in bounds)
    # outside the axes: its upper left corner at (1.01, 1.0) in axes coordinates, no padding
    assert leg._loc == 2 and leg.borderaxespad == 0.0  # 2: "upper left"
    anchor = leg.get_bbox_to_anchor()
    assert (anchor.x0, anchor.y0) == pytest.approx(tuple(ax.transAxes.transform((1.01, 1.0))))
    grid = ax.xaxis.get_gridlines()[0]
    assert grid.get_visible() and grid.get_alpha() == 0.3


def test_matplotlib_labels_are_placed_in_pixels(mpl, report, monkeypatch):
    from roofline.render import _chart

    calls = []
    place = _chart.place_labels

    def spy(px, cands, font_px, bounds):
        out = place(px, cands, font_px, bounds)
        calls.append((px, cands, font_px, bounds, out))
        return out

    monkeypatch.setattr(_chart, "place_labels", spy)
    fig, ax = _axes(mpl, dpi=90)
    report.plot(ax=ax)
    ((px, cands, font_px, bounds, placed),) = calls
    h = fig.bbox.height  # 6 inches at 90 dpi: 540 pixels
    assert h == 540
    assert font_px == 8 * 90 / 72  # an 8-point font at 90 dpi
    # each point in pixels with y down, and its marker's radius: area s points^2 = pi r^2
    for (x, y, r), (dx, dy), s in zip(px, ax.transData.transform([(MM_X, MM_Y), (ADD_X, ADD_Y)]),
                                      (20 + 600 * MM_SHARE, 20 + 600 * ADD_SHARE)):
        assert (x, y) == pytest.approx((dx, 540 - dy))
        assert r == pytest.approx(math.sqrt(s / math.pi) * 90 / 72)
    b = ax.bbox
    assert bounds == pytest.approx((b.x0, 540 - b.y1, b.x1, 540 - b.y0))
    assert cands == [(0, "mm"), (1, "add.Tensor")]  # most time first
    assert sorted(placed) == [0, 1]  # both labels fit
    texts = {t.get_gid(): t for t in ax.texts}
    assert set(texts) == {f"label:{NAMES[i]}" for i in placed}
    for i, (tx, ty, _box) in placed.items():
        t = texts[f"label:{NAMES[i]}"]
        assert t.get_text() == NAMES[i] and t.xy == pytest.approx([(MM_X, MM_Y), (ADD_X, ADD_Y)][i])
        # the text's anchor at the placed pixel (y down), in data coordinates
        assert tuple(ax.transData.transform(t.get_position())) == pytest.approx((tx, 540 - ty))
        assert t.get_fontsize() == 8 and t.get_ha() == "left" and t.get_va() == "baseline"


def _ten_ops():
    """Ten ops of 1000 FLOPs, op i taking (10 - i) microseconds: op 0 the slowest."""
    from roofline.report import OpInfo, Report
    from test_html import SETS, _ceil, _records

    ops = [OpInfo(f"aten.op{i}.default", f"aten.op{i}", "mm") for i in range(10)]
    rows = [(i, 2, 0, 1000, 0, 100 * (i + 1), 100, 1e-6 * (10 - i)) for i in range(10)]
    return Report(_records(rows), ops, SETS, wall_time=1e-3, meta={"timing": "op", "devices": ["cpu"]},
                  ceilings=_ceil())


def test_matplotlib_labels_the_eight_slowest_points_by_default(mpl, monkeypatch):
    from roofline.plot import plot_report
    from roofline.render import _chart

    seen = []
    monkeypatch.setattr(_chart, "place_labels", lambda px, cands, font_px, bounds: seen.append(cands) or {})
    r = _ten_ops()
    fig, ax = _axes(mpl)
    plot_report(r, ax=ax)
    fig, ax = _axes(mpl)
    r.plot(ax=ax, top=3)
    assert seen == [[(i, f"op{i}") for i in range(8)], [(0, "op0"), (1, "op1"), (2, "op2")]]


def test_matplotlib_figures_files_and_pyplot(mpl, report, tmp_path):
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure
    from PIL import Image

    from roofline.render import _matplotlib

    before = plt.get_fignums()
    # a file only: a bare 9 x 6 inch Figure, pyplot left alone (handed to _save, here a stand-in: drawing a 9 x 6
    # inch chart takes most of a second; _save is checked below on small figures)
    saved = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_matplotlib, "_save", lambda fig, path: saved.append((fig, path)))
        fig = report.plot(tmp_path / "c.png")
    assert saved == [(fig, str(tmp_path / "c.png"))]
    assert type(fig) is Figure and plt.get_fignums() == before
    assert tuple(fig.get_size_inches()) == (9, 6)
    # (small figures of an axes of their own from here on: quicker to write)
    # a file name: its extension's format (whatever its case), at 120 dpi
    small, ax = _axes(mpl, dpi=20)
    small.set_size_inches(2, 1.5)
    report.plot(tmp_path / "c.PNG", ax=ax)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.PNG"]
    with Image.open(tmp_path / "c.PNG") as im:  # PNG stores pixels per metre: 120 dpi reads back as 119.99
        assert im.format == "PNG" and im.info["dpi"] == pytest.approx((120, 120), abs=0.05)
    # no extension: savefig.format's (png), its extension added
    report.plot(str(tmp_path / "bare"), ax=ax)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bare.png", "c.PNG"]
    assert (tmp_path / "bare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # a binary file object: handed to matplotlib, at 120 dpi
    small, ax = _axes(mpl, dpi=20)
    small.set_size_inches(2, 1.5)
    with open(tmp_path / "obj.png", "wb") as f:
        assert report.plot(f, ax=ax) is small
    with Image.open(tmp_path / "obj.png") as im:
        assert im.format == "PNG" and im.info["dpi"] == pytest.approx((120, 120), abs=0.05)
    # an axes given: drawn on it, nothing written, pyplot left alone
    own, ax = _axes(mpl)
    assert report.plot(ax=ax) is own and plt.get_fignums() == before and len(list(tmp_path.iterdir())) == 3
    # neither: a 9 x 6 inch pyplot figure of the notebook class, made once
    fig = report.plot()
    try:
        from roofline.render import _matplotlib

        cls = _matplotlib._notebook_figure()
        assert cls is _matplotlib._notebook_figure() and cls is not Figure and issubclass(cls, Figure)
        assert type(fig) is cls and plt.get_fignums() == before + [fig.number]
        assert tuple(fig.get_size_inches()) == (9, 6)
    finally:
        plt.close(fig)


def test_matplotlib_refusals_before_drawing(mpl, report, tmp_path):
    from roofline.plot import plot_report

    with pytest.raises(TypeError, match=r"^plot: path must be a file name \(str or os.PathLike\), not int 3$"):
        plot_report(report, 3)
    with pytest.raises(ValueError, match=r"^depth applies to by='module' only, not by='op'$"):
        plot_report(report, tmp_path / "d.png", depth=2)
    from roofline.report import Report
    from test_html import OPS, ROWS, SETS, _records

    bare = Report(_records(ROWS), OPS, SETS, wall_time=1e-3, meta={"timing": "op"}, ceilings=None)
    with pytest.raises(ValueError, match=r"^this report has no ceilings to draw \(counted on meta\?\): plot "
                                         r"r.project\('<device>'\) instead$"):
        plot_report(bare, tmp_path / "n.png")
    assert list(tmp_path.iterdir()) == []
    # depth 3: Net.blocks.0 and Net.blocks.1 (depth 3) and Net.head, a leaf at depth 2 that comes first: the title
    # names the level asked for, not the first module's depth
    fig, ax = _axes(mpl)
    plot_report(report, ax=ax, by="module", depth=3)
    assert ax.get_title() == "roofline on handmade (best): 3 modules at depth 3"


class _Formatter:
    def __init__(self, printer):
        self.printer, self.added = printer, {}

    def lookup_by_type(self, cls):
        if self.printer is None:
            raise KeyError(cls)
        return self.printer

    def for_type(self, cls, fn):
        self.added[cls] = fn


def test_matplotlib_notebook_printers_close_the_figure_first(mpl, monkeypatch):
    import types

    import matplotlib.pyplot as plt
    from roofline.render import _matplotlib

    fig = plt.figure()  # before IPython is faked: pyplot looks for it when it makes its first figure
    shown = []
    png, none = _Formatter(lambda fig, *a, **k: shown.append((fig, a, k)) or "png"), _Formatter(None)
    shell = types.SimpleNamespace(display_formatter=types.SimpleNamespace(formatters={"png": png, "x": none}))
    fake = types.ModuleType("IPython")
    fake.get_ipython = lambda: shell
    monkeypatch.setitem(sys.modules, "IPython", fake)

    class Cls:
        pass

    _matplotlib._register_display(Cls)
    assert list(png.added) == [Cls] and none.added == {}  # no printer for Figure: nothing registered
    assert png.added[Cls](fig, 1, k=2) == "png"
    assert shown == [(fig, (1,), {"k": 2})] and fig.number not in plt.get_fignums()  # closed, then printed
    # IPython imported but not running: nothing to register
    fake.get_ipython = lambda: None
    png.added.clear()
    _matplotlib._register_display(Cls)
    assert png.added == {}


def test_matplotlib_does_not_import_ipython(mpl, monkeypatch):
    from roofline.render import _matplotlib

    class Refuse:
        def find_spec(self, name, path=None, target=None):
            if name == "IPython":
                raise AssertionError("IPython imported")

    monkeypatch.delitem(sys.modules, "IPython", raising=False)
    monkeypatch.setattr(sys, "meta_path", [Refuse(), *sys.meta_path])
    _matplotlib._register_display(object)
    assert "IPython" not in sys.modules


# ---- the compiled kernels' table and DataFrame -------------------------------------------------------------------

def _kernels_report(timed=True, **compiled):
    """Two kernels on tests/_graph.py's ceilings (matrix 2e12, vector 1e12 FLOP/s, DRAM 1e11 B/s):
    k_mm: 4 calls of 12e9 matrix FLOPs (6 ms at 2e12) over 3e8 + 1e8 B (4 ms at 1e11): 6 ms per call, 40 ms
      measured for the 4 calls: 4 x 6 / 40 = 60.0% of roof; intensity 12e9 / 4e8 = 30
    k_add: 1 call of 1e8 vector FLOPs (0.1 ms) over 2e8 + 1e8 B (3 ms): 3 ms, 6 ms measured: 50.0%; 1e8 / 3e8 = 0.33
    """
    from test_mutants_compiled_view import _kernel, _report as kreport

    ks = [_kernel("k_add", calls=1, vector_flops=10**8, bytes_read=2 * 10**8, bytes_written=10**8, time=6e-3,
                  ops=["aten.add.Tensor", "aten.relu.default"]),
          _kernel("k_mm", calls=4, matrix_flops=12 * 10**9, vector_flops=0, bytes_read=3 * 10**8,
                  bytes_written=10**8, time=40e-3, ops=["aten.mm.default"])]
    if not timed:
        for k in ks:
            del k["time"]
    r = kreport(ks)
    r.meta["compiled"] = {"kernels": ks, **compiled}
    return r


def test_kernel_table_timed():
    r = _kernels_report(graphs=2, graph_calls=7, graph_breaks=3)
    assert r.table(by="kernel").splitlines() == [
        "kernel    phase calls     FLOPs     bytes  FLOP/B  roof ms  time ms  % roof  fused ops",
        "k_mm   forward     4   12.00 G 400.00 MB   30.00    6.000   40.000   60.0%  mm.default",
        "k_add  forward     1  100.00 M 300.00 MB    0.33    3.000    6.000   50.0%  add.Tensor, relu.default",
        "2 compiled graphs (7 calls), 3 graph breaks"]


def test_kernel_table_untimed_most_bytes_first_and_counts_default_to_zero():
    r = _kernels_report(timed=False)
    assert r.table(by="kernel").splitlines() == [
        "kernel    phase calls     FLOPs     bytes  FLOP/B  roof ms  fused ops",
        "k_mm   forward     4   12.00 G 400.00 MB   30.00    6.000  mm.default",
        "k_add  forward     1  100.00 M 300.00 MB    0.33    3.000  add.Tensor, relu.default",
        "0 compiled graphs (0 calls), 0 graph breaks"]


def test_kernel_dataframe():
    pytest.importorskip("pandas")
    r = _kernels_report()
    del r.meta["compiled"]["kernels"][0]["ops"]  # a document may leave a kernel's ops out: none
    df = r.to_dataframe(by="kernel")
    assert list(df.columns) == ["name", "graph", "phase", "calls", "module", "ops", "matrix_flops", "vector_flops",
                                "flops", "bytes_read", "bytes_written", "bytes", "unfused_bytes", "intensity",
                                "t_min", "time", "achieved_flops", "achieved_bytes", "efficiency", "extern",
                                "bytes_known"]
    assert df["name"].tolist() == ["k_add", "k_mm"]  # the order of the compiled graphs
    assert df["ops"].tolist() == ["", "aten.mm.default"]
    assert df["flops"].tolist() == [10**8, 12 * 10**9] and df["bytes"].tolist() == [3 * 10**8, 4 * 10**8]
    assert df["t_min"].tolist() == pytest.approx([3e-3, 6e-3])
    assert df["efficiency"].tolist() == pytest.approx([0.5, 0.6])
    assert df["graph"].isna().all() and df["module"].isna().all()  # fields the kernels do not carry: empty


def test_merged_views_show_fifteen_job_ops_unless_told(monkeypatch):
    from roofline.render import _render

    monkeypatch.setattr(_render, "to_html", lambda job, top: f"[the job's {len(job.records)} records, top {top}]")
    m = _merged()
    # the job: rank 0's 5 records and rank 1's 2
    assert m._repr_html_().endswith("</div>[the job's 7 records, top 15]</div>")
    assert "</div>[the job's 7 records, top 15]</div>\n</body></html>\n" in m.to_html()
    assert "</div>[the job's 7 records, top 3]</div>\n</body></html>\n" in m.to_html(top=3)
