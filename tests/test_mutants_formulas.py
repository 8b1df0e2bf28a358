"""Exact counts of the Python formulas (roofline/_counting/_formulas.py) on small hand-built arguments.

Each expected value is computed here a second way: (query, key) pairs by a double loop over positions, the blocks of a
FlexAttention mask by walking the blocks one by one, comparisons of a search from ceil(log2 n) written as a loop over
powers of two, recurrent layers from the per-gate arithmetic in docs/concepts.md, the samples of roi_align by the loops
of torchvision's kernel.
"""

import math

import pytest

torch = pytest.importorskip("torch")

from roofline._counting import _formula_base as B  # noqa: E402
from roofline._counting import _formulas as F  # noqa: E402
from roofline._counting import _formulas_nn as NN  # noqa: E402
from roofline._counting import _formulas_products as P  # noqa: E402

F32 = 4

# strided nested tensors (the layout the encoder fast path builds) warn that their API is a prototype
pytestmark = pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors:UserWarning")


# ---- second implementations -----------------------------------------------------------------------------------------

def ceil_log2(n):
    """Smallest k with 2**k >= n (0 for n <= 1), by counting doublings."""
    k, p = 0, 1
    while p < n:
        p, k = p * 2, k + 1
    return k


def band_brute(sq, sk, left, right):
    """Query i sits at key position c = i + sk - sq; it sees key j when c - left <= j <= c + right (negative: no
    bound on that side)."""
    n = 0
    for i in range(sq):
        c = i + sk - sq
        for j in range(sk):
            if (left < 0 or j >= c - left) and (right < 0 or j <= c + right):
                n += 1
    return n


def causal_brute(sq, sk, mask):
    """0: every pair; 1: causal aligned top-left (j <= i); 2: aligned bottom-right (j <= i + sk - sq)."""
    n = 0
    for i in range(sq):
        for j in range(sk):
            if mask == 0 or (mask == 1 and j <= i) or (mask == 2 and j <= i + sk - sq):
                n += 1
    return n


def nbytes(*ts):
    return sum(t.numel() * t.element_size() for t in ts)


# ---- sliding-window pairs -------------------------------------------------------------------------------------------

BAND_CASES = [(sq, sk, left, right)
              for sq, sk in [(1, 1), (4, 4), (3, 7), (7, 3), (5, 6), (6, 5), (2, 9)]
              for left in (-1, 0, 1, 2, 5)
              for right in (-1, 0, 1, 3)]


def test_band_pairs_match_a_double_loop():
    for sq, sk, left, right in BAND_CASES:
        assert NN._band_pairs(sq, sk, left, right) == band_brute(sq, sk, left, right), (sq, sk, left, right)


def test_band_pairs_small_cases_by_hand():
    # 4 x 4, window (1, 0): the diagonal and the one key before it: 4 + 3
    assert NN._band_pairs(4, 4, 1, 0) == 7
    # 4 x 4, window (0, 1): the diagonal and the key after it
    assert NN._band_pairs(4, 4, 0, 1) == 7
    # 2 queries over 5 keys, bottom-right: they sit at keys 3 and 4; window (0, 0) is one key each
    assert NN._band_pairs(2, 5, 0, 0) == 2
    # 5 queries over 2 keys: queries 0..2 sit before key 0 (c = -3..-1); window (0, 0) keeps only c = 0, 1
    assert NN._band_pairs(5, 2, 0, 0) == 2
    # unlimited both ways: every pair
    assert NN._band_pairs(3, 7, -1, -1) == 21


def test_flash_window_bounds():
    w = NN._flash_window
    assert w({}) is None
    assert w({"window_size_left": None, "window_size_right": None}) is None
    assert w({"window_size_left": -1, "window_size_right": -1}) is None
    assert w({"window_size_left": 3}) == (3, -1)
    assert w({"window_size_right": 2}) == (-1, 2)
    assert w({"window_size_left": 0, "window_size_right": 0}) == (0, 0)
    assert w({"window_size_left": 0, "window_size_right": -1}) == (0, -1)
    assert w({"window_size_left": -1, "window_size_right": 0}) == (-1, 0)
    # causal: right = 0; without a left bound that is the plain causal mask (no window)
    assert w({"is_causal": True}) is None
    assert w({"is_causal": True, "window_size_left": -1, "window_size_right": 5}) is None
    assert w({"is_causal": True, "window_size_left": 4, "window_size_right": 5}) == (4, 0)
    assert w({"is_causal": True, "window_size_left": 0}) == (0, 0)
    assert w({"is_causal": False, "window_size_left": 2, "window_size_right": 1}) == (2, 1)


# ---- attention over packed sequences --------------------------------------------------------------------------------

def _flash_b(sq, sk, hq=4, hkv=2, dq=3, dv=5, **kw):
    cq = torch.tensor([0] + [sum(sq[:i + 1]) for i in range(len(sq))], dtype=torch.int32)
    ck = torch.tensor([0] + [sum(sk[:i + 1]) for i in range(len(sk))], dtype=torch.int32)
    b = {"query": torch.zeros(sum(sq), hq, dq), "key": torch.zeros(sum(sk), hkv, dq),
         "value": torch.zeros(sum(sk), hkv, dv), "cum_seq_q": cq, "cum_seq_k": ck}
    b.update(kw)
    return b


def _expected(pairs_per_head, sq, sk, hq, dq, dv, backward):
    pairs = hq * pairs_per_head
    per_pair = 3 * dq + 2 * dv if backward else dq + dv
    full = hq * sum(a * c for a, c in zip(sq, sk))
    vector = 4 * pairs + (0 if backward else hq * sum(sq) * dv)
    return {"matrix_flops": 2 * pairs * per_pair, "vector_flops": vector, "special_ops": pairs,
            "flop_counter_flops": 2 * full * per_pair}


def _check(got, exp, b):
    for k, v in exp.items():
        assert got[k] == v, (k, got[k], v)
    assert got["bytes_read"] == sum(nbytes(t) for t in b.values() if isinstance(t, torch.Tensor))
    assert got["bytes_written"] == 0


@pytest.mark.parametrize("backward", [False, True])
def test_flash_varlen_causal_is_bottom_right(backward):
    # sequences where the keys outnumber the queries (and one empty): bottom-right and top-left differ
    sq, sk = [2, 0, 3], [5, 1, 4]
    b = _flash_b(sq, sk, is_causal=True)
    got = F._varlen(b, None, flash=True, backward=backward)
    per_head = sum(causal_brute(a, c, 2) for a, c in zip(sq, sk))
    assert per_head != sum(causal_brute(a, c, 1) for a, c in zip(sq, sk))
    _check(got, _expected(per_head, sq, sk, 4, 3, 5, backward), b)


