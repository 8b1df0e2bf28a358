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
    from roofline import _registry

    ids = [c[0] for c in CASES]
    assert len(set(ids)) == len(ids), [i for i in ids if ids.count(i) > 1]
    ops = {c[2] for c in CASES}
    assert len(ops) >= 40, sorted(ops)
    kinds = set()
    for op in ops:
        ns, name, overload = op.split(".")
        entry = _registry.lookup(f"{ns}::{name}", overload)
        assert entry is not None, f"{op} has no formula"
        kinds.add(_registry.KIND_NAMES[entry.kind])
    elsewhere = {"conv_bwd", "mha", "attn_bwd", "scaled_mm"}
    assert set(_registry.KIND_NAMES.values()) - elsewhere <= kinds


def test_grouped_conv_backward_true_and_flop_counter_counts():
    """FlopCounterMode counts a grouped convolution's weight gradient with the full input channel count: `groups`
    times too many. roofline's matrix FLOPs are the true count; its compat count equals FlopCounterMode."""
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


def test_registry_kinds_match_the_c_enum():
    from roofline import _core, _registry

    for code, name in _registry.KIND_NAMES.items():
        assert getattr(_core, "K_" + name.upper()) == code, name


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
