"""Four real training steps: roofline's FlopCounterMode-compatible counts equal FlopCounterMode's, module by module
and op by op; the meta device gives the same counts as the CPU; nothing is left without a formula."""

import contextlib
import copy

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")
pytest.importorskip("transformers")

from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

import roofline  # noqa: E402
from _models import build, train_step  # noqa: E402

MODELS = ["resnet50", "vit_b_16", "gpt2", "llama"]


@pytest.fixture(scope="module")
def built():
    """(name, device) -> (model, inputs) as ``_models.build`` returns them, each call a model of its own: built once
    (initialising GPT-2 small's weights takes longer than copying them), then copied, the random number generator
    put back where the build left it (as if built anew)."""
    cache = {}

    def get(name, device="cpu"):
        if (name, device) not in cache:
            model, inputs = build(name, device)
            cache[name, device] = model, inputs, torch.get_rng_state()
        model, inputs, rng = cache[name, device]
        torch.set_rng_state(rng)
        return copy.deepcopy(model), inputs

    return get


@pytest.fixture(scope="module")
def fcm_counts(built):
    """name -> FlopCounterMode's counts of the model's training step; each model counted once per module."""
    cache = {}

    def get(name):
        if name not in cache:
            model, inputs = built(name)
            with FlopCounterMode(display=False) as fcm:
                train_step(model, inputs)
            cache[name] = fcm.get_flop_counts()
        return cache[name]

    return get


def _ran_fused_attention(r):
    """Whether a fused scaled_dot_product_attention kernel ran (the math backend's ops are bmm, softmax, ...)."""
    return any(op.startswith(("aten._scaled_dot_product_", "aten._flash_attention", "aten._efficient_attention"))
               and "_math" not in op for op in r.by_op())


@pytest.fixture(scope="module")
def runs(built):
    """(name, device, attention backend) -> the report of one training step; each measured once per module."""
    from torch.nn.attention import sdpa_kernel

    cache = {}

    def get(name, device="cpu", backend=None):
        key = (name, device, backend)
        if key not in cache:
            if device == "cpu" and backend is not None and not _ran_fused_attention(get(name)):
                # The backend picks the kernel scaled_dot_product_attention runs, nothing else: a step that ran
                # no fused kernel (no attention, or the math backend already: GPT-2's explicit mask) is this step.
                cache[key] = get(name)
            else:
                model, inputs = built(name, device)
                with sdpa_kernel(backend) if backend is not None else contextlib.nullcontext():
                    with roofline.measure(model) as r:
                        train_step(model, inputs)
                cache[key] = r
        return cache[key]

    return get


@pytest.mark.parametrize("name", MODELS)
def test_matches_flop_counter_mode_exactly(name, runs, fcm_counts):
    r = runs(name)
    expected = fcm_counts(name)
    got = r.flop_counter_compatible()
    assert set(got) == set(expected), set(got) ^ set(expected)
    for module in expected:
        assert got[module] == expected[module], module
    assert r.unknown_ops == {}
    assert r.errors == {}
    # every phase is present and attributed
    assert set(r.by_phase()) == {"forward", "backward", "optimizer"}


@pytest.mark.parametrize("name", MODELS)
def test_meta_device_counts_equal_cpu(name, runs):
    """Every count is the same on meta, for the same kernels. Two things differ by device and are pinned here:
    scaled_dot_product_attention picks its backend per device (the CPU has a fused kernel, meta always takes the
    math backend), so both runs use the math backend; and backward module attribution follows torch's
    ModuleTracker, which differs when autograd runs on a worker thread (meta, CUDA) rather than the caller's
    thread (FlopCounterMode differs the same way), so module roll-ups are compared for the forward phase and the
    totals for every phase."""
    from torch.nn.attention import SDPBackend

    cpu, meta = runs(name, "cpu", SDPBackend.MATH), runs(name, "meta", SDPBackend.MATH)
    assert meta.flop_counter_compatible()["Global"] == cpu.flop_counter_compatible()["Global"]
    assert _counts(meta.by_module(phase="forward")) == _counts(cpu.by_module(phase="forward"))
    for phase in ("forward", "backward", "optimizer"):
        assert _costly(meta.by_op(phase)) == _costly(cpu.by_op(phase)), phase
    for field in ("matrix_flops", "vector_flops", "special_ops", "bytes_read", "bytes_written"):
        assert getattr(meta, field) == getattr(cpu, field), field
    assert _costly(meta.by_op()) == _costly(cpu.by_op())
    assert meta.unknown_ops == {} and cpu.unknown_ops == {}
    assert meta.errors == {} and cpu.errors == {}


