"""The text and HTML views of a report, checked character for character on a small timed report whose every
figure is worked out by hand below, and the branches of each view (projected, incomplete, under contention, no
ceilings, no wall time, long names, parameters, tokens, traces, yardsticks).

The report (ceilings: matrix 100 FLOP/s, vector 10 FLOP/s, DRAM 5 B/s; wall time 20 s):

  record  op                   module   phase     FLOPs        bytes         time
  0       aten.mm.default      Net.fc   forward   400 matrix   30 read       0 .. 8 s
  1       aten.add.Tensor      Net      forward   20 vector    20 read       8 .. 10 s
  2       aten.copy_.default   Global   backward  0            10 + 10       10 .. 14 s

  mm:   intensity 400/30 = 13.33; roof max(400/100, 30/5) = 6 s (memory); 400/8 = 50 FLOP/s; % roof 6/8 = 75%;
        MFU (400/100)/8 = 50%; MBU 30/(8*5) = 75%
  copy: roof 20/5 = 4 s (bandwidth: no FLOPs); 20/4 = 5 B/s; % roof 100%; MBU 20/(4*5) = 100%
  add:  intensity 1; roof max(20/10, 20/5) = 4 s (memory); 10 FLOP/s; % roof 4/2 = 200% (above its ceiling: "!");
        MFU (20/10)/2 = 100%; MBU 20/(2*5) = 200%
  whole run: 420 FLOPs, 70 B, intensity 6; roof 14 s; measured 14 s; 420/14 = 30 FLOP/s; MFU (4+2)/14 = 42.9%
  Net: 420 FLOPs, 50 B, 8.40; roof 10 s, time 10 s, 42 FLOP/s, MFU 6/10 = 60%, MBU 50/(10*5) = 100%
  over the wall time: 420/20 = 21 FLOP/s, 70/20 = 3.5 B/s (printed "4 B/s"), MFU 6/20 = 30%, MBU 70/(20*5) = 70%
"""

import math
import re

import numpy as np
import pytest

import roofline
from roofline._datamodel._records import DTYPE_CODES, RECORD_DTYPE
from roofline.report import OpInfo, Report

F32 = DTYPE_CODES["float32"]
LEGEND_FLAGGED = ("! = achieved above its ceiling (ceiling too low or op too short to time); % roof = roofline time / "
                  "measured time; bound: compute, memory, bandwidth (no FLOPs), mixed (neither holds 80%)")
LEGEND = ("% roof = roofline time / measured time; bound: compute, memory, bandwidth (no FLOPs), mixed (neither "
          "holds 80%)")

OP_TABLE = """\
op                  calls     FLOPs     bytes  FLOP/B  roof ms  time ms     achieved  % roof    MFU    MBU      bound
aten.mm.default         1       400      30 B   13.33 6000.000 8000.000    50 FLOP/s   75.0%  50.0%  75.0%     memory
aten.copy_.default      1         0      20 B    0.00 4000.000 4000.000        5 B/s  100.0%      - 100.0%  bandwidth
aten.add.Tensor         1        20      20 B    1.00 4000.000 2000.000    10 FLOP/s  200.0% 100.0% 200.0%    memory!
""" + LEGEND_FLAGGED

MODULE_TABLE = """\
module       calls     FLOPs     bytes  FLOP/B  roof ms  time ms     achieved  % roof    MFU    MBU      bound
(whole run)      3       420      70 B    6.00 14000.000 14000.000    30 FLOP/s  100.0%  42.9% 100.0%    memory!
Net              2       420      50 B    8.40 10000.000 10000.000    42 FLOP/s  100.0%  60.0% 100.0%    memory!
  Net.fc         1       400      30 B   13.33 6000.000 8000.000    50 FLOP/s   75.0%  50.0%  75.0%     memory
""" + LEGEND_FLAGGED

SUMMARY_HEAD = """\
roofline report: 3 op calls, 20.00 s wall
  FLOPs   420 (matrix 400, vector 20; special functions 0)
  bytes   70 B compulsory (read 60 B, written 10 B; a lower bound: no reuse across ops)
  intensity 6.00 FLOP/byte
  phases  forward 420 FLOP, backward 0 FLOP
  ceilings (best) test: DRAM 5 B/s
  achieved 21 FLOP/s, 4 B/s; MFU 30.0%, MBU 70.0%
  roofline time 14.00 s; compute-bound share 0.0%
"""


def _ceil(**info):
    return roofline.Ceilings(device="cpu", name="test", fingerprint="test",
                             peaks={("matrix", "float32"): roofline.Ceiling(100.0),
                                    ("vector", "float32"): roofline.Ceiling(10.0)},
                             bandwidths={"DRAM": roofline.Ceiling(5.0)}, info=dict(info))


def _ops():
    return [OpInfo("aten.mm.default", "aten.mm", "mm"), OpInfo("aten.add.Tensor", "aten.add", "ewise"),
            OpInfo("aten.copy_.default", "aten.copy_", "copy")]