@pytest.mark.parametrize("backward", [False, True])
def test_flash_varlen_unmasked(backward):
    sq, sk = [3, 1], [2, 4]
    b = _flash_b(sq, sk, hq=2, hkv=1, dq=4, dv=7)
    got = F._varlen(b, None, flash=True, backward=backward)
    _check(got, _expected(3 * 2 + 1 * 4, sq, sk, 2, 4, 7, backward), b)


@pytest.mark.parametrize("backward", [False, True])
def test_flash_varlen_sliding_window(backward):
    sq, sk = [4, 2, 3], [6, 2, 3]
    b = _flash_b(sq, sk, hq=3, hkv=3, dq=2, dv=6, window_size_left=1, window_size_right=1)
    got = F._varlen(b, None, flash=True, backward=backward)
    per_head = sum(band_brute(a, c, 1, 1) for a, c in zip(sq, sk))
    _check(got, _expected(per_head, sq, sk, 3, 2, 6, backward), b)


@pytest.mark.parametrize("backward", [False, True])
def test_flash_dense_sliding_window(backward):
    # a dense (batch, seq, heads, dim) batch: 3 sequences of 5 queries over 7 keys, window (2, 0) with causal
    bs, s_q, s_k, hq, hkv, dq, dv = 3, 5, 7, 2, 1, 4, 3
    b = {"query": torch.zeros(bs, s_q, hq, dq), "key": torch.zeros(bs, s_k, hkv, dq),
         "value": torch.zeros(bs, s_k, hkv, dv), "cum_seq_q": None, "cum_seq_k": None, "is_causal": True,
         "window_size_left": 2, "window_size_right": -1}
    got = F._varlen(b, None, flash=True, backward=backward)
    per_head = bs * band_brute(s_q, s_k, 2, 0)
    _check(got, _expected(per_head, [s_q] * bs, [s_k] * bs, hq, dq, dv, backward), b)


def test_flash_dense_sliding_window_more_sequences_than_positions():
    # batch 4 > 2 query positions: every one of the 4 sequences is counted
    bs, s_q, s_k = 4, 2, 3
    b = {"query": torch.zeros(bs, s_q, 1, 2), "key": torch.zeros(bs, s_k, 1, 2), "value": torch.zeros(bs, s_k, 1, 2),
         "window_size_left": 0, "window_size_right": 1}
    got = F._varlen(b, None, flash=True, backward=False)
    assert band_brute(s_q, s_k, 0, 1) == 1 + 2
    assert got["special_ops"] == bs * 3


def test_flash_window_with_only_query_lengths_counts_dense():
    # cumulative lengths for only one side: the dense reading of the (batch, seq, heads, dim) tensors
    bs, s_q, s_k = 2, 3, 4
    b = {"query": torch.zeros(bs, s_q, 2, 4), "key": torch.zeros(bs, s_k, 2, 4), "value": torch.zeros(bs, s_k, 2, 4),
         "cum_seq_q": torch.tensor([0, 3, 6], dtype=torch.int32), "cum_seq_k": None,
         "window_size_left": 1, "window_size_right": 0}
    got = F._varlen(b, None, flash=True, backward=False)
    assert got["special_ops"] == 2 * bs * band_brute(s_q, s_k, 1, 0)


def test_flash_without_both_lengths_or_window_uses_the_c_formula():
    b = _flash_b([2], [2])
    b["cum_seq_k"] = None
    assert F._varlen(b, None, flash=True, backward=False) is None
    b = _flash_b([2], [2])
    b["cum_seq_q"] = None
    assert F._varlen(b, None, flash=True, backward=True) is None


def test_flash_ignores_an_efficient_window_size_argument():
    b = _flash_b([2], [3], hq=1, hkv=1, dq=1, dv=1, window_size=4)
    assert F._varlen(b, None, flash=True, backward=False)["special_ops"] == 6


def test_efficient_window_size_has_no_formula():
    b = {"query": torch.zeros(1, 2, 1, 1), "key": torch.zeros(1, 2, 1, 1), "value": torch.zeros(1, 2, 1, 1),
         "cu_seqlens_q": None, "cu_seqlens_k": None, "window_size": 2}
    with pytest.raises(ValueError, match="window_size"):
        F._varlen(b, None, flash=False, backward=False)


@pytest.mark.parametrize("mask", [0, 1, 2])
@pytest.mark.parametrize("backward", [False, True])
def test_efficient_varlen_masks(mask, backward):
    sq, sk = [3, 2], [5, 1]
    hq, hkv, dq, dv = 6, 3, 2, 5
    b = {"query": torch.zeros(1, sum(sq), hq, dq), "key": torch.zeros(1, sum(sk), hkv, dq),
         "value": torch.zeros(1, sum(sk), hkv, dv), "cu_seqlens_q": torch.tensor([0, 3, 5]),
         "cu_seqlens_k": torch.tensor([0, 5, 6]), "custom_mask_type": mask}
    got = F._varlen(b, None, flash=False, backward=backward)
    per_head = sum(causal_brute(a, c, mask) for a, c in zip(sq, sk))
    _check(got, _expected(per_head, sq, sk, hq, dq, dv, backward), b)


@pytest.mark.parametrize("hq,hkv", [(3, 2), (4, 0), (1, 2)])
def test_varlen_heads_that_do_not_divide(hq, hkv):
    b = _flash_b([2], [2], hq=hq, hkv=hkv)
    with pytest.raises(ValueError, match="heads"):
        F._varlen(b, None, flash=True, backward=False)


def test_varlen_one_key_head():
    b = _flash_b([2], [3], hq=5, hkv=1, dq=1, dv=1)
    assert F._varlen(b, None, flash=True, backward=False)["special_ops"] == 5 * 6


def test_varlen_lengths_that_do_not_match():
    b = _flash_b([2, 1], [2])
    with pytest.raises(ValueError, match="same batch"):
        F._varlen(b, None, flash=True, backward=False)
    b = _flash_b([2], [2])
    b["cum_seq_q"] = torch.tensor([0, 3, 2])
    b["cum_seq_k"] = torch.tensor([0, 2, 4])
    with pytest.raises(ValueError, match="same batch"):
        F._varlen(b, None, flash=True, backward=False)


def test_varlen_lengths_that_cannot_be_read():
    for side in ("cum_seq_q", "cum_seq_k"):
        b = _flash_b([2], [3])
        b[side] = b[side].to("meta")
        assert F._varlen(b, None, flash=True, backward=False)["status"] == B.E_DATA


