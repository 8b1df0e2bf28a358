"""roofline.llm at its edges: the boundaries of every argument check, the documented defaults written out as
arithmetic, the bound exactly at the ridge, and what one count_step of a tiny model is made of (which steps run,
which are counted, and that a transformers config is counted as it is)."""

import types

import pytest

from roofline import llm

# hidden 8, MLP 16 (gated), one layer of 2 heads of 4, vocab 10, untied: matmul parameters q, k, v, o 4 x 8 x 8 = 256,
# gate/up/down 3 x 8 x 16 = 384, LM head 8 x 10 = 80: 720
TINY = dict(hidden=8, intermediate=16, layers=1, heads=2, kv_heads=2, vocab=10)
TINY_MATMUL_PARAMS = 4 * 8 * 8 + 3 * 8 * 16 + 8 * 10


def _flash_attention_forward(seq_len):
    # Q K^T and P V over the causal pairs S(S+1)/2: 2 products x 2 FLOPs x heads 2 x head_dim 4
    return 2 * 2 * 2 * (seq_len * (seq_len + 1) // 2) * 4


# ---- DecoderConfig validation ------------------------------------------------------------------------------------
@pytest.mark.parametrize("field", ["hidden", "intermediate", "layers", "heads", "vocab"])
@pytest.mark.parametrize("bad", [0, -1, True, 8.0])
def test_decoder_config_refuses_a_size_that_is_not_a_positive_int(field, bad):
    exc = ValueError if type(bad) is int else TypeError  # the package's one int rule (roofline._util._ints)
    with pytest.raises(exc, match=rf"DecoderConfig: {field} must be an int >= 1, got {bad}"):
        llm.DecoderConfig(**{**TINY, field: bad})


def test_decoder_config_of_size_one_everywhere_is_valid():
    c = llm.DecoderConfig(hidden=1, intermediate=1, layers=1, heads=1, vocab=1)
    assert (c.kv_heads, c.head_dim) == (1, 1)


def test_zero_kv_heads_is_a_value_error_naming_kv_heads():
    # 0 must be caught before it divides heads
    with pytest.raises(ValueError, match="multiple of kv_heads 0"):
        llm.DecoderConfig(**{**TINY, "kv_heads": 0})


def test_two_experts_is_already_a_mixture_of_experts():
    cfg = types.SimpleNamespace(to_dict=dict, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                num_attention_heads=4, vocab_size=100, num_local_experts=2)
    with pytest.raises(ValueError, match=r"mixture-of-experts config \(num_local_experts=2\)"):
        llm.DecoderConfig.from_hf(cfg)


# ---- what counts as a module ---------------------------------------------------------------------------------------
class _ConfigDictWith(dict):
    """A dict of DecoderConfig fields that also carries one of nn.Module's two methods (not both)."""


def test_an_object_with_only_one_of_a_modules_methods_is_read_as_a_config():
    # per layer 720 - 80 = 640 matmul weights + two RMS norms (16), the final norm 8, embedding 80, LM head 80
    expected = 640 + 16 + 8 + 80 + 80
    only_parameters = _ConfigDictWith(TINY)
    only_parameters.parameters = lambda: iter(())
    only_modules = _ConfigDictWith(TINY)
    only_modules.modules = lambda: iter(())
    assert llm.param_count(only_parameters) == expected
    assert llm.param_count(only_modules) == expected


# ---- tokens and sequences ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("tokens, seq_len", [(0, None), (0, 4), (-4, None), (4.0, None), (4.0, 2)])
def test_tokens_must_be_a_positive_int(tokens, seq_len):
    exc = ValueError if type(tokens) is int else TypeError  # the package's one int rule (roofline._util._ints)
    with pytest.raises(exc, match="attention_flops: tokens must be an int >= 1"):
        llm.attention_flops(TINY, tokens, seq_len=seq_len)


def test_sequences_of_length_zero_are_a_value_error():
    with pytest.raises(ValueError, match="attention_flops: seq_len must be an int >= 1, got 0"):
        llm.attention_flops(TINY, 4, seq_len=0)
    # four sequences of one token: one pair each
    assert llm.attention_flops(TINY, 4, seq_len=1) == 4 * _flash_attention_forward(1)


# ---- bytes ---------------------------------------------------------------------------------------------------------
def test_kv_cache_bytes_defaults_to_two_bytes_an_element():
    # 1 sequence x 1 layer x (K, V) x kv_dim 8 x 10 tokens x 2 bytes
    assert llm.kv_cache_bytes(TINY, 1, 10) == 1 * 1 * 2 * 8 * 10 * 2 == 320


def test_one_byte_elements_are_valid_and_zero_is_not():
    assert llm.kv_cache_bytes(TINY, 1, 10, 1) == 1 * 1 * 2 * 8 * 10 * 1 == 160
    for bad in (0, -2):
        with pytest.raises(ValueError, match="dtype_bytes must be positive"):
            llm.kv_cache_bytes(TINY, 1, 10, bad)


# ---- predict_decode exactly at the ridge ---------------------------------------------------------------------------
def _device(peak, bandwidth):
    from roofline.devices import DeviceSpec

    return DeviceSpec(name="ridge test", vendor="test", memory_bandwidth=bandwidth,
                      peaks={("matrix", "bfloat16"): peak},
                      sources={"memory_bandwidth": "test", "peaks.matrix.bfloat16": "test"})


def test_a_decode_step_exactly_at_the_ridge_is_compute_bound():
    """Batch 1, 3 cached tokens. FLOPs: 2 x 720 + 2 x 2 x 2 heads x (3 + 1) pairs x 4 = 1568. Bytes (bfloat16):
    weights (640 + 16 + 8 + 80 LM head + one embedding row of 8) x 2 = 1504, the cache 2 x 8 x 3 x 2 = 96 read and
    2 x 8 x 2 = 32 written: 1632. A device of 1568 FLOP/s and 1632 B/s has its ridge exactly at the step's
    intensity: "memory" is below the ridge only."""
    flops, nbytes = 2 * 720 + 2 * 2 * 2 * 4 * 4, (640 + 16 + 8 + 80 + 8) * 2 + 96 + 32
    assert (flops, nbytes) == (1568, 1632)
    p = llm.predict_decode(TINY, 1, 3, device=_device(float(flops), float(nbytes)))
    assert p["intensity"] == p["ridge"] and p["step_time"] == 1.0
    assert p["bound"] == "compute"
    assert llm.predict_decode(TINY, 1, 3, device=_device(float(flops + 1), float(nbytes)))["bound"] == "memory"


# ---- step_utilization ----------------------------------------------------------------------------------------------
def _report_with_ceilings():
    from _reports import two_op_report

    return two_op_report()


def test_step_utilization_of_a_step_shorter_than_a_second():
    u = llm.step_utilization(_report_with_ceilings(), 0.5)
    # (400 / 100 + 20 / 10) s of work in 0.5 s; 50 bytes over 0.5 s x 5 B/s
    assert u["mfu"] == pytest.approx(6 / 0.5) and u["mbu"] == pytest.approx(50 / 2.5)


@pytest.mark.parametrize("seconds", [-1.0, -0.5, 0, 0.0, None])
def test_step_utilization_refuses_a_time_that_is_not_positive(seconds):
    with pytest.raises(ValueError, match="seconds must be positive"):
        llm.step_utilization(_report_with_ceilings(), seconds)


# ---- count_step: arguments -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, exc, match", [
    ({"batch": 0}, ValueError, "count_step: batch must be an int >= 1, got 0"),
    ({"seq_len": 0}, ValueError, "count_step: seq_len must be an int >= 1, got 0"),
    ({"optimizer": "sgd"}, ValueError, "optimizer must be 'adamw' or None"),
    ({"dtype": "int8"}, ValueError, "floating-point dtype"),
    ({"ceilings": 3}, TypeError, "count_step: ceilings must be"),
])
def test_count_step_checks_its_arguments(kwargs, exc, match):
    pytest.importorskip("transformers")
    with pytest.raises(exc, match=match):
        llm.count_step(TINY, **{"seq_len": 4, **kwargs})


