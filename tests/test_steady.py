"""Steady state (roofline.profile) and counting attention and dtype as the target runs them (measure(attention=),
llm.count_step, what a projection says it assumed)."""

import statistics
import sys
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import roofline  # noqa: E402
from roofline import llm  # noqa: E402

# ops an optimizer's first step runs to create its state (AdamW: exp_avg, exp_avg_sq via zeros_like; the step
# counter via a tensor(0.)): none of them may be in a steady-state step
STATE_INIT_OPS = ("aten.zeros_like", "aten.zeros.", "aten.lift_fresh", "aten.scalar_tensor")


def _state_init_ops(report):
    """State-creation ops in the optimizer phase, and zeros_like anywhere (how AdamW creates exp_avg/exp_avg_sq)."""
    opt = report.by_op("optimizer") if "optimizer" in report.by_phase() else {}
    out = {n: v["calls"] for n, v in opt.items() if n.startswith(STATE_INIT_OPS)}
    out.update({n: v["calls"] for n, v in report.by_op().items() if n.startswith("aten.zeros_like")})
    return out


def _tiny_train():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(8, 16)
    calls = []

    def step():
        calls.append(1)
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()

    return model, step, calls


def test_warmup_keeps_optimizer_state_creation_out_of_the_measured_step():
    model, step, calls = _tiny_train()
    r = roofline.steady(step, model, warmup=1, repeat=3, timing=None, ceilings="datasheet")
    assert len(calls) == 4  # 1 warm-up + 3 measured
    assert _state_init_ops(r) == {}
    assert r.meta["steady"]["warmup"] == 1 and r.meta["steady"]["repeat"] == 3
    assert r.meta["steady"]["counts_agree"] is True and r.meta["steady"]["first_step"] is False
    # the counts are those of one step: 2 products forward (8x16x32, 8x32x4), 4 backward (the first layer's input
    # gradient is not needed), 2*M*N*K each
    fwd = 2 * 8 * 16 * 32 + 2 * 8 * 32 * 4
    bwd = 2 * (2 * 8 * 32 * 4) + 2 * 8 * 16 * 32
    assert r.matrix_flops == fwd + bwd
    assert "steady state: 1 warm-up step uncounted, median of 3 measured steps" in str(r)


def test_warmup_zero_measures_the_first_step_and_labels_it():
    model, step, calls = _tiny_train()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the first step differing from the next is expected here: no warning
        r = roofline.steady(step, model, warmup=0, repeat=2, timing=None, ceilings="datasheet")
    assert len(calls) == 2
    s = r.meta["steady"]
    assert s["first_step"] is True
    # AdamW's state: exp_avg and exp_avg_sq for each of the 4 parameters
    assert s["first_step_ops"].get("aten.zeros_like.default") == 8
    assert _state_init_ops(r)["aten.zeros_like.default"] == 8  # the report is the first step's
    assert "the FIRST step is measured" in str(r)


def test_median_per_op_call_and_spread_come_from_the_repeats():
    model, step, _ = _tiny_train()
    r = roofline.steady(step, model, warmup=1, repeat=3, timing="op", ceilings="datasheet")
    walls = [x.wall_time for x in r.repeats]
    assert r.wall_time == statistics.median(walls)
    assert r.spread["wall_time"]["min"] == min(walls) and r.spread["wall_time"]["max"] == max(walls)
    durs = np.stack([x.records["t_end"] - x.records["t_start"] for x in r.repeats])
    np.testing.assert_allclose(r.records["t_end"] - r.records["t_start"], np.median(durs, axis=0), rtol=1e-12)
    mm = [float(np.sum(d[[n == "aten.mm.default" for n in (x.op_names[i] for i in x.records["op"])]]))
          for x, d in zip(r.repeats, durs)]
    row = r.spread["ops"]["aten.mm.default"]
    assert (row["min"], row["median"], row["max"]) == pytest.approx((min(mm), statistics.median(mm), max(mm)))