# ---- FlexAttention block masks --------------------------------------------------------------------------------------

def _blocks_brute(q_len, kv_len, qb, kvb, visits):
    """visits: per query block, the key blocks it visits. Rows and columns of each block clipped to the sequence."""
    n = 0
    for i, blocks in enumerate(visits):
        rows = sum(1 for r in range(i * qb, (i + 1) * qb) if r < q_len)
        for j in blocks:
            n += rows * sum(1 for c in range(j * kvb, (j + 1) * kvb) if c < kv_len)
    return n


def _mask_tensors(visits, width):
    num = torch.tensor([len(v) for v in visits], dtype=torch.int32).view(1, 1, -1)
    idx = torch.tensor([list(v) + [0] * (width - len(v)) for v in visits], dtype=torch.int32).view(1, 1, len(visits),
                                                                                                    width)
    return num, idx


# q_len 5, kv_len 7, blocks 2 x 3: 3 query blocks (rows 2, 2, 1), 3 key blocks (columns 3, 3, 1)
PARTIAL = [[0], [0, 2], [1, 2]]
FULL = [[1], [], [0]]


def _bm(q_len=5, kv_len=7, qb=2, kvb=3, partial=PARTIAL, full=FULL):
    kv_num, kv_idx = _mask_tensors(partial, 3)
    fnum, fidx = _mask_tensors(full, 3) if full is not None else (None, None)
    # the query-side tensors (bm[6:10]) have other values: a formula reading them would count something else
    q_num = torch.tensor([3, 3, 3], dtype=torch.int32).view(1, 1, 3)
    q_idx = torch.tensor([[0, 1, 2]] * 3, dtype=torch.int32).view(1, 1, 3, 3)
    return (q_len, kv_len, kv_num, kv_idx, fnum, fidx, q_num, q_idx, None, None, qb, kvb, None)


def test_block_mask_pairs_partial_and_full():
    q, k = torch.zeros(2, 3, 5, 4), torch.zeros(2, 3, 7, 4)
    exp = _blocks_brute(5, 7, 2, 3, PARTIAL) + _blocks_brute(5, 7, 2, 3, FULL)
    # by hand: block 0 rows 2 x (3 + 3); block 1 rows 2 x (3 + 1); block 2 row 1 x (3 + 1 + 3)
    assert exp == 12 + 8 + 7
    assert NN._block_mask_pairs(_bm(), q, k) == 2 * 3 * exp


def test_block_mask_pairs_without_full_blocks():
    q, k = torch.zeros(1, 1, 5, 4), torch.zeros(1, 1, 7, 4)
    assert NN._block_mask_pairs(_bm(full=None), q, k) == _blocks_brute(5, 7, 2, 3, PARTIAL)


def test_block_mask_pairs_full_count_without_indices_is_skipped():
    q, k = torch.zeros(1, 1, 5, 4), torch.zeros(1, 1, 7, 4)
    bm = list(_bm())
    bm[5] = None
    assert NN._block_mask_pairs(tuple(bm), q, k) == _blocks_brute(5, 7, 2, 3, PARTIAL)


def test_block_mask_pairs_per_batch_mask():
    # a mask with one entry per batch, shared by the heads
    kv_num = torch.tensor([[[1, 1]], [[2, 2]]], dtype=torch.int32)
    kv_idx = torch.tensor([[[[0, 0], [1, 0]]], [[[0, 1], [0, 1]]]], dtype=torch.int32)
    bm = (4, 4, kv_num, kv_idx, None, None, None, None, None, None, 2, 2, None)
    q, k = torch.zeros(2, 3, 4, 1), torch.zeros(2, 3, 4, 1)
    # batch 0: two blocks of 2 x 2; batch 1: every block, 4 x 4
    assert NN._block_mask_pairs(bm, q, k) == 3 * (2 * 4 + 16)


def test_block_mask_sizes_are_the_last_two_ints():
    q, k = torch.zeros(1, 1, 5, 4), torch.zeros(1, 1, 7, 4)
    kv_num, kv_idx = _mask_tensors(PARTIAL, 3)
    bm = (5, 7, kv_num, kv_idx, None, None, 9, 2, 3, None)  # an extra int: the block sizes are read from the end
    assert NN._block_mask_pairs(bm, q, k) == _blocks_brute(5, 7, 2, 3, PARTIAL)


def test_block_mask_minimal_layout_and_unit_blocks():
    # two tensors and four ints is enough; 1 x 1 blocks count pairs one by one
    num = torch.tensor([[[1, 2, 0]]], dtype=torch.int32)
    idx = torch.tensor([[[[0, 0], [1, 2], [0, 0]]]], dtype=torch.int32)
    bm = (3, 3, num, idx, None, None, 1, 1)
    assert NN._block_mask_pairs(bm, torch.zeros(1, 1, 3, 2), torch.zeros(1, 1, 3, 2)) == 3


@pytest.mark.parametrize("bm", [
    (5, 7, torch.zeros(1, 1, 3, dtype=torch.int32), None, None, None, 2, 3),  # one tensor
    (5, torch.zeros(1, 1, 3, dtype=torch.int32), torch.zeros(1, 1, 3, 3, dtype=torch.int32), 2, 3),  # three ints
])
def test_block_mask_of_an_unknown_layout(bm):
    with pytest.raises(ValueError, match="unknown layout"):
        NN._block_mask_pairs(bm, torch.zeros(1, 1, 5, 4), torch.zeros(1, 1, 7, 4))


@pytest.mark.parametrize("qb,kvb", [(0, 3), (2, 0), (-1, 3)])
def test_block_mask_block_sizes_must_be_positive(qb, kvb):
    with pytest.raises(ValueError, match="block sizes"):
        NN._block_mask_pairs(_bm(qb=qb, kvb=kvb), torch.zeros(1, 1, 5, 4), torch.zeros(1, 1, 7, 4))


def test_block_mask_blocks_past_the_sequence_count_nothing():
    # a mask built from block tables (BlockMask.from_kv_blocks) may hold more query blocks than q_len needs and visit a
    # key block past kv_len; eager flex_attention runs it. q_len 5, kv_len 7, blocks 2 x 3: query block 3 has no rows,
    # key block 3 no columns
    visits = [[0], [0, 2], [3], [1]]
    num, idx = _mask_tensors(visits, 2)
    bm = (5, 7, num, idx, None, None, None, None, None, None, 2, 3, None)
    exp = _blocks_brute(5, 7, 2, 3, visits)
    # by hand: block 0 rows 2 x 3; block 1 rows 2 x (3 + 1); block 2 row 1 x 0; block 3 no rows
    assert exp == 6 + 8
    assert NN._block_mask_pairs(bm, torch.zeros(1, 1, 5, 4), torch.zeros(1, 1, 7, 4)) == exp


