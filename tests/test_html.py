"""The views of a report people look at: the notebook HTML, the module tree table, the text summary's units, the
roofline charts (matplotlib and SVG) and a projection's times. Reports are built by hand (records, ops, module
sets, ceilings), so every expected figure is arithmetic written here; one test runs a real notebook kernel."""

import json
import math
import os
import re
import sys

import numpy as np
import pytest

import roofline
from roofline import _core
from roofline._datamodel._records import DTYPE_CODES, RECORD_DTYPE
from roofline.report import OpInfo, Report

F32 = DTYPE_CODES["float32"]
GFLOP = 1e9


def _ceil(matrix=100 * GFLOP, vector=20 * GFLOP, dram=20e9):
    return roofline.Ceilings(device="cpu", name="handmade", fingerprint="handmade",
                             peaks={("matrix", "float32"): roofline.Ceiling(matrix),
                                    ("vector", "float32"): roofline.Ceiling(vector)},
                             bandwidths={"DRAM": roofline.Ceiling(dram)})


OPS = [OpInfo("aten.mm.default", "aten.mm", "mm"), OpInfo("aten.add.Tensor", "aten.add", "ewise"),
       OpInfo("aten.view.default", "aten.view", "zero")]
# Net.blocks is a ModuleList: never called, so no module set names it alone
SETS = [("Global",), ("Global", "Net"), ("Global", "Net", "Net.blocks.0"), ("Global", "Net", "Net.blocks.1"),
        ("Global", "Net", "Net.head")]


def _records(rows):
    """rows: (op, module set, phase, matrix FLOPs, vector FLOPs, bytes read, bytes written, seconds); ops run back
    to back from t = 0 (seconds None: untimed)."""
    rec = np.zeros(len(rows), dtype=RECORD_DTYPE)
    t = 0.0
    for i, (op, mod, phase, mf, vf, br, bw, sec) in enumerate(rows):
        rec[i]["op"], rec[i]["module"], rec[i]["phase"], rec[i]["dtype"] = op, mod, phase, F32
        rec[i]["matrix_flops"], rec[i]["vector_flops"] = mf, vf
        rec[i]["bytes_read"], rec[i]["bytes_written"] = br, bw
        rec[i]["seq"] = i
        if sec is None:
            rec[i]["t_start"] = rec[i]["t_end"] = math.nan
        else:
            rec[i]["t_start"], rec[i]["t_end"] = t, t + sec
            t += sec
    return rec


# a forward of 544 FLOPs (one 4x4x... product of 512 FLOPs and a 32-FLOP add) and a backward
ROWS = [
    (0, 2, 0, 512, 0, 1000, 200, 2e-6),        # blocks.0 mm: 512 FLOP
    (1, 2, 0, 0, 32, 256, 128, 1e-6),          # blocks.0 add: 32 FLOP  -> forward 544 FLOP
    (2, 3, 0, 0, 0, 0, 0, 1e-7),               # blocks.1 view
    (0, 4, 1, 2_000_000, 0, 40_000, 20_000, 1e-4),   # head mm (backward): 2 MFLOP
    (0, 3, 1, 1_000_000, 0, 20_000, 10_000, 5e-5),   # blocks.1 mm (backward)
]


def _report(rows=ROWS, sets=SETS, ceil=None, wall=None):
    rec = _records(rows)
    wall = wall if wall is not None else float(np.nansum(rec["t_end"] - rec["t_start"])) * 1.25
    meta = {"timing": "op", "devices": ["cpu"], "version": roofline.__version__}
    return Report(rec, OPS, sets, wall_time=wall, meta=meta, ceilings=ceil or _ceil(),
                  overhead={"counting_per_op_s": 4e-6, "timing_per_op_s": 1e-7})


def _text(html):
    """The visible text of an HTML fragment (tags, styles and tooltips removed)."""
    html = re.sub(r"<style>.*?</style>", "", html, flags=re.S)
    html = re.sub(r"<title>.*?</title>", "", html, flags=re.S)
    return re.sub(r"<[^>]+>", " ", html)


# ---- the notebook view ------------------------------------------------------------------------------------------

