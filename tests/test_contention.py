"""Contention: ceilings that look measured on a busy machine are flagged and not cached; a report records the
machine's load during its block and flags "measured under contention".

The decisions are pure functions, tested here on made-up readings (expected values worked out in the tests). Two
tests run the real thing with busy-looping processes, twice as many as the CPUs this process may use, competing
for them: that takes the benchmark threads' share well below the threshold however the scheduler spreads them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

from roofline._hardware import _contention
from roofline._hardware._ceilings import Ceiling, Ceilings, ceilings
from roofline.report import Report

from _ceilings_modules import ceilings_mod  # noqa: E402  (the ceilings modules as one)

linux_only = pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="needs /proc/stat (Linux)")

G = 1e9


# ---------------------------------------------------------------------------------------------------------------
# Ceilings: the decision
# ---------------------------------------------------------------------------------------------------------------


def _bw(**levels):
    """Bandwidth ceilings: level=(read, triad) in GB/s."""
    out = {}
    for level, (read, triad) in levels.items():
        out[f"{level}_read"] = Ceiling(read * G)
        out[level] = Ceiling(triad * G)
    return out


IDLE_SHARES = {"fma_float64": 0.99, "fma_float32": 0.98, "bandwidth_sweep": 0.97}
PLAUSIBLE = _bw(L1=(500, 700), L2=(250, 200), L3=(120, 60), DRAM=(25, 40))
PEAKS = {("vector", "float32"): Ceiling(100 * G)}


def test_an_idle_measurement_is_not_flagged():
    assert ceilings_mod.contention_reasons(IDLE_SHARES, PLAUSIBLE, PEAKS, {"vector/float32": 95 * G}) == []
    # a level within 80% of the next is noise, not an implausible hierarchy (L2 read 0.81 x L3 read)
    near = _bw(L1=(500, 700), L2=(97.2, 200), L3=(120, 60), DRAM=(25, 40))
    assert ceilings_mod.contention_reasons(IDLE_SHARES, near, PEAKS, None) == []
    # a re-check within 30%: 100 vs 71 GFLOP/s
    assert ceilings_mod.contention_reasons(IDLE_SHARES, PLAUSIBLE, PEAKS, {"vector/float32": 71 * G}) == []


def test_a_low_cpu_share_is_named():
    reasons = ceilings_mod.contention_reasons({**IDLE_SHARES, "fma_float32": 0.4}, PLAUSIBLE, PEAKS, None)
    assert reasons == ["other processes used the CPUs: the benchmark threads got 40% of their CPUs (fma_float32)"]


def test_a_cache_level_below_dram_is_implausible():
    # the symptom seen on a busy machine: L3 below DRAM
    bw = _bw(L1=(500, 700), L2=(250, 200), L3=(15, 60), DRAM=(25, 40))
    assert ceilings_mod.contention_reasons(IDLE_SHARES, bw, PEAKS, None) == [
        "implausible hierarchy: L3 read bandwidth 15.0 GB/s is below DRAM's 25.0 GB/s"]
    # the headline (triad) figures are checked too; L2 is compared with every slower level, L3 first
    bw = _bw(L1=(500, 700), L2=(250, 30), L3=(120, 60), DRAM=(25, 40))
    assert ceilings_mod.contention_reasons(IDLE_SHARES, bw, PEAKS, None) == [
        "implausible hierarchy: L2 triad bandwidth 30.0 GB/s is below L3's 60.0 GB/s"]
    # 79% of the next level is flagged
    bw = _bw(L1=(500, 700), L2=(94.8, 200), L3=(120, 60), DRAM=(25, 40))
    assert len(ceilings_mod.contention_reasons(IDLE_SHARES, bw, PEAKS, None)) == 1


def test_a_peak_far_from_its_recheck_is_flagged():
    for again in (200 * G, 60 * G):  # either side: the load changed between the two
        reasons = ceilings_mod.contention_reasons(IDLE_SHARES, PLAUSIBLE, PEAKS, {"vector/float32": again})
        assert reasons == [f"the vector/float32 peak 100.0 GFLOP/s and a quick re-check {again / G:.1f} GFLOP/s "
                           "disagree by more than 30%"]


class _StubCore:
    """roofline._core with fixed benchmark results: FMA peaks, and a sweep whose rate grows with the working set
    (so DRAM comes out faster than every cache: an implausible hierarchy)."""

    def __init__(self, recheck_factor=1.0):
        self.recheck_factor = recheck_factor
        self.fma_calls = 0

    def cpu_fma_peak(self, dtype, seconds, threads, repeats):
        self.fma_calls += 1
        flops = {"float64": 100 * G, "float32": 200 * G}[dtype]
        if self.fma_calls == 3:  # the re-check
            flops *= self.recheck_factor
        return {"flops": flops, "threads": threads, "pinned": True, "repeats": repeats, "lanes": 8,
                "accumulators": 12, "fma": True, "cpu_share": 0.99}

    def cpu_bandwidth_sweep(self, sizes, kernels, threads, repeats, **kwargs):
        rates = np.array([[float(s) for s in sizes] for _ in kernels])  # bytes/s = working set: grows with size
        return rates, {"pinned": True, "cpu_share": 0.99}

    def __getattr__(self, name):
        from roofline import _core

        return getattr(_core, name)


STUB_INFO = {"cpus": 2, "physical_cores": 2, "clock_hz": 2.0e9, "clock_source": "test", "simd": "avx2",
             "model": "stub CPU", "caches": {"L1": {"bytes": 32 << 10, "instances": 2},
                                              "L2": {"bytes": 1 << 20, "instances": 2}},
             "lowp_kernels": {}}


def test_an_implausible_hierarchy_is_warned_about_and_not_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(ceilings_mod, "_core", _StubCore())
    monkeypatch.setattr(ceilings_mod, "_cpu_info", lambda: dict(STUB_INFO))
    with pytest.warns(RuntimeWarning, match="implausible hierarchy: L1 read bandwidth .* is below L2's") as w:
        c = ceilings("cpu", refresh=True)
    assert "not cached" in str(w[0].message)
    assert c.info["busy"] and c.info["contention"][0].startswith("implausible hierarchy: L1 read")
    assert any("measured under contention" in n for n in c.notes)
    assert glob.glob(str(tmp_path / "*.json")) == []


def test_a_recheck_far_below_is_warned_about_and_not_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(tmp_path))
    stub = _StubCore(recheck_factor=0.5)

    class Flat(_StubCore):  # a plausible (flat) sweep, so only the re-check disagrees
        def cpu_bandwidth_sweep(self, sizes, kernels, threads, repeats, **kwargs):
            return np.full((len(kernels), len(sizes)), 10 * G), {"pinned": True, "cpu_share": 0.99}

    stub = Flat(recheck_factor=0.5)
    monkeypatch.setattr(ceilings_mod, "_core", stub)
    monkeypatch.setattr(ceilings_mod, "_cpu_info", lambda: dict(STUB_INFO))
    with pytest.warns(RuntimeWarning, match="peak 200.0 GFLOP/s and a quick re-check 100.0 GFLOP/s"):
        c = ceilings("cpu", refresh=True)
    assert c.info["recheck"] == {"vector/float32": 100 * G}
    assert glob.glob(str(tmp_path / "*.json")) == []
    # the same measurement without the disagreement is cached
    monkeypatch.setattr(ceilings_mod, "_core", Flat(recheck_factor=1.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        c = ceilings("cpu", refresh=True)
    assert c.info["contention"] == [] and len(glob.glob(str(tmp_path / "*.json"))) == 1


def test_a_contended_result_is_reused_in_this_process_only(tmp_path, monkeypatch):
    """Not on disk, but not re-measured for every report either: the flagged result is kept for the process until
    refresh=True, which measures again (and caches a plausible result)."""
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(ceilings_mod, "_cpu_info", lambda: dict(STUB_INFO))
    stub = _StubCore()  # the growing sweep: an implausible hierarchy
    monkeypatch.setattr(ceilings_mod, "_core", stub)
    with pytest.warns(RuntimeWarning, match="implausible hierarchy"):
        first = ceilings("cpu", refresh=True)
    calls = stub.fma_calls
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        again = ceilings("cpu")
    assert again is first and stub.fma_calls == calls and again.info["busy"]
    assert glob.glob(str(tmp_path / "*.json")) == []

    class Flat(_StubCore):
        def cpu_bandwidth_sweep(self, sizes, kernels, threads, repeats, **kwargs):
            return np.full((len(kernels), len(sizes)), 10 * G), {"pinned": True, "cpu_share": 0.99}

    monkeypatch.setattr(ceilings_mod, "_core", Flat())
    fresh = ceilings("cpu", refresh=True)
    assert fresh is not first and not fresh.info["busy"] and len(glob.glob(str(tmp_path / "*.json"))) == 1
    assert ceilings("cpu").info["busy"] is False  # from the file now


def test_a_cached_file_marked_busy_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(ceilings_mod, "_cpu_info", lambda: dict(STUB_INFO))

    class Flat(_StubCore):
        def cpu_bandwidth_sweep(self, sizes, kernels, threads, repeats, **kwargs):
            return np.full((len(kernels), len(sizes)), 10 * G), {"pinned": True, "cpu_share": 0.99}

    monkeypatch.setattr(ceilings_mod, "_core", Flat())
    c = ceilings("cpu", refresh=True)
    (path,) = glob.glob(str(tmp_path / "*.json"))
    d = json.loads(c.to_json())
    d["info"]["busy"] = True  # written by hand, or by an older version
    with open(path, "w") as f:
        json.dump(d, f)
    with pytest.warns(RuntimeWarning, match="measured under contention; re-measuring"):
        ceilings("cpu")


# ---------------------------------------------------------------------------------------------------------------
# Reports: readings and the decision
# ---------------------------------------------------------------------------------------------------------------


def _snap(wall, cpu, busy, steal, runnable, cpus=4, load=(0.5, 0.5, 0.5)):
    return _contention.Snapshot(wall, cpu, busy, steal, runnable, load, cpus)


def test_readings_arithmetic():
    # 2 s on 4 CPUs = 8 CPU-seconds; the machine was busy 6.5 s, 1.5 of them this process: others 5 / 8
    r = _contention.readings(_snap(10.0, 1.0, 100.0, 5.0, 0), _snap(12.0, 2.5, 106.5, 5.4, 3))
    assert r["wall_s"] == 2.0 and r["process_cpu_s"] == 1.5 and r["cpu_per_wall"] == 0.75
    assert r["others_share"] == 0.625 and r["steal_share"] == 0.05
    assert r["runnable_others"] == [0, 3] and r["cpus"] == 4 and r["loadavg"] == [[0.5, 0.5, 0.5]] * 2
    # without /proc/stat nothing is known, and nothing is flagged
    r = _contention.readings(_snap(10.0, 1.0, None, None, None), _snap(12.0, 2.5, None, None, None))
    assert r["others_share"] is None and r["steal_share"] is None
    assert _contention.judge(r) == []


def test_an_idle_block_is_not_flagged():
    idle = {"wall_s": 1.0, "others_share": 0.05, "steal_share": 0.0, "runnable_others": [0, 1], "cpus": 4}
    assert _contention.judge(idle) == []
    # a block with this process alone busy on every CPU: others 0
    r = _contention.readings(_snap(0.0, 0.0, 0.0, 0.0, 0), _snap(1.0, 4.0, 4.0, 0.0, 0))
    assert r["others_share"] == 0.0 and _contention.judge(r) == []


def test_each_kind_of_evidence_flags_a_block():
    base = {"wall_s": 1.0, "others_share": 0.0, "steal_share": 0.0, "runnable_others": [0, 0], "cpus": 2}
    assert _contention.judge({**base, "others_share": 0.6}) == ["other processes kept 60% of the 2 CPUs busy"]
    assert _contention.judge({**base, "steal_share": 0.25}) == ["the hypervisor took 25% of the CPU time (steal)"]
    assert _contention.judge({**base, "runnable_others": [2, 3]}) == [
        "2 and 3 other threads were runnable at entry and exit, on 2 CPUs"]
    # one busy end is not enough; nor are shares of a block too short for /proc/stat's ticks
    assert _contention.judge({**base, "runnable_others": [5, 1]}) == []
    assert _contention.judge({**base, "wall_s": 0.1, "others_share": 0.9, "steal_share": 0.9}) == []
    assert _contention.judge({**base, "others_share": 0.49}) == []


def _report_with_readings(monkeypatch, start, end):
    """A report completed with made-up start and end readings (no torch needed)."""
    snaps = iter([start, end])
    monkeypatch.setattr(_contention, "snapshot", lambda count_own_threads=True: next(snaps))
    r = Report._pending_block()
    r._complete([], [], [], wall_time=1.0, meta={"timing": "model", "devices": ["cpu"]}, ceilings=None,
                overhead=None)
    return r


def test_a_synthetic_idle_report_is_not_flagged(monkeypatch):
    r = _report_with_readings(monkeypatch, _snap(0.0, 0.0, 10.0, 0.0, 0), _snap(1.0, 0.9, 11.0, 0.0, 1))
    assert r.meta["contention"] == [] and r.meta["load"]["others_share"] == pytest.approx(0.1 / 4)
    assert "contention" not in r.summary()


def test_a_synthetic_busy_report_is_flagged_and_keeps_the_flag(monkeypatch):
    r = _report_with_readings(monkeypatch, _snap(0.0, 0.0, 10.0, 0.0, 5), _snap(1.0, 0.5, 13.7, 0.0, 6))
    assert r.meta["contention"] == ["other processes kept 80% of the 4 CPUs busy",
                                    "5 and 6 other threads were runnable at entry and exit, on 4 CPUs"]
    assert r.summary().split("\n")[1].startswith("  measured under contention: other processes kept 80%")
    back = Report.from_dict(json.loads(json.dumps(r.to_dict())))
    assert back.meta["contention"] == r.meta["contention"] and back.meta["load"] == r.meta["load"]


def test_real_readings_are_well_formed():
    s = _contention.snapshot()
    allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    assert s.cpus == allowed and s.machine_cpus == (os.cpu_count() or 1) and s.cpu >= 0
    r = _contention.readings(s, _contention.snapshot())
    threads = {"threads_cpu_s", "threads_wait_s", "wait_share", "unwaited_s"} if s.threads else set()
    assert set(r) == {"wall_s", "process_cpu_s", "cpu_per_wall", "others_share", "steal_share", "runnable_others",
                      "loadavg", "cpus", "machine_cpus"} | threads
    json.dumps(r)
    for key in ("others_share", "steal_share"):
        assert r[key] is None or 0.0 <= r[key] <= 1.0


# ---------------------------------------------------------------------------------------------------------------
# The real thing: a second process hogging the cores
# ---------------------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def hogging_the_cores():
    """Busy-looping processes, twice as many as the CPUs this process may run on, at this process's priority."""
    n = 2 * len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 2 * (os.cpu_count() or 1)
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        time.sleep(0.5)  # started and spinning
        assert all(p.poll() is None for p in hogs)
        yield n
    finally:
        for p in hogs:
            p.kill()
        for p in hogs:
            p.wait()