def timed(meta=None, overhead=None, wall=20.0, ceilings=True, names=None):
    rec = np.zeros(3, dtype=RECORD_DTYPE)
    rec["op"] = [0, 1, 2]
    rec["matrix_flops"] = [400, 0, 0]
    rec["vector_flops"] = [0, 20, 0]
    rec["bytes_read"] = [30, 20, 10]
    rec["bytes_written"] = [0, 0, 10]
    rec["module"] = [2, 1, 0]
    rec["phase"] = [0, 0, 1]
    rec["t_start"] = [0.0, 8.0, 10.0]
    rec["t_end"] = [8.0, 10.0, 14.0]
    rec["dtype"] = F32
    ops = _ops() if names is None else [OpInfo(n, n, "ewise") for n in names]
    return Report(rec, ops, [("Global",), ("Global", "Net"), ("Global", "Net", "Net.fc")], wall_time=wall,
                  meta=meta, overhead=overhead, ceilings=_ceil() if ceilings else None)


def untimed(**kw):
    r = timed(**kw)
    r.records["t_start"] = np.nan
    r.records["t_end"] = np.nan
    return r


# ---- text ------------------------------------------------------------------------------------------------------------
def test_op_and_module_tables():
    r = timed()
    assert r.table() == OP_TABLE
    assert r.table(by="module") == MODULE_TABLE
    # depth 1: the whole run and Net
    assert r.table(by="module", depth=1) == "\n".join(MODULE_TABLE.splitlines()[:3] + [LEGEND_FLAGGED])
    # top 1: the first row only, the legend without the "!" part (no flagged row shown)
    assert r.table(top=1) == "\n".join(OP_TABLE.splitlines()[:2] + [LEGEND]).replace(
        "op                  calls", "op               calls").replace("aten.mm.default         1",
                                                                         "aten.mm.default      1")


def test_module_table_without_ops_outside_every_module_has_no_whole_run_row():
    r = timed()
    r.records["module"] = [2, 1, 1]
    lines = r.table(by="module").splitlines()
    assert [ln.split()[0] for ln in lines[1:-1]] == ["Net", "Net.fc"]
    # forward only: the copy ran in backward
    assert r.table(by="module", phase="forward").splitlines()[1].split()[:3] == ["Net", "2", "420"]


def test_an_untimed_table_has_no_time_columns_and_a_legend_only_when_flagged():
    r = untimed()
    t = r.table()
    assert t.splitlines()[0] == ("op                  calls     FLOPs     bytes  FLOP/B  roof ms      bound")
    # untimed: nothing above its ceiling, no legend
    assert t.splitlines()[1:] == ["aten.mm.default         1       400      30 B   13.33 6000.000     memory",
                                  "aten.add.Tensor         1        20      20 B    1.00 4000.000     memory",
                                  "aten.copy_.default      1         0      20 B    0.00 4000.000  bandwidth"]


def test_long_names_are_cut_from_the_left_to_60_characters():
    long = "aten." + "x" * 70 + ".default"   # 83 characters
    r = timed(names=[long, "aten.b", "aten.c"])
    first = r.table().splitlines()[1]
    assert first.startswith("..." + long[-57:] + " ")
    assert r.table().splitlines()[0].startswith("op" + " " * 58 + "  calls")
    # a name of exactly 60 characters is kept whole
    sixty = "a" * 60
    r = timed(names=[sixty, "aten.b", "aten.c"])
    assert r.table().splitlines()[1].startswith(sixty + " ")


def test_the_empty_table():
    r = Report(np.zeros(0, dtype=RECORD_DTYPE), [], [("Global",)], ceilings=_ceil())
    assert r.table() == "(no ops)"
    assert r.table(by="module") == "(no ops)"
    assert str(r) == ("roofline report: 0 op calls\n  FLOPs   0 (matrix 0, vector 0; special functions 0)\n"
                      "  bytes   0 B compulsory (read 0 B, written 0 B; a lower bound: no reuse across ops)\n"
                      "  intensity 0.00 FLOP/byte")
    assert repr(r) == "<roofline.Report 0 calls, 0 FLOP, 0 B>"


def test_summary_of_a_timed_report():
    r = timed()
    text = r.summary(top=None)
    assert text.startswith(SUMMARY_HEAD + "\n" + OP_TABLE + "\n\nhints (most time saved first):\n")
    assert repr(r) == "<roofline.Report 3 calls, 420 FLOP, 70 B>"


def test_summary_flags_incompleteness_contention_instrumentation_and_unlinked_calls():
    r = timed(meta={"contention": ["steal 20%"], "incomplete": ["2 graphs"],
                    "attribution": {"unlinked_rows": [0, 1, 2, 1]}},
              overhead={"counting_per_op_s": 1e-6, "timing_per_op_s": 2e-6})
    lines = r.summary(top=1).split("\n\n")[0].splitlines()
    low = " [INCOMPLETE: a lower bound]"
    assert lines == [
        "roofline report: 3 op calls, 20.00 s wall -- INCOMPLETE",
        "  INCOMPLETE: 2 graphs",
        "  measured under contention: steal 20%: timings are low",
        "  FLOPs   420 (matrix 400, vector 20; special functions 0)" + low,
        "  bytes   70 B compulsory (read 60 B, written 10 B; a lower bound: no reuse across ops)" + low,
        "  intensity 6.00 FLOP/byte",
        "  phases  forward 420 FLOP, backward 0 FLOP",
        "  ceilings (best) test: DRAM 5 B/s",
        "  achieved 21 FLOP/s, 4 B/s; MFU 30.0%, MBU 70.0%" + low,
        "  roofline time 14.00 s; compute-bound share 0.0%",
        # (1 + 2) us per op x 3 ops = 9 us
        "  instrumentation: ~1.0 us/op counting + 2.00 us/op timing (~9.00 us of the wall time as calibrated on one small op; a CPU step pays more)",
        # rows 0, 1, 2, 1: 400 + 20 + 0 + 20 = 440 FLOPs; add twice, then copy and mm once each (by name)
        "  backward calls not linked to the forward module that caused them: 4 (440 FLOP; aten.add.Tensor x2, "
        "aten.copy_.default x1, aten.mm.default x1): credited as torch's ModuleTracker credits them"]
    assert repr(r) == "<roofline.Report 3 calls, 420 FLOP, 70 B, INCOMPLETE>"
    # counting only: no timing part; 1 us x 3 = 3 us
    r = timed(overhead={"counting_per_op_s": 1e-6})
    assert "  instrumentation: ~1.0 us/op counting (~3.00 us of the wall time as calibrated on one small op; a CPU step pays more)" in r.summary().splitlines()


