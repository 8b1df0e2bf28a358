"""The capture session where the earlier tests leave it open (roofline/_capture/_recording.py, _session.py,
_modestack.py): the keyword arguments a declining built-in formula hands to the op's C formula, the attribution notes
of ops on the Python path, the attribution section of a report, torch's mode flags and stack after blocks that
interleave, and the mode-stash code objects an interrupted block settles. Expected values are worked out here (bytes
of float32 tensors by hand), come from FlopCounterMode, from the same ops counted on the C path (a second
implementation of the attribution), or are torch's own state before the block."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

import roofline  # noqa: E402
from roofline._capture import _modestack  # noqa: E402

F32, I32 = 4, 4


# ---- a built-in Python formula that declines: the C formula gets the call's keyword arguments ----------------------
def test_a_declining_builtin_formula_leaves_the_keyword_arguments_to_the_c_formula():
    # dense flash attention without a window: the Python formula (packed sequences, windows) declines, and the op's C
    # formula counts the call, keyword-only arguments (seqused_k=) included
    q, k, v = (torch.empty(1, 8, 2, 4, device="meta") for _ in range(3))
    seqused_k = torch.empty(1, dtype=torch.int32, device="meta")
    with roofline.measure(timing=None) as r:
        torch.ops.aten._flash_attention_forward(q, k, v, None, None, 8, 8, 0.0, True, False, scale=0.5,
                                                seqused_k=seqused_k)
    assert r.op_names == ["aten._flash_attention_forward.default"]
    # q, k, v: 1*8*2*4 float32 = 256 bytes each; seqused_k: one int32
    assert int(r.records["bytes_read"][0]) == 3 * 1 * 8 * 2 * 4 * F32 + 1 * I32
    reads = sorted(int(n) for n, w in zip(r.accesses["nbytes"], r.accesses["write"]) if not w)
    assert reads == [1 * I32] + [1 * 8 * 2 * 4 * F32] * 3
    assert r.signatures[r.records["sig"][0]].endswith(", i32[1]")


# ---- ops on the Python path: their attribution notes ----------------------------------------------------------------
class _LoRA(nn.Module):
    """``base(x) + B(A(drop(x)))``: the adapter and the identity read the base layer's input, so ModuleTracker keeps
    them all active in each other's backward, while autograd links each product to its own module."""

    def __init__(self, d, r):
        super().__init__()
        self.base = nn.Linear(d, d, bias=False)
        self.drop = nn.Identity()
        self.A = nn.Linear(d, r, bias=False)
        self.B = nn.Linear(r, d, bias=False)

    def forward(self, x):
        return self.base(x) + self.B(self.A(self.drop(x)))


def _mm(a, b, out=None):
    (m, k), n = a.shape, b.shape[1]
    return {"matrix_flops": 2 * m * k * n, "bytes_read": F32 * (m * k + k * n), "bytes_written": F32 * m * n}


def _attribution_rows(step, model, formulas):
    with roofline.measure(model, timing=None, formulas=formulas) as r:
        step()
    a = r.meta["attribution"]
    mm = {i for i, o in enumerate(r.records["op"].tolist()) if r.op_names[o] == "aten.mm.default"}
    return r, list(zip(a["flop_counter_rows"], a["flop_counter_modules"])), a["unlinked_rows"], mm


