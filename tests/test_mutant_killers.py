"""Small faults the other tests let through: each test here fails on at least one small change of the code (a
constant, an operator, a bound; see bench/mutate_py.py), with the expected figure written out in the test. One class
per module (bench/mutate_py.py judges each module's mutants by its class first): the attention pairs of the Python
formulas (variable-length sequences, roofline/_counting/_formulas.py) for every mask and both Sq <= Sk and Sq > Sk; the LLM
formulas on cases small enough to count by hand; the hints (their default share threshold, order, evidence); a
projection's assumptions; which fusions the compiler took; the cache model; the steady-state report."""

from __future__ import annotations

import math
import types

import pytest

from _graph import BF16, F32, Graph, ceilings
from roofline import llm


def _pairs_by_rows(sq, sk, mask):
    """(query, key) pairs one query row at a time: mask 0 none, 1 causal top-left (row i sees keys 0..i), 2 causal
    bottom-right (row i sees keys 0..i + sk - sq)."""
    if mask == 0:
        return sq * sk
    last = (lambda i: i) if mask == 1 else (lambda i: i + sk - sq)
    return sum(max(0, min(last(i), sk - 1) + 1) for i in range(sq))


# three packed sequences: (Sq, Sk) = (3, 4), (5, 5), (4, 2): Sq < Sk, Sq == Sk, Sq > Sk
SEQ_Q, SEQ_K = [3, 5, 4], [4, 5, 2]
# written out row by row:
#   top-left:     (3,4) 1+2+3 = 6      (5,5) 1+2+3+4+5 = 15   (4,2) 1+2+2+2 = 7     -> 28
#   bottom-right: (3,4) 2+3+4 = 9      (5,5) 15               (4,2) 0+0+1+2 = 3     -> 27
#   none:         12 + 25 + 8 = 45
PAIRS = {0: 45, 1: 28, 2: 27}