# A short configuration of the CPU benchmarks: the hog test checks the flag, not the figures.
_SHORT = {"fma_seconds": 0.03, "fma_repeats": 3, "bw_repeats": 1, "bw_min_seconds": 0.0005, "per_octave": 1}


@linux_only
def test_ceilings_measured_under_a_hog_are_flagged_and_not_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(ceilings_mod, "_QUICK", _SHORT)
    monkeypatch.setattr(ceilings_mod, "_dram_size", lambda llc, threads: (max(2 * llc, 8 << 20), False))
    with hogging_the_cores():
        with pytest.warns(RuntimeWarning, match="measured under contention") as w:
            c = ceilings("cpu", refresh=True, quick=True)
    assert c.info["busy"] and c.info["contention"]
    assert any("other processes used the CPUs" in r for r in c.info["contention"]), c.info["contention"]
    assert "not cached" in str(w[-1].message)
    assert glob.glob(str(tmp_path / "*.json")) == []


@linux_only
def test_a_report_measured_under_a_hog_carries_the_flag():
    torch = pytest.importorskip("torch")
    import roofline

    a, b = torch.randn(256, 256), torch.randn(256, 256)
    with roofline.measure():  # first use: imports and caches outside the timed part
        (a @ b).sum()
    with hogging_the_cores():
        with roofline.measure(ceilings="H100 SXM") as r:
            t = time.monotonic()
            while time.monotonic() - t < 0.6:  # long enough for /proc/stat's ticks
                (a @ b).sum()
    assert r.meta["contention"], r.meta["load"]
    assert r.meta["load"]["wall_s"] >= 0.6
    assert "measured under contention" in r.summary().split("\n")[1]
    back = roofline.load(r.to_json())
    assert back.meta["contention"] == r.meta["contention"]