def test_python_path_ops_carry_the_same_attribution_notes_as_the_c_path():
    torch.manual_seed(0)
    model = nn.Sequential(_LoRA(8, 2), _LoRA(8, 2))
    x = torch.randn(4, 8, requires_grad=True)

    def step():
        model(x).sum().backward()

    # the block's own formula for mm puts every product on the Python path; the C path is the reference
    _, c_moved, c_unlinked, c_mm = _attribution_rows(step, model, None)
    r, py_moved, py_unlinked, py_mm = _attribution_rows(step, model, {"aten::mm": _mm})
    assert py_mm == c_mm
    assert c_moved and {row for row, _ in c_moved} & c_mm  # products are among the rows ModuleTracker credits elsewhere
    assert py_moved == c_moved and py_unlinked == c_unlinked == []
    assert r.attribution["moved_calls"] == len(c_moved)


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
def test_python_path_ops_of_a_double_backward_say_they_are_not_linked():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8))
    x = torch.randn(4, 8, requires_grad=True)

    def step():
        model(x).sum().backward(create_graph=True)
        x.grad.pow(2).sum().backward()  # nodes the first backward created: made by no forward module
        x.grad = None
        model.zero_grad(set_to_none=True)

    _, c_moved, c_unlinked, c_mm = _attribution_rows(step, model, None)
    r, py_moved, py_unlinked, py_mm = _attribution_rows(step, model, {"aten::mm": _mm})
    assert py_mm == c_mm and set(c_unlinked) & c_mm  # products among the unlinked rows
    assert py_unlinked == c_unlinked and py_moved == c_moved
    assert r.attribution["unlinked_by_op"]["aten.mm.default"] == len(set(c_unlinked) & c_mm)


# ---- the attribution section: FlopCounterMode's structure kept ---------------------------------------------------
def test_the_flop_counter_view_of_a_block_is_flop_counter_modes():
    torch.manual_seed(0)
    model = nn.Sequential(_LoRA(8, 2))
    x = torch.randn(4, 8, requires_grad=True)

    def step():
        model(x).sum().backward()

    with roofline.measure(model, timing=None) as r:
        step()
    with FlopCounterMode(display=False) as f:
        step()
    assert r.attribution["method"] == "autograd" and r.attribution["moved_calls"] > 0
    assert r.flop_counter_compatible() == f.get_flop_counts()


# ---- torch's mode-stack context managers that an interrupt settles -------------------------------------------------
def test_the_mode_stash_codes_are_those_of_torchs_context_managers_that_take_modes_off_the_stack():
    import inspect

    codes = _modestack._mode_stash_codes()
    # the generator functions behind torch's _pop_mode_temporarily and _disable_current_modes (and, where torch has
    # it, torch.overrides' _pop_mode_temporarily for function modes)
    where = {(c.co_name, c.co_filename.replace("\\", "/").rsplit("/torch/", 1)[-1]) for c in codes}
    assert {("_pop_mode_temporarily", "utils/_python_dispatch.py"),
            ("_disable_current_modes", "utils/_python_dispatch.py")} <= where
    assert where <= {("_pop_mode_temporarily", "utils/_python_dispatch.py"),
                     ("_disable_current_modes", "utils/_python_dispatch.py"), ("_pop_mode_temporarily", "overrides.py")}
    assert len(codes) == len(where) and all(c.co_flags & inspect.CO_GENERATOR for c in codes)


# ---- torch's mode flags after a block -----------------------------------------------------------------------------
def test_torchs_compile_internals_cache_is_put_back_after_a_block_inside_a_mode_that_ignores_them(monkeypatch):
    """torch keeps, beside its Python flags, a thread-local cache of "a dispatch mode that does not ignore compile
    internals is active" (read by Dynamo). A user's mode that ignores compile internals is open; a block whose mode
    does not ignore them (Inductor's hooks not in place) is entered and left: the cache is False again, as before."""
    import torch.utils._python_dispatch as pd
    from torch.utils._python_dispatch import TorchDispatchMode

    from roofline._compiled import _collector

    real = pd.set_is_in_mode_without_ignore_compile_internals
    cache = []

    def spy(value):
        cache.append(bool(value))
        real(value)

    monkeypatch.setattr(pd, "set_is_in_mode_without_ignore_compile_internals", spy)
    monkeypatch.setattr(_modestack, "_SET_COMPILE_FLAG", spy)
    monkeypatch.setattr(_collector.Collector, "ready", lambda self: (False, "Inductor's hooks are not in place"))

    class Quiet(TorchDispatchMode):
        @classmethod
        def ignore_compile_internals(cls):
            return True

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    a = torch.ones(2, 2)
    with Quiet():
        assert cache == [False] and pd._is_in_torch_dispatch_mode  # the one mode open ignores compile internals
        with roofline.measure(timing=None) as r:
            a @ a
            assert cache[-1] is True  # the block's mode does not
        assert cache[-1] is False and pd._is_in_any_mode_without_ignore_compile_internals is False
        assert pd._is_in_torch_dispatch_mode and pd._is_in_non_infra_torch_dispatch_mode
    assert r.matrix_flops == 2 * 2 * 2 * 2
    assert cache[-1] is False and not pd._is_in_torch_dispatch_mode


