"""``step_time="ops_min"``: the step composed of each op call's least time over the measured steps plus the least
time outside ops (roofline._loops._steady._ops_min). Real measured steps give the reports; their op times and wall
times are then overwritten with values written here, so every expected figure is arithmetic in the test."""

from __future__ import annotations

import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import roofline  # noqa: E402
from roofline import SteadyReport  # noqa: E402

MS = 1e-3


@pytest.fixture(scope="module")
def step():
    torch.manual_seed(0)
    m = torch.nn.Linear(8, 4)
    x = torch.randn(2, 8)
    return m, lambda: m(x).sum().backward()


def _runs(step, n=3):
    m, fn = step
    r = roofline.steady(fn, m, warmup=1, repeat=n, timing="op", ceilings="theoretical")
    return r.repeats


def _set_times(run, durations_ms, gap_ms):
    """Lay the run's op calls back to back with ``durations_ms`` (one per call, in call order), ``gap_ms`` before the
    first, and make its wall time their sum plus the gap."""
    rec = run.records
    assert len(rec) == len(durations_ms)
    t = gap_ms * MS
    for k, d in enumerate(durations_ms):
        rec["t_start"][k] = t
        rec["t_end"][k] = t + d * MS
        t += d * MS
    run.wall_time = t


def test_the_step_is_each_calls_least_time_plus_the_least_time_between_ops(step):
    runs = _runs(step)
    n = len(runs[0].records)
    assert n >= 3 and all(len(r.records) == n for r in runs)
    base = [1.0] * n
    # each step disturbed somewhere else: call 0 by 5 ms in step 1, call 1 by 3 ms in step 2, call 2 by 2 ms in
    # step 3; outside ops 4, 2 and 3 ms
    d1, d2, d3 = list(base), list(base), list(base)
    d1[0] += 5.0
    d2[1] += 3.0
    d3[2] += 2.0
    for r, d, gap in zip(runs, (d1, d2, d3), (4.0, 2.0, 3.0)):
        _set_times(r, d, gap)
    rep = SteadyReport._from_runs(runs, warmup=1, ceilings="theoretical", step_time="ops_min")
    # least per call: 1 ms each, n calls; least outside ops: 2 ms
    assert rep.wall_time == pytest.approx((n * 1.0 + 2.0) * MS)
    st = rep.meta["steady"]["step_time"]
    assert st["kind"] == "ops_min" and "missing" not in st
    assert st["ops"]["least"] == pytest.approx(n * MS) and st["ops"]["between_least"] == pytest.approx(2 * MS)
    # each step's time in ops: n + 5, n + 3, n + 2 ms; median n + 3
    assert st["ops"]["values"] == pytest.approx([(n + 5) * MS, (n + 3) * MS, (n + 2) * MS])
    assert st["ops"]["median"] == pytest.approx((n + 3) * MS)
    # walls n + 9, n + 5, n + 5 ms: the median wall time is said beside it, and the spread keeps the wall times
    assert st["wall_median"] == pytest.approx((n + 5) * MS)
    assert rep.spread["wall_time"]["min"] == pytest.approx((n + 5) * MS)
    # what it says: the first line, the summary's header, the HTML page's facts
    line = rep.steady_line()
    assert f"step time {n + 2:.1f} ms: LEAST OPS" in line
    assert f"{n:.1f} ms, plus the least time between ops, 2.0 ms" in line
    assert rep.summary().split("\n")[1].endswith(f"{n + 2:.1f} ms step time of least ops")
    assert "LEAST OPS (each op call&#x27;s least time over the measured steps" in rep.to_html()
    # the MFU divides by it: the same FLOPs over n + 2 ms instead of the median wall time's n + 5
    med = SteadyReport._from_runs(runs, warmup=1, ceilings="theoretical")
    assert med.wall_time == pytest.approx((n + 5) * MS)
    assert rep.totals()["mfu"] == pytest.approx(med.totals()["mfu"] * (n + 5) / (n + 2), rel=1e-9)
    back = roofline.load(rep.to_json())
    assert back.wall_time == rep.wall_time and back.meta["steady"]["step_time"] == st


