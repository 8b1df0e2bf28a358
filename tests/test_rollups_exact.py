"""Exact values of every roll-up of a report (totals, by_op, by_module with depth, by_phase, analysis, totals(), a
group's MFU, MBU, efficiency and bound) on a hand-built report whose per-record figures are worked out below.

Ceilings: matrix fp32 100 FLOP/s, vector fp32 10 FLOP/s, matrix bf16 400 FLOP/s, DRAM 5 B/s.
Ridges: matrix fp32 100 / 5 = 20, vector fp32 10 / 5 = 2, matrix bf16 400 / 5 = 80 FLOP/byte.

 rec op     module          phase  dtype matrix vector special read written  time | FLOPs bytes I     bound  t_min
 r0  mm     Net.block.fc    fwd    fp32  4000   0      0       60   40       50   | 4000  100   40    comp   max(40, 20) = 40
 r1  add    Net.block       fwd    fp32  0      30     7       120  80       80   | 30    200   0.15  mem    max(3, 40) = 40
 r2  clone  Net.head        bwd    fp32  0      0      0       25   25       20   | 0     50    0     bw     50 / 5 = 10
 r3  mm     Net.head        bwd    bf16  16000  0      0       100  100      40   | 16000 200   80    comp   max(40, 40) = 40 (on the ridge)
 r4  add    Net             opt    fp32  0      50     0       20   5        2.5  | 50    25    2     comp   max(5, 5) = 5 (on the ridge)
 r5  foo    Global          fwd    fp32  0      0      0       7    3        4    | 0     10    0     bw     10 / 5 = 2
 r6  add    Net.block.fc    fwd    fp32  0      12     0       30   30       15   | 12    60    0.2   mem    max(1.2, 12) = 12

r4 runs at 50 / 2.5 = 20 FLOP/s (> 10) and 25 / 2.5 = 10 B/s (> 5): above both ceilings. r3 runs exactly on its peak
(16000 / 40 = 400 FLOP/s): not above it.
"""

import math

import numpy as np
import pytest

import roofline
from roofline import _core
from roofline._datamodel._records import DTYPE_CODES, RECORD_DTYPE
from roofline._analysis._rollup import OpInfo, exact_sum, group_bound, peak_time
from roofline.report import Report

NAN = float("nan")
OPS = [OpInfo("aten.mm.default", "aten.mm", "mm"), OpInfo("aten.add.Tensor", "aten.add", "ewise"),
       OpInfo("aten.clone.default", "aten.clone", "copy"), OpInfo("aten.foo.default", "aten.foo", "unknown")]
MODULES = [("Global",), ("Global", "Net"), ("Global", "Net", "Net.block"),
           ("Global", "Net", "Net.block", "Net.block.fc"), ("Global", "Net", "Net.head")]
# op, module set, phase, dtype, matrix, vector, special, read, written, time
ROWS = [
    (0, 3, 0, "float32", 4000, 0, 0, 60, 40, 50.0),
    (1, 2, 0, "float32", 0, 30, 7, 120, 80, 80.0),
    (2, 4, 1, "float32", 0, 0, 0, 25, 25, 20.0),
    (0, 4, 1, "bfloat16", 16000, 0, 0, 100, 100, 40.0),
    (1, 1, 2, "float32", 0, 50, 0, 20, 5, 2.5),
    (3, 0, 0, "float32", 0, 0, 0, 7, 3, 4.0),
    (1, 3, 0, "float32", 0, 12, 0, 30, 30, 15.0),
]


def ceilings():
    return roofline.Ceilings(device="cpu", name="test", fingerprint="test",
                             peaks={("matrix", "float32"): roofline.Ceiling(100.0),
                                    ("vector", "float32"): roofline.Ceiling(10.0),
                                    ("matrix", "bfloat16"): roofline.Ceiling(400.0)},
                             bandwidths={"DRAM": roofline.Ceiling(5.0)})