def _flags():
    import torch.utils._python_dispatch as pd

    return (pd._is_in_torch_dispatch_mode, pd._is_in_non_infra_torch_dispatch_mode,
            getattr(pd, "_is_in_any_mode_without_ignore_compile_internals", False))


def test_a_users_mode_left_open_above_a_block_puts_back_the_flags_from_before_the_block_when_it_leaves():
    from torch.utils._python_dispatch import TorchDispatchMode

    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    before = _flags()
    assert before == (False, False, False)  # no mode is active
    log, block = Log(), roofline.measure(timing=None)
    block.__enter__()
    log.__enter__()  # entered after the block, left after it
    try:
        with pytest.raises(RuntimeError, match="still open above it"):
            block.__exit__(None, None, None)
        assert _flags()[:2] == (True, True)  # the user's mode is still active
    finally:
        log.__exit__(None, None, None)
    assert _flags() == before and torch._C._len_torch_dispatch_stack() == 0


def test_interleaved_blocks_of_a_generator_and_its_caller_leave_the_flags_as_they_were():
    a = torch.ones(2, 2)

    def gen():
        with roofline.measure(timing=None):
            a @ a
            yield
            a @ a

    before = _flags()
    g = gen()
    next(g)
    caller = roofline.measure(timing=None)
    caller.__enter__()
    with pytest.raises(RuntimeError, match="still open above it"):
        next(g)  # the generator's block is left under the caller's
    assert _flags()[:2] == (True, True)  # the caller's block is still open
    with pytest.raises(RuntimeError, match="a block entered before this one was left"):
        caller.__exit__(None, None, None)
    assert _flags() == before and torch._C._len_torch_dispatch_stack() == 0


