"""Formulas for the ops a model-zoo sweep finds beyond products and convolutions: ordering (sort, topk, search),
histograms, scatters as mixture-of-experts layers use them, recurrent layers, the fused encoder layer, attention over
variable-length sequences and FlexAttention block masks, and a Mixtral-style training step.

Every expected count is arithmetic written here (conventions in docs/concepts.md, "Formulas beyond
FlopCounterMode"); where FlopCounterMode has a formula the count is also compared with it exactly.
"""

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

import roofline  # noqa: E402
from roofline import _core  # noqa: E402

g = torch.Generator().manual_seed(0)


def row(r, name):
    return r.by_op()[name]


def counts(r, name):
    d = row(r, name)
    return (d["matrix_flops"], d["vector_flops"], d["special_ops"], d["bytes_read"], d["bytes_written"])


def fcm_total(fn):
    with FlopCounterMode(display=False) as fc:
        fn()
    return fc.get_total_flops()


def fc_total(r):
    return int(r.records["flop_counter_flops"].sum())


# ---- ordering, search, histograms, scatters -------------------------------------------------------------------------

X816 = torch.randn(8, 16, generator=g)

# (id, callable, op, (matrix, vector, special, bytes_read, bytes_written))
CASES = [
    # 128 elements, slices of 16: ceil(log2 16) = 4 comparisons each; reads 512 B, writes values 512 + int64 1024
    ("sort", lambda: X816.sort(), "aten.sort.default", (0, 128 * 4, 0, 512, 512 + 1024)),
    ("argsort", lambda: X816.argsort(dim=-1), "aten.sort.default", (0, 128 * 4, 0, 512, 512 + 1024)),
    # sort along dim 0: slices of 8, ceil(log2 8) = 3
    ("sort dim 0", lambda: X816.sort(dim=0), "aten.sort.default", (0, 128 * 3, 0, 512, 512 + 1024)),
    # topk(3): (1 + ceil(log2 3)) = 3 per element; writes 8x3 values (96 B) and indices (192 B)
    ("topk", lambda: X816.topk(3), "aten.topk.default", (0, 128 * 3, 0, 512, 96 + 192)),
    # topk(1) is a max: one comparison per element
    ("topk 1", lambda: X816.topk(1), "aten.topk.default", (0, 128, 0, 512, 32 + 64)),
    # 7 values searched among 10 boundaries: ceil(log2 11) = 4 each; reads 40 + 28 B, writes 7 int64
    ("searchsorted", lambda: torch.searchsorted(torch.arange(10.0), torch.linspace(0, 9, 7)),
     "aten.searchsorted.Tensor", (0, 28, 0, 68, 56)),
    # 10 elements against 2 test values: sort 2 (2*1) + 10 binary searches of ceil(log2 3) = 2; reads 80 + 16 B,
    # writes 10 bools
    ("isin", lambda: torch.isin(torch.arange(10), torch.tensor([1, 2])), "aten.isin.Tensor_Tensor",
     (0, 2 + 20, 0, 96, 10)),
    # 100 elements into 10 bins: 3 FLOPs each; reads 400 B, writes 10 floats
    ("histc", lambda: torch.histc(torch.linspace(-1, 1, 100), 10), "aten.histc.default", (0, 300, 0, 400, 40)),
    # 20 int64 values, largest 4: one add each, 5 int64 counts written
    ("bincount", lambda: torch.bincount(torch.tensor([0, 1, 1, 4] * 5)), "aten.bincount.default",
     (0, 20, 0, 160, 40)),
    # 3 rows of 4 added into a (10, 4) destination: 12 adds (not 40); reads self 160 + index 24 + source 48,
    # writes self 160
    ("index_add_", lambda: torch.zeros(10, 4).index_add_(0, torch.tensor([1, 2, 1]), torch.ones(3, 4)),
     "aten.index_add_.default", (0, 12, 0, 232, 160)),
    ("index_reduce", lambda: torch.zeros(10, 4).index_reduce(0, torch.tensor([1, 2, 1]), torch.ones(3, 4), "amax"),
     "aten.index_reduce.default", (0, 12, 0, 232, 160)),
    # scatter_add of a (3, 4) source: 12 adds; reads 160 + index 96 + src 48
    ("scatter_add", lambda: torch.zeros(10, 4).scatter_add(0, torch.zeros(3, 4, dtype=torch.long), torch.ones(3, 4)),
     "aten.scatter_add.default", (0, 12, 0, 304, 160)),
    # scatter of values: a copy, no FLOPs
    ("scatter", lambda: torch.zeros(10, 4).scatter(0, torch.zeros(3, 4, dtype=torch.long), torch.ones(3, 4)),
     "aten.scatter.src", (0, 0, 0, 304, 160)),
    # _int_mm: 2*32*32*32 int8 products
    ("_int_mm", lambda: torch._int_mm(torch.ones(32, 32, dtype=torch.int8), torch.ones(32, 32, dtype=torch.int8)),
     "aten._int_mm.default", (2 * 32 ** 3, 0, 0, 2048, 4096)),
]


