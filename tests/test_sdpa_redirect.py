"""measure(..., attention=...) redirects scaled_dot_product_attention wherever it is called, counts each call once,
labels what it did honestly, and follows PyTorch's rules for the inputs it accepts."""

import warnings

import pytest

torch = pytest.importorskip("torch")
import roofline  # noqa: E402

F = torch.nn.functional
META = dict(device="meta", dtype=torch.bfloat16)


def _mha_flops(b, s, e, heads):
    hd = e // heads
    proj = 2 * b * s * e * 3 * e + 2 * b * s * e * e  # packed q/k/v in-projection and the out-projection
    attn = 2 * 2 * b * heads * s * s * hd  # Q K^T and P V, not causal
    return proj + attn


def test_sdpa_inside_multi_head_attention_forward_is_redirected_once():
    original = F.scaled_dot_product_attention
    mha = torch.nn.MultiheadAttention(64, 4, batch_first=True, **META)
    x = torch.empty(2, 32, 64, **META)
    with torch.no_grad(), roofline.measure(timing=None, attention="flash") as r:
        mha(x, x, x, need_weights=False)
    assert F.scaled_dot_product_attention is original  # restored exactly
    assert r.meta["attention"]["calls"] == {"flash": 1}
    assert "aten._scaled_dot_product_flash_attention.default" in r.op_names
    assert not any(n.startswith("aten.bmm") for n in r.op_names)
    assert r.matrix_flops == _mha_flops(2, 32, 64, 4)
    label = r.project("H100 SXM").meta["assumed"]["attention"]
    assert label == "flash (chosen at count time; 1 scaled_dot_product_attention call redirected)"


def test_direct_call_through_the_module_global_and_the_c_binding_count_once_each():
    q = torch.empty(1, 4, 64, 16, **META)
    with roofline.measure(timing=None, attention="flash") as r:
        F.scaled_dot_product_attention(q, q, q, is_causal=True)
        torch._C._nn.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert r.meta["attention"]["calls"] == {"flash": 2}
    assert r.matrix_flops == 2 * (2 * 2 * 4 * (64 * 65 // 2) * 16)


def test_real_tensors_through_the_wrapper_are_counted_once_as_run():
    q = torch.randn(1, 2, 8, 4)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    x = torch.randn(1, 8, 8)
    with torch.no_grad(), roofline.measure(timing=None, attention="flash") as r:
        F.scaled_dot_product_attention(q, q, q)
        mha(x, x, x, need_weights=False)
    assert r.meta["attention"]["calls"] == {"as run (real tensors)": 2}


def test_the_module_global_is_restored_on_an_exception():
    original = F.scaled_dot_product_attention
    q = torch.empty(1, 4, 8, 16, **META)
    with pytest.raises(ZeroDivisionError):
        with roofline.measure(timing=None, attention="efficient"):
            F.scaled_dot_product_attention(q, q, q)
            1 / 0
    assert F.scaled_dot_product_attention is original
    assert torch._C._nn.scaled_dot_product_attention is original


def test_torchvision_vit_on_meta_counts_flash_not_bmm():
    tv = pytest.importorskip("torchvision")
    from torchvision.models.vision_transformer import VisionTransformer

    with torch.device("meta"):
        m = VisionTransformer(image_size=32, patch_size=16, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64)
        m = m.to(torch.bfloat16)
        x = torch.empty(1, 3, 32, 32, dtype=torch.bfloat16)
    assert tv is not None
    with torch.no_grad(), roofline.measure(m, timing=None, attention="flash") as r:
        m(x)
    assert r.meta["attention"]["calls"] == {"flash": 2}
    assert not any(n.startswith("aten.bmm") for n in r.op_names)
    # 4 patches + class token = 5 tokens; per layer attention forward 2 products x 2 FLOPs x heads x S x S x hd
    rec = r.records
    flash = [i for i, n in enumerate(r.op_names) if n == "aten._scaled_dot_product_flash_attention.default"]
    assert int(rec["matrix_flops"][rec["op"] == flash[0]].sum()) == 2 * (2 * 2 * 2 * 5 * 5 * 16)


def test_no_redirect_with_hand_written_attention_warns_and_says_math():
    mha = torch.nn.MultiheadAttention(64, 4, batch_first=True, **META)
    x = torch.empty(2, 32, 64, **META)
    with pytest.warns(UserWarning, match="no scaled_dot_product_attention call was redirected"):
        with torch.no_grad(), roofline.measure(timing=None, attention="flash") as r:
            mha(x, x, x, need_weights=True)  # weights asked for: PyTorch computes them with bmm + softmax
    label = r.project("H100 SXM").meta["assumed"]["attention"]
    assert label.startswith("math (bmm + softmax") and "no scaled_dot_product_attention call was redirected" in label


def test_a_block_without_attention_is_not_labelled_flash():
    m = torch.nn.Conv2d(3, 8, 3, device="meta")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with roofline.measure(m, timing=None, attention="flash") as r:
            m(torch.empty(1, 3, 32, 32, device="meta"))
    label = r.project("H100 SXM").meta["assumed"]["attention"]
    assert label.startswith("none") and not label.startswith("flash")
