"""measure(..., attention=...) on meta follows PyTorch's rules: the inputs it accepts (3-D, one broadcast K/V head),
the ones it refuses (a mask with is_causal), and the kernel its CUDA dispatcher would pick when the chosen one
cannot run (labelled in meta["attention"]["calls"])."""

import pytest

torch = pytest.importorskip("torch")
import roofline  # noqa: E402

F = torch.nn.functional
BF16 = dict(device="meta", dtype=torch.bfloat16)


def _run(backend, fn):
    with roofline.measure(timing=None, attention=backend) as r:
        out = fn()
    return r, out


def causal(h, s, d):  # fused forward: 2 products x 2 FLOPs over S(S+1)/2 pairs per head
    return 2 * 2 * h * (s * (s + 1) // 2) * d


def test_three_dimensional_inputs_count_as_batch_one():
    q = torch.empty(4, 64, 16, **BF16)
    r, out = _run("flash", lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True))
    assert out.shape == (4, 64, 16)
    assert r.meta["attention"]["calls"] == {"flash": 1}
    assert r.matrix_flops == causal(4, 64, 16)


def test_a_mask_with_is_causal_is_refused_like_pytorch():
    q = torch.empty(1, 4, 64, 16, **BF16)
    m = torch.empty(64, 64, device="meta", dtype=torch.bool)
    with pytest.raises(RuntimeError, match="is_causal"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=m, is_causal=True)  # PyTorch itself
    with pytest.raises(RuntimeError, match="is_causal"):
        _run("flash", lambda: F.scaled_dot_product_attention(q, q, q, attn_mask=m, is_causal=True))


def test_one_key_value_head_broadcasts_like_pytorch():
    """PyTorch accepts one K/V head against several query heads; its fused kernels do not without enable_gqa
    (dense inputs need equal heads), so the math path runs and broadcasts it."""
    q = torch.empty(1, 4, 64, 16, **BF16)
    k = torch.empty(1, 1, 64, 16, **BF16)
    F.scaled_dot_product_attention(q, k, k)  # PyTorch accepts it
    r, out = _run("flash", lambda: F.scaled_dot_product_attention(q, k, k))
    assert out.shape == (1, 4, 64, 16) and [c.split(" ")[0] for c in r.meta["attention"]["calls"]] == ["math"]
    assert r.matrix_flops == 2 * 2 * 4 * 64 * 64 * 16  # every query head's full (not causal) pass


@pytest.mark.parametrize("what,q,k,kernel,reason,flops", [
    ("float32", (1, 4, 64, 16, torch.float32), (1, 4, 64, 16, torch.float32), "efficient",
     "flash needs float16/bfloat16, inputs are float32", causal(4, 64, 16)),
    ("head_dim 512", (1, 4, 64, 512, torch.bfloat16), (1, 4, 64, 512, torch.bfloat16), "efficient",
     "flash needs head_dim <= 256, got 512", causal(4, 64, 512)),
    # decode: 1 query against 100 keys, causal with PyTorch's top-left alignment (the query sees key 0 only)
    ("causal Sq != Sk", (1, 4, 1, 16, torch.bfloat16), (1, 4, 100, 16, torch.bfloat16), "efficient",
     "flash is not causal with 1 queries and 100 keys", 2 * 2 * 4 * 1 * 16),
])
def test_flash_that_cannot_run_is_counted_on_what_the_dispatcher_picks(what, q, k, kernel, reason, flops):
    qt = torch.empty(*q[:4], device="meta", dtype=q[4])
    kt = torch.empty(*k[:4], device="meta", dtype=k[4])
    r, _ = _run("flash", lambda: F.scaled_dot_product_attention(qt, kt, kt, is_causal=True))
    assert r.meta["attention"]["calls"] == {f"{kernel} ({reason})": 1}, what
    assert f"aten._scaled_dot_product_{kernel}_attention.default" in r.op_names
    assert r.matrix_flops == flops
    label = r.project("H100 SXM").meta["assumed"]["attention"]
    assert reason in label


def test_float64_falls_back_to_math_and_says_so():
    q = torch.empty(1, 2, 8, 16, device="meta", dtype=torch.float64)
    r, _ = _run("efficient", lambda: F.scaled_dot_product_attention(q, q, q))
    (label,) = r.meta["attention"]["calls"]
    assert label.startswith("math (") and "efficient needs" in label
    assert r.matrix_flops == 2 * 2 * 2 * 8 * 8 * 16
