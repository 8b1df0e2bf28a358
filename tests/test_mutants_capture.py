"""The capture session where its other tests leave it open (roofline/_capture/): the optimizer phase around a step
whatever its arguments (a closure passed either way, extra arguments, a block opened inside a step, a step of
another thread), per-op timing against whole-block timing, the block's own formulas, the device synchronisation
and per-op CUDA events of a timed block (on fake CUDA tensors: the bookkeeping is the host's), and a block entered
before Inductor is imported. Expected values are worked out here (a Linear's products by hand)."""

from __future__ import annotations

import contextlib
import inspect
import math
import sys
import threading

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import roofline  # noqa: E402
from roofline import _core  # noqa: E402
from roofline._capture import _modes, _session  # noqa: E402

T, D = 4, 8


def _mm(m, k, n):
    return 2 * m * k * n


def _linear():
    torch.manual_seed(0)
    return torch.nn.Linear(D, D), torch.randn(T, D)


class _Scaled(torch.optim.SGD):
    """SGD whose step takes an extra argument after the closure: the parameters are multiplied by ``scale``."""

    def step(self, closure=None, scale=1.0):
        loss = closure() if closure is not None else None
        with torch.no_grad():
            for p in self.param_groups[0]["params"]:
                p.mul_(scale)
        return loss


def _phases(r):
    return r.by_phase()


@pytest.mark.parametrize("call", ["positional", "positional and an extra argument", "keyword", "no closure"])
def test_a_closures_forward_and_backward_keep_their_phases_however_the_step_is_called(call):
    model, x = _linear()
    opt = _Scaled(model.parameters(), lr=0.0)

    def closure():
        opt.zero_grad()
        loss = model(x).sum()
        loss.backward()
        return loss

    w = model.weight.detach().clone()
    if call == "no closure":
        closure()
    with roofline.measure(model, timing=None) as r:
        if call == "positional":
            opt.step(closure)
        elif call == "positional and an extra argument":
            opt.step(closure, 2.0)
        elif call == "keyword":
            opt.step(closure=closure)
        else:
            opt.step()
        model(x)  # after the step: the forward phase again
    ph = _phases(r)
    # forward: (T x D) @ (D x D) per model call; backward: the weight's gradient (D x T) @ (T x D), x needs none
    calls = 1 if call == "no closure" else 2
    assert ph["forward"]["matrix_flops"] == calls * _mm(T, D, D)
    assert ph.get("backward", {"matrix_flops": 0})["matrix_flops"] == (0 if call == "no closure" else _mm(D, T, D))
    assert ph["optimizer"]["matrix_flops"] == 0 and ph["optimizer"]["calls"] >= 2  # the two mul_
    # the extra argument reached the step
    scale = 2.0 if call == "positional and an extra argument" else 1.0
    assert torch.equal(model.weight.detach(), w * scale)


def test_a_block_opened_inside_an_optimizer_step_counts_the_next_steps_phases():
    """A block entered by a hook at the end of an optimizer step (a profiler stepped from the optimizer's post-hook)
    has seen no start of that step: its end does not count as one, and the next step's forward, optimizer and the
    forward after it keep their phases."""
    model, x = _linear()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    block = roofline.measure(model, timing=None)
    opened = []

    def open_block(optimizer, args, kwargs):
        if not opened:
            opened.append(block.__enter__())

    handle = opt.register_step_post_hook(open_block)
    try:
        model(x).sum().backward()
        opt.step()  # the block opens in its post-hook
        handle.remove()
        opt.step()
        model(x)
    finally:
        handle.remove()
        block.__exit__(None, None, None)
    r = opened[0] if isinstance(opened[0], roofline.Report) else block.report
    ph = _phases(r)
    assert ph["forward"]["matrix_flops"] == _mm(T, D, D) and ph["forward"]["calls"] >= 1
    assert ph["optimizer"]["matrix_flops"] == 0 and ph["optimizer"]["calls"] >= 1
    assert torch._C._len_torch_dispatch_stack() == 0