def test_block_mask_pairs_per_head_mask():
    # a mask with one entry per head (shape (1, H, ...)), shared by the batches; every head visits other blocks
    per_head = [PARTIAL, [[0], [1], [2]], [[], [0, 1, 2], [0]]]
    num = torch.cat([_mask_tensors(v, 3)[0] for v in per_head], dim=1)
    idx = torch.cat([_mask_tensors(v, 3)[1] for v in per_head], dim=1)
    bm = (5, 7, num, idx, None, None, None, None, None, None, 2, 3, None)
    q, k = torch.zeros(2, 3, 5, 4), torch.zeros(2, 3, 7, 4)
    exp = sum(_blocks_brute(5, 7, 2, 3, v) for v in per_head)
    assert exp == (6 + 8 + 4) + (6 + 6 + 1) + (0 + 2 * 7 + 3)
    assert NN._block_mask_pairs(bm, q, k) == 2 * exp


# grouped-query FlexAttention with fewer queries than keys and a value width of its own: q (B, Hq, L, E),
# k (B, Hkv, S, E), v (B, Hkv, S, Ev); the mask (1, 1, ...) is shared by every batch and head
FB, FHQ, FHKV, FL, FS, FE, FEV = 2, 4, 2, 5, 9, 8, 3
FLEX_PARTIAL = [[0], [0, 2], [1, 2]]
FLEX_FULL = [[1], [], [0]]


def _flex_inputs():
    q = torch.zeros(FB, FHQ, FL, FE)
    k = torch.zeros(FB, FHKV, FS, FE)
    v = torch.zeros(FB, FHKV, FS, FEV)
    kv_num, kv_idx = _mask_tensors(FLEX_PARTIAL, 3)
    fnum, fidx = _mask_tensors(FLEX_FULL, 3)
    bm = (FL, FS, kv_num, kv_idx, fnum, fidx, None, None, None, None, 2, 3, None)
    # rows per query block 2, 2, 1; every key block 3 columns (S = 9)
    pairs = FB * FHQ * (_blocks_brute(FL, FS, 2, 3, FLEX_PARTIAL) + _blocks_brute(FL, FS, 2, 3, FLEX_FULL))
    assert pairs == FB * FHQ * (2 * 3 + 2 * 6 + 1 * 6 + 2 * 3 + 1 * 3)
    mask_bytes = nbytes(kv_num, kv_idx, fnum, fidx)
    return q, k, v, bm, pairs, mask_bytes


def test_flex_forward_grouped_heads_and_value_width():
    q, k, v, bm, pairs, mask_bytes = _flex_inputs()
    out = (torch.zeros(FB, FHQ, FL, FEV), torch.zeros(FB, FHQ, FL))  # the output and its logsumexp
    args = (q, k, v, None, bm, 0.5, {}, (), ())  # flex_attention(query, key, value, score_mod, block_mask, ...)
    got = F._flex(args, {}, out)
    assert got["matrix_flops"] == 2 * pairs * (FE + FEV)  # Q K^T over E, P V over Ev
    assert got["vector_flops"] == 4 * pairs + FB * FHQ * FL * FEV  # softmax per score, the division per output
    assert got["special_ops"] == pairs
    assert got["bytes_read"] == nbytes(q, k, v) + mask_bytes
    assert got["bytes_written"] == nbytes(*out)


def test_flex_backward_grouped_heads_and_value_width():
    q, k, v, bm, pairs, mask_bytes = _flex_inputs()
    o, lse, g = torch.zeros(FB, FHQ, FL, FEV), torch.zeros(FB, FHQ, FL), torch.zeros(FB, FHQ, FL, FEV)
    # flex_attention_backward(q, k, v, out, logsumexp, grad_out, grad_logsumexp, fw_graph, joint_graph, block_mask,
    # scale, kernel_options, ...)
    args = (q, k, v, o, lse, g, None, None, None, bm, 0.5, {}, (), ())
    grads = (torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v))
    got = F._flex(args, {}, grads, backward=True)
    assert got["matrix_flops"] == 2 * pairs * (3 * FE + 2 * FEV)
    assert (got["vector_flops"], got["special_ops"]) == (4 * pairs, pairs)
    assert got["bytes_read"] == nbytes(q, k, v, o, lse, g) + mask_bytes
    assert got["bytes_written"] == nbytes(*grads)


# ---- ordering and search --------------------------------------------------------------------------------------------

def test_clog2_values():
    for n in range(0, 70):
        assert B._clog2(n) == ceil_log2(n), n
    assert [B._clog2(n) for n in (2, 3, 4, 5, 8, 9)] == [1, 2, 2, 3, 3, 4]


def _zero_flops(got, *names):
    for k in names:
        assert got[k] == 0, k


@pytest.mark.parametrize("L", [1, 3, 4, 7, 8])
def test_searchsorted_rows(L):
    seq = torch.zeros(2, L)  # 2 rows of L boundaries
    v = torch.zeros(2, 5)
    out = torch.zeros(2, 5, dtype=torch.int64)
    got = F._searchsorted({"sorted_sequence": seq, "self": v}, out)
    assert got["vector_flops"] == 10 * ceil_log2(L + 1)
    assert got["bytes_read"] == nbytes(seq, v) and got["bytes_written"] == nbytes(out)
    _zero_flops(got, "matrix_flops", "special_ops", "flop_counter_flops")


def test_searchsorted_scalar_value():
    got = F._searchsorted({"sorted_sequence": torch.zeros(3), "self": 2.5}, torch.zeros((), dtype=torch.int64))
    assert got["vector_flops"] == 2  # 4 buckets


@pytest.mark.parametrize("L", [1, 3, 4, 8])
def test_bucketize(L):
    bounds, v = torch.zeros(L), torch.zeros(3, 2)
    got = F._bucketize({"boundaries": bounds, "self": v}, torch.zeros(3, 2, dtype=torch.int64))
    assert got["vector_flops"] == 6 * ceil_log2(L + 1)
    _zero_flops(got, "matrix_flops", "special_ops", "flop_counter_flops")