def test_each_interval_between_ops_is_its_own_part(step):
    runs = _runs(step)[:2]
    n = len(runs[0].records)
    for r in runs:
        _set_times(r, [1.0] * n, 0.0)
    # step 1: 1 ms before its first call and 3 ms after its last; step 2: 3 ms before and 1 ms after
    for r, before, after in zip(runs, (1.0, 3.0), (3.0, 1.0)):
        r.records["t_start"] += before * MS
        r.records["t_end"] += before * MS
        r.wall_time = (before + n + after) * MS
    rep = SteadyReport._from_runs(runs, warmup=1, ceilings="theoretical", step_time="ops_min")
    # both walls are n + 4 ms; the least of each interval: 1 ms before, 0 between, 1 ms after
    assert rep.wall_time == pytest.approx((n + 2.0) * MS)
    assert rep.meta["steady"]["step_time"]["ops"]["between_least"] == pytest.approx(2.0 * MS)


def test_a_step_with_ops_faster_than_the_rest_never_goes_below_zero_outside_ops(step):
    runs = _runs(step)
    n = len(runs[0].records)
    for r, gap in zip(runs, (0.0, 0.5, 1.0)):
        _set_times(r, [2.0] * n, gap)
    rep = SteadyReport._from_runs(runs, warmup=1, ceilings="theoretical", step_time="ops_min")
    assert rep.wall_time == pytest.approx(2.0 * n * MS)  # outside ops: 0 ms at least
    # and never more than the least wall time
    assert rep.wall_time <= min(r.wall_time for r in runs)


def test_overlapping_op_times_leave_the_median_wall_time_and_say_why(step):
    runs = _runs(step)
    n = len(runs[0].records)
    for r, gap in zip(runs, (1.0, 2.0, 3.0)):
        _set_times(r, [1.0] * n, gap)
    # the third call of the second step starts half a millisecond before the second one ends (another thread)
    assert n >= 3
    runs[1].records["t_start"][2] -= 0.5 * MS
    rep = SteadyReport._from_runs(runs, warmup=1, ceilings="theoretical", step_time="ops_min")
    assert rep.wall_time == pytest.approx((n + 2.0) * MS)  # the median wall time
    st = rep.meta["steady"]["step_time"]
    assert "ops" not in st and "overlap" in st["missing"]
    assert "the median wall time (step_time='ops_min' could not be composed" in rep.steady_line()
    assert rep.summary().split("\n")[1].endswith(" wall")
    assert "least ops not composed" in rep.to_html()


def test_ops_that_touch_or_take_no_time_do_not_overlap(step):
    runs = _runs(step)
    n = len(runs[0].records)
    for r, gap in zip(runs, (1.0, 2.0, 3.0)):
        _set_times(r, [1.0] * n, gap)
    # the clocks' rounding: a call starting up to a nanosecond before the previous one ended touches it, and a call
    # that took no time is a call; neither is an overlap
    rec = runs[0].records
    rec["t_start"][1] = rec["t_end"][0] - 1e-9
    rec = runs[1].records
    rec["t_start"][1] = rec["t_end"][0] - 0.5e-9
    rec = runs[2].records
    rec["t_end"][0] = rec["t_start"][0]
    rep = SteadyReport._from_runs(runs, warmup=1, ceilings="theoretical", step_time="ops_min")
    assert "missing" not in rep.meta["steady"]["step_time"]
    assert rep.wall_time < min(r.wall_time for r in runs)