# ---------------------------------------------------------------------------------------------------------------
# What counts as this process's, which CPUs, which blocks
# ---------------------------------------------------------------------------------------------------------------

_STAT = """cpu  1000 0 500 9000 0 0 0 40 0 0
cpu0 100 0 50 4000 0 0 0 10 0 0
cpu1 900 0 450 5000 0 0 0 30 0 0
intr 12345 0 0
procs_running 3
"""


def test_proc_stat_sums_only_the_allowed_cpus():
    hz = _contention._HZ
    assert _contention._parse_stat(_STAT) == ((1000 + 500) / hz, 40 / hz, 3)
    assert _contention._parse_stat(_STAT, [1]) == ((900 + 450) / hz, 30 / hz, 3)
    assert _contention._parse_stat(_STAT, [0]) == ((100 + 50) / hz, 10 / hz, 3)
    # a CPU /proc/stat does not list: nothing known rather than a wrong share
    assert _contention._parse_stat(_STAT, [0, 7])[:2] == (None, None)


def test_readings_divide_by_the_allowed_cpus_and_compare_runnable_threads_to_the_machine():
    # 1 s on the 1 allowed CPU of a 4-CPU machine; that CPU busy 0.9 s, 0.2 of them this process: others 0.7 / 1
    start = _contention.Snapshot(0.0, 0.0, 10.0, 0.0, 2, None, 1, 4)
    end = _contention.Snapshot(1.0, 0.2, 10.9, 0.0, 3, None, 1, 4)
    r = _contention.readings(start, end)
    assert r["others_share"] == 0.7 and r["cpus"] == 1 and r["machine_cpus"] == 4
    # 2 and 3 runnable threads elsewhere on a 4-CPU machine are no evidence, the 70% of the allowed CPU is
    assert _contention.judge(r) == ["other processes kept 70% of the 1 CPUs busy"]


