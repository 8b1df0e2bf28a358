"""Module attribution of roofline.measure, op by op, against torch's own ModuleTracker (the tracker FlopCounterMode
uses) run on the same workload: nested modules, reused and shared module instances, a module called twice,
backward with retain_graph and with activation checkpointing, other threads; and the block leaves nothing installed
behind it, with or without an exception."""

import gc
import threading
import weakref

import pytest

torch = pytest.importorskip("torch")

from torch.nn.modules import module as _nn_module  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402
from torch.utils.module_tracker import ModuleTracker  # noqa: E402

import roofline  # noqa: E402
from roofline import _core  # noqa: E402


class _Oracle(TorchDispatchMode):
    """Every op that reaches the mode, with torch's ModuleTracker's set of current modules at that moment."""

    def __init__(self, tracker):
        super().__init__()
        self.tracker = tracker
        self.rows = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.rows.append((str(func), tuple(sorted(self.tracker.parents))))
        return out


def _oracle_rows(make, step):
    model, inputs = make()
    with ModuleTracker() as tracker, _Oracle(tracker) as oracle:
        step(model, inputs)
    return oracle.rows


def _roofline_rows(make, step):
    """The rows with the module sets of FlopCounterMode's structure (the report's default credits backward ops to
    the module whose forward created their autograd node: tests/test_attribution.py)."""
    model, inputs = make()
    with roofline.measure(model, timing=None) as r:
        step(model, inputs)
    names = r.op_names
    return [(names[rec["op"]], tuple(r.module_sets[rec["module"]])) for rec in r._flop_counter_records()]


def _same_attribution(make, step):
    expected = _oracle_rows(make, step)
    got = _roofline_rows(make, step)
    assert [op for op, _ in got] == [op for op, _ in expected]  # the same op stream: the comparison is op by op
    for i, (g, e) in enumerate(zip(got, expected)):
        assert g == e, (i, g, e)
    return got


def _seeded(build):
    def make():
        torch.manual_seed(0)
        return build()

    return make


def _fwd_bwd(model, inputs):
    model(*inputs).sum().backward()


class _TwoCalls(torch.nn.Module):
    """Calls the same child twice in one forward (a reused instance)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.act = torch.nn.Tanh()

    def forward(self, x):
        return self.lin(self.act(self.lin(x)))


class _Shared(torch.nn.Module):
    """One Linear instance registered under two parents."""

    def __init__(self):
        super().__init__()
        shared = torch.nn.Linear(8, 8)
        self.a = torch.nn.Sequential(shared, torch.nn.ReLU())
        self.b = torch.nn.Sequential(torch.nn.Tanh(), shared)

    def forward(self, x):
        return self.b(self.a(x))


def test_nested_modules_forward_and_backward():
    build = _seeded(lambda: (torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Sequential(
        torch.nn.Linear(16, 4), torch.nn.ReLU())), (torch.randn(3, 8),)))
    rows = _same_attribution(build, _fwd_bwd)
    sets = {s for _, s in rows}
    assert ("Global", "Sequential", "Sequential.1", "Sequential.1.0") in sets  # a nested module's own ops
    assert len(rows) > 10


def test_reused_instance_called_twice_in_one_forward():
    rows = _same_attribution(_seeded(lambda: (_TwoCalls(), (torch.randn(2, 8, requires_grad=True),))), _fwd_bwd)
    assert sum(1 for op, s in rows if op == "aten.addmm.default" and "_TwoCalls.lin" in s) == 2


def test_module_shared_between_parents():
    _same_attribution(_seeded(lambda: (_Shared(), (torch.randn(2, 8),))), _fwd_bwd)


def test_model_called_twice_in_one_block():
    def step(model, inputs):
        model(*inputs).sum().backward()
        model(*inputs).sum().backward()

    build = _seeded(lambda: (torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU()), (torch.randn(2, 8),)))
    rows = _same_attribution(build, step)
    forward_mm = [s for op, s in rows if op == "aten.addmm.default"]
    assert forward_mm == [("Global", "Sequential", "Sequential.0")] * 2


def test_backward_with_retain_graph():
    def step(model, inputs):
        loss = model(*inputs).sum()
        loss.backward(retain_graph=True)
        loss.backward()

    _same_attribution(_seeded(lambda: (_TwoCalls(), (torch.randn(2, 8),))), step)


def test_partial_backward_waits_only_for_the_gradients_computed():
    """A backward that computes only some gradients (torch.autograd.grad for one weight, backward(inputs=...)): a
    module call's gradient hooks wait only for the tensors whose gradient node runs, counted per backward, as
    register_multi_grad_hook does; then a full backward of a second forward."""

    def step(model, inputs):
        x = inputs[0].requires_grad_()
        out = model(x)
        torch.autograd.grad(out.sum(), [model[2].weight], retain_graph=True)
        out.sum().backward(inputs=[model[0].bias])
        model(x).sum().backward()

    build = _seeded(lambda: (torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 4)),
                             (torch.randn(2, 8),)))
    rows = _same_attribution(build, step)
    assert len({s for _, s in rows}) > 3  # backward ops under module sets of their own, not only Global


class _TwoHeads(torch.nn.Module):
    """A child whose two outputs feed the loss unequally: only the first one's gradient node runs in backward."""

    class Split(torch.nn.Module):
        def forward(self, x):
            return x * 2, x * 3

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.split = self.Split()
        self.out = torch.nn.Linear(8, 4)

    def forward(self, x):
        a, _unused = self.split(self.lin(x))
        return self.out(a)