@pytest.mark.filterwarnings("ignore:index_reduce")  # torch marks index_reduce as a beta API
@pytest.mark.parametrize("fn, op, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_case(fn, op, expected):
    with roofline.measure(timing=None) as r:
        fn()
    assert not r.unknown_ops and not r.errors
    assert counts(r, op) == expected


# ---- low precision products -----------------------------------------------------------------------------------------

def test_scaled_mm_fp8_equals_flop_counter():
    """_scaled_mm (fp8 e4m3 operands, fp32 scales, bf16 result) on meta: 2*M*N*K = 2*64*32*128 matrix FLOPs, equal to
    FlopCounterMode, plus one dequantising multiply per output element (64*32)."""
    a = torch.empty(64, 128, device="meta", dtype=torch.float8_e4m3fn)
    b = torch.empty(32, 128, device="meta", dtype=torch.float8_e4m3fn).t()
    one = torch.ones((), device="meta")

    def run():
        return torch._scaled_mm(a, b, one, one, out_dtype=torch.bfloat16)

    with roofline.measure(timing=None) as r:
        run()
    d = row(r, "aten._scaled_mm.default")
    assert d["matrix_flops"] == 2 * 64 * 32 * 128 == fc_total(r) == fcm_total(run)
    assert d["vector_flops"] == 64 * 32


# ---- recurrent layers ---------------------------------------------------------------------------------------------

def test_lstm_mkldnn_layers_forward_and_backward():
    """nn.LSTM(16, 32, 2 layers) on CPU runs mkldnn_rnn_layer per layer. T*B = 10*4 = 40 rows, 4 gates of 32.
    Layer 1: 2*40*128*(16 + 32) = 491520 matrix FLOPs; layer 2: 2*40*128*(32 + 32) = 655360. Pointwise per layer:
    1280 units x 14 FLOPs + biases 2*40*128 = 28160 vector, 1280 x 5 = 6400 special. Backward: twice the products
    and the pointwise FLOPs, plus the bias gradients (2*40*128)."""
    torch.manual_seed(0)
    lstm = nn.LSTM(16, 32, num_layers=2, batch_first=True)
    x = torch.randn(4, 10, 16)
    with roofline.measure(timing=None) as r:
        lstm(x)[0].sum().backward()
    assert not r.unknown_ops and not r.errors
    fwd = row(r, "aten.mkldnn_rnn_layer.default")
    assert fwd["calls"] == 2
    assert fwd["matrix_flops"] == 491520 + 655360
    assert fwd["vector_flops"] == 2 * (1280 * 14 + 10240)
    assert fwd["special_ops"] == 2 * 6400
    bwd = row(r, "aten.mkldnn_rnn_layer_backward.default")
    assert bwd["matrix_flops"] == 2 * (491520 + 655360)
    assert bwd["vector_flops"] == 2 * (2 * 1280 * 14 + 10240)


def test_fused_cells_pointwise():
    """The pointwise halves of fused cells (CUDA kernels, run on meta): LSTM (B=3, H=5): 15 units x 14 + biases
    2*4*15 = 330 vector, 75 special; GRU: 15 x 12 + 2*3*15 = 270 vector, 45 special."""
    def m(*shape):  # the fused cells are CUDA kernels; on meta they run shape-only
        return torch.empty(*shape, device="meta")

    ig, hg, cx, b20 = m(3, 20), m(3, 20), m(3, 5), m(20)
    ig3, hg3, hx, b15 = m(3, 15), m(3, 15), m(3, 5), m(15)
    with roofline.measure(timing=None) as r:
        torch.ops.aten._thnn_fused_lstm_cell(ig, hg, cx, b20, b20)
    assert counts(r, "aten._thnn_fused_lstm_cell.default")[1:3] == (15 * 14 + 2 * 4 * 15, 75)
    # the GRU cell has no meta kernel: its formula, called as measure() calls it
    from roofline._counting import _formulas

    gru = _formulas.OPS["aten::_thnn_fused_gru_cell"]
    c = gru(dict(input_gates=ig3, hidden_gates=hg3, hx=hx, input_bias=b15, hidden_bias=b15), (m(3, 5), m(3, 25)))
    assert (c["vector_flops"], c["special_ops"]) == (15 * 12 + 2 * 3 * 15, 45)
    assert c["bytes_read"] == 4 * (45 + 45 + 15 + 15 + 15) and c["bytes_written"] == 4 * (15 + 75)


# ---- nn.TransformerEncoder's fast path ----------------------------------------------------------------------------

def test_transformer_encoder_fast_path_counts_its_products():
    """2 layers, E=32, 4 heads, F=64, batch 2 x 8 tokens (16 tokens, 2*64 = 128 score pairs per head). Per layer:
    QKV 2*16*32*96 = 98304, scores and P V 2*(2*128*32) = 16384, output projection 2*16*32*32 = 32768, feed-forward
    2*(2*16*32*64) = 131072: 278528. The same model on the unfused path, counted by FlopCounterMode, agrees."""
    torch.manual_seed(0)
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True), 2,
                                enable_nested_tensor=False).eval()
    x = torch.randn(2, 8, 32)
    with torch.inference_mode(), roofline.measure(timing=None) as r:
        enc(x)
    assert not r.unknown_ops and not r.errors
    d = row(r, "aten._transformer_encoder_layer_fwd.default")
    assert d["calls"] == 2
    assert d["matrix_flops"] == 2 * 278528
    # bias adds 16*(5*32 + 64), softmax 4*4*128, norms 16*16*32, residuals 2*16*32, ReLU 16*64
    assert d["vector_flops"] == 2 * (3584 + 2048 + 8192 + 1024 + 1024)
    assert d["special_ops"] == 2 * 4 * 128
    enc.train()  # the unfused path (dropout 0: the same arithmetic), where attention runs as its own op
    with torch.no_grad():
        with roofline.measure(timing=None) as unfused:
            enc(x)
        assert unfused.matrix_flops == 2 * 278528
        # FlopCounterMode counts the products but not the CPU attention kernel (2 x 16384)
        assert fcm_total(lambda: enc(x)) == 2 * (278528 - 16384)


