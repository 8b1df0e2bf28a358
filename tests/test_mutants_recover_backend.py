"""The recovery of a graph compiled before the block compiles it again with the backend it was compiled with: a
model compiled with Inductor options (``torch.compile(options=...)``) that change its generated code is recovered
with those options, and counted. One small compile, shared by the tests (tests/test_compiled_before.py has the
models; tests/test_mutants_recover.py the pieces that compile nothing)."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")

import roofline  # noqa: E402
from roofline._compiled import _hooks, _recover  # noqa: E402

if _hooks._torch_version() < _hooks.MIN_TORCH:
    pytest.skip("the compiled view needs a newer torch", allow_module_level=True)

N = 8


def _step(a):
    return a @ a  # one extern kernel: nothing for a C++ compiler to build


@pytest.fixture(scope="module")
def compiled_with_options():
    # size_asserts=False leaves the size and stride checks out of the generated code: code that Inductor's defaults
    # (compile_fx without the options) would not generate, so only the user's backend reproduces it
    f = torch.compile(_step, options={"size_asserts": False})
    x = torch.randn(N, N)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f(x)  # compiled here, before any block
    with roofline.measure(timing=None) as r:
        f(x)
    return r


def test_a_graph_compiled_with_options_is_recovered_with_them(compiled_with_options):
    r = compiled_with_options
    assert r.complete, r.incomplete
    assert r.compiled["recovered_graphs"] == 1 and r.compiled["uncounted_graph_calls"] == 0
    # a @ a on N x N: N * N outputs of N multiply-adds, 2 FLOPs each
    assert r.matrix_flops == 2 * N * N * N
    assert r.by_op()["aten.mm.default"]["calls"] == 1


def _symbolic_graph():
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    g = torch.fx.Graph()
    g.placeholder("n").meta["example_value"] = FakeTensorMode(shape_env=ShapeEnv()).shape_env.create_unbacked_symint()
    g.output(None)
    return torch.fx.GraphModule(torch.nn.Module(), g)


def test_a_symbolic_graph_without_its_shape_environment_is_refused(monkeypatch):
    """A graph with symbolic sizes is compiled from Dynamo's own fake values, in their fake-tensor mode and shape
    environment: when neither can be found, or the mode has no shape environment, it is not recovered, saying why
    (before anything is compiled)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    import torch._guards

    for mode in (None, FakeTensorMode()):
        monkeypatch.setattr(torch._guards, "detect_fake_mode", lambda values, mode=mode: mode)
        with pytest.raises(_recover.Unrecoverable, match=r"^it has symbolic sizes whose shape environment is gone$"):
            _recover.compile_privately(_symbolic_graph(), None, False, [])