def _state_init_report(fill_bytes, other_bytes=10_000):
    """A forward call moving ``other_bytes`` and an optimizer-step fill (state creation) writing ``fill_bytes``:
    roofline times are bytes / DRAM bandwidth (no FLOPs), so the fill's share of the run's roofline time is
    fill_bytes / (fill_bytes + other_bytes)."""
    g = Graph()
    g.call("aten.add.Tensor", "ewise", [(1, other_bytes // 2)], [(2, other_bytes - other_bytes // 2)], dtype=F32)
    g.call("aten.zeros_like.default", "fill", [], [(3, fill_bytes)], phase=2, dtype=F32)
    return g.report(ceil=ceilings(dram=1e9))


# ---- a projection's assumptions (roofline/_analysis/_assumptions.py) ----------------------------------------------------------

def _assumptions_report(rows, op_names, meta=None):
    """rows: (op index, dtype name, matrix FLOPs, vector FLOPs); 100 bytes each, untimed."""
    import numpy as np

    from roofline._datamodel._records import DTYPE_CODES, RECORD_DTYPE
    from roofline.report import OpInfo, Report

    rec = np.zeros(len(rows), RECORD_DTYPE)
    for i, (op, dt, mf, vf) in enumerate(rows):
        rec[i]["op"], rec[i]["dtype"], rec[i]["matrix_flops"], rec[i]["vector_flops"] = op, DTYPE_CODES[dt], mf, vf
        rec[i]["bytes_read"], rec[i]["seq"] = 100, i
        rec[i]["t_start"] = rec[i]["t_end"] = float("nan")
    ops = [OpInfo(n, n.rsplit(".", 1)[0], "ewise") for n in op_names]
    return Report(rec, ops, [("Global",)], meta=dict(meta or {}, devices=["meta"]))


def _assumptions_roofs(*peaks):
    """The roofs (figures of "best") of CPU ceilings with these peaks and a DRAM bandwidth."""
    from roofline._hardware import _roofs
    from roofline._hardware._ceilings import Ceiling, Ceilings

    return _roofs.of(Ceilings(device="cpu", name="t", fingerprint="t", peaks={k: Ceiling(v) for k, v in peaks},
                              bandwidths={"DRAM": Ceiling(1e10)}), "best")


# matrix/float32, matrix/int8, vector/float32 and vector/bfloat16 peaks: a bfloat16 product falls back to the
# vector/bfloat16 peak (its own dtype: not listed), a float16 product to matrix/float32, float16 element-wise work
# to vector/float32; nothing for float64
RICH = (("matrix", "float32"), 1e12), (("matrix", "int8"), 4e12), (("vector", "float32"), 1e11), \
    (("vector", "bfloat16"), 2e11)
# matrix/float32 only
POOR = ((("matrix", "float32"), 1e12),)
MIXED_OPS = ["aten.mm.default", "aten.add.Tensor", "aten._int_mm.default", "aten.view.default", "aten.mul.Tensor"]
MIXED = [(0, "bfloat16", 1000, 0), (0, "bfloat16", 1000, 0), (0, "float32", 3000, 0), (0, "float16", 500, 0),
         (1, "float64", 0, 40), (1, "float64", 0, 60), (1, "bfloat16", 0, 7), (1, "float16", 0, 3),
         (2, "int8", 2000, 0), (2, "uint8", 500, 0), (3, "float64", 0, 0), (4, "int32", 0, 100)]
MIXED_TOTAL = 1000 + 1000 + 3000 + 500 + 40 + 60 + 7 + 3 + 2000 + 500 + 100  # 8210 FLOPs
MATRIX_TOTAL = 2000 + 3000 + 500 + 2000 + 500  # 8000


# ---- which fusions the compiler took (roofline/_analysis/_fusion_compiled.py) ---------------------------------------------


def _eager_chain():
    """Three forward element-wise calls in module blk: add -> gelu -> mul, joined by storages 2 and 3 (1000 and
    2000 bytes), and a second add in blk after them."""
    g = Graph()
    g.call("aten.add.Tensor", "ewise", [(1, 1000)], [(2, 1000)], vector=250, module="blk")
    g.call("aten.gelu.default", "ewise", [(2, 1000)], [(3, 2000)], vector=500, module="blk")
    g.call("aten.mul.Tensor", "ewise", [(3, 2000)], [(4, 2000)], vector=500, module="blk")
    g.call("aten.add.Tensor", "ewise", [(4, 2000)], [(5, 2000)], vector=500, module="blk")
    return g.report()


def _marked(kernels, records=(0, 1, 2), edges=((0, 1, 1000), (1, 2, 2000))):
    import types

    from roofline._analysis import _fusion_compiled

    opp = types.SimpleNamespace(records=list(records), edges=list(edges))
    comp = types.SimpleNamespace(meta={"compiled": {"kernels": kernels}}, records=None)
    _fusion_compiled.mark([opp], _eager_chain(), comp)
    return opp


def K(name, ops=(), phase="forward", module="blk"):
    return {"name": name, "ops": list(ops), "phase": phase, "module": module}


# ---- the cache model (roofline/_analysis/_cache_model.py) -------------------------------------------------------------------

def _sysfs(tmp_path, cpu, entries):
    """A fake /sys/devices/system/cpu: entries {index dir: {file: text}}."""
    base = tmp_path / f"cpu{cpu}" / "cache"
    for d, files in entries.items():
        (base / d).mkdir(parents=True)
        for name, text in files.items():
            (base / d / name).write_text(text + "\n")
    return str(tmp_path)


class _FakeRoofs:
    """What hierarchy() reads of a report's roofs: their ceilings' device and info, and bandwidth(level).value (NaN
    for a level without one)."""

    def __init__(self, device="cpu", info=None, bandwidths=None):
        self.ceilings = types.SimpleNamespace(device=device, info=info)
        self.bws = dict(bandwidths or {})

    def bandwidth(self, level):
        return types.SimpleNamespace(value=self.bws.get(level, math.nan))


INF = float("inf")


# ---- hints (roofline/_analysis/_hints.py) -----------------------------------------------------------------------------------

def _overhead_ops(n, t=2.0 ** -20):
    g = Graph()
    for i in range(n):
        g.call("aten.add.Tensor", "ewise", [(i, 4)], [(i + 10000, 4)], vector=1, t=t)
    return g


def _no_ceilings(g):
    import numpy as np

    from roofline._analysis._dataflow import ACCESS_DTYPE
    from roofline.report import Report

    r = g.report()
    return Report(r.records, r._ops, r.module_sets, meta={"devices": ["meta"]}, ceilings=None,
                  accesses=np.array(g.acc, dtype=ACCESS_DTYPE))


# ---- the steady-state report (roofline/_loops/_steady.py) ------------------------------------------------------------------

def _step(vector=10, t_add=1e-6, t_mul=2e-6, wall=1.0, ops=("add", "mul")):
    """One measured step: the ops of ``ops`` (add, mul, ...) with their times, and its wall time."""
    g = Graph()
    for k, name in enumerate(ops):
        g.call(f"aten.{name}.Tensor", "ewise", [(k, 400)], [(100 + k, 400)], vector=vector,
               t={"add": t_add, "mul": t_mul}.get(name, 1e-6))
    return g.report(wall_time=wall)


# ---- the LLM formulas (roofline/llm.py) ---------------------------------------------------------------------------

def _hf(**kw):
    import types

    return types.SimpleNamespace(to_dict=lambda: dict(kw), **kw)


class TestAttentionPairs:
    """The Python attention formulas of variable-length sequences (roofline/_counting/_formulas.py)."""

    def test_hand_counts_agree_with_the_row_by_row_rule(self):
        for mask, total in PAIRS.items():
            assert sum(_pairs_by_rows(a, b, mask) for a, b in zip(SEQ_Q, SEQ_K)) == total

    @pytest.mark.parametrize("mask", [0, 1, 2])
    def test_varlen_efficient_attention_pairs_per_mask(self, mask):
        """_efficient_attention_forward over packed sequences of different query and key lengths (cu_seqlens), with
        custom_mask_type 0, 1 (causal from the top-left) and 2 (from the bottom-right): H heads x the pairs above, each
        2 * (dq + dv) matrix FLOPs, 4 vector FLOPs and one exp, plus one division per output element."""
        torch = pytest.importorskip("torch")
        import roofline

        h, d = 2, 8
        cq = torch.tensor([0, 3, 8, 12], dtype=torch.int32)
        ck = torch.tensor([0, 4, 9, 11], dtype=torch.int32)
        q = torch.empty(1, 12, h, d, device="meta", dtype=torch.float16)
        k = torch.empty(1, 11, h, d, device="meta", dtype=torch.float16)
        with roofline.measure(timing=None) as r:
            torch.ops.aten._efficient_attention_forward(q, k, k, None, cq, ck, 5, 5, 0.0, mask, False)
        assert not r.errors
        row = r.by_op()["aten._efficient_attention_forward.default"]
        pairs = h * PAIRS[mask]
        assert row["special_ops"] == pairs
        assert row["matrix_flops"] == 2 * pairs * (d + d)
        assert row["vector_flops"] == 4 * pairs + h * 12 * d
        # FlopCounterMode's reading: every sequence unmasked
        assert int(r.records["flop_counter_flops"].sum()) == 2 * h * PAIRS[0] * (d + d)


    def test_flash_window_to_the_left_only(self):
        """A window of 2 keys to the left, none to the right (unlimited), not causal, 5 queries over 5 keys: query i
        sees keys max(i - 2, 0) .. 4: 5 + 5 + 5 + 4 + 3 = 22 pairs per head."""
        torch = pytest.importorskip("torch")
        import roofline

        q = torch.empty(1, 5, 2, 8, device="meta", dtype=torch.float16)
        with roofline.measure(timing=None) as r:
            torch.ops.aten._flash_attention_forward(q, q, q, None, None, 5, 5, 0.0, False, False, scale=None,
                                                    window_size_left=2, window_size_right=-1)
        row = r.by_op()["aten._flash_attention_forward.default"]
        assert sum(max(0, 4 - max(i - 2, 0) + 1) for i in range(5)) == 22
        assert row["special_ops"] == 2 * 22 and row["matrix_flops"] == 2 * (2 * 22) * (8 + 8)

    def test_varlen_lengths_that_do_not_match_are_an_error(self):
        torch = pytest.importorskip("torch")
        import roofline

        q = torch.empty(1, 12, 2, 8, device="meta", dtype=torch.float16)
        cq = torch.tensor([0, 3, 8, 12], dtype=torch.int32)
        for ck in (torch.tensor([0, 4, 11], dtype=torch.int32),        # two sequences of keys for three of queries
                   torch.tensor([0, 4, 3, 11], dtype=torch.int32)):    # a negative length
            with roofline.measure(timing=None) as r:
                torch.ops.aten._efficient_attention_forward(q, q, q, None, cq, ck, 5, 8, 0.0, 0, False)
            assert list(r.errors) == ["aten._efficient_attention_forward.default"]
            assert r.by_op()["aten._efficient_attention_forward.default"]["matrix_flops"] == 0

    def test_fused_recurrent_cells(self):
        """The pointwise half of fused LSTM and GRU cells, 3 rows of 5 hidden units (15 units): LSTM 14 FLOPs and 5
        special per unit, GRU 12 and 3; biases 2 adds per gate element; backward twice the FLOPs plus the bias
        gradients, from the workspace (LSTM 4 values per unit, GRU 5)."""
        torch = pytest.importorskip("torch")
        from roofline._counting import _formulas

        def t(*shape):
            return torch.empty(*shape, device="meta")

        B, H = 3, 5
        lstm = _formulas.OPS["aten::_thnn_fused_lstm_cell"]
        c = lstm({"input_gates": t(B, 4 * H), "hidden_gates": t(B, 4 * H), "cx": t(B, H), "input_bias": t(4 * H),
                  "hidden_bias": t(4 * H)}, [t(B, H), t(B, H), t(B, 4 * H)])
        assert (c["vector_flops"], c["special_ops"]) == (15 * 14 + 2 * 4 * 15, 15 * 5)
        assert c["bytes_read"] == (2 * 60 + 15 + 2 * 20) * 4 and c["bytes_written"] == (15 + 15 + 60) * 4
        c = lstm({"input_gates": t(B, 4 * H), "hidden_gates": t(B, 4 * H), "cx": t(B, H), "input_bias": None}, None)
        assert c["vector_flops"] == 15 * 14
        gru = _formulas.OPS["aten::_thnn_fused_gru_cell"]
        c = gru({"input_gates": t(B, 3 * H), "hidden_gates": t(B, 3 * H), "hx": t(B, H), "input_bias": t(3 * H)}, None)
        assert (c["vector_flops"], c["special_ops"]) == (15 * 12 + 2 * 3 * 15, 15 * 3)
        back = _formulas.OPS["aten::_thnn_fused_lstm_cell_backward_impl"]
        c = back({"grad_hy": t(B, H), "grad_cy": t(B, H), "cx": t(B, H), "cy": t(B, H), "workspace": t(B, 4 * H),
                  "has_bias": True}, None)
        assert (c["vector_flops"], c["special_ops"]) == (2 * 15 * 14 + 2 * 4 * 15, 0)
        c = back({"grad_hy": t(B, H), "cx": t(B, H), "cy": t(B, H), "workspace": t(B, 4 * H), "has_bias": False},
                 None)
        assert c["vector_flops"] == 2 * 15 * 14
        gback = _formulas.OPS["aten::_thnn_fused_gru_cell_backward"]
        c = gback({"grad_hy": t(B, H), "workspace": t(B, 5 * H), "has_bias": True}, None)
        assert c["vector_flops"] == 2 * 15 * 12 + 2 * 3 * 15

    def test_flex_attention_vector_and_special(self, monkeypatch):
        """FlexAttention forward over S = 200 in 128-blocks with a causal block mask: 128*128 + 72*200 = 30784
        pairs per head (2 heads); 4 vector FLOPs and one exp per pair, one division per output element (2 heads x
        200 rows x 16)."""
        pytest.importorskip("torch")
        fa = pytest.importorskip("torch.nn.attention.flex_attention")
        import torch

        import roofline

        monkeypatch.setattr(fa, "_FLEX_ATTENTION_DISABLE_COMPILE_DEBUG", True)
        q = torch.randn(1, 2, 200, 16)
        bm = fa.create_block_mask(lambda b, h, i, j: i >= j, None, None, 200, 200, device="cpu")
        with roofline.measure(timing=None) as r:
            fa.flex_attention(q, q, q, block_mask=bm)
        row = r.by_op()["higher_order.flex_attention"]
        pairs = 2 * 30784
        assert (row["matrix_flops"], row["special_ops"]) == (2 * pairs * (16 + 16), pairs)
        assert row["vector_flops"] == 4 * pairs + 2 * 200 * 16

    def test_roi_align_adaptive_sampling_of_thin_regions(self):
        """Adaptive sampling (sampling_ratio <= 0): ceil(h / ph) x ceil(w / pw) samples per bin from the region's size,
        a region at least one pixel high and wide unless aligned; 3 channels, 8 FLOPs per sample evaluation and one
        division per bin element. A region 0.5 px high and 3 px wide in one bin: 1 x 3 samples."""
        torch = pytest.importorskip("torch")
        from roofline._counting import _formulas

        x = torch.empty(1, 3, 8, 8, device="meta")
        f = _formulas.OPS["torchvision::roi_align"]

        def vector(rois, aligned, ph=1, pw=1):
            b = {"input": x, "rois": torch.tensor(rois), "spatial_scale": 1.0, "pooled_height": ph,
                 "pooled_width": pw, "sampling_ratio": -1, "aligned": aligned}
            return f(b, torch.empty(len(rois), 3, ph, pw, device="meta"))["vector_flops"]

        assert vector([[0.0, 0.0, 0.0, 3.0, 0.5]], False) == 8 * (1 * 3) * 3 + 3
        assert vector([[0.0, 0.0, 0.0, 0.5, 0.5]], False) == 8 * 1 * 3 + 3  # at least 1 x 1 pixel
        assert vector([[0.0, 0.0, 0.0, 3.0, 2.5]], True, ph=2) == 8 * (2 * 3) * 3 * 2 + 3 * 2  # ceil(1.25) = 2
        assert vector([[0.0, 0.0, 0.0, 0.0, 3.0]], True) == 3  # aligned: an empty region has no samples

    def test_quantized_product_of_a_vector(self):
        """A 1-d activation of K = 8 times a quantized (4, 8) weight: M = 1, 2 x 1 x 4 x 8 matrix FLOPs."""
        torch = pytest.importorskip("torch")
        from roofline._counting import _formulas

        f = _formulas.OPS["aten::_weight_int8pack_mm"]
        b = {"self": torch.empty(8, device="meta"), "mat2": torch.empty(4, 8, dtype=torch.int8, device="meta"),
             "scales": torch.empty(4, device="meta")}
        c = f(b, torch.empty(4, device="meta"))
        assert (c["matrix_flops"], c["vector_flops"]) == (2 * 1 * 4 * 8, 1 * 4)
        with pytest.raises(ValueError, match="need a last dimension"):
            f(dict(b, self=torch.empty((), device="meta")), torch.empty(4, device="meta"))

    def test_clog2(self):
        from roofline._counting import _formula_base

        assert [_formula_base._clog2(n) for n in (0, 1, 2, 3, 4, 5, 8, 9, 16, 17)] == [0, 0, 1, 2, 2, 3, 3, 4, 4, 5]


class TestLLM:
    """The LLM formulas (roofline/llm.py)."""

    def test_llm_attention_pairs_small_by_hand(self):
        """One layer, one head of 4, sequences of 3 tokens: causal pairs 1 + 2 + 3 = 6, full 9; 2 x 2 FLOPs per pair
        and dimension (QK^T and PV)."""
        c = llm.DecoderConfig(hidden=4, intermediate=8, layers=1, heads=1, kv_heads=1, vocab=10)
        assert llm.attention_flops(c, 3) == 2 * 2 * 1 * 1 * 6 * 4 == 96
        assert llm.attention_flops(c, 3, attention="full") == 2 * 2 * 9 * 4 == 144
        assert llm.attention_flops(c, 6, seq_len=3) == 2 * 96  # two sequences of 3, not one of 6 (21 pairs)
        assert llm.attention_flops(c, 1) == 2 * 2 * 1 * 4  # one token: one pair
        assert llm.forward_flops(c, 3)["attention"] == 96

    def test_decoder_config_from_a_transformers_config(self):
        llama = _hf(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, vocab_size=100)
        c = llm.DecoderConfig.from_hf(llama)
        assert c == llm.DecoderConfig(hidden=64, intermediate=128, layers=2, heads=4, kv_heads=4, head_dim=16, vocab=100,
                                      tied_embeddings=False, attention_bias=False, mlp_bias=False)
        assert (c.mlp, c.norm, c.positions) == ("gated", "rms", 0)
        gqa = _hf(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, vocab_size=100,
                  num_key_value_heads=2, head_dim=32, tie_word_embeddings=True, attention_bias=True, mlp_bias=True,
                  num_local_experts=1, num_experts=None)
        assert llm.DecoderConfig.of(gqa) == llm.DecoderConfig(hidden=64, intermediate=128, layers=2, heads=4, kv_heads=2,
                                                              head_dim=32, vocab=100, tied_embeddings=True,
                                                              attention_bias=True, mlp_bias=True)
        gpt2 = _hf(model_type="gpt2", n_embd=32, n_inner=None, n_layer=2, n_head=4, vocab_size=50, n_positions=64)
        assert llm.DecoderConfig.of(gpt2) == llm.DecoderConfig(hidden=32, intermediate=128, layers=2, heads=4, vocab=50,
                                                               tied_embeddings=True, mlp="plain", norm="layer",
                                                               attention_bias=True, mlp_bias=True, positions=64)
        gpt2_untied = _hf(model_type="gpt2", n_embd=32, n_inner=100, n_layer=2, n_head=4, vocab_size=50, n_positions=64,
                          tie_word_embeddings=False)
        c = llm.DecoderConfig.from_hf(gpt2_untied)
        assert (c.intermediate, c.tied_embeddings) == (100, False)
        for moe in ("num_local_experts", "num_experts", "n_routed_experts"):
            with pytest.raises(ValueError, match=f"mixture-of-experts config \\({moe}=8\\)"):
                llm.DecoderConfig.from_hf(_hf(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                              num_attention_heads=4, vocab_size=100, **{moe: 8}))
        assert llm.DecoderConfig.of({"hidden": 8, "intermediate": 16, "layers": 1, "heads": 2, "vocab": 10}).head_dim == 4
        with pytest.raises(TypeError, match="expected a DecoderConfig"):
            llm.DecoderConfig.of(_hf(n_layer=2))  # has to_dict, but neither hidden_size nor n_embd
        with pytest.raises(TypeError, match="got int"):
            llm.DecoderConfig.of(3)

    def test_decode_step_bytes_of_a_gpt2_like_model_by_hand(self):
        """hidden 8, MLP 32, one layer, 2 heads, vocab 10, 16 learned positions, tied embeddings, biases:
        per layer 2 LayerNorms (2 x 16), qkv 8x24 + 24, o 8x8 + 8, fc 8x32 + 32, proj 32x8 + 8 = 872, the final norm
        16: 888 without the embeddings; + the tied LM head read in full (80); + per sequence one token row and one
        position row gathered (2 x 8)."""
        c = llm.DecoderConfig(hidden=8, intermediate=32, layers=1, heads=2, vocab=10, tied_embeddings=True, mlp="plain",
                              norm="layer", attention_bias=True, mlp_bias=True, positions=16)
        assert llm.param_count(c, exclude_embeddings=True) == 2 * 16 + 216 + 72 + 288 + 264 + 16 == 888
        b, ctx = 3, 5
        weights = (888 + 80 + b * 2 * 8) * 2
        kv = b * 1 * 2 * (2 * 4) * 2  # per token: layers x (K, V) x kv_dim x bytes
        assert llm.decode_step_bytes(c, b, ctx, "bfloat16") == {"weights": weights, "kv_read": kv * ctx, "kv_write": kv,
                                                                "total": weights + kv * (ctx + 1)}
        untied = llm.DecoderConfig(hidden=8, intermediate=16, layers=1, heads=2, vocab=10)  # Llama-style: no positions
        p = llm.param_count(untied, exclude_embeddings=True)
        assert llm.decode_step_bytes(untied, b, ctx, 4)["weights"] == (p + b * 8) * 4

    def test_count_step_defaults_on_a_tiny_model(self):
        """hidden 8, MLP 16 (gated), one layer of 2 heads, vocab 10, 8 tokens, one sequence (the default batch):
        products 2 x (4 x 64 + 3 x 128 + 80 LM head = 720) x 8 = 11520, attention counted as flash: 2 x 2 x 2 heads x
        (8 x 9 / 2 = 36 causal pairs) x 4 = 1152. Without an optimizer nothing is warmed up."""
        pytest.importorskip("transformers")
        c = llm.DecoderConfig(hidden=8, intermediate=16, layers=1, heads=2, kv_heads=2, vocab=10)
        r = llm.count_step(c, seq_len=8, train=False, optimizer=None)
        assert r.matrix_flops == 2 * 720 * 8 + 2 * 2 * 2 * 36 * 4 == 12672
        assert r.meta["steady"]["warmup"] == 0 and r.meta["steady"]["first_step"] is False
        assert r.meta["dtype"] == "bfloat16"


class TestHints:
    """The hints (roofline/_analysis/_hints.py)."""

    def test_hint_at_two_percent_is_kept_by_the_default_threshold(self):
        # 204 / (204 + 10000) = 2.0% of the roofline time: above the default 1%, below 10%
        r = _state_init_report(204)
        share = 204 / 10_204
        assert 0.01 < share < 0.1
        hs = [h for h in r.hints() if h.kind == "optimizer_state_init"]
        assert len(hs) == 1 and hs[0].saved_s == pytest.approx(204 / 1e9, rel=1e-12)
        assert [h.kind for h in r.hints(min_share=0.03)] == []
        from roofline._analysis import _hints, _dataflow

        assert [h.kind for h in _hints.hints(r, _dataflow.report_accesses(r))] == ["optimizer_state_init"]
        assert "optimizer state" in r.summary() or "creates its state" in r.summary()

    def test_hint_below_one_percent_is_left_out_by_default(self):
        # 50 / 10050 = 0.5%: below the default 1%
        r = _state_init_report(50)
        assert [h.kind for h in r.hints()] == []
        from roofline._analysis import _hints, _dataflow

        assert _hints.hints(r, _dataflow.report_accesses(r)) == []
        assert [h.kind for h in r.hints(min_share=0.004)] == ["optimizer_state_init"]

    def test_attention_in_the_backward_phase_gives_no_sdpa_hint(self):
        """The SDPA rule starts from forward softmaxes only: the same products and softmax recorded as backward calls
        (a backward pass's recomputation, say) are not a math-path attention to replace."""
        from _graph import attention

        g = attention()
        assert "sdpa" in [h.kind for h in g.report().hints()]
        for row in g.rows:
            row["phase"] = 1
        assert "sdpa" not in [h.kind for h in g.report().hints()]

    def test_hints_come_most_time_saved_first(self):
        """A dropout mask (8192 bytes written, saved at 1e11 B/s) and an optimizer-state fill of 10x that: the fill's
        hint first; with a fill of a tenth of the mask, the dropout's first."""
        from _graph import MASK, chain

        for fill, order in ((10 * MASK, ["optimizer_state_init", "dropout_mask"]),
                            (MASK // 10, ["dropout_mask", "optimizer_state_init"])):
            g = chain()
            g.call("aten.zeros_like.default", "fill", [], [(40, fill)], phase=2)
            hs = [h for h in g.report().hints(min_share=0) if h.kind in order]
            assert [h.kind for h in hs] == order
            assert hs[0].saved_s > hs[1].saved_s

    def test_notebook_advice_lists_the_hints_and_is_empty_without_any(self):
        from roofline._analysis import _hints
        from roofline.render import _advice

        r = _state_init_report(204)  # one hint (2% of the roofline time), no fusion opportunity
        html = _advice.advice_html(r)
        assert "what to change" in html and "optimizer_state_init" in html
        assert html.count("<li>") == 1
        assert "what to change" in r._repr_html_()
        quiet = _state_init_report(50)  # its hint is below 1%: nothing to say
        assert _advice.advice_html(quiet) == ""
        assert _advice.advice_text(quiet) == ""
        assert "optimizer_state_init" in _advice.advice_text(r)

    @pytest.mark.parametrize("t,text", [(5e-6, "5.00 us"), (-5e-6, "-5.00 us"), (2e-5, "20.0 us"), (1e-3, "1.0 ms"),
                                        (0.0012, "1.2 ms"), (0.5, "500.0 ms"), (1.0, "1.00 s"), (2.5, "2.50 s"),
                                        (5e-9, "5.00 ns"), (0.0, "0 s"), (float("nan"), "-"), (float("inf"), "-"),
                                        (None, "-")])
    def test_durations_in_hints_and_tables(self, t, text):
        """The one duration format of print(r), the tables and the hints (roofline/_util/_format.py)."""
        from roofline._util import _format

        assert _format.dur(t) == text

    def test_op_name_base(self):
        from roofline._analysis import _hints
        from roofline.render import _advice

        assert _hints._is("relu", "relu") and _hints._is("aten.relu.default", "relu")
        assert not _hints._is("aten.relu.default", "aten") and not _hints._is("relu_", "relu")

    def test_sdpa_through_a_forward_op_after_the_softmax(self):
        """A dropout-like mul between the softmax and the second product (forward): the walk passes it, and the hint
        covers five calls."""
        from _graph import BH, L, QKV, SCORES

        g = Graph()
        g.call("aten.bmm.default", "bmm", [(1, QKV), (2, QKV)], [(10, SCORES)], matrix=2 * BH * L * L * 32)
        g.call("aten._softmax.default", "ewise_in", [(10, SCORES)], [(11, SCORES)], vector=4 * BH * L * L)
        g.call("aten.mul.Tensor", "ewise", [(11, SCORES)], [(12, SCORES)], vector=BH * L * L)
        g.call("aten.bmm.default", "bmm", [(12, SCORES), (3, QKV)], [(13, QKV)], matrix=2 * BH * L * L * 32)
        hs = [h for h in g.report().hints() if h.kind == "sdpa"]
        assert len(hs) == 1 and hs[0].records == [0, 1, 2, 3]
        # the same mul recorded as a backward call is not passed: no second product is reached
        g.rows[2]["phase"] = 1
        assert "sdpa" not in [h.kind for h in g.report().hints()]

    def test_small_gemm_evidence_intensity(self):
        g = Graph()
        for i in range(3):  # (8 x 1024) @ (1024 x 1024)
            g.call("aten.mm.default", "mm", [(10 + i, 8 * 1024 * 4), (1, 1024 * 1024 * 4)], [(20 + i, 8 * 1024 * 4)],
                   matrix=2 * 8 * 1024 * 1024)
        (h,) = [h for h in g.report().hints() if h.kind == "small_gemm"]
        assert h.evidence["median_intensity"] == pytest.approx(2 * 8 * 1024 * 1024 / (2 * 8 * 1024 * 4 + 1024 * 1024 * 4))
        assert h.evidence["calls"] == 3

    def test_layout_evidence_by_op_and_the_four_largest_in_the_message(self):
        g = Graph()
        names = ["clone", "cat", "stack", "repeat", "constant_pad_nd"]
        for i, n in enumerate(names):  # 5000, 4000, ... 1000 bytes written, as much read
            nb = 1000 * (5 - i)
            g.call(f"aten.{n}.default", "copy", [(100 + i, nb)], [(200 + i, nb)])
        (h,) = [h for h in g.report().hints() if h.kind == "layout_copies"]
        assert h.evidence["by_op"] == {f"aten.{n}.default": 2000 * (5 - i) for i, n in enumerate(names)}
        assert h.saved_bytes == 2 * (5000 + 4000 + 3000 + 2000 + 1000)
        assert "aten.repeat.default" in h.message and "aten.constant_pad_nd.default" not in h.message

    def test_cast_pingpong_evidence_lists_ten_pairs(self):
        g = Graph()
        for i in range(11):
            g.call("aten._to_copy.default", "copy", [(100 + i, 400)], [(200 + i, 200)], dtype=F32)
            g.call("aten._to_copy.default", "copy", [(200 + i, 200)], [(300 + i, 400)], dtype=BF16)
        (h,) = [h for h in g.report().hints() if h.kind == "cast_pingpong"]
        assert h.evidence["pairs"] == 11 and len(h.evidence["casts"]) == 10
        assert h.evidence["casts"][:2] == [(0, 1), (2, 3)]

    def test_optimizer_steps_without_an_access_table_give_no_fused_hint(self):
        from _graph import Graph as G

        g = G()
        for i in range(4):
            g.call("aten.add_.Tensor", "ewise", [(1, 4096), (2, 4096)], [(1, 4096)], vector=1024, phase=2)
        r = g.report(with_accesses=False)
        assert [h.kind for h in r.hints()] == []
        assert "optimizer_fused" in [h.kind for h in g.report().hints()]

    def test_overhead_hint_at_its_thresholds(self):
        """50 calls (the least the rule takes), each measured at t = 2**-20 s, in a wall time of 100 t: half the wall
        time is outside the ops, exactly the rule's threshold (kept). Without the instrumentation estimate in
        ``overhead`` nothing is subtracted."""
        t = 2.0 ** -20
        r = _overhead_ops(50).report(wall_time=100 * t, overhead={})
        (h,) = [h for h in r.hints() if h.kind == "op_overhead"]
        assert h.saved_s == 50 * t and h.evidence["instrumentation_s"] == 0.0 and h.saved_bytes == 0
        assert h.evidence["overhead_per_call_s"] == t
        assert "op_overhead" not in [h.kind for h in _overhead_ops(49).report(wall_time=98 * t).hints()]
        # a gap just below half the wall time: no hint
        assert "op_overhead" not in [h.kind for h in _overhead_ops(50).report(wall_time=99 * t).hints()]

    def test_hints_without_ceilings_use_the_share_of_bytes(self):
        for fill, kept in ((204, True), (50, False)):  # 2% and 0.5% of the bytes
            g = Graph()
            g.call("aten.add.Tensor", "ewise", [(1, 5000)], [(2, 5000)])
            g.call("aten.zeros_like.default", "fill", [], [(3, fill)], phase=2)
            r = _no_ceilings(g)
            assert r.ceilings is None
            assert ([h.kind for h in r.hints()] == ["optimizer_state_init"]) is kept, fill

    def test_hints_without_a_time_come_most_bytes_first(self):
        """Ceilings without a DRAM bandwidth: the dropout hint's time is unknown (NaN), and so is the state fill's
        (its calls' roofline time is unknown: never summed as 0 s): both are ordered by bytes, most first."""
        from _graph import MASK, chain

        g = chain()
        g.call("aten.zeros_like.default", "fill", [], [(40, MASK // 2)], phase=2)
        from roofline._hardware._ceilings import Ceiling, Ceilings

        ceil = Ceilings(device="cpu", name="t", fingerprint="t", peaks={("vector", "float32"): Ceiling(1e12),
                                                                         ("matrix", "float32"): Ceiling(2e12)},
                        bandwidths={"L9": Ceiling(1e12)})
        hs = g.report(ceil=ceil).hints(min_share=0)
        assert [h.kind for h in hs] == ["dropout_mask", "optimizer_state_init"]
        assert all(h.saved_s != h.saved_s for h in hs) and hs[0].saved_bytes > hs[1].saved_bytes

    def test_advice_text_lists_five_hints(self):
        from roofline._analysis import _hints
        from roofline.render import _advice

        from _graph import six_hints

        g = six_hints()
        hs = g.report().hints()
        assert len(hs) >= 6, [h.kind for h in hs]
        text = _advice.advice_text(g.report())
        assert len([ln for ln in text.splitlines() if ln.startswith("  - [")]) == 5
        assert len([ln for ln in _advice.advice_text(g.report(), top=2).splitlines() if ln.startswith("  - [")]) == 2


    def test_hint_evidence_names_the_input_shapes(self):
        """With recorded call signatures, the small-GEMM hint lists the products' input shapes."""
        from roofline.report import Report

        g = Graph()
        for i in range(2):
            g.call("aten.mm.default", "mm", [(10 + i, 8 * 64 * 4), (1, 64 * 64 * 4)], [(20 + i, 8 * 64 * 4)],
                   matrix=2 * 8 * 64 * 64)
        r = g.report()
        r.records["sig"] = [1, 1]
        sig = "f32[8,64], f32[64,64]"
        r2 = Report(r.records, r._ops, r.module_sets, meta=r.meta, ceilings=r.ceilings, accesses=r.accesses,
                    signatures=["", sig])
        (h,) = [h for h in r2.hints() if h.kind == "small_gemm"]
        assert h.evidence["shapes"] == [sig]
        (h0,) = [h for h in r.hints() if h.kind == "small_gemm"]  # no signatures recorded: no shapes
        assert "shapes" not in h0.evidence


    def test_advice_text_and_html_of_the_mlp_chain(self):
        """The MLP chain of tests/_graph.py: one fusion opportunity of six calls whose five intermediates (one
        activation of 32 KiB each) are written and read back: 10 x 32768 = 327680 bytes, 3.3 us at 1e11 B/s; two
        hints (small GEMM, dropout mask)."""
        from _graph import ACT, chain

        from roofline._analysis import _hints
        from roofline.render import _advice

        r = chain().report()
        assert 10 * ACT == 327680
        lines = _advice.advice_text(r).splitlines()
        assert lines[0] == ("fusion opportunities: 1 chain could each run as one kernel, avoiding 327.68 KB and 3.28 us "
                            "at the roof")
        assert lines[1] == ("     1 x mm -> add -> gelu -> native_dropout -> add -> native_layer_norm (epilogue, "
                            "forward): saves 327.68 KB, 3.28 us; in mlp.fc, mlp, mlp.act, ...")
        assert lines[2] == "" and lines[3] == "hints (most time saved first):"
        assert [ln[:16] for ln in lines[4:]] == ["  - [small_gemm]", "  - [dropout_mas"]
        assert len(_advice.advice_text(r, top=1).splitlines()) == 5
        html = _advice.advice_html(r)
        assert ("<li><b>fuse</b> 1 &times; mm &rarr; add &rarr; gelu &rarr; native_dropout &rarr; add &rarr; "
                "native_layer_norm (forward): saves 327.68 KB, 3.28 us at the roof; in mlp.fc, mlp, ...</li>") in html
        assert html.count("<li>") == 3 and _advice.advice_html(r, top=1).count("<li>") == 2
        assert _advice._modules_list({"modules": ["a", "b"]}, 2) == "a, b"
        assert _advice._chain_names({"ops": ["aten.add.Tensor", "relu"]}) == ["add", "relu"]

    def test_advice_says_what_failed(self):
        """An access table that names a record the report does not have: the opportunity finder and the hints both
        fail; the advice says so instead of raising."""
        import numpy as np

        from roofline._analysis import _hints
        from roofline.render import _advice
        from roofline._analysis._dataflow import ACCESS_DTYPE
        from roofline.report import Report

        r = _state_init_report(204)
        bad = Report(r.records, r._ops, r.module_sets, meta=r.meta, ceilings=r.ceilings,
                     accesses=np.array([(0, 1, 10, 0), (7, 2, 10, 1)], dtype=ACCESS_DTYPE))
        text = _advice.advice_text(bad)
        assert text.splitlines()[0].startswith("fusion opportunities unavailable: ValueError: accesses refer to "
                                               "record 7")
        assert text.splitlines()[1].startswith("hints unavailable: ValueError: accesses refer to record 7")
        assert "hints unavailable" in _advice.advice_html(bad)
        empty = Report(r.records[:0], r._ops, r.module_sets, meta=r.meta, ceilings=r.ceilings)
        assert _advice.advice_text(empty) == "" and _advice.advice_html(empty) == ""


    def test_no_hints_for_an_empty_report(self):
        import numpy as np

        from roofline._analysis._dataflow import ACCESS_DTYPE
        from roofline.report import Report

        r = Graph().report()
        assert r.hints() == []
        assert Report(r.records, r._ops, r.module_sets, meta=r.meta, ceilings=r.ceilings,
                      accesses=np.zeros(0, ACCESS_DTYPE)).hints() == []

    def test_dropout_as_the_last_call_and_before_a_small_write(self):
        """The mask is the smaller of the dropout's own two outputs: not a write of the call after it."""
        g = Graph()
        g.call("aten.relu.default", "ewise", [(1, 4000)], [(2, 4000)], vector=1000)
        g.call("aten.native_dropout.default", "ewise", [(2, 4000)], [(3, 4000), (4, 1000)], vector=2000)
        (h,) = [h for h in g.report().hints(min_share=0) if h.kind == "dropout_mask"]
        assert (h.saved_bytes, h.evidence["mask_bytes"], h.records) == (1000, 1000, [1])
        g.call("aten.sum.default", "ewise", [(5, 400)], [(6, 4)], vector=100)  # writes 4 bytes after the dropout
        (h,) = [h for h in g.report().hints(min_share=0) if h.kind == "dropout_mask"]
        assert (h.saved_bytes, h.evidence["mask_bytes"]) == (1000, 1000)

    def test_sdpa_walks_at_most_four_calls_back_and_three_forward(self):
        """From the softmax back to the score product through at most 3 scale / mask calls (found at the 4th step),
        and forward to the second product through at most 2."""
        from _graph import BH, L, QKV, SCORES

        def attention(before, after):
            g = Graph()
            g.call("aten.bmm.default", "bmm", [(1, QKV), (2, QKV)], [(10, SCORES)], matrix=2 * BH * L * L * 32)
            st = 10
            for _ in range(before):
                g.call("aten.mul.Tensor", "ewise", [(st, SCORES)], [(st + 1, SCORES)], vector=BH * L * L)
                st += 1
            g.call("aten._softmax.default", "ewise_in", [(st, SCORES)], [(st + 1, SCORES)], vector=4 * BH * L * L)
            st += 1
            for _ in range(after):
                g.call("aten.mul.Tensor", "ewise", [(st, SCORES)], [(st + 1, SCORES)], vector=BH * L * L)
                st += 1
            g.call("aten.bmm.default", "bmm", [(st, SCORES), (3, QKV)], [(99, QKV)], matrix=2 * BH * L * L * 32)
            return "sdpa" in [h.kind for h in g.report().hints(min_share=0)]

        assert attention(3, 0) and not attention(4, 0)
        assert attention(0, 2) and not attention(0, 3)

    def test_hint_times_with_a_zero_bandwidth(self):
        """Ceilings whose DRAM bandwidth is 0: a saving in bytes has no time (NaN), not a ZeroDivisionError."""
        from _graph import chain

        hs = chain().report(ceil=ceilings(dram=0.0)).hints(min_share=0)
        assert [h.kind for h in hs] == ["dropout_mask"] and hs[0].saved_s != hs[0].saved_s

    def test_op_base_of_a_two_part_name(self):
        from roofline._analysis import _hints
        from roofline.render import _advice

        assert _hints._is("aten.relu", "relu") and not _hints._is("aten.relu", "aten")


    @staticmethod
    def _mm(g, flops, nbytes, dtype=F32, base=0):
        g.call("aten.mm.default", "mm", [(base + 1, nbytes // 3), (base + 2, nbytes // 3)], [(base + 3, nbytes // 3)],
               matrix=flops, dtype=dtype)

    def test_matmul_precision_evidence(self):
        """float32 products at 1e12 FLOP/s on a device with TF32 and bfloat16 units at 4e12 and DRAM at 1e11 B/s:
        a compute-bound one (8e9 FLOPs, 3 MB: 8 ms, 2 ms on either unit) and a memory-bound one (2e6 FLOPs, 3 MB:
        30 us; 15 us in bfloat16, whose operands are half the bytes). bfloat16 saves more. An element-wise float32
        call is no product."""
        c = ceilings(device="cuda", vector=2e13, matrix=1e12, dram=1e11,
                     extra_peaks={("matrix", "tfloat32"): 4e12, ("matrix", "bfloat16"): 4e12})
        g = Graph()
        self._mm(g, 8 * 10 ** 9, 3 * 10 ** 6)
        self._mm(g, 2 * 10 ** 6, 3 * 10 ** 6, base=10)
        g.call("aten.add.Tensor", "ewise", [(20, 400)], [(21, 400)], vector=100)
        (h,) = [h for h in g.report(ceil=c).hints(min_share=0) if h.kind == "matmul_precision"]
        assert h.records == [0, 1]
        ev = h.evidence
        assert (ev["calls"], ev["compute_bound_calls"], ev["flops"]) == (2, 1, 8e9 + 2e6)
        assert (ev["float32_matrix_peak"], ev["bfloat16_matrix_peak"]) == (1e12, 4e12) and "tfloat32_matrix_peak" not in ev
        assert ev["t_before_s"] == pytest.approx(8e-3 + 3e-5, rel=1e-12)
        assert ev["t_after_s"] == pytest.approx(2e-3 + 1.5e-5, rel=1e-9)
        assert h.saved_s == pytest.approx(6e-3 + 1.5e-5, rel=1e-9) and h.saved_bytes == 3 * 10 ** 6  # half of 6 MB
        assert "torch.autocast(dtype=torch.bfloat16)" in h.message
        # the compute-bound product alone: both units save 6 ms; the first listed (TF32) is kept
        g = Graph()
        self._mm(g, 8 * 10 ** 9, 3 * 10 ** 6)
        (h,) = [h for h in g.report(ceil=c).hints(min_share=0) if h.kind == "matmul_precision"]
        assert "tfloat32_matrix_peak" in h.evidence and "TF32" in h.message and h.saved_bytes == 0

    def test_matmul_precision_needs_a_unit_over_five_percent_faster(self):
        from roofline._hardware._ceilings import Ceiling

        g = Graph()
        self._mm(g, 8 * 10 ** 9, 3 * 10 ** 6)

        def kinds(peak, measured=True):
            ceil = ceilings(device="cuda", matrix=1e12, dram=1e11)
            ceil.peaks[("matrix", "tfloat32")] = Ceiling(peak) if measured else Ceiling(None, peak)
            return [h.kind for h in g.report(ceil=ceil).hints(min_share=0)]

        assert "matmul_precision" not in kinds(1.05e12)  # exactly 5% faster: not enough
        assert "matmul_precision" not in kinds(1.02e12)
        assert "matmul_precision" in kinds(1.06e12)
        assert "matmul_precision" in kinds(4e12, measured=False)  # a datasheet figure counts (source "best")

    def test_a_product_of_one_flop_is_a_product(self):
        c = ceilings(device="cuda", matrix=1e12, dram=1e11, extra_peaks={("matrix", "tfloat32"): 4e12})
        g = Graph()
        g.call("aten.mm.default", "mm", [(1, 400), (2, 400)], [(3, 400)], matrix=1)
        hs = {h.kind: h for h in g.report(ceil=c).hints(min_share=0)}
        assert hs["matmul_precision"].evidence["calls"] == 1
        assert hs["small_gemm"].records == [0] and hs["small_gemm"].saved_bytes == 0

    def test_small_gemm_shapes_from_the_first_fifty_products(self):
        """51 memory-bound products: 49 of shape A, then B, then C; the shapes are read from the first 50 calls.
        Six distinct shapes: the first five are listed."""
        from roofline.report import Report

        def report(sig_of_call, sigs):
            g = Graph()
            for i in range(len(sig_of_call)):
                g.call("aten.mm.default", "mm", [(100 + i, 8 * 64 * 4), (1, 64 * 64 * 4)], [(300 + i, 8 * 64 * 4)],
                       matrix=2 * 8 * 64 * 64)
            r = g.report()
            r.records["sig"] = sig_of_call
            return Report(r.records, r._ops, r.module_sets, meta=r.meta, ceilings=r.ceilings, accesses=r.accesses,
                          signatures=sigs)

        (h,) = [h for h in report([1] * 49 + [2, 3], ["", "A", "B", "C"]).hints() if h.kind == "small_gemm"]
        assert h.evidence["shapes"] == ["A", "B"] and h.evidence["calls"] == 51
        (h,) = [h for h in report([1, 2, 3, 4, 5, 6], ["", "A", "B", "C", "D", "E", "F"]).hints()
                if h.kind == "small_gemm"]
        assert h.evidence["shapes"] == ["A", "B", "C", "D", "E"]

    def test_layout_share_threshold_and_time_without_ceilings(self):
        """Layout copies moving exactly 10% of the bytes are reported; without ceilings their time is unknown."""
        g = Graph()
        g.call("aten.add.Tensor", "ewise", [(1, 900)], [(2, 900)], vector=10)
        g.call("aten.clone.default", "copy", [(2, 100)], [(3, 100)])  # 200 of 2000 bytes
        (h,) = [h for h in g.report().hints(min_share=0) if h.kind == "layout_copies"]
        assert h.evidence["share_of_bytes"] == 0.1 and h.saved_bytes == 200
        (h,) = [h for h in _no_ceilings(g).hints(min_share=0) if h.kind == "layout_copies"]
        assert h.saved_s != h.saved_s and h.evidence["t_roof_s"] != h.evidence["t_roof_s"]
        g = Graph()
        g.call("aten.add.Tensor", "ewise", [(1, 950)], [(2, 950)], vector=10)
        g.call("aten.clone.default", "copy", [(2, 50)], [(3, 50)])  # 100 of 2000 bytes: 5%
        assert "layout_copies" not in [h.kind for h in g.report().hints(min_share=0)]

    def test_casts_that_do_not_come_back(self):
        """A float32 -> bfloat16 cast whose result is cast again without coming back to its size, and two float32
        copies (a device move and back: no dtype change): no ping-pong."""
        n = 1 << 10
        g = Graph()
        g.call("aten._to_copy.default", "copy", [(1, 4 * n)], [(2, 2 * n)], dtype=F32)
        g.call("aten._to_copy.default", "copy", [(2, 2 * n)], [(3, 2 * n)], dtype=BF16)
        g.call("aten._to_copy.default", "copy", [(10, 4 * n)], [(11, 4 * n)], dtype=F32)
        g.call("aten._to_copy.default", "copy", [(11, 4 * n)], [(12, 4 * n)], dtype=F32)
        assert "cast_pingpong" not in [h.kind for h in g.report().hints(min_share=0)]

    @staticmethod
    def _opt_step(a, t):
        """Two optimizer-phase calls: the first reads and writes S (a bytes), the second reads S and reads and
        writes T (t bytes). b = 3a + 2t moved; fused, S and T are read and written once (2a + 2t): a saved."""
        g = Graph()
        g.call("aten.mul_.Tensor", "ewise", [(5, a)], [(5, a)], vector=a // 4, phase=2)
        g.call("aten.addcmul_.default", "ewise", [(5, a), (6, t)], [(6, t)], vector=t // 4, phase=2)
        return [h for h in g.report().hints(min_share=0) if h.kind == "optimizer_fused"]

    def test_optimizer_fused_threshold(self):
        assert self._opt_step(1000, 1000) == []             # 1000 of 5000: exactly 20%, not more
        (h,) = self._opt_step(1000, 600)                    # 1000 of 4200: 24%
        assert (h.saved_bytes, h.evidence["bytes"], h.evidence["fused_bytes"]) == (1000, 4200, 3200)
        assert self._opt_step(1000, 1500) == []             # 1000 of 6000: 17%

    def test_optimizer_temporaries_stay_in_registers(self):
        """A temporary (storage 1, first written in the step by a call that is no fill) is neither read nor written
        by a fused step: of 5a moved, 2a remain (S read and written)."""
        g = Graph()
        g.call("aten.mul.Tensor", "ewise", [(5, 1000)], [(1, 1000)], vector=250, phase=2)
        g.call("aten.add_.Tensor", "ewise", [(1, 1000), (5, 1000)], [(5, 1000)], vector=250, phase=2)
        (h,) = [h for h in g.report().hints(min_share=0) if h.kind == "optimizer_fused"]
        assert (h.evidence["bytes"], h.evidence["fused_bytes"], h.saved_bytes) == (5000, 2000, 3000)

    def test_state_init_needs_more_than_eight_bytes(self):
        for nbytes, found in ((8, False), (9, True)):
            g = Graph()
            g.call("aten.add.Tensor", "ewise", [(1, 100)], [(2, 100)], vector=25)
            g.call("aten.zeros_like.default", "fill", [], [(3, nbytes)], phase=2)
            assert ("optimizer_state_init" in [h.kind for h in g.report().hints(min_share=0)]) is found, nbytes

    def test_dropout_without_a_mask_output(self):
        """A native_dropout call that writes one tensor (no mask materialised): nothing to say."""
        g = Graph()
        g.call("aten.native_dropout.default", "ewise", [(1, 4000)], [(2, 4000)], vector=1000)
        g.call("aten.relu.default", "ewise", [(2, 4000)], [(3, 4000)], vector=1000)
        assert "dropout_mask" not in [h.kind for h in g.report().hints(min_share=0)]

    def test_overhead_instrumentation_and_the_median_op(self):
        """Both instrumentation estimates are subtracted from the wall time, once per call. The ops' median
        roofline time must be below 10 us and below the time between ops per call (equal is not below)."""
        t = 2.0 ** -20
        r = _overhead_ops(50).report(wall_time=300 * t, overhead={"counting_per_op_s": t, "timing_per_op_s": t})
        (h,) = [h for h in r.hints() if h.kind == "op_overhead"]
        assert h.evidence["instrumentation_s"] == 100 * t and h.evidence["wall_s"] == 200 * t

        def overhead(nbytes, bw, wall):
            g = Graph()
            for i in range(50):
                g.call("aten.add.Tensor", "ewise", [(i, nbytes // 2)], [(i + 10000, nbytes // 2)], vector=1, t=t)
            r = g.report(ceil=ceilings(dram=bw), wall_time=wall, overhead={})
            return [h.evidence["median_t_min_s"] for h in r.hints(min_share=0) if h.kind == "op_overhead"]

        # roofline time per op 2**17 B / 2**37 B/s = 2**-20 s = t; 50 ops of t in 100 t: t per op outside them
        assert overhead(2 ** 17, 2.0 ** 37, 100 * t) == []
        assert overhead(2 ** 16, 2.0 ** 37, 100 * t) == [t / 2]
        # 1e6 bytes at 1e11 B/s: a median of exactly 10 us (with the gap far larger): not below the limit
        assert overhead(10 ** 6, 1e11, 0.01) == []
        assert overhead(10 ** 6 - 2, 1e11, 0.01) != []

    def test_min_share_checks_and_the_bytes_rule(self):
        from roofline._hardware._ceilings import Ceiling, Ceilings

        r = _state_init_report(204)
        for bad in (True, "1%", None):
            with pytest.raises(TypeError, match="min_share must be a number in \\[0, 1\\]"):
                r.hints(min_share=bad)
        # without a DRAM bandwidth every roofline time is unknown (the run's total is 0 s): the share of the bytes
        # decides, here 50 of 10050 bytes (0.5%): left out; exactly 1% (100 of 10000): kept
        ceil = Ceilings(device="cpu", name="t", fingerprint="t", peaks={("vector", "float32"): Ceiling(1e12)},
                        bandwidths={"L9": Ceiling(1e12)})
        for fill, other, kept in ((50, 10_000, False), (100, 9_900, True)):
            g = Graph()
            g.call("aten.add.Tensor", "ewise", [(1, other // 2)], [(2, other - other // 2)])
            g.call("aten.zeros_like.default", "fill", [], [(3, fill)], phase=2)
            assert ([h.kind for h in g.report(ceil=ceil).hints()] == ["optimizer_state_init"]) is kept, fill
        for fill, kept in ((50, False), (100, True)):  # without ceilings, the same rule
            g = Graph()
            g.call("aten.add.Tensor", "ewise", [(1, (10_000 - fill) // 2)], [(2, (10_000 - fill) // 2)])
            g.call("aten.zeros_like.default", "fill", [], [(3, fill)], phase=2)
            assert ([h.kind for h in _no_ceilings(g).hints()] == ["optimizer_state_init"]) is kept, fill

    def test_sdpa_evidence(self):
        """The evidence names the score product, its inputs and the scores it writes, and the softmax (here writing
        bfloat16: half the bytes)."""
        import numpy as np

        from _graph import BH, L, QKV, SCORES

        from roofline.report import Report

        g = Graph()
        g.call("aten.bmm.default", "bmm", [(1, QKV), (2, QKV)], [(10, SCORES)], matrix=2 * BH * L * L * 32)
        g.call("aten._softmax.default", "ewise_in", [(10, SCORES)], [(11, SCORES // 2)], vector=4 * BH * L * L)
        g.call("aten.bmm.default", "bmm", [(11, SCORES // 2), (3, QKV)], [(12, QKV)], matrix=2 * BH * L * L * 32)
        r = g.report()
        r.records["sig"] = [1, 2, 3]
        sigs = ["", "f32[8,128,32], f32[8,32,128]", "f32[8,128,128]", "bf16[8,128,128], f32[8,128,32]"]
        r = Report(r.records, r._ops, r.module_sets, meta=r.meta, ceilings=r.ceilings, accesses=r.accesses,
                   signatures=sigs)
        (h,) = [h for h in r.hints() if h.kind == "sdpa"]
        ev = h.evidence
        assert (ev["instances"], ev["score_bytes"], ev["first_product"], ev["softmax"]) == \
            (1, SCORES, "aten.bmm.default", "aten._softmax.default")
        assert ev["score_product_inputs"] == sigs[1]
        assert ev["saved_bytes"] == SCORES + SCORES // 2 + SCORES + SCORES // 2 == h.saved_bytes
        assert np.isfinite(ev["t_after_s"]) and ev["t_before_s"] > ev["t_after_s"]

    def test_sdpa_passes_a_backward_call_before_the_softmax(self):
        """Back from the softmax to the score product, calls of any phase are passed (forward only after it)."""
        from _graph import BH, L, QKV, SCORES

        g = Graph()
        g.call("aten.bmm.default", "bmm", [(1, QKV), (2, QKV)], [(10, SCORES)], matrix=2 * BH * L * L * 32)
        g.call("aten.mul.Tensor", "ewise", [(10, SCORES)], [(11, SCORES)], vector=BH * L * L, phase=1)
        g.call("aten._softmax.default", "ewise_in", [(11, SCORES)], [(12, SCORES)], vector=4 * BH * L * L)
        g.call("aten.bmm.default", "bmm", [(12, SCORES), (3, QKV)], [(13, QKV)], matrix=2 * BH * L * L * 32)
        assert "sdpa" in [h.kind for h in g.report().hints()]

    def test_sdpa_time_after_with_a_peak_of_zero_or_one(self):
        """The fused kernel's time is its products' FLOPs at the matrix peak: unknown (NaN) with a peak of 0, the
        FLOPs themselves in seconds at 1 FLOP/s."""
        from _graph import BH, L, attention

        nan = [h for h in attention().report(ceil=ceilings(matrix=0.0)).hints(min_share=0) if h.kind == "sdpa"]
        assert len(nan) == 1 and nan[0].evidence["t_after_s"] != nan[0].evidence["t_after_s"]
        (h,) = [h for h in attention().report(ceil=ceilings(matrix=1.0)).hints(min_share=0) if h.kind == "sdpa"]
        assert h.evidence["t_after_s"] == 2 * (2 * BH * L * L * 32) / 1.0


class TestAssumptions:
    """A projection's assumptions (roofline/_analysis/_assumptions.py)."""

    def test_matrix_dtype_shares_largest_first(self):
        from roofline._analysis import _assumptions

        r = _assumptions_report(MIXED, MIXED_OPS)
        shares = _assumptions.matrix_dtypes(r)
        assert shares == {"float32": 3000 / 8000, "bfloat16": 2000 / 8000, "int8": 2000 / 8000,
                          "float16": 500 / 8000, "uint8": 500 / 8000}
        assert list(shares)[0] == "float32" and list(shares)[-1] in ("float16", "uint8")
        assert list(shares.values()) == sorted(shares.values(), reverse=True)
        # element-wise work only: no products, no shares
        assert _assumptions.matrix_dtypes(_assumptions_report([(1, "float32", 0, 10)], MIXED_OPS)) == {}
        assert _assumptions.matrix_dtypes(_assumptions_report([(0, "bfloat16", 8, 0)], MIXED_OPS)) == {"bfloat16": 1.0}

    def test_no_peak_lists_each_op_and_dtype_with_its_verdict(self):
        from roofline._analysis import _assumptions

        r = _assumptions_report(MIXED, MIXED_OPS)
        rich = _assumptions.no_peak(r, _assumptions_roofs(*RICH))
        assert rich == {
            "aten.mm.default (float16)": "1 call: judged against the matrix/float32 peak",
            "aten.add.Tensor (float64)": "2 calls: no peak: left out of the projected time",
            "aten.mul.Tensor (int32)": "1 call: judged against the vector/float32 peak",
        }
        # the same FLOPs over the total: the float16 product (500), the float64 adds (100), the int32 mul (100)
        assert _assumptions.no_peak_share(r, rich) == (500 + 40 + 60 + 100) / MIXED_TOTAL
        poor = _assumptions.no_peak(r, _assumptions_roofs(*POOR))
        assert poor == {
            "aten.mm.default (float16)": "1 call: judged against the matrix/float32 peak",
            "aten.mm.default (bfloat16)": "2 calls: judged against the matrix/float32 peak",
            "aten.add.Tensor (float64)": "2 calls: no peak: left out of the projected time",
            "aten._int_mm.default (int8)": "1 call: judged against the matrix/float32 peak",
            "aten._int_mm.default (uint8)": "1 call: judged against the matrix/float32 peak",
            "aten.mul.Tensor (int32)": "1 call: no peak: left out of the projected time",
        }
        assert _assumptions.no_peak_share(r, poor) == (500 + 2000 + 100 + 2000 + 500 + 100) / MIXED_TOTAL
        assert _assumptions.no_peak_share(r, {}) == 0.0
        empty = _assumptions_report([(3, "float64", 0, 0)], MIXED_OPS)  # no FLOPs at all
        assert _assumptions.no_peak(empty, _assumptions_roofs(*POOR)) == {}
        assert _assumptions.no_peak_share(empty, {"aten.view.default (float64)": "1 call"}) == 0.0

    def test_vector_fallback_per_low_precision_dtype(self):
        from roofline._analysis import _assumptions

        r = _assumptions_report(MIXED, MIXED_OPS)
        assert _assumptions.vector_fallback(r, _assumptions_roofs(*RICH)) == {
            "float16": "judged against the vector/float32 peak (a lower bound on the rate)"}
        assert _assumptions.vector_fallback(r, _assumptions_roofs(*POOR)) == {
            "bfloat16": "no peak: left out of the projected time", "float16": "no peak: left out of the projected time"}
        # a product in float16 is not element-wise work
        only_mm = _assumptions_report([(0, "float16", 10, 0), (0, "float16", 10, 5)], MIXED_OPS)
        assert _assumptions.vector_fallback(only_mm, _assumptions_roofs(*POOR)) == {}
        no_flops = _assumptions_report([(3, "float16", 0, 0)], MIXED_OPS)  # a view: no work, no peak needed
        assert _assumptions.vector_fallback(no_flops, _assumptions_roofs(*POOR)) == {}

    @pytest.mark.parametrize("names,expected", [
        (["aten._scaled_dot_product_flash_attention_for_cpu.default"], "flash (CPU fused kernel) (as run)"),
        (["aten._scaled_dot_product_flash_attention.default", "aten._efficient_attention_forward.default",
          "aten._flash_attention_forward.default"], "efficient, flash (as run)"),
        (["aten.bmm.default", "aten._softmax.default"], "math (bmm + softmax: the full score matrix)"),
        (["aten.bmm.default", "aten.add.Tensor"], "none"),
        (["aten.mm.default", "aten._softmax.default"], "none"),
        (["aten.baddbmm.default", "aten._log_softmax.default"], "none"),  # a bmm of another name
        ([], "none"),
    ])
    def test_attention_kernel_from_the_op_names(self, names, expected):
        from roofline._analysis import _assumptions

        r = _assumptions_report([], names)
        assert _assumptions.attention(r) == expected

    def test_attention_kernel_chosen_at_count_time(self):
        from roofline._analysis import _assumptions

        chosen = {"backend": "flash", "calls": {"flash": 3}}
        r = _assumptions_report([], ["aten.bmm.default", "aten._softmax.default"], meta={"attention": chosen})
        assert _assumptions.attention(r) == "flash (chosen at count time; 3 scaled_dot_product_attention calls redirected)"
        # no backend named: the op names decide
        r = _assumptions_report([], ["aten.bmm.default", "aten._softmax.default"], meta={"attention": {"calls": {}}})
        assert _assumptions.attention(r).startswith("math")
        r = _assumptions_report([], ["aten.bmm.default", "aten._softmax.default"], meta={"attention": "flash"})
        assert _assumptions.attention(r).startswith("math")

    def test_assumption_lines_of_a_projection(self):
        from roofline._analysis import _assumptions
        from roofline.render import _assumptions as _assumed

        r = _assumptions_report(MIXED, MIXED_OPS)
        a = _assumptions.describe(r, _assumptions_roofs(*RICH))
        assert set(a) == {"attention", "matrix_dtypes", "no_peak", "no_peak_flop_share", "vector_fallback"}
        lines = _assumed.line(a, "T")
        assert lines[0] == ("  assumed: attention none; matrix FLOPs in float32 38%, bfloat16 25%, int8 25%, float16 6%, "
                            "uint8 6%")
        assert lines[1] == ("  no peak of their dtype on T: aten.mm.default (float16) 1 call: judged against the "
                            "matrix/float32 peak; aten.add.Tensor (float64) 2 calls: no peak: left out of the projected "
                            "time; aten.mul.Tensor (int32) 1 call: judged against the vector/float32 peak")
        assert lines[2] == "  element-wise work in float16 judged against the vector/float32 peak (a lower bound on the rate)"
        assert len(lines) == 3
        assert _assumed.line({}, "T") == ["  assumed: attention ?; matrix FLOPs in none"]

    def test_assumptions_count_a_single_flop(self):
        """A record with one FLOP has FLOPs: the tests of "> 0" are not "> 1"."""
        from roofline._analysis import _assumptions

        r = _assumptions_report([(0, "float16", 1, 0), (1, "float64", 0, 1)], MIXED_OPS)
        assert _assumptions.matrix_dtypes(r) == {"float16": 1.0}
        assert _assumptions.no_peak(r, _assumptions_roofs(*RICH)) == {
            "aten.mm.default (float16)": "1 call: judged against the matrix/float32 peak",
            "aten.add.Tensor (float64)": "1 call: no peak: left out of the projected time"}
        assert _assumptions.no_peak_share(r, {"aten.add.Tensor (float64)": "1 call"}) == 0.5
        v = _assumptions_report([(1, "float16", 0, 1)], MIXED_OPS)
        assert _assumptions.vector_fallback(v, _assumptions_roofs(*POOR)) == {
            "float16": "no peak: left out of the projected time"}


class TestFusionCompiled:
    """Which fusions the compiler took (roofline/_analysis/_fusion_compiled.py)."""

    @pytest.mark.parametrize("op,short", [("aten.add_.Tensor", "add"), ("aten.add.Tensor", "add"), ("aten.relu", "relu"),
                                          ("aten.__iand__.Tensor", "__iand__"), ("relu_", "relu"), ("gelu", "gelu")])
    def test_short_op_names(self, op, short):
        from roofline._util import _format

        assert _format.op_base(op) == short

    @pytest.mark.parametrize("kernel,names", [
        ({"name": "extern_kernels.addmm", "extern": True, "ops": ["aten.addmm.default"]}, {"addmm"}),
        ({"name": "extern_kernels.bmm", "extern": True}, {"bmm"}),
        ({"name": "aten.add_", "extern": True, "ops": ["aten.mul.Tensor"]}, {"add", "mul"}),
        ({"name": "extern_kernels.mm[0]", "extern": True, "ops": []}, {"mm"}),
        ({"name": "!x", "extern": True, "ops": ["aten.mm.default"]}, {"mm"}),  # a name the pattern does not read
        ({"name": "cpp_fused_add_native_layer_norm_1", "ops": ["aten.add.Tensor", "aten.mul.Tensor"]},
         {"_add_native_layer_norm_"}),
        # nine underscores inside the fused part: the name may have been shortened, the ops count too
        ({"name": "cpp_fused_a_b_c_d_e_f_g_h_i_j_0", "ops": ["aten.mul.Tensor"]}, {"_a_b_c_d_e_f_g_h_i_j_", "mul"}),
        ({"name": "cpp_fused_a_b_c_d_e_f_g_h_i_0", "ops": ["aten.mul.Tensor"]}, {"_a_b_c_d_e_f_g_h_i_"}),
        ({"name": "kernel0", "ops": ["aten.relu.default", "aten.add_.Tensor"]}, {"relu", "add"}),
        ({}, set()),
    ])
    def test_kernel_names(self, kernel, names):
        from roofline._analysis import _fusion_compiled

        assert _fusion_compiled._kernel_names(kernel) == names

    def test_names_op_and_under(self):
        from roofline._analysis import _fusion_compiled as fc

        assert fc._names_op({"relu"}, "relu") and not fc._names_op({"relu"}, "elu")
        assert fc._names_op({"_add_native_layer_norm_"}, "native_layer_norm")
        assert fc._names_op({"_add_native_layer_norm_"}, "add") and not fc._names_op({"_add_native_layer_norm_"}, "mul")
        assert not fc._names_op({"_add_mul_"}, "relu") and not fc._names_op({"add_mul"}, "mul")
        assert fc._under("Net.a", "Global", "Net") and fc._under("Net.a", "Net", "Net")
        assert fc._under("x.y", "x.y", "q") and fc._under("x.y.z", "x.y", "q")
        assert not fc._under("x.yz", "x.y", "q") and not fc._under("x", "x.y", "q")

    def test_mark_taken_partly_not_taken_unknown(self):
        one = K("cpp_fused_add_gelu_mul_0")
        o = _marked([one])  # the only kernel naming add, gelu and mul: every member's
        assert (o.compiled, o.compiled_saved_bytes) == ("taken", 1000 + 2000)
        # three kernels naming add for the two eager adds: ambiguous
        o = _marked([one, K("cpp_fused_add_1"), K("cpp_fused_add_2")])
        assert (o.compiled, o.compiled_saved_bytes) == ("unknown", None)
        assert o.compiled_kernels == [None, one["name"], one["name"]]
        o = _marked([one], records=(1, 2), edges=((1, 2, 2000),))
        assert (o.compiled, o.compiled_saved_bytes, o.compiled_kernels) == ("taken", 2000, [one["name"]] * 2)
        # the two adds, each with a kernel of its own, matched in order
        o = _marked([K("cpp_fused_add_gelu_mul_0"), K("cpp_fused_add_1")])
        assert (o.compiled, o.compiled_saved_bytes) == ("taken", 1000 + 2000)
        assert o.compiled_kernels == ["cpp_fused_add_gelu_mul_0"] * 3
        o = _marked([K("cpp_fused_add_gelu_0"), K("cpp_fused_mul_1"), K("cpp_fused_add_2")])
        assert (o.compiled, o.compiled_saved_bytes) == ("partly", 1000)
        assert o.compiled_kernels == ["cpp_fused_add_gelu_0", "cpp_fused_add_gelu_0", "cpp_fused_mul_1"]
        o = _marked([K("cpp_fused_add_0"), K("cpp_fused_gelu_1"), K("cpp_fused_mul_2"), K("cpp_fused_add_3")])
        assert (o.compiled, o.compiled_saved_bytes) == ("not taken", 0)

    def test_mark_needs_the_kernel_phase_and_module(self):
        o = _marked([K("cpp_fused_gelu_mul_0", phase="backward")], records=(1, 2), edges=((1, 2, 2000),))
        assert o.compiled == "unknown" and o.compiled_kernels == [None, None]
        o = _marked([K("cpp_fused_gelu_mul_0", module="other")], records=(1, 2), edges=((1, 2, 2000),))
        assert o.compiled == "unknown"
        for module in ("Global", "blk"):  # the model's top level, the call's own module
            o = _marked([K("cpp_fused_gelu_mul_0", module=module)], records=(1, 2), edges=((1, 2, 2000),))
            assert o.compiled == "taken", module

    def test_mark_a_call_of_an_unknown_phase(self):
        """A record whose phase code is none of forward, backward, optimizer matches no kernel: unknown."""
        import types

        from roofline._analysis import _fusion_compiled

        g = Graph()
        g.call("aten.add.Tensor", "ewise", [(1, 100)], [(2, 100)], vector=25, module="blk", phase=3)
        g.call("aten.mul.Tensor", "ewise", [(2, 100)], [(3, 100)], vector=25, module="blk", phase=3)
        opp = types.SimpleNamespace(records=[0, 1], edges=[(0, 1, 100)])
        comp = types.SimpleNamespace(meta={"compiled": {"kernels": [K("cpp_fused_add_mul_0")]}}, records=None)
        _fusion_compiled.mark([opp], g.report(), comp)
        assert (opp.compiled, opp.compiled_kernels) == ("unknown", [None, None])

    def test_mark_refuses_a_report_without_kernels(self):
        import types

        from roofline._analysis import _fusion_compiled

        with pytest.raises(TypeError, match="compiled must be a roofline Report, got int"):
            _fusion_compiled.mark([], _eager_chain(), 3)
        with pytest.raises(TypeError, match="compiled must be a roofline Report, got SimpleNamespace"):
            _fusion_compiled.mark([], _eager_chain(), types.SimpleNamespace(meta={"compiled": {"kernels": [K("k_0")]}}))
        with pytest.raises(TypeError, match="compiled must be a roofline Report, got SimpleNamespace"):
            _fusion_compiled.mark([], _eager_chain(), types.SimpleNamespace(records=None))
        with pytest.raises(ValueError, match="no compiled kernels"):
            _fusion_compiled.mark([], _eager_chain(), types.SimpleNamespace(meta={}, records=None))
        with pytest.raises(ValueError, match="no compiled kernels"):
            _fusion_compiled.mark([], _eager_chain(), types.SimpleNamespace(meta={"compiled": {"kernels": []}},
                                                                             records=None))


class TestCacheModel:
    """The cache model (roofline/_analysis/_cache_model.py)."""

    def test_sysfs_caches_reads_data_and_unified_levels(self, tmp_path):
        from roofline._analysis import _cache_model

        root = _sysfs(tmp_path, 0, {
            "index0": {"level": "1", "type": "Data", "size": "32K", "shared_cpu_list": "0-1"},
            "index1": {"level": "1", "type": "Instruction", "size": "32K", "shared_cpu_list": "0-1"},
            "index2": {"level": "2", "type": "Unified", "size": "1024K", "shared_cpu_list": "0,1"},
            "index3": {"level": "3", "type": "Unified", "size": "8M", "shared_cpu_list": "0-3,8-11"},
            "index4": {"level": "4", "type": "Unified", "size": "0K"},            # no size: left out
            "index5": {"level": "5", "type": "Unified", "size": "2M"},            # no shared_cpu_list: one CPU
            "index6": {"level": "6", "type": "Unified", "size": "1"},             # one byte is a size
            "index7": {"level": "7", "type": "Unified", "size": "lots"},          # unreadable: left out
            "index8": {"level": "8", "type": "Unified"},                          # no size file: left out
            "power": {"level": "9", "type": "Unified", "size": "4K"},             # not an index directory
        })
        expected = {"L1": {"bytes": 32 << 10, "shared_cpus": 2}, "L2": {"bytes": 1 << 20, "shared_cpus": 2},
                    "L3": {"bytes": 8 << 20, "shared_cpus": 8}, "L5": {"bytes": 2 << 20, "shared_cpus": 1},
                    "L6": {"bytes": 1, "shared_cpus": 1}}
        assert _cache_model.sysfs_caches(root=root) == expected  # CPU 0 by default
        assert _cache_model.sysfs_caches(0, root) == expected
        assert _cache_model.sysfs_caches(1, root) == {}  # no such CPU
        assert _cache_model.sysfs_caches(0, str(tmp_path / "nowhere")) == {}

    @pytest.mark.parametrize("text,n", [("32K", 32 << 10), ("64k", 64 << 10), ("3M", 3 << 20), ("2G", 2 << 30),
                                        (" 512 ", 512), ("1", 1)])
    def test_parse_size(self, text, n):
        from roofline._analysis import _cache_model

        assert _cache_model._parse_size(text) == n

    @pytest.mark.parametrize("text,n", [("0-3,8-11", 8), ("5", 1), ("0,2,4", 3), ("0-1,", 2), ("", 1), ("2-2", 1)])
    def test_count_cpus(self, text, n):
        from roofline._analysis import _cache_model

        assert _cache_model._count_cpus(text) == n

    def test_hierarchy_gpu_l2(self):
        from roofline._analysis import _cache_model

        assert _cache_model.hierarchy(None) == []
        c = _FakeRoofs("cuda:0", {"l2_cache_bytes": 50 << 20}, {"L2": 7e12, "DRAM": 3e12})
        assert _cache_model.hierarchy(c) == [("L2", float(50 << 20), 7e12), ("DRAM", INF, 3e12)]
        c = _FakeRoofs("cuda", {"l2_bytes": 40 << 20}, {"DRAM": 2e12})  # no L2 bandwidth: DRAM's
        assert _cache_model.hierarchy(c) == [("L2", float(40 << 20), 2e12), ("DRAM", INF, 2e12)]
        assert _cache_model.hierarchy(_FakeRoofs("cuda", {}, {"DRAM": 2e12})) == [("DRAM", INF, 2e12)]

    def test_hierarchy_cpu_capacities_order_and_bandwidths(self):
        import math

        from roofline._analysis import _cache_model

        # measured capacities, one of them 0 (unknown); L10 sorts after L2 (by number, not by text)
        c = _FakeRoofs("cpu", {"cache_capacity_bytes": {"L10": 64 << 20, "L2": 2 << 20, "L1": 64 << 10, "L3": 0}},
                          {"L2": 5e11, "DRAM": 1e11})
        assert _cache_model.hierarchy(c) == [("L1", float(64 << 10), 5e11), ("L2", float(2 << 20), 5e11),
                                             ("L10", float(64 << 20), 1e11), ("DRAM", INF, 1e11)]
        # the probe's per-instance sizes: bytes x instances; entries that are not caches are left out
        c = _FakeRoofs("cpu", {"caches": {"L1": {"bytes": 32 << 10, "instances": 4}, "L2": {"bytes": 1 << 20},
                                             "L3": "8M", "L4": {"bytes": 0}}}, {"L1": 1e12, "DRAM": 1e11})
        assert _cache_model.hierarchy(c) == [("L1", float(128 << 10), 1e12), ("L2", float(1 << 20), 1e11),
                                             ("DRAM", INF, 1e11)]
        # a level no larger than an inner one is left out (here L3 below L2); no DRAM bandwidth: NaN all the way
        c = _FakeRoofs("cpu", {"cache_capacity_bytes": {"L1": 1 << 16, "L2": 4 << 20, "L3": 2 << 20}}, {})
        h = _cache_model.hierarchy(c)
        assert [(lv, cap) for lv, cap, _ in h] == [("L1", float(1 << 16)), ("L2", float(4 << 20)), ("DRAM", INF)]
        assert all(math.isnan(bw) for _, _, bw in h)
        c = _FakeRoofs("cpu", {"cache_capacity_bytes": {"L1": 1 << 16, "L2": 1 << 16}}, {"DRAM": 1.0})
        assert [lv for lv, _, _ in _cache_model.hierarchy(c)] == ["L1", "DRAM"]  # equal: no larger

    def test_hierarchy_fills_missing_bandwidths_from_the_next_outer_level(self):
        import math

        from roofline._analysis import _cache_model

        caps = {"L1": 1 << 15, "L2": 1 << 20, "L3": 1 << 25}
        c = _FakeRoofs("cpu", {"cache_capacity_bytes": caps}, {"L3": 4e11, "DRAM": 1e11})
        assert [bw for _, _, bw in _cache_model.hierarchy(c)] == [4e11, 4e11, 4e11, 1e11]
        # an inner level's bandwidth is never handed outwards: DRAM without one stays NaN
        c = _FakeRoofs("cpu", {"cache_capacity_bytes": {"L1": 1 << 15}}, {"L1": 5e11})
        (l1, dram) = _cache_model.hierarchy(c)
        assert l1[2] == 5e11 and math.isnan(dram[2])
        # the probe's instance count: 0 or missing counts as one instance
        c = _FakeRoofs("cpu", {"caches": {"L1": {"bytes": 1000, "instances": 0}, "L2": {"bytes": 5000}}},
                          {"DRAM": 1e11})
        assert [cap for _, cap, _ in _cache_model.hierarchy(c)][:-1] == [1000.0, 5000.0]

    def test_replay_of_few_accesses(self):
        """One read of a storage never touched before comes from DRAM; a re-read within capacity from the cache; no
        cache level: everything from DRAM."""
        import numpy as np

        from roofline._analysis import _cache_model
        from roofline._analysis._dataflow import ACCESS_DTYPE

        one = np.array([(0, 5, 64, 0)], dtype=ACCESS_DTYPE)
        assert _cache_model.replay(one, 1, [100]).tolist() == [[0.0, 64.0]]
        assert _cache_model.replay(one[:0], 2, [100]).tolist() == [[0.0, 0.0], [0.0, 0.0]]
        two = np.array([(0, 5, 64, 0), (1, 5, 64, 0)], dtype=ACCESS_DTYPE)
        assert _cache_model.replay(two, 2, [100]).tolist() == [[0.0, 64.0], [64.0, 0.0]]
        assert _cache_model.replay(two, 2, [32]).tolist() == [[0.0, 64.0], [0.0, 64.0]]
        assert _cache_model.replay(two, 2, []).tolist() == [[64.0], [64.0]]
        # two levels of 10 and 100 bytes: A (8 B), B (50 B), C (60 B), then A again at a distance of 8 + 60 + 50 =
        # 118 bytes, beyond both: DRAM; B again (after C and A: 50 + 8 + 60 = 118): DRAM; A again (50 + 8): L2
        seq = np.array([(0, 1, 8, 0), (1, 2, 50, 0), (2, 3, 60, 0), (3, 1, 8, 0), (4, 2, 50, 0), (5, 1, 8, 0)],
                       dtype=ACCESS_DTYPE)
        out = _cache_model.replay(seq, 6, [10, 100]).tolist()
        assert out[3:] == [[0.0, 0.0, 8.0], [0.0, 0.0, 50.0], [0.0, 8.0, 0.0]]
        with pytest.raises(ValueError, match="positive and increasing"):
            _cache_model.replay(two, 2, [100, 50])
        with pytest.raises(ValueError, match="positive and increasing"):
            _cache_model.replay(two, 2, [0, 50])

    def test_replay_footprint_of_a_call(self):
        """A call's write lands in the innermost level holding its whole footprint: 100 bytes written and an empty
        storage read fit a 100-byte L1 exactly; a capacity of one byte is a capacity."""
        import numpy as np

        from roofline._analysis import _cache_model
        from roofline._analysis._dataflow import ACCESS_DTYPE

        call = np.array([(0, 1, 0, 0), (0, 2, 100, 1)], dtype=ACCESS_DTYPE)
        assert _cache_model.replay(call, 1, [100]).tolist() == [[100.0, 0.0]]
        assert _cache_model.replay(call, 1, [99]).tolist() == [[0.0, 100.0]]
        assert _cache_model.replay(call, 1, [1, 100]).tolist() == [[0.0, 100.0, 0.0]]

    def test_cache_analysis_of_calls_without_access_rows_and_at_the_roof(self):
        """A call with bytes but no access rows: all of them from DRAM. Achieved bandwidth exactly at the level's
        roof (128 bytes in 2**-30 s at 2**37 B/s) is not above it; 129 bytes are."""
        from _graph import Graph, ceilings

        g = Graph()
        g.call("aten.copy_.default", "copy", [(1, 500)], [(2, 500)], t=1.0)
        g.call("aten.add.Tensor", "ewise", [(3, 64)], [(4, 64)], t=2.0 ** -30)
        g.call("aten.mul.Tensor", "ewise", [(5, 65)], [(6, 64)], t=2.0 ** -30)
        g.call("aten.neg.Tensor", "ewise", [(7, 30)], [(8, 30)])
        r = g.report(ceil=ceilings(dram=2.0 ** 37, info={"cache_capacity_bytes": {"L1": 8}}))
        keep = r.accesses["record"] != 3
        r.accesses = r.accesses[keep]  # the neg call's rows removed: its 60 bytes have no access rows
        ca = r.cache_analysis()
        assert ca["dram_bytes"].tolist() == [1000.0, 128.0, 129.0, 60.0] and ca["l1_bytes"].tolist() == [0.0] * 4
        assert ca["above_level"].tolist() == [False, False, True, False]

    def test_cache_analysis_edge_cases(self):
        """A one-byte storage read again from L1; a call without access rows on a three-level hierarchy: all its
        bytes from DRAM (the last level, not the second); a float64 copy (no float64 peak) whose roofline time is
        its memory time; a level whose bandwidth is unknown is not where the data "comes from"."""
        from roofline._hardware._ceilings import Ceiling, Ceilings

        g = Graph()
        g.call("aten.add.Tensor", "ewise", [(1, 1)], [(2, 4)], vector=1)
        g.call("aten.sum.default", "ewise", [(1, 1)], [], vector=1)  # reads 1 byte, writes nothing counted
        g.call("aten.neg.Tensor", "ewise", [(7, 30)], [(8, 30)])
        g.call("aten.copy_.default", "copy", [(9, 400)], [(10, 400)], dtype=__import__(
            "roofline._datamodel._records", fromlist=["DTYPE_CODES"]).DTYPE_CODES["float64"])
        r = g.report(ceil=ceilings(dram=1e11, bandwidths={"L1": 1e12, "L2": 5e11},
                                   info={"cache_capacity_bytes": {"L1": 8, "L2": 16}}))
        r.accesses = r.accesses[r.accesses["record"] != 2]  # the neg call: no access rows
        ca = r.cache_analysis()
        assert ca["levels"] == ["L1", "L2", "DRAM"]
        assert ca["bytes_by_level"].tolist()[1] == [1.0, 0.0, 0.0]  # the 1-byte re-read: L1
        assert ca["bytes_by_level"].tolist()[2] == [0.0, 0.0, 60.0]
        assert ca["t_min"][3] == 800 / 1e11 and ca["t_compute"][3] == 0.0
        no_dram = Ceilings(device="cpu", name="t", fingerprint="t", peaks={("vector", "float32"): Ceiling(1e12)},
                           bandwidths={"L1": Ceiling(1e12)}, info={"cache_capacity_bytes": {"L1": 100}})
        g = Graph()
        g.call("aten.add.Tensor", "ewise", [(2, 64)], [(1, 32)], vector=8)  # the write in L1, the read from DRAM
        assert g.report(ceil=no_dram).cache_analysis()["level"].tolist() == ["L1"]

    def test_hierarchy_from_sysfs_scales_private_caches(self, monkeypatch):
        from roofline._analysis import _cache_model

        caches = {"L1": {"bytes": 32 << 10, "shared_cpus": 1}, "L2": {"bytes": 1 << 20, "shared_cpus": 2},
                  "L3": {"bytes": 16 << 20, "shared_cpus": 8}}
        monkeypatch.setattr(_cache_model, "sysfs_caches", lambda *a, **k: caches)
        bws = {"DRAM": 1e11}

        def caps(ceil, threads=None):
            return [cap for _, cap, _ in _cache_model.hierarchy(ceil, threads=threads)][:-1]

        # one core: one instance of each
        assert caps(_FakeRoofs("cpu", None, bws)) == [32 << 10, 1 << 20, 16 << 20]
        # 4 cores: 4 L1s, 2 L2s, 1 L3
        assert caps(_FakeRoofs("cpu", {}, bws), threads=4) == [128 << 10, 2 << 20, 16 << 20]
        # the ceilings' thread count when none is given: 12 cores, 12 L1s, 6 L2s, 2 L3s
        assert caps(_FakeRoofs("cpu", {"threads": 12}, bws)) == [384 << 10, 6 << 20, 32 << 20]
        assert caps(_FakeRoofs("cpu", {"threads": 12}, bws), threads=2) == [64 << 10, 1 << 20, 16 << 20]

    def test_cache_analysis_bounds_levels_and_above_level(self):
        """DRAM at 1e11 B/s, an L1 of 10 bytes at 1e12 B/s (only a 1-byte read fits), vector peak 1e12 FLOP/s.
        Records (each first touch of a storage reads from DRAM):
          0  1 s of timed work first (so the others start at t = 1 s), 1000 bytes, no FLOPs
          1  100 bytes, 1000 FLOPs: 1e-9 s either way -> compute (ties go to compute); timed at exactly 1e11 B/s
          2  no bytes, 5 FLOPs -> compute;  3  no bytes, no FLOPs -> none
          4  200 bytes, no FLOPs -> bandwidth; timed at 2e11 B/s: above DRAM's roof
          5  100 bytes, 1 FLOP -> memory;  6  no bytes, 1 FLOP -> compute
          7  1 byte (read), no FLOPs, timed 1e-12 s: 1e12 B/s, above DRAM's roof"""
        from _graph import Graph, ceilings

        g = Graph()
        g.call("aten.copy_.default", "copy", [(1, 500)], [(2, 500)], t=1.0)
        g.call("aten.add.Tensor", "ewise", [(3, 60)], [(4, 40)], vector=1000, t=1e-9)
        g.call("aten.mul.Tensor", "ewise", [], [], vector=5)
        g.call("aten.view.default", "zero", [], [])
        g.call("aten.clone.default", "copy", [(5, 100)], [(6, 100)], t=1e-9)
        g.call("aten.relu.default", "ewise", [(7, 50)], [(8, 50)], vector=1)
        g.call("aten.neg.Tensor", "ewise", [], [], vector=1)
        g.call("aten.sum.default", "ewise", [(9, 1)], [], t=1e-12)
        ceil = ceilings(vector=1e12, dram=1e11, bandwidths={"L1": 1e12}, info={"cache_capacity_bytes": {"L1": 10}})
        ca = g.report(ceil=ceil).cache_analysis()
        assert ca["levels"] == ["L1", "DRAM"] and ca["capacities"] == [10.0, INF] and ca["bandwidths"] == [1e12, 1e11]
        assert ca["bound"].tolist() == [3, 2, 2, 0, 3, 1, 2, 3]
        assert ca["level"].tolist() == ["DRAM", "DRAM", "", "", "DRAM", "DRAM", "", "DRAM"]
        assert ca["dram_bytes"].tolist() == [1000, 100, 0, 0, 200, 100, 0, 1]
        assert ca["l1_bytes"].tolist() == [0] * 8
        assert ca["t_compute"].tolist() == [0, 1000 / 1e12, 5 / 1e12, 0, 0, 1 / 1e12, 1 / 1e12, 0]
        assert ca["t_mem"][1] == 100 / 1e11 == ca["t_min"][1]
        assert ca["above_level"].tolist() == [False, False, False, False, True, False, False, True]

    def test_cache_analysis_keeps_reuse_in_the_cache(self):
        """A storage written and read back while it fits: its bytes come from L1."""
        from _graph import Graph, ceilings

        g = Graph()
        g.call("aten.add.Tensor", "ewise", [(1, 64)], [(2, 32)], vector=8)    # footprint 96 <= 100: write to L1
        g.call("aten.relu.default", "ewise", [(2, 32)], [(3, 32)], vector=8)  # re-reads 2 (distance 32): L1
        ceil = ceilings(vector=1e12, dram=1e11, bandwidths={"L1": 1e12}, info={"cache_capacity_bytes": {"L1": 100}})
        ca = g.report(ceil=ceil).cache_analysis()
        assert ca["l1_bytes"].tolist() == [32, 64] and ca["dram_bytes"].tolist() == [64, 0]
        assert ca["level"].tolist() == ["DRAM", "L1"]
        assert ca["t_mem"].tolist() == [64 / 1e11 + 32 / 1e12, 64 / 1e12]


class TestSteady:
    """The steady-state report (roofline/_loops/_steady.py)."""

    def test_steady_report_takes_the_median_step(self):
        import warnings

        from roofline._loops._steady import SteadyReport

        # four repeats of the same ops with different counts and walls 4, 1, 3, 2 s: the base step is the lower median
        # wall's (2 s: repeat 4, vector FLOPs 40 per op), the wall time the median of the four (2.5 s)
        runs = [_step(vector=10 * (i + 1), wall=w) for i, w in enumerate((4.0, 1.0, 3.0, 2.0))]
        with pytest.warns(UserWarning, match="same ops with different counts"):
            r = SteadyReport._from_runs(runs, warmup=1, ceilings=ceilings())
        assert r.vector_flops == 2 * 40 and r.wall_time == 2.5
        s = r.meta["steady"]
        assert (s["warmup"], s["repeat"], s["counts_agree"], s["first_step"], s["steps"], s["other_steps"]) == \
            (1, 4, False, False, [1, 2, 3, 4], [])
        assert r.spread["wall_time"] == {"min": 1.0, "median": 2.5, "max": 4.0, "values": [4.0, 1.0, 3.0, 2.0]}
        # the same steps measuring the first step (warmup=0): no warning, labelled
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            r0 = SteadyReport._from_runs(runs, warmup=0, ceilings=ceilings())
        assert r0.meta["steady"]["first_step"] and r0.meta["steady"]["first_step_ops"] == {}

    def test_steady_report_times_are_the_median_per_call(self):
        from roofline._loops._steady import SteadyReport

        runs = [_step(t_add=1e-6, t_mul=4e-6, wall=1.0), _step(t_add=3e-6, t_mul=2e-6, wall=3.0)]
        r = SteadyReport._from_runs(runs, warmup=1, ceilings=ceilings())
        d = (r.records["t_end"] - r.records["t_start"]).tolist()
        assert d == pytest.approx([2e-6, 3e-6], rel=1e-12)  # the median of two: their mean
        assert r.meta["steady"]["counts_agree"] and r.wall_time == 2.0
        assert r.spread["ops"]["aten.add.Tensor"] == pytest.approx({"min": 1e-6, "median": 2e-6, "max": 3e-6})
        one = SteadyReport._from_runs([runs[1]], warmup=1, ceilings=ceilings())
        assert (one.records["t_end"] - one.records["t_start"]).tolist() == pytest.approx([3e-6, 2e-6], rel=1e-12)

    def test_steady_report_leaves_out_steps_of_other_ops(self):
        from roofline._loops._steady import SteadyReport

        a, b = ("add", "mul"), ("add", "neg")
        runs = [_step(ops=b, wall=5.0), _step(ops=a, wall=1.0), _step(ops=a, wall=2.0), _step(ops=b, wall=9.0),
                _step(ops=a, wall=3.0)]
        with pytest.warns(UserWarning, match=r"median of 3 of 5 steps .* steps 1, 4 ran other ops and are left out"):
            r = SteadyReport._from_runs(runs, warmup=2, ceilings=ceilings())
        assert r.meta["steady"]["steps"] == [2, 3, 5] and r.meta["steady"]["other_steps"] == [1, 4]
        assert r.wall_time == 2.0 and r.op_names == ["aten.add.Tensor", "aten.mul.Tensor"]
        assert "median of 3 of 5 measured steps" in r.steady_line()
        assert "steps 1, 4 ran other ops and are left out" in r.steady_line()
        # a tie between two sequences (2 and 2): the latest step's sequence wins
        tie = [_step(ops=a), _step(ops=b), _step(ops=a), _step(ops=b)]
        with pytest.warns(UserWarning, match="steps 1, 3 ran other ops"):
            rt = SteadyReport._from_runs(tie, warmup=1, ceilings=ceilings())
        assert rt.op_names == ["aten.add.Tensor", "aten.neg.Tensor"]
        # warmup=0: the first step's sequence is the reference, with the ops it ran more often than the last step
        first = [_step(ops=("add", "mul", "mul")), _step(ops=a), _step(ops=a)]
        r0 = SteadyReport._from_runs(first, warmup=0, ceilings=ceilings())
        assert r0.meta["steady"]["steps"] == [1] and r0.meta["steady"]["first_step_ops"] == {"aten.mul.Tensor": 1}
        assert "(first step only: aten.mul.Tensor x1)" in r0.steady_line()

    def test_steady_line_wording(self):
        from roofline._loops._steady import SteadyReport

        r = SteadyReport._from_runs([_step(wall=0.002), _step(wall=0.004), _step(wall=0.003)], warmup=2,
                                    ceilings=ceilings())
        assert r.steady_line() == ("steady state: 2 warm-up steps uncounted, median of 3 measured steps (wall 3.0 ms, "
                                   "min 2.0, max 4.0)")
        one = SteadyReport._from_runs([_step(wall=0.002)], warmup=1, ceilings=ceilings())
        assert one.steady_line() == "steady state: 1 warm-up step uncounted, 1 measured step"
        assert one.summary(top=1).startswith(one.steady_line() + "\n")

    def test_steady_line_every_clause(self):
        """The line a steady report's summary starts with, clause by clause, from its meta and spread."""
        import warnings

        from roofline._loops._steady import SteadyReport

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            r = SteadyReport._from_runs([_step(vector=1, wall=0.001), _step(vector=2, wall=0.002)], warmup=0,
                                        ceilings=ceilings())
        assert r.steady_line() == ("steady state: 0 warm-up steps uncounted, median of 2 measured steps (wall 1.5 ms, "
                                   "min 1.0, max 2.0); the FIRST step is measured (warm-up 0): it includes one-off "
                                   "work such as optimizer state creation and lazy initialisation")
        r.meta["steady"].update(first_step=False, no_warmup="no warm-up needed")
        assert r.steady_line().endswith("max 2.0) (no warm-up needed); the repeats did not count the same ops")
        r.meta["steady"].update(other_steps=[2])
        assert r.steady_line().endswith("; step 2 ran other ops and is left out")
        r.meta["steady"] = {"repeat": 3, "warmup": 1, "steps": [1, 3], "counts_agree": True}
        assert r.steady_line().startswith("steady state: 1 warm-up step uncounted, median of 2 of 3 measured steps")
        del r.spread
        r.meta["steady"] = {}
        assert r.steady_line() == "steady state: 0 warm-up steps uncounted, 1 measured step"

    def test_steady_report_base_step_and_majority(self):
        import warnings

        from roofline._loops._steady import SteadyReport

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            # walls 2, 1, 3, 4 s: the lower median wall (2 s) is the first step's: its counts (10 FLOPs per op)
            r = SteadyReport._from_runs([_step(vector=10 * (i + 1), wall=w) for i, w in enumerate((2.0, 1.0, 3.0, 4.0))],
                                        warmup=1, ceilings=ceilings())
            assert r.vector_flops == 2 * 10 and "first_step_ops" not in r.meta["steady"]
            # two steps of add -> mul, then one of add -> neg: the majority, not the latest
            a, b = ("add", "mul"), ("add", "neg")
            r = SteadyReport._from_runs([_step(ops=a), _step(ops=a), _step(ops=b)], warmup=1, ceilings=ceilings())
            assert r.op_names == ["aten.add.Tensor", "aten.mul.Tensor"] and r.meta["steady"]["other_steps"] == [3]
        # one measured step: its times as they were (not recomputed from its durations), no first-step comparison
        one = _step(t_add=1e-6, t_mul=2e-6)
        r = SteadyReport._from_runs([one], warmup=0, ceilings=ceilings())
        assert r.records["t_end"].tolist() == one.records["t_end"].tolist()
        assert "first_step_ops" not in r.meta["steady"] and r.meta["steady"]["first_step"]

    def test_steady_report_details(self):
        import inspect
        import warnings

        from roofline._loops._steady import SteadyReport

        # three steps of different counts, walls 3, 1, 2 s: the median wall's (2 s), the third, is the base
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            r = SteadyReport._from_runs([_step(vector=10 * (i + 1), wall=w) for i, w in enumerate((3.0, 1.0, 2.0))],
                                        warmup=1, ceilings=ceilings())
        assert r.vector_flops == 2 * 30
        # the warning points at the first frame outside the package (roofline._util._warn): the line that called
        # _from_runs, here in this file

        def profile_like(runs):
            return SteadyReport._from_runs(runs, warmup=1, ceilings=ceilings()), inspect.currentframe().f_lineno

        def user_code():
            return profile_like([_step(vector=1), _step(vector=2)])

        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            _, line = user_code()
        (msg,) = [x for x in w if "different counts" in str(x.message)]
        assert msg.filename == __file__ and msg.lineno == line
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            profile_like([_step(ops=("add", "neg")), _step(), _step()])
        (msg,) = [x for x in w if "left out" in str(x.message)]
        assert msg.filename == __file__
        # an untimed call in a timed step counts 0 s in the per-op spread
        runs = [_step(t_mul=None), _step(t_mul=None)]
        for x in runs:
            x.records["t_start"][1] = x.records["t_end"][1] = float("nan")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # NumPy: the median of the untimed call's NaNs
            r = SteadyReport._from_runs(runs, warmup=1, ceilings=ceilings())
        assert r.spread["ops"]["aten.mul.Tensor"] == {"min": 0.0, "median": 0.0, "max": 0.0}
        # warmup=0: the first step against the last one
        first = [_step(ops=("add", "mul", "mul")), _step(ops=("add", "mul", "mul")), _step(ops=("add", "mul"))]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            r0 = SteadyReport._from_runs(first, warmup=0, ceilings=ceilings())
        assert r0.meta["steady"]["first_step_ops"] == {"aten.mul.Tensor": 1}

    def test_steady_summary_shows_ten_ops_by_default(self):
        from roofline._loops._steady import SteadyReport

        names = ["add", "mul", "neg", "relu", "sub", "div", "exp", "log", "sin", "cos", "tan", "abs"]
        r = SteadyReport._from_runs([_step(ops=tuple(names))], warmup=1, ceilings=ceilings())
        assert len([ln for ln in r.summary().splitlines() if ln.startswith("aten.")]) == 10

    def test_profile_refuses_generator_and_coroutine_steps(self):
        import inspect

        pytest.importorskip("torch")
        import roofline

        def gen():
            yield 1

        with pytest.raises(TypeError, match="step is a generator function"):
            roofline.steady(gen, warmup=0, repeat=1, timing=None, ceilings="datasheet")

        async def coro():
            return 1

        made = []

        def step():
            made.append(coro())
            return made[-1]

        with pytest.raises(TypeError, match="returned a coroutine"):
            roofline.steady(step, warmup=0, repeat=1, timing=None, ceilings="datasheet")
        # closed before the error: Python does not warn that it was never awaited
        assert inspect.getcoroutinestate(made[0]) == "CORO_CLOSED"

    def test_profile_defaults_one_warmup_and_five_repeats(self):
        torch = pytest.importorskip("torch")
        import roofline

        calls = []
        x = torch.ones(4)

        def step():
            calls.append(1)
            return x + 1

        r = roofline.steady(step, timing=None, ceilings="datasheet")
        assert len(calls) == 1 + 5
        assert (r.meta["steady"]["warmup"], r.meta["steady"]["repeat"]) == (1, 5) and len(r.repeats) == 5

    def test_profile_refuses_a_step_that_returns_an_async_generator(self):
        pytest.importorskip("torch")
        import roofline

        async def agen():
            yield 1

        with pytest.raises(TypeError, match="returned a async_generator"):
            roofline.steady(lambda: agen(), warmup=1, repeat=1, timing=None, ceilings="datasheet")


class TestSpec:
    """roofline.cost's tensors and argument handling (roofline/_counting/_cost.py)."""

    def test_tensor_spec_shape_checks(self):
        from roofline import TensorSpec

        with pytest.raises(TypeError, match=r"entry 0 of the shape must be an int, got 2.0 \(float\)"):
            TensorSpec((2.0, 3))
        with pytest.raises(TypeError, match=r"entry 1 of the shape must be an int, got True \(bool\)"):
            TensorSpec((2, True))
        assert TensorSpec((1,) * 16).shape == (1,) * 16  # 16 dimensions: the most supported
        with pytest.raises(ValueError, match="more than 16 dimensions"):
            TensorSpec((1,) * 17)
        assert TensorSpec((0, 3)).numel == 0 and TensorSpec((0, 3)).stride() == (3, 1)
        with pytest.raises(ValueError, match="negative size -1 at dimension 1"):
            TensorSpec((2, -1))

    def test_tensor_spec_sizes(self):
        from roofline import TensorSpec

        t = TensorSpec((2, 3, 5), "bfloat16")
        assert (t.numel, t.nbytes, t.stride()) == (30, 60, (15, 5, 1))
        assert TensorSpec((), "float64").nbytes == 8
        assert TensorSpec((4, 0, 2)).stride() == (2, 2, 1)  # a size of 0 counts as 1 in the strides

    def test_tensor_spec_more_checks(self):
        from roofline import TensorSpec

        for bad in ("abc", b"ab", 5, None):
            with pytest.raises(TypeError, match="shape must be a sequence of ints"):
                TensorSpec(bad)
        assert TensorSpec((2 ** 63 - 1,)).shape == (2 ** 63 - 1,)  # the largest size that fits
        with pytest.raises(OverflowError, match="does not fit in 64 bits"):
            TensorSpec((2 ** 63,))
        # 17 entries are refused as too many, before an 18th (here a bool) is read
        with pytest.raises(ValueError, match="more than 16 dimensions"):
            TensorSpec((1,) * 17 + (True,))
        with pytest.raises(ValueError, match=r"stride \(3,\) has 1 entries for shape \(2, 3\)"):
            TensorSpec((2, 3), stride=(3,))
        assert TensorSpec((2, 3), stride=(1, 2)).stride() == (1, 2)

    def test_tensor_spec_repr_and_equality(self):
        from roofline import TensorSpec

        assert repr(TensorSpec((2, 3))) == "TensorSpec((2, 3), 'float32')"
        assert repr(TensorSpec((2, 3), "bf16", stride=(1, 2))) == "TensorSpec((2, 3), 'bfloat16', stride=(1, 2))"
        a = TensorSpec((2, 3))
        assert a == TensorSpec((2, 3), "float") and hash(a) == hash(TensorSpec((2, 3)))
        assert a != TensorSpec((2, 3), "float16") and a != TensorSpec((2, 3), stride=(1, 2))
        assert a != TensorSpec((3, 2)) and a != (2, 3) and not (a == (2, 3))

    def test_recorder_errors_name_the_op_asked_for(self):
        import roofline

        with pytest.raises(OverflowError) as e:
            roofline.cost("mm", (2 ** 62, 4), (4, 2))
        assert str(e.value) == ("cost('mm'): argument 0: shape (4611686018427387904, 4) has 2**63 or more elements "
                                "(does not fit in 64 bits)")

    def test_schema_of_an_op_from_torch(self):
        """An op the built-in table does not hold takes its argument names from torch: the default overload when
        none is named, the first one when the named overload does not exist."""
        torch = pytest.importorskip("torch")
        import roofline

        lib = torch.library.Library("rlmutkill", "DEF")
        lib.define("two.x(Tensor a) -> Tensor")
        lib.define("two(Tensor a, Tensor b) -> Tensor")
        assert torch.ops.rlmutkill.two.overloads() == ["x", "default"]
        roofline.register("rlmutkill::two", kind="ewise", flops=1)
        try:
            assert roofline.cost("rlmutkill::two", (4,), (4,), out=(4,)).bytes_read == 2 * 4 * 4
            with pytest.raises(ValueError, match=r"3 arguments for a schema of 2 \(a, b\)"):
                roofline.cost("rlmutkill::two", (4,), (4,), (4,), out=(4,))
            with pytest.raises(ValueError, match=r"2 arguments for a schema of 1 \(a\)"):
                roofline.cost("rlmutkill::two.nosuch", (4,), (4,), out=(4,))
            assert roofline.cost("rlmutkill::two.x", (4,), out=(4,)).bytes_read == 4 * 4
        finally:
            roofline.unregister("rlmutkill::two")

    def test_scalar_and_list_arguments_at_their_limits(self):
        import roofline

        for v in (2 ** 63 - 1, -(2 ** 63)):  # the int64 range, both ends included
            assert roofline.cost("add", (4,), v).vector_flops == 4
        for v in (2 ** 63, -(2 ** 63) - 1, 2 ** 70):
            with pytest.raises(OverflowError, match=f"argument 1: {v} does not fit in 64 bits"):
                roofline.cost("add", (4,), v)
        for v in (2 ** 63, -(2 ** 63) - 1):
            with pytest.raises(OverflowError, match="argument 1: an entry of .* does not fit in 64 bits"):
                roofline.cost("add", (4,), [1, v], out=(4,))
        assert roofline.cost("add", (4,), [2 ** 63 - 1, -(2 ** 63), -1], out=(4,)).vector_flops == 4
        assert roofline.cost("add", (4,), [0] * 65536, out=(4,)).vector_flops == 4  # the longest list taken
        with pytest.raises(ValueError, match="argument 1: a list of 65537 entries; cost\\(\\) takes at most 65536"):
            roofline.cost("add", (4,), [0] * 65537, out=(4,))
        assert roofline.cost("add", (4,), True).vector_flops == 4  # a bool is not an int out of range

    def test_ops_without_a_schema(self):
        """An op neither the table nor torch knows: its arguments are positional; an in-place one (a name ending in
        "_") writes its first argument only."""
        import roofline

        roofline.register("rlnolib::axpy_", kind="ewise", flops=2)
        roofline.register("rlnolib::axpy", kind="ewise", flops=2)
        try:
            c = roofline.cost("rlnolib::axpy_", (4,), (4,))
            assert (c.vector_flops, c.bytes_read, c.bytes_written) == (2 * 4, 2 * 16, 16)
            c = roofline.cost("rlnolib::axpy_", (4,), 2.0)
            assert (c.bytes_read, c.bytes_written) == (16, 16)
            c = roofline.cost("rlnolib::axpy", (4,), (4,), out=(4,))
            assert (c.bytes_read, c.bytes_written) == (32, 16)
            # as many arguments as an operator can take (40), and one more
            assert roofline.cost("rlnolib::axpy", *[(1,)] * 40, out=(1,)).bytes_read == 40 * 4
            with pytest.raises(ValueError, match="41 arguments; an operator takes at most 40"):
                roofline.cost("rlnolib::axpy", *[(1,)] * 41, out=(1,))
            # the longest list of results cost() takes (65536; None: a result not computed), and one more
            assert roofline.cost("rlnolib::axpy", (1,), out=[(1,)] + [None] * 65535).bytes_written == 4
            with pytest.raises(ValueError, match="out: a list of 65537 results; cost\\(\\) takes at most 65536"):
                roofline.cost("rlnolib::axpy", (1,), out=[(1,)] + [None] * 65536)
        finally:
            roofline.unregister("rlnolib::axpy_")
            roofline.unregister("rlnolib::axpy")

    # the result shape cost() infers, read back from the bytes written (float32: 4 bytes per element)
    @staticmethod
    def written(op, *args, **kw):
        import roofline

        return roofline.cost(op, *args, **kw).bytes_written // 4

    def test_inferred_product_shapes(self):
        assert self.written("mm", (3, 4), (4, 5)) == 3 * 5
        assert self.written("addmm", (5,), (3, 4), (4, 5)) == 3 * 5
        assert self.written("bmm", (2, 3, 4), (2, 4, 5)) == 2 * 3 * 5
        assert self.written("baddbmm", (2, 3, 5), (2, 3, 4), (2, 4, 5)) == 2 * 3 * 5
        assert self.written("mv", (3, 4), (4,)) == 3
        assert self.written("addmv", (3,), (3, 4), (4,)) == 3
        assert self.written("add", (3, 1), (1, 4)) == 3 * 4  # broadcast
        assert self.written("_softmax", (3, 4), -1, False) == 12
        # attention: the queries' shape with the values' last dimension
        assert self.written("_scaled_dot_product_efficient_attention", (1, 2, 3, 8), (1, 2, 5, 8), (1, 2, 5, 6),
                            None, False) == 1 * 2 * 3 * 6
        # a scaled float8 product's result is bfloat16: (16, 8) x 2 bytes
        assert self.written("_scaled_mm", (16, 32), (32, 8), (), (), dtype="float8_e4m3fn") == 16 * 8 * 2 // 4

    def test_inferred_result_dtype_and_other_ops(self):
        """The result takes the dtype of the first input of the product (bfloat16 here: 2 bytes), the matrix's for
        addmv; softmax, clone and _to_copy keep their input's shape and dtype."""
        import roofline
        from roofline import TensorSpec as T

        def written(op, *args, **kw):
            return roofline.cost(op, *args, **kw).bytes_written

        bf, f32 = "bfloat16", "float32"
        assert written("mm", T((3, 4), bf), T((4, 5), f32)) == 3 * 5 * 2
        assert written("bmm", T((2, 3, 4), bf), T((2, 4, 5), f32)) == 2 * 3 * 5 * 2
        assert written("addmm", T((5,), f32), T((3, 4), bf), T((4, 5), f32)) == 3 * 5 * 2
        assert written("baddbmm", T((2, 3, 5), f32), T((2, 3, 4), bf), T((2, 4, 5), f32)) == 2 * 3 * 5 * 2
        assert written("convolution", T((1, 2, 8, 8), bf), T((3, 2, 3, 3), f32)) == 3 * 6 * 6 * 2
        assert written("addmv", T((3,), f32), T((3, 4), bf), T((4,), f32)) == 3 * 2
        # the added term broadcasts: the result is the product's (2, 3, 5), (3, 5)
        assert written("baddbmm", (5,), (2, 3, 4), (2, 4, 5)) == 2 * 3 * 5 * 4
        assert written("addmm", (1, 5), (3, 4), (4, 5)) == 3 * 5 * 4
        assert written("_softmax", T((3, 4), bf), -1, False) == 12 * 2
        for op, args in (("clone", ()), ("_to_copy", ()), ("_log_softmax", (-1, False)), ("_safe_softmax", (-1,))):
            assert written(op, (3, 4), *args) == 12 * 4, op
        with pytest.raises(ValueError, match="cannot infer the result shape of 'mv'"):
            roofline.cost("mv", (3, 4))
        with pytest.raises(ValueError, match="cannot infer the result shape of 'sum'"):
            roofline.cost("sum", (3, 4), [1])

    def test_out_overloads_place_the_result(self):
        """An out= overload writes its destination: given as out=, it is put at the destinations' positions (None in
        between for arguments left out); given among the arguments, it is used as it is."""
        import roofline

        assert roofline.cost("add.out", (4,), (4,), out=(4,)).bytes_written == 16
        c = roofline.cost("add.out", (4,), (4,), 1, (4,))
        assert (c.bytes_read, c.bytes_written) == (32, 16)  # the destination is written, not read
        assert roofline.cost("max.dim_max", (3, 5), 1, False, out=[(3,), (3,)]).bytes_written == 2 * 3 * 4
        assert roofline.cost("max.dim_max", (3, 5), 1, out=[(3,), (3,)]).bytes_written == 2 * 3 * 4
        with pytest.raises(ValueError, match=r"out: 1 result\(s\) for the 2 destination\(s\) \['max', 'max_values'\]"):
            roofline.cost("max.dim_max", (3, 5), 1, False, out=[(3,)])
        with pytest.raises(ValueError, match="out: 3 result"):
            roofline.cost("max.dim_max", (3, 5), 1, False, out=[(3,), (3,), (3,)])

    def test_inferred_convolution_shapes(self):
        """Output sizes by hand: (n + 2p - d(k-1) - 1) // s + 1, and for a transposed convolution
        (n - 1)s - 2p + d(k-1) + output_padding + 1."""
        # 2-d, groups 2: H (9 + 2 - 2 - 1) // 2 + 1 = 5, W (11 + 0 - 2 - 1) // 3 + 1 = 3 -> (2, 6, 5, 3)
        assert self.written("convolution", (2, 4, 9, 11), (6, 2, 3, 2), None, [2, 3], [1, 0], [1, 2], False, [0, 0],
                            2) == 2 * 6 * 5 * 3
        # transposed: H (3-1)*2 - 0 + 1 + 1 + 1 = 7, W (5-1)*1 - 2 + 2 + 0 + 1 = 5; C_out = 3 x groups 1
        assert self.written("convolution", (1, 4, 3, 5), (4, 3, 2, 3), None, [2, 1], [0, 1], [1, 1], True, [1, 0],
                            1) == 1 * 3 * 7 * 5
        # transposed with 2 groups: C_out = 3 x 2 = 6; H (3-1)*1 + 1 + 1 = 4 (kernel 2), W (5-1) + 2 + 1 = 7
        assert self.written("convolution", (1, 4, 3, 5), (4, 3, 2, 3), None, [1], [0], [1], True, [0], 2) \
            == 1 * 6 * 4 * 7
        # one value for every spatial dimension, ints and one-entry lists alike: stride 2, padding 1
        for stride, padding in ((2, 1), ([2], [1])):
            # (8 + 2 - 2 - 1) // 2 + 1 = 4 and (6 + 2 - 2 - 1) // 2 + 1 = 3
            assert self.written("convolution", (1, 2, 8, 6), (3, 2, 3, 3), None, stride, padding, 1, False, 0, 1) \
                == 3 * 4 * 3
        # defaults: stride 1, padding 0, dilation 1 (empty lists and None alike): (7 - 3 + 1) = 5
        assert self.written("convolution", (1, 2, 7), (3, 2, 3), None, [], None, [], False, [], None) == 3 * 5
        # 1-d with dilation 2: (10 - 2*2 - 1) // 1 + 1 = 6
        assert self.written("convolution", (1, 2, 10), (4, 2, 3), None, 1, 0, 2, False, 0, 1) == 4 * 6
        # depthwise: one group per input channel (C_in 3): weight (3, 1, 3, 3), output (1, 3, 4, 4)
        assert self.written("_conv_depthwise2d", (1, 3, 6, 6), (3, 1, 3, 3), [3, 3], None, [1, 1], [0, 0], [1, 1]) \
            == 3 * 4 * 4
        # a transposed op by name: C_out = weight's second dimension
        assert self.written("slow_conv_transpose2d", (1, 2, 3, 3), (2, 5, 2, 2), [2, 2], None, [1, 1], [0, 0], [0, 0],
                            [1, 1]) == 5 * 4 * 4
        # an empty spatial input gives an empty result, not an error
        assert self.written("convolution", (1, 2, 0, 5), (3, 2, 1, 1), None, 1, 0, 1, False, 0, 1) == 0

    def test_convolution_arguments_are_checked(self):
        import roofline

        x, w = (1, 2, 8, 8), (3, 2, 3, 3)

        def conv(stride=1, padding=0, dilation=1, groups=1, weight=w):
            return roofline.cost("convolution", x, weight, None, stride, padding, dilation, False, 0, groups)

        with pytest.raises(ValueError, match="stride has 3 entries for 2 spatial dimensions"):
            conv(stride=[1, 1, 1])
        # (a TypeError of the shape inference is reported as arguments that do not fit the schema)
        with pytest.raises(ValueError, match="stride must be an int or a list of ints, got True"):
            conv(stride=True)
        with pytest.raises(ValueError, match="padding must be an int or a list of ints"):
            conv(padding=[1, True])
        with pytest.raises(ValueError, match="padding must be an int or a list of ints"):
            conv(padding=1.0)
        with pytest.raises(ValueError, match=r"stride \[1, 0\] must be >= 1"):
            conv(stride=[1, 0])
        with pytest.raises(ValueError, match="padding -1 must be >= 0"):
            conv(padding=-1)
        with pytest.raises(ValueError, match="groups must be a positive int, got 0"):
            conv(groups=0)
        with pytest.raises(ValueError, match="groups must be a positive int, got True"):
            conv(groups=True)
        with pytest.raises(ValueError, match="does not fit input"):
            conv(groups=2)
        with pytest.raises(ValueError, match="does not fit the input"):
            conv(weight=(3, 2, 9, 3))
        assert conv(padding=[0, 1]).bytes_written == 3 * 6 * 8 * 4
        with pytest.raises(ValueError, match="must both be"):
            roofline.cost("convolution", (2, 8), (3, 2), None, 1, 0, 1, False, 0, 1)
        with pytest.raises(ValueError, match="dilation 0 must be >= 1"):
            conv(dilation=0)
        with pytest.raises(ValueError, match="the input and the weight must be tensors"):
            roofline.cost("convolution", x, 3, None, 1, 0, 1, False, 0, 1)
        with pytest.raises(ValueError, match="the input and the weight must be tensors"):
            roofline.cost("convolution", x)
        # weight (4, 1, 3, 3) for 2 input channels in one group: C_in/groups would be 1
        with pytest.raises(ValueError, match="does not fit input"):
            conv(weight=(4, 1, 3, 3))
        # transposed: the weight's first dimension must be C_in
        with pytest.raises(ValueError, match="transposed convolution's weight"):
            roofline.cost("convolution", x, (4, 3, 3, 3), None, 1, 0, 1, True, 0, 1)
        # the input and the weight alone: stride 1, no padding, dilation 1, one group: (1, 3, 6, 6)
        assert roofline.cost("convolution", x, w).bytes_written == 3 * 6 * 6 * 4
        # a kernel as large as the input: one output element per channel; one larger: none, an error
        assert roofline.cost("convolution", (1, 2, 3, 3), (3, 2, 3, 3), None, 1, 0, 1, False, 0, 1).bytes_written \
            == 3 * 4
        with pytest.raises(ValueError, match="spatial dimension 0 of the result would be 0"):
            roofline.cost("convolution", (1, 2, 1, 1), (3, 2, 2, 2), None, 1, 0, 1, False, 0, 1)
        # other ops with two tensors have no inferred result
        with pytest.raises(ValueError, match="cannot infer the result shape of 'dot'"):
            roofline.cost("dot", (4,), (4,))
        # trailing arguments left out take their defaults: groups 1
        assert roofline.cost("convolution", x, w, None, 1, 0, 1, False, 0).bytes_written == 3 * 6 * 6 * 4
        # a transposed convolution without output_padding: 0; (8 - 1) + (3 - 1) + 1 = 10
        assert roofline.cost("convolution", x, (2, 3, 3, 3), None, 1, 0, 1, True, None, 1).bytes_written \
            == 3 * 10 * 10 * 4

    def test_tensor_inputs_as_one_list(self):
        import roofline

        assert roofline.cost("mm", [(3, 4), (4, 5)]).matrix_flops == 2 * 3 * 4 * 5
        assert roofline.cost("mm", [(3, 4), roofline.TensorSpec((4, 5))]).matrix_flops == 2 * 3 * 4 * 5
        # a list of ints is an argument, not the tensor inputs
        assert roofline.cost("sum", (3, 4), [1], out=(3,)).bytes_read == 3 * 4 * 4


class TestContention:
    """The load readings and the contention verdict (roofline/_hardware/_contention.py), on /proc texts written here."""

    STAT = ("cpu  100 5 30 1000 20 3 2 7 0 0\n"
            "cpu0 60 5 10 500 10 1 1 4 0 0\n"
            "cpu1 40 0 20 500 10 2 1 3 0 0\n"
            "intr 12345 1 2 3\n"
            "ctxt 999\n"
            "procs_running 3\n"
            "procs_blocked 0\n")

    def test_cpu_fields(self):
        from roofline._hardware import _contention as c

        hz = c._HZ
        assert c._cpu_fields("100 5 30 1000 20 3 2 7".split()) == ((100 + 5 + 30 + 3 + 2) / hz, 7 / hz)
        assert c._cpu_fields("100 5 30 1000 20 3 2 7 9 9".split()) == (140 / hz, 7 / hz)  # guest fields ignored
        assert c._cpu_fields("100 5 30".split()) == (135 / hz, 0.0)  # missing fields count 0
        assert c._cpu_fields("100 x 30".split()) is None

    def test_parse_stat(self):
        from roofline._hardware import _contention as c

        hz = c._HZ
        assert c._parse_stat(self.STAT) == (140 / hz, 7 / hz, 3)
        assert c._parse_stat(self.STAT, [1]) == ((40 + 20 + 2 + 1) / hz, 3 / hz, 3)
        assert c._parse_stat(self.STAT, [0, 1]) == pytest.approx(((77 + 63) / hz, 7 / hz, 3), rel=1e-12)
        assert c._parse_stat(self.STAT, [0, 5]) == (None, None, 3)  # a CPU without a line: unknown
        assert c._parse_stat("cpu 1 2 3\nprocs_running 2") == (None, None, 2)  # a short first line; no final newline
        assert c._parse_stat("\nprocs_running 4\n") == (None, None, 4)
        assert c._parse_stat("cpu  1 2 3 4 5 6 7 8\nprocs_running x\n") == ((1 + 2 + 3 + 6 + 7) / hz, 8 / hz, None)
        assert c._parse_stat("intr 1 2\ncpu0 1 2 3 4 5 6 7 8\n", [0]) == (None, None, None)  # cpu lines come first

    def test_running_and_process_times(self, monkeypatch):
        from roofline._hardware import _contention as c

        assert c._running("123 (a) b) R 1 2") and not c._running("123 (a) S 1 2")
        assert not c._running(None) and not c._running("")
        hz = c._HZ
        fields = "S 1 2 3 4 5 6 7 8 9 10 11 22 33 44 55 66"  # utime 11 stime 22 cutime 33 cstime 44 (fields 14-17)
        texts = {"/proc/42/stat": f"42 (my (proc)) {fields}", "/proc/43/stat": "43 (x) S 1 2 zz"}
        monkeypatch.setattr(c, "_read", lambda path: texts.get(path))
        assert c._stat_cpu("42") == (11 + 22 + 33 + 44) / hz
        assert c._stat_cpu("43") == 0.0 and c._stat_cpu("44") == 0.0
        states = {"1": "1 (py) R 0", "2": "2 (py) S 0", "3": "3 (py) R 0"}
        monkeypatch.setattr(c, "_read", lambda path: states.get(path.split("/")[-2]))
        assert c._own_running_threads(["1", "2", "3"]) == 2
        assert c._own_running_threads(["1", "2"]) == 1
        assert c._own_running_threads(["2"]) == 1  # at least the reading thread

    def test_descendants_are_counted_once_and_bounded(self, monkeypatch):
        import os

        from roofline._hardware import _contention as c

        # 1 -> 2, 3; 2 -> 3 (3 listed twice); each process 1 s of CPU
        tree = {"self": ["1"], "1": ["2", "3"], "2": ["3"], "3": []}
        monkeypatch.setattr(c, "_children", lambda pid, tids=None: list(tree.get(pid, [])))
        monkeypatch.setattr(c, "_stat_cpu", lambda pid: 1.0)
        # the reaped children's time is pinned: a child of the test process reaped between two reads would move it
        t = os.times()
        monkeypatch.setattr(c.os, "times", lambda: t)
        assert c.descendants_cpu([]) - (t.children_user + t.children_system) == pytest.approx(3.0, abs=1e-9)
        wide = {"self": [str(i) for i in range(5000)]}
        monkeypatch.setattr(c, "_children", lambda pid, tids=None: list(wide.get(pid, [])))
        assert c.descendants_cpu([]) - (t.children_user + t.children_system) == pytest.approx(4097.0, abs=1e-9)  # at most 4097 read

    def test_snapshot_counts_other_runnable_threads(self, monkeypatch):
        import os

        from roofline._hardware import _contention as c

        monkeypatch.setattr(c, "_proc_stat", lambda cpus=None: (5.0, 1.0, 10))
        monkeypatch.setattr(c, "_own_running_threads", lambda tids=None: 3)
        monkeypatch.setattr(c, "_affinity", lambda: [0, 1])
        monkeypatch.setattr(c, "_cpu_count", lambda: 8)
        s = c.snapshot()
        assert (s.busy, s.steal, s.runnable_others, s.cpus, s.machine_cpus) == (5.0, 1.0, 7, 2, 8)
        assert c.snapshot(count_own_threads=False).runnable_others == 9
        monkeypatch.setattr(c, "_proc_stat", lambda cpus=None: (5.0, 1.0, 2))
        assert c.snapshot().runnable_others == 0
        monkeypatch.setattr(c, "_affinity", lambda: list(range(8)))  # every CPU allowed: the machine's count
        assert c.snapshot().cpus == 8
        monkeypatch.undo()
        seen = []
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: seen.append(pid) or {3, 1})
        assert c._affinity() == [1, 3] and seen == [0]  # this process's

    def test_ticks(self, monkeypatch):
        import os

        from roofline._hardware import _contention as c

        monkeypatch.setattr(os, "sysconf", lambda name: 250)
        assert c._ticks() == 250
        monkeypatch.setattr(os, "sysconf", lambda name: 0)
        assert c._ticks() == 100

    def test_readings(self):
        from roofline._hardware import _contention as c

        s = c.Snapshot(wall=10.0, cpu=1.0, busy=100.0, steal=2.0, runnable_others=1, loadavg=(0.5, 0.25, 0.125),
                       cpus=4, machine_cpus=8)
        e = c.Snapshot(wall=12.0, cpu=2.1234567891, busy=104.3, steal=3.6, runnable_others=5, loadavg=None, cpus=4,
                       machine_cpus=8)
        r = c.readings(s, e)
        cpu = 1.1234567891
        assert r == {"wall_s": 2.0, "process_cpu_s": 1.123457, "cpu_per_wall": round(cpu / 2.0, 4),
                     "others_share": round((4.3 - cpu) / 8.0, 4), "steal_share": round(1.6 / 8.0, 4),
                     "runnable_others": [1, 5], "loadavg": [[0.5, 0.25, 0.125], None], "cpus": 4, "machine_cpus": 8}
        assert r["cpu_per_wall"] == 0.5617 and r["others_share"] == 0.3971
        # a steal above the capacity is capped at 1; no wall time: no shares, no rate
        big = c.readings(s, e._replace(steal=50.0, busy=200.0))
        assert big["steal_share"] == 1.0 and big["others_share"] == 1.0
        z = c.readings(s, s._replace(machine_cpus=0))
        assert (z["wall_s"], z["cpu_per_wall"], z["others_share"], z["steal_share"], z["machine_cpus"]) == \
            (0.0, None, None, None, 4)
        unknown = c.readings(s._replace(busy=None, steal=None), e)
        assert unknown["others_share"] is None and unknown["steal_share"] is None

    def test_judge_at_the_thresholds(self):
        from roofline._hardware import _contention as c

        base = {"wall_s": 0.2, "cpus": 4, "machine_cpus": 8, "others_share": 0.5, "steal_share": 0.1,
                "runnable_others": [8, 9]}
        assert c.judge(base) == ["other processes kept 50% of the 4 CPUs busy",
                                 "the hypervisor took 10% of the CPU time (steal)",
                                 "8 and 9 other threads were runnable at entry and exit, on 8 CPUs"]
        assert c.judge(dict(base, wall_s=0.19)) == ["8 and 9 other threads were runnable at entry and exit, on 8 CPUs"]
        assert c.judge(dict(base, others_share=0.49, steal_share=0.09, runnable_others=[7, 9])) == []
        assert c.judge(dict(base, runnable_others=[8, None])) == ["other processes kept 50% of the 4 CPUs busy",
                                                                 "the hypervisor took 10% of the CPU time (steal)"]
        assert c.judge({"wall_s": 1.0, "others_share": 0.75}) == ["other processes kept 75% of the 1 CPUs busy"]
        assert c.judge({"runnable_others": [2, 2], "cpus": 2}) == [
            "2 and 2 other threads were runnable at entry and exit, on 2 CPUs"]
        assert c.judge({}) == []


class TestCompiledView:
    """Kernel rows, the kernel table and the fusion figures of a compiled run (roofline/_analysis/_compiled_view.py), on a
    report whose compiled part is written here. Ceilings: matrix 2e12, vector 1e12 FLOP/s, DRAM 1e11 B/s."""

    KERNELS = [
        # 2 calls of 2000 FLOPs and 400 bytes in 4 ns: roof max(4000/2e12, 800/1e11) = 8 ns for both calls
        {"name": "cpp_fused_mm_0", "phase": "forward", "calls": 2, "matrix_flops": 2000, "vector_flops": 0,
         "bytes_read": 300, "bytes_written": 100, "time": 4e-9, "dtype": "float32", "ops": ["aten.mm.default"],
         "module": "blk", "unfused_bytes": 700},
        # untimed, 100 vector FLOPs, 1000 bytes: memory-bound, 10 ns
        {"name": "cpp_fused_add_relu_1", "phase": "backward", "calls": 1, "vector_flops": 100, "bytes_read": 600,
         "bytes_written": 400, "ops": ["aten.add.Tensor", "aten.relu.default"], "module": "blk",
         "unfused_bytes": 2000, "bytes_read_total": 900, "bytes_written_total": 500},
        # no FLOPs, no recorded calls (counted once): bandwidth; Inductor's own (no ops)
        {"name": "cpp_copy_2", "phase": "forward", "calls": 0, "bytes_read": 50, "bytes_written": 50, "time": 1e-9},
        # a dtype without a peak: no ceiling
        {"name": "k" * 60, "phase": "forward", "calls": 3, "vector_flops": 10, "bytes_read": 10, "dtype": "float64",
         "ops": ["aten.mul.Tensor"] * 20, "module": "other", "unfused_bytes": 5},
    ]

    def report(self, kernels=None, **extra):
        g = Graph()
        g.call("aten.mm.default", "mm", [(1, 400)], [(2, 400)], matrix=2000, t=1e-6)
        r = g.report()
        r.meta["compiled"] = dict({"kernels": kernels if kernels is not None else self.KERNELS, "graphs": 2,
                                   "graph_calls": 3, "graph_breaks": 1}, **extra)
        return r

    def test_kernel_rows(self):
        import math

        from roofline._analysis import _compiled_view as cv

        rows = cv.kernel_rows(self.report())
        a, b, c, d = rows
        assert (a["flops"], a["bytes"], a["intensity"]) == (2000, 400, 5.0)
        assert a["t_min"] == pytest.approx(4e-9, rel=1e-12) and a["time"] == 4e-9
        assert a["achieved_flops"] == pytest.approx(4000 / 4e-9) and a["achieved_bytes"] == pytest.approx(800 / 4e-9)
        assert a["efficiency"] == pytest.approx(2.0) and a["bound"] == "memory" and a["above_ceiling"] == 1
        assert (b["flops"], b["bytes"], b["bound"], b["above_ceiling"]) == (100, 1000, "memory", 0)
        assert b["t_min"] == pytest.approx(1000 / 1e11) and math.isnan(b["time"]) and math.isnan(b["efficiency"])
        assert (c["flops"], c["bytes"], c["bound"]) == (0, 100, "bandwidth")
        assert c["t_min"] == pytest.approx(100 / 1e11) and c["efficiency"] == pytest.approx(1e-9 / 1e-9)
        assert d["bound"] == "unknown"
        assert cv.kernel_rows(self.report(kernels=[])) == []
        # a kernel with matrix FLOPs is judged against the matrix peak (2e12), one without against the vector peak
        # (1e12; bfloat16 falls back to it)
        mm = {"name": "mm", "phase": "forward", "calls": 1, "matrix_flops": 10 ** 6, "bytes_read": 5,
              "bytes_written": 5}
        ew = {"name": "ew", "phase": "forward", "calls": 1, "vector_flops": 10 ** 6, "bytes_read": 5,
              "bytes_written": 5, "dtype": "bfloat16"}
        x, y = cv.kernel_rows(self.report(kernels=[mm, ew]))
        assert x["t_min"] == 10 ** 6 / 2e12 and y["t_min"] == 10 ** 6 / 1e12
        assert x["bound"] == y["bound"] == "compute"

    def test_kernel_table(self):
        from roofline.render import _kernels

        lines = _kernels.table(self.report()).splitlines()
        assert lines[0].split()[:8] == ["kernel", "phase", "calls", "FLOPs", "bytes", "FLOP/B", "roof", "ms"]
        assert "time ms" in lines[0] and "% roof" in lines[0]
        # most time first (4 ns, 1 ns), then the untimed ones by bytes (1000, 40)
        assert [ln.split()[0] for ln in lines[1:5]] == ["cpp_fused_mm_0", "cpp_copy_2", "cpp_fused_add_relu_1",
                                                       "k" * 45 + "..."]
        assert lines[3].endswith("  add.Tensor, relu.default")
        assert lines[4].endswith("...") and len(lines[4].split("  ")[-1]) == 70
        assert lines[-1] == "2 compiled graphs (3 calls), 1 graph breaks"
        assert len(_kernels.table(self.report(), top=2).splitlines()) == 1 + 2 + 1
        assert _kernels.table(self.report(kernels=[])) == "(no compiled kernels)"
        untimed = [dict(k, time=None) for k in self.KERNELS[:2]]
        assert "time ms" not in _kernels.table(self.report(kernels=untimed)).splitlines()[0]

    def test_fusion_figures(self):
        from roofline._analysis import _compiled_view as cv

        f = cv.fusion(self.report())
        # compiled bytes per kernel: 400 x 2, the totals 900 + 500, 100 x 0 calls, 10 x 3
        compiled = 800 + 1400 + 0 + 30
        unfused = 700 * 2 + 2000 * 1 + 0 + 5 * 3
        assert f == {"unfused_bytes": unfused, "compiled_bytes": compiled, "saved_bytes": unfused - compiled,
                     "added_bytes": 0, "aten_bytes": 0,
                     "by_module": {"blk": {"unfused_bytes": 3400, "compiled_bytes": 2200, "saved_bytes": 1200},
                                   "Global": {"unfused_bytes": 0, "compiled_bytes": 0, "saved_bytes": 0},
                                   "other": {"unfused_bytes": 15, "compiled_bytes": 30, "saved_bytes": -15}}}
        k = dict(self.KERNELS[2], calls=2)  # Inductor's own kernel, 100 bytes twice
        f = cv.fusion(self.report(kernels=[k], aten_bytes=1000))
        assert (f["added_bytes"], f["compiled_bytes"], f["unfused_bytes"], f["aten_bytes"], f["saved_bytes"]) == \
            (200, 200, 1000, 1000, 800)
        assert cv.fusion(self.report(kernels=[])) == {"unfused_bytes": 0, "compiled_bytes": 0, "saved_bytes": 0,
                                                       "added_bytes": 0, "aten_bytes": 0, "by_module": {}}


class TestDataflow:
    """Access checks, producer -> consumer edges, fusion opportunities and their one-line description
    (roofline/_analysis/_dataflow.py)."""

    @staticmethod
    def acc(rows):
        import numpy as np

        from roofline._analysis._dataflow import ACCESS_DTYPE

        return np.array(rows, dtype=ACCESS_DTYPE)

    def test_check_accesses(self):
        import numpy as np

        from roofline._analysis import _dataflow
        from roofline._analysis._dataflow import ACCESS_DTYPE

        wide = np.array([(0, 5, 64, 0), (1, 5, 64, 1)], dtype=[("record", "<i8"), ("storage", "<i8"),
                                                                 ("nbytes", "<i8"), ("write", "<i8")])
        a = _dataflow.check_accesses(wide, 2)
        assert a.dtype == ACCESS_DTYPE and a.tolist() == [(0, 5, 64, 0), (1, 5, 64, 1)]
        with pytest.raises(ValueError, match="refer to record 2, but the report has 2 records"):
            _dataflow.check_accesses(self.acc([(2, 5, 64, 0)]), 2)
        assert len(_dataflow.check_accesses(self.acc([(1, 5, 64, 0)]), 2)) == 1
        with pytest.raises(TypeError, match="structured array"):
            _dataflow.check_accesses(np.zeros(3), 2)
        with pytest.raises(ValueError, match="one-dimensional"):
            _dataflow.check_accesses(self.acc([[(0, 5, 64, 0)]]), 2)
        with pytest.raises(ValueError, match="no dataflow"):
            _dataflow.check_accesses(None, 2)

    def test_edges_without_a_record_count(self):
        from roofline._analysis import _dataflow

        big = 2 ** 31 + 5  # record indices are 32-bit unsigned: any of them is valid without a count
        e = _dataflow.edges(self.acc([(big, 7, 64, 1), (big + 1, 7, 32, 0), (big + 1, 8, 16, 0)]))
        assert e.tolist() == [(big, big + 1, 7, 32, 64)]
        assert len(_dataflow.edges(self.acc([]))) == 0
        # a read before any write of its storage, and a read of another storage written earlier: no edge
        assert len(_dataflow.edges(self.acc([(0, 1, 8, 0), (1, 2, 8, 1), (2, 3, 8, 0)]))) == 0

    def test_short_and_active(self):
        import numpy as np

        from roofline._analysis import _dataflow
        from roofline._datamodel._records import RECORD_DTYPE

        from roofline._util._format import op_label, op_name

        assert [op_name(n) for n in ("aten.add_.Tensor", "aten.relu", "relu")] == ["add_", "relu", "relu"]
        assert [op_label(n) for n in ("aten.addmm.default", "aten.add.Tensor", "mylib.op.default")] == [
            "addmm", "add.Tensor", "mylib.op"]
        rec = np.zeros(5, RECORD_DTYPE)
        rec["bytes_read"] = [0, 1, 0, 8, 0]
        rec["bytes_written"] = [0, 0, 1, 8, 0]
        rec["status"] = [0, 0, 0, 3, 0]
        assert _dataflow.active(rec).tolist() == [False, True, True, False, False]
        assert len(_dataflow.data_edges(rec, self.acc([]))) == 0

    def test_describe(self):
        from roofline._analysis._dataflow import FusionOpportunity
        from roofline.render._advice import describe

        f = FusionOpportunity(records=[0, 1], ops=["aten.mm.default", "aten.add_.Tensor"], modules=["a", "a"],
                              kind="epilogue", intermediates=1, bytes=4000, saved_bytes=1000, t_before=3e-6,
                              t_after=1e-6, saved_s=2e-6)
        assert describe(f) == "mm -> add_ in a: saves 1.00 KB of 4.00 KB, 2.00 us at the roof"
        f.modules = ["a", "b", "c"]
        f.saved_s = float("nan")
        assert describe(f) == "mm -> add_ in a .. c: saves 1.00 KB of 4.00 KB"
        f.compiled = "partly"
        assert describe(f) == "mm -> add_ in a .. c: saves 1.00 KB of 4.00 KB; compiled: partly"
        f.compiled_saved_bytes = 500
        assert describe(f) == ("mm -> add_ in a .. c: saves 1.00 KB of 4.00 KB; compiled: partly (keeps 500 B of "
                                "1.00 KB on chip)")

    def test_a_chain_of_two_calls_by_default(self):
        from roofline._analysis import _dataflow

        g = Graph()
        g.call("aten.add.Tensor", "ewise", [(1, 400)], [(2, 400)], vector=100)
        g.call("aten.relu.default", "ewise", [(2, 400)], [(3, 400)], vector=100)
        r = g.report()
        (f,) = _dataflow.fusion_opportunities(r.records, r._ops, r.module_path, r.classification(), r.accesses)
        assert (f.records, f.kind, f.intermediates, f.saved_bytes, f.bytes) == ([0, 1], "elementwise", 1, 800, 1600)
        assert f.edges == [(0, 1, 800)]

    def test_without_ceilings_chains_are_found_by_kind(self):
        g = Graph()
        g.call("aten.add.Tensor", "ewise", [(1, 400)], [(2, 400)], vector=100)
        g.call("aten.relu.default", "ewise", [(2, 400)], [(3, 400)], vector=100)
        g.call("aten.mm.default", "mm", [(3, 400), (4, 400)], [(5, 400)], matrix=10 ** 6)  # not fusible
        r = _no_ceilings(g)
        (f,) = r.fusion_opportunities()
        assert f.records == [0, 1] and f.saved_bytes == 800
        assert f.saved_s != f.saved_s and f.t_before != f.t_before  # NaN: no ceilings
        # two chains, no times: most bytes saved first
        g.call("aten.add.Tensor", "ewise", [(6, 900)], [(7, 900)], vector=100)
        g.call("aten.relu.default", "ewise", [(7, 900)], [(8, 900)], vector=100)
        assert [(f.records, f.saved_bytes) for f in _no_ceilings(g).fusion_opportunities()] == [([3, 4], 1800),
                                                                                              ([0, 1], 800)]

    def test_one_matrix_product_per_chain(self):
        """Two products whose results one add reads, and a scale (y) the add reads too: the add joins the first
        product and the scale; the second product stays out (one matrix product per fused kernel)."""
        g = Graph()
        g.call("aten.mm.default", "mm", [(1, 4096), (2, 4096)], [(10, 256)], matrix=2 * 8 * 8 * 128)      # 0
        g.call("aten.mul.Tensor", "ewise", [(3, 256)], [(11, 256)], vector=64)                           # 1
        g.call("aten.mm.default", "mm", [(4, 4096), (5, 4096)], [(12, 256)], matrix=2 * 8 * 8 * 128)     # 2
        g.call("aten.add.Tensor", "ewise", [(10, 256), (11, 256), (12, 256)], [(13, 256)], vector=128)   # 3
        opps = g.report().fusion_opportunities()
        assert [f.records for f in opps] == [[0, 1, 3]] and opps[0].kind == "epilogue"
        g2 = Graph()
        g2.call("aten.mm.default", "mm", [(1, 4096), (2, 4096)], [(10, 256)], matrix=2 * 8 * 8 * 128)
        g2.call("aten.mm.default", "mm", [(4, 4096), (5, 4096)], [(12, 256)], matrix=2 * 8 * 8 * 128)
        g2.call("aten.add.Tensor", "ewise", [(10, 256), (12, 256)], [(13, 256)], vector=64)
        assert [f.records for f in g2.report().fusion_opportunities()] == [[0, 2]]

    def test_in_place_update_of_a_live_in_storage(self):
        """A parameter (storage 1, read before any write in the block) updated in place by a mul_ and then read by
        an add: a fused kernel still writes the parameter's final value, so only the read is saved (400). When the
        add updates it in place too, the mul_'s write is not the final one: read and write saved (800)."""
        g = Graph()
        g.call("aten.mul_.Tensor", "ewise", [(1, 400)], [(1, 400)], vector=100)
        g.call("aten.add.Tensor", "ewise", [(1, 400)], [(2, 400)], vector=100)
        (f,) = g.report().fusion_opportunities()
        assert (f.records, f.saved_bytes) == ([0, 1], 400)
        g = Graph()
        g.call("aten.mul_.Tensor", "ewise", [(1, 400)], [(1, 400)], vector=100)
        g.call("aten.add_.Tensor", "ewise", [(1, 400)], [(1, 400)], vector=100)
        (f,) = g.report().fusion_opportunities()
        assert (f.records, f.saved_bytes) == ([0, 1], 800)

    def test_fused_time_counts_every_members_flops(self):
        """mm (2e6 FLOPs at 2e12) -> add (1 FLOP at 1e12) -> clone (no FLOPs): one kernel computes 1e-6 + 1e-12 s;
        its remaining bytes (2200 - 800 = 1400 at 1e11 B/s) take less."""
        g = Graph()
        g.call("aten.mm.default", "mm", [(1, 600), (2, 400)], [(3, 400)], matrix=2 * 10 ** 6)
        g.call("aten.add.Tensor", "ewise", [(3, 400)], [(4, 400)], vector=1)
        g.call("aten.clone.default", "copy", [(4, 400)], [(5, 400)])
        (f,) = g.report().fusion_opportunities()
        assert f.records == [0, 1, 2] and f.saved_bytes == 4 * 400
        assert f.t_after == pytest.approx(2e6 / 2e12 + 1 / 1e12, rel=1e-12)
        assert f.bytes == 1400 + 800 + 800

    def test_a_member_without_flops_and_without_a_peak(self):
        """A chain whose last member is a float64 copy (no FLOPs; no float64 peak on these ceilings): it adds no
        compute time, so the chain's saving is known."""
        from roofline._datamodel._records import DTYPE_CODES

        g = Graph()
        g.call("aten.add.Tensor", "ewise", [(1, 400)], [(2, 400)], vector=100)
        g.call("aten.clone.default", "copy", [(2, 400)], [(3, 800)], dtype=DTYPE_CODES["float64"])
        (f,) = g.report().fusion_opportunities()
        assert f.t_after == pytest.approx((2000 - 800) / 1e11, rel=1e-12) and f.saved_s == f.saved_s

    def test_opportunities_order_and_grouping(self):
        """Two add -> relu chains of equal cost, interleaved (records [0, 3] and [1, 2]): ordered by their first
        call. A larger chain first. A float64 chain (no float64 peak: its time is unknown) after those with a time.
        Grouped by op chain: counts, bytes and savings summed."""
        from roofline._analysis import _dataflow

        from roofline._datamodel._records import DTYPE_CODES

        f64 = DTYPE_CODES["float64"]
        g = Graph()
        g.call("aten.add.Tensor", "ewise", [(1, 400)], [(10, 400)], vector=100)     # 0
        g.call("aten.add.Tensor", "ewise", [(2, 400)], [(11, 400)], vector=100)     # 1
        g.call("aten.relu.default", "ewise", [(11, 400)], [(12, 400)], vector=100)  # 2
        g.call("aten.relu.default", "ewise", [(10, 400)], [(13, 400)], vector=100)  # 3
        g.call("aten.mul.Tensor", "ewise", [(3, 800)], [(14, 800)], vector=200)     # 4
        g.call("aten.neg.Tensor", "ewise", [(14, 800)], [(15, 800)], vector=200)    # 5
        g.call("aten.mul.Tensor", "ewise", [(4, 80000)], [(16, 80000)], vector=100, dtype=f64)  # 6
        g.call("aten.neg.Tensor", "ewise", [(16, 80000)], [(17, 80000)], vector=100, dtype=f64)  # 7
        opps = g.report().fusion_opportunities()
        assert [f.records for f in opps] == [[4, 5], [0, 3], [1, 2], [6, 7]]
        assert opps[0].saved_s > opps[1].saved_s == opps[2].saved_s > 0 and opps[3].saved_s != opps[3].saved_s
        # grouped: add -> relu twice (saved 2 x 800 bytes, 2 x 8 ns), mul -> neg twice (float32 and float64: their
        # summed time is unknown, so it comes after)
        groups = _dataflow.group_opportunities(opps)
        assert [(gr["ops"], gr["count"], gr["saved_bytes"], gr["bytes"]) for gr in groups] == [
            (["aten.add.Tensor", "aten.relu.default"], 2, 1600, 3200),
            (["aten.mul.Tensor", "aten.neg.Tensor"], 2, 1600 + 160000, 3200 + 320000)]
        assert groups[0]["saved_s"] == pytest.approx(2 * 800 / 1e11)

    def test_group_opportunities_sums(self):
        from roofline._analysis import _dataflow
        from roofline._analysis._dataflow import FusionOpportunity

        def opp(ops, saved_s, saved_bytes, nbytes, modules):
            return FusionOpportunity(records=[0, 1], ops=ops, modules=modules, kind="elementwise", intermediates=1,
                                     bytes=nbytes, saved_bytes=saved_bytes, t_before=1.0, t_after=1.0 - saved_s,
                                     saved_s=saved_s)

        a, b = ["aten.add.Tensor", "aten.relu.default"], ["aten.mul.Tensor", "aten.neg.Tensor"]
        groups = _dataflow.group_opportunities([opp(a, 1e-6, 100, 300, ["x"]), opp(b, 5e-6, 10, 30, ["y"]),
                                                opp(a, 2e-6, 200, 600, ["z", "x"])])
        assert groups == [
            {"ops": b, "kind": "elementwise", "phase": "forward", "count": 1, "modules": ["y"], "saved_bytes": 10,
             "saved_s": 5e-6, "bytes": 30},
            {"ops": a, "kind": "elementwise", "phase": "forward", "count": 2, "modules": ["x", "z"],
             "saved_bytes": 300, "saved_s": 3e-6, "bytes": 900}]
        nan = float("nan")
        groups = _dataflow.group_opportunities([opp(a, nan, 100, 300, ["x"]), opp(b, nan, 900, 30, ["y"])])
        assert [gr["ops"] for gr in groups] == [b, a]  # no time: most bytes first
        groups = _dataflow.group_opportunities([opp(a, nan, 100, 300, ["x"]), opp(b, 1e-9, 1, 3, ["y"])])
        assert [gr["ops"] for gr in groups] == [b, a]  # a time before none

    def test_phase_of_a_chain_and_no_edges(self):
        g = Graph()
        g.call("aten.add.Tensor", "ewise", [(1, 400)], [(2, 400)], vector=100, phase=9)  # no phase has code 9
        g.call("aten.relu.default", "ewise", [(2, 400)], [(3, 400)], vector=100, phase=9)
        (f,) = g.report().fusion_opportunities()
        assert f.phase == "?"
        g = Graph()
        g.call("aten.add.Tensor", "ewise", [(1, 400)], [(2, 400)], vector=100)
        g.call("aten.relu.default", "ewise", [(5, 400)], [(3, 400)], vector=100)
        assert g.report().fusion_opportunities() == []
