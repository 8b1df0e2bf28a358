"""A step time that holds still on a shared machine: the scheduler's per-thread statistics in a block's load
(roofline._hardware._contention: time on a CPU, time waiting for one), the contention reason they give, the
"unwaited" time, and ``profile(step_time=...)`` / ``profiler(step_time=...)`` choosing the time the report divides
by. Expected values are arithmetic on the inputs, written out in the comments."""

from __future__ import annotations

import os
import statistics
import threading
import time

import pytest

torch = pytest.importorskip("torch")

import roofline  # noqa: E402
from roofline import SteadyReport  # noqa: E402
from roofline._hardware import _contention as C  # noqa: E402


def _snap(wall, threads, cpus=2):
    return C.Snapshot(wall, 0.0, None, None, None, None, cpus, cpus, threads)


def test_thread_times_sum_each_threads_change():
    start = _snap(0.0, {"1": (100, 50), "2": (1000, 0), "9": (5, 5)})
    end = _snap(1.0, {"1": (400, 250), "2": (1600, 100), "3": (100, 0)})
    # thread 1: 300 on a CPU, 200 waiting; 2: 600 and 100; 3 started in between: 100 and 0; 9 ended: left out
    run, wait = C.thread_times(start, end)
    assert run == pytest.approx(1000e-9) and wait == pytest.approx(300e-9)
    assert C.thread_times(_snap(0.0, None), end) is None and C.thread_times(start, _snap(1.0, None)) is None


def test_unwaited_time_by_arithmetic():
    # one thread, 0.2 s on a CPU and 0.6 s waiting in a 1 s block: 1 * 0.2 / 0.8 = 0.25 s
    assert C.unwaited(1.0, 0.2, 0.6, 2) == pytest.approx(0.25)
    # nothing waited: the wall time itself
    assert C.unwaited(1.0, 0.7, 0.0, 2) == 1.0
    # four threads of this process on 2 CPUs, nobody else: 2 s on a CPU, 2 s waiting for each other's CPU;
    # 1 * 2 / 4 = 0.5 s, but the 2 CPUs needed 2 / 2 = 1 s for the process's own work: 1 s
    assert C.unwaited(1.0, 2.0, 2.0, 2) == pytest.approx(1.0)
    # never more than the wall time, and a block with no thread time stays as it was
    assert C.unwaited(1.0, 3.0, 0.5, 1) == 1.0 and C.unwaited(0.5, 0.0, 0.0, 2) == 0.5


def test_readings_and_the_contention_reason():
    start = _snap(10.0, {"1": (0, 0), "2": (0, 0)})
    end = _snap(10.5, {"1": (100_000_000, 300_000_000), "2": (50_000_000, 50_000_000)})
    r = C.readings(start, end)
    # 0.15 s on a CPU, 0.35 s waiting: share 0.35 / 0.5 = 0.7; unwaited 0.5 * 0.15 / 0.5 = 0.15 (above 0.15 / 2)
    assert r["threads_cpu_s"] == 0.15 and r["threads_wait_s"] == 0.35
    assert r["wait_share"] == 0.7 and r["unwaited_s"] == 0.15
    assert C.judge(r) == ["this process's threads waited 70% of their runnable time for a CPU (350.0 ms)"]
    base = {"wall_s": 0.01, "threads_cpu_s": 0.01}
    # a quarter of the runnable time and at least 2 ms of waiting count; less of either does not
    assert C.judge({**base, "wait_share": 0.25, "threads_wait_s": 0.002}) != []
    assert C.judge({**base, "wait_share": 0.2499, "threads_wait_s": 0.5}) == []
    assert C.judge({**base, "wait_share": 0.9, "threads_wait_s": 0.0019}) == []
    # snapshots without the statistics (another system) add no key
    assert "wait_share" not in C.readings(_snap(0.0, None), _snap(1.0, None))


@pytest.mark.skipif(not os.path.exists(f"/proc/self/task/{threading.get_native_id()}/schedstat"),
                    reason="no scheduler statistics on this system")
def test_a_real_block_reads_its_threads():
    start = C.snapshot(False)
    t0 = time.thread_time()
    x = 0
    while time.thread_time() - t0 < 0.02:  # 20 ms on a CPU, whatever else runs
        x += 1
    r = C.readings(start, C.snapshot())
    assert r["threads_cpu_s"] >= 0.015  # the kernel accounts at scheduling events: a little may be left out
    assert 0.0 <= r["wait_share"] <= 1.0 and 0.0 < r["unwaited_s"] <= r["wall_s"]


