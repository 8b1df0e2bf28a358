"""Table-driven op cases: expected FLOPs and bytes derived by hand, in each row's comment.

Convention reminders (docs/concepts.md): a product is 2*M*N*K; element-wise costs per element of the result;
bytes are each input read once at the size it occupies (a broadcast operand un-expanded) and each output written
once. fp32 = 4 bytes, fp16 = 2, int64 = 8, bool = 1.
"""

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import roofline  # noqa: E402

g = torch.Generator().manual_seed(0)


def rnd(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=g).to(dtype)


A = rnd(8, 16)
B = rnd(16, 4)
BIAS4 = rnd(4)
X48 = rnd(4, 3, 8)
Y38 = rnd(3, 8)
X10 = rnd(10)
X410 = rnd(4, 10)
M88 = rnd(8, 8)
IMG = rnd(1, 3, 8, 8)
W3 = rnd(4, 3, 3, 3)
IMG4 = rnd(1, 4, 8, 8, ).requires_grad_()
WG = rnd(4, 2, 3, 3).requires_grad_()
Q = rnd(1, 2, 8, 4)
IDX5 = torch.tensor([0, 3, 7, 99, 3])
EMB = rnd(1000, 16)
IDS = torch.randint(0, 1000, (2, 5), generator=g)

# (id, callable, op overload name, (matrix, vector, special, bytes_read, bytes_written))
CASES = [
    ("mm", lambda: A @ B, "aten.mm.default",
     (2 * 8 * 4 * 16, 0, 0, (128 + 64) * 4, 32 * 4)),
    ("addmm", lambda: torch.addmm(BIAS4, A, B), "aten.addmm.default",
     (1024, 32, 0, (4 + 128 + 64) * 4, 32 * 4)),  # + one add per output element
    ("linear->addmm with a transposed (strided) weight", lambda: F.linear(A, B.t().contiguous(), BIAS4),
     "aten.addmm.default", (1024, 32, 0, (4 + 128 + 64) * 4, 128)),
    ("bmm", lambda: torch.bmm(rnd(3, 8, 16), rnd(3, 16, 4)), "aten.bmm.default",
     (2 * 3 * 8 * 4 * 16, 0, 0, (384 + 192) * 4, 96 * 4)),
    ("baddbmm", lambda: torch.baddbmm(rnd(3, 8, 4), rnd(3, 8, 16), rnd(3, 16, 4)), "aten.baddbmm.default",
     (3072, 96, 0, (96 + 384 + 192) * 4, 96 * 4)),
    ("add broadcast (4,1,8)+(3,8)", lambda: rnd(4, 1, 8) + Y38, "aten.add.Tensor",
     (0, 96, 0, (32 + 24) * 4, 96 * 4)),  # result (4,3,8) = 96 elements
    ("add of an expanded operand reads it once", lambda: X48 + Y38.expand(4, 3, 8), "aten.add.Tensor",
     (0, 96, 0, (96 + 24) * 4, 96 * 4)),
    ("in-place add_ reads and writes self", lambda: X48.clone().add_(Y38), "aten.add_.Tensor",
     (0, 96, 0, (96 + 24) * 4, 96 * 4)),
    ("mul by a Python scalar", lambda: X10 * 2.0, "aten.mul.Tensor", (0, 10, 0, 40, 40)),
    ("mixed dtypes fp16 + fp32 -> fp32", lambda: rnd(10, dtype=torch.float16) + X10, "aten.add.Tensor",
     (0, 10, 0, 20 + 40, 40)),
    ("non-contiguous input (every other column)", lambda: torch.exp(M88[:, ::2]), "aten.exp.default",
     (0, 0, 32, 32 * 4, 32 * 4)),
    ("view moves nothing", lambda: M88.view(64), "aten.view.default", (0, 0, 0, 0, 0)),
    ("transpose moves nothing", lambda: M88.t(), "aten.t.default", (0, 0, 0, 0, 0)),
    ("slice moves nothing", lambda: M88[2:5], "aten.slice.Tensor", (0, 0, 0, 0, 0)),
    ("expand moves nothing", lambda: Y38.expand(4, 3, 8), "aten.expand.default", (0, 0, 0, 0, 0)),
    ("detach moves nothing", lambda: X10.detach(), "aten.detach.default", (0, 0, 0, 0, 0)),
    ("clone of a strided slice", lambda: M88[:, ::2].clone(), "aten.clone.default", (0, 0, 0, 128, 128)),
    ("cast fp32 -> fp16", lambda: X10.to(torch.float16), "aten._to_copy.default", (0, 0, 0, 40, 20)),
    ("copy_ reads only the source", lambda: torch.empty(10).copy_(rnd(10, dtype=torch.float16)),
     "aten.copy_.default", (0, 0, 0, 20, 40)),
    ("cat", lambda: torch.cat([rnd(4, 8), rnd(6, 8)]), "aten.cat.default", (0, 0, 0, 320, 320)),
    ("zeros writes only", lambda: torch.zeros(5, 5), "aten.zeros.default", (0, 0, 0, 0, 100)),
    ("fill_ writes only", lambda: torch.empty(10).fill_(1.0), "aten.fill_.Scalar", (0, 0, 0, 0, 40)),
    ("arange int64", lambda: torch.arange(10), "aten.arange.default", (0, 0, 0, 0, 80)),
    ("zero-size add", lambda: torch.empty(0, 5) + torch.empty(0, 5), "aten.add.Tensor", (0, 0, 0, 0, 0)),
    ("zero-size mm", lambda: torch.empty(0, 4) @ torch.empty(4, 3), "aten.mm.default", (0, 0, 0, 48, 0)),
    ("exp: one special op per element", lambda: torch.exp(X10), "aten.exp.default", (0, 0, 10, 40, 40)),
    ("sigmoid = exp + add + div", lambda: torch.sigmoid(X10), "aten.sigmoid.default", (0, 20, 10, 40, 40)),
    ("silu = sigmoid + mul", lambda: F.silu(X10), "aten.silu.default", (0, 30, 10, 40, 40)),
    ("gelu", lambda: F.gelu(X10), "aten.gelu.default", (0, 40, 10, 40, 40)),
    ("relu", lambda: F.relu(X10), "aten.relu.default", (0, 10, 0, 40, 40)),
    ("tanh", lambda: torch.tanh(X10), "aten.tanh.default", (0, 0, 10, 40, 40)),
    ("softmax: max, sub, sum, div + exp", lambda: torch.softmax(X410, -1), "aten._softmax.default",
     (0, 4 * 40, 40, 160, 160)),
    ("layer_norm: 8 per element; writes out, mean, rstd", lambda: F.layer_norm(X410, (10,), rnd(10), rnd(10)),
     "aten.native_layer_norm.default", (0, 8 * 40, 0, (40 + 10 + 10) * 4, (40 + 4 + 4) * 4)),
    ("sum: one add per input element", lambda: X410.sum(), "aten.sum.default", (0, 40, 0, 160, 4)),
    ("mean over a dim", lambda: X410.mean(1), "aten.mean.dim", (0, 40, 0, 160, 16)),
    ("index_select reads the index and the gathered rows", lambda: torch.index_select(rnd(100, 8), 0, IDX5),
     "aten.index_select.default", (0, 0, 0, 5 * 8 + 5 * 8 * 4, 5 * 8 * 4)),
    ("gather", lambda: torch.gather(rnd(10, 10), 1, torch.zeros(10, 3, dtype=torch.long)), "aten.gather.default",
     (0, 0, 0, 30 * 8 + 30 * 4, 30 * 4)),
    ("embedding reads ids and the looked-up rows", lambda: F.embedding(IDS, EMB), "aten.embedding.default",
     (0, 0, 0, 10 * 8 + 10 * 16 * 4, 10 * 16 * 4)),
    ("where selects: no FLOPs", lambda: torch.where(X10 > 0, X10, -X10), "aten.where.self",
     (0, 0, 0, 10 + 40 + 40, 40)),
    ("masked_fill", lambda: X10.masked_fill(X10 > 0, 0.0), "aten.masked_fill.Scalar", (0, 0, 0, 40 + 10, 40)),
    ("conv2d 3x3, pad 1, bias", lambda: F.conv2d(IMG, W3, rnd(4), padding=1), "aten.convolution.default",
     (2 * 1 * 64 * 9 * 4 * 3, 256, 0, (192 + 108 + 4) * 4, 256 * 4)),  # 2 * N * HoWo * KhKw * Cout * Cin
    ("grouped conv2d (groups=2)", lambda: F.conv2d(IMG4.detach(), WG.detach(), padding=1, groups=2),
     "aten.convolution.default", (2 * 1 * 64 * 9 * 4 * 2, 0, 0, (256 + 72) * 4, 256 * 4)),  # Cin/groups = 2
    ("max_pool2d 2x2 stride 2: 4 windows x 4 taps", lambda: F.max_pool2d(rnd(1, 1, 4, 4), 2),
     "aten.max_pool2d_with_indices.default", (0, 16, 0, 64, 16 + 4 * 8)),  # out fp32 + int64 indices
    ("dropout on CPU draws its mask with bernoulli_ (writes only)", lambda: F.dropout(X10, 0.5, training=True),
     "aten.bernoulli_.float", (0, 0, 10, 0, 40)),  # one random draw per element into an fp32 mask
    ("nll_loss gathers one log-prob per target", lambda: F.nll_loss(X410, torch.tensor([1, 2, 3, 4])),
     "aten.nll_loss_forward.default", (0, 4, 0, 4 * 8 + 4 * 4, 4 + 4)),  # output + total_weight scalars
    ("mse_loss: sub, square, add", lambda: F.mse_loss(X10, rnd(10)), "aten.mse_loss.default", (0, 30, 0, 80, 4)),
    ("causal attention on CPU counts the 36 of 64 pairs", lambda: F.scaled_dot_product_attention(Q, Q, Q, is_causal=True),
     "aten._scaled_dot_product_flash_attention_for_cpu.default",
     # pairs = 8*9/2 = 36 per head, 2 heads -> 72; matrix 2*72*(dq + dv); vector 4/pair + 1 per output element
     (2 * 72 * (4 + 4), 4 * 72 + 2 * 8 * 4, 72, 3 * 64 * 4, 64 * 4 + 16 * 4)),  # writes out + logsumexp (1,2,8)
    ("batch_norm training: writes out, saved mean/invstd and the running stats",
     lambda: F.batch_norm(IMG, torch.zeros(3), torch.ones(3), rnd(3), rnd(3), training=True),
     "aten._native_batch_norm_legit.default",
     # IMG (1,3,8,8) = 192 elements, 8 FLOPs each; reads input + weight, bias, running mean, running var (3 each);
     # writes out + save_mean + save_invstd + running mean and var updated in place
     (0, 8 * 192, 0, (192 + 4 * 3) * 4, (192 + 3 + 3 + 3 + 3) * 4)),
    ("batch_norm evaluation reads the running stats and writes only the output",
     lambda: F.batch_norm(IMG, torch.zeros(3), torch.ones(3), rnd(3), rnd(3), training=False),
     "aten._native_batch_norm_legit_no_training.default",
     (0, 8 * 192, 0, (192 + 4 * 3) * 4, 192 * 4)),  # the CPU kernel's saved statistics are empty in evaluation
    ("_foreach_add_ over a list of 10 + 5 elements", lambda: torch._foreach_add_([rnd(10), rnd(5)], 1.0),
     "aten._foreach_add_.Scalar", (0, 15, 0, 60, 60)),
    ("addcmul_: mul, scale, add", lambda: X10.clone().addcmul_(X10, X10), "aten.addcmul_.default",
     (0, 30, 0, 120, 40)),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_op_cost(case):
    _, fn, op, expected = case
    with roofline.measure() as r:
        fn()
    rows = r.by_op()
    assert op in rows, f"{op} not recorded; saw {list(rows)}"
    t = rows[op]
    got = (t["matrix_flops"], t["vector_flops"], t["special_ops"], t["bytes_read"], t["bytes_written"])
    assert got == expected
    assert r.unknown_ops == {} and r.errors == {}


def test_table_has_at_least_40_cases():
    """The table is broad: at least 40 distinct op overloads, each with a formula, no two cases under one id, and
    every cost kind covered except those the CPU does not run through these calls (convolution backward and the
    fused multi-head attention have their own tests below; attention backward and _scaled_mm are covered by
    tests/c/test_cost_branches.c)."""
    from roofline._counting import _registry

    ids = [c[0] for c in CASES]
    assert len(set(ids)) == len(ids), [i for i in ids if ids.count(i) > 1]
    ops = {c[2] for c in CASES}
    assert len(ops) >= 40, sorted(ops)
    kinds = set()
    for op in ops:
        ns, name, overload = op.split(".")
        entry = _registry.lookup(f"{ns}::{name}", overload)
        assert entry is not None, f"{op} has no formula"
        kinds.add(entry.kind)  # the kind's name
    elsewhere = {"conv_bwd", "mha", "attn_bwd", "scaled_mm", "grouped_mm", "fft"}  # each has tests of its own
    assert set(_registry.KIND_NAMES.values()) - elsewhere <= kinds


def test_grouped_conv_backward_true_and_flop_counter_counts():
    """FlopCounterMode counts a grouped convolution's weight gradient with the full input channel count: `groups`
    times too many. roofline's matrix FLOPs are the true count; its flop_counter_flops equals FlopCounterMode."""
    from torch.utils.flop_counter import FlopCounterMode

    x, w = IMG4, WG  # x (1,4,8,8), w (4,2,3,3), groups 2, output (1,4,8,8)
    with FlopCounterMode(display=False) as fcm:
        F.conv2d(x, w, padding=1, groups=2).sum().backward()
    with roofline.measure() as r:
        F.conv2d(x, w, padding=1, groups=2).sum().backward()
    bwd = r.by_op()["aten.convolution_backward.default"]
    grad_input = 2 * 1 * 64 * 9 * 4 * 2  # conv_transpose(grad_out, w): N * HoWo * KhKw * Cout * Cin/g * 2
    grad_weight = 2 * 9 * 64 * 1 * 2 * 4  # KhKw * HoWo * N * Cin/g * Cout * 2
    assert bwd["matrix_flops"] == grad_input + grad_weight
    fcm_bwd = fcm.get_flop_counts()["Global"][torch.ops.aten.convolution_backward]
    assert fcm_bwd == grad_input + 2 * grad_weight  # over-counted by groups = 2
    assert r.flop_counter_compatible()["Global"][torch.ops.aten.convolution_backward] == fcm_bwd


def test_causal_attention_flop_counter_counts_full():
    """On the kernels FlopCounterMode does register (CUDA flash / efficient / cuDNN), it ignores is_causal.
    roofline keeps its number as flop_counter_flops and counts the causal pairs in matrix_flops."""
    from torch.utils.flop_counter import sdpa_flop_count

    b, h, s, d = 2, 16, 1024, 64
    c = roofline.cost("_scaled_dot_product_flash_attention", (b, h, s, d), (b, h, s, d), (b, h, s, d), 0.0, True,
                      dtype="bfloat16")
    assert c.flop_counter_flops == sdpa_flop_count((b, h, s, d), (b, h, s, d), (b, h, s, d))
    assert c.flop_counter_flops == 2 * b * h * s * s * (d + d)
    assert c.matrix_flops == 2 * b * h * (s * (s + 1) // 2) * (d + d)


def test_kind_codes_are_stable():
    """Kind codes are stored in records and saved reports: RL_KINDS in csrc/cost.h only ever appends."""
    from roofline import _core
    from roofline._counting import _registry

    names = [name for _, name, _ in _core.kind_table()]
    assert [code for code, _, _ in _core.kind_table()] == list(range(len(names)))
    assert names[:20] == ["zero", "copy", "fill", "ewise", "ewise_in", "mm", "addmm", "bmm", "baddbmm", "scaled_mm",
                          "conv", "conv_bwd", "attn", "attn_bwd", "gather", "pool", "nll", "foreach", "mha",
                          "grouped_mm"]
    assert _core.K_CONV == 10 and _core.K_GROUPED_MM == 19 and _core.K_FFT == 20
    assert _registry.KIND_NAMES[12] == "attn" and _registry.KINDS_BY_NAME["nll"] == 16


def test_every_registry_entry_compiles_and_the_recorder_accepts_it():
    """The registry's parameters (named in roofline/_counting/_registry.py) are the C kind's (RL_PARAMS): every entry, compiled
    against every overload of its op and of its in-place variant, is accepted by Recorder.add_op."""
    from roofline import _core
    from roofline._counting import _registry, _resolve, _schemas

    rec = _core.Recorder(roofline.TensorSpec, {})
    compiled = 0
    for key in _schemas.SCHEMAS:
        name, _, ov = key.rpartition(".")
        qualified = name if "::" in name else f"aten::{name}"
        found = _resolve.find(qualified, ov)
        if found.entry is None:
            continue
        spec = _resolve.compile_op(qualified, found.entry, _registry.schema(qualified, ov))
        rec.add_op(**spec)
        compiled += 1
    assert compiled > 1000


@pytest.mark.parametrize("op,params", [
    # convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    ("convolution", {"bias": 2, "transposed": 6, "groups": 8}),
    ("slow_conv_transpose2d", {"bias": 3, "always_transposed": 1}),  # (self, weight, kernel_size, bias, ...)
    ("_conv_depthwise2d", {"bias": 3, "depthwise": 1}),
    # convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
    # output_padding, groups, output_mask)
    ("convolution_backward", {"transposed": 7, "groups": 9, "output_mask": 10}),
    # (query, key, value, bias, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p, custom_mask_type)
    ("_efficient_attention_forward", {"query": 0, "custom_mask_type": 9, "bshd": 1}),
    ("_flash_attention_forward", {"query": 0, "is_causal": 8, "bshd": 1, "flop_counter_bshd": 1}),
    ("_scaled_dot_product_flash_attention", {"query": 0, "is_causal": 4}),  # (query, key, value, dropout_p, ...)
    ("avg_pool2d_backward", {"flops": 1, "spatial": 2, "kernel_size": 2, "stride": 3, "padding": 4}),
    ("nll_loss_backward", {"target": 2, "per_target": 2}),
    ("_native_multi_head_attention", {"embed_dim": 3, "num_head": 4}),
    # _native_batch_norm_legit(input, weight, bias, running_mean, running_var, training, momentum, eps)
    ("_native_batch_norm_legit", {"flops": 8, "training": 5}),
    ("addmv", {"flops": 2, "of": 1}),  # (self, mat, vec, ...): counts the matrix
    ("sigmoid", {"flops": 2, "special": 1}),
    ("mm", {}),
])
def test_compiled_parameters_are_schema_positions(op, params):
    from roofline._counting import _registry, _resolve

    qualified = f"aten::{op}"
    spec = _resolve.compile_op(qualified, _resolve.find(qualified).entry, _registry.schema(qualified))
    assert spec["params"] == params


def test_add_op_checks_every_parameter():
    from roofline import _core

    rec = _core.Recorder(roofline.TensorSpec, {})
    with pytest.raises(ValueError, match="kind conv has no parameter query"):
        rec.add_op(_core.K_CONV, params={"query": 0})
    with pytest.raises(ValueError, match="'nope' is not a cost-kind parameter"):
        rec.add_op(_core.K_CONV, params={"nope": 0})
    with pytest.raises(ValueError, match=r"parameter bias of kind conv must be in -1\.\.39, got 40"):
        rec.add_op(_core.K_CONV, params={"bias": 40})
    with pytest.raises(ValueError, match=r"parameter depthwise of kind conv must be in 0\.\.1, got 2"):
        rec.add_op(_core.K_CONV, params={"depthwise": 2})
    with pytest.raises(OverflowError, match=r"parameter flops of kind ewise must be in 0\.\.9223372036854775807"):
        rec.add_op(_core.K_EWISE, params={"flops": 2**64})
    with pytest.raises(ValueError, match=r"parameter flops of kind ewise must be in 0\.\.9223372036854775807, got -1"):
        rec.add_op(_core.K_EWISE, -1)
    with pytest.raises(TypeError, match="parameter flops of kind ewise must be an int, not bool"):
        rec.add_op(_core.K_EWISE, True)
    with pytest.raises(TypeError, match="parameter special of kind ewise must be an int, not float"):
        rec.add_op(_core.K_EWISE, params={"special": 1.5})
    with pytest.raises(ValueError, match="parameter flops given twice"):
        rec.add_op(_core.K_EWISE, 1, params={"flops": 1})
    with pytest.raises(ValueError, match="kind mm has no parameter flops"):
        rec.add_op(_core.K_MM, 2)
    with pytest.raises(TypeError, match="params must be a dict"):
        rec.add_op(_core.K_MM, params=[("training", 1)])
    assert len([rec.add_op(_core.K_CONV, params={"depthwise": True, "bias": -1})]) == 1  # a flag takes a bool


def test_in_place_names_resolve_to_the_functional_op():
    from roofline._counting import _registry

    assert [_registry.functional_name(n) for n in ("add_", "__iand__", "mylib::op_", "add")] == [
        "add", "__iand__", "mylib::op", "add"]
    assert _registry.lookup("aten::relu_") is _registry.lookup("aten::relu")


_WITHOUT_TORCH = """
import sys
sys.modules["torch"] = None  # import torch raises ImportError
import roofline
roofline.register("mylib::axpy", kind="ewise", flops=2)
c = roofline.cost("mylib::axpy", (8,), (8,), out=(8,))
print(c.vector_flops, c.bytes_read, c.bytes_written)
try:
    roofline.register("mylib::other", lambda *a, out=None: {})
except ImportError as e:
    print("ImportError:", e)
"""


def test_register_by_kind_needs_no_torch():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    proc = subprocess.run([sys.executable, "-c", _WITHOUT_TORCH], capture_output=True, text=True, timeout=120,
                          cwd=root, env={**__import__("os").environ, "PYTHONPATH": str(root)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    counts, err = proc.stdout.splitlines()
    assert counts == f"{2 * 8} {8 * 4 * 2} {8 * 4}"  # 2 FLOPs per element; reads two fp32 vectors, writes one
    assert err.startswith("ImportError: register(mylib::other): a formula= callable") and "needs torch" in err


def test_fused_multi_head_attention_inference_path():
    """nn.MultiheadAttention in eval under no_grad runs one fused op, _native_multi_head_attention."""
    B, S, E, H = 2, 10, 16, 4
    mha = torch.nn.MultiheadAttention(E, H, batch_first=True).eval()
    x = rnd(B, S, E)
    with torch.no_grad(), roofline.measure() as r:
        mha(x, x, x, need_weights=False)
    row = r.by_op()["aten._native_multi_head_attention.default"]
    proj = 2 * B * S * E * E * 4  # Q, K, V and output projections: 2*B*S*E*E each
    attn = 2 * B * H * S * S * (E // H) * 2  # QK^T and PV
    assert row["matrix_flops"] == proj + attn
    assert row["vector_flops"] == B * S * 4 * E + 4 * B * H * S * S  # four bias adds + softmax
    assert r.unknown_ops == {}


def test_out_variants_write_the_destination_and_do_not_read_it():
    x, o = rnd(1000), torch.empty(1000)
    with roofline.measure() as r:
        torch.clamp(x, 0.0, out=o)  # dispatch drops the default `max`; `out` keeps its schema position
    assert r.by_op()["aten.clamp.out"]["bytes_read"] == 4000 and r.by_op()["aten.clamp.out"]["bytes_written"] == 4000
    v, i = torch.empty(100), torch.empty(100, dtype=torch.long)
    with roofline.measure() as r:
        torch.max(x.view(10, 100), 0, out=(v, i))  # destinations named `max` and `max_values`, not `out*`
    row = r.by_op()["aten.max.dim_max"]
    assert (row["bytes_read"], row["bytes_written"]) == (4000, 100 * 4 + 100 * 8)


def test_malformed_arguments_are_errors_not_crashes():
    with pytest.raises(ValueError, match="missing or mistyped"):
        roofline.cost("avg_pool3d", (1, 1, 8, 8, 8), [2, 2], out=(1, 1, 4, 4, 4))  # 2 kernel sizes for 3 dims
    c = roofline.cost("relu_", [1, 2, 3])  # an int list where a tensor belongs: no tensor, nothing counted
    assert c.bytes == 0 and c.flops == 0
    rec = roofline._core.Recorder(roofline.TensorSpec, {"float32": "not an int"})
    idx = rec.add_op(roofline._core.K_EWISE, 1)
    with pytest.raises(TypeError):
        rec.record(idx, 0, 0, (roofline.TensorSpec((2,)),), None, roofline.TensorSpec((2,)))


def test_grouped_mm_forward_and_backward():
    """_grouped_mm (mixture-of-experts): 48 tokens routed to 3 experts of 16 -> 32, bf16. Forward a (48,16) x
    b (3,16,32); backward grad_a = grad (48,32) x b^T and grad_b = a^T (16,48) x grad (48,32) with the groups splitting
    K: each product is 2 * 48 * 16 * 32 FLOPs."""
    a = torch.randn(48, 16, dtype=torch.bfloat16, requires_grad=True)
    b = torch.randn(3, 16, 32, dtype=torch.bfloat16, requires_grad=True)
    offs = torch.tensor([16, 32, 48], dtype=torch.int32)
    grad = torch.randn(48, 32, dtype=torch.bfloat16)
    with roofline.measure() as r:
        torch._grouped_mm(a, b, offs=offs).backward(grad)
    row = r.by_op()["aten._grouped_mm.default"]
    assert row["matrix_flops"] == 3 * 2 * 48 * 16 * 32
    assert r.unknown_ops == {}
    c = roofline.cost("_grouped_mm", (48, 16), (3, 16, 32), roofline.TensorSpec((3,), "int32"), dtype="bfloat16",
                      out=(48, 32))
    assert (c.matrix_flops, c.vector_flops, c.flop_counter_flops) == (2 * 48 * 16 * 32, 0, 0)
    assert (c.bytes_read, c.bytes_written) == (48 * 16 * 2 + 3 * 16 * 32 * 2 + 3 * 4, 48 * 32 * 2)


def test_fft_forward_backward_and_cost():
    """FFTs (the `fft` kind): 5 N log2 N real FLOPs per complex transform of N points, half that when one side is
    real, plus one multiply per real output component when the transform is scaled. rfft of (4, 64): 4 signals x
    2.5 x 64 x 6 = 3840; irfft back to 64 points, scaled by 1/64 (torch's default "backward" norm): 3840 + 256;
    fft2 of (3, 8, 16) complex64 over the last two dims: 3 signals of 128 points, 3 x 5 x 128 x 7 = 13440.
    Complex64 work is float32 work. The backward pass (transforms again) has no unknown op."""
    x = rnd(4, 64).requires_grad_()
    zc = torch.complex(rnd(3, 8, 16), rnd(3, 8, 16))
    with roofline.measure() as r:
        s = torch.fft.rfft(x)
        y = torch.fft.irfft(s, n=64)
        torch.fft.fft2(zc)
        y.sum().backward()
    fwd = r.by_op(phase="forward")
    r2c, c2r, c2c = (fwd[f"aten._fft_{k}.default"] for k in ("r2c", "c2r", "c2c"))
    assert (r2c["calls"], r2c["vector_flops"], r2c["matrix_flops"]) == (1, 3840, 0)
    assert (r2c["bytes_read"], r2c["bytes_written"]) == (4 * 64 * 4, 4 * 33 * 8)
    assert (c2r["calls"], c2r["vector_flops"]) == (1, 3840 + 4 * 64)
    assert (c2c["calls"], c2c["vector_flops"]) == (1, 3 * 5 * 128 * 7)
    assert r.by_phase()["backward"]["vector_flops"] > 0
    assert r.unknown_ops == {} and r.errors == {}
    c = roofline.cost("_fft_r2c", (4, 64), [1], 0, True, out=roofline.TensorSpec((4, 33), "complex64"))
    assert (c.matrix_flops, c.vector_flops, c.bytes_read, c.bytes_written) == (0, 3840, 4 * 64 * 4, 4 * 33 * 8)
    c = roofline.cost("_fft_c2r", roofline.TensorSpec((4, 33), "complex64"), [1], 2, 64, out=(4, 64))
    assert c.vector_flops == 3840 + 4 * 64
    c = roofline.cost("_fft_c2c", roofline.TensorSpec((3, 8, 16), "complex64"), [1, 2], 0, True,
                      out=roofline.TensorSpec((3, 8, 16), "complex64"))
    assert c.vector_flops == 3 * 5 * 128 * 7 and c.dtype == "float32"
