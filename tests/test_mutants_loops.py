"""Details of the step loops and the trainer callbacks' shared run (roofline/_loops/_monitor.py, roofline/_loops/_schedule.py,
roofline/integrations/_run.py, huggingface.py, lightning.py) that the broader tests leave open: the bounds on
what a long run keeps (the plan of each step's action, the trainer's names of the steps), and the small branches of
the callbacks. Expected values are the arithmetic written beside them."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import roofline  # noqa: E402
from _graph import ceilings  # noqa: E402
from roofline.integrations import _run as _core  # noqa: E402

CEIL = ceilings(vector=1e12, matrix=2e12, dram=1e11)


def _run(tmp_path, schedule, offset=0, delta=1, **kw):
    opts = _core.Options("cb", **{**dict(steps=None, schedule=schedule, monitor=False, output_dir=None, tokens=None,
                                         timing="model", ceilings=CEIL, attention=None, gather_timeout=10.0,
                                         log=True), **kw})
    return _core.Run(opts, None, offset=offset, output_dir=str(tmp_path), framework="test", delta=delta,
                     log=lambda values, step: None)


# ---- what a long run keeps ---------------------------------------------------------------------------------------
def test_the_plan_keeps_at_most_4097_steps_and_drops_those_2048_behind(tmp_path):
    """Each step's action is asked of the schedule once and kept. The plan holds at most 4096 steps: when step p
    makes it 4097, the steps before p - 2048 are dropped."""
    asked = []

    def sched(p):
        asked.append(p)
        return "none"

    run = _run(tmp_path, sched)
    assert run._plan == {0: "none"}  # the profiler's check of step 0 when the run was made
    asked.clear()  # and Options' own check
    for p in range(4096):
        run._action(p)
    assert sorted(run._plan) == list(range(4096))  # 4096 steps: none dropped yet
    assert run._action(7) == "none" and asked == list(range(1, 4096))  # kept: not asked again
    run._action(4096)  # the 4097th: steps 0 to 4096 - 2048 - 1 = 2047 dropped
    assert sorted(run._plan) == list(range(2048, 4097))
    for p in range(4097, 6144):
        run._action(p)
    assert sorted(run._plan) == list(range(2048, 6144))  # 4096 steps again (2048..6143): none dropped
    run._action(6144)  # 4097 again: steps before 6144 - 2048 = 4096 dropped
    assert sorted(run._plan) == list(range(4096, 6145))


def test_the_trainers_names_are_kept_for_the_latest_steps_and_the_steps_with_tokens(tmp_path):
    """The name of each step (the trainer's global step after it) is kept; when step p makes 4097 names, those of
    the steps before p - 2048 are dropped, except the steps whose tokens are kept for a report to come (here step
    3, a warm-up step of a cycle that never records)."""
    run = _run(tmp_path, lambda p: "warmup" if p == 3 else "none", offset=100)
    run.start()
    try:
        for p in range(4096):
            run.step(tokens=p, global_step=101 + p)  # the global step after step p: 100 + p + 1
        assert sorted(run._names) == list(range(4096)) and run._tokens == {3: 3}
        run.step(tokens=4096, global_step=101 + 4096)  # step 4096: 4097 names, steps 0..2047 dropped but 3
        assert sorted(run._names) == [3] + list(range(2048, 4097))
        assert run.trainer_step(3) == 104 and run.trainer_step(4096) == 100 + 4097
        # 2050 names now; the next drop when 1 + (p - 2048 + 1) = 4097, at p = 6143: steps before 4095 dropped, but 3
        for p in range(4097, 6143):
            run.step(global_step=101 + p)
        assert len(run._names) == 1 + 6142 - 2048 + 1
        run.step(global_step=101 + 6143)
        assert sorted(run._names) == [3] + list(range(4095, 6144))
        # a step whose name was dropped is named from the latest: 100 + 6144 after step 6143, + 1 per step
        assert run.trainer_step(0) == 100 + 6144 + (0 - 6144 + 1) * 1
    finally:
        run.stop()


# ---- the callbacks' arguments ------------------------------------------------------------------------------------
def _options(**kw):
    return _core.Options("cb", **{**dict(steps=None, schedule=None, monitor=True, output_dir=None, tokens=None,
                                         timing="model", ceilings=CEIL, attention=None, gather_timeout=10.0,
                                         log=True), **kw})


@pytest.mark.parametrize("value", [True, False, "10", None])
def test_gather_timeout_must_be_a_number_not_a_bool(value):
    with pytest.raises(TypeError, match=f"cb: gather_timeout must be a number of seconds, got {type(value).__name__}"):
        _options(gather_timeout=value)


@pytest.mark.parametrize("value", [0, 0.0, -1, float("inf"), float("nan")])
def test_gather_timeout_must_be_finite_and_positive(value):
    with pytest.raises(ValueError, match="cb: gather_timeout must be a finite number of seconds > 0"):
        _options(gather_timeout=value)


def test_gather_timeout_is_kept_as_a_float():
    o = _options(gather_timeout=3)
    assert o.gather_timeout == 3.0 and type(o.gather_timeout) is float
    assert _options(gather_timeout=1e-9).gather_timeout == 1e-9  # any time > 0


def test_tokens_false_none_or_a_callable():
    assert _options(tokens=False).tokens is False
    assert _options(tokens=None).tokens is None
    assert _options(tokens=len).tokens is len
    for bad in (True, 0, "input_ids"):
        with pytest.raises(TypeError, match=f"cb: token_count must be None .* got {type(bad).__name__}"):
            _options(tokens=bad)


def _no_write(monkeypatch):
    """os.access as for a folder this process may read and search but not write."""
    import os

    real = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: not (mode & os.W_OK) and real(path, mode))


def test_a_folder_that_is_not_writable_is_refused_naming_it(tmp_path, monkeypatch):
    _no_write(monkeypatch)
    with pytest.raises(PermissionError) as e:
        _core.check_output_dir("cb", "output_dir", str(tmp_path))
    assert str(e.value) == (f"cb: output_dir {str(tmp_path)!r}: the folder is not writable: the reports could not "
                            "be written there")
    below = tmp_path / "a" / "b"  # not made yet: the folder it would be made in is named
    with pytest.raises(PermissionError) as e:
        _core.check_output_dir("cb", "output_dir", str(below))
    assert str(e.value) == (f"cb: output_dir {str(below)!r}: the folder ({str(tmp_path)!r}, where it would be made) "
                            "is not writable: the reports could not be written there")


def test_a_writable_folder_is_accepted_as_its_absolute_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _core.check_output_dir("cb", "output_dir", "x/y") == str(tmp_path / "x" / "y")
    assert not (tmp_path / "x").exists()  # checked, nothing made


# ---- what a batch looks like in the monitor's signature ------------------------------------------------------------
def test_describe_reads_tensors_by_shape_dtype_device_and_plain_values_by_value():
    import types

    assert _core.describe(torch.zeros(2, 3)) == ("T", (2, 3), "torch.float32", "cpu")
    # a shape and a dtype without a device, or a shape and a device without a dtype: by type
    assert _core.describe(types.SimpleNamespace(shape=(2, 3), dtype="f4")) == "SimpleNamespace"
    assert _core.describe(types.SimpleNamespace(shape=(2, 3), device="cpu")) == "SimpleNamespace"
    assert _core.describe(types.SimpleNamespace(shape=(2,), dtype="f4", device="dev")) == ("T", (2,), "f4", "dev")
    assert _core.describe(None) is None
    assert _core.describe(True) is True and _core.describe(7) == 7 and _core.describe("ids") == "ids"
    assert _core.describe(2.5) == "float"  # a learning rate: by type
    assert _core.describe({1: torch.ones(4, dtype=torch.int64), "n": (3, None)}) == (
        "M", (("1", ("T", (4,), "torch.int64", "cpu")), ("n", ("tuple", (3, None)))))
    assert _core.describe([torch.ones(1)]) == ("list", (("T", (1,), "torch.float32", "cpu"),))


def test_describe_reads_eight_levels_of_containers():
    """Lists nested 9 deep around an int: the lists at depths 0 to 7 are read, the one at depth 8 by its type."""
    x = 5
    for _ in range(9):
        x = [x]
    expected = "list"
    for _ in range(8):
        expected = ("list", (expected,))
    assert _core.describe(x) == expected
    y = 5
    for _ in range(9):
        y = {"k": y}
    expected = "dict"  # 9 mappings: the one at depth 8 by its type
    for _ in range(8):
        expected = ("M", (("k", expected),))
    assert _core.describe(y) == expected


# ---- tokens ----------------------------------------------------------------------------------------------------------
class _Numel:
    def __init__(self, n):
        self.n = n

    def numel(self):
        return self.n


def test_batch_tokens_from_input_ids_or_the_attention_mask():
    assert _core.batch_tokens({"input_ids": torch.ones(2, 3), "attention_mask": torch.ones(5)}) == 2 * 3
    assert _core.batch_tokens({"input_ids": None, "attention_mask": torch.ones(4, 2)}) == 4 * 2
    assert _core.batch_tokens({"input_ids": [1, 2, 3], "attention_mask": torch.ones(7)}) == 7  # a list: no numel
    assert _core.batch_tokens({"input_ids": [1, 2, 3]}) is None
    assert _core.batch_tokens([torch.ones(3)]) is None  # not a mapping
    assert _core.batch_tokens({"input_ids": _Numel(2**63 - 1)}) == 2**63 - 1  # the largest int64
    assert _core.batch_tokens({"input_ids": _Numel(2**63)}) is None


def test_user_tokens_bounds():
    assert _core.user_tokens("cb", lambda b: 0, {}) == 0
    assert _core.user_tokens("cb", lambda b: 2**63 - 1, {}) == 2**63 - 1
    assert _core.user_tokens("cb", lambda b: None, {}) is None
    assert _core.user_tokens("cb", lambda b: torch.tensor(5), {}) == 5  # anything with __index__
    with pytest.raises(ValueError, match=r"^cb: tokens\(batch\) must return an int >= 0 or None, got -1$"):
        _core.user_tokens("cb", lambda b: -1, {})
    with pytest.raises(ValueError, match=r"^cb: tokens\(batch\) must return an int <= 2\*\*63 - 1 or None, got an "
                                         r"int of 64 bits$"):
        _core.user_tokens("cb", lambda b: 2**63, {})
    for bad in (True, 2.0, "3"):
        with pytest.raises(TypeError, match=f"cb: tokens\\(batch\\) must return an int >= 0 or None, got "
                                            f"{type(bad).__name__}"):
            _core.user_tokens("cb", lambda b, bad=bad: bad, {})


def test_finite_is_a_finite_int_or_float_not_a_bool():
    assert _core._finite(0) and _core._finite(2.5) and _core._finite(-1e300)
    for v in (True, False, None, "1", float("nan"), float("inf"), -float("inf")):
        assert not _core._finite(v), v


# ---- step numbers ----------------------------------------------------------------------------------------------------
def test_a_run_expects_the_global_step_to_move_by_at_least_one(tmp_path):
    """delta (how far one step is expected to move the trainer's global step) is at least 1: before any step, step
    p is expected to end at offset + (p + 1) * max(1, delta)."""
    assert _run(tmp_path, lambda p: "none", offset=10, delta=0).trainer_step(0) == 10 + 1
    assert _run(tmp_path, lambda p: "none", offset=10, delta=0).trainer_step(2) == 10 + 3
    assert _run(tmp_path, lambda p: "none", offset=10, delta=3).trainer_step(2) == 10 + 3 * 3
    assert _run(tmp_path, lambda p: "none", offset=10).trainer_step(4) == 10 + 5  # default 1


# ---- a distributed run ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("world, expected", [(None, None), ((0, 1), None), ((1, 2), (1, 2)), ((0, 3), (0, 3))])
def test_a_run_is_distributed_with_two_ranks_or_more(tmp_path, monkeypatch, world, expected):
    monkeypatch.setattr(_core, "_world", lambda: world)
    assert _run(tmp_path, lambda p: "none").world == expected


class _Merged:
    def to_dict(self):
        return {"merged": 1}

    def table(self):
        return "the merged table"


@pytest.mark.parametrize("rank", [0, 1])
def test_each_rank_writes_its_files_and_rank_0_the_merged_ones(tmp_path, monkeypatch, rank):
    import json
    import os

    gathered = []

    def gather(report, dst, timeout):
        gathered.append((report, dst, timeout))
        return _Merged() if rank == 0 else None

    monkeypatch.setattr(_core, "_world", lambda: (rank, 2))
    monkeypatch.setattr(roofline, "gather", gather)
    out = tmp_path / "out"
    run = _run(out, None, steps=(2, 2), gather_timeout=7.5)
    a, b = torch.randn(4, 8), torch.randn(8, 2)
    run.start()
    try:
        for p in range(3):
            torch.mm(a, b)
            run.step(global_step=p + 1)
    finally:
        run.stop()
    (r,) = run.reports
    assert r.steps == [2] and gathered == [(r, 0, 7.5)]
    names = [f"step2.rank{rank}.json", f"step2.rank{rank}.html"]
    if rank == 0:
        names += ["step2.merged.json", "step2.merged.txt"]
        assert json.loads((out / "step2.merged.json").read_text()) == {"merged": 1}
        assert (out / "step2.merged.txt").read_text() == "the merged table\n"
        assert [type(m) for m in run.merged] == [_Merged]
    else:
        assert run.merged == []
    assert run.files == [str(out / n) for n in names] and sorted(os.listdir(out)) == sorted(names)


def test_a_run_in_progress_on_another_thread_does_not_refuse_this_threads(tmp_path):
    """One run per thread at a time: a run started on another thread and not stopped is no reason to refuse."""
    import threading

    made, started, release, errors = [], threading.Event(), threading.Event(), []

    def elsewhere():
        try:
            made.append(_run(tmp_path / "a", roofline.schedule(warmup=0, active=1)))  # a run is its thread's
            made[0].start()
            started.set()
            release.wait(30)
            made[0].stop()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
            started.set()

    t = threading.Thread(target=elsewhere)
    t.start()
    try:
        assert started.wait(30) and not errors
        other = made[0]
        mine = _run(tmp_path / "b", roofline.schedule(warmup=0, active=1))
        mine.start()
        mine.step()
        mine.stop()
        assert [r.steps for r in mine.reports] == [[1]] and other.running and not other.stopped
    finally:
        release.set()
        t.join(30)
    assert not errors and other.stopped and [r.steps for r in other.reports] == []


def test_the_monitor_may_count_step_0_only_when_the_profiler_does_not(tmp_path):
    sched = roofline.schedule(warmup=0, active=1)  # the profiler measures step 0
    assert _run(tmp_path, sched, monitor={}).monitor._warmup == 1  # default warmup 1: the monitor counts step 1
    with pytest.raises(ValueError, match="cb: monitor warmup=0 counts step 0, which the profiler measures"):
        _run(tmp_path, sched, monitor={"warmup": 0})
    later = roofline.schedule(wait=1, warmup=0, active=1)  # step 0 unmeasured: the monitor may count it
    assert _run(tmp_path, later, monitor={"warmup": 0}).monitor._warmup == 0


def test_steps_before_the_start_of_training_are_not_profiled(tmp_path):
    with pytest.warns(UserWarning, match=r"^cb: steps 3-5 are not profiled: training starts after step 5$"):
        run = _run(tmp_path, None, offset=5, steps=(3, 5))
    assert run.schedule is None and run.profiler is None
    with pytest.warns(UserWarning, match=r"^cb: training starts after step 5: steps 6-7 are profiled, not 5-7$"):
        run = _run(tmp_path, None, offset=5, steps=(5, 7))
    assert (run.schedule.first, run.schedule.last) == (6, 7)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run = _run(tmp_path, None, offset=5, steps=(6, 6))  # the first step of training: as asked
    assert (run.schedule.first, run.schedule.last) == (6, 6)


def test_a_run_whose_loop_fails_to_start_is_over(tmp_path, monkeypatch):
    run = _run(tmp_path, roofline.schedule(warmup=0, active=1), monitor=True)

    def fail():
        raise RuntimeError("no start")

    monkeypatch.setattr(run.monitor, "start", fail)  # the profiler starts first, then the monitor fails
    with pytest.raises(RuntimeError, match="no start"):
        run.start()
    assert run.started and run.stopped and not run.running and not run.profiler.running
    again = _run(tmp_path, roofline.schedule(warmup=0, active=1))  # not refused: the failed run is over
    again.start()
    again.stop()


def test_a_global_step_that_did_not_move_names_the_step_as_expected(tmp_path):
    """The trainer's count stayed at 1 after step 1: nothing learnt, the step is named 1 + 1 (one per step)."""
    run = _run(tmp_path, lambda p: "none")
    run.start()
    try:
        run.step(global_step=1)
        run.step(global_step=1)
        assert (run.trainer_step(0), run.trainer_step(1), run.trainer_step(2)) == (1, 2, 3)
        run.step(global_step=7)  # moved by 7 - 2 = 5: the next step is expected at 7 + 5
        assert run.trainer_step(2) == 7 and run.trainer_step(3) == 12
        run.step()  # not given: as expected
        assert run.trainer_step(3) == 12
    finally:
        run.stop()


def test_stop_is_done_once(tmp_path):
    import warnings

    run = _run(tmp_path, None, steps=(5, 6))
    run.start()
    run.step(global_step=1)
    with pytest.warns(UserWarning, match=r"^cb: steps 5-6 were not profiled: training ended after step 1$"):
        run.stop()
    assert run.stopped and not run.running
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run.stop()  # nothing more
    assert run.stopped


# ---- the monitor's figures handed to the trainer's loggers ------------------------------------------------------------
def _monitored(tmp_path, tokens, steps=5, **monitor):
    """A run with the monitor only (warmup 1: step 0 timed only, step 1 counted, the later steps given its counts),
    ``steps`` steps of one 4 x 8 by 8 x 2 product (2 * 4 * 8 * 2 = 128 FLOPs); (run, figures taken at the end)."""
    run = _run(tmp_path, None, monitor={"recount_every": 0, **monitor})
    a, b = torch.randn(4, 8), torch.randn(8, 2)
    run.start()
    try:
        for p in range(steps):
            torch.mm(a, b)
            run.step(tokens=tokens[p] if tokens else None, global_step=10 + p)
    finally:
        run.stop()
    return run, run.take_monitor_figures()


def test_the_monitor_figures_are_totals_over_the_steps_whose_time_includes_no_counting(tmp_path):
    run, (step, fig) = _monitored(tmp_path, [4, 4, 4, 5, 6])
    h = run.monitor.history
    assert [m["recounted"] for m in h] == [False, True, False, False, False] and h[0]["flops"] is None
    logged = h[2:]  # step 0 has no figures, step 1's time includes its counting
    t = sum(m["time_s"] for m in logged)
    assert step == 10 + 4  # the latest step's name
    assert fig == pytest.approx({
        "roofline/monitor/mfu": sum(m["mfu"] * m["time_s"] for m in logged) / t,
        "roofline/monitor/mbu": sum(m["mbu"] * m["time_s"] for m in logged) / t,
        "roofline/monitor/achieved_flops": 3 * 128 / t,
        "roofline/monitor/achieved_bytes": sum(m["bytes"] for m in logged) / t,
        "roofline/monitor/step_time": t / 3,
        "roofline/monitor/tokens_per_s": (4 + 5 + 6) / t}, rel=1e-12)
    assert run.take_monitor_figures() is None  # taken: nothing new


def test_the_monitor_figures_have_no_tokens_rate_when_a_step_has_no_tokens(tmp_path):
    _, (_, fig) = _monitored(tmp_path, [4, 4, 4, None, 6])
    assert "roofline/monitor/tokens_per_s" not in fig and "roofline/monitor/step_time" in fig
    _, (_, fig) = _monitored(tmp_path, None)
    assert "roofline/monitor/tokens_per_s" not in fig


def test_a_step_without_a_positive_finite_time_is_not_logged(tmp_path):
    run = _run(tmp_path, None, monitor=True)
    base = {"step": 3, "flops": 100.0, "bytes": 10.0, "mfu": 0.5, "mbu": 0.25, "recounted": False, "tokens": 2,
            "token_count": 2}
    for t in (0.0, -1.0, float("nan"), float("inf"), None):
        run._on_step({**base, "time_s": t})
    assert run.take_monitor_figures() is None
    run._on_step({**base, "time_s": 2.0})  # one step: its own figures
    step, fig = run.take_monitor_figures()
    assert step == 0 + 3 + 1 and fig == {  # named before it ran: offset 0 + (3 + 1) steps of 1
        "roofline/monitor/mfu": 0.5, "roofline/monitor/mbu": 0.25, "roofline/monitor/achieved_flops": 100.0 / 2.0,
        "roofline/monitor/achieved_bytes": 10.0 / 2.0, "roofline/monitor/step_time": 2.0,
        "roofline/monitor/tokens_per_s": 2 / 2.0}


# ---- the profiler cycle's logged scalars -----------------------------------------------------------------------------
def _cycle(totals, meta, wall):
    import types

    return types.SimpleNamespace(totals=lambda: dict(totals), meta=meta, wall_time=wall)


def test_the_profile_figures_of_a_cycle():
    totals = {"mfu": 0.5, "mbu": 0.25, "achieved_flops": 1e9, "achieved_bytes": 2e9, "compute_share": 0.75}
    r = _cycle(totals, {"ceilings_yardstick": {"kind": "idle"}, "ceilings_contention": True}, 0.5)
    assert _core.Run.profile_figures(r, [3, 5, 4]) == {
        "roofline/profile/mfu": 0.5, "roofline/profile/mbu": 0.25, "roofline/profile/achieved_flops": 1e9,
        "roofline/profile/achieved_bytes": 2e9, "roofline/profile/compute_share": 0.75,
        "roofline/profile/contention": 1.0, "roofline/profile/ceilings_code": 1.0,  # idle: code 1
        "roofline/profile/step_time": 0.5, "roofline/profile/tokens_per_s": 4 / 0.5,  # the median of 3, 5, 4
        "roofline/profile/step_time_code": 0.0}  # no step_time= chosen: the median (docs/training.md: 0)


def test_the_profile_figures_leave_out_what_is_not_known():
    totals = {"mfu": float("nan"), "mbu": None, "achieved_flops": 1e9, "achieved_bytes": True}
    for meta, contention, code in (({"contention": True, "ceilings_yardstick": {"kind": "given"}}, 1.0, 5.0),
                                   ({"ceilings_yardstick": {"kind": "guessed"}}, 0.0, None),
                                   ({"ceilings_yardstick": None}, 0.0, None), ({}, 0.0, None)):
        for wall, tokens in ((0.0, [1]), (float("nan"), [1]), (None, [1]), (2.0, [1, None]), (2.0, []),
                             (2.0, None)):
            want = {"roofline/profile/achieved_flops": 1e9, "roofline/profile/contention": contention,
                    "roofline/profile/step_time_code": 0.0}  # no step_time= chosen: the median (docs/training.md: 0)
            if code is not None:
                want["roofline/profile/ceilings_code"] = code
            if wall == 2.0:
                want["roofline/profile/step_time"] = 2.0
            assert _core.Run.profile_figures(_cycle(totals, meta, wall), tokens) == want, (meta, wall, tokens)


# ---- what a callback made over its runs ------------------------------------------------------------------------------
def test_the_outputs_are_those_of_every_run_and_the_loops_those_of_the_latest():
    import types

    class Made(_core.Outputs):
        def __init__(self, runs):
            self._runs = runs

    none = Made([])
    assert (none.reports, none.merged, none.files, none.profiler, none.monitor) == ([], [], [], None, None)
    runs = [types.SimpleNamespace(reports=["r1"], merged=[], files=["a", "b"], profiler="p1", monitor="m1"),
            types.SimpleNamespace(reports=["r2", "r3"], merged=["m"], files=["c"], profiler="p2", monitor="m2")]
    made = Made(runs)
    assert (made.reports, made.merged, made.files) == (["r1", "r2", "r3"], ["m"], ["a", "b", "c"])
    assert (made.profiler, made.monitor) == ("p2", "m2")


def test_the_profilers_schedule_describes_the_runs(tmp_path):
    sched = roofline.schedule(wait=1, warmup=2, active=3)
    planned = _run(tmp_path, sched).profiler.schedule
    assert planned.as_dict() == {"wait": 1, "warmup": 2, "active": 3, "repeat": 0, "skip_first": 0}
    assert planned.active == 3 and repr(planned) == repr(sched)
    with pytest.raises(AttributeError):
        planned.period  # noqa: B018 - only as_dict and active are the schedule's
    plain = _run(tmp_path, lambda p: "none").profiler.schedule
    with pytest.raises(AttributeError):
        plain.as_dict  # noqa: B018 - a plain callable has none
    assert not hasattr(plain, "active")


# ---- a steady report read back ---------------------------------------------------------------------------------------
class TestSteadyLoaded:
    """SteadyReport._loaded: the wall-time spread of a report read back, rebuilt from meta["steady"] (the wall times
    of every measured step and the 1-based positions of those aggregated)."""

    @staticmethod
    def _loaded(steady):
        import types

        from roofline._loops._steady import SteadyReport

        r = types.SimpleNamespace(meta={"steady": steady} if steady is not None else {})
        SteadyReport._loaded(r)
        return r

    def test_the_aggregated_steps_wall_times(self):
        r = self._loaded({"wall_times": [1.0, 2.0, 3.0, 4.0], "steps": [2, 4]})
        assert r.repeats == [] and r.spread == {
            "wall_time": {"min": 2.0, "median": (2.0 + 4.0) / 2, "max": 4.0, "values": [2.0, 4.0]}, "ops": {}}

    def test_positions_outside_the_wall_times_are_left_out(self):
        # positions 0 and 5 name no step of 4: only 1 and 4 are read
        r = self._loaded({"wall_times": [1.0, 2.0, 3.0, 4.0], "steps": [0, 1, 4, 5]})
        assert r.spread["wall_time"] == {"min": 1.0, "median": 2.5, "max": 4.0, "values": [1.0, 4.0]}

    def test_without_steps_every_wall_time_and_untimed_steps_left_out_of_the_spread(self):
        r = self._loaded({"wall_times": [3.0, None, 1.0]})
        assert r.spread["wall_time"] == {"min": 1.0, "median": 2.0, "max": 3.0, "values": [3.0, None, 1.0]}

    def test_nothing_saved(self):
        empty = {"wall_time": {"min": None, "median": None, "max": None, "values": []}, "ops": {}}
        assert self._loaded(None).spread == empty
        assert self._loaded({"wall_times": None, "steps": None}).spread == empty
        assert self._loaded({"steps": [1]}).spread == empty