# ---- attention over variable-length sequences ---------------------------------------------------------------------

LENS = [100, 300, 600]
CUM = torch.tensor([0, 100, 400, 1000], dtype=torch.int32)  # on the CPU: its values are read
H, D = 2, 16


def _flash(causal=False, cum=CUM):
    q = torch.empty(1000, H, D, device="meta", dtype=torch.float16)
    return torch.ops.aten._flash_attention_forward(q, q, q, cum, cum, 600, 600, 0.0, causal, False, scale=None)


def test_varlen_flash_counts_each_sequence():
    """Lengths 100, 300, 600 packed into 1000 tokens: 2 heads x (100^2 + 300^2 + 600^2) = 920000 score pairs, each
    2*(16 + 16) matrix FLOPs: 58,880,000, FlopCounterMode's count too; (sum S)^2 would give 2*10^6 pairs."""
    with roofline.measure(timing=None) as r:
        _flash()
    d = row(r, "aten._flash_attention_forward.default")
    pairs = H * sum(s * s for s in LENS)
    assert pairs == 920000 and pairs != H * sum(LENS) ** 2
    assert d["matrix_flops"] == 2 * pairs * 2 * D == 58_880_000
    assert fc_total(r) == fcm_total(_flash) == 58_880_000
    assert d["vector_flops"] == 4 * pairs + H * 1000 * D and d["special_ops"] == pairs