def test_steady_report_saves_and_loads_with_its_label():
    model, step, _ = _tiny_train()
    r = roofline.steady(step, model, warmup=1, repeat=2, timing=None, ceilings="datasheet")
    back = roofline.load(r.to_json())
    assert back.meta["steady"]["repeat"] == 2 and back.matrix_flops == r.matrix_flops


@pytest.mark.parametrize("kwargs, exc", [
    (dict(warmup=-1), ValueError), (dict(repeat=0), ValueError), (dict(warmup=1.5), TypeError),
    (dict(repeat=True), TypeError), (dict(timing="always"), ValueError), (dict(ceilings="H100"), KeyError),
    (dict(attention="flash2"), ValueError), (dict(attention=1), TypeError),
])
def test_bad_arguments_fail_before_any_step_runs(kwargs, exc):
    model, step, calls = _tiny_train()
    with pytest.raises(exc):
        roofline.steady(step, model, **kwargs)
    assert calls == []
    with pytest.raises(TypeError, match="callable"):
        roofline.steady("step")


def test_an_exception_in_a_step_propagates_and_leaves_no_mode_behind():
    from torch.overrides import _get_current_function_mode_stack
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    def step():
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        roofline.steady(step, warmup=0, repeat=2, timing=None, attention="flash")
    assert _get_current_function_mode_stack() == [] and _get_current_dispatch_mode_stack() == []


# ---- attention and dtype on meta ----------------------------------------------------------------------------------

transformers = pytest.importorskip("transformers")


def _llama_meta(layers=2, hidden=256, heads=8, kv_heads=2, seq=128, dtype=torch.bfloat16):
    cfg = transformers.LlamaConfig(hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                                   num_attention_heads=heads, num_key_value_heads=kv_heads, vocab_size=512,
                                   max_position_embeddings=1024, attn_implementation="sdpa")
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device("meta"):
            model = transformers.LlamaForCausalLM(cfg)
            ids = torch.zeros(1, seq, dtype=torch.long)
    finally:
        torch.set_default_dtype(old)
    return cfg, model, ids


@pytest.mark.parametrize("backend", ["flash", "efficient", "math", None])
def test_attention_backend_on_meta_counts_the_chosen_kernel(backend):
    s, layers, heads, kv, hd = 128, 2, 8, 2, 32
    cfg, model, ids = _llama_meta(layers, heads * hd, heads, kv, s)
    with roofline.measure(model, timing=None, attention=backend) as r:
        model(ids, labels=ids).loss.backward()
    # matmul params per layer: q, o (h x h), k, v (h x kv*hd), gate, up, down (h x 2h); LM head h x vocab
    h = heads * hd
    p = layers * (2 * h * h + 2 * h * kv * hd + 3 * h * 2 * h) + h * 512
    pairs = s * (s + 1) // 2 if backend in ("flash", "efficient") else s * s  # fused kernels skip the masked half
    fwd_attn = 2 * 2 * layers * heads * pairs * hd  # Q K^T and P V for every *query* head (GQA shares K/V only)
    # backward: 2 products per forward product; fused kernels also recompute the scores (5 products per pair)
    attn = fwd_attn * 7 // 2 if backend in ("flash", "efficient") else 3 * fwd_attn
    assert r.matrix_flops == 6 * p * s + attn
    names = " ".join(r.op_names)
    if backend in ("flash", "efficient"):
        assert f"_scaled_dot_product_{backend}_attention_backward" in names
        from roofline._capture import _sdpa

        label = backend
        if backend == "efficient" and not _sdpa._efficient_takes_gqa():  # older torch: K/V repeated, and said so
            label = "efficient (K/V repeated: this torch's efficient kernel takes no grouped-query heads)"
        assert r.meta["attention"] == {"backend": backend, "calls": {label: layers}}
    else:
        assert "_scaled_dot_product" not in names
    assert llm.training_flops(cfg, s, attention="causal" if backend in ("flash", "efficient") else "full",
                              recompute_attention=backend in ("flash", "efficient"))["total"] == r.matrix_flops
    code = {v: k for k, v in r.dtype_names.items()}
    mat = r.records[r.records["matrix_flops"] > 0]
    if backend in ("flash", "efficient"):
        assert set(mat["dtype"].tolist()) == {code["bfloat16"]}
    else:  # PyTorch's math path computes bf16 attention in float32 (pinned: it is part of why meta over-states)
        bmm = mat[np.array([r.op_names[i] == "aten.bmm.default" for i in mat["op"]])]
        assert set(bmm["dtype"].tolist()) == {code["float32"]}


