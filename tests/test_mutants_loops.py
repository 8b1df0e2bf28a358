"""Details of the step loops and the trainer callbacks' shared run (roofline/_monitor.py, roofline/_schedule.py,
roofline/integrations/_core.py, huggingface.py, lightning.py) that the broader tests leave open: the bounds on
what a long run keeps (the plan of each step's action, the trainer's names of the steps), and the small branches of
the callbacks. Expected values are the arithmetic written beside them."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import roofline  # noqa: E402
from _graph import ceilings  # noqa: E402
from roofline.integrations import _core  # noqa: E402

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