class _Log(torch.utils._python_dispatch.TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def test_a_block_entered_above_a_users_mode_keeps_its_flags_when_a_block_below_the_mode_leaves():
    # stack: block 1, the user's mode, block 2; block 1 leaves first (both blocks then say they interleaved)
    before = _flags()
    log, first, second = _Log(), roofline.measure(timing=None), roofline.measure(timing=None)
    first.__enter__()
    log.__enter__()
    second.__enter__()
    try:
        with pytest.raises(RuntimeError, match="still open above it"):
            first.__exit__(None, None, None)
        with pytest.raises(RuntimeError, match="a block entered before this one was left"):
            second.__exit__(None, None, None)
        # the user's mode is still open: torch says a dispatch mode is active
        assert torch.utils._python_dispatch._get_current_dispatch_mode_stack() == [log]
        assert _flags()[:2] == (True, True)
    finally:
        log.__exit__(None, None, None)
    assert _flags() == before and torch._C._len_torch_dispatch_stack() == 0


@pytest.mark.parametrize("below", [False, True])
def test_a_users_mode_entered_twice_around_a_block_that_leaves_puts_the_flags_back_when_it_leaves(below):
    # the same mode object entered twice (nested): both times above a block, or once below and once above it; the
    # block leaves first. Once the mode has left both times, no mode is active and torch's flags say so
    before = _flags()
    log, block = _Log(), roofline.measure(timing=None)
    if below:
        log.__enter__()
    block.__enter__()
    log.__enter__()
    if not below:
        log.__enter__()
    try:
        with pytest.raises(RuntimeError, match=rf"left while {1 if below else 2} dispatch mode\(s\) entered after it"):
            block.__exit__(None, None, None)
        log.__exit__(None, None, None)
        assert _flags()[:2] == (True, True)  # still open once
    finally:
        log.__exit__(None, None, None)
    assert torch._C._len_torch_dispatch_stack() == 0 and _flags() == before


# ---- the instrumentation's own cost, on a clock of the test's ------------------------------------------------------
class _Clock:
    """A clock that a read advances by READ and a torch.add by ADD_BARE (no dispatch mode) or ADD_COUNTED (under the
    block's mode); a fake CUDA event's record() by RECORD. Powers of two: the sums below are exact."""

    READ, ADD_BARE, ADD_COUNTED, RECORD = 2.0 ** -10, 2.0 ** -6, 2.0 ** -4, 2.0 ** -3

    def __init__(self):
        self.t = 1000.0

    def read(self):
        self.t += self.READ
        return self.t


@pytest.mark.parametrize("cuda", [False, True])
def test_the_instrumentations_own_cost_is_the_difference_of_its_clock_reads(monkeypatch, cuda):
    import time

    from roofline._capture import _session

    clock = _Clock()
    real_add = torch.add

    def add(*args, **kwargs):
        clock.t += clock.ADD_COUNTED if torch._C._len_torch_dispatch_stack() else clock.ADD_BARE
        return real_add(*args, **kwargs)

    class Event:
        def __init__(self, enable_timing=False):
            self.enable_timing = enable_timing

        def record(self, stream=None):
            clock.t += clock.RECORD

    monkeypatch.setattr(_session, "_OVERHEAD", {})  # measured now, not cached from an earlier block
    monkeypatch.setattr(time, "perf_counter", clock.read)
    monkeypatch.setattr(_session, "_now", clock.read)
    monkeypatch.setattr(torch, "add", add)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: cuda)  # measured once CUDA is in use
    monkeypatch.setattr(torch.cuda, "Event", Event)
    o = _session.instrumentation_overhead("op")
    # an add costs ADD_BARE outside the mode and ADD_COUNTED under it; a loop of n adds is timed by two reads, so
    # each loop gives (READ + n * ADD) / n, and the difference per op is ADD_COUNTED - ADD_BARE, whatever n
    assert o["counting_per_op_s"] == pytest.approx(clock.ADD_COUNTED - clock.ADD_BARE, rel=1e-12)
    # timing="op" reads the clock twice per op: 1000 pairs of reads, timed by one more read, over 1000
    assert o["timing_per_op_s"] == pytest.approx((2 * 1000 + 1) * clock.READ / 1000, rel=1e-12)
    if cuda:  # two events made and recorded per op: 200 pairs, timed by one read, over 200
        assert o["cuda_timing_per_op_s"] == pytest.approx((2 * 200 * clock.RECORD + clock.READ) / 200, rel=1e-12)
    else:
        assert "cuda_timing_per_op_s" not in o


def test_a_timed_block_leaves_cuda_uninitialised_when_the_process_has_not_used_it(monkeypatch):
    # CUDA present but not initialised (a CPU workload): synchronising would initialise it, so the block does not
    from roofline._capture import _session

    _session.instrumentation_overhead("op")  # measured once per process, before CUDA is said to be present
    syncs = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: syncs.append(a))
    a = torch.ones(2, 2)
    with roofline.measure(timing="model") as r:
        a @ a
    assert syncs == [] and r.matrix_flops == 2 * 2 * 2 * 2 and r.wall_time > 0


def test_a_block_whose_autograd_links_broke_says_its_backward_is_credited_as_module_tracker_does():
    import types

    from roofline._capture import _session, _tracking

    if _tracking._LINK is None:
        pytest.skip("this torch lacks what linking backward ops to modules needs")

    def session(broken):
        c = types.SimpleNamespace(links_broken=broken, fcm_log=[5, 1, 7, 2], unlinked_log=[9])
        return types.SimpleNamespace(attribution=lambda: (c.fcm_log, c.unlinked_log),
                                     tracker=types.SimpleNamespace(c=c), root_name=None)

    ok = _session.attribution_meta(session(False))
    assert ok == {"method": "autograd", "flop_counter_rows": [5, 7], "flop_counter_modules": [1, 2],
                  "unlinked_rows": [9]}
    broken = _session.attribution_meta(session(True))
    assert broken["method"] == "module_tracker" and "went backwards" in broken["note"]