def test_gradient_hooks_ignore_outputs_whose_gradient_never_runs():
    """The split's second output is not part of the loss: its re-entry in backward waits for the first only (the
    engine will not execute the second's node), so the ops of its backward are under the split, as in torch."""
    rows = _same_attribution(_seeded(lambda: (_TwoHeads(), (torch.randn(2, 8),))), _fwd_bwd)
    assert any("_TwoHeads.split" in s and op == "aten.mul.Tensor" for op, s in rows[len(rows) // 2:])


@pytest.mark.parametrize("reentrant", [False, True])
def test_backward_with_activation_checkpointing(reentrant):
    from torch.utils.checkpoint import checkpoint

    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 8))
            self.head = torch.nn.Linear(8, 1)

        def forward(self, x):
            return self.head(checkpoint(self.inner, x, use_reentrant=reentrant))

    rows = _same_attribution(_seeded(lambda: (Outer(), (torch.randn(2, 8, requires_grad=True),))), _fwd_bwd)
    # the checkpointed block runs its forward again in backward: its products are counted twice
    assert sum(1 for op, s in rows if op == "aten.addmm.default" and "Outer.inner.0" in s) == 2


def test_input_requiring_grad_in_a_dict_and_a_list():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, d, extra):
            return self.lin(d["x"] * extra[0]) + self.lin(d["y"])

    def make():
        torch.manual_seed(0)
        return Net(), ({"x": torch.randn(2, 4, requires_grad=True), "y": torch.randn(2, 4)},
                       [torch.randn(2, 4, requires_grad=True), 3])

    _same_attribution(make, _fwd_bwd)


def test_named_tuple_outputs_walked_like_torch():
    """Outputs that are neither a tensor nor a plain tuple/list/dict go through torch's pytree, as in
    ModuleTracker: a namedtuple's tensors get the gradient hooks that re-enter the module in backward."""
    import collections

    Pair = collections.namedtuple("Pair", "a b")

    class Split(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 8)

        def forward(self, x):
            y = self.lin(x)
            return Pair(y[:, :4], y[:, 4:])

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.split = Split()

        def forward(self, x):
            p = self.split(x)
            return p.a * p.b

    _same_attribution(_seeded(lambda: (Net(), (torch.randn(2, 4),))), _fwd_bwd)


def _global_hook_counts():
    return (len(_nn_module._global_forward_pre_hooks), len(_nn_module._global_forward_hooks))


def test_hooks_removed_and_modules_released_after_exit():
    before = _global_hook_counts()
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    x = torch.randn(2, 4, requires_grad=True)
    with roofline.measure(model, timing=None) as r:
        assert _global_hook_counts() == (before[0] + 1, before[1] + 1)
        out = model(x)
    assert _global_hook_counts() == before
    n = len(r.records)
    out.sum().backward()  # the graph built inside the block: its gradient hooks are gone, nothing is recorded
    assert len(r.records) == n
    ref = weakref.ref(model)
    del model, out
    gc.collect()
    assert ref() is None  # the tracker holds no module after the block


def test_exception_inside_the_block():
    before = _global_hook_counts()

    class Boom(torch.nn.Module):
        def forward(self, x):
            x = x * 2
            raise KeyError("boom")

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), Boom())
    with pytest.raises(KeyError, match="boom"):
        with roofline.measure(model, timing=None):
            model(torch.randn(2, 4))
    assert _global_hook_counts() == before
    # the next block starts from a clean state: no module left "running" from the failed one
    lin, x = torch.nn.Linear(4, 4), torch.randn(2, 4)
    with roofline.measure(lin, timing=None) as r:
        lin(x)
    assert r.module_sets == [("Global",), ("Global", "Linear")]
    assert {r.module_sets[m] for m in r.records["module"]} == {("Global", "Linear")}


