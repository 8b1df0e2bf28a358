"""roofline.llm: closed-form parameter, FLOP and byte counts of decoder transformers, checked by hand and against
roofline.measure on small random-init transformers models."""

import subprocess
import sys

import pytest

from roofline import llm

# Llama-3-8B: 32 layers, hidden 4096, 32 query / 8 KV heads of 128, intermediate 14336, vocab 128256, untied.
LLAMA3_8B = llm.DecoderConfig(hidden=4096, intermediate=14336, layers=32, heads=32, kv_heads=8, vocab=128256)
# Llama-2-7B: 32 layers, hidden 4096, 32 heads (no GQA), intermediate 11008, vocab 32000, untied.
LLAMA2_7B = dict(hidden=4096, intermediate=11008, layers=32, heads=32, vocab=32000)
SMALL_LLAMA = dict(hidden_size=256, intermediate_size=688, num_hidden_layers=2, num_attention_heads=8,
                   num_key_value_heads=2, vocab_size=1000, max_position_embeddings=256)
SMALL_GPT2 = dict(n_layer=2, n_embd=128, n_head=4, vocab_size=1000, n_positions=128, bos_token_id=0,
                  eos_token_id=0)


def test_llama3_8b_parameters_by_hand():
    h, kv, i, v, layers = 4096, 8 * 128, 14336, 128256, 32
    per_layer = h * h + 2 * h * kv + h * h + 3 * h * i  # q, k + v, o, gate + up + down
    assert per_layer == 16_777_216 + 8_388_608 + 16_777_216 + 176_160_768 == 218_103_808
    matmul = layers * per_layer + h * v  # + LM head 525_336_576; the embedding lookup is not a product
    assert llm.matmul_param_count(LLAMA3_8B) == matmul == 7_504_658_432
    norms = layers * 2 * h + h  # two RMSNorm weights per block + the final norm
    assert llm.param_count(LLAMA3_8B) == matmul + h * v + norms == 8_030_261_248  # the published 8.03B
    assert llm.param_count(LLAMA3_8B, exclude_embeddings=True) == 8_030_261_248 - h * v