def _counts(rollup):
    """Roll-up rows without the call counts (zero-cost calls such as lift_fresh differ between devices)."""
    return {k: {f: v for f, v in row.items() if f != "calls"} for k, row in rollup.items()}


def _costly(by_op):
    """Drop ops that cost nothing (e.g. lift_fresh of a Python constant, which only the CPU run creates)."""
    return {k: v for k, v in by_op.items() if v["flops"] or v["bytes"]}


def test_gpt2_math_attention_equals_flop_counter(runs, fcm_counts, built):
    """GPT-2 passes an explicit causal mask, so the CPU runs the math backend: bmm on the full score matrix (the mask
    is applied after the product). That work really is done in full, so the true count equals FlopCounterMode's."""
    r = runs("gpt2")
    assert r.matrix_flops == sum(fcm_counts("gpt2")["Global"].values())
    layers = len(built("gpt2")[0].transformer.h)  # 2 in the suite, 12 in breadth runs
    assert r.by_op()["aten.bmm.default"]["calls"] == layers * 2 * 3  # QK^T, PV forward; 2 products each backward


def test_llama_causal_gqa_attention_true_count(runs, fcm_counts):
    """Llama (is_causal=True, grouped-query attention: 8 query heads, 2 KV heads) runs the CPU fused kernel
    _scaled_dot_product_flash_attention_for_cpu, for which FlopCounterMode has no formula: it counts 0 for
    attention. roofline counts the causal pairs only, for all 8 query heads."""
    r = runs("llama")
    fcm_total = sum(fcm_counts("llama")["Global"].values())
    b, hq, s, d, layers = 2, 8, 128, 32, 2
    pairs = s * (s + 1) // 2  # causal: query i attends to keys 0..i -> 8256 of the 16384 pairs
    fwd = 2 * b * hq * pairs * (d + d)  # Q K^T and P V: 2 FLOPs per multiply-add
    bwd = 2 * b * hq * pairs * (3 * d + 2 * d)  # recompute S, dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q
    assert r.matrix_flops == fcm_total + layers * (fwd + bwd)
    attn = {k: v for k, v in r.by_op().items() if "flash_attention_for_cpu" in k}
    b, hq, s, d, layers = 2, 8, 128, 32, 2
    pairs = s * (s + 1) // 2
    assert attn["aten._scaled_dot_product_flash_attention_for_cpu.default"]["matrix_flops"] == \
        layers * 2 * b * hq * pairs * (2 * d)
    assert attn["aten._scaled_dot_product_flash_attention_for_cpu_backward.default"]["matrix_flops"] == \
        layers * 2 * b * hq * pairs * (5 * d)


def test_llama3_8b_shape_on_meta():
    """Count a Llama-3-8B-shaped forward on the meta device (it would need 32 GB of fp32 weights) and check its
    matrix FLOPs against 2 x (matmul parameters) x tokens + the causal attention term."""
    from transformers import LlamaConfig, LlamaForCausalLM

    L, H, I, V, S = 32, 4096, 14336, 128256, 2048
    nq, nkv, d = 32, 8, 128
    cfg = LlamaConfig(hidden_size=H, intermediate_size=I, num_hidden_layers=L, num_attention_heads=nq,
                      num_key_value_heads=nkv, vocab_size=V, max_position_embeddings=S)
    with torch.device("meta"):
        model = LlamaForCausalLM(cfg)
        ids = torch.zeros(1, S, dtype=torch.long)
    with torch.no_grad(), roofline.measure(model) as r:
        model(ids)
    per_layer = H * (nq * d) + 2 * H * (nkv * d) + (nq * d) * H + 3 * H * I  # q, k+v, o, gate+up+down
    matmul_params = L * per_layer + H * V  # + lm_head (the embedding lookup is not a product)
    tokens = S
    # On meta, scaled_dot_product_attention takes the math backend: Q K^T and P V over the full S x S score
    # matrix (the causal mask is applied to the scores), for each of the 32 query heads (GQA's 8 KV heads are
    # expanded). 2 FLOPs per multiply-add.
    attention = L * 2 * nq * (S * S) * (2 * d)
    assert r.matrix_flops == 2 * matmul_params * tokens + attention
    assert r.unknown_ops == {} and r.errors == {}
    assert set(r.by_phase()) == {"forward"}