def test_varlen_flash_causal_per_sequence():
    """Causal: each sequence's triangle, S(S+1)/2 pairs; FlopCounterMode keeps the full squares."""
    with roofline.measure(timing=None) as r:
        _flash(causal=True)
    pairs = H * sum(s * (s + 1) // 2 for s in LENS)
    assert row(r, "aten._flash_attention_forward.default")["matrix_flops"] == 2 * pairs * 2 * D
    assert fc_total(r) == 58_880_000


def test_varlen_efficient_counts_each_sequence():
    """The same batch through efficient attention's cu_seqlens (layout (1, total, heads, dim))."""
    q = torch.empty(1, 1000, H, D, device="meta", dtype=torch.float16)

    def run():
        return torch.ops.aten._efficient_attention_forward(q, q, q, None, CUM, CUM, 600, 600, 0.0, 0, False)

    with roofline.measure(timing=None) as r:
        run()
    assert row(r, "aten._efficient_attention_forward.default")["matrix_flops"] == 58_880_000 == fcm_total(run)


def test_varlen_lengths_on_meta_are_an_error_not_a_guess():
    """Cumulative lengths on the meta device have no values: the call is listed in errors with zero counts."""
    with roofline.measure(timing=None) as r:
        _flash(cum=CUM.to("meta"))
    assert r.errors == {"aten._flash_attention_forward.default": (1, _core.status_str(7))}
    assert row(r, "aten._flash_attention_forward.default")["matrix_flops"] == 0
    assert "values" in _core.status_str(7)


def test_dense_flash_keeps_the_c_formula():
    """Without cumulative lengths the C formula counts (here on meta, B=2, 8 heads, S=64, D=32: 4*2*8*64*64*32)."""
    q = torch.empty(2, 64, 8, 32, device="meta", dtype=torch.float16)

    def run():
        return torch.ops.aten._flash_attention_forward(q, q, q, None, None, 64, 64, 0.0, False, False, scale=None)

    with roofline.measure(timing=None) as r:
        run()
    assert row(r, "aten._flash_attention_forward.default")["matrix_flops"] == 4 * 2 * 8 * 64 * 64 * 32
    # torch 2.9's FlopCounterMode counts this call 8x lower (1,048,576); roofline's compatible count follows the
    # formula of torch 2.14, the release it is checked against
    if tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 14):
        assert fc_total(r) == fcm_total(run)


# ---- FlexAttention -------------------------------------------------------------------------------------------------

@pytest.fixture
def flex(monkeypatch):
    fa = pytest.importorskip("torch.nn.attention.flex_attention")
    # eager FlexAttention (the higher-order operator without torch.compile, which refuses a dispatch mode)
    monkeypatch.setattr(fa, "_FLEX_ATTENTION_DISABLE_COMPILE_DEBUG", True)
    return fa


def _causal(b, h, q, kv):
    return q >= kv


def _flex_matrix(fa, s, mask_mod, heads=2, dim=16):
    q = torch.randn(1, heads, s, dim)
    bm = fa.create_block_mask(mask_mod, None, None, s, s, device="cpu") if mask_mod else None
    with roofline.measure(timing=None) as r:
        fa.flex_attention(q, q, q, block_mask=bm)
    assert not r.unknown_ops and not r.errors
    return row(r, "higher_order.flex_attention")