def test_unlinked_calls_list_four_ops_at_most_and_a_note_otherwise():
    names = ["aten.a", "aten.b", "aten.c"]
    r = timed(names=names, meta={"attribution": {"unlinked_rows": [0, 1, 2]}})
    assert "(420 FLOP; aten.a x1, aten.b x1, aten.c x1)" in r.summary()
    r = timed(meta={"attribution": {"note": "hooks missing"}})
    assert "  module attribution: hooks missing" in r.summary().splitlines()


def test_a_projected_summary():
    p = timed(meta={"contention": ["busy"]}).project(_ceil(), name="X")
    lines = p.summary(top=1).split("\n\n")[0].splitlines()
    # projected: mm 6 s, add 4 s, copy 4 s back to back = 14 s; 420 / 14 = 30 FLOP/s, 70 / 14 = 5 B/s
    assert lines[0] == ("roofline report: 3 op calls, projected onto X: 14.00 s of roofline time (ops back to back, "
                        "not measured)")
    assert "  achieved 30 FLOP/s, 5 B/s; MFU 42.9%, MBU 100.0%" in lines
    assert not any("contention" in ln for ln in lines)
    assert any(ln.startswith("  assumed: ") for ln in lines)
    # a projection's rows are never flagged: the add at 4 s over 4 s is at 100%
    assert "!" not in p.table()


def test_summary_without_wall_time_or_ceilings():
    r = timed(wall=None)
    lines = r.summary(top=1).splitlines()
    assert lines[0] == "roofline report: 3 op calls"
    assert not any(ln.startswith("  achieved") for ln in lines)
    r = timed(ceilings=False)
    text = r.summary(top=2)
    # the top ops by FLOPs, counts only
    assert text.split("\n\n")[1] == (
        "op                calls       FLOPs       bytes    FLOP/B\n"
        "aten.mm.default       1         400        30 B     13.33\n"
        "aten.add.Tensor       1          20        20 B      1.00")
    assert "ceilings" not in text


def test_unknown_ops_and_errors_are_listed():
    r = timed()
    r._ops[2] = OpInfo("aten.weird.default", "aten.weird", "unknown")
    assert "  ops without a formula (FLOPs not counted): {'aten.weird.default': 1}" in r.summary().splitlines()
    assert "errors" not in r.summary()


def test_recomputation_shows_hfu_beside_mfu():
    r = timed()
    r.records["phase"] = [0, 3, 1]  # the add recomputed
    line = [ln for ln in r.summary().splitlines() if ln.startswith("  achieved")][0]
    # 20 of 420 FLOPs recomputed: 4.8%; MFU counts the add once: (4 + 2) / 20 = 30% ... HFU all executed
    assert "of them recomputed" in line and "4.8% of them recomputed" in line
    assert line.startswith("  achieved 21 FLOP/s, 4 B/s; MFU ")


def test_the_tokens_line():
    sig = ["", "f32[2,2,4]"]
    layout = {"batch": 2, "seq_len": 2, "lengths": [1, 2], "packed": False}
    r = Report(timed().records, _ops(), timed().module_sets, wall_time=20.0, ceilings=_ceil(), signatures=sig,
               meta={"tokens": layout})
    r.records["sig"] = [1, 1, 1]
    # 3 real of 4 positions: a quarter of the 420 FLOPs ran on padding; 3 tokens / 20 s = 0.15 tokens/s
    line = [ln for ln in r.summary().splitlines() if ln.startswith("  tokens")][0]
    assert line.startswith("  tokens  3 real of 4 positions; 25.0% of the FLOPs (105 FLOP) ran on padding; ")
    assert line.endswith(" real")
    # no signatures: the counts only
    r = timed(meta={"tokens": layout})
    assert "  tokens  3 real of 4 positions" in r.summary().splitlines()
    # a layout that matches no call
    r = Report(timed().records, _ops(), timed().module_sets, ceilings=_ceil(), signatures=["", "f32[7]"],
               meta={"tokens": layout})
    r.records["sig"] = [1, 1, 1]
    with pytest.warns(RuntimeWarning, match="matches no call of the step"):
        text = r.summary()
    assert ("  tokens  a layout of 2 x 2 positions that matches no call of the step (no tensor has its token dims): "
            "no token figures") in text.splitlines()
    # no wall time: no rate
    r = Report(timed().records, _ops(), timed().module_sets, ceilings=_ceil(), signatures=sig,
               meta={"tokens": layout})
    r.records["sig"] = [1, 1, 1]
    line = [ln for ln in r.summary().splitlines() if ln.startswith("  tokens")][0]
    assert line.endswith("ran on padding")