def records(rows=ROWS, timed=True):
    rec = np.zeros(len(rows), dtype=RECORD_DTYPE)
    for i, (op, mod, phase, dt, mat, vec, spec, rd, wr, t) in enumerate(rows):
        rec[i]["op"], rec[i]["module"], rec[i]["phase"], rec[i]["dtype"] = op, mod, phase, DTYPE_CODES[dt]
        rec[i]["matrix_flops"], rec[i]["vector_flops"], rec[i]["special_ops"] = mat, vec, spec
        rec[i]["bytes_read"], rec[i]["bytes_written"] = rd, wr
        rec[i]["t_start"], rec[i]["t_end"] = (10.0, 10.0 + t) if timed and t is not None else (NAN, NAN)
        rec[i]["seq"] = i
    return rec


def report(rows=ROWS, wall=None, timed=True, ceil="default"):
    return Report(records(rows, timed), OPS, MODULES, wall_time=wall,
                  ceilings=ceilings() if ceil == "default" else ceil)


def check_row(got, want):
    """Every key present; names and counts exact, floats to 1e-12 relative (they are sums of a few terms)."""
    assert set(got) == set(want)
    for k, w in want.items():
        if isinstance(w, float) and not isinstance(got[k], str):
            assert got[k] == pytest.approx(w, rel=1e-12), k
        else:
            assert got[k] == w and type(got[k]) is type(w), k


def counts(row):
    return {k: row[k] for k in ("calls", "flops", "bytes")}


# ---- whole-run counts --------------------------------------------------------------------------------------------

def test_totals_of_the_counts():
    r = report()
    assert r.matrix_flops == 4000 + 16000
    assert r.vector_flops == 30 + 50 + 12
    assert r.special_ops == 7
    assert r.total_flops == 20000 + 92
    assert r.bytes_read == 60 + 120 + 25 + 100 + 20 + 7 + 30
    assert r.bytes_written == 40 + 80 + 25 + 100 + 5 + 3 + 30
    assert r.bytes == 362 + 283
    assert r.intensity == 20092 / 645
    assert r.unknown_ops == {"aten.foo.default": 1}


def test_intensity_edge_cases():
    only_flops = report([(0, 0, 0, "float32", 10, 0, 0, 0, 0, 1.0)])
    assert only_flops.intensity == math.inf and only_flops.by_op()["aten.mm.default"]["intensity"] == math.inf
    nothing = report([(0, 0, 0, "float32", 0, 0, 0, 0, 0, 1.0)])
    assert nothing.intensity == 0.0 and nothing.by_op()["aten.mm.default"]["intensity"] == 0.0
    assert report([]).intensity == 0.0 and report([]).total_flops == 0


def test_sums_never_wrap():
    big = [(0, 0, 0, "float32", 1 << 63, 0, 0, 0, 0, 1.0)] * 2
    assert report(big).matrix_flops == 1 << 64  # wraps to 0 in uint64
    five = [(1, 0, 0, "float32", 0, 1 << 62, 0, 0, 0, 1.0)] * 5
    assert report(five).vector_flops == 5 << 62  # wraps to 1 << 62 = the maximum: not visibly wrapped
    assert exact_sum(np.array([], dtype=np.uint64)) == 0
    assert exact_sum(np.array([(1 << 64) - 1], dtype=np.uint64)) == (1 << 64) - 1
    assert exact_sum(np.array([3, 4], dtype=np.uint64)) == 7
    assert report(big).by_op()["aten.mm.default"]["flops"] == 1 << 64


# ---- by op, by module, by phase ----------------------------------------------------------------------------------