def test_notebook_html_of_a_measured_a_projected_and_a_loaded_report():
    r = _report()
    views = {"measured": r, "projected": r.project("H100 SXM"), "loaded": roofline.load(r.to_json())}
    for what, rep in views.items():
        h = rep._repr_html_()
        text = _text(h)
        assert "<script" not in h  # self-contained: no JavaScript
        # units everywhere: no raw floats in scientific notation, times with units, counts with FLOP and B
        assert not re.search(r"\d\.\d+e[+-]\d", text), (what, re.findall(r"\S*\d\.\d+e[+-]\d\S*", text)[:3])
        assert "3.00 MFLOP (matrix 3.00 MFLOP, vector 32 FLOP)" in text  # 512 + 2e6 + 1e6 matrix, 32 vector
        assert "FLOP/s" in text and re.search(r"\d (ms|us|ns)\b", text)
        assert "% roof" in text and "Legend" in text and "above the ceiling" in text  # the ! legend
        # the facts of the text report's head
        if what != "projected":  # a projection ran nothing: no instrumentation
            assert "instrumentation" in text and "4.0 us/op counting" in text
        assert "handmade" in text or what == "projected"
        # the collapsible tree: Net > blocks (a container) > 0, 1; Net > head; each node with time and % roof
        assert h.count("<details") >= 2 and "<summary>" in h
        assert re.search(r">\s*blocks\s*<i[^>]*>\(container\)", h)
        assert "title=\"Net.blocks.1\"" in h and "title=\"Net.head\"" in h
        # bars by phase and by module
        assert "by phase" in text and "by module" in text and 'class="rl-bar"' in h
        # the inline roofline chart with a tooltip per point
        assert "<svg" in h and "<title>aten.mm.default (3 calls)" in h
    assert "wall time" in _text(views["measured"]._repr_html_())
    proj = views["projected"]._repr_html_()
    assert "projected onto H100 SXM" in proj and "projected time" in _text(proj)
    assert "projected onto" not in views["measured"]._repr_html_()
    assert "projected onto" not in views["loaded"]._repr_html_()
    busy = _report()
    busy.meta["contention"] = ["other processes kept 90% of the CPU time busy"]
    assert "measured under contention: other processes kept 90% of the CPU time busy" in _text(busy._repr_html_())


def test_notebook_html_without_ceilings_shows_counts():
    rec = _records(ROWS)
    r = Report(rec, OPS, SETS, wall_time=None, meta={"timing": None, "devices": ["meta"]}, ceilings="measured")
    h = r._repr_html_()
    text = _text(h)
    assert "no ceilings" in text and "r.project" in text  # why there are no times, and what to do
    assert "top 3 ops by FLOPs" in text and "3.00 MFLOP" in text  # mm: 512 + 2e6 + 1e6
    assert "<details" in h


# ---- small defects of the text views ------------------------------------------------------------------------------

def test_flop_counts_have_a_space_before_the_unit():
    r = _report()
    s = str(r)
    assert "forward 544 FLOP" in s and "backward 3.00 MFLOP" in s
    assert "544FLOP" not in s
    assert repr(r) == "<roofline.Report 5 calls, 3.00 MFLOP, 91.58 KB>"  # 1200 + 384 + 60000 + 30000 bytes


def test_a_projected_op_is_never_above_its_roof():
    # a long op, then many tiny ones: their durations rebuilt from a plain cumulative sum come out short of their
    # roofline time by an ulp of the running total, far beyond the classification's 1e-9 tolerance
    rows = [(0, 2, 0, 10**12, 0, 10**6, 10**6, 1.0)] + [(1, 2, 0, 0, 0, 4, 4, 1e-9)] * 2000
    r = _report(rows)
    ceil = _ceil(dram=3.35e12)
    t = (8 / 3.35e12) * np.ones(2000)  # each tiny op: 8 bytes at DRAM bandwidth, no FLOPs
    ends = np.cumsum(np.concatenate(([10**12 / 100e9], t)))
    plain = np.diff(ends)  # what a plain cumulative sum gives back as durations
    assert (plain < t * (1 - 1e-9)).any()  # the defect is reachable with these figures
    p = r.project(ceil)
    cls = p.classification()
    assert not (cls["flags"] & (_core.FLAG_ABOVE_PEAK | _core.FLAG_ABOVE_BW)).any()
    assert np.nanmax(cls["efficiency"]) <= 1.0
    assert p.records["t_start"][1:].tolist() == p.records["t_end"][:-1].tolist()  # still back to back
    assert math.isclose(p.wall_time, 10.0 + 2000 * 8 / 3.35e12, rel_tol=1e-12)
    assert "!" not in p.table()


def test_the_flag_has_a_legend_in_the_text_table():
    rows = [(0, 2, 0, 10**9, 0, 100, 100, 1e-3)]  # 1 TFLOP/s achieved against a 100 GFLOP/s peak
    r = _report(rows)
    out = r.table()
    assert "compute!" in out
    assert out.splitlines()[-1].startswith("! = achieved above its ceiling")