def test_untimed_steps_leave_the_median_wall_time_and_say_why(step):
    m, fn = step
    r = roofline.steady(fn, m, warmup=1, repeat=3, timing="model", ceilings="theoretical")
    rep = SteadyReport._from_runs(r.repeats, warmup=1, ceilings="theoretical", step_time="ops_min")
    st = rep.meta["steady"]["step_time"]
    assert rep.wall_time == r.wall_time and "ops" not in st and "timing='op'" in st["missing"]
    # and an op call without a time
    runs = _runs(step)
    runs[0].records["t_end"][0] = np.nan
    rep = SteadyReport._from_runs(runs, warmup=1, ceilings="theoretical", step_time="ops_min")
    st = rep.meta["steady"]["step_time"]
    assert st["missing"] == "some op calls have no time: the median wall time stands"


def test_ops_min_needs_op_timing_and_is_refused_before_anything_runs(step):
    m, _ = step
    ran = []
    msg = "step_time='ops_min' composes the step from each op call's time, which needs timing='op'"
    with pytest.raises(ValueError, match="steady: " + msg + r" \(every op timed\), got timing='model'"):
        roofline.steady(lambda: ran.append(1), m, step_time="ops_min")
    with pytest.raises(ValueError, match="profile: " + msg):
        roofline.profile(m, step_time="ops_min", timing=None)
    from roofline.integrations import _run

    kw = dict(steps=(2, 4), schedule=None, monitor=False, output_dir=None, tokens=None, timing="model",
              ceilings="measured", attention=None, gather_timeout=10.0, log=True)
    with pytest.raises(ValueError, match=msg):
        _run.Options("cb", **kw, step_time="ops_min")
    assert _run.Options("cb", **dict(kw, timing="op"), step_time="ops_min").step_time == "ops_min"
    assert ran == []


def test_the_profiler_composes_each_cycle(step):
    m, fn = step
    with roofline.profile(m, schedule=roofline.schedule(warmup=1, active=4), step_time="ops_min", timing="op",
                          ceilings="theoretical") as prof:
        for _ in range(5):
            fn()
            prof.step()
    (r,) = prof.reports
    st = r.meta["steady"]["step_time"]
    assert st["kind"] == "ops_min" and "missing" not in st
    # composed from the same steps' records and waits: recomputed here from them, part by part (each call; the
    # time before the first call, between calls, after the last), each less the waits for a CPU inside it
    parts = []
    for q in r.repeats:
        s, e = q.records["t_start"], q.records["t_end"]
        waits, at_end = q.op_waits
        before, after, read0, read1 = waits.T
        cost = min(x for q2 in r.repeats for x in q2.op_waits[0][:, 2:].ravel())  # the quickest read of all
        # a call: its time and its two reads of the waits, less what was waited between them and the reads' cost
        calls = [e[k] - s[k] + read0[k] + read1[k] - (after[k] - before[k]) - 2 * cost for k in range(len(s))]
        # an interval: less what was waited in it and its two reads' cost (the block's own at its start and end)
        gaps = ([s[0] - before[0] - 2 * cost]
                + [s[k] - e[k - 1] - (before[k] - after[k - 1]) - 2 * cost for k in range(1, len(s))]
                + [q.wall_time - e[-1] - (at_end - after[-1]) - 2 * cost])
        parts.append([max(x, 0.0) for x in calls + gaps])
    expect = sum(min(col) for col in zip(*parts))
    assert r.wall_time == pytest.approx(expect)
    # at most a step's wall time plus its reads' excess over the quickest read (each read sits in two parts, and
    # each part loses the quickest read once per read it holds)
    assert r.wall_time <= min(q.wall_time + 2 * (q.op_waits[0][:, 2:] - cost).sum() for q in r.repeats) + 1e-12


