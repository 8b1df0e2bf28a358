"""The attention-kernel rules and the redirection of scaled_dot_product_attention, pinned at their edges.

Expected kernels come from PyTorch's CUDA dispatcher (aten/src/ATen/native/transformers/cuda/sdp_utils.cpp):
flash needs float16/bfloat16 and q, k, v head dims equal and <= 256 (check_head_dim_size_flash) but has no limit on
batch, heads or sequence length; memory-efficient attention needs equal query/key head dims that are multiples of
the GEMM alignment (8 for 16-bit inputs); the fused kernels broadcast a single K/V head and otherwise need equal head
counts unless enable_gqa is passed (check_batch_size_and_num_heads_dense). Byte and FLOP expectations are written out
from the tensor shapes: bf16 is 2 bytes, the fused forward is 2 products x 2 FLOPs per (query, key) pair per head dim.
"""

import threading
import warnings

import pytest

torch = pytest.importorskip("torch")
import roofline  # noqa: E402
from roofline._capture import _sdpa  # noqa: E402

F = torch.nn.functional
BF16 = dict(device="meta", dtype=torch.bfloat16)
EFFICIENT = "aten._scaled_dot_product_efficient_attention.default"
FLASH = "aten._scaled_dot_product_flash_attention.default"
REPEATED = "efficient (K/V repeated: this torch's efficient kernel takes no grouped-query heads)"


def meta(*shape):
    return torch.empty(*shape, **BF16)


def kernel(backend, q, k=None, v=None, mask=None, causal=False):
    k = q if k is None else k
    return _sdpa._kernel(backend, q, k, v if v is not None else k, mask, causal)[0]


def measured(backend, fn):
    with roofline.measure(timing=None, attention=backend) as r:
        out = fn()
    return r, out


def op_rows(r, name):
    rec = r.records
    ids = [i for i, n in enumerate(r.op_names) if n == name]
    return rec[[int(o) in ids for o in rec["op"]]]


# --- which kernel: the head-dim limit and what it is read from ---------------------------------------------------

@pytest.mark.parametrize("d,expected", [
    (256, "flash"),  # check_head_dim_size_flash: head_dim <= 256 is allowed, the limit itself included
    (264, "efficient"),  # one aligned step above: flash refuses, efficient takes 264 (a multiple of 8)
])
def test_flash_head_dim_limit_is_inclusive(d, expected):
    assert kernel("flash", meta(1, 2, 8, d)) == expected


def test_one_past_the_flash_head_dim_limit_is_not_flash():
    assert kernel("flash", meta(1, 2, 8, 257)) != "flash"  # 257 > 256


@pytest.mark.parametrize("shape", [(257, 2, 8, 16), (1, 257, 8, 16), (1, 2, 257, 16)])
def test_flash_limit_is_on_the_head_dim_only(shape):
    # batch, head count and sequence length have no flash limit: only the last dim (16 here) is checked
    assert kernel("flash", meta(*shape)) == "flash"


def test_flash_head_dim_limit_covers_the_value():
    # q, k at 64 and v at 512: flash needs all three equal and <= 256; efficient needs q == k and aligned dims
    q = meta(1, 2, 8, 64)
    assert kernel("flash", q, q, meta(1, 2, 8, 512)) == "efficient"


# --- what _count does with the call ------------------------------------------------------------------------------

def test_mixed_rank_inputs_run_the_math_path_and_say_the_query_rank():
    q3, kv = meta(4, 8, 32), meta(1, 4, 8, 32)
    r, out = measured("flash", lambda: F.scaled_dot_product_attention(q3, kv, kv))
    # the fused kernels take 4-D inputs only; the query as given is 3-D (K/V are 4-D, so it is not batch-1 squeezed)
    assert r.meta["attention"]["calls"] == {"math (fused kernels take 4-D inputs, got 3-D)": 1}
    ref = F.scaled_dot_product_attention(torch.zeros(4, 8, 32), torch.zeros(1, 4, 8, 32), torch.zeros(1, 4, 8, 32))
    assert tuple(out.shape) == tuple(ref.shape) == (1, 4, 8, 32)


def test_math_backend_returns_the_attention_output_in_the_input_rank():
    q = meta(2, 8, 32)  # (heads, seq, dim) with seq != dim: the output is (2, 8, 32), the weights would be (2, 8, 8)
    r, out = measured("math", lambda: F.scaled_dot_product_attention(q, q, q))
    assert tuple(out.shape) == (2, 8, 32)
    assert r.meta["attention"]["calls"] == {"math": 1}