def test_module_table_is_a_tree_with_containers_and_no_repeated_root():
    r = _report()
    lines = r.table(by="module", top=None).splitlines()
    names = [ln.split()[0] for ln in lines[1:-1]]
    # Net first; its children most time first: head (100 us) before blocks (53.1 us); blocks.1 (50.1 us) before 0
    assert names == ["Net", "Net.head", "Net.blocks", "Net.blocks.1", "Net.blocks.0"]
    assert lines[1].startswith("Net ") and lines[2].startswith("  Net.head") and lines[4].startswith("    Net.blocks.1")
    assert "Global" not in "\n".join(lines) and "(whole run)" not in "\n".join(lines)
    # depth counts every level of the model: the ModuleList is level 2, so depth=2 shows it, not only the head
    two = [ln.split()[0] for ln in r.table(by="module", depth=2).splitlines()[1:-1]]
    assert two == ["Net", "Net.head", "Net.blocks"]
    blocks = next(ln for ln in lines if ln.split()[0] == "Net.blocks")
    assert blocks.split()[1] == "4"  # its two blocks' calls: 2 + 2
    # ops outside every module: the whole run becomes the first row, once
    rows = ROWS + [(1, 0, 0, 0, 8, 32, 32, 1e-6)]
    lines = _report(rows).table(by="module", top=None).splitlines()
    assert lines[1].startswith("(whole run)") and lines[1].split()[2] == "6"
    assert sum(ln.startswith("(whole run)") for ln in lines) == 1


def test_op_shape_table_tells_two_products_apart():
    rows = [(0, 2, 0, 2 * 8 * 64 * 64, 0, 4 * (8 * 64 + 64 * 64), 4 * 8 * 64, 1e-5),   # mm 8x64 @ 64x64
            (0, 4, 0, 2 * 8 * 64 * 10, 0, 4 * (8 * 64 + 64 * 10), 4 * 8 * 10, 2e-6),   # mm 8x64 @ 64x10
            (0, 3, 0, 2 * 8 * 64 * 64, 0, 4 * (8 * 64 + 64 * 64), 4 * 8 * 64, 1e-5),   # the first shape again
            (2, 3, 0, 0, 0, 0, 0, 1e-7)]                                               # a view, no tensor list
    rec = _records(rows)
    rec["sig"] = [1, 2, 1, 0]
    sigs = ["", "f32[8,64], f32[64,64]", "f32[8,64], f32[64,10]"]
    r = Report(rec, OPS, SETS, wall_time=1e-3, meta={"timing": "op", "devices": ["cpu"]}, ceilings=_ceil(),
               signatures=sigs)
    a = r.analysis("op_shape")
    assert list(a)[:2] == ["aten.mm.default [f32[8,64], f32[64,64]]", "aten.mm.default [f32[8,64], f32[64,10]]"]
    assert a["aten.mm.default [f32[8,64], f32[64,64]]"]["calls"] == 2
    assert a["aten.mm.default [f32[8,64], f32[64,64]]"]["flops"] == 2 * 2 * 8 * 64 * 64
    assert "aten.view.default" in a  # no tensor signature: the op name alone
    out = r.table("op_shape").splitlines()
    assert out[1].startswith("aten.mm.default [f32[8,64], f32[64,64]]") and out[1].split()[3] == "2"
    back = roofline.load(r.to_json())
    assert back.analysis("op_shape") == a
    tip = re.findall(r"<title>(aten\.mm\.default \(3 calls\).*?)</title>", r.roofline_chart().svg, flags=re.S)
    assert "shapes: f32[8,64], f32[64,64] | f32[8,64], f32[64,10]" in tip[0]
    old = Report(_records(rows), OPS, SETS, wall_time=1e-3, meta={}, ceilings=_ceil())
    with pytest.raises(ValueError, match="needs shape signatures"):
        old.table("op_shape")


# ---- charts -----------------------------------------------------------------------------------------------------

def _crowded():
    """Twelve ops at nearly the same place on the roofline, each with its own name."""
    ops = [OpInfo(f"aten.op{i}.default", f"aten.op{i}", "mm") for i in range(12)]
    rows = [(i, 2, 0, 1000 + 10 * i, 0, 100, 100, 1e-6 * (1 + 0.01 * i)) for i in range(12)]
    rec = _records(rows)
    return Report(rec, ops, SETS, wall_time=1e-3, meta={"timing": "op", "devices": ["cpu"]}, ceilings=_ceil())