def test_flex_attention_causal_block_mask_is_about_half(flex):
    """S = 1024 in 128-blocks: 8 x 8 = 64 blocks; a causal mask visits 8*9/2 = 36 of them (the diagonal ones
    partially masked but computed): 36/64 of full attention, 2 heads x 36 x 128 x 128 pairs x 2*(16 + 16)."""
    full = _flex_matrix(flex, 1024, None)
    causal = _flex_matrix(flex, 1024, _causal)
    assert full["matrix_flops"] == 2 * (2 * 1024 * 1024) * 32
    assert causal["matrix_flops"] == 2 * (2 * 36 * 128 * 128) * 32
    assert causal["matrix_flops"] * 64 == full["matrix_flops"] * 36  # 0.5625 of full: about half
    assert causal["special_ops"] == 2 * 36 * 128 * 128


def test_flex_attention_partial_last_block(flex):
    """S = 200 in 128-blocks: query block 0 (128 rows) visits key block 0 (128 columns); query block 1 (72 rows)
    visits key blocks 0 and 1 (128 + 72 columns): 128*128 + 72*200 = 30784 pairs per head."""
    causal = _flex_matrix(flex, 200, _causal)
    assert causal["matrix_flops"] == 2 * (2 * 30784) * 32


# ---- mixture of experts --------------------------------------------------------------------------------------------