# ---- profile / profiler -----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def step():
    torch.manual_seed(0)
    m = torch.nn.Linear(32, 16)
    x = torch.randn(8, 32)
    return m, lambda: m(x).sum().backward()


# under contention with several spinning intra-op threads the unwaited kind warns (tests/test_step_time_spin.py)
@pytest.mark.filterwarnings("ignore:.*intra-op threads whose OpenMP runtime spin-waits:UserWarning")
def test_profile_divides_by_the_chosen_step_time(step):
    m, fn = step
    for kind in ("median", "min", "unwaited"):
        r = roofline.steady(fn, m, warmup=1, repeat=3, step_time=kind, ceilings="theoretical")
        walls = [q.wall_time for q in r.repeats]
        assert r.spread["wall_time"]["median"] == statistics.median(walls)  # the spread stays the wall times'
        t = r.meta["steady"].get("step_time")
        if kind == "median":
            assert r.wall_time == statistics.median(walls) and t is None
            assert "step time" not in r.steady_line()
        elif kind == "min":
            assert r.wall_time == min(walls) and t == {"kind": "min", "wall_median": statistics.median(walls)}
            assert "the least wall time" in r.steady_line() and r.summary().split("\n")[1].endswith(" least wall")
        else:
            own = [q.meta["load"].get("step") or {} for q in r.repeats]
            # each step's own window's unwaited time (read right outside its clock reads), at most its wall time,
            # where the statistics exist, else its wall time; the median of those
            expect = [min(o["unwaited_s"], w) if o else w for o, w in zip(own, walls)]
            assert r.wall_time == pytest.approx(statistics.median(expect)) and t["kind"] == "unwaited"
            assert t["values"] == pytest.approx(expect) and "UNWAITED" in r.steady_line()
            # the summary's header and the HTML page's header facts say it too
            assert r.summary().split("\n")[1].endswith(" unwaited step time")  # after the steady-state line
            assert "UNWAITED (the threads&#x27; waits for a CPU taken out); median wall time" in r.to_html()
            assert ("missing" in t) == ({} in own)
        back = roofline.load(r.to_json())
        assert back.meta["steady"].get("step_time") == t and back.wall_time == r.wall_time
        # the MFU divides by that time: of the same steps, each kind's MFU times its time is the same number
        med = SteadyReport._from_runs(r.repeats, warmup=1, ceilings="theoretical")
        assert r.totals()["mfu"] * r.wall_time == pytest.approx(med.totals()["mfu"] * med.wall_time, rel=1e-9)


def test_step_time_is_checked_before_anything_runs(step):
    m, _ = step
    ran = []
    with pytest.raises(ValueError, match="step_time must be one of 'median', 'min', 'unwaited', 'unwaited_min', 'ops_min', got 'max'"):
        roofline.steady(lambda: ran.append(1), m, step_time="max")
    with pytest.raises(TypeError, match="steady: step_time must be one of"):
        roofline.steady(lambda: ran.append(1), m, step_time=None)
    with pytest.raises(ValueError, match="profile: step_time must be one of"):
        roofline.profile(m, step_time="mean")
    assert ran == []


def test_the_profiler_takes_a_step_time(step):
    m, fn = step
    with roofline.profile(m, schedule=roofline.schedule(warmup=1, active=3), step_time="min",
                          ceilings="theoretical") as prof:
        for _ in range(4):
            fn()
            prof.step()
    (r,) = prof.reports
    assert r.wall_time == min(r.spread["wall_time"]["values"]) and r.meta["steady"]["step_time"]["kind"] == "min"


def test_the_callbacks_take_a_step_time_and_log_which():
    import types

    from roofline.integrations import _run

    kw = dict(steps=(2, 4), schedule=None, monitor=False, output_dir=None, tokens=None, timing="model",
              ceilings="measured", attention=None, gather_timeout=10.0, log=True)
    assert _run.Options("cb", **kw, step_time="unwaited").step_time == "unwaited"
    assert _run.Options("cb", **kw).step_time == "median"
    with pytest.raises(ValueError, match="step_time must be one of"):
        _run.Options("cb", **kw, step_time="fastest")

    def figures(meta):
        totals = {"mfu": 0.25, "mbu": 0.5, "achieved_flops": 1e9, "achieved_bytes": 2e9, "compute_share": 0.75}
        return _run.Run.profile_figures(types.SimpleNamespace(totals=lambda: totals, wall_time=0.5, meta=meta), None)

    # the codes as docs/training.md lists them: 0 the median wall time, 1 the least, 2 the unwaited time
    assert figures({})["roofline/profile/step_time_code"] == 0.0
    assert figures({"steady": {"step_time": {"kind": "min"}}})["roofline/profile/step_time_code"] == 1.0
    assert figures({"steady": {"step_time": {"kind": "unwaited"}}})["roofline/profile/step_time_code"] == 2.0
    # a block whose own threads waited for a CPU logs the contention flag
    busy = figures({"contention": ["this process's threads waited 90% of their runnable time for a CPU (9.0 ms)"]})
    assert busy["roofline/profile/contention"] == 1.0