def test_no_dropout_is_counted_unless_asked_for(monkeypatch):
    monkeypatch.setattr(_sdpa, "_CLASS", None)  # a mode class built afresh here: its own argument defaults are used
    q = meta(1, 2, 8, 16)
    r, _ = measured("math", lambda: F.scaled_dot_product_attention(q, q, q))
    assert not any("bernoulli" in n or "dropout" in n for n in r.op_names)  # dropout_p defaults to 0
    r0, _ = measured("math", lambda: F.scaled_dot_product_attention(q, q, q, dropout_p=0.0))
    assert r.op_names == r0.op_names and r.bytes == r0.bytes  # omitting dropout_p is passing 0.0
    r, _ = measured("math", lambda: F.scaled_dot_product_attention(q, q, q, dropout_p=0.5))
    assert any("bernoulli" in n for n in r.op_names)  # the math path draws its dropout mask when asked


def test_query_given_by_position_with_key_and_value_by_keyword():
    q = meta(1, 2, 8, 16)
    r, out = measured("flash", lambda: F.scaled_dot_product_attention(q, key=q, value=q))
    assert r.meta["attention"]["calls"] == {"flash": 1} and tuple(out.shape) == (1, 2, 8, 16)


def test_fewer_key_value_heads_without_enable_gqa_are_refused_like_pytorch(monkeypatch):
    monkeypatch.setattr(_sdpa, "_CLASS", None)  # a mode class built afresh here: enable_gqa's default is its own
    q, kv = meta(1, 4, 8, 16), meta(1, 2, 8, 16)
    with pytest.raises(RuntimeError):  # PyTorch itself: 4 query heads against 2 K/V heads do not broadcast
        F.scaled_dot_product_attention(torch.zeros(1, 4, 8, 16), torch.zeros(1, 2, 8, 16), torch.zeros(1, 2, 8, 16))
    with pytest.raises(RuntimeError, match="query has 4 heads, key 2 and value 2: pass enable_gqa=True"):
        measured("flash", lambda: F.scaled_dot_product_attention(q, kv, kv))  # the math path's refusal, with a hint
    with pytest.raises(RuntimeError, match="query has 4 heads, key 2 and value 2: pass enable_gqa"):
        measured("flash", lambda: F.scaled_dot_product_attention(q[0], kv[0], kv[0]))  # 3-D: (heads, seq, dim)
    with pytest.raises(RuntimeError, match="query has 4 heads, key 4 and value 2: pass enable_gqa"):
        measured("flash", lambda: F.scaled_dot_product_attention(q, q, kv))  # the value alone
    with pytest.raises(RuntimeError, match="query has 4 heads, key 2 and value 1: pass enable_gqa"):
        measured("flash", lambda: F.scaled_dot_product_attention(q, kv, meta(1, 1, 8, 16)))  # the key alone
    with pytest.raises(RuntimeError, match="query has 4 heads, key 2 and value 2: pass enable_gqa"):
        # mixed ranks (a 4-D query, 3-D key and value) go to the math path as they are
        measured("flash", lambda: F.scaled_dot_product_attention(q, kv[0], kv[0]))
    flat = meta(8, 16)  # 2-D (seq, dim): no heads to compare
    r, out = measured("flash", lambda: F.scaled_dot_product_attention(flat, flat, flat))
    assert tuple(out.shape) == (8, 16)
    # what does broadcast or is grouped passes: one K/V head, or enable_gqa on the math path (a head dim of 12
    # is no multiple of 8: neither fused kernel takes it)
    one = meta(1, 1, 8, 16)
    r, out = measured("flash", lambda: F.scaled_dot_product_attention(q, one, one))
    assert tuple(out.shape) == (1, 4, 8, 16)
    q12, kv12 = meta(1, 4, 8, 12), meta(1, 2, 8, 12)
    r, out = measured("efficient", lambda: F.scaled_dot_product_attention(q12, kv12, kv12, enable_gqa=True))
    assert tuple(out.shape) == (1, 4, 8, 12) and [c.split(" ")[0] for c in r.meta["attention"]["calls"]] == ["math"]