def test_flash_with_an_explicit_mask_is_counted_on_efficient_and_says_so():
    q = torch.empty(1, 4, 64, 16, device="meta", dtype=torch.bfloat16)
    mask = torch.empty(64, 64, device="meta", dtype=torch.bool)
    with roofline.measure(timing=None, attention="flash") as r:
        torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=mask)
        torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert r.meta["attention"]["calls"] == {"efficient (flash takes no attn_mask)": 1, "flash": 1}
    assert "aten._scaled_dot_product_efficient_attention.default" in r.op_names
    # a full (masked, not causal) pass: 2 products x 64 x 64 pairs x 16 x 4 heads x 2 FLOPs; causal: 64*65/2 pairs
    assert r.matrix_flops == 2 * 2 * 4 * 64 * 64 * 16 + 2 * 2 * 4 * (64 * 65 // 2) * 16
    p = r.project("H100 SXM")
    assert p.meta["assumed"]["attention"] == ("flash (chosen at count time; 2 scaled_dot_product_attention calls "
                                              "redirected: flash x1, efficient (flash takes no attn_mask) x1)")


def test_real_tensors_are_never_redirected():
    q = torch.randn(1, 2, 8, 4)
    with roofline.measure(timing=None, attention="efficient") as r:
        torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert r.meta["attention"]["calls"] == {"as run (real tensors)": 1}
    assert not any("efficient" in n for n in r.op_names)


def test_gqa_without_enable_gqa_is_refused_like_pytorch_does():
    q = torch.empty(1, 8, 16, 8, device="meta")
    k = torch.empty(1, 2, 16, 8, device="meta")
    with pytest.raises(RuntimeError, match="enable_gqa"):
        with roofline.measure(timing=None, attention="flash"):
            torch.nn.functional.scaled_dot_product_attention(q, k, k)
    with pytest.raises(RuntimeError):  # PyTorch itself refuses it
        torch.nn.functional.scaled_dot_product_attention(q, k, k)


# Llama-3-70B: hidden 8192, MLP 28672, 80 layers, 64 query heads and 8 key/value heads of 128, vocabulary 128256
L70 = dict(hidden=8192, intermediate=28672, layers=80, heads=64, kv_heads=8, vocab=128256)


def test_llama3_70b_training_step_on_meta_matches_6pt_plus_6lt2d():
    s = 4096
    r = llm.count_step(llm.DecoderConfig(**L70), batch=1, seq_len=s, optimizer=None)
    h, kvd, m, layers, v = 8192, 8 * 128, 28672, 80, 128256
    p = layers * (2 * h * h + 2 * h * kvd + 3 * h * m) + h * v  # matmul parameters: q, o, k, v, MLP; LM head
    # causal attention, exactly: S(S+1)/2 pairs; forward Q K^T and P V (2 products x 2 FLOPs x head_dim x query
    # heads); backward 5 products per pair (flash recomputes the scores): 3.5 x forward
    fwd_attn = 2 * 2 * layers * 64 * (s * (s + 1) // 2) * 128
    exact = 6 * p * s + fwd_attn * 7 // 2
    assert r.matrix_flops == exact
    approx = 6 * p * s + 6 * layers * s * s * h  # the rule of thumb 6PT + 6LT^2d (d = model width)
    assert abs(r.matrix_flops / approx - 1) < 0.02
    assert r.meta["dtype"] == "bfloat16" and r.meta["attention"]["backend"] == "flash"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the int64 adds below weigh nothing: listed, not warned about
        proj = r.project("H100 SXM")
    assumed = proj.meta["assumed"]
    assert 0 < assumed["no_peak_flop_share"] < 1e-9
    assert assumed["attention"].startswith("flash") and assumed["matrix_dtypes"] == {"bfloat16": 1.0}
    # only integer element-wise work (position ids, label shifting) has no peak of its own dtype, and it says so
    assert assumed["no_peak"] and all(k.endswith("(int64)") and "vector/float32" in v
                                      for k, v in assumed["no_peak"].items())
    assert ("assumed: attention flash (chosen at count time; 80 scaled_dot_product_attention calls redirected); "
            "matrix FLOPs in bfloat16 100%") in proj.summary()
    # the matrix part of the projection is the exact count at the H100's dense bf16 rate (989 TFLOP/s)
    c = proj.classification()
    mat = r.records["matrix_flops"] > 0
    assert float(c["t_min"][mat].sum()) >= exact / 989e12
    assert float(c["t_min"][mat].sum()) == pytest.approx(exact / 989e12, rel=0.10)
    # the default of meta (math path: the full score matrix) is what the user no longer gets silently
    assert llm.training_flops(llm.DecoderConfig(**L70), s, attention="full")["total"] > exact


def _fake_cpu_step(layers):
    """The same step under FakeTensorMode on the CPU device, where PyTorch's own dispatcher picks the fused flash
    kernel (aten._scaled_dot_product_flash_attention_for_cpu): a second, independent count."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    cfg = transformers.LlamaConfig(hidden_size=8192, intermediate_size=28672, num_hidden_layers=layers,
                                   num_attention_heads=64, num_key_value_heads=8, vocab_size=128256,
                                   max_position_embeddings=8192, attn_implementation="sdpa")
    with FakeTensorMode():
        old = torch.get_default_dtype()
        torch.set_default_dtype(torch.bfloat16)
        try:
            model = transformers.LlamaForCausalLM(cfg)
        finally:
            torch.set_default_dtype(old)
        ids = torch.zeros(1, 4096, dtype=torch.long)
        with roofline.measure(model, timing=None) as r:
            model(ids, labels=ids).loss.backward()
    assert "aten._scaled_dot_product_flash_attention_for_cpu_backward.default" in r.op_names
    return r


def test_llama3_70b_h100_projection_matches_the_fake_tensor_count_with_the_fused_kernel():
    """meta + attention="flash" vs FakeTensorMode with the kernel PyTorch picks, 1 and 2 layers, scaled to 80
    layers arithmetically (a step is the layers' sum plus a fixed part: embedding, final norm, LM head, loss)."""
    # Fake CUDA tensors exist on a CPU-only build, but the autograd engine needs a CUDA device for their backward
    # pass (and SDPA's kernel choice on them falls back to math there); this pins that, so the test switches to a
    # real fake-CUDA count when torch allows it
    from torch._subclasses.fake_tensor import FakeTensorMode

    if not torch.cuda.is_available():
        with FakeTensorMode():
            q = torch.empty(1, 2, 16, 8, device="cuda", requires_grad=True)
            with pytest.raises(RuntimeError):
                torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()

    def meta_proj(layers):
        d = dict(L70, layers=layers)
        return llm.count_step(llm.DecoderConfig(**d), 1, 4096, optimizer=None).project("H100 SXM")

    def scaled(t1, t2):
        return t1 + 79 * (t2 - t1)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        meta = [meta_proj(n) for n in (1, 2)]
        fake = [_fake_cpu_step(n) for n in (1, 2)]
        fake_p = [f.project("H100 SXM") for f in fake]
    assert [m.matrix_flops for m in meta] == [f.matrix_flops for f in fake]  # the same products, exactly
    t_meta, t_fake = scaled(*(m.wall_time for m in meta)), scaled(*(f.wall_time for f in fake_p))
    assert abs(t_meta / t_fake - 1) < 0.10
    assert 1.5 < t_meta < 3.5  # seconds: ~1.8 PFLOP at 989 TFLOP/s plus the memory-bound ops


def test_count_step_checks_its_arguments():
    with pytest.raises(ValueError):
        llm.count_step(llm.DecoderConfig(**L70), 0, 16)
    with pytest.raises(ValueError, match="attention"):
        llm.count_step(llm.DecoderConfig(**L70), 1, 16, attention="flash3")
    with pytest.raises(ValueError, match="optimizer"):
        llm.count_step(llm.DecoderConfig(**L70), 1, 16, optimizer="sgd")
    with pytest.raises(ValueError, match="dtype"):
        llm.count_step(llm.DecoderConfig(**L70), 1, 16, dtype="float33")


def test_count_step_with_adamw_has_no_state_creation_in_the_step():
    cfg = llm.DecoderConfig(hidden=64, intermediate=128, layers=1, heads=4, kv_heads=2, vocab=256)
    r = llm.count_step(cfg, 1, 32)
    assert _state_init_ops(r) == {}
    assert r.by_phase()["optimizer"]["flops"] > 0  # the AdamW update itself is counted


def test_projection_lists_ops_whose_dtype_has_no_peak():
    a = torch.empty(64, 64, dtype=torch.int64, device="meta")
    with roofline.measure(timing=None) as r:
        torch.mm(a, a)
        torch.mm(a.float(), a.float())
    with pytest.warns(UserWarning, match=r"aten\.mm\.default \(int64\)"):
        p = r.project("H100 SXM")
    assert p.meta["assumed"]["no_peak"] == {"aten.mm.default (int64)": "1 call: judged against the vector/float32 "
                                                                        "peak"}
    assert p.meta["assumed"]["matrix_dtypes"] == {"float32": 0.5, "int64": 0.5}
    assert "no peak of their dtype on H100 SXM: aten.mm.default (int64)" in p.summary()


def test_predict_decode_states_what_it_assumed():
    cfg = llm.DecoderConfig(**L70)
    d = llm.predict_decode(cfg, 1, 4096)
    assert d["assumed"]["dtype"] == "bfloat16" and d["assumed"]["device"] == "H100 SXM"
    assert "fused" in d["assumed"]["attention"]
    with pytest.raises(ValueError, match="no matrix peak"):
        llm.predict_decode(cfg, 1, 4096, dtype="int64")


def test_readme_quickstart_pattern_reports_a_step_without_optimizer_state_creation(monkeypatch):
    """The README's Python quickstart, run as written up to the profile call, with torchvision's ResNet-18 swapped
    for a small convolutional net (same input, same AdamW step) to keep the test short."""
    import pathlib
    import re
    import types

    text = (pathlib.Path(__file__).resolve().parent.parent / "README.md").read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "roofline.steady(" in b)
    head = block[:block.index("\n", block.index("roofline.steady("))]
    assert "warmup=1" in head and "opt.step()" in head

    def small():
        return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 7, stride=8), torch.nn.Flatten(),
                                   torch.nn.Linear(4 * 28 * 28, 10))

    monkeypatch.setitem(sys.modules, "torchvision", types.SimpleNamespace(models=types.SimpleNamespace(
        resnet18=small)))
    ns = {}
    exec(compile(head, "README.md", "exec"), ns)
    r = ns["r"]
    assert isinstance(r, roofline.SteadyReport) and r.meta["steady"] == dict(r.meta["steady"], warmup=1, repeat=3)
    assert _state_init_ops(r) == {}
    assert r.by_phase()["optimizer"]["flops"] > 0
    # the same pattern without the warm-up measures AdamW's state creation: the check above can fail
    model, opt, step = ns["model"], ns["opt"], ns["step"]
    opt.state.clear()
    r0 = roofline.steady(step, model, warmup=0, repeat=1, timing=None)
    assert _state_init_ops(r0)["aten.zeros_like.default"] == 2 * len(list(model.parameters()))