def test_unwaited_time_never_below_one_threads_time_on_a_cpu():
    # the waits are pooled over the threads: the main thread 18 ms on a CPU and 2 ms waiting, a helper 2 ms on a
    # CPU and 18 ms waiting, in a 20 ms window on 2 CPUs: 20 * 20 / 40 = 10 ms by the share, but the main thread
    # alone ran 18 ms: 18 ms
    assert C.unwaited(0.020, 0.020, 0.020, 2) == pytest.approx(0.010)
    assert C.unwaited(0.020, 0.020, 0.020, 2, busiest=0.018) == pytest.approx(0.018)
    # and never above the wall time
    assert C.unwaited(0.020, 0.020, 0.020, 2, busiest=0.025) == pytest.approx(0.020)
    before = {"1": (0, 0), "2": (0, 0)}
    after = {"1": (18_000_000, 2_000_000), "2": (2_000_000, 18_000_000)}
    assert C._thread_deltas(before, after)[2] == pytest.approx(0.018, abs=1e-13)
    assert C.step_readings(before, after, 0.020)["unwaited_s"] == pytest.approx(0.018)
    # each thread from its own time on a CPU (not its waits): 7 ms and 1 ms since; a thread started in the window
    # counts from zero; one that ended is left out; one whose reading went back counts zero; none: 0
    assert C._thread_deltas({"1": (3_000_000, 9_000_000), "2": (0, 0)},
                            {"1": (10_000_000, 9_500_000), "2": (1_000_000, 0)})[2] == pytest.approx(0.007, abs=1e-13)
    assert C._thread_deltas({"9": (0, 0)}, {"3": (5_000_000, 0)})[2] == pytest.approx(0.005, abs=1e-13)
    assert C._thread_deltas({"1": (5_000_000, 0)}, {"1": (4_000_000, 0)})[2] == 0
    assert C._thread_deltas({"9": (0, 0)}, {})[2] == 0
    # threads that only waited: nothing ran, no time; no usable CPU count is taken as one
    assert C.unwaited(1.0, 0.0, 0.5, 2) == 0.0
    assert C.unwaited(1.0, 0.2, 0.2, 0) == pytest.approx(0.5)


def test_a_blocks_thread_readings_to_the_microsecond():
    # 1,234,567 ns on a CPU and 2,345,678 waiting (two threads), in a 4 ms block on 2 CPUs
    start = _snap(0.0, {"1": (0, 0), "2": (0, 0)})
    end = _snap(0.004, {"1": (1_000_000, 2_000_000), "2": (234_567, 345_678)})
    got = C._thread_readings(start, end, 0.004)
    assert got["threads_cpu_s"] == 0.001235 and got["threads_wait_s"] == 0.002346
    assert got["wait_share"] == 0.6552  # 2345678 / 3580245 = 0.65518...
    # 4 * 1234567 / 3580245 = 1.37931... ms, above 1234567 / 2 ns and the busier thread's 1 ms
    assert got["unwaited_s"] == 0.001379
    # either reading missing (no scheduler statistics): no thread figures at all
    assert C._thread_readings(_snap(0.0, None), end, 0.004) == {}
    assert C._thread_readings(start, _snap(0.004, {}), 0.004) == {}
    # nothing ran and nothing waited: no share, the block's time
    idle = C._thread_readings(start, _snap(0.004, {"1": (0, 0), "2": (0, 0)}), 0.004)
    assert idle["wait_share"] == 0.0 and idle["unwaited_s"] == 0.004
    # one thread ran 3 ms and waited 9 ms, another waited 1 ms, in a 12 ms block on 2 CPUs: by the share 12 * 3 / 13
    # = 2.77 ms, below the first thread's own 3 ms on a CPU: 3 ms
    busy = C._thread_readings(start, _snap(0.012, {"1": (3_000_000, 9_000_000), "2": (0, 1_000_000)}), 0.012)
    assert busy["unwaited_s"] == 0.003
    # only waited: all of the runnable time a wait
    waited = C._thread_readings(start, _snap(0.004, {"1": (0, 3_000_000), "2": (0, 0)}), 0.004)
    assert waited["wait_share"] == 1.0 and waited["unwaited_s"] == 0.0