def test_by_op_exact_and_ordered():
    rows = report().by_op()
    assert list(rows) == ["aten.mm.default", "aten.add.Tensor", "aten.clone.default", "aten.foo.default"]
    assert rows["aten.mm.default"] == {
        "matrix_flops": 4000 + 16000, "vector_flops": 0, "special_ops": 0, "bytes_read": 60 + 100,
        "bytes_written": 40 + 100, "calls": 2, "flops": 20000, "bytes": 300, "intensity": 20000 / 300}
    assert rows["aten.add.Tensor"] == {
        "matrix_flops": 0, "vector_flops": 30 + 50 + 12, "special_ops": 7, "bytes_read": 120 + 20 + 30,
        "bytes_written": 80 + 5 + 30, "calls": 3, "flops": 92, "bytes": 285, "intensity": 92 / 285}
    assert rows["aten.clone.default"] == {
        "matrix_flops": 0, "vector_flops": 0, "special_ops": 0, "bytes_read": 25, "bytes_written": 25, "calls": 1,
        "flops": 0, "bytes": 50, "intensity": 0.0}
    assert counts(rows["aten.foo.default"]) == {"calls": 1, "flops": 0, "bytes": 10}


def test_by_op_per_phase():
    r = report()
    fwd = r.by_op("forward")
    assert list(fwd) == ["aten.mm.default", "aten.add.Tensor", "aten.foo.default"]
    assert counts(fwd["aten.mm.default"]) == {"calls": 1, "flops": 4000, "bytes": 100}
    assert counts(fwd["aten.add.Tensor"]) == {"calls": 2, "flops": 30 + 12, "bytes": 200 + 60}
    bwd = r.by_op("backward")
    assert list(bwd) == ["aten.mm.default", "aten.clone.default"]
    assert counts(bwd["aten.mm.default"]) == {"calls": 1, "flops": 16000, "bytes": 200}
    opt = r.by_op("optimizer")
    assert list(opt) == ["aten.add.Tensor"] and counts(opt["aten.add.Tensor"]) == {"calls": 1, "flops": 50, "bytes": 25}
    with pytest.raises(ValueError, match="phase must be one of"):
        r.by_op("fwd")


def test_by_op_ties_break_on_bytes_then_name():
    rows = [(1, 0, 0, "float32", 0, 5, 0, 1, 0, 1.0), (0, 0, 0, "float32", 0, 5, 0, 1, 0, 1.0),
            (2, 0, 0, "float32", 0, 5, 0, 2, 0, 1.0)]
    assert list(report(rows).by_op()) == ["aten.clone.default", "aten.add.Tensor", "aten.mm.default"]


MODULE_COUNTS = {
    "Global": {"calls": 7, "flops": 20092, "bytes": 645},
    "Net": {"calls": 6, "flops": 20092, "bytes": 645 - 10},           # all but r5
    "Net.block": {"calls": 3, "flops": 4000 + 30 + 12, "bytes": 100 + 200 + 60},  # r0, r1, r6
    "Net.block.fc": {"calls": 2, "flops": 4000 + 12, "bytes": 100 + 60},          # r0, r6
    "Net.head": {"calls": 2, "flops": 0 + 16000, "bytes": 50 + 200},              # r2, r3
}


@pytest.mark.parametrize("depth, names", [
    (None, ["Global", "Net", "Net.block", "Net.block.fc", "Net.head"]),
    (0, ["Global"]),
    (1, ["Global", "Net"]),
    (2, ["Global", "Net", "Net.block", "Net.head"]),
    (3, ["Global", "Net", "Net.block", "Net.block.fc", "Net.head"]),
])
def test_by_module_depth(depth, names):
    rows = report().by_module(depth=depth)
    assert list(rows) == names
    assert {k: counts(v) for k, v in rows.items()} == {k: MODULE_COUNTS[k] for k in names}
    a = report().analysis("module", depth=depth)
    assert sorted(a) == sorted(names)
    assert {k: counts(v) for k, v in a.items()} == {k: MODULE_COUNTS[k] for k in names}