@linux_only
def test_live_and_finished_child_processes_count_as_this_process():
    code = ("import sys, time\n"
            "while time.process_time() < 0.3: pass\n"
            "sys.stdout.write('x'); sys.stdout.flush(); sys.stdin.read()")
    before = _contention.descendants_cpu()
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert p.stdout.read(1) == b"x"  # the child has used 0.3 s of CPU and is still alive
        # /proc counts whole clock ticks of 1/100 s: 0.3 s less up to two ticks of truncation
        assert _contention.descendants_cpu() - before >= 0.28
    finally:
        p.stdin.close()
        p.wait()
        p.stdout.close()
    assert _contention.descendants_cpu() - before >= 0.28  # reaped: os.times() children


def _flagging_report(monkeypatch, meta):
    monkeypatch.setattr(_contention, "judge", lambda load: ["made-up evidence"])
    r = Report._pending_block()
    r._complete([], [], [], wall_time=1.0, meta=meta, ceilings=None, overhead=None)
    return r


def test_count_only_blocks_record_the_load_but_are_not_flagged(monkeypatch):
    for meta in ({"timing": None, "devices": ["cpu"]}, {"timing": "model", "devices": ["meta"]},
                 {"timing": "op", "devices": ["fake", "meta"]}):
        r = _flagging_report(monkeypatch, meta)
        assert r.meta["contention"] == [] and r.meta["load"]["wall_s"] >= 0, meta
    r = _flagging_report(monkeypatch, {"timing": "model", "devices": ["cpu", "meta"]})
    assert r.meta["contention"] == ["made-up evidence"]