def test_chart_labels_do_not_overlap_and_peaks_have_units(tmp_path):
    pytest.importorskip("matplotlib")
    fig = _crowded().plot(tmp_path / "c.png", top=12)
    ax = fig.axes[0]
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    texts = [t for t in ax.texts if (t.get_gid() or "").startswith("label:")]
    assert len(texts) >= 2
    boxes = [t.get_window_extent(renderer) for t in texts]
    for i in range(len(boxes)):
        for j in range(i + 1, len(boxes)):
            assert not boxes[i].overlaps(boxes[j]), (texts[i].get_text(), texts[j].get_text())
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "peak matrix/float32: 100.00 GFLOP/s" in labels and "DRAM 20.00 GB/s" in labels
    assert not any("e+" in s for s in labels)
    proj = _report().project("H100 SXM").plot(tmp_path / "p.png")
    plabels = [t.get_text() for t in proj.axes[0].get_legend().get_texts()]
    assert any(s.endswith("TFLOP/s") for s in plabels) and not any("e+" in s for s in plabels)


def test_module_chart_shows_one_level_of_the_tree(tmp_path):
    pytest.importorskip("matplotlib")
    r = _report()

    def points(**kw):
        ax = r.plot(tmp_path / "m.png", by="module", **kw).axes[0]
        (pts,) = [c for c in ax.collections if c.get_gid() == "ops"]
        return len(pts.get_offsets()), ax.get_title()

    # depth 2: blocks (container) and head; depth 3: blocks.0 and blocks.1 with FLOPs, and head (a leaf above)
    assert points(depth=2) == (2, "roofline on handmade (best): 2 modules at depth 2")
    assert points(depth=3)[0] == 3
    assert points() == points(depth=2)  # the default: the root's children
    with pytest.raises(ValueError, match="depth must be an int >= 1"):
        r.plot(tmp_path / "m.png", by="module", depth=0)
    with pytest.raises(ValueError, match="depth applies to by='module' only"):
        r.plot(tmp_path / "m.png", depth=2)


def test_interactive_chart_has_a_tooltip_per_point(tmp_path):
    r = _report()
    chart = r.roofline_chart()
    titles = re.findall(r'<circle[^>]*class="rl-point"[^>]*><title>(.*?)</title>', chart.svg, flags=re.S)
    assert len(titles) == 2  # mm and add have FLOPs and bytes; the view has neither
    mm = next(t for t in titles if t.startswith("aten.mm.default"))
    assert "module: Net.head, Net.blocks.1, Net.blocks.0" in mm  # most time first
    # 3 MFLOP in 152 us measured; 30.1 us on the roof (3,000,512 FLOP at 100 GFLOP/s): 19.8%
    assert "time 152.0 us, achieved 19.74 GFLOP/s, 19.8% of roof" in mm
    assert "dtype: float32" in mm and "FLOPs 3.00 MFLOP" in mm and "bytes 91.20 KB" in mm
    assert "of roof" in mm and "-bound" in mm
    assert chart._repr_html_().startswith("<div><svg")
    page = chart.save(tmp_path / "roof.html")
    assert open(page).read().startswith("<!DOCTYPE html>")
    mods = r.roofline_chart(by="module", depth=3).svg
    assert mods.count('class="rl-point"') == 3


def test_plotly_chart_has_the_same_hover_text():
    pytest.importorskip("plotly")
    r = _report()
    fig = r.roofline_chart(backend="plotly")
    markers = [t for t in fig.data if t.mode == "markers"]
    hover = [h for t in markers for h in t.hovertext]
    assert len(hover) == 2 and any(h.startswith("aten.mm.default (3 calls)<br>module: Net.head") for h in hover)
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert "peak matrix/float32: 100.00 GFLOP/s" in [t.name for t in fig.data]
    with pytest.raises(ValueError, match="backend must be 'svg' or 'plotly'"):
        r.roofline_chart(backend="bokeh")


# ---- a notebook draws a chart once -------------------------------------------------------------------------------