def test_value_heads_alone_differing_are_refused_like_pytorch():
    q, v = meta(1, 4, 8, 16), meta(1, 2, 8, 16)
    with pytest.raises(RuntimeError):  # PyTorch: the scores' 4 heads do not broadcast against 2 value heads
        F.scaled_dot_product_attention(torch.zeros(1, 4, 8, 16), torch.zeros(1, 4, 8, 16), torch.zeros(1, 2, 8, 16))
    with pytest.raises(RuntimeError):
        measured("flash", lambda: F.scaled_dot_product_attention(q, q, v))


def test_one_key_value_head_broadcasts_over_every_batch_row():
    """Without enable_gqa the fused kernels need as many K/V heads as query heads (PyTorch's
    check_batch_size_and_num_heads_dense): one K/V head runs the math path, which broadcasts it; with enable_gqa it
    is a grouped-query call flash takes. Each query head's full pass either way."""
    b, hq, s, d = 2, 4, 8, 16
    q, kv = meta(b, hq, s, d), meta(b, 1, s, d)
    ref = F.scaled_dot_product_attention(torch.zeros(b, hq, s, d), torch.zeros(b, 1, s, d), torch.zeros(b, 1, s, d))
    r, out = measured("flash", lambda: F.scaled_dot_product_attention(q, kv, kv))
    assert list(r.meta["attention"]["calls"]) == [
        "math (fused kernels need as many query, key and value heads without enable_gqa, got 4, 1, 1)"]
    assert tuple(out.shape) == tuple(ref.shape) == (b, hq, s, d)
    assert r.matrix_flops == 2 * 2 * b * hq * s * s * d
    r, out = measured("flash", lambda: F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True))
    assert r.meta["attention"]["calls"] == {"flash": 1} and tuple(out.shape) == (b, hq, s, d)
    assert r.matrix_flops == 2 * 2 * b * hq * s * s * d


def test_fused_kernels_take_only_grouped_query_heads_that_divide():
    """With enable_gqa, key and value heads must be equal and divide the query heads; other head counts and
    value head dimensions the fused kernels cannot take go to the math path (PyTorch's sdp_utils checks)."""
    def kernel(backend, q, k, v, gqa=False):
        return _sdpa._kernel(backend, q, k, v, None, False, gqa)[0]

    q = meta(1, 6, 8, 64)
    assert _sdpa._kernel("flash", q, meta(1, 3, 8, 64), meta(1, 3, 8, 64), None, False)[0] == "math"  # no gqa
    assert kernel("flash", q, meta(1, 3, 8, 64), meta(1, 3, 8, 64), True) == "flash"
    assert kernel("flash", q, meta(1, 6, 8, 32), q) == "math"  # query and key head dims differ: neither kernel
    zero = meta(1, 6, 8, 0)
    assert kernel("efficient", zero, zero, zero) == "math" and kernel("efficient", q, q, zero) == "math"
    assert kernel("efficient", zero, zero, meta(1, 6, 8, 8)) == "math"  # an empty query head dim
    assert kernel("flash", q, meta(1, 4, 8, 64), meta(1, 4, 8, 64), True) == "math"  # 4 does not divide 6
    assert kernel("efficient", q, meta(1, 3, 8, 64), meta(1, 2, 8, 64), True) == "math"  # K and V heads differ
    assert kernel("efficient", q, meta(1, 3, 8, 64), meta(1, 3, 8, 64)) == "math"  # grouped without enable_gqa
    # flash needs q, k and v head dims equal: a narrower value goes to memory-efficient attention
    assert kernel("flash", q, q, meta(1, 6, 8, 32)) == "efficient"
    # memory-efficient attention: head dims multiples of 8 for 16-bit inputs, of 4 for float32
    assert kernel("efficient", meta(1, 2, 8, 100), meta(1, 2, 8, 100), meta(1, 2, 8, 100)) == "math"
    assert kernel("efficient", meta(1, 2, 8, 104), meta(1, 2, 8, 104), meta(1, 2, 8, 100)) == "math"
    assert kernel("efficient", meta(1, 2, 8, 104), meta(1, 2, 8, 104), meta(1, 2, 8, 104)) == "efficient"
    f32 = [torch.empty(1, 2, 8, n, device="meta") for n in (100, 102)]
    assert kernel("efficient", f32[0], f32[0], f32[0]) == "efficient" and kernel("efficient", *[f32[1]] * 3) == "math"
    assert kernel("flash", meta(1, 2, 8, 264), meta(1, 2, 8, 264), meta(1, 2, 8, 264)) == "efficient"
    assert kernel("flash", meta(1, 2, 8, 257), meta(1, 2, 8, 257), meta(1, 2, 8, 257)) == "math"


