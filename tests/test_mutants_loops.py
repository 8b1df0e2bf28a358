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
        with pytest.raises(TypeError, match=f"cb: tokens must be None .* got {type(bad).__name__}"):
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
    for _ in range(8):
        y = {"k": y}
    expected = 5  # 8 mappings: all read, the int inside by value
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