def test_plot_as_a_cells_last_line_draws_once(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    for m in ("ipykernel", "matplotlib"):
        pytest.importorskip(m)
    spec = tmp_path / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    spec.joinpath("kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (tests)", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(os.path.abspath(roofline.__file__)))  # the roofline the tests import
    setup = (f"import sys; sys.path[:0] = [{here!r}, {root!r}]\n"
             "import test_html as t\n"
             "r = t._report()\n")
    cells = [setup, "r.plot()", "r.plot();", "fig = r.plot()\nfig.axes[0].set_title('mine')\nfig", "r"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(nb, kernel_name="python3", timeout=120,
                            resources={"metadata": {"path": str(tmp_path)}}).execute()

    def images(cell):
        return sum("image/png" in o.get("data", {}) for o in cell.outputs)

    assert [images(c) for c in nb.cells[1:4]] == [1, 1, 1]
    html = [o["data"]["text/html"] for o in nb.cells[4].outputs if "text/html" in o.get("data", {})]
    assert len(html) == 1 and "rl-report" in html[0]


def test_notebook_html_has_fusion_and_hints_with_units():
    """The hand-built MLP output chain (tests/_graph.py): its one fusion opportunity, 5 intermediates of T x D fp32
    each written and read back, at 1e11 B/s; the dropout-mask hint with its mask bytes."""
    import html

    from _graph import ACT, MASK, chain

    from roofline.render._render import fmt

    r = chain().report()
    text = html.unescape(" ".join(_text(r._repr_html_()).split()))
    saved = 5 * 2 * ACT
    assert "what to change" in text
    chain_text = "mm → add → gelu → native_dropout → add → native_layer_norm"
    assert (f"fuse 1 × {chain_text} (forward): saves {fmt(saved, 'B')}, {saved / 1e11 * 1e6:.2f} us at the roof"
            in text)
    assert f"[dropout_mask] 1 dropout calls materialise their masks ({fmt(MASK, 'B')} written" in text
    # no dataflow: no fusion line, the hints that need none remain
    plain = " ".join(_text(chain().report(with_accesses=False)._repr_html_()).split())
    assert "fuse " not in plain and "[dropout_mask]" not in plain and "[small_gemm]" in plain


# ---- the page: Report.to_html ----------------------------------------------------------------------------------

def test_to_html_writes_a_full_page_around_the_notebook_view(tmp_path):
    r = _report()
    path = tmp_path / "report.html"
    text = r.to_html(path, title="step <5>")
    assert path.read_text(encoding="utf-8") == text
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
    assert "<title>step &lt;5&gt;</title>" in text and '<meta charset="utf-8">' in text
    assert r._repr_html_() in text  # one renderer: the page holds the notebook view as it is
    assert "<script" not in text and "http" not in _text(text).replace("https://", "")  # nothing external
    assert "<title>roofline report</title>" in r.to_html()
    assert "<title>roofline report (projected onto H100 SXM)</title>" in r.project("H100 SXM").to_html()
    with pytest.raises(TypeError, match="Report.to_html"):
        r.to_html(3)
    with pytest.raises(TypeError, match="title"):
        r.to_html(title=5)
    with pytest.raises(IsADirectoryError):
        r.to_html(tmp_path)


def test_a_report_without_op_times_says_so_and_how_to_get_them():
    untimed = _report(rows=[row[:-1] + (None,) for row in ROWS], wall=1e-3)
    untimed.meta["timing"] = "model"
    assert not untimed.timed
    page = untimed.to_html().replace("&quot;", '"')
    assert 'op times not measured: timing="op" measures them' in _text(page)
    # the facts say what is missing and every way to measure it
    facts = re.search(r'<td class="k">op times</td><td>(.*?)</td>', page).group(1)
    assert facts.startswith('not measured (timing="model"')
    assert all(w in facts for w in ('timing="op"', "roofline.profile", "roofline.measure", "callbacks",
                                    "--timing op"))
    # a timed report and a projection (its times are estimates by design) do not carry the note
    for other in (_report(), untimed.project("H100 SXM")):
        assert "op times not measured" not in _text(other.to_html())


def test_load_gives_back_the_class_that_saved_the_report():
    torch = pytest.importorskip("torch")
    m = torch.nn.Linear(8, 4)
    x = torch.randn(2, 8)
    r = roofline.steady(lambda: m(x), m, warmup=0, repeat=2, timing=None, ceilings=_ceil())
    assert type(r) is roofline.SteadyReport
    back = roofline.load(r.to_json())
    assert type(back) is roofline.SteadyReport
    assert back.meta["steady"] == r.meta["steady"] and "report_class" not in back.meta
    assert back.steady_line().startswith("steady state: 0 warm-up steps uncounted, median of 2 measured steps")
    # a plain report stays plain; an unknown or non-string class name loads as a Report
    plain = _report()
    assert type(roofline.load(plain.to_json())) is Report
    for name in ("NoSuchReport", 7, "Comparison"):
        doc = json.loads(plain.to_json())
        doc["meta"]["report_class"] = name
        assert type(roofline.load(json.dumps(doc))) is Report
