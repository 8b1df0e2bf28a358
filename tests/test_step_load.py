"""The step's own scheduler readings (``meta["load"]["step"]``): every thread's time on a CPU and waiting for one
over exactly the block's timed window, read next to its clock reads, and the unwaited step time taken from them.
The block's ``meta["load"]`` spans its entry and exit too; scaling the step's wall time by that interval's share
misplaced the waits that fell outside the step (a least unwaited time well under the step's time on a CPU)."""

from __future__ import annotations

import os
import sys
import time
import types

import pytest

torch = pytest.importorskip("torch")

import roofline  # noqa: E402
from roofline._capture import _session  # noqa: E402
from roofline._hardware import _contention  # noqa: E402
from roofline._loops import _steady  # noqa: E402

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="scheduler statistics are Linux's")


@linux
def test_a_timed_block_records_its_steps_own_readings():
    x = 0
    with roofline.measure() as r:
        t0 = time.thread_time()
        while time.thread_time() - t0 < 0.05:  # 50 ms on a CPU, in this thread
            x += 1
        spent = time.thread_time() - t0
    step = r.meta["load"]["step"]
    assert set(step) == {"wall_s", "threads_cpu_s", "threads_wait_s", "unwaited_s"}
    # the readings' window: the step's and the readings at its edges (microseconds; a millisecond at most here,
    # once any wait for a CPU inside the window, a time slice given to another process, is left out)
    assert r.wall_time <= step["wall_s"] + 1e-6
    assert step["wall_s"] - r.wall_time - step["threads_wait_s"] < 0.001
    # this thread's 50 ms are in it
    assert step["threads_cpu_s"] >= spent
    assert step["threads_wait_s"] >= 0 and 0 < step["unwaited_s"] <= step["wall_s"]
    # the block's own interval holds the step's and more
    assert r.meta["load"]["wall_s"] >= r.wall_time


def test_count_only_blocks_have_no_step_readings():
    with roofline.measure(timing=None) as r:
        torch.ones(3) + 1
    assert "step" not in (r.meta.get("load") or {})


def test_the_readings_are_the_windows_and_go_into_the_unwaited_time(monkeypatch):
    # every thread's (ns on a CPU, ns waiting): thread 1 ran 10 ms and waited 5, thread 2 (started in the window)
    # ran 2 ms and waited 3, thread 3 ended in the window (left out)
    readings = iter([{"1": (100_000_000, 40_000_000), "3": (5, 5)},
                     {"1": (110_000_000, 45_000_000), "2": (2_000_000, 3_000_000)}])
    monkeypatch.setattr(_session, "thread_stats", lambda: next(readings))
    with roofline.measure() as r:
        torch.ones(3) + 1
        time.sleep(0.03)  # a window of 30 ms or more
    step = r.meta["load"]["step"]
    assert step["threads_cpu_s"] == pytest.approx(0.012) and step["threads_wait_s"] == pytest.approx(0.008)
    # the window's time scaled by the share of runnable time on a CPU, 12 / 20 (at least 18 ms: above the 12 ms of
    # CPU time over the CPUs, its floor, and below the window's time, its ceiling)
    assert step["wall_s"] >= r.wall_time >= 0.03
    assert step["unwaited_s"] == pytest.approx(step["wall_s"] * 12 / 20, abs=1e-6)
    # the step's unwaited time: the window's, which is below the step's wall time here (18 ms of at least 30)
    s = _steady._step_time("unwaited", [r], r.wall_time, threads=1, env={})[1]
    assert s["values"] == [step["unwaited_s"]] and step["unwaited_s"] < r.wall_time


@pytest.mark.parametrize("missing", [None, {}])
def test_no_reading_no_step(monkeypatch, missing):
    monkeypatch.setattr(_session, "thread_stats", lambda: missing)
    with roofline.measure() as r:
        torch.ones(3) + 1
    assert "step" not in r.meta["load"]
    assert _contention.step_readings({"1": (0, 0)}, {"1": (1, 1)}, None) is None
    assert _contention.step_readings({"1": (0, 0)}, {"1": (1, 1)}, 0.0) is None


def _run(wall, load):
    return types.SimpleNamespace(wall_time=wall, meta={"load": load, "contention": []})


def test_the_unwaited_step_time_takes_the_steps_own_reading_before_the_blocks_share():
    # block: 25 ms, 20 ms unwaited (share 0.8); the step inside it: 20 ms of wall, its own window 25 ms (a wait of
    # 5 ms fell in a reading) of which 12 ms unwaited: 12 ms, not the window's share 12/25 of 20 ms (9.6 ms)
    runs = [_run(0.020, {"wall_s": 0.025, "unwaited_s": 0.020, "step": {"wall_s": 0.025, "unwaited_s": 0.012}}),
            _run(0.030, {"wall_s": 0.040, "unwaited_s": 0.030, "step": {"wall_s": 0.030, "unwaited_s": 0.018}}),
            _run(0.020, {"wall_s": 0.025, "unwaited_s": 0.020})]  # saved before 0.6: the block's share
    t, out = _steady._step_time("unwaited", runs, 0.02, threads=1, env={})
    assert out["values"] == pytest.approx([0.012, 0.018, 0.020 * 0.8])
    assert t == pytest.approx(0.016)  # the median
    t, _ = _steady._step_time("unwaited_min", runs, 0.02, threads=1, env={})
    assert t == pytest.approx(0.012)


@pytest.mark.parametrize("bad", [{"unwaited_s": 0.0, "wall_s": 0.02}, {"unwaited_s": -0.001, "wall_s": 0.02},
                                 {"unwaited_s": 0.021, "wall_s": 0.02}, {"unwaited_s": "12", "wall_s": 0.02},
                                 {"unwaited_s": None, "wall_s": 0.02}, {"unwaited_s": 0.01, "wall_s": None},
                                 {"unwaited_s": 0.01}, "x"])
