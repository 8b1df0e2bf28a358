"""Killers of mutants of the step loops and the trainer callbacks' shared run (roofline/_loops/_steady.py,
roofline/_loops/_monitor.py, roofline/integrations/_run.py) that the other tests let through: each expected value is
worked out here by hand from the inputs the test gives."""

from __future__ import annotations

import types
import warnings

import pytest

from roofline._loops import _steady
from roofline.integrations import _run

def _run_of(wall, wall_s=None, unwaited_s=None):
    load = {} if wall_s is None else {"wall_s": wall_s, "unwaited_s": unwaited_s}
    return types.SimpleNamespace(wall_time=wall, meta={"load": load, "contention": []})


def test_an_unwaited_time_of_zero_is_no_statistic_and_the_wall_time_stands():
    # unwaited_s = 0 of wall_s = 0.1: no time on a CPU at all is no reading; scaling would give 0.1 * 0 = 0 s
    runs = [_run_of(0.1, 0.1, 0.0), _run_of(0.2, 0.2, 0.1)]  # the second: 0.2 * 0.1 / 0.2 = 0.1
    t, meta = _steady._step_time("unwaited_min", runs, 0.15, threads=1, env={})
    assert meta["values"] == pytest.approx([0.1, 0.1])
    assert t == pytest.approx(0.1)  # min(0.1, 0.1), not the 0 s a zero reading would give
    assert meta["missing"] == "no scheduler statistics for some steps: their wall time stands"


def test_the_deprecated_tokens_name_alone_is_taken_and_warns():
    fn = len
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _run.token_count_option("cb", None, fn) is fn
    assert any(issubclass(w.category, DeprecationWarning) and "cb(tokens=...)" in str(w.message) for w in caught)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(TypeError, match="cb: give token_count only"):
            _run.token_count_option("cb", fn, fn)


_TAKEN_OUT = "waits for a CPU held by other processes taken out"


def test_the_step_time_words_give_the_unwaited_spread_of_two_steps_or_more_and_what_is_missing():
    u = {"min": 0.020, "median": 0.025, "max": 0.030, "spread": 0.4}  # (30 - 20) / 25 = 40%
    missing = "no scheduler statistics on this system: the wall time stands"
    t = {"kind": "unwaited", "values": [0.020, 0.030], "unwaited": u, "missing": missing}
    # 0.020 s = 20.0 ms, 0.025 s = 25.0 ms, 0.030 s = 30.0 ms
    assert _steady._step_time_words(t) == (
        f"UNWAITED ({_TAKEN_OUT}; unwaited min 20.0, median 25.0, max 30.0 ms, spread 40%; {missing})")
    # one step: no spread to tell
    one = {"kind": "unwaited_min", "values": [0.02], "unwaited": {"min": 0.02, "median": 0.02, "max": 0.02,
                                                                  "spread": 0.0}}
    assert _steady._step_time_words(one) == f"the least UNWAITED time ({_TAKEN_OUT})"
    # a step time read back without its unwaited figures, or with a zero median (no spread): no clause, no error
    assert _steady._step_time_words({"kind": "unwaited", "values": [0.1, 0.2]}) == f"UNWAITED ({_TAKEN_OUT})"
    zero = {"kind": "unwaited", "values": [0.0, 0.0], "unwaited": {"min": 0.0, "median": 0.0, "max": 0.0,
                                                                    "spread": None}}
    assert _steady._step_time_words(zero) == f"UNWAITED ({_TAKEN_OUT})"


def test_a_median_step_time_adds_no_clause_to_the_steady_line():
    # the median wall time is the default: a step time of kind "median" (as a document may carry it) says nothing
    # more; "min" says which time the report divides by (0.002 s = 2.0 ms)
    from roofline._loops._steady import SteadyReport

    r = SteadyReport.__new__(SteadyReport)
    r.wall_time = 0.002
    r.meta = {"steady": {"repeat": 1, "warmup": 1, "step_time": {"kind": "median", "wall_median": 0.002}}}
    assert r.steady_line() == "steady state: 1 warm-up step uncounted, 1 measured step"
    r.meta["steady"]["step_time"] = {"kind": "min", "wall_median": 0.003}
    assert r.steady_line() == ("steady state: 1 warm-up step uncounted, 1 measured step; step time 2.0 ms: the least "
                               "wall time")


@pytest.mark.parametrize("steady, expect", [
    ({"cycle": 2, "step_numbers": [5, 6]}, ([5, 6], 2)),  # a profiler cycle's: its loop steps and its number
    ({"cycle": 2}, None),                                 # no step numbers: not a cycle's report read back
    ({"step_numbers": [5, 6]}, None),                     # no cycle number: likewise
    ({}, None),
])
def test_a_loaded_report_is_a_profiler_cycle_only_with_its_cycle_and_step_numbers(steady, expect):
    from roofline._loops._steady import SteadyReport

    r = types.SimpleNamespace(meta={"steady": steady})
    SteadyReport._loaded(r)
    assert ((r.steps, r.cycle) if hasattr(r, "steps") or hasattr(r, "cycle") else None) == expect