def test_another_threads_optimizer_step_leaves_this_blocks_step_in_its_phase():
    """Optimizer hooks are process-wide: a step that another thread (no block open there) runs while this block is
    inside its own step does not end this block's optimizer phase."""
    model, x = _linear()
    inside, other_done = threading.Event(), threading.Event()

    class Slow(torch.optim.SGD):
        def step(self, closure=None):
            with torch.no_grad():
                for p in self.param_groups[0]["params"]:
                    p.add_(1.0)
            inside.set()
            other_done.wait(10)
            with torch.no_grad():
                for p in self.param_groups[0]["params"]:
                    p.add_(1.0)  # after the other thread's step: still this step's

    other_model = torch.nn.Linear(2, 2)
    other = torch.optim.SGD(other_model.parameters(), lr=0.1)

    def run_other():
        inside.wait(10)
        other_model(torch.randn(1, 2)).sum().backward()
        other.step()
        other_done.set()

    slow = Slow(model.parameters(), lr=0.1)
    t = threading.Thread(target=run_other)
    t.start()
    with roofline.measure(model, timing=None) as r:
        slow.step()
    t.join(10)
    ph = _phases(r)
    # two add_ per parameter (weight, bias), all in the optimizer phase
    assert ph["optimizer"]["calls"] == 4
    assert ph.get("forward", {"bytes": 0})["bytes"] == 0  # (the step's record_function markers: no bytes)


def test_per_op_timing_times_each_op_and_block_timing_only_the_block():
    model, x = _linear()
    with roofline.measure(model, timing="op") as op:
        model(x)
    t = op.records["t_end"] - op.records["t_start"]
    assert len(t) >= 1 and np.all(np.isfinite(t)) and np.all(t >= 0)
    # in seconds from the block's start: within its wall time
    assert np.all(op.records["t_start"] >= 0) and np.all(op.records["t_end"] <= op.wall_time)
    import time

    t0 = time.perf_counter()
    with roofline.measure(model, timing="model") as whole:
        model(x)
    elapsed = time.perf_counter() - t0  # the block's wall time lies within it
    assert np.all(np.isnan(whole.records["t_start"])) and 0 < whole.wall_time <= elapsed


def test_the_blocks_own_formulas_count_its_ops():
    x = torch.randn(T, D)
    with roofline.measure(timing=None, formulas={"aten::gelu": lambda *a, **k: {"vector_flops": 7}}) as r:
        torch.nn.functional.gelu(x)
    assert r.vector_flops == 7


# ---- the device's side of a timed block, on fake CUDA tensors (the host's bookkeeping, without a GPU) ----------------
class _FakeEvent:
    made: list = []
    clock = 0  # one tick (1 ms) per record()

    def __init__(self, enable_timing=False):
        self.enable_timing = enable_timing
        self.t = None
        _FakeEvent.made.append(self)

    def record(self, stream=None):
        _FakeEvent.clock += 1
        self.t = _FakeEvent.clock

    def elapsed_time(self, end):
        return float(end.t - self.t)  # milliseconds


@pytest.fixture
def fake_cuda(monkeypatch):
    syncs = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: syncs.append(a))
    monkeypatch.setattr(torch.cuda, "Event", _FakeEvent)
    _FakeEvent.made, _FakeEvent.clock = [], 0
    return syncs


def _cuda_tensor():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        return torch.empty(T, D, device="cuda:0")


def test_a_timed_block_synchronises_the_device_when_it_starts_and_ends(fake_cuda):
    with roofline.measure(timing="model"):
        pass
    assert len(fake_cuda) == 2
    fake_cuda.clear()
    with roofline.measure(timing=None):
        pass
    assert fake_cuda == []


def test_per_op_timing_of_cuda_ops_takes_event_pairs_read_after_the_block(fake_cuda):
    a = _cuda_tensor()
    with roofline.measure(timing="op") as r:
        torch.relu(a)
        torch.neg(a)
    # events recorded 1 ms apart: the block's base event (1st), then a pair per op (2nd and 3rd, 4th and 5th):
    # each op starts and ends (k - 1) ms after the base, in seconds, plus the base event's own time from the block's
    # start by the host clock (a few microseconds here)
    assert _FakeEvent.made[0].enable_timing and all(e.enable_timing for e in _FakeEvent.made)
    base = r.records["t_start"][0] - 1e-3
    assert 0 <= base < 1e-3
    assert r.records["t_start"].tolist() == [base + 1e-3, base + 3e-3]
    assert r.records["t_end"].tolist() == [base + 2e-3, base + 4e-3]
    # whole-block timing makes no event
    _FakeEvent.made = []
    with roofline.measure(timing="model"):
        torch.relu(a)
    assert _FakeEvent.made == []