def test_grouped_query_attention_on_flash_counts_the_query_heads():
    b, hq, hk, s, d = 1, 8, 2, 16, 32
    q, kv = meta(b, hq, s, d), meta(b, hk, s, d)
    r, out = measured("flash", lambda: F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True))
    assert r.meta["attention"]["calls"] == {"flash": 1}
    assert tuple(out.shape) == (b, hq, s, d)
    assert r.matrix_flops == 2 * 2 * b * hq * s * s * d
    assert r.op_names == [FLASH]


def test_flash_does_not_write_a_debug_mask():
    b, h, s, d = 1, 4, 8, 32
    q = meta(b, h, s, d)
    r, _ = measured("flash", lambda: F.scaled_dot_product_attention(q, q, q))
    out_b, lse_b = b * h * s * d * 2, b * h * s * 4  # bf16 output, float32 log-sum-exp per query row
    written = int(op_rows(r, FLASH)["bytes_written"].sum())
    assert out_b + lse_b <= written <= out_b + lse_b + 64  # plus a few RNG-state words, no (S x S) mask


def test_efficient_keeps_no_log_sum_exp_when_no_input_needs_a_gradient():
    b, h, s, d = 1, 4, 8, 32
    q = meta(b, h, s, d)  # grad mode is on, but nothing requires a gradient: no backward will read the LSE
    r, out = measured("efficient", lambda: F.scaled_dot_product_attention(q, q, q))
    assert tuple(out.shape) == (b, h, s, d)
    out_b = b * h * s * d * 2
    assert out_b <= int(op_rows(r, EFFICIENT)["bytes_written"].sum()) <= out_b + 64
    qg = meta(b, h, s, d).requires_grad_()
    r, _ = measured("efficient", lambda: F.scaled_dot_product_attention(qg, qg, qg))
    assert int(op_rows(r, EFFICIENT)["bytes_written"].sum()) >= out_b + b * h * s * 4  # the LSE is kept


# --- the memory-efficient kernel's grouped-query support (per torch version) ------------------------------------

def test_efficient_with_equal_heads_is_never_repeated(monkeypatch):
    monkeypatch.setattr(_sdpa, "_GQA", [False])  # a torch whose efficient kernel refuses fewer K/V heads
    q = meta(1, 4, 8, 32)
    r, out = measured("efficient", lambda: F.scaled_dot_product_attention(q, q, q))
    assert r.meta["attention"]["calls"] == {"efficient": 1}  # equal head counts: nothing to repeat
    assert r.op_names == [EFFICIENT] and tuple(out.shape) == (1, 4, 8, 32)


def test_grouped_query_on_an_efficient_kernel_without_gqa_repeats_key_and_value(monkeypatch):
    monkeypatch.setattr(_sdpa, "_GQA", [False])
    b, hq, hk, s, d = 1, 4, 2, 8, 32
    q, kv = meta(b, hq, s, d), meta(b, hk, s, d)
    r, out = measured("efficient", lambda: F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True))
    assert r.meta["attention"]["calls"] == {REPEATED: 1}
    assert tuple(out.shape) == (b, hq, s, d)
    assert r.matrix_flops == 2 * 2 * b * hq * s * s * d
    full = b * hq * s * d * 2  # one bf16 tensor at the query's head count
    assert int(op_rows(r, EFFICIENT)["bytes_read"].sum()) == 3 * full  # Q, and K, V repeated to 4 heads
    copies = sum(int(row["bytes_written"]) for row in r.records if r.op_names[int(row["op"])] != EFFICIENT)
    assert copies == 2 * full  # the two repeated copies, K and V
    assert int(r.records["bytes_read"].sum()) == 3 * full + 2 * (full // 2)  # the copies read K, V at 2 heads


def test_grouped_query_on_an_efficient_kernel_with_gqa_reads_key_and_value_at_their_size(monkeypatch):
    monkeypatch.setattr(_sdpa, "_GQA", [True])
    b, hq, hk, s, d = 1, 4, 2, 8, 32
    q, kv = meta(b, hq, s, d), meta(b, hk, s, d)
    r, out = measured("efficient", lambda: F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True))
    assert r.meta["attention"]["calls"] == {"efficient": 1}
    assert r.op_names == [EFFICIENT] and tuple(out.shape) == (b, hq, s, d)
    assert int(op_rows(r, EFFICIENT)["bytes_read"].sum()) == (b * hq * s * d + 2 * b * hk * s * d) * 2