def test_the_trace_line():
    t = {"source": "p.json", "step": 3, "kernel_time": 2.0, "attributed_time": 1.0, "collective_time": 0.5,
         "unattributed_time": 0.25}
    r = timed(meta={"trace": t})
    assert ("  trace   p.json, step 3: GPU kernel time 2.00 s, 50.0% in ops with FLOPs and bytes, 25.0% in "
            "collectives, 12.5% launched by no op") in r.summary().splitlines()
    r = timed(meta={"trace": {"kernel_time": 0.0}})
    assert ("  trace   a profiler trace, the whole trace: GPU kernel time 0 s, - in ops with FLOPs and bytes, - in "
            "collectives, - launched by no op") in [ln.replace("0.00 s", "0 s") for ln in r.summary().splitlines()]


@pytest.mark.parametrize("yard, line", [
    ({"kind": "idle", "measured_at": "2026-01-02"}, "the last idle measurement of this machine (2026-01-02)"),
    ({"kind": "idle", "contention": ["steal", 3]},
     "the last idle measurement of this machine (undated); this run's measurement was under contention (steal; 3)"),
    ({"kind": "theoretical", "formula": ["a", "b", "8 x 2 GHz"]},
     "the CPU's theoretical peak (8 x 2 GHz); `python -m roofline ceilings --save` on an idle machine saves a "
     "measured yardstick"),
    ({"kind": "file", "path": "/c.json"}, "the saved ceilings /c.json (measured undated)"),
])
def test_the_yardstick_line(yard, line):
    r = timed()
    r._roofs_spec, r._roofs = _ceil(yardstick=yard), None
    assert "  yardstick: " + line in r.summary().splitlines()
    facts = re.findall(r'<td class="k">yardstick</td><td>([^<]*)</td>', r.to_html())
    assert facts == [line.replace("'", "&#x27;")]


def test_no_yardstick_line_for_given_ceilings():
    r = timed()
    assert not any("yardstick" in ln for ln in r.summary().splitlines())


def test_the_parameters_line():
    p = {"total": 3000, "trainable": 2000, "frozen": 1000, "bytes": 12000, "by_dtype": {"float32": 2000,
                                                                                      "bfloat16": 1000},
         "tied": [["a.w", "b.w"], ["c.w", "d.w"], ["e", "f"]], "uninitialized": ["x"],
         "modules": {"Net": {"total": 3000, "trainable": 2000, "frozen": 1000, "bytes": 12000}}}
    r = timed(meta={"parameters": p})
    line = [ln for ln in r.summary().splitlines() if ln.startswith("  parameters")]
    assert line == ["  parameters 3.00 K (3,000): trainable 2.00 K, frozen 1.00 K; 12.00 KB (float32 2.00 K, "
                    "bfloat16 1.00 K); 3 shared "
                    "parameters counted once (a.w = b.w, c.w = d.w, ...); 1 lazy parameter(s) not initialised yet, "
                    "not counted: a lower bound"]
    p2 = dict(p, tied=[["a", "b"], ["c", "d"]], uninitialized=[])
    line = [ln for ln in timed(meta={"parameters": p2}).summary().splitlines() if ln.startswith("  parameters")]
    assert line[0].endswith("; 2 shared parameters counted once (a = b, c = d)")  # two: no "..."
    p1 = dict(p, by_dtype={"float32": 3000}, tied=[["a", "b"]], uninitialized=[])
    line = [ln for ln in timed(meta={"parameters": p1}).summary().splitlines() if ln.startswith("  parameters")]
    assert line == ["  parameters 3.00 K (3,000): trainable 2.00 K, frozen 1.00 K; 12.00 KB; 1 shared parameter counted once "
                    "(a = b)"]
    # the module table gets a params column
    t = r.table(by="module").splitlines()
    assert t[0].endswith("     bound    params")
    assert t[2].endswith(" 3.00 K") and t[1].endswith(" -")
    assert "unreadable" in [ln for ln in timed(meta={"parameters": 5}).summary().splitlines()
                            if ln.startswith("  parameters")][0]


# ---- comparison -----------------------------------------------------------------------------------------------------
def test_the_comparison_text():
    a = timed()
    b = timed(wall=10.0)
    b.records["matrix_flops"] = [800, 0, 0]
    text = str(a.compare(b))
    assert text.splitlines() == [
        "comparison by op: FLOPs 420 -> 820, bytes 70 B -> 70 B, wall 20000.0 -> 10000.0 ms",
        "name                FLOPs before      after  ratio  bytes before      after time before    after",
        # the largest change first: mm +400 FLOPs (ratio 800 / 400 = 2); copy has no FLOPs: ratio nan
        "aten.mm.default              400        800   2.00          30 B       30 B    8000.000 8000.000",
        "aten.copy_.default             0          0    nan          20 B       20 B    4000.000 4000.000",
        "aten.add.Tensor               20         20   1.00          20 B       20 B    2000.000 2000.000"]
    # no wall time on one side: no wall part
    assert str(timed(wall=None).compare(b)).splitlines()[0] == "comparison by op: FLOPs 420 -> 820, bytes 70 B -> 70 B"