def test_by_module_per_phase():
    rows = report().by_module(phase="backward")  # r2 and r3, both in Net.head
    assert list(rows) == ["Global", "Net", "Net.head"]
    assert all(counts(v) == {"calls": 2, "flops": 16000, "bytes": 250} for v in rows.values())
    assert rows["Net.head"]["bytes_read"] == 125 and rows["Net.head"]["bytes_written"] == 125
    opt = report().by_module(depth=1, phase="optimizer")
    assert {k: counts(v) for k, v in opt.items()} == {"Global": {"calls": 1, "flops": 50, "bytes": 25},
                                                      "Net": {"calls": 1, "flops": 50, "bytes": 25}}


def test_by_phase():
    ph = report().by_phase()
    assert list(ph) == ["forward", "backward", "optimizer"]
    assert counts(ph["forward"]) == {"calls": 4, "flops": 4000 + 30 + 0 + 12, "bytes": 100 + 200 + 10 + 60}
    assert counts(ph["backward"]) == {"calls": 2, "flops": 16000, "bytes": 250}
    assert counts(ph["optimizer"]) == {"calls": 1, "flops": 50, "bytes": 25}
    assert ph["forward"]["special_ops"] == 7 and ph["backward"]["matrix_flops"] == 16000
    only = report([ROWS[4], ROWS[0]]).by_phase()  # optimizer and forward only
    assert list(only) == ["forward", "optimizer"]
    assert report([]).by_phase() == {}


# ---- the roofline roll-ups ---------------------------------------------------------------------------------------

def test_classification_of_the_records():
    c = report().classification()
    assert c["flops"].tolist() == [4000, 30, 0, 16000, 50, 0, 12]
    assert c["bytes"].tolist() == [100, 200, 50, 200, 25, 10, 60]
    assert c["peak"].tolist() == [100.0, 10.0, 10.0, 400.0, 10.0, 10.0, 10.0]
    assert c["t_min"].tolist() == [40.0, 40.0, 10.0, 40.0, 5.0, 2.0, 12.0]
    C, M, B = _core.BOUND_COMPUTE, _core.BOUND_MEMORY, _core.BOUND_BANDWIDTH
    assert c["bound"].tolist() == [C, M, B, C, C, B, M]
    both = _core.FLAG_ABOVE_PEAK | _core.FLAG_ABOVE_BW
    assert c["flags"].tolist() == [0, 0, 0, 0, both, 0, 0]


def test_analysis_by_op_exact():
    a = report().analysis("op")
    assert list(a) == ["aten.add.Tensor", "aten.mm.default", "aten.clone.default", "aten.foo.default"]  # time
    mm = a["aten.mm.default"]  # r0 + r3
    check_row(mm, {
        "calls": 2, "flops": 20000.0, "bytes": 300.0, "intensity": 20000 / 300, "t_min": 40.0 + 40.0,
        "compute_share": 1.0, "bound": "compute", "time": 50.0 + 40.0, "achieved_flops": 20000 / 90,
        "achieved_bytes": 300 / 90, "efficiency": 80 / 90,
        "mfu": (4000 / 100 + 16000 / 400) / 90,  # each call's FLOPs at its own peak, over the measured time
        "mbu": 300 / (90 * 5.0), "above_ceiling": 0})
    add = a["aten.add.Tensor"]  # r1 (memory, 40), r4 (compute, 5), r6 (memory, 12)
    check_row(add, {
        "calls": 3, "flops": 92.0, "bytes": 285.0, "intensity": 92 / 285, "t_min": 40.0 + 5.0 + 12.0,
        "compute_share": 5 / 57, "bound": "memory", "time": 80 + 2.5 + 15, "achieved_flops": 92 / 97.5,
        "achieved_bytes": 285 / 97.5, "efficiency": 57 / 97.5, "mfu": (30 / 10 + 50 / 10 + 12 / 10) / 97.5,
        "mbu": 285 / (97.5 * 5.0), "above_ceiling": 1})
    clone = a["aten.clone.default"]
    assert clone["bound"] == "bandwidth" and clone["t_min"] == 10.0 and clone["compute_share"] == 0.0
    assert clone["efficiency"] == 10 / 20 and clone["mbu"] == 50 / (20 * 5.0) and math.isnan(clone["mfu"])
    assert clone["intensity"] == 0.0 and clone["achieved_flops"] == 0.0 and clone["achieved_bytes"] == 50 / 20
    foo = a["aten.foo.default"]
    assert (foo["bound"], foo["t_min"], foo["time"], foo["mbu"]) == ("bandwidth", 2.0, 4.0, 10 / (4 * 5.0))


