"""roofline.schedule and roofline.profiler: measuring step N of a loop the user already runs, one steady-state report
per cycle of the schedule."""

import threading
import warnings

import pytest

torch = pytest.importorskip("torch")

import roofline  # noqa: E402

# the tiny training step: Linear(16, 32) -> ReLU -> Linear(32, 4) on a batch of 8
B, D_IN, D_H, D_OUT = 8, 16, 32, 4
# 2*M*N*K per product: forward 2 products, backward 3 (no input gradient for the first layer)
STEP_MATRIX_FLOPS = (2 * B * D_IN * D_H + 2 * B * D_H * D_OUT) + (2 * (2 * B * D_H * D_OUT) + 2 * B * D_IN * D_H)


def _train(optimizer=torch.optim.SGD):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(D_IN, D_H), torch.nn.ReLU(), torch.nn.Linear(D_H, D_OUT))
    opt = optimizer(model.parameters(), lr=1e-3)
    x = torch.randn(B, D_IN)
    ran = []

    def step():
        ran.append(1)
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()

    return model, step, ran


def _active_by_arithmetic(n_steps, wait, warmup, active, repeat, skip_first):
    """The active step numbers of a schedule, cycle by cycle, from its definition."""
    period, out, c = wait + warmup + active, [], 0
    while repeat == 0 or c < repeat:
        first = skip_first + c * period + wait + warmup
        if first >= n_steps:
            break
        out.append([s for s in range(first, first + active) if s < n_steps])
        c += 1
    return out


@pytest.mark.parametrize("wait,warmup,active,repeat,skip_first",
                         [(2, 1, 3, 2, 0), (0, 1, 1, 0, 0), (1, 0, 2, 0, 3), (0, 0, 1, 1, 0), (3, 2, 1, 0, 1)])
def test_schedule_actions_follow_torch_profiler_schedule(wait, warmup, active, repeat, skip_first):
    s = roofline.schedule(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns about warmup=0
        t = torch.profiler.schedule(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first)
    assert [s(n) for n in range(40)] == [t(n).name.lower() for n in range(40)]
    cycles = _active_by_arithmetic(40, wait, warmup, active, repeat, skip_first)
    assert [n for n in range(40) if s(n) in ("record", "record_and_save")] == [n for c in cycles for n in c]
    assert [n for n in range(40) if s(n) == "record_and_save"] == [c[-1] for c in cycles if len(c) == active]


def test_two_cycles_over_fourteen_steps_give_two_reports_of_one_step_counts():
    model, step, ran = _train()
    seen = []
    with roofline.profile(model, schedule=roofline.schedule(wait=2, warmup=1, active=3, repeat=2),
                           on_report=seen.append, ceilings="datasheet") as prof:
        for _ in range(14):
            step()
            prof.step()
    assert len(ran) == 14 and prof.step_num == 14
    expected = _active_by_arithmetic(14, 2, 1, 3, 2, 0)
    assert expected == [[3, 4, 5], [9, 10, 11]]
    assert seen == prof.reports and len(prof.reports) == 2
    with roofline.measure(model, ceilings="datasheet") as by_hand:
        step()
    assert by_hand.matrix_flops == STEP_MATRIX_FLOPS
    for c, (r, steps) in enumerate(zip(prof.reports, expected)):
        assert isinstance(r, roofline.SteadyReport)
        assert r.steps == steps and r.cycle == c and len(r.repeats) == 3
        s = r.meta["steady"]
        assert s["step_numbers"] == steps and s["cycle"] == c and s["warmup"] == 1 and s["partial"] is False
        assert s["counts_agree"] is True and s["other_steps"] == [] and s["first_step"] is False
        assert s["schedule"] == {"wait": 2, "warmup": 1, "active": 3, "repeat": 2, "skip_first": 0}
        assert r.matrix_flops == by_hand.matrix_flops and r.vector_flops == by_hand.vector_flops
        walls = sorted(x.wall_time for x in r.repeats)
        assert r.wall_time == walls[1]  # the median of three
        assert r.steady_line().startswith(f"profiler cycle {c}, loop steps {steps[0]}-{steps[-1]}: 1 warm-up step "
                                          "counted and discarded, median of 3 measured steps")
    back = roofline.load(prof.reports[1].to_json())  # the document schema keeps what the cycle covers
    assert back.meta["steady"]["step_numbers"] == [9, 10, 11] and back.meta["steady"]["cycle"] == 1


def test_warmup_steps_are_counted_and_discarded():
    # AdamW creates its state (zeros_like per parameter) in step 0, the warm-up step: not in the report
    model, step, _ = _train(torch.optim.AdamW)
    with roofline.profile(model, schedule=roofline.schedule(warmup=1, active=2, repeat=1),
                           ceilings="datasheet") as prof:
        for _ in range(4):
            step()
            prof.step()
    (r,) = prof.reports
    assert r.steps == [1, 2] and "aten.zeros_like.default" not in r.by_op()
    # a cycle whose first active step is step 0 measures the first step: labelled, state creation included
    model, step, _ = _train(torch.optim.AdamW)
    with roofline.profile(model, schedule=roofline.schedule(warmup=0, active=2, repeat=1),
                           ceilings="datasheet") as prof:
        for _ in range(3):
            step()
            prof.step()
    (r0,) = prof.reports
    assert r0.steps == [0, 1] and r0.meta["steady"]["first_step"] is True
    assert r0.by_op()["aten.zeros_like.default"]["calls"] == 2 * 4  # exp_avg, exp_avg_sq of 4 parameters
    assert "the FIRST step is measured" in r0.steady_line()


def test_active_steps_running_other_ops_are_named_not_averaged():
    model, step, _ = _train()
    x = torch.randn(B, D_IN)
    with pytest.warns(UserWarning, match=r"roofline\.profile: .*median of 2 of 3 steps .* step 4 ran other ops"):
        with roofline.profile(model, schedule=roofline.schedule(wait=1, warmup=1, active=3, repeat=1),
                               ceilings="datasheet") as prof:
            for n in range(6):
                step()
                if n == 4:
                    torch.mm(x, x.t())  # one more product in step 4 only
                prof.step()
    (r,) = prof.reports
    assert r.steps == [2, 3, 4]
    s = r.meta["steady"]
    assert s["steps"] == [1, 2] and s["other_steps"] == [3] and s["counts_agree"] is False
    assert r.matrix_flops == STEP_MATRIX_FLOPS  # the two steps that ran the same ops: nothing averaged in
    assert "step 4 ran other ops and is left out" in r.steady_line()


def test_stop_mid_cycle_gives_a_partial_report_and_drops_the_unfinished_step():
    model, step, _ = _train()
    seen = []
    prof = roofline.profile(model, schedule=roofline.schedule(warmup=0, active=4), on_report=seen.append,
                             ceilings="datasheet").start()
    for _ in range(2):
        step()
        prof.step()
    step()  # step 2 runs but never ends with step(): not kept
    prof.stop()
    (r,) = seen
    assert r.steps == [0, 1] and r.meta["steady"]["partial"] is True and r.meta["steady"]["active"] == 4
    assert "PARTIAL cycle: 2 of its 4 active steps" in r.steady_line()
    assert not prof.running


def test_a_torch_profiler_schedule_is_accepted():
    model, step, _ = _train()
    with roofline.profile(model, schedule=torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1),
                           ceilings="datasheet") as prof:
        for _ in range(5):
            step()
            prof.step()
    (r,) = prof.reports
    assert r.steps == [2, 3] and isinstance(r.meta["steady"]["schedule"], str)