def test_bucketize_scalar_and_bad_boundaries():
    assert F._bucketize({"boundaries": torch.zeros(4), "self": 1.0}, None)["vector_flops"] == 3
    with pytest.raises(ValueError, match="1-d"):
        F._bucketize({"boundaries": torch.zeros(2, 4), "self": torch.zeros(3)}, None)
    with pytest.raises(ValueError, match="1-d"):
        F._bucketize({"boundaries": torch.zeros(()), "self": torch.zeros(3)}, None)


@pytest.mark.parametrize("L", [1, 3, 4, 5, 8])
def test_isin(L):
    e, t = torch.zeros(2, 3), torch.zeros(L)
    got = F._isin({"elements": e, "test_elements": t}, torch.zeros(2, 3, dtype=torch.bool))
    assert got["vector_flops"] == L * ceil_log2(L) + 6 * ceil_log2(L + 1)


def test_isin_scalars():
    # isin(Scalar element, Tensor): one search; isin(Tensor, Scalar test_element): sorting one value is free
    got = F._isin({"element": 2, "elements": 2, "test_elements": torch.zeros(5)}, None)
    assert got["vector_flops"] == 5 * 3 + 1 * 3
    got = F._isin({"elements": torch.zeros(7), "test_element": 1}, None)
    assert got["vector_flops"] == 7 * 1


def test_sort_of_one_and_zero_dimensional_tensors():
    x = torch.zeros(8)
    assert F._sort({"self": x, "dim": 0}, None)["vector_flops"] == 8 * 3
    assert F._sort({"self": x}, None)["vector_flops"] == 8 * 3
    assert F._sort({"self": torch.zeros(())}, None)["vector_flops"] == 0
    x = torch.zeros(2, 5)
    assert F._sort({"self": x, "dim": 1}, None)["vector_flops"] == 10 * 3
    assert F._sort({"self": x, "dim": -2}, None)["vector_flops"] == 10 * 1
    with pytest.raises(IndexError, match="out of range for a 2-d"):
        F._sort({"self": x, "dim": 2}, None)


def test_read_skips_the_out_argument():
    x, o = torch.zeros(4), torch.zeros(4)
    got = F._sort({"self": x, "dim": 0, "out": o}, o)
    assert got["bytes_read"] == nbytes(x) and got["bytes_written"] == nbytes(o)


# ---- what counts as a tensor, touched bytes ----------------------------------------------------------------

def test_is_tensor_needs_dtype_stride_and_shape():
    import numpy as np
    assert B._is_tensor(torch.zeros(2))
    assert not B._is_tensor(np.zeros(3))  # dtype and shape, no stride()
    assert not B._is_tensor(torch.Size([2, 3]))


def test_touched_bytes_of_an_empty_broadcast():
    t = torch.empty(1, 3).expand(0, 3)  # a zero-size dimension with stride 0
    assert t.stride()[0] == 0
    assert B._touched_bytes(t) == 0
    assert B._touched_bytes(torch.empty(4, 1).expand(4, 6)) == 4 * F32


def test_touched_bytes_of_a_nested_tensor():
    nt = torch.nested.nested_tensor([torch.zeros(2, 4), torch.zeros(3, 4)])
    assert B._touched_bytes(nt) == (2 + 3) * 4 * F32


# ---- recurrent layers -----------------------------------------------------------------------------------------------

def _rnn_b(t_b, i_size, h, gates, biases, backward=False):
    x = torch.zeros(t_b, i_size)
    w_ih, w_hh = torch.zeros(gates * h, i_size), torch.zeros(gates * h, h)
    if backward:
        return {"input": x, "weight1": w_ih, "weight2": w_hh, "has_biases": biases}
    return {"input": x, "weight0": w_ih, "weight1": w_hh, "has_biases": biases}


@pytest.mark.parametrize("gates,flops,special", [(4, 14, 5), (3, 12, 3), (1, 1, 1)])
@pytest.mark.parametrize("biases", [False, True])
@pytest.mark.parametrize("backward", [False, True])
def test_rnn_layer(gates, flops, special, biases, backward):
    tb, i_size, h = 6, 1, 1  # one input feature and one hidden unit are valid sizes
    b = _rnn_b(tb, i_size, h, gates, biases, backward)
    got = F._rnn_layer(b, None, backward=backward)
    matrix = 2 * tb * gates * h * i_size + 2 * tb * gates * h * h
    bias = 2 * tb * gates * h if biases else 0
    if backward:
        assert (got["matrix_flops"], got["vector_flops"], got["special_ops"]) == (2 * matrix, 2 * tb * h * flops + bias, 0)
    else:
        assert (got["matrix_flops"], got["vector_flops"], got["special_ops"]) == (matrix, tb * h * flops + bias,
                                                                                  tb * h * special)


def test_rnn_layer_larger_sizes():
    got = F._rnn_layer(_rnn_b(10, 3, 5, 4, False), None)
    assert got["matrix_flops"] == 2 * 10 * 20 * 3 + 2 * 10 * 20 * 5
    assert got["vector_flops"] == 10 * 5 * 14


@pytest.mark.parametrize("w_ih,w_hh", [((8, 3), (8, 0)), ((7, 3), (7, 2)), ((8, 0), (8, 2))])
def test_rnn_layer_weights_that_do_not_fit(w_ih, w_hh):
    b = {"input": torch.zeros(4, 3), "weight0": torch.zeros(*w_ih), "weight1": torch.zeros(*w_hh)}
    with pytest.raises(ValueError, match="do not fit"):
        F._rnn_layer(b, None)