def test_modules_run_by_another_thread_are_not_attributed():
    """Module hooks are process-global; they act only on the thread whose mode stack holds the block's mode."""
    other = torch.nn.Sequential(torch.nn.Linear(4, 4))
    mine = torch.nn.Linear(4, 4)
    started, release = threading.Event(), threading.Event()

    def worker():
        started.set()
        release.wait(10)
        for _ in range(20):
            other(torch.randn(2, 4))

    t = threading.Thread(target=worker)
    t.start()
    started.wait(10)
    with roofline.measure(mine, timing=None) as r:
        release.set()
        for _ in range(20):
            mine(torch.randn(2, 4))
        t.join(10)
    names = {n for s in r.module_sets for n in s}
    assert names == {"Global", "Linear"}
    assert sum(r.records["op"] == r.records["op"][0]) >= 20  # the block's own ops are all there


def test_fast_path_gives_the_first_call_s_counts():
    """The first call of an op goes through Python (resolution), later ones through the C table: same counts."""
    a, b = torch.randn(16, 32), torch.randn(32, 8)
    with roofline.measure(timing=None) as r:
        for _ in range(3):
            torch.mm(a, b)
    rec = r.records
    assert len(rec) == 3
    assert list(rec["matrix_flops"]) == [2 * 16 * 32 * 8] * 3
    assert list(rec["bytes_read"]) == [(16 * 32 + 32 * 8) * 4] * 3
    assert list(rec["bytes_written"]) == [16 * 8 * 4] * 3


def test_optimizer_phase_and_backward_phase():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x1, x2 = torch.randn(2, 4), torch.randn(2, 4)
    with roofline.measure(model, timing=None) as r:
        model(x1).sum().backward()
        opt.step()
        model(x2)
    by_op = {}
    for op, phase in zip(r.records["op"], r.records["phase"]):
        by_op.setdefault(r.op_names[op], []).append(int(phase))
    assert by_op["aten.addmm.default"] == [0, 0]  # both forwards, the one after the step included
    assert by_op["aten.mm.default"] == [1]  # the weight gradient
    assert by_op["aten.add_.Tensor"] == [2, 2]  # SGD's update of weight and bias


def test_tracker_and_dispatch_reject_bad_arguments():
    with pytest.raises(TypeError, match="flatten must be callable"):
        _core.ModuleTracker(None, len, len, 3, len, len, len, len, torch.Tensor, torch.nn.Parameter, {}, set())
    with pytest.raises(TypeError):
        _core.ModuleTracker(None, len, len, len, len, len, len, len, torch.Tensor, torch.nn.Parameter, [], set())
    t = _core.ModuleTracker(None, len, len, len, len, len, len, len, torch.Tensor, torch.nn.Parameter, {}, set())
    assert t.module_id == 0 and t.sets == [("Global",)]
    with pytest.raises(TypeError, match="name must be a str"):
        t.add(3)
    t.add("A")
    assert t.module_id == 1 and t.sets == [("Global",), ("A", "Global")]
    assert t.discard("A") is True and t.discard("A") is False
    assert t.module_id == 0  # an interned set keeps its id
    with pytest.raises(TypeError):
        _core.Dispatch(object(), len, len, len)
    with pytest.raises(TypeError, match="push and pop are given together"):
        _core.Dispatch(t, len, len, len, push=len)
    with pytest.raises(TypeError, match="pop must be callable"):
        _core.Dispatch(t, len, len, len, push=len, pop=3)
    with pytest.raises(TypeError, match="adopt must be None or callable"):
        _core.Dispatch(t, len, len, len, adopt=3)
    d = _core.Dispatch(t, len, len, len)
    with pytest.raises(TypeError):
        d.phase = "forward"
    with pytest.raises(ValueError, match=">= 0"):
        d.set_op(torch.ops.aten.mm.default, -1, torch.ops.aten.mm.default)
    with pytest.raises(TypeError, match="callable"):
        d.set_op(torch.ops.aten.mm.default, 0, 5)
    t.close()
    assert t.enabled is False


class _Tangled(torch.nn.Module):
    """One Linear under two parents and twice in one ModuleList; a None child; a subclass that lists its children
    itself (reversed, and one of them hidden)."""

    def __init__(self):
        super().__init__()
        lin = torch.nn.Linear(2, 2)
        self.a = torch.nn.Sequential(lin, torch.nn.ReLU())
        self.b = torch.nn.ModuleList([lin, torch.nn.Tanh(), lin])
        self.register_module("empty", None)
        self.c = _Reversed()


class _Reversed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.x = torch.nn.Identity()
        self.y = torch.nn.Sequential(torch.nn.GELU())
        self.hidden = torch.nn.SiLU()

    def named_children(self):
        for name in ("y", "x"):
            yield name, getattr(self, name)