def test_comparison_rows_sort_by_flops_and_bytes_changes_and_cut_long_names():
    a = timed(names=["aten.a", "aten.b", "n" * 55])
    b = timed(names=["aten.a", "aten.b", "n" * 55])
    b.records["bytes_read"] = [30, 20, 40]   # the third op: +30 B
    b.records["vector_flops"] = [0, 45, 0]   # aten.b: +25 FLOPs
    lines = str(a.compare(b)).splitlines()
    assert lines[1].startswith("name" + " " * 46 + "  FLOPs before")
    assert [ln[:50].strip() for ln in lines[2:]] == ["n" * 50, "aten.b", "aten.a"]
    # only 25 rows
    many = timed(names=["aten.a", "aten.b", "aten.c"])
    assert len(str(many.compare(many)).splitlines()) == 2 + 3


# ---- HTML --------------------------------------------------------------------------------------------------------------
def _facts(html):
    return dict(re.findall(r'<tr><td class="k">([^<]*)</td><td>([^<]*)</td></tr>', html))


def test_the_notebook_view():
    r = timed()
    h = r._repr_html_()
    assert h.startswith('<div class="rl-report"><style>')
    assert h.endswith("</div>")
    assert _facts(h) == {
        "op calls": "3", "wall time": "20.00 s (the measure block, device synchronised at entry and exit)",
        "FLOPs": "420 FLOP (matrix 400 FLOP, vector 20 FLOP); special functions 0",
        "bytes": "70 B compulsory (read 60 B, written 10 B): a lower bound, no reuse across ops",
        "intensity": "6.00 FLOP/byte", "phases": "forward 420 FLOP, backward 0 FLOP",
        "ceilings": "test (best figures): DRAM 5 B/s; peaks used 100 FLOP/s, 10 FLOP/s",
        "achieved": "21 FLOP/s, 4 B/s over the wall time; MFU 30.0%, MBU 70.0%",
        "roofline time": "14.00 s; compute-bound share 0.0%"}
    bars = re.findall(r'<table class="rl-bars">.*?</table>', h)
    # phases: forward 8 + 2 = 10 s (320 px, 10/14 = 71.4%), backward 4 s (320 x 4/10 = 128 px, 28.6%)
    assert bars[0] == ('<table class="rl-bars"><tr><th class="l">time by phase</th><th class="l"></th><th>time</th>'
                       '<th>share</th></tr><tr title="forward: 420 FLOP, 50 B"><td class="l">forward</td>'
                       '<td class="l"><span class="rl-bar" style="width:320px;background:#2e86c1"></span></td>'
                       '<td>10.00 s</td><td>71.4%</td></tr><tr title="backward: 0 FLOP, 20 B"><td class="l">backward'
                       '</td><td class="l"><span class="rl-bar" style="width:128px;background:#ca6f1e"></span></td>'
                       '<td>4.00 s</td><td>28.6%</td></tr></table>')
    # modules: the one root's children, Net.fc: 8 of the whole run's 14 s
    assert re.findall(r'<td class="l">([^<]*)</td><td class="l"><span class="rl-bar" style="width:(\d+)px[^<]*'
                      r'</span></td><td>([^<]*)</td><td>([^<]*)</td>', bars[1]) == [("Net.fc", "320", "8.00 s",
                                                                                       "57.1%")]
    assert "<b>top 3 ops by time</b>" in h
    rows = re.findall(r'<tr><td class="l">(aten[^<]*)</td>(.*?)</tr>', h)
    assert [n for n, _ in rows] == ["aten.mm.default", "aten.copy_.default", "aten.add.Tensor"]
    cells = re.findall(r"<td>(.*?)</td>", rows[0][1])
    assert cells[:10] == ["1", "400 FLOP", "30 B", "13.33", "6.00 s", "8.00 s", "50 FLOP/s", "75.0%", "50.0%",
                          "75.0%"]
    assert re.findall(r"<td>(.*?)</td>", rows[1][1])[6] == "5 B/s"
    assert 'title="1 call(s) achieved a rate above their ceiling">!</span>' in rows[2][1]
    assert "rl-flag" not in rows[0][1]
    # the tree: Net (depth 1, open) over Net.fc (depth 2); name column 300 - 14 x depth px
    assert re.findall(r"<details[^>]*>", h) == ["<details open>"]
    assert re.findall(r"grid-template-columns:(\d+)px", h) == ["286", "286", "272"]
    assert '<i title="a container' not in h
    assert "<h3>roofline report</h3>" in h


def test_the_tree_opens_two_levels_and_marks_containers():
    r = timed()
    r.module_sets = [("Global",), ("Global", "Net", "Net.blocks.0"), ("Global", "Net", "Net.blocks.0",
                                                                      "Net.blocks.0.fc")]
    h = r._repr_html_()
    # Net (depth 1) open, Net.blocks (depth 2, a container never called) closed, Net.blocks.0 (depth 3) closed
    assert re.findall(r"<details[^>]*>", h) == ["<details open>", "<details>", "<details>"]
    assert h.count('(container)</i>') == 1  # Net.blocks only ran through its children
    assert re.findall(r"grid-template-columns:(\d+)px", h) == ["286", "286", "272", "258", "244"]