def test_cuda_ops_are_recognised_by_their_first_tensor_or_their_device_argument():
    a = _cuda_tensor()
    assert _modes._on_cuda((a,)) and _modes._on_cuda((1, [a])) and _modes._on_cuda(([a, 2],))
    assert not _modes._on_cuda((torch.ones(1), a)) and not _modes._on_cuda(((),)) and not _modes._on_cuda(())
    assert _modes._on_cuda((), {"device": "cuda:0"}) and not _modes._on_cuda((a,), {"device": "cpu"})
    assert _modes._on_cuda((a,), {"dtype": torch.float32})


def test_a_block_entered_before_inductor_is_imported_installs_the_compiled_view_when_dynamo_asks(monkeypatch):
    """Dynamo asks the block's mode whether to compile (``ignore_compile_internals``): while the block is being
    entered Inductor is not imported for it, and once entered it is (the hooks installed then), so that compiled code
    first run inside the block is counted as compiled."""
    from roofline._compiled import _collector

    installed = []
    monkeypatch.setitem(_collector._state, "installed", False)
    monkeypatch.setattr(_collector, "install", lambda: installed.append(1))
    monkeypatch.setattr(_collector, "hooks_in_place", lambda: None)
    monkeypatch.delitem(sys.modules, "torch._inductor.compile_fx", raising=False)
    with roofline.measure(timing=None):
        (mode,) = [m for m in torch.utils._python_dispatch._get_current_dispatch_mode_stack()
                   if isinstance(m, _modes._Mode)]
        assert mode.ignore_compile_internals() is True
    assert installed == [1]