def _efficient_gqa_independently() -> bool:
    # the same question asked with other shapes: 6 query heads over 3 K/V heads, forward and backward on meta
    try:
        q = torch.empty(2, 6, 4, 8, device="meta", requires_grad=True)
        kv = torch.empty(2, 3, 4, 8, device="meta", requires_grad=True)
        out = torch.ops.aten._scaled_dot_product_efficient_attention(q, kv, kv, None, True, 0.0, False)[0]
        torch.autograd.grad(out.sum(), (q, kv))
        return True
    except RuntimeError:
        return False


def test_the_gqa_probe_agrees_with_an_independent_probe(monkeypatch):
    monkeypatch.setattr(_sdpa, "_GQA", [])  # not probed yet
    assert _sdpa._efficient_takes_gqa() is _efficient_gqa_independently()


def test_the_gqa_probe_says_no_when_the_backward_refuses(monkeypatch):
    def refuse(*a, **k):
        raise RuntimeError("efficient attention backward: key has fewer heads than query")

    monkeypatch.setattr(_sdpa, "_GQA", [])
    monkeypatch.setattr(torch.autograd, "grad", refuse)  # an older torch's backward
    assert _sdpa._efficient_takes_gqa() is False


def test_the_probe_runs_when_the_mode_is_made_and_only_for_fused_backends(monkeypatch):
    monkeypatch.setattr(_sdpa, "_GQA", [])
    _sdpa.mode("math")
    assert _sdpa._GQA == []  # math never repeats K/V: nothing to probe
    _sdpa.mode("efficient")
    assert len(_sdpa._GQA) == 1  # probed before the block opens, so no probe op can land in its counts


# --- the redirection: nesting, out-of-order exits, someone else's patch -----------------------------------------

def _mha():
    return torch.nn.MultiheadAttention(64, 4, batch_first=True, **BF16), meta(2, 16, 64)


def test_nested_blocks_send_each_call_to_the_innermost_open_one():
    original = F.scaled_dot_product_attention
    mha, x = _mha()
    q = meta(1, 4, 16, 16)
    with torch.no_grad(), roofline.measure(timing=None, attention="flash") as outer:
        with roofline.measure(timing=None, attention="efficient") as inner:
            F.scaled_dot_product_attention(q, q, q)
        assert F.scaled_dot_product_attention is not original  # the outer block still needs the wrapper
        mha(x, x, x, need_weights=False)  # a call from inside another torch function, after the inner one closed
        F.scaled_dot_product_attention(q, q, q)
    assert F.scaled_dot_product_attention is original
    assert inner.meta["attention"]["calls"] == {"efficient": 1}
    assert outer.meta["attention"]["calls"] == {"flash": 2}


def test_modes_closed_out_of_order_keep_the_wrapper_for_the_one_still_open():
    original = F.scaled_dot_product_attention
    mha, x = _mha()
    first, second = _sdpa.mode("flash"), _sdpa.mode("efficient")
    first.__enter__()
    try:
        second.__enter__()
        try:
            first.__exit__(None, None, None)  # as when another thread's block closes first
            with torch.no_grad():
                mha(x, x, x, need_weights=False)
        finally:
            second.__exit__(None, None, None)
    finally:
        first.__exit__(None, None, None)
    assert second.calls == {"efficient": 1} and first.calls == {}
    assert F.scaled_dot_product_attention is original


def test_exit_is_idempotent_and_lets_exceptions_through():
    original = F.scaled_dot_product_attention
    m = _sdpa.mode("flash")
    m.__exit__(None, None, None)  # never entered: nothing to undo
    with pytest.raises(ZeroDivisionError):
        with m:
            1 / 0
    m.__exit__(None, None, None)  # already closed
    assert F.scaled_dot_product_attention is original
    assert m not in _sdpa._thread_modes()


