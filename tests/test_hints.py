"""Hints on hand-built op streams: each rule fires on its evidence with figures computed here, and stays silent
when the evidence does not support it."""

import math

import pytest

from _graph import ACT, BF16, F32, MASK, QKV, SCORES, Graph, attention, ceilings, chain


def kinds(r, **kw):
    return [h.kind for h in r.hints(**kw)]


def one(r, kind):
    hs = [h for h in r.hints() if h.kind == kind]
    assert len(hs) == 1, [str(h) for h in r.hints()]
    return hs[0]


# ---- attention -> SDPA ------------------------------------------------------------------------------------------
def test_math_path_attention_gives_the_sdpa_hint():
    r = attention().report()
    h = one(r, "sdpa")
    # scores written by the first product, re-read and rewritten by the scale and the softmax, read by the second
    # product: three S-sized writes and three S-sized reads
    assert h.saved_bytes == 6 * SCORES
    assert h.records == [0, 1, 2, 3]
    assert h.evidence["score_bytes"] == SCORES
    t_before = (max(2 * 8 * 128 * 128 * 32 / 2e12, (2 * QKV + SCORES) / 1e11) + 2 * SCORES / 1e11
                + 2 * SCORES / 1e11 + max(2 * 8 * 128 * 128 * 32 / 2e12, (SCORES + 2 * QKV) / 1e11))
    t_after = max(2 * 2 * 8 * 128 * 128 * 32 / 2e12, (4 * QKV) / 1e11)
    assert h.saved_s == pytest.approx(t_before - t_after, rel=1e-12)
    assert h.modules == ["attn"]
    assert "scaled_dot_product_attention" in h.message
    assert kinds(r)[0] == "sdpa"  # the largest saving comes first
    assert "small_gemm" not in kinds(r)  # its memory-bound products are the attention's: no batching advice


def test_no_sdpa_hint_without_attention_or_without_the_second_product():
    assert "sdpa" not in kinds(chain().report())
    g = attention()
    g.rows = g.rows[:3]  # a softmax over scores that no product reads (a classifier head, say)
    g.acc = [a for a in g.acc if a[0] < 3]
    assert "sdpa" not in kinds(g.report())
    assert "sdpa" not in kinds(attention().report(with_accesses=False))  # no dataflow, no evidence


# ---- the acceptance chain ---------------------------------------------------------------------------------------
def test_chain_hints_dropout_mask_and_not_the_others():
    r = chain().report()
    ks = kinds(r)
    h = one(r, "dropout_mask")
    assert h.saved_bytes == MASK and h.evidence["mask_reread_bytes"] == 0
    assert h.saved_s == pytest.approx(MASK / 1e11)
    for absent in ("sdpa", "matmul_precision", "layout_copies", "cast_pingpong", "optimizer_fused",
                   "optimizer_state_init", "op_overhead"):
        assert absent not in ks


def test_dropout_mask_read_back_in_backward_counts_twice():
    g = chain()
    g.call("aten.native_dropout_backward.default", "ewise", [(19, ACT), (14, MASK)], [(20, ACT)], vector=2 * 64 * 128,
           phase=1)
    h = one(g.report(), "dropout_mask")
    assert h.saved_bytes == 2 * MASK and h.evidence["mask_reread_bytes"] == MASK


# ---- fp32 matrix products on a device with faster units --------------------------------------------------------
N = 2048
MM_BYTES = 3 * N * N * 4
MM_FLOPS = 2 * N ** 3


def big_mm(ceil, dtype=F32):
    g = Graph()
    g.call("aten.mm.default", "mm", [(1, N * N * 4), (2, N * N * 4)], [(3, N * N * 4)], matrix=MM_FLOPS, dtype=dtype)
    return g.report(ceil=ceil)


def test_fp32_matmul_on_a_device_with_bf16_units():
    c = ceilings(device="cuda", vector=2e13, matrix=5e13, dram=3e12,
                 extra_peaks={("matrix", "bfloat16"): 1e15, ("matrix", "tfloat32"): 5e14})
    h = one(big_mm(c), "matmul_precision")
    before = max(MM_FLOPS / 5e13, MM_BYTES / 3e12)
    tf32 = before - max(MM_FLOPS / 5e14, MM_BYTES / 3e12)
    bf16 = before - max(MM_FLOPS / 1e15, MM_BYTES * 0.5 / 3e12)
    assert h.saved_s == pytest.approx(max(tf32, bf16), rel=1e-12)
    assert "bfloat16" in h.message and h.evidence["bfloat16_matrix_peak"] == 1e15