# ---- the token layout a block reads from its model's attention_mask --------------------------------------------------
class _Masked(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(D, D)

    def forward(self, x, attention_mask=None):
        return self.lin(x)


def test_the_first_call_with_a_mask_gives_the_layout():
    m, x = _Masked(), torch.randn(2, 3, D)
    first = torch.tensor([[1, 1, 0], [1, 0, 0]])
    with roofline.measure(m, timing=None) as r:
        m(x, attention_mask=first)
        m(x, attention_mask=torch.ones(2, 3, dtype=torch.long))  # a later call's mask is not read
    assert r.meta["tokens"] == {"batch": 2, "seq_len": 3, "lengths": [2, 1], "packed": False}


@pytest.fixture
def device_mask(monkeypatch):
    """A mask on a device (a fake CUDA tensor) whose values the block can read: when they are read, how many modes
    are on torch's stack (the block's mode, while it is open)."""
    from roofline._datamodel import _tokens

    reads = []
    mask = None

    def values(t, name):
        reads.append(torch._C._len_torch_dispatch_stack())
        return np.array([[1, 1, 0], [1, 0, 0]])

    monkeypatch.setattr(_tokens, "values_unknown", lambda t: None)
    monkeypatch.setattr(_tokens, "tensor_values", values)
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        mask = torch.ones(2, 3, dtype=torch.long, device="cuda:0")
    return mask, reads


def test_a_mask_on_a_device_is_read_once_the_block_is_left(device_mask):
    mask, reads = device_mask
    m, x = _Masked(), torch.randn(2, 3, D)
    with roofline.measure(m, timing=None) as r:
        m(x, attention_mask=mask)
        assert reads == []  # not inside the block (a device copy there would synchronise it)
    assert reads == [0]
    assert r.meta["tokens"] == {"batch": 2, "seq_len": 3, "lengths": [2, 1], "packed": False}


def test_a_mask_on_a_device_changed_in_place_in_the_block_gives_no_layout(device_mask):
    mask, reads = device_mask
    m, x = _Masked(), torch.randn(2, 3, D)
    with roofline.measure(m, timing=None) as r:
        m(x, attention_mask=mask)
        mask.add_(1)  # before it could be read
    assert reads == [] and "tokens" not in r.meta
    assert r.meta["tokens_unknown"] == ("the model's attention_mask is a tensor changed in place during the block, "
                                        "before it could be read: which of its tokens are real is unknown")


@pytest.mark.parametrize("timing", [None, "op"])
def test_ops_of_dtensors_sharding_propagation_run_uncounted_with_all_their_arguments(monkeypatch, timing):
    """While DTensor propagates shardings (fake tensors), the block's mode runs the ops as they were called (keyword
    arguments included) and records nothing."""
    from roofline._capture import _collectives

    monkeypatch.setattr(_collectives, "suppressed", lambda: True)
    a, b = torch.ones(3), torch.ones(3)
    with roofline.measure(timing=timing) as r:
        out = torch.add(a, b, alpha=2)  # aten.add.Tensor(a, b, alpha=2): 1 + 2 x 1
    assert out.tolist() == [3.0, 3.0, 3.0] and len(r.records) == 0


def test_a_mode_of_the_users_left_open_above_a_block_stays_and_the_block_says_why():
    from torch.utils._python_dispatch import TorchDispatchMode

    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    log, block = Log(), roofline.measure(timing=None)
    block.__enter__()
    log.__enter__()  # entered after the block, left after it
    try:
        with pytest.raises(RuntimeError, match=r"left while 1 dispatch mode\(s\) entered after it were still open "
                                               r"above it on this thread \(Log\)"):
            block.__exit__(None, None, None)
        assert torch.utils._python_dispatch._get_current_dispatch_mode_stack() == [log]
    finally:
        log.__exit__(None, None, None)
    assert torch._C._len_torch_dispatch_stack() == 0


def test_ops_on_fake_cuda_tensors_without_cuda_are_timed_on_the_host():
    """Fake CUDA tensors (a model traced for a GPU on a host without one): per-op times come from the host clock,
    no CUDA event is made."""
    a = _cuda_tensor()
    with roofline.measure(timing="op") as r:
        torch.relu(a)
    assert len(r.records) == 1 and 0 <= r.records["t_start"][0] <= r.records["t_end"][0] <= r.wall_time


@pytest.mark.parametrize("timing", [None, "op"])
def test_an_op_counted_by_a_python_formula_runs_with_its_keyword_arguments(timing):
    a, b = torch.ones(3), torch.ones(3)
    with roofline.measure(timing=timing, formulas={"aten::add": lambda *args, **kw: {"vector_flops": 3}}) as r:
        out = torch.add(a, b, alpha=2)  # 1 + 2 x 1
    assert out.tolist() == [3.0, 3.0, 3.0] and r.vector_flops == 3


# ---- what the C tracker takes from torch (computed once, at import) ---------------------------------------------------
def test_the_hook_registration_steps_are_torchs_where_it_has_them_all(monkeypatch):
    import collections

    from roofline._capture import _tracking
    from torch.utils.hooks import RemovableHandle

    assert _tracking._register_steps() == (collections.OrderedDict, RemovableHandle,
                                           torch._C._has_torch_function_unary)
    monkeypatch.setattr(RemovableHandle, "next_id", "0")  # not an int: the counter is not torch's
    assert _tracking._register_steps() is None
    monkeypatch.undo()
    monkeypatch.delattr(torch._C, "_has_torch_function_unary")
    assert _tracking._register_steps() is None


def test_the_link_steps_are_torchs_where_it_has_them_all(monkeypatch):
    from roofline._capture import _tracking

    steps = _tracking._link_steps()
    assert steps is not None and steps[0] is torch._C._autograd._get_sequence_nr and steps[-1] is torch.is_grad_enabled
    monkeypatch.delattr(torch._C, "_current_autograd_node")
    assert _tracking._link_steps() is None


def _hook(qualname, **closure):
    """A function named ``qualname`` whose closure holds ``closure``'s variables (as torch.utils.checkpoint's
    packing hooks hold their checkpoint frame)."""
    names = ", ".join(closure) or "_unused"
    src = f"def outer({names}):\n    def hook(x):\n        return ({names},)\n    return hook\n"
    ns: dict = {}
    exec(src, ns)
    h = ns["outer"](*closure.values()) if closure else ns["outer"](None)
    h.__qualname__ = qualname
    return h


def test_recomputation_is_read_from_the_packing_hook_on_top_of_torchs_stack():
    from roofline._capture import _tracking

    rec, other = _hook("_recomputation_hook.<locals>.pack"), _hook("save_on_cpu.<locals>.pack")
    assert _tracking._recompute_hooks((rec, other)) and not _tracking._recompute_hooks((other, rec))
    assert _tracking._recompute_hooks((_hook("_checkpoint_hook.<locals>.pack"), other))


def test_a_checkpoints_region_is_the_set_of_its_first_module_call():
    import weakref

    from roofline._capture import _tracking

    class Frame:  # torch.utils.checkpoint's _CheckpointFrame: held weakly
        pass

    frame = Frame()
    regions = _tracking._Regions()
    packing = (_hook("_checkpoint_hook.<locals>.pack", frame=frame), None)
    regions.note(packing, 3)  # the first module forward inside the checkpointed function
    regions.note(packing, 5)  # a later one: not the caller's set
    regions.note((_hook("save_on_cpu.<locals>.pack"), None), 7)  # not a checkpoint's: nothing noted
    recomputing = (_hook("_recomputation_hook.<locals>.pack", target_frame_ref=weakref.ref(frame)), None)
    assert regions.of(recomputing) == 3 and len(regions.sets) == 1
    assert regions.of((_hook("save_on_cpu.<locals>.pack"), None)) is None


def test_a_leafs_gradient_accumulator_is_reached_through_a_view():
    from roofline._capture import _tracking

    leaf = torch.ones(2, requires_grad=True)
    node = _tracking._view_node(leaf)
    assert type(node).__name__ == "AccumulateGrad" and node.variable is leaf


# ---- torch's mode stack, as a block leaves it -------------------------------------------------------------------------
def test_every_release_step_runs_and_the_first_error_is_raised():
    from roofline._capture import _modestack

    ran = []

    def fail(what):
        def step():
            ran.append(what)
            raise KeyError(what)
        return step

    with pytest.raises(KeyError, match="first"):
        _modestack._run_all([lambda: ran.append("a"), fail("first"), fail("second"), lambda: ran.append("b")])
    assert ran == ["a", "first", "second", "b"]
    _modestack._run_all([lambda: ran.append("c")])  # nothing raised: nothing raised after
    assert ran[-1] == "c"


def test_a_mode_stash_cut_off_by_an_interrupt_puts_the_modes_back_when_settled():
    """An interrupt landing in ``_disable_current_modes``' ``__enter__`` once it has taken the modes off the stack
    leaves its generator suspended, held by the traceback: settling the exception (and the one it interrupted)
    closes it, and the modes are back on the stack."""
    from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

    from roofline._capture import _modestack

    class Plain(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    enter_code = type(_disable_current_modes()).__enter__.__code__
    closed = []

    @contextlib.contextmanager
    def users():  # a context manager of the user's, cut off the same way: not torch's, left alone
        try:
            yield
        finally:
            closed.append(True)

    def interrupt(frame, event, arg):  # raises in __enter__ once the modes are off, the generator suspended
        if frame.f_code is not enter_code:
            return None
        frame.f_trace_opcodes = True
        gen = getattr(frame.f_locals.get("self"), "gen", None)
        if event == "opcode" and gen is not None and inspect.getgeneratorstate(gen) == inspect.GEN_SUSPENDED:
            raise KeyboardInterrupt
        return interrupt

    with Plain():
        depth = torch._C._len_torch_dispatch_stack()
        sys.settrace(interrupt)
        try:
            with _disable_current_modes():
                pass
        except KeyboardInterrupt as e:
            caught = e
        finally:
            sys.settrace(None)
        assert torch._C._len_torch_dispatch_stack() == 0  # cut off with the modes off
        sys.settrace(interrupt)
        try:
            with users():
                pass
        except KeyboardInterrupt as e:
            caught.__context__ = e
        finally:
            sys.settrace(None)
        outer = ValueError("while leaving")
        outer.__context__ = caught  # settled through the chain of the exception it interrupted
        _modestack._settle_interrupted(outer)
        assert torch._C._len_torch_dispatch_stack() == depth == 1 and closed == []
        _modestack._settle_interrupted(outer)  # once closed, nothing more to do
        assert torch._C._len_torch_dispatch_stack() == 1
    assert torch._C._len_torch_dispatch_stack() == 0


def test_backward_ops_are_credited_through_autograd_where_torch_allows_it():
    from roofline._capture import _tracking

    model, x = _linear()
    with roofline.measure(model, timing=None) as r:
        model(x).sum().backward()
    att = r.meta["attribution"]
    assert att["method"] == ("autograd" if _tracking._LINK is not None else "module_tracker") and "note" not in att


@pytest.mark.parametrize("cuda", [False, True])
def test_the_instrumentations_own_cost_per_op_is_measured_in_seconds(monkeypatch, request, cuda):
    if cuda:
        request.getfixturevalue("fake_cuda")
    monkeypatch.setattr(_session, "_OVERHEAD", {})  # measured now, not cached from an earlier block
    o = _session.instrumentation_overhead("op")
    # a dispatch through the block's mode and two clock reads cost microseconds: far under a millisecond an op
    assert 0 <= o["counting_per_op_s"] < 1e-3 and 0 < o["timing_per_op_s"] < 1e-3
    if cuda:  # two (fake) events made and recorded per op, with timing on
        assert 0 < o["cuda_timing_per_op_s"] < 1e-3 and all(e.enable_timing for e in _FakeEvent.made)
    else:
        assert "cuda_timing_per_op_s" not in o
    assert set(_session.instrumentation_overhead("model")) == {"counting_per_op_s"}
