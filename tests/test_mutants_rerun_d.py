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