def test_the_view_of_a_projection_an_incomplete_and_an_untimed_report():
    p = timed(meta={"contention": ["busy"]}).project(_ceil(), name="X<1>")
    h = p._repr_html_()
    assert ('<span class="rl-proj" title="times are roofline estimates, not measurements">projected onto X&lt;1&gt;'
            '</span>') in h
    f = _facts(h)
    assert f["projected"] == ("onto X&lt;1&gt;: 14.00 s if every op ran at its roofline time, back to back "
                              "(estimated, not measured)")
    assert f["achieved"].endswith("over the projected time; MFU 42.9%, MBU 100.0%")
    assert "contention" not in f and 'class="rl-flag"' not in h
    assert "<b>top 3 ops by projected time</b>" in h
    assert "<title>roofline report (projected onto X&lt;1&gt;)</title>" in p.to_html()
    i = timed(meta={"incomplete": ["2 graphs"], "contention": ["steal"]})._repr_html_()
    assert 'INCOMPLETE</span>' in i and _facts(i)["INCOMPLETE"] == "2 graphs: the totals are lower bounds"
    assert _facts(i)["contention"] == "measured under contention: steal: timings are low"
    u = untimed(wall=None)._repr_html_()
    assert "op times not measured" in u and "wall time" in _facts(u)
    assert _facts(u)["wall time"] == "not timed (timing=None)"
    assert _facts(u)["op times"].startswith("not measured (timing=&quot;model&quot;")
    assert "<b>top 3 ops by roofline time</b>" in u
    # untimed: bars of roofline time: phases forward 6 + 4 = 10 s, backward 4 s
    assert "<th class=\"l\">roofline time by phase</th>" in u
    assert "op times not measured" not in h


def test_the_view_without_ceilings_and_of_nothing():
    r = timed(ceilings=False)
    r.records["t_start"] = np.nan
    r.records["t_end"] = np.nan
    h = r._repr_html_()
    assert "<b>top 3 ops by FLOPs</b>" in h
    assert re.findall(r'<tr><td class="l">(aten[^<]*)</td><td>(\d+)</td><td>([^<]*)</td><td>([^<]*)</td>'
                      r'<td>([^<]*)</td></tr>', h) == [("aten.mm.default", "1", "400 FLOP", "30 B", "13.33"),
                                                       ("aten.add.Tensor", "1", "20 FLOP", "20 B", "1.00"),
                                                       ("aten.copy_.default", "1", "0 FLOP", "20 B", "0.00")]
    assert "rl-bars" not in h and "<svg" not in h
    assert "<b>top 1 ops by FLOPs</b>" in r.to_html(top=1)
    e = Report(np.zeros(0, dtype=RECORD_DTYPE), [], [("Global",)], ceilings=_ceil())._repr_html_()
    assert e.endswith("<p>(no ops)</p></div>")


def test_facts_list_overhead_errors_unknown_ops_and_the_recorder():
    r = timed(meta={"version": "9.9", "timing": "op", "devices": ["cpu", "cuda:0"],
                    "attribution": {"note": "n"}},
              overhead={"counting_per_op_s": 2e-6, "timing_per_op_s": 1e-6})
    r._ops[2] = OpInfo("aten.weird.default", "aten.weird", "unknown")
    f = _facts(r._repr_html_())
    # (2 + 1) us x 3 ops = 9 us
    assert f["instrumentation"] == "~2.0 us/op counting + 1.00 us/op timing (~9.00 us of the wall time as calibrated on one small op; a CPU step pays more)"
    assert f["recorded by"] == "roofline 9.9, timing=&#x27;op&#x27;, devices cpu, cuda:0"
    assert f["no formula"] == "aten.weird.default (1): FLOPs not counted"
    assert f["attribution"] == "module attribution: n"
    assert "errors" not in f
    g = _facts(timed(meta={"version": "1"}, overhead={"counting_per_op_s": 1e-6})._repr_html_())
    assert g["recorded by"] == "roofline 1"
    assert g["instrumentation"] == "~1.0 us/op counting (~3.00 us of the wall time as calibrated on one small op; a CPU step pays more)"


def test_html_only_shows_the_tree_when_there_are_modules():
    r = timed()
    r.records["module"] = 0
    r.module_sets = [("Global",)]
    h = r._repr_html_()
    # only "Global": bars of the phases, none of modules, no tree
    assert h.count('<table class="rl-bars">') == 1
    assert "module tree" not in h and "module tree" in timed()._repr_html_()


def test_the_page_wraps_the_view():
    r = timed()
    p = r.to_html(title="a <b>")
    assert p.startswith('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>a &lt;b&gt;</title>')
    assert p.endswith("\n</body></html>\n")


def test_an_ambiguous_token_dim_is_said_uncertain():
    # the copy's argument is a 1-D float tensor of 2 elements: a weight-shaped dim equal to the sequence length 2
    r = Report(timed().records, _ops(), timed().module_sets, wall_time=20.0, ceilings=_ceil(),
               signatures=["", "f32[2,2,4]", "f32[2]"],
               meta={"tokens": {"batch": 2, "seq_len": 2, "lengths": [1, 2], "packed": False}})
    r.records["sig"] = [1, 1, 2]
    line = [ln for ln in r.summary().splitlines() if ln.startswith("  tokens")][0]
    assert line.endswith(" real (uncertain: dims [2] are also weight dims)")


def test_the_op_shape_table():
    r = Report(timed().records, _ops(), timed().module_sets, wall_time=20.0, ceilings=_ceil(),
               signatures=["", "f32[2,2,4]", "f32[2]"])
    r.records["sig"] = [1, 2, 0]
    lines = r.table(by="op_shape").splitlines()
    assert [ln[:30].rstrip() for ln in lines[:4]] == ["op", "aten.mm.default [f32[2,2,4]]", "aten.copy_.default",
                                                      "aten.add.Tensor [f32[2]]"]
    # the name column is as wide as the longest name (28 characters)
    assert lines[1][29:] == OP_TABLE.splitlines()[1][19:]