@pytest.mark.parametrize("change", [{"mlp": "plain"}, {"norm": "layer"}, {"positions": 16}])
def test_count_step_builds_only_llama_style_models_from_a_decoder_config(change):
    pytest.importorskip("transformers")
    with pytest.raises(ValueError, match="Llama-style"):
        llm.count_step({**TINY, **change}, seq_len=4)


def test_count_step_refuses_an_object_with_to_dict_but_no_width():
    pytest.importorskip("transformers")
    with pytest.raises(TypeError, match="expected a DecoderConfig"):
        llm.count_step(types.SimpleNamespace(to_dict=dict, n_layer=1), seq_len=4)


# ---- count_step: what runs and what is counted -------------------------------------------------------------------
# Each test counts its own step, so that every test runs the code it checks (the first count in a process pays
# transformers' imports; the rest take a few tens of milliseconds on meta).
def test_count_step_defaults_to_a_training_step_of_2048_tokens():
    pytest.importorskip("transformers")
    r = llm.count_step(TINY, optimizer=None)  # batch 1, seq_len 2048, train
    s = 2048
    # training: 6PT for the products, and flash attention's 3.5 x forward (its backward recomputes the scores)
    assert r.matrix_flops == 6 * TINY_MATMUL_PARAMS * s + _flash_attention_forward(s) * 7 // 2 == 243_843_072
    assert set(r.by_phase()) == {"forward", "backward"}
    assert r.meta["steady"]["warmup"] == 0 and r.meta["steady"]["first_step"] is False