def test_mixtral_training_step_matrix_flops_by_hand():
    """A Mixtral-style model (2 layers, hidden 32, 4 heads of 8 with 2 key/value heads, 4 experts of width 48, top-2,
    vocabulary 64), one training step on 2 x 8 tokens, eager attention. Forward products per layer: q and o
    projections 2*16*32*32 each, k and v 2*16*32*16 each, scores and P V 2*(2*4)*8*8*8 each, the router 2*16*32*4,
    and per routed (token, expert) pair the expert's gate/up (2*32*96) and down (2*48*32) products; plus the LM head
    2*16*32*64. The backward computes two gradients per product: the step is 3x the forward. The routed pairs are
    read from the model's router logits (top-2 per token), so only active experts count."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.MixtralConfig(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=2, num_local_experts=4,
                                     num_experts_per_tok=2, max_position_embeddings=64)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.MixtralForCausalLM(cfg)
    ids = torch.randint(0, 64, (2, 8))
    with roofline.measure(model, timing=None) as r:
        out = model(ids, labels=ids, output_router_logits=True)
        out.loss.backward()
    assert not r.unknown_ops and not r.errors
    t, h, f, e, k, v = 16, 32, 48, 4, 2, 64
    routed = 0
    for logits in out.router_logits:  # (tokens, experts) per layer
        chosen = logits.topk(k, dim=-1).indices
        per_expert = torch.bincount(chosen.flatten(), minlength=e).tolist()
        assert sum(per_expert) == t * k
        routed += sum(per_expert)
    attention = 2 * (2 * (2 * t * h * h) + 2 * (2 * t * h * 16) + 2 * (2 * 2 * 4 * 8 * 8 * 8))  # 2 layers
    router = 2 * (2 * t * h * e)
    experts = routed * (2 * h * 2 * f + 2 * f * h)
    lm_head = 2 * t * h * v
    assert r.matrix_flops == 3 * (attention + router + experts + lm_head)
    # FlopCounterMode has no formula for the grouped expert products; everything else it counts the same
    grouped = row(r, "aten._grouped_mm.default")["matrix_flops"]
    assert grouped == 3 * experts
    assert fc_total(r) == r.matrix_flops - grouped


# ---- resampling and detection ops --------------------------------------------------------------------------------

def test_upsample_forward_and_backward():
    """(1, 2, 4, 4) -> (1, 2, 8, 8), 128 output elements: bilinear 3 lerps (9 FLOPs) each; reads 128 B, writes
    512 B. Backward of bilinear: 8 FLOPs per grad_output element (a multiply and an add into each of 4 taps)."""
    F = torch.nn.functional
    x = torch.randn(1, 2, 4, 4, requires_grad=True)
    with roofline.measure(timing=None) as r:
        F.interpolate(x, size=(8, 8), mode="bilinear").sum().backward()
    assert not r.unknown_ops and not r.errors
    assert counts(r, "aten.upsample_bilinear2d.default") == (0, 128 * 9, 0, 128, 512)
    assert row(r, "aten.upsample_bilinear2d_backward.default")["vector_flops"] == 128 * 8


def test_loss_backward_counts_per_input_element():
    """smooth_l1_loss backward under mean reduction: grad_output is a scalar; the work is per element of the input
    (10 elements x 3 FLOPs)."""
    x = torch.randn(10, requires_grad=True)
    with roofline.measure(timing=None) as r:
        torch.nn.functional.smooth_l1_loss(x, torch.zeros(10)).backward()
    assert row(r, "aten.smooth_l1_loss_backward.default")["vector_flops"] == 30


def test_nms_and_roi_align():
    """nms of 5 boxes: sort 5*3 + areas 5*3 + 10 pairs x (12 IoU FLOPs + 1 comparison) = 160; reads 80 + 20 B.
    roi_align of 2 regions, 3 channels, 2x2 bins: sampling_ratio 2 -> 2 x 4 samples per bin, 96 sample evaluations
    over the channels and bins, 8 FLOPs each + 1 divide per bin (24): 792; reads the regions (40 B) and 4 input
    elements per sample (1536 B). Adaptive sampling (-1): regions 8 x 8 in 2 x 2 bins -> ceil(8/2)^2 = 16 samples per
    bin each: 2*16*3*4 = 384 evaluations: 3096 FLOPs; reads 40 + min(3072, 6144) B."""
    tv = pytest.importorskip("torchvision")
    boxes = torch.tensor([[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30], [21, 21, 29, 29], [50, 50, 60, 60.0]])
    scores = torch.tensor([0.9, 0.8, 0.7, 0.6, 0.5])
    x = torch.randn(1, 3, 16, 16)
    rois = torch.tensor([[0, 0, 0, 8, 8], [0, 4, 4, 12, 12.0]])
    with roofline.measure(timing=None) as r:
        keep = tv.ops.nms(boxes, scores, 0.5)
    assert counts(r, "torchvision.nms.default") == (0, 160, 0, 100, keep.numel() * 8)
    with roofline.measure(timing=None) as r:
        tv.ops.roi_align(x, rois, (2, 2), spatial_scale=1.0, sampling_ratio=2)
    assert counts(r, "torchvision.roi_align.default") == (0, 792, 0, 40 + 1536, 96)
    with roofline.measure(timing=None) as r:
        tv.ops.roi_align(x, rois, (2, 2), spatial_scale=1.0, sampling_ratio=-1)
    assert counts(r, "torchvision.roi_align.default") == (0, 3096, 0, 40 + 3072, 96)
    with roofline.measure(timing=None) as r:  # adaptive sampling needs the regions' values
        tv.ops.roi_align(x.to("meta"), rois.to("meta"), (2, 2), spatial_scale=1.0, sampling_ratio=-1)
    assert list(r.errors) == ["torchvision.roi_align.default"]


def test_log_sigmoid_and_weight_norm():
    """logsigmoid of 10 elements: abs, negate, min, subtract (4) + exp, log1p (2 special) each; its backward 4 per
    element. Weight normalisation of v (4, 3) by rows: 4 FLOPs per element of v (48); backward 6 per element."""
    x = torch.randn(10, requires_grad=True)
    v = torch.randn(4, 3, requires_grad=True)
    gain = torch.randn(4, 1, requires_grad=True)
    with roofline.measure(timing=None) as r:
        torch.nn.functional.logsigmoid(x).sum().backward()
        torch._weight_norm_interface(v, gain, 0)[0].sum().backward()
    assert not r.unknown_ops and not r.errors
    assert counts(r, "aten.log_sigmoid_forward.default")[1:3] == (40, 20)
    assert row(r, "aten.log_sigmoid_backward.default")["vector_flops"] == 40
    assert row(r, "aten._weight_norm_interface.default")["vector_flops"] == 48
    assert row(r, "aten._weight_norm_interface_backward.default")["vector_flops"] == 6 * 12


def test_cudnn_rnn_formula():
    """_cudnn_rnn (a CUDA kernel; its formula called as measure() calls it): one LSTM layer, T*B = 5*3 = 15 rows,
    input 8, hidden 16 (64 gate rows), weights with biases (stride 4): 2*15*64*(8 + 16) = 46080 matrix FLOPs;
    15*16 units x 14 + biases 2*15*64 = 5280 vector; 15*16 x 5 = 1200 special. Backward: twice the products and
    vector FLOPs. Projections (proj_size > 0) are refused."""
    from roofline._counting import _formulas

    def m(*shape):
        return torch.empty(*shape, device="meta")

    b = dict(input=m(5, 3, 8), weight=[m(64, 8), m(64, 16), m(64), m(64)], weight_stride0=4, proj_size=0)
    fwd = _formulas.OPS["aten::_cudnn_rnn"](b, (m(5, 3, 16),))
    assert (fwd["matrix_flops"], fwd["vector_flops"], fwd["special_ops"]) == (46080, 5280, 1200)
    bwd = _formulas.OPS["aten::_cudnn_rnn_backward"](b, (m(5, 3, 8),))
    assert (bwd["matrix_flops"], bwd["vector_flops"], bwd["special_ops"]) == (2 * 46080, 2 * 5280, 0)
    with pytest.raises(ValueError, match="proj_size"):
        _formulas.OPS["aten::_cudnn_rnn"](dict(b, proj_size=4), (m(5, 3, 16),))


def test_a_formula_that_cannot_count_gives_an_error_record(monkeypatch):
    """Inside measure() a built-in formula's ValueError becomes an error record (zero counts), not an exception in
    the user's step and not a guess."""
    from roofline._counting import _formula_base, _formulas

    def refuse(b, out):
        raise ValueError("cannot count this call")

    monkeypatch.setitem(_formulas.OPS, "aten::topk", refuse)
    with roofline.measure(timing=None) as r:
        X816.topk(2)
    assert r.errors == {"aten.topk.default": (1, _core.status_str(_formula_base.E_ARGS))}
    assert row(r, "aten.topk.default")["vector_flops"] == 0