def test_unlinked_calls_name_four_ops_at_most():
    # five ops, one unlinked call each: the first four by name
    names = ["aten.a", "aten.b", "aten.c", "aten.d", "aten.e"]
    rec = np.zeros(5, dtype=RECORD_DTYPE)
    rec["op"] = np.arange(5)
    rec["vector_flops"] = 1
    r = Report(rec, [OpInfo(n, n, "ewise") for n in names], [("Global",)],
               meta={"attribution": {"unlinked_rows": [4, 3, 2, 1, 0]}})
    assert ("  backward calls not linked to the forward module that caused them: 5 (5 FLOP; aten.a x1, aten.b x1, "
            "aten.c x1, aten.d x1): credited as torch's ModuleTracker credits them") in r.summary().splitlines()


def test_busy_ceilings_are_said_in_the_summary_but_not_in_a_projection():
    r = timed()
    r._roofs_spec, r._roofs = _ceil(busy=True), None
    assert ("  ceilings measured under contention: flagged busy: peaks and bandwidths are low, bounds and shares "
            "against them unreliable") in r.summary().splitlines()
    assert re.findall(r'<td class="k">ceilings</td><td>([^<]*)</td>', r._repr_html_()) == [
        "test (best figures): DRAM 5 B/s; peaks used 100 FLOP/s, 10 FLOP/s", "measured under contention: flagged busy"]
    p = r.project(_ceil(busy=True), name="X")
    assert not any("contention" in ln for ln in p.summary().splitlines())
    assert "contention" not in p._repr_html_()


def test_assumptions_are_printed_for_a_projection_only():
    p = timed().project(_ceil(), name="X")
    assert any(ln.startswith("  assumed: ") for ln in p.summary().splitlines())
    assert _facts(p._repr_html_())["assumed"].startswith("attention ")
    r = timed(meta={"assumed": p.meta["assumed"]})
    assert not any(ln.startswith("  assumed: ") for ln in r.summary().splitlines())
    assert "assumed" not in _facts(r._repr_html_())


def test_a_projection_has_no_yardstick_line_even_with_the_measured_runs_note():
    r = timed()
    r._roofs_spec, r._roofs = _ceil(yardstick={"kind": "idle", "measured_at": "d"}), None
    r.summary()
    assert r.meta["ceilings_yardstick"]["kind"] == "idle"
    p = r.project(_ceil(), name="X")
    assert p.meta["ceilings_yardstick"]["kind"] == "idle"  # carried over with the rest of meta
    assert not any("yardstick" in ln for ln in p.summary().splitlines())


def test_a_phase_that_took_no_time_has_no_bar():
    r = timed()
    r.records["t_end"][2] = r.records["t_start"][2]  # the backward copy: 0 s
    bars = re.findall(r'<table class="rl-bars">.*?</table>', r._repr_html_())
    assert re.findall(r'<td class="l">(\w+)</td><td class="l"><span', bars[0]) == ["forward"]


def test_bar_widths_are_proportional_and_one_pixel_at_least():
    rec = np.zeros(4, dtype=RECORD_DTYPE)
    rec["op"] = 0
    rec["vector_flops"] = 10
    rec["dtype"] = F32
    rec["phase"] = [0, 1, 2, 3]
    # forward 1 s; backward 300.45 / 320 s and optimizer 300.55 / 320 s (bars of 300.45 and 300.55 px, drawn 300 and
    # 301); recompute 1 ms (0.32 px, drawn 1 px)
    d = [1.0, 300.45 / 320, 300.55 / 320, 0.001]
    rec["t_start"] = [0.0, 1.0, 2.0, 3.0]
    rec["t_end"] = [0.0 + d[0], 1.0 + d[1], 2.0 + d[2], 3.0 + d[3]]
    r = Report(rec, [OpInfo("aten.add.Tensor", "aten.add", "ewise")], [("Global",)], wall_time=4.0,
               ceilings=_ceil())
    bars = re.findall(r'<table class="rl-bars">.*?</table>', r._repr_html_())
    assert re.findall(r'<td class="l">(\w+)</td><td class="l"><span class="rl-bar" style="width:(\d+)px', bars[0]) \
        == [("forward", "320"), ("backward", "300"), ("optimizer", "301"), ("recompute", "1")]


def test_bars_of_less_than_a_second_and_modules_without_times():
    r = timed()
    r.records["t_start"] *= 1e-3
    r.records["t_end"] *= 1e-3  # 14 ms in all
    bars = re.findall(r'<table class="rl-bars">.*?</table>', r._repr_html_())
    assert len(bars) == 2
    assert re.findall(r"<td>([^<]*)</td><td>([^<]*)</td></tr>", bars[0]) == [("10.0 ms", "71.4%"),
                                                                            ("4.0 ms", "28.6%")]
    # the mm (Net.fc's only call) untimed: Net.fc shows 0 s in the tree and has no bar
    r = timed()
    r.records["t_start"][0] = np.nan
    r.records["t_end"][0] = np.nan
    h = r._repr_html_()
    assert re.findall(r'<span class="l" title="([^"]*)">.*?</span><span>(\d+)</span><span>[^<]*</span><span>[^<]*'
                      r'</span><span>([^<]*)</span>', h) == [("Net", "2", "2.00 s"), ("Net.fc", "1", "0 s")]
    bars = re.findall(r'<table class="rl-bars">.*?</table>', h)
    assert len(bars) == 1