def test_an_outlier_first_measured_step_is_left_out_not_reported():
    m = torch.nn.Linear(16, 16)
    x = torch.randn(4, 16)
    n = [0]

    def step():
        n[0] += 1
        y = m(x)
        if n[0] == 2:  # the first measured step (after 1 warm-up) does an extra pair of products, once
            y = y @ torch.randn(16, 512) @ torch.randn(512, 16)
        y.sum().backward()

    with pytest.warns(UserWarning, match=r"median of 4 of 5 steps.*step 1 ran other ops"):
        r = roofline.steady(step, m, warmup=1, repeat=5, timing="model", ceilings="H100 SXM")
    # the common step: forward 2*4*16*16, backward weight gradient 2*4*16*16 (the input needs no gradient)
    assert r.matrix_flops == 2 * (2 * 4 * 16 * 16)
    s = r.meta["steady"]
    assert s["steps"] == [2, 3, 4, 5] and s["other_steps"] == [1]
    kept = [r.repeats[i].wall_time for i in (1, 2, 3, 4)]
    assert r.wall_time == statistics.median(kept) == r.spread["wall_time"]["median"]
    assert r.spread["wall_time"]["min"] == min(kept) and r.spread["wall_time"]["max"] == max(kept)
    assert "median of 4 of 5 measured steps" in r.steady_line() and "step 1 ran other ops" in r.steady_line()