def test_a_step_reading_out_of_range_falls_back_to_the_blocks_share(bad):
    runs = [_run(0.020, {"wall_s": 0.025, "unwaited_s": 0.020, "step": bad})]
    t, out = _steady._step_time("unwaited", runs, 0.02, threads=1, env={})
    assert out["values"] == pytest.approx([0.016]) and "missing" not in out


@linux
def test_a_threads_cpu_time_is_read_up_to_date_from_its_cpu_clock():
    import threading

    tid = threading.get_native_id()
    x, t0 = 0, time.thread_time()
    while time.thread_time() - t0 < 0.01:  # running: schedstat's own figure may trail here
        x += 1
    before = time.thread_time_ns()
    got = _contention.thread_cpu_ns(tid)
    after = time.thread_time_ns()
    assert before <= got <= after  # the calling thread's own clock, read between two readings of it
    assert _contention.thread_cpu_ns(os.getppid()) is None  # another process's thread: no reading, no exception
    stats = _contention.thread_stats()
    assert str(tid) in stats and stats[str(tid)][0] >= got


def test_the_cpu_clock_reading_replaces_schedstats_own(monkeypatch):
    monkeypatch.setattr(_contention, "_schedstats", lambda tids: {"11": (5, 7), "12": (6, 8)})
    monkeypatch.setattr(_contention, "thread_cpu_ns", lambda tid: {"11": 123, "12": None}[tid])
    assert _contention.thread_stats() == {"11": (123, 7), "12": (6, 8)}  # no clock reading: schedstat's stands


@pytest.mark.parametrize("allowed,machine,cpus", [({0}, 4, 1), ({0, 1, 2, 3}, 4, 4), (None, 4, 4), (set(), 2, 2)])
def test_step_readings_to_the_microsecond_over_the_cpus_this_process_may_use(monkeypatch, allowed, machine, cpus):
    monkeypatch.setattr(_contention, "_affinity", lambda: allowed)
    monkeypatch.setattr(_contention, "_cpu_count", lambda: machine)
    # two threads, together 8,000,600 ns on a CPU and 8,004,600 waiting over a 10 ms window
    got = _contention.step_readings({"1": (1_000_000, 2_000_000), "2": (0, 0)},
                                    {"1": (5_000_300, 6_002_300), "2": (4_000_300, 4_002_300)}, 0.010)
    assert got["threads_cpu_s"] == 0.008001 and got["threads_wait_s"] == 0.008005  # rounded to the microsecond
    assert got["wall_s"] == 0.010
    assert _contention.step_readings({"1": (0, 0)}, {"1": (1, 1)}, 0.01234567)["wall_s"] == 0.012346
    # the window's share on a CPU (about a half: 5 ms), floored at the CPU time spread over the usable CPUs and
    # at the busier thread's own 4.0003 ms
    share = 0.010 * 8_000_600 / 16_005_200
    assert got["unwaited_s"] == round(max(share, 0.0080006 / cpus, 0.0040003), 6)


def test_a_step_reading_of_all_its_window_is_taken_and_one_past_it_is_not():
    runs = [_run(0.020, {"wall_s": 0.025, "unwaited_s": 0.020, "step": {"wall_s": 0.0201, "unwaited_s": 0.0201}}),
            _run(0.020, {"wall_s": 0.025, "unwaited_s": 0.020, "step": {"wall_s": 0.0201, "unwaited_s": 0.0202}}),
            _run(0.020, {"wall_s": 0.025, "unwaited_s": 0.020, "step": {"wall_s": 0.0201, "unwaited_s": 0.0199}})]
    t, out = _steady._step_time("unwaited", runs, 0.02, threads=1, env={})
    # the first: all of its window unwaited, held to its wall time; the second past its window: refused (the
    # block's share); the third just under the wall time: taken
    assert out["values"] == pytest.approx([0.020, 0.016, 0.0199], rel=1e-9)


def test_steps_without_any_reading_are_said_to_be_missing():
    runs = [_run(0.020, {"wall_s": 0.025, "unwaited_s": 0.020, "step": {"wall_s": 0.020, "unwaited_s": 0.012}}),
            _run(0.020, {})]
    t, out = _steady._step_time("unwaited", runs, 0.02, threads=1, env={})
    assert out["values"] == pytest.approx([0.012, 0.020])
    assert out["missing"] == "no scheduler statistics for some steps: their wall time stands"


def test_a_saved_blocks_load_with_no_wait_is_a_reading():
    # a report saved before 0.6 from an idle machine: its block never waited (unwaited_s == wall_s)
    runs = [_run(0.020, {"wall_s": 0.025, "unwaited_s": 0.025})]
    t, out = _steady._step_time("unwaited", runs, 0.02, threads=1, env={})
    assert out["values"] == [0.020] and "missing" not in out


def test_thread_times_need_both_readings():
    s = _contention.snapshot()
    with_threads = s._replace(threads={"1": (10, 20)})
    assert _contention.thread_times(s._replace(threads=None), with_threads) is None
    assert _contention.thread_times(with_threads, s._replace(threads={})) is None
    assert _contention.thread_times(s._replace(threads={"1": (4, 5)}), with_threads) == pytest.approx((6e-9, 15e-9))
    # thread 1 unchanged, thread 2 new (from zero), thread 3 ended (left out), thread 4 read lower (never below 0)
    before = {"1": (10, 20), "3": (50, 50), "4": (9, 9)}
    after = {"1": (10, 20), "2": (3, 4), "4": (7, 9)}
    assert _contention.thread_times(s._replace(threads=before), s._replace(threads=after)) == pytest.approx((3e-9, 4e-9), rel=1e-9)
