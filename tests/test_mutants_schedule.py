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