def test_the_ceilings_fact_names_the_four_highest_peaks_used():
    c = roofline.Ceilings(device="cpu", name="c", fingerprint="c",
                          peaks={("matrix", "float32"): roofline.Ceiling(100.0),
                                 ("vector", "float32"): roofline.Ceiling(10.0),
                                 ("matrix", "float16"): roofline.Ceiling(200.0),
                                 ("matrix", "bfloat16"): roofline.Ceiling(300.0),
                                 ("vector", "float64"): roofline.Ceiling(5.0)},
                          bandwidths={"DRAM": roofline.Ceiling(5.0)})
    rec = np.zeros(5, dtype=RECORD_DTYPE)
    rec["matrix_flops"] = [1, 0, 1, 1, 0]
    rec["vector_flops"] = [0, 1, 0, 0, 1]
    rec["dtype"] = [DTYPE_CODES[d] for d in ("float32", "float32", "float16", "bfloat16", "float64")]
    r = Report(rec, [OpInfo("aten.add.Tensor", "aten.add", "ewise")], [("Global",)], ceilings=c)
    # five peaks in use: 300, 200, 100, 10, 5 FLOP/s; the four highest are named
    assert _facts(r._repr_html_())["ceilings"] == ("c (best figures): DRAM 5 B/s; peaks used 300 FLOP/s, 200 FLOP/s, "
                                                   "100 FLOP/s, 10 FLOP/s")


def test_the_notebook_view_lists_fifteen_ops_and_draws_the_chart():
    n = 16
    rec = np.zeros(n, dtype=RECORD_DTYPE)
    rec["op"] = np.arange(n)
    rec["vector_flops"] = 10 * np.arange(1, n + 1)
    rec["bytes_read"] = 4
    rec["dtype"] = F32
    r = Report(rec, [OpInfo(f"aten.op{i:02d}.default", "x", "ewise") for i in range(n)], [("Global",)],
               ceilings=_ceil())
    h = r._repr_html_()
    assert "<b>top 15 ops by time</b>" in h  # zero times are measured times
    assert '<svg xmlns="http://www.w3.org/2000/svg"' in h


def test_the_module_bars_show_twelve_modules():
    # Net with 13 children, child i taking i + 1 seconds: bars for the 12 longest (m12 .. m1), m0 left out
    n = 13
    rec = np.zeros(n, dtype=RECORD_DTYPE)
    rec["vector_flops"] = 10
    rec["dtype"] = F32
    rec["module"] = np.arange(1, n + 1)
    d = np.arange(1, n + 1, dtype=float)
    rec["t_start"] = np.concatenate(([0.0], np.cumsum(d)[:-1]))
    rec["t_end"] = np.cumsum(d)
    sets = [("Global",)] + [("Global", "Net", f"Net.m{i}") for i in range(n)]
    r = Report(rec, [OpInfo("aten.add.Tensor", "aten.add", "ewise")], sets, wall_time=float(d.sum()),
               ceilings=_ceil())
    bars = re.findall(r'<table class="rl-bars">.*?</table>', r._repr_html_())
    assert re.findall(r'<td class="l">([\w.]+)</td><td class="l"><span', bars[1]) == [f"Net.m{i}"
                                                                                      for i in range(12, 0, -1)]


def test_comparison_rows_of_a_removed_op_and_of_empty_reports():
    a = timed()
    b = timed(names=["aten.x", "aten.add.Tensor", "aten.copy_.default"])
    lines = str(a.compare(b)).splitlines()
    # the mm is gone after: 400 -> 0, ratio 0 / 400
    mm = [ln for ln in lines if ln.startswith("aten.mm.default")][0]
    assert mm.split()[1:4] == ["400", "0", "0.00"]
    a = timed()
    a.records["vector_flops"][1] = 1  # the add: 1 FLOP before, gone after: ratio 0 / 1
    b = timed(names=["aten.mm.default", "aten.y", "aten.copy_.default"])
    add = [ln for ln in str(a.compare(b)).splitlines() if ln.startswith("aten.add.Tensor")][0]
    assert add.split()[1:4] == ["1", "0", "0.00"]
    e = Report(np.zeros(0, dtype=RECORD_DTYPE), [], [("Global",)])
    assert str(e.compare(e)).splitlines() == [
        "comparison by op: FLOPs 0 -> 0, bytes 0 B -> 0 B",
        "name        FLOPs before      after  ratio  bytes before      after time before    after"]


def test_a_comparison_prints_25_rows():
    names = [f"aten.op{i:02d}" for i in range(26)]
    rec = np.zeros(26, dtype=RECORD_DTYPE)
    rec["op"] = np.arange(26)
    rec["vector_flops"] = np.arange(1, 27)
    r = Report(rec, [OpInfo(n, n, "ewise") for n in names], [("Global",)])
    r2 = Report(rec.copy(), [OpInfo(n, n, "ewise") for n in names], [("Global",)])
    r2.records["vector_flops"] *= 2
    lines = str(r.compare(r2)).splitlines()
    # op i changes by i + 1 FLOPs: the largest 25 (op25 .. op01) are printed
    assert [ln.split()[0] for ln in lines[2:]] == [f"aten.op{i:02d}" for i in range(25, 0, -1)]