def _torch_state():
    import torch.nn.modules.module as mm
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    hooks = tuple(tuple(d.items()) for d in (mm._global_forward_pre_hooks, mm._global_forward_hooks,
                                             mm._global_backward_hooks))
    return tuple(_get_current_dispatch_mode_stack()), torch._C._len_torch_function_stack(), hooks


def test_an_exception_in_the_loop_leaves_torch_as_it_was_and_reports_nothing():
    model, step, _ = _train()
    before, seen = _torch_state(), []
    with pytest.raises(KeyError, match="boom"):
        with roofline.profile(model, schedule=roofline.schedule(warmup=1, active=3), on_report=seen.append,
                               ceilings="datasheet") as prof:
            for n in range(10):
                step()
                if n == 2:  # inside the first cycle's active steps, a block open
                    raise KeyError("boom")
                prof.step()
    assert _torch_state() == before and seen == [] and prof.reports == []
    with pytest.raises(RuntimeError, match=r"step\(\) called outside start\(\)/stop\(\): it has been stopped"):
        prof.step()


@pytest.mark.parametrize("kwargs,name,exc", [
    (dict(wait=-1), "wait", ValueError), (dict(warmup=-2), "warmup", ValueError), (dict(active=0), "active", ValueError),
    (dict(repeat=-1), "repeat", ValueError), (dict(skip_first=-1), "skip_first", ValueError),
    (dict(active=1.5), "active", TypeError), (dict(wait="2"), "wait", TypeError), (dict(repeat=True), "repeat", TypeError),
    (dict(warmup=None), "warmup", TypeError),
])
def test_bad_schedule_arguments_name_the_argument(kwargs, name, exc):
    # the package's one int rule (roofline._util._ints): not an int is a TypeError, out of range a ValueError
    with pytest.raises(exc, match=rf"schedule: {name} must be an int >= [01], got"):
        roofline.schedule(**kwargs)


def test_misuse_raises_clear_errors():
    model, step, _ = _train()
    with pytest.raises(TypeError, match="schedule must be"):
        roofline.profile(model, schedule=3)
    with pytest.raises(TypeError, match="on_report must be None or a callable"):
        roofline.profile(model, on_report="print")
    with pytest.raises(ValueError, match="timing must be"):
        roofline.profile(model, timing="ops")
    prof = roofline.profile(model, ceilings="datasheet")
    with pytest.raises(RuntimeError, match=r"step\(\) called outside start\(\)/stop\(\): start\(\) it first"):
        prof.step()
    with pytest.raises(RuntimeError, match="not running"):
        prof.stop()
    prof.start()
    with pytest.raises(RuntimeError, match="already been started"):
        prof.start()
    errors = []
    t = threading.Thread(target=lambda: errors.append(pytest.raises(RuntimeError, prof.step)))
    t.start()
    t.join()
    assert "another thread" in str(errors[0].value)
    prof.stop()
    with pytest.raises(ValueError, match=r"schedule\(0\) returned 7"):
        roofline.profile(schedule=lambda n: 7)