def test_int8_matrix_products_projected_on_an_int8_peak_are_not_listed_as_missing_their_dtype():
    a = torch.randint(-5, 5, (32, 32), dtype=torch.int8)
    with roofline.measure(timing=None, ceilings="datasheet") as r:
        torch._int_mm(a, a)
    p = r.project("H100 SXM")
    assert r.matrix_flops == 2 * 32 * 32 * 32
    assert p.meta["assumed"]["no_peak"] == {}
    assert float(p.classification()["peak"][0]) == 1979e12  # H100 SXM dense INT8 tensor core, datasheet


def _small_llama_config():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4,
                                   num_key_value_heads=2, vocab_size=128, max_position_embeddings=64)
    cfg._attn_implementation = "eager"
    return cfg


def test_count_step_leaves_the_callers_config_alone_and_labels_a_step_without_optimizer():
    cfg = _small_llama_config()
    r = llm.count_step(cfg, batch=1, seq_len=16, train=True, optimizer=None)
    assert cfg._attn_implementation == "eager"
    assert r.meta["steady"]["first_step"] is False and "FIRST step" not in r.steady_line()
    assert "without an optimizer step" in r.steady_line()
    r = llm.count_step(cfg, batch=1, seq_len=16, train=False)
    assert cfg._attn_implementation == "eager"
    assert r.meta["steady"]["first_step"] is False and "FIRST step" not in r.steady_line()


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"dtype": "float33"}, ValueError, "count_step: dtype"),
    ({"dtype": "int8"}, ValueError, "floating-point dtype"),
    ({"train": "yes"}, TypeError, "train must be True or False"),
    ({"attention": "fast"}, ValueError, "count_step: attention"),
    ({"optimizer": "sgd"}, ValueError, "optimizer must be"),
    ({"batch": 0}, ValueError, "count_step: batch must be an int >= 1, got 0"),
    ({"seq_len": 2.0}, TypeError, "seq_len must be an int"),
    ({"ceilings": 3}, TypeError, "count_step: ceilings"),
])
def test_count_step_checks_its_arguments_first(kwargs, exc, match):
    cfg = _small_llama_config()
    with pytest.raises(exc, match=match):
        llm.count_step(cfg, **{"batch": 1, "seq_len": 16, **kwargs})


def test_profile_takes_numpy_integers():
    calls = []
    r = roofline.steady(lambda: calls.append(1), warmup=np.int64(1), repeat=np.int32(2), timing=None)
    assert len(calls) == 3 and r.meta["steady"]["warmup"] == 1 and type(r.meta["steady"]["warmup"]) is int
    with pytest.raises(TypeError, match="warmup must be an int"):
        roofline.steady(lambda: None, warmup=True)