def test_analysis_by_module_groups():
    a = report().analysis("module")
    g = a["Global"]  # compute 40 + 40 + 5 = 85, memory 40 + 12 = 52, bandwidth 10 + 2 = 12 of 149: mixed
    assert g["t_min"] == 149.0 and g["compute_share"] == pytest.approx(85 / 149, rel=1e-12)
    assert g["bound"] == "mixed" and g["above_ceiling"] == 1
    assert g["time"] == 50 + 80 + 20 + 40 + 2.5 + 4 + 15
    assert g["mfu"] == pytest.approx((40 + 3 + 0 + 40 + 5 + 0 + 1.2) / 211.5, rel=1e-12)
    head = a["Net.head"]  # bandwidth 10, compute 40: 40 / 50 = 0.8 exactly, enough for "compute"
    assert head["bound"] == "compute" and head["compute_share"] == 0.8
    assert head["mfu"] == pytest.approx((16000 / 400) / (20 + 40), rel=1e-12)
    block = a["Net.block"]  # r0 compute 40, r1 memory 40, r6 memory 12: 52 / 92 memory: mixed
    assert block["bound"] == "mixed" and block["compute_share"] == pytest.approx(40 / 92, rel=1e-12)
    fc = a["Net.block.fc"]  # r0 compute 40, r6 memory 12: 40 / 52 < 0.8
    assert fc["bound"] == "mixed"
    assert list(a)[0] == "Global"  # most time first
    assert list(report().analysis("module", phase="optimizer")) == ["Global", "Net"]


def test_analysis_per_phase_and_errors():
    r = report()
    fwd = r.analysis("op", phase="forward")
    assert list(fwd) == ["aten.add.Tensor", "aten.mm.default", "aten.foo.default"]  # 95, 50, 4 time units
    assert fwd["aten.add.Tensor"]["bound"] == "memory" and fwd["aten.add.Tensor"]["compute_share"] == 0.0
    assert fwd["aten.add.Tensor"]["t_min"] == 40 + 12 and fwd["aten.add.Tensor"]["above_ceiling"] == 0
    bwd = r.analysis("op", phase="backward")
    assert counts(bwd["aten.mm.default"]) == {"calls": 1, "flops": 16000.0, "bytes": 200.0}
    assert bwd["aten.mm.default"]["mfu"] == 1.0 and bwd["aten.mm.default"]["efficiency"] == 1.0
    with pytest.raises(ValueError, match="phase must be one of"):
        r.analysis("op", phase="training")
    with pytest.raises(ValueError, match="by must be"):
        r.analysis("layer")