@pytest.mark.parametrize("first", ["root", "child"])
def test_module_names_follow_module_trackers_rule(first):
    """The C naming rule against torch's own (ModuleTracker._get_mod_name, run on the same tree): shared modules
    renamed by their last parent, duplicates in one parent named once, None children skipped, an overridden
    named_children obeyed, and a child named first keeps the root-less name its own walk gave it."""
    model = _Tangled()
    t = _core.ModuleTracker(None, len, len, len, len, len, len, len, torch.Tensor, torch.nn.Parameter, {}, set())
    oracle = ModuleTracker()
    order = [model, model.c] if first == "root" else [model.c, model]
    for m in order:
        assert t.name(m) == oracle._get_mod_name(m)
    every = [model, *model.modules(), model.c.hidden]
    for m in every:
        assert t.name(m) == oracle._get_mod_name(m), m
    assert t.name(model.a[0]) == "_Tangled.b.0"  # renamed by the later parent, under its first name there
    assert t.name(model.c.hidden) == "SiLU"  # not listed by its parent: named after its type
    t.close()


def test_torch_internals_the_gradient_gate_relies_on():
    """The tracker's gradient gate calls what torch's register_multi_grad_hook calls: torch._C._current_graph_task_id
    (-1 outside a backward, an id inside) and torch._C._will_engine_execute_node (whether the running backward
    executes a node). Pinned here so that a torch that changes them fails this test, not a measurement."""
    assert torch._C._current_graph_task_id() == -1
    x = torch.randn(3, requires_grad=True)
    used, unused = x * 2, x * 3
    seen = {}

    def hook(grad):
        seen["id"] = torch._C._current_graph_task_id()
        seen["used"] = torch._C._will_engine_execute_node(used.grad_fn)
        seen["unused"] = torch._C._will_engine_execute_node(unused.grad_fn)

    used.register_hook(hook)
    used.sum().backward()
    assert seen["id"] != -1 and seen["used"] is True and seen["unused"] is False
    assert torch._C._current_graph_task_id() == -1


def _tracker(register):
    from roofline._capture import _tracking

    return _core.ModuleTracker(None, len, len, _tracking._leaves, _tracking._grad_accumulator,
                               torch._C._current_graph_task_id, torch._C._will_engine_execute_node, lambda: None,
                               torch.Tensor, torch.nn.Parameter, {}, set(), register=register)


def test_gradient_hooks_registered_in_c_are_what_register_hook_makes():
    """The tracker takes Tensor.register_hook's steps itself for plain tensors (csrc/track_tracker.c, register_arm):
    the hook dict torch's method creates (its type, registered with the tensor's grad_fn so backward calls it), an id
    from torch's own counter (a handle made later gets another), the hook called in backward; remove_hooks takes out
    only its own hooks, and skips a tensor that is gone. The twin tensor is hooked by torch's method: the oracle."""
    from torch.utils.hooks import RemovableHandle

    from roofline._capture import _tracking

    assert _tracking._REGISTER is not None  # this torch has the shape register_arm mirrors
    t = _tracker(_tracking._REGISTER)
    mod = torch.nn.Identity()
    t.name(mod)
    x = torch.randn(3, requires_grad=True)
    ours, twin = x * 2, x * 2
    calls = []
    twin.register_hook(lambda g: calls.append("twin"))
    first = RemovableHandle.next_id
    t.pre(mod, (ours,))  # the module leaves the set once `ours` has its gradient
    assert type(ours._backward_hooks) is type(twin._backward_hooks)
    assert list(ours._backward_hooks) == [first] and RemovableHandle.next_id == first + 1
    theirs = ours.register_hook(lambda g: calls.append("theirs"))  # torch's method on the same dict
    assert theirs.id == first + 1 and list(ours._backward_hooks) == [first, first + 1]
    assert t.parents == frozenset({"Global", "Identity"})
    (ours.sum() + twin.sum()).backward()
    assert t.parents == frozenset({"Global"}) and sorted(calls) == ["theirs", "twin"]
    gone = x * 3
    t.pre(mod, (gone,))
    gone_hooks = weakref.ref(gone._backward_hooks)
    del gone
    gc.collect()
    assert gone_hooks() is None  # the tracker holds a hook dict only weakly, as RemovableHandle does
    t.remove_hooks()
    assert list(ours._backward_hooks) == [first + 1]  # torch's hook stays
    t.remove_hooks()  # nothing left: a no-op
    t.close()


def test_gradient_hooks_registered_in_c_on_a_leaf_fire_in_backward():
    """A leaf (a model's input that requires grad, a Parameter) has no grad_fn: its hook dict is set on the tensor,
    which registers it with the leaf's gradient accumulator (torch's setter, as the method relies on). The module
    must leave the set once the leaf's gradient is computed, as with torch's method on a twin leaf."""
    from roofline._capture import _tracking

    mod = torch.nn.Identity()
    for leaf in (torch.randn(3, requires_grad=True), torch.nn.Parameter(torch.randn(3))):
        t = _tracker(_tracking._REGISTER)
        t.name(mod)
        twin = leaf.detach().clone().requires_grad_()
        calls = []
        twin.register_hook(lambda g: calls.append("twin"))
        t.pre(mod, (leaf,))
        assert leaf.grad_fn is None and type(leaf._backward_hooks) is type(twin._backward_hooks)
        assert len(leaf._backward_hooks) == 1 and t.parents == frozenset({"Global", "Identity"})
        (leaf.sum() * 2 + twin.sum()).backward()
        assert t.parents == frozenset({"Global"}) and calls == ["twin"]
        assert torch.equal(leaf.grad, torch.full((3,), 2.0))  # the hook returns nothing: the gradient is unchanged
        t.remove_hooks()
        assert len(leaf._backward_hooks) == 0
        t.close()