def test_real_tensor_calls_through_the_wrapper_leave_the_mode_counting():
    q_real, q = torch.zeros(1, 2, 8, 4), meta(1, 2, 8, 16)
    with roofline.measure(timing=None, attention="flash") as r:
        F.scaled_dot_product_attention(q_real, q_real, q_real)  # the wrapper runs the original: not counted twice
        torch._C._nn.scaled_dot_product_attention(q, q, q)  # then a call that only the mode sees
    assert r.meta["attention"]["calls"] == {"as run (real tensors)": 1, "flash": 1}


def _counting(target):
    calls = []

    def user_sdpa(*args, **kwargs):
        calls.append(1)
        return target(*args, **kwargs)

    return user_sdpa, calls


def test_a_patch_made_before_the_block_is_wrapped_and_put_back(monkeypatch):
    user_sdpa, calls = _counting(torch._C._nn.scaled_dot_product_attention)
    monkeypatch.setattr(F, "scaled_dot_product_attention", user_sdpa)
    q = torch.zeros(1, 2, 8, 4)
    with roofline.measure(timing=None, attention="flash"):
        F.scaled_dot_product_attention(q, q, q)  # real tensors: run by what the module global was
    assert calls == [1]
    assert F.scaled_dot_product_attention is user_sdpa


def test_the_wrapper_put_back_outside_a_block_stands_for_what_it_wrapped(monkeypatch):
    user_sdpa, calls = _counting(torch._C._nn.scaled_dot_product_attention)
    monkeypatch.setattr(F, "scaled_dot_product_attention", user_sdpa)
    other = lambda *a, **k: None  # noqa: E731
    q = torch.zeros(1, 2, 8, 4)
    with roofline.measure(timing=None, attention="flash"):
        wrapper = F.scaled_dot_product_attention
        F.scaled_dot_product_attention = other  # someone patches it while the block is open
    assert F.scaled_dot_product_attention is other  # theirs stays
    F.scaled_dot_product_attention = wrapper  # and they undo their patch after the block closed
    with roofline.measure(timing=None, attention="flash"):
        F.scaled_dot_product_attention(q, q, q)
    assert calls == [1]  # still the user's function underneath
    assert F.scaled_dot_product_attention is user_sdpa


def test_the_wrapper_with_nothing_recorded_underneath_stands_for_torch(monkeypatch):
    torch_sdpa = torch._C._nn.scaled_dot_product_attention
    monkeypatch.delattr(_sdpa._redirect, "__wrapped__", raising=False)  # as before any block ever opened
    monkeypatch.setattr(F, "scaled_dot_product_attention", _sdpa._redirect)
    q = torch.zeros(1, 2, 8, 4)
    with roofline.measure(timing=None, attention="flash"):
        out = F.scaled_dot_product_attention(q, q, q)
    assert tuple(out.shape) == (1, 2, 8, 4)
    assert F.scaled_dot_product_attention is torch_sdpa


# --- the report's reading of what was counted --------------------------------------------------------------------

def test_math_attention_needs_both_products_and_a_softmax():
    assert not _sdpa.has_math_attention(["aten.bmm.default"])
    assert not _sdpa.has_math_attention(["aten._softmax.default"])
    assert _sdpa.has_math_attention(["aten.bmm.default", "aten._softmax.default"])


def test_no_warning_once_a_call_was_redirected():
    names = ["aten.bmm.default", "aten._softmax.default"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _sdpa.warn_if_unredirected({"backend": "flash", "calls": {"flash": 1}}, names)
    with pytest.warns(UserWarning):
        _sdpa.warn_if_unredirected({"backend": "flash", "calls": None}, names)


def test_the_unredirected_warning_points_at_the_users_block():
    mha, x = _mha()
    with pytest.warns(UserWarning, match="no scaled_dot_product_attention call was redirected") as w:
        with torch.no_grad(), roofline.measure(timing=None, attention="flash"):
            mha(x, x, x, need_weights=True)
    assert [rec.filename for rec in w if "redirected" in str(rec.message)] == [__file__]


def test_threads_without_a_block_run_the_original():
    q = torch.zeros(1, 2, 8, 4)
    seen = {}

    def other_thread():
        seen["shape"] = tuple(F.scaled_dot_product_attention(q, q, q).shape)

    with roofline.measure(timing=None, attention="flash") as r:
        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
    assert seen["shape"] == (1, 2, 8, 4)
    assert r.meta["attention"]["calls"] == {}