def _cudnn_b(layers, stride, tb=6, i_size=3, h=2, gates=4, proj=0):
    ws, inp = [], i_size
    for _ in range(layers):
        ws += [torch.zeros(gates * h, inp), torch.zeros(gates * h, h)]
        if stride == 4:
            ws += [torch.zeros(gates * h), torch.zeros(gates * h)]
        inp = h
    return {"input": torch.zeros(tb // 2, 2, i_size), "weight": ws, "weight_stride0": stride, "proj_size": proj}


@pytest.mark.parametrize("stride", [2, 4])
@pytest.mark.parametrize("backward", [False, True])
def test_cudnn_rnn_two_layers(stride, backward):
    tb, i_size, h, g = 6, 3, 2, 4
    b = _cudnn_b(2, stride)
    got = F._cudnn_rnn(b, None, backward=backward)
    matrix = 2 * tb * g * h * (i_size + h) + 2 * tb * g * h * (h + h)
    vector = 2 * (tb * h * 14 + (2 * tb * g * h if stride == 4 else 0))
    special = 2 * tb * h * 5
    if backward:
        matrix, vector, special = 2 * matrix, 2 * vector, 0
    assert (got["matrix_flops"], got["vector_flops"], got["special_ops"]) == (matrix, vector, special)
    assert got["bytes_read"] == nbytes(b["input"], *b["weight"])


@pytest.mark.parametrize("stride,proj", [(1, 0), (3, 0), (2, 1)])
def test_cudnn_rnn_without_a_formula(stride, proj):
    b = _cudnn_b(1, 2, proj=proj)
    b["weight_stride0"] = stride
    with pytest.raises(ValueError):
        F._cudnn_rnn(b, None)


# ---- fused encoder layer --------------------------------------------------------------------------------------------

def _encoder_expected(lens, e, h, f, gelu):
    tokens, pairs = sum(lens), sum(s * s for s in lens)
    matrix = 2 * tokens * e * 3 * e + 2 * 2 * pairs * e + 2 * tokens * e * e + 2 * 2 * tokens * e * f
    act = 4 if gelu else 1
    vector = tokens * (5 * e + f) + h * pairs * 4 + 2 * 8 * tokens * e + 2 * tokens * e + act * tokens * f
    special = h * pairs + (tokens * f if gelu else 0)
    return matrix, vector, special


# A strided nested tensor raises RuntimeError (not AttributeError) on `.shape`: _is_tensor must not ask hasattr() for it
# (it did, and the nested fast path of nn.TransformerEncoder raised out of the formula).
@pytest.mark.parametrize("gelu", [False, True])
def test_encoder_layer_nested_batch(gelu):
    e, h, f = 4, 2, 6
    src = torch.nested.nested_tensor([torch.zeros(3, e), torch.zeros(1, e)])
    w1 = torch.zeros(f, e)
    b = {"src": src, "embed_dim": e, "num_heads": h, "ffn_weight_1": w1, "use_gelu": gelu}
    got = F._encoder_layer(b, None)
    assert (got["matrix_flops"], got["vector_flops"], got["special_ops"]) == _encoder_expected([3, 1], e, h, f, gelu)
    assert got["bytes_read"] == 4 * e * F32 + nbytes(w1)


@pytest.mark.parametrize("gelu", [False, True])
def test_encoder_layer_dense_batch(gelu):
    e, h, f = 6, 3, 5
    b = {"src": torch.zeros(2, 3, e), "embed_dim": e, "num_heads": h, "ffn_weight_1": torch.zeros(f, e),
         "use_gelu": gelu}
    got = F._encoder_layer(b, None)
    assert (got["matrix_flops"], got["vector_flops"], got["special_ops"]) == _encoder_expected([3, 3], e, h, f, gelu)


def test_nested_encoder_fast_path_inside_measure_is_counted_not_raised():
    """nn.TransformerEncoder's nested-tensor fast path (a padding mask, eval, no grad): the fused layer is counted
    for its real tokens (5 and 3 of 5 positions); the nested-tensor conversions around it are copies: the padded
    input (2 x 5 x 8 fp32, 320 B) and its mask (10 bools) read, the 8 real tokens (8 x 8 x 4 = 256 B) written, and
    back to a padded tensor (256 B read, 320 B written). The step runs to the end (a formula's failure on a nested
    tensor raised out of it before)."""
    import warnings

    import roofline

    e, h, f = 8, 2, 16
    torch.manual_seed(0)
    enc = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(e, h, f, batch_first=True), 1,
                                      enable_nested_tensor=True).eval()
    x = torch.randn(2, 5, e)
    mask = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch: nested tensors are a prototype
        with torch.no_grad(), roofline.measure(enc, timing=None) as r:
            enc(x, src_key_padding_mask=mask)
    row = r.by_op()["aten._transformer_encoder_layer_fwd.default"]
    assert (row["matrix_flops"], row["vector_flops"], row["special_ops"]) == _encoder_expected([5, 3], e, h, f, False)
    assert r.unknown_ops == {} and r.errors == {}
    rows = r.by_op()
    assert (rows["aten._nested_tensor_from_mask.default"]["bytes_read"],
            rows["aten._nested_tensor_from_mask.default"]["bytes_written"]) == (330, 256)
    assert (rows["aten.to_padded_tensor.default"]["bytes_read"],
            rows["aten.to_padded_tensor.default"]["bytes_written"]) == (256, 320)


def test_a_built_in_formula_failing_is_an_error_record_not_a_failed_step(monkeypatch):
    """Whatever a built-in Python formula raises on inputs it did not foresee, the op is recorded with an error status
    (r.errors, zero counts) and the user's step goes on; ROOFLINE_DEBUG=1 raises it instead, for a bug report."""
    import roofline
    from roofline._counting import _formulas

    def boom(*a, **k):
        raise RuntimeError("a formula bug")

    x = torch.randn(16)
    with roofline.measure(timing=None) as ok:
        torch.sort(x)
    assert "aten.sort.default" in ok.by_op() and not ok.errors  # sort has a built-in Python formula
    monkeypatch.setattr(_formulas, "bind", boom)
    with roofline.measure(timing=None) as r:
        values, _ = torch.sort(x)
    assert torch.equal(values, torch.sort(x).values)
    assert r.errors["aten.sort.default"][0] == 1 and r.by_op()["aten.sort.default"]["flops"] == 0
    monkeypatch.setenv("ROOFLINE_DEBUG", "1")
    with pytest.raises(RuntimeError, match="a formula bug"):
        with roofline.measure(timing=None):
            torch.sort(x)


# ---- torchvision detection ops --------------------------------------------------------------------------------------

def _nms_expected(n):
    comparisons = n * ceil_log2(n)  # sorting the scores
    areas = 3 * n
    pairs = sum(1 for i in range(n) for j in range(n) if i < j)
    return comparisons + areas + pairs * (12 + 1)  # IoU and its comparison to the threshold


@pytest.mark.parametrize("name", ["dets", "boxes"])
def test_nms_pairs_of_boxes(name):
    boxes, scores = torch.zeros(6, 4), torch.zeros(6)
    keep = torch.zeros(3, dtype=torch.int64)
    got = F._nms({name: boxes, "scores": scores, "iou_threshold": 0.5}, keep)
    assert got["vector_flops"] == _nms_expected(6) == 6 * 3 + 18 + 15 * 13
    assert (got["bytes_read"], got["bytes_written"]) == (nbytes(boxes, scores), nbytes(keep))


def roi_sample_loop(rois, scale, ph, pw, sampling_ratio, aligned):
    """Sample evaluations of one channel, over every region and bin, by the loops of torchvision's roi_align kernel:
    the region's corners scaled (less half a pixel when aligned), its sides at least one pixel unless aligned, a grid
    of sampling_ratio^2 samples per bin or (sampling_ratio <= 0) ceil(side / bins) per side."""
    n = 0
    offset = 0.5 if aligned else 0.0
    for _, x1, y1, x2, y2 in rois:
        h = (y2 * scale - offset) - (y1 * scale - offset)
        w = (x2 * scale - offset) - (x1 * scale - offset)
        if not aligned:
            h, w = max(h, 1.0), max(w, 1.0)
        grid_h = sampling_ratio if sampling_ratio > 0 else math.ceil(h / ph)
        grid_w = sampling_ratio if sampling_ratio > 0 else math.ceil(w / pw)
        for _bin in range(ph * pw):
            for _iy in range(grid_h):  # a grid side <= 0 samples nothing
                for _ix in range(grid_w):
                    n += 1
    return n


# (batch index, x1, y1, x2, y2): regions wider than high and the reverse, with x1 != y1; one of zero height, one of
# zero width and, without ``aligned``, one upside down (y2 < y1: one pixel high; aligned, torchvision's kernel fails on
# it). Spatial scale 0.5.
ROIS = [[0, 1, 2, 9, 14], [1, 4, 0, 16, 5], [0, 3, 7, 11, 7], [0, 5, 1, 5, 13]]
UPSIDE_DOWN = [1, 2, 9, 6, 5]
ROI_C, ROI_PH, ROI_PW, ROI_SCALE = 3, 2, 3, 0.5


def _rois(aligned):
    return ROIS if aligned else ROIS + [UPSIDE_DOWN]


def _roi_b(sampling_ratio, aligned, backward):
    rois = torch.tensor(_rois(aligned), dtype=torch.float32)
    common = {"rois": rois, "spatial_scale": ROI_SCALE, "pooled_height": ROI_PH, "pooled_width": ROI_PW,
              "sampling_ratio": sampling_ratio, "aligned": aligned}
    if backward:  # _roi_align_backward(grad, rois, spatial_scale, pooled_height, pooled_width, batch_size, channels,
        # height, width, sampling_ratio, aligned)
        return dict(common, grad=torch.zeros(len(rois), ROI_C, ROI_PH, ROI_PW), batch_size=2, channels=ROI_C,
                    height=16, width=16)
    return dict(common, input=torch.zeros(2, ROI_C, 16, 16))


def test_roi_sample_loop_by_hand():
    # adaptive, not aligned: grids 3 x 2, 2 x 2, 1 x 2 (height 0 -> 1 pixel), 3 x 1 (width 0 -> 1), 1 x 1; 6 bins
    assert roi_sample_loop(_rois(False), ROI_SCALE, 2, 3, -1, False) == 6 * (6 + 4 + 2 + 3 + 1)
    # aligned: the regions of zero height or width sample nothing
    assert roi_sample_loop(_rois(True), ROI_SCALE, 2, 3, 0, True) == 6 * (6 + 4)
    assert roi_sample_loop(_rois(True), ROI_SCALE, 2, 3, 2, True) == 6 * 4 * 4


@pytest.mark.parametrize("sampling_ratio", [-1, 0, 1, 2])
@pytest.mark.parametrize("aligned", [False, True])
def test_roi_align_forward(sampling_ratio, aligned):
    b = _roi_b(sampling_ratio, aligned, backward=False)
    rois = _rois(aligned)
    out = torch.zeros(len(rois), ROI_C, ROI_PH, ROI_PW)
    got = F._roi_align(b, out)
    evaluations = ROI_C * roi_sample_loop(rois, ROI_SCALE, ROI_PH, ROI_PW, sampling_ratio, aligned)
    assert got["vector_flops"] == 8 * evaluations + len(rois) * ROI_C * ROI_PH * ROI_PW
    assert got["bytes_read"] == nbytes(b["rois"]) + min(nbytes(b["input"]), 4 * evaluations * F32)
    assert got["bytes_written"] == nbytes(out)
    _zero_flops(got, "matrix_flops", "special_ops")


@pytest.mark.parametrize("sampling_ratio", [-1, 0, 1, 2])
@pytest.mark.parametrize("aligned", [False, True])
def test_roi_align_backward(sampling_ratio, aligned):
    b = _roi_b(sampling_ratio, aligned, backward=True)
    out = torch.zeros(2, ROI_C, 16, 16)
    got = F._roi_align(b, out, backward=True)
    evaluations = ROI_C * roi_sample_loop(_rois(aligned), ROI_SCALE, ROI_PH, ROI_PW, sampling_ratio, aligned)
    assert got["vector_flops"] == 8 * evaluations  # 4 multiplies and 4 adds into the input's grad per sample
    assert got["bytes_read"] == nbytes(b["grad"], b["rois"])
    assert got["bytes_written"] == nbytes(out)
    _zero_flops(got, "matrix_flops", "special_ops")


@pytest.mark.parametrize("sampling_ratio,aligned", [(0, False), (-1, True)])
def test_roi_align_through_torchvision(sampling_ratio, aligned):
    """The same regions through torchvision's op and its backward under measure (they run on these regions)."""
    tv = pytest.importorskip("torchvision")
    import roofline

    rois = _rois(aligned)
    x = torch.zeros(2, ROI_C, 16, 16, requires_grad=True)
    with roofline.measure(timing=None) as r:
        tv.ops.roi_align(x, torch.tensor(rois, dtype=torch.float32), (ROI_PH, ROI_PW), spatial_scale=ROI_SCALE,
                         sampling_ratio=sampling_ratio, aligned=aligned).sum().backward()
    assert not r.errors
    ops = r.by_op()
    evaluations = ROI_C * roi_sample_loop(rois, ROI_SCALE, ROI_PH, ROI_PW, sampling_ratio, aligned)
    bins = len(rois) * ROI_C * ROI_PH * ROI_PW
    assert ops["torchvision.roi_align.default"]["vector_flops"] == 8 * evaluations + bins
    assert ops["torchvision._roi_align_backward.default"]["vector_flops"] == 8 * evaluations


# ---- quantized products ---------------------------------------------------------------------------------------------

def test_quant_mm_result_without_a_last_dimension():
    with pytest.raises(ValueError, match="last dimension"):
        F._quant_mm({"self": torch.zeros(2, 4)}, torch.zeros(()))
    with pytest.raises(ValueError, match="last dimension"):
        F._quant_mm({"self": torch.zeros(())}, torch.zeros(3))


def test_dyn_quant_block_of_one():
    # block_size == in_features is the channel-wise case _dyn_quant_matmul_4bit accepts: K = 1 in blocks of 1
    x, packed, out = torch.zeros(3, 1), torch.zeros(10, dtype=torch.uint8), torch.zeros(3, 5)
    b = {"inp": x, "packed_weights": packed, "block_size": 1, "in_features": 1, "out_features": 5}
    got = F.OPS["aten::_dyn_quant_matmul_4bit"](b, out)
    assert got["matrix_flops"] == 2 * 3 * 5 * 1
    assert got["vector_flops"] == 2 * 3 * 5 * 1 + 4 * 3 * 1  # one rescaled partial sum per output, the row quantised


def test_out_dtype_mm_of_non_matrices():
    f = F.HOPS["out_dtype"]
    mm = torch.ops.aten.mm.default
    a3, a2, b2, b1 = (torch.empty(*s, dtype=torch.int8, device="meta") for s in [(2, 3, 4), (3, 4), (4, 5), (4,)])
    for a, b in [(a3, b2), (a2, b1)]:
        with pytest.raises(ValueError, match="matrices"):
            f((mm, torch.int32, a, b), {}, torch.empty(3, 5, dtype=torch.int32, device="meta"))


# ---- oneDNN / MKL ops of frozen CPU graphs --------------------------------------------------------------------------

@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta:UserWarning")
def test_tensor_bytes_of_a_layout_without_strides():
    t = torch.eye(3).to_sparse_csr()  # .stride() raises: what the sparse layout stores is counted
    with pytest.raises(RuntimeError):
        t.stride()
    # 4 int64 row pointers (32) + 3 int64 column indices (24) + 3 fp32 values (12)
    assert P._tensor_bytes(t) == 4 * 8 + 3 * 8 + 3 * F32
    assert P._tensor_bytes(torch.zeros(4, 1).expand(4, 6)) == 4 * F32  # strided: the elements in memory


def test_mkl_linear_of_a_batch_of_sequences():
    # X [2, 5, 16] (K = 16 is the last dimension, not the second); the packed buffer is not counted, ORI_W is
    x, w, bias = torch.zeros(2, 5, 16), torch.zeros(7, 16), torch.zeros(7)
    out = torch.zeros(2, 5, 7)
    b = {"X": x, "MKL_W": torch.zeros(300), "ORI_W": w, "B": bias, "batch_size": 10}
    got = F._mkl_linear(b, out)
    assert (got["matrix_flops"], got["vector_flops"]) == (2 * 10 * 7 * 16, 10 * 7)
    assert (got["bytes_read"], got["bytes_written"]) == (nbytes(x, w, bias), nbytes(out))


def test_linear_pointwise_of_a_batch_of_sequences():
    x, w, bias = torch.zeros(2, 5, 16), torch.zeros(7, 16), torch.zeros(7)
    out = torch.zeros(2, 5, 7)
    got = F._linear_pointwise({"X": x, "W": w, "B": bias, "attr": "relu", "scalars": [], "algorithm": ""}, out)
    assert (got["matrix_flops"], got["vector_flops"]) == (2 * 10 * 7 * 16, 10 * 7 + 10 * 7)  # bias, relu
    assert got["bytes_read"] == nbytes(x, w, bias)


@pytest.mark.parametrize("w_shape", [(7, 15), (1, 7, 16)])
def test_linear_pointwise_weight_that_does_not_fit(w_shape):
    # the meta kernel accepts a [7, 15] weight for X [..., 16]: the formula refuses it (an error record)
    b = {"X": torch.zeros(5, 16, device="meta"), "W": torch.zeros(*w_shape, device="meta"), "B": None,
         "attr": "none"}
    with pytest.raises(ValueError, match="does not fit"):
        F._linear_pointwise(b, torch.zeros(5, 7, device="meta"))


def _conv_b(x_shape, w_shape, **kw):
    b = {"X": torch.zeros(*x_shape, device="meta"), "W": torch.zeros(*w_shape, device="meta"), "B": None,
         "padding": [0, 0], "stride": [1, 1], "dilation": [1, 1], "attr": "none", "scalars": [], "algorithm": ""}
    b.update(kw)
    return b


def test_convolution_pointwise_one_output_channel():
    # C_out = 1: each output element sums 3 channels x 3 x 3 taps = 27 products
    b = _conv_b((1, 3, 5, 5), (1, 3, 3, 3), groups=1)
    out = torch.zeros(1, 1, 3, 3, device="meta")
    got = F._convolution_pointwise(b, out)
    assert (got["matrix_flops"], got["vector_flops"]) == (2 * 9 * 27, 0)
    assert (got["bytes_read"], got["bytes_written"]) == (F32 * (75 + 27), F32 * 9)


def test_convolution_pointwise_no_output_channels():
    # the meta kernel accepts a weight of 0 output channels: nothing to compute, the input read
    b = _conv_b((1, 3, 5, 5), (0, 3, 3, 3), groups=1)
    got = F._convolution_pointwise(b, torch.zeros(1, 0, 3, 3, device="meta"))
    assert (got["matrix_flops"], got["vector_flops"], got["bytes_read"], got["bytes_written"]) == (0, 0, F32 * 75, 0)


@pytest.mark.parametrize("groups", ["absent", None])
def test_convolution_pointwise_without_groups_is_one_group(groups):
    b = _conv_b((1, 4, 5, 5), (2, 4, 3, 3))
    if groups != "absent":
        b["groups"] = groups
    got = F._convolution_pointwise(b, torch.zeros(1, 2, 3, 3, device="meta"))
    assert got["matrix_flops"] == 2 * 18 * 36


@pytest.mark.parametrize("x_shape,w_shape", [((1, 4, 5, 5), (2, 3, 3, 3)), ((1, 4, 5, 5), (2, 4, 3))])
def test_convolution_pointwise_weight_that_does_not_fit(x_shape, w_shape):
    # channels that do not match (4 != 3 x 1 group), or a weight of another rank with matching channels
    with pytest.raises(ValueError, match="does not fit"):
        F._convolution_pointwise(_conv_b(x_shape, w_shape, groups=1), torch.zeros(1, 2, 3, 3, device="meta"))


def test_touched_bytes_of_a_onednn_layout_tensor_is_its_elements():
    """oneDNN's opaque layout reports strides (1, 0, 0, ...): the formulas count its elements, not one row."""
    import torch

    if not torch.backends.mkldnn.is_available():
        pytest.skip("this torch has no oneDNN")
    m = torch.randn(2, 3, 4, 5).to_mkldnn()
    assert B._touched_bytes(m) == 2 * 3 * 4 * 5 * 4
    assert B._touched_bytes(torch.randn(2, 3).to_mkldnn()) == 2 * 3 * 4
