"""Which fusion opportunities of an eager run torch.compile took: ``fusion_opportunities(compiled=...)`` on tiny
models compiled with Inductor's C++ backend (each compiled once for the module). Expected bytes from the shapes."""

import types
import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch._inductor")

import roofline  # noqa: E402
from roofline._compiled import _hooks  # noqa: E402

if _hooks._torch_version() < _hooks.MIN_TORCH:
    pytest.skip("the compiled view needs a newer torch", allow_module_level=True)

B, D, H = 8, 16, 32
F32 = 4


class Block(torch.nn.Module):
    """Linear -> GELU -> Linear (with bias) -> residual add -> LayerNorm."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(D, H)
        self.fc2 = torch.nn.Linear(H, D)
        self.ln = torch.nn.LayerNorm(D)

    def forward(self, x):
        return self.ln(x + self.fc2(torch.nn.functional.gelu(self.fc1(x))))


class Act(torch.nn.Module):
    """Element-wise only: mul -> gelu -> add, which Inductor fuses into one kernel."""

    def forward(self, x):
        return torch.nn.functional.gelu(x * 2.0) + 1.0


def _pair(model, x):
    torch._dynamo.reset()
    with torch.no_grad(), roofline.measure(model, ceilings="datasheet") as eager:
        model(x)
    cmodel = torch.compile(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch's note on global module hooks and torch.compile
        with torch.no_grad(), roofline.measure(cmodel, ceilings="datasheet") as comp:
            cmodel(x)  # compiled inside the block
    return eager, comp


@pytest.fixture(scope="module")
def block():
    torch.manual_seed(0)
    return _pair(Block().eval(), torch.randn(B, D))


@pytest.fixture(scope="module")
def act():
    return _pair(Act(), torch.randn(B, D))


def _by_chain(opps):
    return {tuple(o.split(".")[1] for o in f.ops): f for f in opps}


def test_block_epilogues_not_fused_but_residual_layernorm_is(block):
    eager, comp = block
    opps = _by_chain(eager.fusion_opportunities(compiled=comp))
    assert set(opps) == {("addmm", "gelu"), ("addmm", "add", "native_layer_norm")}
    # fc1's output (B x H fp32) written by addmm and read by gelu: Inductor's C++ backend runs addmm as an extern
    # call and GELU as its own kernel, so the intermediate still goes through memory
    f = opps[("addmm", "gelu")]
    assert f.saved_bytes == 2 * B * H * F32
    assert f.compiled == "not taken" and f.compiled_saved_bytes == 0
    assert f.compiled_kernels[0].startswith("extern_kernels.addmm") and "gelu" in f.compiled_kernels[1]
    # fc2's output -> residual add -> LayerNorm: two B x D intermediates; the add and the LayerNorm share a kernel
    # (the sum stays on chip), the extern addmm's output does not
    g = opps[("addmm", "add", "native_layer_norm")]
    assert g.saved_bytes == 2 * (2 * B * D * F32)
    assert g.compiled == "partly" and g.compiled_saved_bytes == 2 * B * D * F32
    assert g.compiled_kernels[1] == g.compiled_kernels[2] != g.compiled_kernels[0]
    assert "compiled: partly (keeps 1.02 KB of 2.05 KB on chip)" in g.describe()
    # without a compiled report, nothing is marked
    assert all(f.compiled is None and "compiled" not in f.describe() for f in eager.fusion_opportunities())


def test_elementwise_chain_taken(act):
    eager, comp = act
    (f,) = eager.fusion_opportunities(compiled=comp)
    assert [o.split(".")[1] for o in f.ops] == ["mul", "gelu", "add"]
    assert f.saved_bytes == 2 * (2 * B * D * F32)
    assert f.compiled == "taken" and f.compiled_saved_bytes == f.saved_bytes
    assert len(set(f.compiled_kernels)) == 1


def test_ambiguous_match_is_unknown(block):
    """Two kernels that could each compute the residual add (in the same module): no guess."""
    eager, comp = block
    meta = {"compiled": dict(comp.meta["compiled"])}
    kernels = meta["compiled"]["kernels"]
    fused = [k for k in kernels if "native_layer_norm" in k["name"]]
    assert len(fused) == 1
    meta["compiled"]["kernels"] = kernels + [dict(fused[0], name="cpp_fused_add_native_layer_norm_9")]
    twin = types.SimpleNamespace(meta=meta, records=comp.records)
    opps = _by_chain(eager.fusion_opportunities(compiled=twin))
    g = opps[("addmm", "add", "native_layer_norm")]
    assert g.compiled == "unknown" and g.compiled_saved_bytes is None
    assert "compiled: unknown" in g.describe()
    assert opps[("addmm", "gelu")].compiled == "not taken"  # its ops still match one kernel each


def test_bad_compiled_argument(block):
    eager, _ = block
    with pytest.raises(ValueError, match="no compiled kernels"):
        eager.fusion_opportunities(compiled=eager)
    with pytest.raises(TypeError, match="roofline Report"):
        eager.fusion_opportunities(compiled={"kernels": []})