def test_gradient_hooks_go_through_register_hook_under_a_torch_function_mode():
    """Where torch's method would consult __torch_function__ (a torch function mode is active, a tensor subclass),
    the tracker calls the method, as ModuleTracker does; without `register` it always does."""
    from torch.overrides import TorchFunctionMode

    from roofline._capture import _tracking

    class Seen(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.funcs = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            self.funcs.append(getattr(func, "__name__", str(func)))
            return func(*args, **(kwargs or {}))

    mod = torch.nn.Identity()
    for register in (_tracking._REGISTER, None):
        t = _tracker(register)
        y = torch.randn(2, requires_grad=True) * 2
        with Seen() as seen:
            t.post(mod, (), y)
        assert seen.funcs.count("register_hook") == 1
        plain = torch.randn(2, requires_grad=True) * 2
        t.post(mod, (), plain)  # no mode: C registers it (with register), the method otherwise
        assert len(plain._backward_hooks) == 1
        t.remove_hooks()
        assert len(y._backward_hooks) == 0 and len(plain._backward_hooks) == 0
        t.close()
    with pytest.raises(TypeError, match="register must be None or a tuple"):
        _tracker((dict, 3, len))


@pytest.fixture
def decomposed_op():
    """An op with a CPU kernel (so it reaches dispatch modes) and a Python CompositeImplicitAutograd kernel (so a
    mode counting like FlopCounterMode runs its decomposition): `x + x`; it raises while `refuse[0]` is set."""
    refuse = [False]
    lib = torch.library.Library("rltest_dec", "DEF")
    lib.define("twice(Tensor x) -> Tensor")
    lib.impl("twice", lambda x: x * 2, "CPU")
    op = torch.ops.rltest_dec.twice.default

    def composite(x):
        if refuse[0]:
            raise ValueError("refused input")
        return torch.add(x, x)

    op.py_impl(torch._C.DispatchKey.CompositeImplicitAutograd)(composite)
    yield op, refuse
    op.py_kernels.pop(torch._C.DispatchKey.CompositeImplicitAutograd, None)
    op._dispatch_cache.clear()
    lib._destroy()


def test_decomposed_op_counts_its_parts_on_every_call(decomposed_op):
    """An op counted through its decomposition (first call through Python, the next ones through the C table)
    records its parts each time and never itself, as FlopCounterMode counts it."""
    op, _ = decomposed_op
    x = torch.ones(8)
    with FlopCounterMode(display=False) as fcm:
        op(x)
    assert fcm.get_total_flops() == 0  # nothing it has a formula for; the parts are what count
    with roofline.measure(timing=None) as r:
        outs = [op(x) for _ in range(3)]
    assert all(torch.equal(o, torch.full((8,), 2.0)) for o in outs)
    assert _names(r) == ["aten.add.Tensor"] * 3
    assert r.records["vector_flops"].tolist() == [8] * 3


def test_error_inside_a_decomposition_leaves_the_mode_stack_as_it_was(decomposed_op):
    from torch.utils import _python_dispatch as pd

    op, refuse = decomposed_op
    x = torch.ones(4)
    before = (torch._C._len_torch_dispatch_stack(), pd._is_in_torch_dispatch_mode)
    with pytest.raises(ValueError, match="refused input"):
        with roofline.measure(timing=None):
            op(x)  # first call: the Python path, which puts the op in the C table
            refuse[0] = True
            op(x)  # second call: the C path re-enters the mode and must leave it on the error
    refuse[0] = False
    assert (torch._C._len_torch_dispatch_stack(), pd._is_in_torch_dispatch_mode) == before
    with roofline.measure(timing=None) as r:  # and the next block counts normally
        op(x)
    assert _names(r) == ["aten.add.Tensor"]


@pytest.mark.parametrize("leave", ["__exit__", "pop"])
def test_an_error_leaving_the_mode_after_a_failed_decomposition_chains_the_first(decomposed_op, monkeypatch, leave):
    """As in a with statement: when leaving the mode raises while the decomposition's error propagates, that error
    propagates with the decomposition's as its __context__, and the stack is left as it was. ``__exit__``: a mode
    class overriding it is left through it; ``pop``: the stack call that leaves a mode without overrides."""
    from roofline._capture import _session

    op, refuse = decomposed_op
    fail = [False]
    if leave == "__exit__":
        plain_exit = _session._Mode.__exit__

        def exit_(self, *exc):
            plain_exit(self, *exc)
            if fail[0]:
                raise KeyError("leaving failed")

        monkeypatch.setattr(_session._Mode, "__exit__", exit_)
    else:
        plain_pop = torch._C._pop_torch_dispatch_stack

        def pop(key):
            out = plain_pop(key)
            if fail[0]:
                raise KeyError("leaving failed")
            return out

        monkeypatch.setattr(torch._C, "_pop_torch_dispatch_stack", pop)
    x = torch.ones(4)
    depth = torch._C._len_torch_dispatch_stack()
    with roofline.measure(timing=None) as r:
        op(x)  # the Python path puts the op in the C table
        refuse[0] = fail[0] = True
        with pytest.raises(KeyError, match="leaving failed") as info:
            op(x)
        refuse[0] = fail[0] = False
        op(x)
    assert torch._C._len_torch_dispatch_stack() == depth
    assert isinstance(info.value.__context__, ValueError) and "refused input" in str(info.value.__context__)
    assert _names(r) == ["aten.add.Tensor"] * 2


def test_the_stack_calls_that_reenter_the_mode_leave_the_stack_as_enter_and_exit_do():
    """The C path re-enters the block's mode around a decomposition with torch's stack calls instead of the mode's
    __enter__/__exit__; this pins that they push and pop exactly what those methods do (fails when torch changes
    what TorchDispatchMode.__enter__ puts on the stack)."""
    from roofline._capture import _session

    mode = _session._Mode(None)
    calls = _session._reentry(mode)
    assert set(calls) == {"push", "pop"}

    def stack():
        return [torch._C._get_dispatch_stack_at(i) for i in range(torch._C._len_torch_dispatch_stack())]

    before = stack()
    with mode:
        via_methods = stack()
    assert stack() == before
    calls["push"](mode)
    try:
        via_calls = stack()
    finally:
        calls["pop"](None)
    assert stack() == before
    assert via_calls == via_methods == before + [mode]


def test_a_mode_overriding_enter_or_exit_is_reentered_through_them():
    from roofline._capture import _session

    class Entering(_session._Mode):
        def __enter__(self):
            return super().__enter__()

    class Exiting(_session._Mode):
        def __exit__(self, *exc):
            return super().__exit__(*exc)

    assert _session._reentry(Entering(None)) == {} and _session._reentry(Exiting(None)) == {}
    assert set(_session._reentry(_session._Mode(None))) == {"push", "pop"}


def test_a_call_listing_plain_tensor_among_its_types_takes_the_c_path(monkeypatch):
    """torch lists torch.Tensor itself among a call's types for some calls made from C++ (the detach inside the CPU
    scaled_dot_product_attention): no subclass, so the C path counts it; a real subclass still goes to Python."""
    from torch.utils._python_dispatch import _pop_mode_temporarily

    from roofline._capture import _session

    python_path = []
    plain = _session._Mode.__torch_dispatch__

    def counting(self, func, types, args=(), kwargs=None):
        python_path.append(types)
        return plain(self, func, types, args, kwargs)

    class Sub(torch.Tensor):
        pass

    monkeypatch.setattr(_session._Mode, "__torch_dispatch__", counting)
    a, b = torch.ones(4), torch.ones(4)
    with roofline.measure(timing=None) as r:
        torch.add(a, b)  # the first call puts the op in the C table (on the Python path, or adopted in C)
        before = len(python_path)
        with _pop_mode_temporarily() as mode:  # call the handler as torch does, the mode off the stack
            mode.__torch_dispatch__(torch.ops.aten.add.Tensor, (torch.Tensor,), (a, b), {})
            after_plain = len(python_path)
            mode.__torch_dispatch__(torch.ops.aten.add.Tensor, (Sub,), (a, b), {})
    assert after_plain == before and len(python_path) == before + 1 and python_path[-1] == (Sub,)
    assert _names(r) == ["aten.add.Tensor"] * 3
    assert r.records["vector_flops"].tolist() == [4] * 3


def test_an_op_resolved_in_an_earlier_block_takes_the_c_path_from_its_first_call(monkeypatch):
    """The first call of an op in a block goes to the Python handler only when no earlier block resolved the op: a
    later block adopts it in C (its Python frames cost several times a recorded call), with the same row and the
    device noted as the Python path notes it."""
    from roofline._capture import _session

    python_path = []
    plain = _session._Mode.__torch_dispatch__

    def counting(self, func, types, args=(), kwargs=None):
        python_path.append(str(func))
        return plain(self, func, types, args, kwargs)

    monkeypatch.setattr(_session._Mode, "__torch_dispatch__", counting)
    a = torch.ones(3, 5)
    with roofline.measure(timing=None) as first:
        torch.sub(a, a)
    python_path.clear()
    with roofline.measure(timing=None) as later:
        torch.sub(a, a)
        torch.sub(a, a)
    assert python_path == []
    assert _names(later) == ["aten.sub.Tensor"] * 2 and later.records["vector_flops"].tolist() == [15, 15]
    assert later.records["bytes_read"].tolist() == first.records["bytes_read"].tolist() * 2 == [120, 120]
    assert later.meta["devices"] == first.meta["devices"] == ["cpu"]


def test_a_declined_adoption_leaves_the_call_to_the_python_path():
    """An adopt callback that answers None, or says it added an op it did not put in the table, sends the call to
    the Python handler; one that raises fails the call with its exception."""
    calls = []

    def slow(mode, func, types, args=(), kwargs=None):
        calls.append(func)
        return "slow"

    t = _core.ModuleTracker(None, len, len, list, len, len, len, len, torch.Tensor, torch.nn.Parameter, {}, set())
    for adopt in (lambda f, a: None, lambda f, a: 7):
        d = _core.Dispatch(t, len, len, slow, adopt=adopt)
        assert d(None, torch.ops.aten.sub.Tensor, (torch.Tensor,), (torch.ones(1), torch.ones(1))) == "slow"
    assert len(calls) == 2

    def broken(f, a):
        raise KeyError("adopt")

    d = _core.Dispatch(t, len, len, slow, adopt=broken)
    with pytest.raises(KeyError, match="adopt"):
        d(None, torch.ops.aten.sub.Tensor, (torch.Tensor,), (torch.ones(1), torch.ones(1)))
    assert len(calls) == 2


def test_an_op_resolved_in_an_earlier_block_follows_the_registrations_made_since():
    """Ops are resolved once per process and reused by later blocks; a formula registered (or removed) between blocks
    still decides the next block's counts."""
    a = torch.ones(4, 4)
    with roofline.measure(timing=None) as first:
        torch.mm(a, a)
    roofline.register("aten::mm", kind="ewise", flops=3)
    try:
        with roofline.measure(timing=None) as registered:
            torch.mm(a, a)
    finally:
        roofline.unregister("aten::mm")
    with roofline.measure(timing=None) as again:
        torch.mm(a, a)
    assert first.records["matrix_flops"].tolist() == [2 * 4 * 4 * 4] == again.records["matrix_flops"].tolist()
    assert registered.records["matrix_flops"].tolist() == [0]
    assert registered.records["vector_flops"].tolist() == [3 * 16]  # 3 per element of the 4x4 result


def test_an_op_without_a_formula_stays_unknown_in_every_block():
    """The resolution kept from an earlier block keeps an op without a formula listed as unknown, its bytes counted
    as a copy's: 8 floats read and 8 written, in each block alike."""
    lib = torch.library.Library("rltest_unknown", "DEF")
    lib.define("twice(Tensor x) -> Tensor")
    lib.impl("twice", lambda x: x * 2, "CPU")
    x = torch.ones(8)
    try:
        reports = []
        for _ in range(2):
            with roofline.measure(timing=None) as r:
                torch.ops.rltest_unknown.twice(x)
            reports.append(r)
    finally:
        lib._destroy()
    for r in reports:
        assert r.unknown_ops == {"rltest_unknown.twice.default": 1}
        assert r.records["bytes_read"].tolist() == [8 * 4] and r.records["bytes_written"].tolist() == [8 * 4]


def test_an_op_that_gains_a_composite_kernel_between_blocks_is_counted_through_it():
    """The CompositeImplicitAutograd check is made again for an op resolved in an earlier block (registrations can
    add such a kernel): once the op has one, its parts are counted, as FlopCounterMode counts them."""
    lib = torch.library.Library("rltest_late", "DEF")
    lib.define("twice(Tensor x) -> Tensor")
    lib.impl("twice", lambda x: x * 2, "CPU")
    op = torch.ops.rltest_late.twice.default
    x = torch.ones(8)
    try:
        with roofline.measure(timing=None) as before:
            op(x)
        op.py_impl(torch._C.DispatchKey.CompositeImplicitAutograd)(lambda x: torch.add(x, x))
        with roofline.measure(timing=None) as after:
            op(x)
    finally:
        op.py_kernels.pop(torch._C.DispatchKey.CompositeImplicitAutograd, None)
        op._dispatch_cache.clear()
        lib._destroy()
    assert _names(before) == ["rltest_late.twice.default"]
    assert _names(after) == ["aten.add.Tensor"]


def test_decomposition_withdrawn_inside_a_block_counts_the_op_itself(decomposed_op):
    """When the composite kernel disappears after the op was put in the C table, the C path gets NotImplemented and
    hands the call to the Python path, which counts the op as one of its own from then on."""
    op, _ = decomposed_op
    x = torch.ones(4)
    with roofline.measure(timing=None) as r:
        op(x)
        op.py_kernels.pop(torch._C.DispatchKey.CompositeImplicitAutograd)
        op._dispatch_cache.clear()
        op(x)
        op(x)
    assert _names(r) == ["aten.add.Tensor", "rltest_dec.twice.default", "rltest_dec.twice.default"]


def _names(report):
    return [report.op_names[i] for i in report.records["op"]]


class Abc(torch.nn.Module):
    """A root whose name sorts before "Global" and children whose names sort before, between and after their siblings
    (and a non-ASCII one): each step of the module set inserts a name somewhere else in the sorted tuple."""

    def __init__(self):
        super().__init__()
        self.zeta = torch.nn.Linear(4, 4)
        self.beta = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
        self.add_module("Ärger", torch.nn.Linear(4, 4))

    def forward(self, x):
        x = self.beta(self.zeta(x))
        x = getattr(self, "Ärger")(x)
        return self.zeta(self.beta(x))  # the same modules again, from the sets they made the first time


def test_module_sets_in_name_order_wherever_a_name_enters():
    rows = _same_attribution(_seeded(lambda: (Abc(), (torch.randn(2, 4),))), _fwd_bwd)
    assert ("Abc", "Abc.beta", "Abc.beta.0", "Global") in {s for _, s in rows}
    assert ("Abc", "Abc.Ärger", "Global") in {s for _, s in rows}


def test_add_op_takes_none_as_a_parameter_not_given():
    """The positional form a later block's first call uses (every argument, None for p1/p2 not given) makes the
    same entry as the keywords: 1 FLOP per element from params, not an error on None."""
    import numpy as np

    from roofline._capture._session import TORCH_DTYPES
    from roofline._datamodel._records import RECORD_DTYPE

    rec = _core.Recorder(torch.Tensor, TORCH_DTYPES)
    by_kw = rec.add_op(_core.K_EWISE, params={"flops": 3}, kwpos=2, name="aten.mul.Tensor")
    by_pos = rec.add_op(_core.K_EWISE, None, None, 0, 0, 0, None, 2, "aten.mul.Tensor", {"flops": 3})
    x = torch.ones(2, 5)
    for i in (by_kw, by_pos):
        rec.record(i, 0, 0, (x, x), None, x)
    rows = np.frombuffer(rec.records_bytes(), dtype=RECORD_DTYPE)
    assert rows["vector_flops"].tolist() == [30, 30] and rows["bytes_read"].tolist() == [80, 80]


def test_an_op_adopt_declined_is_not_asked_again_in_the_block(monkeypatch):
    """An op the C path cannot adopt (a Python formula: torch.searchsorted's built-in one) goes to the Python path
    on every call; adopt is asked once per block, not per call, and the counts stay those of each call."""
    from roofline._capture import _session

    asked = []
    plain = _session.Session.adopt

    def counting(self, func, args):
        asked.append(str(func))
        return plain(self, func, args)

    monkeypatch.setattr(_session.Session, "adopt", counting)
    seq, v = torch.arange(16.0), torch.tensor([2.5, 7.0, 11.5])
    with roofline.measure(timing=None):
        torch.searchsorted(seq, v)
    asked.clear()
    with roofline.measure(timing=None) as r:
        for _ in range(3):
            torch.searchsorted(seq, v)
    assert asked.count("aten.searchsorted.Tensor") == 1
    assert _names(r) == ["aten.searchsorted.Tensor"] * 3
    assert len(set(r.records["vector_flops"].tolist())) == 1 and r.records["vector_flops"][0] > 0


def test_a_declined_op_marked_slow_takes_the_python_path_until_it_is_set():
    """Dispatch marks an op adopt declined; its later calls go to the slow path without asking adopt, and set_op
    replaces the mark (the op then takes the C path); n_ops counts only ops on the C path."""
    asked, calls = [], []

    def slow(mode, func, types, args=(), kwargs=None):
        calls.append(func)
        return "slow"

    t = _core.ModuleTracker(None, len, len, list, len, len, len, len, torch.Tensor, torch.nn.Parameter, {}, set())
    d = _core.Dispatch(t, lambda *a: None, lambda: -1, slow, adopt=lambda f, a: asked.append(f))
    sub, x = torch.ops.aten.sub.Tensor, (torch.ones(2), torch.ones(2))
    for _ in range(3):
        assert d(None, sub, (torch.Tensor,), x) == "slow"
    assert len(asked) == 1 and len(calls) == 3 and d.n_ops == 0
    d.set_op(sub, 0, sub)
    assert d.n_ops == 1
    assert torch.equal(d(None, sub, (torch.Tensor,), x), torch.zeros(2)) and len(calls) == 3
