"""roofline.profile's step loop (roofline/_loops/_schedule.py) where the other tests leave it open: the default
schedule as documented, the schedule checked on its step 0 when the profiler is made, and the hand-over of a step's
measure block. Expected step numbers come from the documentation's definition, worked out here."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import roofline  # noqa: E402


def _train():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    x = torch.randn(3, 4)

    def step():
        model(x).sum().backward()

    return model, step


def test_the_default_schedule_warms_up_on_step_0_and_measures_steps_1_to_5_once():
    # documented default: roofline.schedule(warmup=1, active=5, repeat=1): step 0 counted and discarded, steps 1 to 5
    # measured, one report; step 6 and 7 run unmeasured (one cycle only), so stopping after 8 steps adds no report
    model, step = _train()
    with roofline.profile(model, ceilings="datasheet", timing=None) as prof:
        for _ in range(8):
            step()
            prof.step()
    assert prof.schedule == roofline.schedule(wait=0, warmup=1, active=5, repeat=1, skip_first=0)
    (r,) = prof.reports
    assert r.steps == [1, 2, 3, 4, 5] and r.meta["steady"]["warmup"] == 1 and r.meta["steady"]["partial"] is False
    # one step of Linear(4, 2) on 3 rows: forward 2*3*4*2, backward (weight gradient only) 2*4*3*2
    assert r.matrix_flops == 2 * 3 * 4 * 2 + 2 * 4 * 3 * 2


def test_a_schedule_is_checked_on_step_0_when_the_profiler_is_made():
    # what the schedule answers for step 0 is the first thing the profiler asks: a bad answer there is refused at once
    with pytest.raises(ValueError, match=r"schedule\(0\) returned 7"):
        roofline.profile(schedule=lambda n: 7 if n == 0 else "none")
    # an answer that is bad only later is met when the loop gets there
    prof = roofline.profile(schedule=lambda n: "none" if n == 0 else 7, ceilings="datasheet").start()
    with pytest.raises(ValueError, match=r"schedule\(1\) returned 7"):
        prof.step()
    prof.stop()


@pytest.mark.parametrize("form", ["model and warmup", "keywords only"])
def test_the_steady_form_of_profile_is_still_the_steady_repeat_with_a_deprecation_warning(form):
    model, step = _train()
    with pytest.warns(DeprecationWarning, match=r"roofline\.profile\(step, model, warmup=\.\.\., repeat=\.\.\.\) is "
                                                r"deprecated"):
        if form == "keywords only":  # no positional argument at all: the keywords say it is the steady form
            r = roofline.profile(step=step, model=model, warmup=1, repeat=2, ceilings="datasheet", timing=None)
        else:  # a module first is the new form, unless warmup= or repeat= says otherwise
            r = roofline.profile(step, model, warmup=1, repeat=2, ceilings="datasheet", timing=None)
    assert isinstance(r, roofline.SteadyReport) and len(r.repeats) == 2
    assert r.matrix_flops == 2 * 3 * 4 * 2 + 2 * 4 * 3 * 2  # one step of Linear(4, 2) on 3 rows, as above


class _TrainStep(torch.nn.Module):
    """A training step that is a module itself: called with no argument, it runs one step of ``model``."""

    def __init__(self, model, step):
        super().__init__()
        self.model, self._step = model, step

    def forward(self):
        self._step()


@pytest.mark.parametrize("form", ["a step function alone", "a step module and the model"])
def test_profile_with_a_step_first_is_the_deprecated_steady_repeat(form):
    # roofline.profile(step) and roofline.profile(step, model) are the steady repeat as roofline.profile took it
    # before 0.5 (a step function, not a module, first; or two positional arguments): warmup 1, repeat 5
    model, step = _train()
    with pytest.warns(DeprecationWarning, match="is deprecated since 0.5"):
        if form == "a step function alone":
            r = roofline.profile(step)
        else:
            r = roofline.profile(_TrainStep(model, step), model)
    assert isinstance(r, roofline.SteadyReport) and len(r.repeats) == 5
    assert r.matrix_flops == 2 * 3 * 4 * 2 + 2 * 4 * 3 * 2


@pytest.mark.parametrize("name,hint", [("activities", " (roofline counts every op of a measured step, whatever "
                                                     "device it runs on)"),
                                       ("use_cuda", "")])
def test_an_argument_of_torch_profiler_only_is_refused_naming_it_and_what_to_use(name, hint):
    model, _ = _train()
    with pytest.raises(TypeError) as e:
        roofline.profile(model, **{name: None})
    assert str(e.value) == (f"profile: {name} is an argument of torch.profiler.profile that roofline.profile does "
                            f"not take{hint}; roofline.profile takes model, schedule, on_report, timing, ceilings, "
                            "attention, step_time and formulas")