def test_flex_attention_backward_formula(flex):
    """flex_attention_backward (no CPU kernel: its formula called as measure() calls it, with the higher-order op's
    arguments): the causal 8 x 8-block mask's 36 blocks of 128 x 128 pairs per head, 2*(3*16 + 2*16) FLOPs each."""
    from roofline._counting import _formulas

    q = torch.empty(1, 2, 1024, 16)
    bm = flex.create_block_mask(_causal, None, None, 1024, 1024, device="cpu").as_tuple()
    args = (q, q, q, q, torch.empty(1, 2, 1024), q, None, None, None, bm, 0.25, {})
    c = _formulas.HOPS["flex_attention_backward"](args, {}, (q, q, q))
    pairs = 2 * 36 * 128 * 128
    assert (c["matrix_flops"], c["vector_flops"], c["special_ops"]) == (2 * pairs * (3 * 16 + 2 * 16), 4 * pairs, pairs)


def test_flash_sliding_window_counts_the_band():
    """A sliding window of 64 keys to the left, causal (right 0), on the packed sequences: query i of a sequence of
    length S sees min(i, 64) + 1 keys: sum over i of min(i, 64) + 1 = 65*S - 64*65/2 for S > 64. Dense (batch 2 of
    256) as well: 2 x (65*256 - 2080) pairs per head. FlopCounterMode keeps the full squares."""
    def band(s):
        return 65 * s - 64 * 65 // 2

    q = torch.empty(1000, H, D, device="meta", dtype=torch.float16)

    def run():
        return torch.ops.aten._flash_attention_forward(q, q, q, CUM, CUM, 600, 600, 0.0, True, False, scale=None,
                                                       window_size_left=64, window_size_right=0)

    with roofline.measure(timing=None) as r:
        run()
    pairs = H * sum(band(s) for s in LENS)
    assert row(r, "aten._flash_attention_forward.default")["matrix_flops"] == 2 * pairs * 2 * D
    assert fc_total(r) == 58_880_000
    qd = torch.empty(2, 256, H, D, device="meta", dtype=torch.float16)
    with roofline.measure(timing=None) as r:
        torch.ops.aten._flash_attention_forward(qd, qd, qd, None, None, 256, 256, 0.0, True, False, scale=None,
                                                window_size_left=64, window_size_right=0)
    assert row(r, "aten._flash_attention_forward.default")["matrix_flops"] == 2 * (2 * H * band(256)) * 2 * D