def test_totals_against_the_wall_time():
    t = report(wall=300.0).totals()
    check_row(t, {
        "calls": 7, "flops": 20092.0, "bytes": 645.0, "intensity": 20092 / 645, "t_min": 149.0,
        "compute_share": 85 / 149, "bound": "mixed", "time": 300.0, "achieved_flops": 20092 / 300,
        "achieved_bytes": 645 / 300, "efficiency": 149 / 300, "mfu": (40 + 3 + 0 + 40 + 5 + 0 + 1.2) / 300,
        "mbu": 645 / (300 * 5.0), "above_ceiling": 1, "wall_time": 300.0,
        # no recompute phase: the model FLOPs are all the FLOPs, and HFU is MFU
        "model_flops": 20092.0, "recompute_flops": 0.0, "hfu": (40 + 3 + 0 + 40 + 5 + 0 + 1.2) / 300})
    # without a wall time, the measured per-op times (sum 211.5) stand in
    u = report(wall=None).totals()
    assert u["time"] == 211.5 and u["wall_time"] is None
    assert u["mfu"] == pytest.approx(89.2 / 211.5, rel=1e-12) and u["efficiency"] == pytest.approx(149 / 211.5)
    assert u["mbu"] == pytest.approx(645 / (211.5 * 5.0), rel=1e-12)
    h = report(wall=0.5).totals()  # a wall time below one second is a wall time too
    assert h["time"] == 0.5 and h["mfu"] == pytest.approx(89.2 / 0.5, rel=1e-12)
    z = report(wall=0.0).totals()  # a zero wall time is not divided by
    assert z["time"] == 211.5 and z["wall_time"] == 0.0


def test_totals_without_flops_or_time():
    copies = [(2, 0, 0, "float32", 0, 0, 0, 25, 25, 20.0)]
    t = report(copies, wall=40.0).totals()
    assert math.isnan(t["mfu"]) and t["mbu"] == 50 / (40 * 5.0) and t["bound"] == "bandwidth"
    untimed = report(timed=False)
    u = untimed.totals()
    assert math.isnan(u["time"]) and math.isnan(u["mfu"]) and math.isnan(u["efficiency"])
    assert u["t_min"] == 149.0 and u["bound"] == "mixed"
    a = untimed.analysis("op")  # ordered by roofline time when untimed: mm 80, add 57, clone 10, foo 2
    assert list(a) == ["aten.mm.default", "aten.add.Tensor", "aten.clone.default", "aten.foo.default"]
    assert math.isnan(a["aten.mm.default"]["achieved_flops"]) and a["aten.mm.default"]["t_min"] == 80.0


def test_sub_second_groups_and_ties():
    # mm fp32: 50 FLOPs, 1 byte: t_min = max(50 / 100, 1 / 5) = 0.5 s, compute-bound; measured 0.25 s
    # add fp32: 5 FLOPs, 10 bytes: t_min = max(0.5, 2) = 2 s; measured 0.25 s (the same time, fewer FLOPs)
    # clone: 10 bytes, t_min 2 s, measured 0.25 s, no FLOPs
    rows = [(0, 0, 0, "float32", 50, 0, 0, 1, 0, 0.25), (1, 0, 0, "float32", 0, 5, 0, 10, 0, 0.25),
            (2, 0, 0, "float32", 0, 0, 0, 10, 0, 0.25)]
    a = report(rows).analysis("op")
    assert list(a) == ["aten.mm.default", "aten.add.Tensor", "aten.clone.default"]  # equal times: most FLOPs first
    mm = a["aten.mm.default"]
    assert mm["t_min"] == 0.5 and mm["compute_share"] == 1.0 and mm["bound"] == "compute"
    assert mm["time"] == 0.25 and mm["mfu"] == (50 / 100) / 0.25 and mm["efficiency"] == 0.5 / 0.25
    assert mm["mbu"] == 1 / (0.25 * 5.0) and mm["achieved_flops"] == 50 / 0.25
    # equal time and FLOPs: by name
    same = [(1, 0, 0, "float32", 0, 5, 0, 10, 0, 0.25), (0, 0, 0, "float32", 0, 5, 0, 10, 0, 0.25)]
    assert list(report(same).analysis("op")) == ["aten.add.Tensor", "aten.mm.default"]
    # untimed: ordered by roofline time; a group without any ceiling (complex64: no peak) counts as 0 s
    mixed = [(1, 0, 0, "complex64", 0, 5, 0, 0, 0, None), (0, 0, 0, "float32", 50, 0, 0, 1, 0, None)]
    u = report(mixed, timed=False).analysis("op")
    assert list(u) == ["aten.mm.default", "aten.add.Tensor"]
    assert math.isnan(u["aten.add.Tensor"]["t_min"]) and u["aten.mm.default"]["t_min"] == 0.5


