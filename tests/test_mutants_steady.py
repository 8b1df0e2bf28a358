"""The steady-state report's details (roofline/_loops/_steady.py) that the broader tests leave open: the step-number ranges
of a profiler cycle's line, which step is the base when no wall time was measured, the times of a single step and of
untimed steps, ``step_numbers`` in the meta, and the mapping of left-out steps to the loop's step numbers."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from _graph import Graph, ceilings
from roofline._loops._steady import SteadyReport, _ranges


def _step(vector=10, t=(1e-6, 2e-6), wall=1.0, ops=("add", "mul")):
    """One measured step: the ops of ``ops``, each with ``vector`` FLOPs and its time (None: untimed)."""
    g = Graph()
    for k, name in enumerate(ops):
        g.call(f"aten.{name}.Tensor", "ewise", [(k, 400)], [(100 + k, 400)], vector=vector, t=t[k])
    return g.report(wall_time=wall)


def _quiet(runs, **kw):
    """_from_runs with every warning an error: the caller asserts that none is raised."""
    kw.setdefault("warmup", 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return SteadyReport._from_runs(runs, ceilings=ceilings(), **kw)


class TestRanges:
    """Consecutive step numbers folded into ranges, as a profiler cycle's line names them."""

    def test_runs_and_singletons(self):
        assert _ranges([3, 4, 5, 9]) == "3-5, 9"
        assert _ranges([7]) == "7"
        assert _ranges([1, 3]) == "1, 3"
        assert _ranges([3, 4]) == "3-4"
        assert _ranges([2, 4, 5, 6, 8, 10, 11]) == "2, 4-6, 8, 10-11"
        assert _ranges(iter([0, 1])) == "0-1"  # any iterable

    def test_empty(self):
        assert _ranges([]) == ""


class TestFromRuns:
    def test_untimed_steps_base_is_the_last(self):
        # no wall time measured for any step, different counts (10, 20, 30 FLOPs per op): the base is the last
        # aggregated step, 30 FLOPs per op x 2 ops
        runs = [_step(vector=10 * (i + 1), wall=None) for i in range(3)]
        with pytest.warns(UserWarning, match="same ops with different counts"):
            r = SteadyReport._from_runs(runs, warmup=1, ceilings=ceilings())
        assert r.vector_flops == 2 * 30
        assert r.wall_time is None
        assert r.spread["wall_time"] == {"min": None, "median": None, "max": None, "values": [None, None, None]}

    def test_untimed_ops_are_not_recomputed(self):
        # several steps without per-op times: nothing to take the median of, and no NumPy warning about all-NaN
        # columns; the records keep their NaN times
        runs = [_step(t=(None, None)) for _ in range(3)]
        r = _quiet(runs)
        assert not r.timed
        assert np.isnan(r.records["t_start"]).all() and np.isnan(r.records["t_end"]).all()
        assert r.spread["ops"] == {}

    def test_single_timed_step_keeps_its_times(self):
        # one timed step with one untimed call: its times stay as measured, without a median over one step (whose
        # all-NaN column would make NumPy warn)
        one = _step(t=(3e-6, None))
        r = _quiet([one])
        assert r.records["t_start"][0] == 0.0 and r.records["t_end"][0] == 3e-6
        assert np.isnan(r.records["t_start"][1]) and np.isnan(r.records["t_end"][1])
        assert r.spread["ops"]["aten.add.Tensor"] == {"min": 3e-6, "median": 3e-6, "max": 3e-6}
        assert r.spread["ops"]["aten.mul.Tensor"] == {"min": 0.0, "median": 0.0, "max": 0.0}

    def test_step_numbers_only_when_given(self):
        runs = [_step(wall=1.0), _step(wall=2.0)]
        r = _quiet(runs)
        assert "step_numbers" not in r.meta["steady"]
        assert r.meta["steady"]["steps"] == [1, 2]
        r = _quiet(runs, step_numbers=[7, 8])
        assert r.meta["steady"]["step_numbers"] == [7, 8]
        assert r.meta["steady"]["steps"] == [1, 2]  # positions among the measured steps, not loop numbers


def _cycle(numbers, **steady):
    """A profiler cycle's report over steps with the loop's numbers ``numbers`` (no wall times, no clause for them)."""
    runs = [_step(wall=None) for _ in numbers]
    r = _quiet(runs, step_numbers=list(numbers), first_step=False, extra={"cycle": 2, "active": len(numbers)})
    r.meta["steady"].update(steady)
    return r


class TestCycleLine:
    """The first line of a profiler cycle's summary."""

    def test_cycle_line_names_the_loop_steps(self):
        r = _cycle([5, 6, 7])
        assert r.steady_line() == ("profiler cycle 2, loop steps 5-7: 1 warm-up step counted and discarded, "
                                   "median of 3 measured steps")
        r = _cycle([4])
        assert r.steady_line() == ("profiler cycle 2, loop step 4: 1 warm-up step counted and discarded, "
                                   "1 measured step")

    def test_cycle_without_step_numbers_and_numbers_without_cycle(self):
        r = _cycle([5, 6])
        r.meta["steady"]["step_numbers"] = []
        assert r.steady_line() == "steady state: 1 warm-up step uncounted, median of 2 measured steps"
        r = _cycle([5, 6])
        del r.meta["steady"]["cycle"]
        assert r.steady_line() == "steady state: 1 warm-up step uncounted, median of 2 measured steps"

    def test_partial_cycle(self):
        # 2 of the schedule's 3 active steps ran before the profiler stopped
        r = _cycle([10, 11], active=3, partial=True)
        assert r.steady_line() == ("profiler cycle 2, loop steps 10-11: 1 warm-up step counted and discarded, "
                                   "median of 2 measured steps; PARTIAL cycle: 2 of its 3 active steps ran before "
                                   "the profiler stopped")

    @pytest.mark.parametrize("other, named", [
        ([1], "step 10"),          # the first position: the first loop number
        ([3], "step 12"),          # the last position
        ([1, 3], "steps 10, 12"),
        ([2], "step 11"),
        ([0], "step 0"),           # not a position (they start at 1): left as it is
        ([4], "step 4"),           # past the last position
        ([1, 4], "steps 1, 4"),    # one out of range: none mapped
    ])
    def test_left_out_steps_by_loop_number(self, other, named):
        r = _cycle([10, 11, 12], other_steps=other)
        verb = "are" if len(other) != 1 else "is"
        assert r.steady_line().endswith(f"; {named} ran other ops and {verb} left out")