def test_waits_for_a_cpu_are_taken_out_of_each_part(step):
    runs = _runs(step)
    n = len(runs[0].records)
    # every step's first call took 5 ms instead of 1: in steps 1 and 2 it waited 4 ms for a CPU (recorded), in
    # step 3 its thread was not the block's (its wait unknown: NaN); 3 ms before the first call in every step, of
    # which steps 1 and 3 waited 2 ms and step 2 waited 0.5 ms
    for r, before_wait, op_wait in zip(runs, (2.0, 0.5, 2.0), (4.0, 4.0, None)):
        _set_times(r, [5.0] + [1.0] * (n - 1), 3.0)
        w = np.zeros((n, 4))  # the reads of the waits took no time here (the next test has them)
        w[:, :2] = before_wait * MS  # waited since the block's start, before and after each call
        if op_wait is None:
            w[0] = np.nan
        else:
            w[0, 1] += op_wait * MS
            w[1:, :2] += op_wait * MS
        r.op_waits = (w, w[-1, 1])  # nothing waited after the last call
    rep = SteadyReport._from_runs(runs, warmup=1, ceilings="theoretical", step_time="ops_min")
    st = rep.meta["steady"]["step_time"]
    # first call: 5 - 4 = 1 ms in steps 1 and 2 (step 3: 5 ms, nothing known to take out); the others 1 ms each;
    # before the first call: 3 - 2 = 1, 3 - 0.5 = 2.5, 3 - 2 = 1 ms: 1 ms
    assert st["ops"]["least"] == pytest.approx(n * MS) and st["ops"]["between_least"] == pytest.approx(1 * MS)
    assert rep.wall_time == pytest.approx((n + 1) * MS)
    # taken out, per step on average: in ops (4 + 4 + 0) / 3 ms, between ops (2 + 0.5 + 0) / 3 ms (step 3's waits
    # around its first call are unknown: nothing is taken out of the intervals next to it)
    assert st["waits"]["ops"] == pytest.approx(8 / 3 * MS) and st["waits"]["between"] == pytest.approx(2.5 / 3 * MS)
    # without the waits: the first call's least is 5 ms, the interval's 3 ms
    for r in runs:
        r.op_waits = None
    plain = SteadyReport._from_runs(runs, warmup=1, ceilings="theoretical", step_time="ops_min")
    assert plain.wall_time == pytest.approx((n + 4 + 3) * MS) and "waits" not in plain.meta["steady"]["step_time"]


def test_the_reads_of_the_waits_are_taken_out_by_the_quickest_read(step):
    runs = _runs(step, 2)
    n = len(runs[0].records)
    for r in runs:
        _set_times(r, [1.0] * n, 0.5)  # 0.5 ms before the first call, then back to back, nothing waited
        w = np.zeros((n, 4))
        w[:, 2] = 0.003 * MS  # each read of the waits before a call took 3 us, each after it 2 us (outside the
        w[:, 3] = 0.002 * MS  # call's own times, inside the intervals around it)
        r.op_waits = (w, 0.0)
    rep = SteadyReport._from_runs(runs, warmup=1, ceilings="theoretical", step_time="ops_min")
    st = rep.meta["steady"]["step_time"]
    # a call: 1 ms + 3 + 2 us of its reads - 2 x 2 us (the quickest read); an interval: its recorded time less 2 x 2
    # us, never below 0 (0.5 ms before the first call, 0 between calls and after the last)
    assert st["ops"]["least"] == pytest.approx(n * (1.0 + 0.001) * MS)
    assert st["ops"]["between_least"] == pytest.approx((0.5 - 0.004) * MS)
    # no call's waits known (every op another thread's, say): nothing taken out, and not said to be
    for r in runs:
        r.op_waits = (np.full((n, 4), np.nan), 0.0)
    st = SteadyReport._from_runs(runs, warmup=1, ceilings="theoretical", step_time="ops_min").meta["steady"]["step_time"]
    assert "waits" not in st and st["ops"]["least"] == pytest.approx(n * MS)