def test_no_matmul_precision_hint_without_faster_units_or_for_low_precision_products():
    assert "matmul_precision" not in kinds(big_mm(ceilings()))  # the CPU test ceilings: fp32 only
    c = ceilings(device="cuda", matrix=5e13, extra_peaks={("matrix", "bfloat16"): 1e15})
    assert "matmul_precision" not in kinds(big_mm(c, dtype=BF16))


def test_no_matmul_precision_hint_for_memory_bound_products():
    c = ceilings(device="cuda", matrix=5e13, dram=3e12, extra_peaks={("matrix", "tfloat32"): 5e14})
    g = Graph()  # a matrix-vector-like product: intensity ~0.5, far below the ridge; TF32 saves nothing
    g.call("aten.mm.default", "mm", [(1, N * N * 4), (2, N * 4)], [(3, N * 4)], matrix=2 * N * N)
    assert "matmul_precision" not in kinds(g.report(ceil=c))


# ---- GEMMs below the ridge ----------------------------------------------------------------------------------------
def test_small_gemms_hint_and_its_bound():
    g = Graph()
    for i in range(4):  # (8 x 1024) @ (1024 x 1024): intensity ~3.9 FLOP/B, ridge 20
        g.call("aten.mm.default", "mm", [(10 + i, 8 * 1024 * 4), (1, 1024 * 1024 * 4)], [(20 + i, 8 * 1024 * 4)],
               matrix=2 * 8 * 1024 * 1024)
    h = one(g.report(), "small_gemm")
    t = (2 * 8 * 1024 * 4 + 1024 * 1024 * 4) / 1e11
    assert h.saved_s == pytest.approx(4 * (t - 2 * 8 * 1024 * 1024 / 2e12), rel=1e-12)
    assert h.evidence["ridge"] == pytest.approx(20.0)
    assert "small_gemm" not in kinds(big_mm(ceilings()))  # compute-bound: nothing to batch


# ---- layout copies, cast ping-pong ----------------------------------------------------------------------------
def test_layout_copies_large_share_only():
    g = chain()
    g.call("aten.clone.default", "copy", [(16, ACT)], [(30, ACT)])
    g.call("aten.cat.default", "copy", [(30, ACT), (16, ACT)], [(31, 2 * ACT)])
    r = g.report()
    h = one(r, "layout_copies")
    assert h.saved_bytes == 6 * ACT
    assert h.evidence["share_of_bytes"] == pytest.approx(6 * ACT / int(r.bytes))
    assert "layout_copies" not in kinds(chain().report())
    g2 = chain()
    g2.call("aten.clone.default", "copy", [(16, 100)], [(30, 100)])  # a sliver of the bytes
    assert "layout_copies" not in kinds(g2.report())


def test_cast_there_and_back():
    g = Graph()
    n = 1 << 20
    g.call("aten._to_copy.default", "copy", [(1, 4 * n)], [(2, 2 * n)], dtype=F32)
    g.call("aten._to_copy.default", "copy", [(2, 2 * n)], [(3, 4 * n)], dtype=BF16)
    g.call("aten.relu.default", "ewise", [(3, 4 * n)], [(4, 4 * n)], vector=n)
    h = one(g.report(), "cast_pingpong")
    assert h.saved_bytes == 12 * n and h.saved_s == pytest.approx(12 * n / 1e11)
    one_way = Graph()
    one_way.call("aten._to_copy.default", "copy", [(1, 4 * n)], [(2, 2 * n)], dtype=F32)
    one_way.call("aten.relu.default", "ewise", [(2, 2 * n)], [(4, 2 * n)], vector=n, dtype=BF16)
    assert "cast_pingpong" not in kinds(one_way.report())


# ---- optimizer ------------------------------------------------------------------------------------------------
P = 1 << 20  # bytes of one parameter (and of its gradient and each Adam state)