def test_count_step_counts_a_single_token_forward_without_an_optimizer():
    pytest.importorskip("transformers")
    r = llm.count_step(TINY, seq_len=1, train=False)  # the optimizer left at its default, "adamw"
    # no training, so no optimizer whatever `optimizer` says: nothing to warm up
    assert r.matrix_flops == 2 * TINY_MATMUL_PARAMS * 1 + _flash_attention_forward(1) == 1472
    assert set(r.by_phase()) == {"forward"}
    assert r.meta["steady"]["warmup"] == 0 and r.meta["steady"]["first_step"] is False


def test_count_step_with_adamw_counts_one_steady_step():
    pytest.importorskip("transformers")
    r = llm.count_step(TINY, seq_len=4)
    assert r.matrix_flops == 6 * TINY_MATMUL_PARAMS * 4 + _flash_attention_forward(4) * 7 // 2 == 18400
    # one uncounted warm-up step creates the optimizer state; on meta nothing is timed and every step counts the
    # same, so a single counted step is the measurement
    steady = r.meta["steady"]
    assert (steady["warmup"], steady["repeat"], steady["first_step"]) == (1, 1, False)
    assert r.by_phase()["optimizer"]["vector_flops"] > 0
    names = set(r.by_op())
    assert not any(n.startswith("aten.zeros_like") for n in names)  # AdamW's exp_avg / exp_avg_sq creation
    # the gradients are released after the update (set_to_none), not zeroed in place and then accumulated into
    assert not any("zero_" in n for n in names)
    assert r.by_phase()["backward"] == llm.count_step(TINY, seq_len=4, optimizer=None).by_phase()["backward"]


def test_count_step_counts_a_transformers_config_as_it_is():
    """A Llama config with a ReLU MLP: the model built is that one, not a Llama rebuilt from its shape (SiLU)."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(hidden_size=8, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2,
                                   num_key_value_heads=2, vocab_size=10, hidden_act="relu")
    r = llm.count_step(cfg, seq_len=4, train=False, optimizer=None)
    names = set(r.by_op())
    assert "aten.relu.default" in names and "aten.silu.default" not in names
    assert r.matrix_flops == 2 * TINY_MATMUL_PARAMS * 4 + _flash_attention_forward(4) == 6080