def test_a_block_of_an_ops_min_loop_records_its_threads_waits(step):
    from roofline._hardware._contention import OP_WAITS
    from roofline._hardware import _contention

    m, fn = step
    if _contention.run_delay_ns() is None:
        pytest.skip("no scheduler statistics on this system")
    r = roofline.steady(fn, m, warmup=1, repeat=2, timing="op", step_time="ops_min")
    for q in r.repeats:
        waits, at_end = q.op_waits
        assert waits.shape == (len(q.records), 4) and np.isfinite(waits).all()
        # seconds waited since the block's start only grow: before <= after each call <= before the next <= the end
        flat = waits[:, :2].ravel()
        assert (flat >= 0).all() and (np.diff(flat) >= 0).all() and at_end >= flat[-1]
        # a read takes some time, far less than a millisecond
        assert (waits[:, 2:] > 0).all() and np.median(waits[:, 2:]) < 1e-3
    assert "waits" in r.meta["steady"]["step_time"] and OP_WAITS.get() is False
    # other step times and plain blocks record none
    assert roofline.steady(fn, m, warmup=0, repeat=1, timing="op").repeats[0].op_waits is None
    with roofline.measure(m, timing="op") as plain:
        fn()
    assert plain.op_waits is None

    # a step that raises leaves the switch as it was
    def bad():
        raise KeyError("step")

    with pytest.raises(KeyError):
        roofline.steady(bad, m, warmup=0, repeat=1, timing="op", step_time="ops_min")
    assert OP_WAITS.get() is False


def test_the_waits_recorded_are_the_readings_in_order(step, monkeypatch):
    # the thread's waits read through a counter that grows by 1000 ns a read: the block's start reads 1000, call k
    # (0-based) reads 1000 * (2k + 2) before and 1000 * (2k + 3) after, the block's end 1000 * (2n + 2)
    from roofline._capture import _modes, _session

    count = {"ns": 0}

    def reading():
        count["ns"] += 1000
        return count["ns"]

    monkeypatch.setattr(_session, "run_delay_ns", reading)
    monkeypatch.setattr(_modes, "run_delay_ns", reading)
    m, fn = step
    r = roofline.steady(fn, m, warmup=0, repeat=1, timing="op", step_time="ops_min").repeats[0]
    n = len(r.records)
    waits, at_end = r.op_waits
    # seconds since the block's start reading: (2k + 1) and (2k + 2) microseconds, the end (2n + 1)
    k = np.arange(n)
    assert waits[:, 0] == pytest.approx((2 * k + 1) * 1e-6) and waits[:, 1] == pytest.approx((2 * k + 2) * 1e-6)
    assert at_end == pytest.approx((2 * n + 1) * 1e-6) and count["ns"] == 1000 * (2 * n + 2)
    assert (waits[:, 2:] > 0).all()  # each read between two clock reads took some time
    # no scheduler statistics: nothing recorded, and the composition is of the parts' wall times
    monkeypatch.setattr(_session, "run_delay_ns", lambda: None)
    monkeypatch.setattr(_modes, "run_delay_ns", lambda: None)
    r = roofline.steady(fn, m, warmup=0, repeat=2, timing="op", step_time="ops_min")
    assert all(q.op_waits is None for q in r.repeats)
    st = r.meta["steady"]["step_time"]
    assert "ops" in st and "waits" not in st


def test_each_thread_reads_its_own_waits_and_a_forked_child_its_own(tmp_path):
    import os
    import threading

    from roofline._hardware import _contention

    if _contention.run_delay_ns() is None:
        pytest.skip("no scheduler statistics on this system")

    def direct():
        with open(f"/proc/self/task/{threading.get_native_id()}/schedstat") as f:
            return int(f.read().split()[1])

    # the value read is the calling thread's own (it only grows: the file's reading comes between two of ours)
    a, b, c = _contention.run_delay_ns(), direct(), _contention.run_delay_ns()
    assert a <= b <= c
    seen = {}
    t = threading.Thread(target=lambda: seen.update(mine=(_contention.run_delay_ns(), direct(),
                                                          _contention.run_delay_ns())))
    t.start()
    t.join()
    x, y, z = seen["mine"]
    assert x <= y <= z
    # each thread keeps its file open while it lives, and no longer: 20 threads that read leave no descriptor open
    import gc

    fds = len(os.listdir("/proc/self/fd"))
    threads = [threading.Thread(target=_contention.run_delay_ns) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) <= fds
    # a forked child reads its own thread's file, not the one its parent's thread kept open
    out = tmp_path / "child"
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            ok = _contention.run_delay_ns() <= direct() <= _contention.run_delay_ns()
            fresh = getattr(_contention._OWN, "f", None)
            own = fresh is not None and os.path.realpath(f"/proc/self/fd/{fresh.fd}").endswith(
                f"/task/{threading.get_native_id()}/schedstat")
            out.write_text(f"{ok} {own}")
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert out.read_text() == "True True"