def adam_step(g, p=1, grad=2, m=3, v=4, fused=False, init=False):
    if init:
        g.call("aten.zeros_like.default", "fill", [], [(m, P)], phase=2)
        g.call("aten.zeros_like.default", "fill", [], [(v, P)], phase=2)
    if fused:
        g.call("aten._fused_adam_.default", "foreach", [(p, P), (grad, P), (m, P), (v, P)], [(p, P), (m, P), (v, P)],
               vector=10 * P // 4, phase=2)
        return g
    g.call("aten.mul_.Tensor", "ewise", [(m, P)], [(m, P)], vector=P // 4, phase=2)
    g.call("aten.add_.Tensor", "ewise", [(m, P), (grad, P)], [(m, P)], vector=P // 4, phase=2)
    g.call("aten.mul_.Tensor", "ewise", [(v, P)], [(v, P)], vector=P // 4, phase=2)
    g.call("aten.addcmul_.default", "ewise", [(v, P), (grad, P)], [(v, P)], vector=3 * P // 4, phase=2)
    g.call("aten.addcdiv_.default", "ewise", [(p, P), (m, P), (v, P)], [(p, P)], vector=3 * P // 4, phase=2)
    return g


def test_unfused_optimizer_step():
    h = one(adam_step(Graph()).report(), "optimizer_fused")
    # 14 P moved; a fused step reads p, grad, m, v once (4 P) and writes p, m, v once (3 P)
    assert h.evidence["bytes"] == 14 * P and h.evidence["fused_bytes"] == 7 * P
    assert h.saved_bytes == 7 * P and h.saved_s == pytest.approx(7 * P / 1e11)
    assert "fused=True" in h.message and "foreach=True" in h.message


def test_fused_optimizer_and_warm_state_give_no_optimizer_hint():
    ks = kinds(adam_step(Graph(), fused=True).report())
    assert "optimizer_fused" not in ks and "optimizer_state_init" not in ks


def test_state_initialised_in_the_measured_step():
    h = one(adam_step(Graph(), init=True).report(), "optimizer_state_init")
    assert h.saved_bytes == 2 * P and h.evidence["calls"] == 2
    assert h.saved_s == pytest.approx(2 * P / 1e11)
    assert "optimizer_state_init" not in kinds(adam_step(Graph()).report())


# ---- per-op overhead ------------------------------------------------------------------------------------------
def tiny_ops(n):
    g = Graph()
    for i in range(n):
        g.call("aten.add.Tensor", "ewise", [(i, 400)], [(i + 10000, 400)], vector=100, t=20e-6)
    return g


def test_overhead_dominated_step():
    g = tiny_ops(200)  # 200 calls of 8 ns at the roof, each measured at 20 us, in 10 ms of wall time
    r = g.report(wall_time=0.01, overhead={"counting_per_op_s": 5e-6})
    h = one(r, "op_overhead")
    wall = 0.01 - 200 * 5e-6
    assert h.saved_s == pytest.approx(wall - 200 * 20e-6, rel=1e-9)
    assert h.evidence["instrumentation_s"] == pytest.approx(200 * 5e-6)


def test_no_overhead_hint_when_the_ops_fill_the_wall_time_or_are_few():
    g = tiny_ops(200)
    assert "op_overhead" not in kinds(g.report(wall_time=200 * 20e-6 * 1.2))
    assert "op_overhead" not in kinds(tiny_ops(10).report(wall_time=0.01))
    assert "op_overhead" not in kinds(g.report())  # no wall time: no evidence
    untimed = Graph()  # without per-op times, time between ops cannot be told from slow kernels
    for i in range(200):
        untimed.call("aten.add.Tensor", "ewise", [(i, 400)], [(i + 10000, 400)], vector=100)
    assert "op_overhead" not in kinds(untimed.report(wall_time=0.01))
    big = Graph()  # most of the wall time between ops, but the ops are not tiny (84 us at the roof)
    for i in range(100):
        big.call("aten.add.Tensor", "ewise", [(i, 4 << 20)], [(i + 10000, 4 << 20)], vector=1 << 20, t=1e-3)
    assert "op_overhead" not in kinds(big.report(wall_time=1.0))


# ---- general --------------------------------------------------------------------------------------------------
def test_every_hint_has_its_numbers_and_min_share_filters():
    r = attention(chain()).report()
    hs = r.hints()
    assert hs
    for h in hs:
        assert h.evidence and (math.isfinite(h.saved_s) or h.saved_bytes)
        assert str(h).startswith(f"[{h.kind}]")
    assert [h.saved_s for h in hs] == sorted((h.saved_s for h in hs), reverse=True)
    assert r.hints(min_share=1.0) == []
    with pytest.raises(ValueError, match="min_share"):
        r.hints(min_share=2)


# ---- measured optimizer steps (the recorder's access table) ------------------------------------------------------
def test_measured_adamw_steps():
    torch = pytest.importorskip("torch")
    import roofline

    torch.manual_seed(0)

    def step(fused):
        model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.GELU(), torch.nn.Linear(256, 256))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False, fused=fused)
        x = torch.randn(32, 256)
        reports = []
        for _ in range(2):
            with roofline.measure(model, ceilings=ceilings()) as r:
                model(x).square().mean().backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
            reports.append(r)
        return reports

    first, warm = step(fused=None)
    assert "optimizer_state_init" in kinds(first)
    h = one(first, "optimizer_state_init")
    params = 2 * (256 * 256 + 256) * 4
    assert h.saved_bytes == 2 * params  # exp_avg and exp_avg_sq of every parameter, zero-filled
    assert "optimizer_state_init" not in kinds(warm)
    hf = one(warm, "optimizer_fused")
    assert not hf.evidence["foreach"] and hf.evidence["bytes"] > hf.evidence["fused_bytes"]
    _, warm_fused = step(fused=True)
    assert "optimizer_fused" not in kinds(warm_fused) and "optimizer_state_init" not in kinds(warm_fused)


def test_measured_cast_pingpong_and_layout_copies():
    torch = pytest.importorskip("torch")
    import roofline

    x = torch.randn(256, 512)
    with torch.no_grad(), roofline.measure(ceilings=ceilings()) as r:
        torch.relu(x.to(torch.bfloat16).to(torch.float32))
    h = one(r, "cast_pingpong")
    n = 256 * 512
    assert h.saved_bytes == (4 * n + 2 * n) + (2 * n + 4 * n)
    with torch.no_grad(), roofline.measure(ceilings=ceilings()) as r1:
        torch.relu(x.to(torch.bfloat16))
    assert "cast_pingpong" not in kinds(r1)
    with torch.no_grad(), roofline.measure(ceilings=ceilings()) as r2:
        torch.relu(x.t().contiguous())
    h = one(r2, "layout_copies")
    assert h.saved_bytes == 2 * 4 * n and h.evidence["share_of_bytes"] == pytest.approx(0.5)
    with torch.no_grad(), roofline.measure(ceilings=ceilings()) as r3:
        torch.relu(x.t())
    assert "layout_copies" not in kinds(r3)


def test_optimizer_temporaries_are_not_fused_traffic():
    """AdamW as torch runs it per parameter: the denominator sqrt(v) (+ eps, in place) is a temporary a fused
    kernel keeps in registers, so the fused step still reads p, grad, m, v once and writes p, m, v once."""
    p, grad, m, v, t = 1, 2, 3, 4, 5
    g = Graph()
    g.call("aten.lerp_.Scalar", "ewise", [(m, P), (grad, P)], [(m, P)], vector=P // 4, phase=2)
    g.call("aten.mul_.Tensor", "ewise", [(v, P)], [(v, P)], vector=P // 4, phase=2)
    g.call("aten.addcmul_.default", "ewise", [(v, P), (grad, P)], [(v, P)], vector=3 * P // 4, phase=2)
    g.call("aten.sqrt.default", "ewise", [(v, P)], [(t, P)], vector=P // 4, phase=2)
    g.call("aten.add_.Scalar", "ewise", [(t, P)], [(t, P)], vector=P // 4, phase=2)
    g.call("aten.addcdiv_.default", "ewise", [(p, P), (m, P), (t, P)], [(p, P)], vector=3 * P // 4, phase=2)
    h = one(g.report(), "optimizer_fused")
    # moved: 3 + 2 + 3 + 2 + 2 + 4 = 16 P
    assert h.evidence["bytes"] == 16 * P and h.evidence["fused_bytes"] == 7 * P and h.saved_bytes == 9 * P
