"""Hostile use of the capture session (issue 40): gradients with respect to inputs, recomputation of plain
functions, a model compiled before the block under autocast, blocks run by signal handlers (token layouts:
tests/test_hardening_tokens.py)."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

import roofline

# ---- gradients with respect to inputs (torch.autograd.grad on a leaf input, jacrev, hessian) ------------------------


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))


def _functional(m):
    """The same computation as ``m`` without modules: FlopCounterMode's module tracker then hooks nothing, so it
    counts calls that fail under its tracker with a module (its multi-grad hook asks torch about a leaf input's
    accumulator inside ``autograd.grad``)."""
    (w1, b1), (w2, b2) = (m[0].weight, m[0].bias), (m[2].weight, m[2].bias)
    return lambda z: F.linear(torch.tanh(F.linear(z, w1, b1)), w2, b2)


def _fcm(fn, *a):
    with FlopCounterMode(display=False) as f:
        fn(*a)
    return f.get_total_flops()


def _matrix(r):
    return int(r.records["matrix_flops"].sum())


def _ops(r):
    return sorted(r.op_names[o] for o in r.records["op"])


def _penalty(f, x):
    y = f(x).sum()
    g, = torch.autograd.grad(y, x, create_graph=True)
    (y + g.pow(2).sum()).backward()


def test_grad_wrt_input_leaf_gradient_penalty():
    m = _mlp()
    x = torch.randn(3, 4, requires_grad=True)
    with roofline.measure(m) as r:  # raised autograd's _will_engine_execute_node error
        _penalty(m, x)
    expected = _fcm(_penalty, _functional(m), torch.randn(3, 4, requires_grad=True))
    assert _matrix(r) == expected
    # forward 2*3*4*8 + 2*3*8*2 = 288; the same model's plain backward adds twice that and more: the count is past it
    assert expected > 3 * 288


def test_autograd_grad_wrt_input_only_counts_input_gradients():
    m = _mlp()
    x = torch.randn(3, 4, requires_grad=True)
    with roofline.measure(m) as r:
        g, = torch.autograd.grad(m(x).sum(), x)
    # forward: 2*3*4*8 = 192 and 2*3*8*2 = 96; backward to the input only (no weight gradients):
    # (3,2)@(2,8): 2*3*2*8 = 96 and (3,8)@(8,4): 2*3*8*4 = 192
    assert _matrix(r) == 192 + 96 + 96 + 192
    assert g.shape == x.shape
    # each layer's input-gradient product is credited to that layer
    bwd = r.by_module(phase="backward")
    assert (bwd["Sequential.0"]["matrix_flops"], bwd["Sequential.2"]["matrix_flops"]) == (192, 96)


@pytest.mark.parametrize("kind", ["jacrev", "jacobian", "func_hessian", "functional_hessian"])
def test_jacobians_and_hessians_of_a_module(kind):
    m = _mlp()
    f = _functional(m)
    x = torch.randn(3, 4)

    def run(g):
        if kind == "jacrev":
            return torch.func.jacrev(g)(x)
        if kind == "jacobian":
            return torch.autograd.functional.jacobian(g, x)
        if kind == "func_hessian":
            return torch.func.hessian(lambda z: g(z).sum())(x)
        return torch.autograd.functional.hessian(lambda z: g(z).sum(), x)

    with roofline.measure(m) as r:
        out = run(m)
    torch.testing.assert_close(out, run(f))
    assert _matrix(r) == _fcm(run, f)
    if kind == "jacrev":
        # forward 288; vmap over the 6 outputs of the vector-Jacobian product, to the input only:
        # (18,2)@(2,8): 2*18*2*8 = 576 and (18,8)@(8,4): 2*18*8*4 = 1152
        assert _matrix(r) == 288 + 576 + 1152


# ---- recomputation of a plain function (non-reentrant checkpoint) ---------------------------------------------------


def _where(r, phase):
    """{(op, module path): calls} of the records of ``phase``."""
    out: dict = {}
    p = roofline._core.PHASES.index(phase)
    for rec in r.records[r.records["phase"] == p]:
        k = (r.op_names[rec["op"]], r.module_path(int(rec["module"])))
        out[k] = out.get(k, 0) + 1
    return out


class _Layer(torch.nn.Module):
    """A DenseNet layer's shape: a plain function (``cat`` then a module) checkpointed inside the layer's forward."""

    def __init__(self, reentrant=False, modules_inside=True):
        super().__init__()
        self.conv1 = torch.nn.Linear(8, 4)
        self.conv2 = torch.nn.Linear(4, 4)
        self.reentrant, self.modules_inside = reentrant, modules_inside

    def bottleneck(self, a, b):
        h = torch.cat([a, b], 1)
        return self.conv1(h) if self.modules_inside else h[:, :4].sin()

    def forward(self, a, b):
        h = torch.utils.checkpoint.checkpoint(self.bottleneck, a, b, use_reentrant=self.reentrant)
        return self.conv2(h)


@pytest.mark.parametrize("reentrant,modules_inside", [(False, True), (True, True), (False, False)])
def test_recomputed_function_ops_belong_to_the_callers_set(reentrant, modules_inside):
    torch.manual_seed(0)
    m = _Layer(reentrant, modules_inside)
    a, b = torch.randn(2, 4, requires_grad=True), torch.randn(2, 4, requires_grad=True)
    with roofline.measure(m) as r:
        m(a, b).sum().backward()
    rec = _where(r, "recompute")
    # the function's cat ran in _Layer's forward (not in conv1's): recomputed, it is still _Layer's
    assert rec.get(("aten.cat.default", "_Layer"), 0) == 1, rec
    assert not any(op == "aten.cat.default" and mod != "_Layer" for op, mod in rec)
    assert _where(r, "forward")[("aten.cat.default", "_Layer")] == 1
    if modules_inside:  # what runs again inside conv1 (before the early stop) is conv1's
        # (a reentrant checkpoint detaches its inputs first, in the caller's set)
        assert all(mod == "_Layer.conv1" for op, mod in rec if op not in ("aten.cat.default", "aten.detach.default"))


def test_densenet_memory_efficient_recomputed_cat():
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    m = torchvision.models.DenseNet(growth_rate=4, block_config=(2,), num_init_features=8, bn_size=2,
                                    memory_efficient=True)
    with roofline.measure(m) as r:
        m(torch.randn(1, 3, 32, 32)).sum().backward()
    rec, fwd = _where(r, "recompute"), _where(r, "forward")
    layers = [f"DenseNet.features.denseblock1.denselayer{i}" for i in (1, 2)]
    # each layer's recomputed cat (its bn_function's first op) belongs to the layer, as its forward cat did
    assert {k: v for k, v in rec.items() if k[0] == "aten.cat.default"} == {("aten.cat.default", n): 1 for n in layers}
    assert all(fwd[("aten.cat.default", n)] == 1 for n in layers)
    # and the norm it recomputes next to its own module
    assert all(rec[("aten._native_batch_norm_legit.default", f"{n}.norm1")] == 1 for n in layers)


# ---- a model compiled before the block, run under autocast ----------------------------------------------------------

# matrix FLOPs of the MLP below on a batch of 4: forward 2*4*16*32 + 2*4*32*8 = 4096 + 2048 = 6144; backward (the
# input needs no gradient): weight gradients 2*32*4*16 + 2*8*4*32 = 4096 + 2048 and the second layer's input
# gradient 2*4*8*32 = 2048: 8192
_AMP_FWD, _AMP_BWD = 6144, 8192


def _amp_step(f, x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = f(x).float().sum()
    loss.backward()


@pytest.fixture(scope="module")
def amp_compiled():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    x = torch.randn(4, 16)
    cm = torch.compile(m)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's note on global module hooks
        _amp_step(cm, x)  # compiled here, before any block
    return m, cm, x


def _matrix_by(r):
    out: dict = {}
    for rec in r.records[r.records["matrix_flops"] > 0]:
        k = (r.dtype_names[int(rec["dtype"])], roofline._core.PHASES[rec["phase"]])
        out[k] = out.get(k, 0) + int(rec["matrix_flops"])
    return out


def test_compiled_before_the_block_under_autocast_is_recovered(amp_compiled):
    m, cm, x = amp_compiled
    with roofline.measure(m, timing=None) as r:  # was: 0 matrix FLOPs, incomplete, blaming an option
        _amp_step(cm, x)
    with roofline.measure(m, timing=None) as e:
        _amp_step(m, x)
    assert r.complete, r.incomplete
    assert r.compiled["recovered_graphs"] >= 1
    want = {("bfloat16", "forward"): _AMP_FWD, ("bfloat16", "backward"): _AMP_BWD}
    assert _matrix_by(e) == want  # the eager autocast step, by hand
    assert _matrix_by(r) == want


def test_a_recompilation_that_differs_names_what_was_tried():
    """A graph whose private compilation differs for another reason (here an Inductor setting changed after the
    user's compilation) is not recovered; the message says it was compiled with and without autocast, and what else
    can differ."""
    from torch._inductor import config as iconfig

    torch.manual_seed(0)
    m, x = torch.nn.Linear(16, 8), torch.randn(3, 16)  # a graph of its own (none filed for it yet)
    cm = torch.compile(m)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _amp_step(cm, x)
    with iconfig.patch({"cpp.simdlen": 1}), pytest.warns(RuntimeWarning, match="NOT counted"):
        with roofline.measure(m, timing=None) as r:
            _amp_step(cm, x)
    assert not r.complete
    why = r.incomplete[0]
    assert "no autocast and cpu bfloat16" in why and "a compile option, a global setting" in why, why


# ---- blocks run in the middle of another block's entry or exit (signal handlers) -----------------------------------


@pytest.mark.parametrize("step", ["_hook_optimizer", "_unhook_optimizer", "_stop_compiled"])
def test_a_block_inside_another_blocks_entry_or_exit_is_refused_and_the_other_keeps_its_report(step, monkeypatch):
    """What a signal handler landing in the middle of a block's entry (``_hook_optimizer``) or exit (the release
    steps) does, made deterministic: the handler's block is refused without touching the other block's half-made
    state, and says so; the other block keeps its full report. (It raised IndexError there and lost its report.)"""
    from roofline._capture import _session

    inner = []
    original = getattr(_session.Session, step)

    def handler_block(self):
        if not inner:
            with pytest.warns(RuntimeWarning, match="being entered or left"):
                with roofline.measure(timing=None) as r:
                    torch.add(torch.ones(2), 1)
            inner.append(r)
        return original(self)

    m = _mlp()
    x = torch.randn(3, 4)
    with roofline.measure(m, timing=None) as alone:
        m(x)
    monkeypatch.setattr(_session.Session, step, handler_block)
    with roofline.measure(m, timing=None) as r:
        m(x)
    monkeypatch.undo()
    assert len(inner) == 1 and len(inner[0].records) == 0 and not inner[0].complete
    assert "nothing in it was counted" in inner[0].incomplete[0]
    # the other block: its full report (2 products: 2*3*4*8 + 2*3*8*2 = 288 matrix FLOPs), plus the handler's add
    # where it ran while the other block's mode was on the stack
    assert _matrix(r) == _matrix(alone) == 288 and r.complete
    extra = [r.op_names[o] for o in r.records["op"]]
    assert len(extra) - len(alone.records) in (0, 1)
    # and the next block is an ordinary one
    with roofline.measure(m, timing=None) as again:
        m(x)
    assert _ops(again) == _ops(alone)


def test_signal_handler_blocks_stress_short():
    """bench/signal_blocks.py, 150 main blocks, each with a handler block landing at a random time: no report lost or
    wrong, no state left behind."""
    import importlib.util
    import io
    import os

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "signal_blocks.py")
    spec = importlib.util.spec_from_file_location("roofline_bench_signal_blocks", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = io.StringIO()
    res = mod.run(150, seed=1, out=out)
    assert (res["main_lost"], res["main_wrong"], res["handler_wrong"], res["no_signal"], res["leaks"]) == \
        (0, 0, 0, 0, []), out.getvalue()
    assert res["main_ok"] == 150 and res["handler_counted"] + res["handler_refused"] == 150