def test_groups_without_ceilings():
    r = report(ceil=None)
    assert r.ceilings is None
    a = r.analysis("op")
    assert a["aten.mm.default"]["bound"] == "?" and math.isnan(a["aten.mm.default"]["t_min"])
    assert math.isnan(a["aten.mm.default"]["compute_share"]) and math.isnan(a["aten.mm.default"]["mbu"])
    assert a["aten.mm.default"]["time"] == 90.0 and a["aten.mm.default"]["achieved_flops"] == 20000 / 90
    assert a["aten.clone.default"]["bound"] == "?"  # bytes only, no ceiling to judge them
    empty = report([(3, 0, 0, "float32", 0, 0, 0, 0, 0, 1.0)], ceil=None).analysis("op")
    assert empty["aten.foo.default"]["bound"] == "none" and empty["aten.foo.default"]["intensity"] == 0.0


def test_group_mfu_is_nan_without_any_peak():
    a = report(ceil=None).analysis("op")
    assert math.isnan(a["aten.mm.default"]["mfu"]) and a["aten.mm.default"]["time"] == 90.0
    assert math.isnan(a["aten.clone.default"]["mfu"])  # no FLOPs at all: NaN as before
    t = report(ceil=None, wall=300.0).totals()
    assert math.isnan(t["mfu"]) and t["time"] == 300.0
    assert math.isnan(report(ceil=None).totals()["mfu"])
    # complex64 work has no peak in these ceilings: alone it has no MFU; beside a call with a peak it is left out
    alone = [(1, 0, 0, "complex64", 0, 5, 0, 10, 0, 2.0)]
    assert math.isnan(report(alone).analysis("op")["aten.add.Tensor"]["mfu"])
    both = alone + [(1, 0, 0, "float32", 0, 20, 0, 10, 0, 2.0)]
    assert report(both).analysis("op")["aten.add.Tensor"]["mfu"] == (20 / 10) / 4.0
    assert report(both, wall=8.0).totals()["mfu"] == (20 / 10) / 8.0


def test_group_bound_thresholds():
    C, M, B, N = _core.BOUND_COMPUTE, _core.BOUND_MEMORY, _core.BOUND_BANDWIDTH, _core.BOUND_NONE

    def gb(bounds, t_min):
        return group_bound(np.array(bounds, dtype=np.int8), np.array(t_min, dtype=np.float64))

    assert gb([C, M], [8.0, 2.0]) == "compute"            # 0.8 exactly
    assert gb([C, M], [7.9, 2.1]) == "mixed"              # 0.79 compute, 0.21 memory
    assert gb([M, C], [8.0, 2.0]) == "memory"             # 0.8 memory
    assert gb([M, B, C], [5.0, 3.0, 2.0]) == "memory"     # 0.5 + 0.3 = 0.8 wait on memory
    assert gb([B, C], [8.0, 2.0]) == "bandwidth"          # no memory-bound call: bandwidth
    assert gb([M, B, C], [4.0, 3.9, 2.1]) == "mixed"      # 0.79
    assert gb([C, M], [8.0, NAN]) == "compute"            # a call without a ceiling is left out
    assert gb([C, M], [0.4, 0.1]) == "compute"            # 0.8 of a total below 1 s
    assert gb([B, M], [0.3, 0.6]) == "memory"
    assert gb([N, N], [0.0, 0.0]) == "none"
    assert gb([N, B], [0.0, 0.0]) == "mixed"


