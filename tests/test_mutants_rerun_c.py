"""The step-time wording of the summary and the notebook facts (profile(step_time=...)), written out letter for
letter, on the hand-worked report of tests/test_mutants_render.py (wall time 20 s)."""

import pytest

from roofline.render._render import facts
from test_mutants_render import timed


def _step(kind, **extra):
    return timed(meta={"steady": {"step_time": dict(kind=kind, **extra)}})


def _step_facts(r):
    return [text for label, text in facts(r) if label == "step time"]


@pytest.mark.parametrize("kind, head", [("min", "20.00 s least wall"), ("unwaited", "20.00 s unwaited step time"),
                                        ("unwaited_min", "20.00 s least unwaited step time"),
                                        ("median", "20.00 s wall"), (None, "20.00 s wall")])
def test_summary_head_names_the_step_time(kind, head):
    assert _step(kind).summary().split("\n")[0] == "roofline report: 3 op calls, " + head


def test_summary_head_without_steady_meta_or_wall_time():
    assert timed().summary().split("\n")[0] == "roofline report: 3 op calls, 20.00 s wall"
    assert timed(wall=None).summary().split("\n")[0] == "roofline report: 3 op calls"


@pytest.mark.parametrize("kind, text", [
    ("min", "20.00 s: the least wall time of the measured steps"),
    ("unwaited", "20.00 s: UNWAITED (the threads' waits for a CPU taken out)"),
    ("unwaited_min", "20.00 s: the least UNWAITED time of the measured steps (the threads' waits for a CPU taken out)"),
])
def test_facts_step_time_line(kind, text):
    assert _step_facts(_step(kind)) == [text]
    assert _step_facts(_step(kind, wall_median=25.0)) == [text + "; median wall time 25.00 s"]
    assert _step_facts(_step(kind, wall_median=3)) == [text + "; median wall time 3.00 s"]
    assert _step_facts(_step(kind, wall_median="25")) == [text]  # not a number: no median
    assert _step_facts(_step(kind, spin="2 threads spin")) == [text + "; SPIN: 2 threads spin"]
    assert _step_facts(_step(kind, spin="")) == [text]


def test_facts_step_time_line_only_for_a_measured_chosen_step_time():
    assert _step_facts(_step("median")) == []          # the plain wall time: no line
    assert _step_facts(timed()) == []                  # no steady meta
    assert _step_facts(timed(meta={"steady": {"step_time": "min"}})) == []  # not a dict
    r = _step("min")
    r.wall_time = None
    assert _step_facts(r) == []                        # untimed
    r = _step("min")
    r.wall_time = 0.0
    assert _step_facts(r) == []                        # no time to divide by
    r = timed(meta={"steady": {"step_time": {"kind": "min"}}, "projected_to": "h100"})
    assert _step_facts(r) == []                        # a projection's time is not a measured step