@pytest.mark.skipif(not hasattr(torch.ops.mkldnn, "_convolution_pointwise"), reason="a torch without oneDNN ops")
def test_onednn_fused_ops_of_frozen_graphs():
    """oneDNN's fused convolution and linear ops (what freezing puts in CPU graphs): products, bias, post-ops and
    bytes, as the arithmetic below (fp32, 4 bytes an element)."""
    x, w, b = torch.randn(2, 8, 6, 6), torch.randn(12, 4, 3, 3), torch.randn(12)  # groups 2: 4 input channels each
    lx, lw, lb = torch.randn(5, 16), torch.randn(7, 16), torch.randn(7)
    other, lo = torch.randn(2, 12, 6, 6), torch.randn(5, 7)
    with roofline.measure(timing=None) as r:
        torch.ops.mkldnn._convolution_pointwise(x, w, b, [1, 1], [1, 1], [1, 1], 2, "relu", [], "")
        torch.ops.mkldnn._convolution_pointwise.binary(x, other, w, None, [1, 1], [1, 1], [1, 1], 2, "add", None,
                                                       "relu", [], "")
        torch.ops.mkldnn._linear_pointwise(lx, lw, lb, "gelu", [], "none")
        torch.ops.mkldnn._linear_pointwise.binary(lx, lo, lw, lb, "mul")
    ops = r.by_op()
    n = 2 * 12 * 6 * 6  # output elements of the convolutions; each sums 4 channels x 3 x 3 taps
    conv = ops["mkldnn._convolution_pointwise.default"]
    assert (conv["matrix_flops"], conv["vector_flops"], conv["special_ops"]) == (2 * n * 36, n + n, 0)  # bias, relu
    assert (conv["bytes_read"], conv["bytes_written"]) == (4 * (2 * 8 * 36 + 12 * 36 + 12), 4 * n)
    binary = ops["mkldnn._convolution_pointwise.binary"]
    assert (binary["matrix_flops"], binary["vector_flops"]) == (2 * n * 36, n + n)  # add, relu; no bias
    assert binary["bytes_read"] == 4 * (2 * 8 * 36 + 12 * 36 + n)
    lin = ops["mkldnn._linear_pointwise.default"]
    assert (lin["matrix_flops"], lin["vector_flops"], lin["special_ops"]) == (2 * 35 * 16, 35 + 4 * 35, 35)  # gelu
    assert (lin["bytes_read"], lin["bytes_written"]) == (4 * (5 * 16 + 7 * 16 + 7), 4 * 35)
    lin2 = ops["mkldnn._linear_pointwise.binary"]
    assert (lin2["matrix_flops"], lin2["vector_flops"]) == (2 * 35 * 16, 35 + 35)  # bias, mul
    assert lin2["bytes_read"] == 4 * (5 * 16 + 7 * 16 + 7 + 35)
    assert not r.errors and r.unknown_ops == {}


@pytest.mark.skipif(not hasattr(torch.ops.mkl, "_mkl_linear"), reason="a torch without MKL")
def test_mkl_packed_linear():
    """mkl::_mkl_linear: the product of X [5, 16] and the weight [7, 16], the bias; the packed weight (an MKL buffer
    larger than the weight) is not read as traffic, the original weight is."""
    x, w, b = torch.randn(5, 16), torch.randn(7, 16), torch.randn(7)
    packed = torch.ops.mkl._mkl_reorder_linear_weight(w, 5)
    with roofline.measure(timing=None) as r:
        torch.ops.mkl._mkl_linear(x, packed, w, b, 5)
    (row,) = r.by_op().values()
    assert (row["matrix_flops"], row["vector_flops"]) == (2 * 5 * 7 * 16, 5 * 7)
    assert (row["bytes_read"], row["bytes_written"]) == (4 * (5 * 16 + 7 * 16 + 7), 4 * 5 * 7)