def test_peak_time_leaves_out_calls_without_a_peak():
    flops = np.array([100.0, 50.0, 0.0, 30.0])
    peak = np.array([10.0, NAN, 5.0, 0.0])
    assert peak_time(flops, peak) == 100 / 10
    assert peak_time(np.array([6.0, 4.0]), np.array([2.0, 4.0])) == 6 / 2 + 4 / 4
    assert peak_time(np.array([1.0, 3.0]), np.array([0.5, 4.0])) == 1 / 0.5 + 3 / 4  # one FLOP; a peak below 1
    assert peak_time(np.array([]), np.array([])) == 0.0
    assert peak_time(np.array([0.0, 0.0]), np.array([NAN, 0.0])) == 0.0  # no FLOPs: no time, peak or not
    assert math.isnan(peak_time(np.array([5.0, 0.0]), np.array([NAN, 4.0])))  # FLOPs, but none with a peak
    assert math.isnan(peak_time(np.array([5.0]), np.array([0.0])))


def test_module_path_is_the_innermost():
    r = report()
    assert [r.module_path(i) for i in range(len(MODULES))] == ["Global", "Net", "Net.block", "Net.block.fc",
                                                              "Net.head"]


def test_timed():
    assert report().timed is True
    assert report(timed=False).timed is False and report([]).timed is False
    one = records()
    one["t_start"][1:], one["t_end"][1:] = NAN, NAN  # one timed call is enough
    assert Report(one, OPS, MODULES).timed is True


def test_errors_count_calls_and_keep_the_last_reason():
    rec = records()
    rec["status"][[0, 3, 4]] = [3, 5, 2]  # the rl_status codes of csrc/cost.h: RL_E_SHAPE, RL_E_DIMS, RL_E_ARGS
    r = Report(rec, OPS, MODULES)
    # mm: r0 (3, inconsistent shapes) then r3 (5, the dimensions status): two calls, the last reason; add: r4 (2)
    assert r.errors == {"aten.mm.default": (2, "a tensor has a negative size or more than 16 dimensions"),
                        "aten.add.Tensor": (1, "missing or mistyped argument")}
    assert report().errors == {}
    assert report([]).errors == {}


def test_flop_counter_counts_by_module_and_op():
    from roofline._analysis._rollup import flop_counter_counts

    # keys given (packet_obj) so that no torch lookup is involved; "aten.add" and "custom.mm" have no
    # FlopCounterMode formula, "aten.mm" and "aten.bmm" do
    ops = [OpInfo("aten.mm.default", "aten.mm", "mm", "KEY_MM"),
           OpInfo("aten.add.Tensor", "aten.add", "ewise", "KEY_ADD"),
           OpInfo("custom.mm.default", "custom.mm", "python", "KEY_CUSTOM"),
           OpInfo("aten.bmm.default", "aten.bmm", "bmm", "KEY_BMM")]
    rec = records([(0, 3, 0, "float32", 1, 0, 0, 0, 0, 1.0), (1, 3, 0, "float32", 0, 1, 0, 0, 0, 1.0),
                   (2, 2, 0, "float32", 1, 0, 0, 0, 0, 1.0), (0, 4, 1, "float32", 1, 0, 0, 0, 0, 1.0),
                   (3, 2, 0, "float32", 1, 0, 0, 0, 0, 1.0), (0, 3, 0, "float32", 1, 0, 0, 0, 0, 1.0)])
    rec["flop_counter_flops"] = [7, 100, 1000, 20, 300, 5]
    got = flop_counter_counts(rec, ops, MODULES)
    assert got == {"Global": {"KEY_MM": 7 + 20 + 5, "KEY_BMM": 300}, "Net": {"KEY_MM": 7 + 20 + 5, "KEY_BMM": 300},
                   "Net.block": {"KEY_MM": 7 + 5, "KEY_BMM": 300}, "Net.block.fc": {"KEY_MM": 7 + 5},
                   "Net.head": {"KEY_MM": 20}}
    assert flop_counter_counts(rec[:0], ops, MODULES) == {}
