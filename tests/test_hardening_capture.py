"""Hostile use of the capture session (issue 40): gradients with respect to inputs, recomputation of plain
functions, token layouts checked against the calls, the package's own bookkeeping kept out of reports, fake and
meta masks, huge token counts, and the token layout's schema on both sides of ``to_json`` / ``load``."""

from __future__ import annotations

import warnings

import numpy as np
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