def test_llama3_8b_flops_and_kv_cache_by_hand():
    p, s = 7_504_658_432, 2048
    causal = 32 * 2 * 2 * 32 * (s * (s + 1) // 2) * 128  # layers x (QK^T + PV) x 2 FLOPs x heads x pairs x d
    full = 32 * 2 * 2 * 32 * (s * s) * 128
    assert llm.forward_flops(LLAMA3_8B, s) == {"2PT": 2 * p * s, "attention": causal, "total": 2 * p * s + causal}
    # the meta-device forward of tests/test_models.py::test_llama3_8b_shape_on_meta (math backend: full S x S)
    assert llm.forward_flops(LLAMA3_8B, s, attention="full")["total"] == 2 * p * s + full
    # four sequences of 2048: four times the attention of one
    assert llm.attention_flops(LLAMA3_8B, 4 * s, seq_len=s) == 4 * causal
    t = llm.training_flops(LLAMA3_8B, s)
    assert t == {"6PT": 6 * p * s, "attention": 3 * causal, "total": 6 * p * s + 3 * causal}
    assert llm.training_flops(LLAMA3_8B, s, recompute_attention=True)["attention"] == 7 * causal // 2
    # KV cache: layers x (K and V) x 8 KV heads x 128 x 8192 tokens x 2 bytes = 1 GiB per sequence in bf16
    assert llm.kv_cache_bytes(LLAMA3_8B, 1, 8192, "bfloat16") == 32 * 2 * 8 * 128 * 8192 * 2 == 1 << 30
    assert llm.kv_cache_bytes(LLAMA3_8B, 3, 8192, 4) == 3 * 2 * (1 << 30)


def test_decode_step_by_hand():
    b, ctx = 8, 1000
    weights = (8_030_261_248 - 128256 * 4096) + b * 4096  # all but the embedding table, + 8 gathered rows
    kv = b * 32 * 2 * 8 * 128 * 2  # per token, bf16
    assert llm.decode_step_bytes(LLAMA3_8B, b, ctx, "bfloat16") == {
        "weights": 2 * weights, "kv_read": kv * ctx, "kv_write": kv, "total": 2 * weights + kv * (ctx + 1)}
    f = llm.decode_step_flops(LLAMA3_8B, b, ctx)
    assert f["2PT"] == 2 * 7_504_658_432 * b
    assert f["attention"] == b * 32 * 2 * 2 * 32 * (ctx + 1) * 128
    assert llm.tokens_per_second(0.025, b) == pytest.approx(320.0)
    with pytest.raises(ValueError):
        llm.tokens_per_second(0, 1)


def test_llama2_7b_forward_matches_published_figure():
    """calflops reports about 1700 GFLOPs for Llama-2-7B at batch 1, sequence 128."""
    p = 32 * (4 * 4096 * 4096 + 3 * 4096 * 11008) + 4096 * 32000  # 6_607_077_376 matmul parameters
    f = llm.forward_flops(LLAMA2_7B, 128)
    assert f["2PT"] == 2 * p * 128 == 1_691_411_808_256
    check = llm.cross_check(f["total"], 1700e9)
    assert check and abs(check.rel_diff) < 0.005
    assert "within 2%" in str(check)


def test_gpt2_124m_by_hand():
    h, v, pos, layers = 768, 50257, 1024, 12
    per_layer = (2 * h) + (h * 3 * h + 3 * h) + (h * h + h) + (2 * h) + (h * 4 * h + 4 * h) + (4 * h * h + h)
    total = v * h + pos * h + layers * per_layer + 2 * h  # tied LM head: not a second matrix
    gpt2 = dict(hidden=h, intermediate=4 * h, layers=layers, heads=12, vocab=v, tied_embeddings=True, mlp="plain",
                norm="layer", attention_bias=True, mlp_bias=True, positions=pos)
    assert llm.param_count(gpt2) == total == 124_439_808
    assert llm.matmul_param_count(gpt2) == layers * 12 * h * h + h * v  # the tied LM head is still a product


def test_cross_check_and_validation():
    c = llm.cross_check(103, 100)
    assert c.measured == 103 and c.expected == 100 and c.rel_diff == pytest.approx(0.03) and not c
    assert llm.cross_check(99, {"total": 100}, rel=0.02).ok
    assert "NOT within" in str(c)
    with pytest.raises(ValueError, match="attention"):
        llm.forward_flops(LLAMA3_8B, 16, attention="sliding")
    with pytest.raises(ValueError, match="whole number"):
        llm.forward_flops(LLAMA3_8B, 100, seq_len=30)
    with pytest.raises(ValueError, match="multiple of kv_heads"):
        llm.DecoderConfig(hidden=48, intermediate=128, layers=1, heads=6, kv_heads=4, vocab=10)
    with pytest.raises(TypeError):
        llm.param_count(42)


def test_importing_does_not_import_torch():
    code = ("import sys; from roofline import llm; "
            "assert llm.forward_flops(dict(hidden=64, intermediate=128, layers=1, heads=4, vocab=10), 8)['total']; "
            "assert 'torch' not in sys.modules")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


# ---- against roofline.measure -------------------------------------------------------------------------------------
def _llama(device):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(**SMALL_LLAMA)
    torch.manual_seed(0)
    with torch.device(device):
        return cfg, transformers.LlamaForCausalLM(cfg), torch.randint(0, 1000, (2, 128))


def _gpt2(device):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(**SMALL_GPT2)
    torch.manual_seed(0)
    with torch.device(device):
        return cfg, transformers.GPT2LMHeadModel(cfg), torch.randint(0, 1000, (2, 64))


@pytest.mark.parametrize("build", [_llama, _gpt2])
def test_param_counts_equal_the_module(build):
    cfg, model, _ = build("meta")
    c = llm.DecoderConfig.from_hf(cfg)
    assert llm.param_count(cfg) == llm.param_count(model) == sum(p.numel() for p in model.parameters())
    assert llm.param_count(c, exclude_embeddings=True) == llm.param_count(model, exclude_embeddings=True)
    assert llm.matmul_param_count(c) == llm.matmul_param_count(model)


@pytest.mark.parametrize("build, device, attention", [
    (_llama, "meta", "full"),   # meta: scaled_dot_product_attention takes the math backend, full S x S scores
    (_llama, "cpu", "causal"),  # CPU fused kernel (is_causal=True): S(S+1)/2 pairs
    (_gpt2, "meta", "full"),
    (_gpt2, "cpu", "full"),     # GPT-2 passes an explicit mask: math backend on every device
])
def test_forward_formula_equals_measured_matrix_flops(build, device, attention):
    torch = pytest.importorskip("torch")

    import roofline

    cfg, model, ids = build(device)
    with torch.no_grad(), roofline.measure(model) as r:
        model(ids)
    expected = llm.forward_flops(cfg, ids.numel(), seq_len=ids.shape[1], attention=attention)
    assert r.matrix_flops == expected["total"]
    assert llm.cross_check(r, expected, rel=0.0)
    wrong = "causal" if attention == "full" else "full"
    assert r.matrix_flops != llm.forward_flops(cfg, ids.numel(), seq_len=ids.shape[1], attention=wrong)["total"]


@pytest.mark.parametrize("device, attention, recompute", [("meta", "full", False), ("cpu", "causal", True)])
def test_training_formula_equals_measured_matrix_flops(device, attention, recompute):
    """Math backend (meta): attention backward is four bmm, 3 x forward like every product. CPU fused kernel: the
    backward recomputes the scores, five products per pair."""
    import roofline

    cfg, model, ids = _llama(device)
    with roofline.measure(model) as r:
        model(ids, labels=ids).loss.backward()
    expected = llm.training_flops(cfg, ids.numel(), seq_len=ids.shape[1], attention=attention,
                                  recompute_attention=recompute)
    assert r.matrix_flops == expected["total"]


def test_decode_step_against_measured():
    """One cached decode step on the CPU: the matrix FLOPs are exact; the measured compulsory bytes are at least the
    ideal step's (the transformers cache concatenates, which copies the cache)."""
    import inspect

    torch = pytest.importorskip("torch")

    import roofline

    cfg, model, _ = _llama("cpu")
    b, ctx = 4, 100
    # newer transformers name the argument `cache`, older ones `past_key_values`
    arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    with torch.no_grad():
        cache = model(torch.randint(0, 1000, (b, ctx)), use_cache=True).past_key_values
        with roofline.measure(model) as r:
            model(torch.randint(0, 1000, (b, 1)), **{arg: cache}, use_cache=True)
    assert r.matrix_flops == llm.decode_step_flops(cfg, b, ctx)["total"]
    ideal = llm.decode_step_bytes(cfg, b, ctx, "float32")
    assert r.bytes >= ideal["total"]
    assert r.by_op()["aten.mm.default"]["bytes_read"] >= 4 * llm.matmul_param_count(cfg)  # each weight read once


# ---- predictions, step timing and utilisation ---------------------------------------------------------------------
def test_predict_decode_by_hand():
    """Llama-3-8B decode on the H100 SXM datasheet (989 TFLOP/s bf16, 3.35 TB/s): memory-bound at batch 1, where the
    step is the bytes over the bandwidth; compute-bound once the batch passes the ridge (~295 FLOP/byte)."""
    p = llm.predict_decode(LLAMA3_8B, 1, 1000)
    flops = llm.decode_step_flops(LLAMA3_8B, 1, 1000)["total"]
    nbytes = llm.decode_step_bytes(LLAMA3_8B, 1, 1000)["total"]
    assert p["flops"] == flops and p["bytes"] == nbytes
    assert p["ridge"] == pytest.approx(989e12 / 3.35e12)
    assert p["bound"] == "memory" and p["step_time"] == pytest.approx(nbytes / 3.35e12)
    assert p["tokens_per_second"] == pytest.approx(3.35e12 / nbytes)
    # batch 1024, one cached token: ~2 x 7.5e9 x 1024 FLOPs over ~16 GB of weights, intensity ~950 > ridge
    big = llm.predict_decode(LLAMA3_8B, 1024, 1)
    assert big["bound"] == "compute" and big["step_time"] == pytest.approx(big["flops"] / 989e12)
    assert big["tokens_per_second"] > 100 * p["tokens_per_second"]
    from roofline import devices

    a100 = llm.predict_decode(LLAMA3_8B, 1, 1000, device=devices.get("A100 SXM 80GB"))
    assert a100["step_time"] == pytest.approx(nbytes / 2.039e12)
    with pytest.raises(KeyError):
        llm.predict_decode(LLAMA3_8B, 1, 10, device="no such gpu")


def test_step_utilization_by_hand():
    from _reports import two_op_report

    r = two_op_report()
    u = llm.step_utilization(r, 20.0)
    # at their own peaks: 400 / 100 + 20 / 10 = 6 s of 20 s; 50 bytes / (20 s x 5 B/s)
    assert u["mfu"] == pytest.approx(6 / 20) and u["mbu"] == pytest.approx(50 / 100)
    assert u["flops"] == 420 and u["bytes"] == 50 and u["intensity"] == pytest.approx(8.4)
    assert u["achieved_flops"] == pytest.approx(21.0) and u["achieved_bytes"] == pytest.approx(2.5)
    r.wall_time = 20.0
    assert r.totals()["mfu"] == pytest.approx(u["mfu"]) and r.totals()["mbu"] == pytest.approx(u["mbu"])
    with pytest.raises(ValueError):
        llm.step_utilization(r, 0)


def test_time_step_counts_calls_and_picks_the_statistic(monkeypatch):
    """On a simulated clock (each step advances it by a set amount): which runs are timed and which statistic is
    returned are exact, whatever the load of the machine."""
    import time

    clock = [100.0]
    monkeypatch.setattr(time, "perf_counter", lambda: clock[0])

    def steps(durations):
        it = iter(durations)

        def step():
            clock[0] += next(it)

        return step

    # one warm-up run of 5 s (not timed), then runs of 1, 30, 2 and 4 s
    assert llm.time_step(steps([5.0, 1.0, 30.0, 2.0, 4.0]), repeats=4, warmup=1, statistic="min") == 1.0
    assert llm.time_step(steps([5.0, 1.0, 30.0, 2.0, 4.0]), repeats=4, warmup=1) == (2.0 + 4.0) / 2  # median
    assert llm.time_step(steps([7.0, 3.0, 9.0]), repeats=3, warmup=0) == 7.0
    calls = []
    llm.time_step(lambda: calls.append(1), repeats=4, warmup=2)
    assert len(calls) == 2 + 4
    with pytest.raises(ValueError):
        llm.time_step(lambda: None, repeats=0)
    with pytest.raises(ValueError):
        llm.time_step(lambda: None, warmup=-1)
    with pytest.raises(ValueError):
        llm.time_step(lambda: None, statistic="mean")


def test_prefill_repeat_and_decode_step():
    """A real transformers cache: the prompt runs once, the copy holds the batch, and a step with keep_context leaves
    the context length as it was; its matrix FLOPs are exactly decode_step_flops."""
    torch = pytest.importorskip("torch")

    import roofline

    cfg, model, _ = _llama("cpu")
    base = llm.prefill(model, 50)
    cache = llm.repeat_cache(base, 3)
    assert base.get_seq_length() == cache.get_seq_length() == 50
    with roofline.measure(model) as r:
        logits = llm.decode_step(model, cache, 3)
    assert logits.shape == (3, 1, cfg.vocab_size)
    assert cache.get_seq_length() == 50 and base.get_seq_length() == 50
    assert r.matrix_flops == llm.decode_step_flops(cfg, 3, 50)["total"]
    llm.decode_step(model, cache, 3, keep_context=False)
    assert cache.get_seq_length() == 51
    with torch.no_grad():
        assert llm.repeat_cache(base, 1).get_seq_length() == 50
    with pytest.raises(ValueError):
        llm.repeat_cache(base, 0)