def test_a_projection_does_not_inherit_the_flag(monkeypatch):
    torch = pytest.importorskip("torch")
    import roofline

    monkeypatch.setattr(_contention, "judge", lambda load: ["made-up evidence"])
    a = torch.randn(8, 8)
    with roofline.measure(ceilings="datasheet") as r:
        a @ a
    assert r.meta["contention"] == ["made-up evidence"]
    p = r.project("H100 SXM")
    assert p.meta["contention"] == [] and "made-up evidence" not in p.summary()
    assert p.to_dict()["meta"]["contention"] == []


def test_a_report_judged_against_busy_ceilings_says_so_in_its_header_and_meta():
    torch = pytest.importorskip("torch")
    import roofline
    from roofline import devices

    h = Ceilings.from_datasheet(devices.get("H100 SXM"))
    c = dataclasses.replace(h, info=dict(h.info or {}, busy=True, contention=["L3 triad bandwidth below DRAM's"]))
    a = torch.randn(8, 8)
    with roofline.measure(timing=None, ceilings=c) as r:
        a @ a
    assert r.meta["contention"] == []  # the block itself is not flagged
    head = r.summary().split("\n")[:3]
    assert any(x.startswith("  ceilings measured under contention: L3 triad bandwidth below DRAM's") for x in head)
    assert r.to_dict()["meta"]["ceilings_contention"] == ["L3 triad bandwidth below DRAM's"]
    assert "ceilings_contention" not in r.project("H100 SXM").to_dict()["meta"]
    with roofline.measure(timing=None, ceilings="H100 SXM") as r2:
        a @ a
    assert "ceilings measured under contention" not in r2.summary()
    assert "ceilings_contention" not in r2.to_dict()["meta"]


def test_thread_state_read_after_the_last_parenthesis():
    """/proc/<pid>/task/<tid>/stat: the state follows the command name in parentheses, which may itself hold ") R"
    or spaces; only the field after the last ")" counts."""
    assert _contention._running("4242 (python) R 1 4242 4242 0 -1") is True
    assert _contention._running("4242 (a) R (b) S 1 4242 4242") is False  # the name is "a) R (b"
    assert _contention._running("4242 (x y) R 1") is True
    assert _contention._running("") is False and _contention._running(None) is False
    assert _contention._own_running_threads() >= 1  # the reading thread runs