def test_several_threads_under_contention_are_said_to_overstate_it(step, monkeypatch):
    runs = _runs(step)
    n = len(runs[0].records)
    for r in runs:
        _set_times(r, [1.0] * n, 1.0)
    # one thread, or no contention: nothing to say
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    for r in runs:
        r.meta["contention"] = ["this process's threads waited 50% of their runnable time for a CPU (10.0 ms)"]
    one = SteadyReport._from_runs(runs, warmup=1, ceilings="theoretical", step_time="ops_min")
    assert "threads" not in one.meta["steady"]["step_time"]
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    with pytest.warns(UserWarning, match="step_time='ops_min': the steps ran 2 intra-op threads under contention"):
        two = SteadyReport._from_runs(runs, warmup=1, ceilings="theoretical", step_time="ops_min")
    assert "torch.set_num_threads(1)" in two.meta["steady"]["step_time"]["threads"]
    assert "OVERSTATED: several intra-op threads under contention" in two.steady_line()
    assert two.wall_time == pytest.approx((n + 1) * MS)  # the figure itself is the same composition
    from roofline.integrations import _run

    logged = _run.Run.profile_figures(two, None)
    assert logged["roofline/profile/step_time_spin"] == 1.0 and logged["roofline/profile/step_time_code"] == 4.0
    for r in runs:
        r.meta["contention"] = []
    calm = SteadyReport._from_runs(runs, warmup=1, ceilings="theoretical", step_time="ops_min")
    assert "threads" not in calm.meta["steady"]["step_time"]
    assert "roofline/profile/step_time_spin" not in _run.Run.profile_figures(calm, None)


def test_the_descriptor_kept_open_is_not_inherited():
    import fcntl

    from roofline._hardware import _contention

    if _contention.run_delay_ns() is None:
        pytest.skip("no scheduler statistics on this system")
    # not passed on to programs the process runs (os.open: non-inheritable)
    _contention._forget_own()  # this thread's opened again
    assert _contention.run_delay_ns() is not None
    assert fcntl.fcntl(_contention._OWN.f.fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC


def test_a_saved_report_with_a_broken_composition_still_prints(step):
    import json

    m, fn = step
    r = roofline.steady(fn, m, warmup=1, repeat=2, timing="op", step_time="ops_min", ceilings="theoretical")
    d = json.loads(r.to_json())
    d["meta"]["steady"]["step_time"]["ops"] = {"least": "x"}  # a file edited by hand
    back = roofline.load(json.dumps(d))
    assert "could not be composed" in back.steady_line()
    assert "least ops not composed" in back.to_html()


def test_the_logged_code_says_ops_min_only_when_composed():
    from roofline.integrations import _run

    def code(step_time):
        totals = {"mfu": 0.25, "mbu": 0.5, "achieved_flops": 1e9, "achieved_bytes": 2e9, "compute_share": 0.75}
        rep = types.SimpleNamespace(totals=lambda: totals, wall_time=0.5, meta={"steady": {"step_time": step_time}})
        return _run.Run.profile_figures(rep, None)["roofline/profile/step_time_code"]

    # docs/training.md: 4 the step composed of each op's least time; 0 when it could not be (the median wall time)
    assert code({"kind": "ops_min", "ops": {"least": 0.1, "between_least": 0.0, "median": 0.2, "values": [0.2]}}) == 4.0
    assert code({"kind": "ops_min", "missing": "some op calls have no time: the median wall time stands"}) == 0.0
