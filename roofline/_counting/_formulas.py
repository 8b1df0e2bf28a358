"""Built-in Python formulas: ops whose count depends on tensor values or on many arguments.

``measure`` uses them; ``roofline.cost`` (shapes only) does not know these ops. Each formula takes the op's arguments
bound to their schema names (``b``) and its result (``out``) and returns a dict of counts (the keys of
``roofline.Cost`` plus ``flop_counter_flops`` and ``status``), or ``None`` to use the op's C formula for this call
(the attention ops use the C formula for dense batches and this module for variable-length ones).

The counts follow the conventions of docs/concepts.md (one FLOP per add or multiply, products ``2*M*N*K`` as matrix
FLOPs, transcendental functions in ``special_ops``, compulsory bytes: every tensor argument read once at its touched
size, every result written once). The per-op conventions (comparisons of a sort, the pointwise work of a recurrent
cell, the blocks of a FlexAttention mask) are in docs/concepts.md, "Formulas beyond FlopCounterMode".

A count that needs tensor values which cannot be read (meta or fake tensors: a sweep on the meta device) is recorded
with zero counts and status ``E_DATA`` (listed in ``Report.errors``), never guessed; arguments a formula cannot count
(it raises ValueError) give status ``E_ARGS`` inside ``measure``.

Needs no torch at import; the formulas only call methods of the tensors they are given.
"""

from __future__ import annotations

import math

import numpy as np

from roofline import _core

E_DATA = 7  # RL_E_DATA in csrc/cost.h: the count depends on tensor values that cannot be read
E_ARGS = 2  # RL_E_ARGS: arguments the formula cannot count (a formula's ValueError inside measure())


# ---- helpers --------------------------------------------------------------------------------------------------------

def _is_tensor(x) -> bool:
    # a strided nested tensor has no sizes: its .shape raises RuntimeError, which hasattr() lets through
    if getattr(x, "is_nested", False):
        return True
    return hasattr(x, "dtype") and hasattr(x, "stride") and hasattr(x, "shape")


def _numel(t) -> int:
    if getattr(t, "is_nested", False):  # the elements of its components (a nested tensor has no sizes)
        return int(t.values().numel()) if hasattr(t, "values") else 0
    n = 1
    for s in t.shape:
        n *= int(s)
    return n


_STRIDED = [None]  # torch.strided, once a tensor has shown it (this module imports no torch)


def _sparse_bytes(t) -> int | None:
    """Bytes a sparse tensor stores (its values and index tensors), or None for a strided (dense) tensor. COO: the
    values and the indices; compressed layouts (CSR, CSC, BSR, BSC): the values, the compressed and the plain
    indices."""
    layout = getattr(t, "layout", None)
    if layout is None or layout is _STRIDED[0]:
        return None
    if _STRIDED[0] is None and str(layout) == "torch.strided":
        _STRIDED[0] = layout  # the strided layout object, kept so later calls compare identities
        return None
    layout = str(layout)
    if "sparse" not in layout:
        return None
    if layout == "torch.sparse_coo":
        parts = (t._values(), t._indices())
    elif layout in ("torch.sparse_csr", "torch.sparse_bsr"):
        parts = (t.values(), t.crow_indices(), t.col_indices())
    else:
        parts = (t.values(), t.ccol_indices(), t.row_indices())
    return sum(_touched_bytes(p) for p in parts)


def _touched_bytes(t) -> int:
    """Bytes of the elements of ``t`` that exist in memory: a broadcast (stride 0) dimension counts once; a sparse
    tensor at what it stores."""
    sparse = _sparse_bytes(t)
    if sparse is not None:
        return sparse
    if getattr(t, "is_nested", False):
        return int(t.values().numel()) * t.element_size() if hasattr(t, "values") else 0
    if getattr(t, "is_mkldnn", False):  # oneDNN's opaque layout reports strides (1, 0, 0, ...): its elements
        return _numel(t) * t.element_size()
    n = 1
    for s, st in zip(t.shape, t.stride()):
        if st != 0:
            n *= int(s)
    if any(int(s) == 0 for s in t.shape):
        n = 0
    return n * t.element_size()


def _tensors(x):
    if _is_tensor(x):
        yield x
    elif isinstance(x, (list, tuple)):
        for y in x:
            if _is_tensor(y):
                yield y


def _read(b, skip=()) -> int:
    """Compulsory reads: every tensor argument (and tensor-list element) not in ``skip``, once."""
    return sum(_touched_bytes(t) for k, v in b.items() if k not in skip and k != "out" for t in _tensors(v))


def _out_bytes(t) -> int:
    sparse = _sparse_bytes(t)
    return sparse if sparse is not None else _numel(t) * t.element_size()


def _written(out) -> int:
    return sum(_out_bytes(t) for t in _tensors(out if isinstance(out, (list, tuple)) else [out]))


def _clog2(n: int) -> int:
    """ceil(log2(n)) for n >= 1 (0 for n <= 1): the comparisons of a binary search over n candidates, the levels of a
    comparison sort of n values."""
    return (int(n) - 1).bit_length() if n > 1 else 0


def _values_readable(t) -> bool:
    """Whether the values of ``t`` can be read (not meta, not a fake tensor)."""
    if t.device.type == "meta":
        return False
    return not type(t).__name__.startswith("FakeTensor")


def _ints(t) -> list | None:
    return [int(v) for v in t.tolist()] if _values_readable(t) else None


def _data_error(b, out) -> dict:
    """No counts: the formula needs values it cannot read (the bytes do not depend on them)."""
    return {"status": E_DATA}


def _counts(matrix=0, vector=0, special=0, read=0, written=0, flop_counter=0) -> dict:
    return {"matrix_flops": matrix, "vector_flops": vector, "special_ops": special, "bytes_read": read,
            "bytes_written": written, "flop_counter_flops": flop_counter}


def _dim_size(t, dim) -> int:
    nd = len(t.shape)
    if nd == 0:
        return 1
    d = int(dim)
    if d < 0:
        d += nd
    if not 0 <= d < nd:
        raise IndexError(f"dimension {dim} out of range for a {nd}-d tensor")
    return int(t.shape[d])


# ---- ordering: sort, topk, search ---------------------------------------------------------------------------------

def _sort(b, out, default_dim=-1):
    """Comparison sort of each slice of length L along ``dim`` (``default_dim`` when not passed; None: the whole
    tensor, for ops without a ``dim``): ceil(log2 L) comparisons per element."""
    x = b["self"]
    dim = b.get("dim", default_dim)
    L = _numel(x) if dim is None else _dim_size(x, dim)
    return _counts(vector=_numel(x) * _clog2(L), read=_read(b), written=_written(out))


def _topk(b, out):
    """Selection of the k largest of each slice: one comparison per element against the current k-th, and
    ceil(log2 k) more to place it among the k (a heap): (1 + ceil(log2 k)) per element; k = 1 is a max."""
    x = b["self"]
    return _counts(vector=_numel(x) * (1 + _clog2(int(b["k"]))), read=_read(b), written=_written(out))


def _searchsorted(b, out):
    """Binary search of each value among the L boundaries of its row: ceil(log2(L + 1)) comparisons per value."""
    seq, v = b["sorted_sequence"], b["self"]
    L = int(seq.shape[-1]) if len(seq.shape) else 1
    n = _numel(v) if _is_tensor(v) else 1
    return _counts(vector=n * _clog2(L + 1), read=_read(b), written=_written(out))


def _bucketize(b, out):
    """bucketize(self, boundaries): the bucket of each value among L sorted boundaries, a binary search (Idefics3 and
    SmolVLM find patch position ids this way): L + 1 possible buckets, each comparison halves the candidates, so
    ceil(log2(L + 1)) comparisons per value (searchsorted with one row of boundaries). ``self`` may be a scalar (one
    value)."""
    bounds, v = b["boundaries"], b["self"]
    if len(bounds.shape) != 1:
        raise ValueError(f"bucketize: boundaries must be 1-d, got shape {tuple(bounds.shape)}")
    n = _numel(v) if _is_tensor(v) else 1
    return _counts(vector=n * _clog2(int(bounds.shape[0]) + 1), read=_read(b), written=_written(out))


def _isin(b, out):
    """Sort the L test elements (L ceil(log2 L) comparisons), then a binary search per element
    (ceil(log2(L + 1)) each)."""
    e, t = b["elements"], b.get("test_elements", b.get("test_element"))
    n = _numel(e) if _is_tensor(e) else 1
    L = _numel(t) if _is_tensor(t) else 1
    return _counts(vector=L * _clog2(L) + n * _clog2(L + 1), read=_read(b), written=_written(out))


# ---- recurrent layers ---------------------------------------------------------------------------------------------

# Pointwise work per hidden unit and time step, after the gate pre-activations x W_ih^T + h W_hh^T are formed:
#   LSTM (4 gates): the 4 gate sums (4), sigmoid of i, f, o (2 FLOPs + 1 exp each), tanh of g (1 special),
#        c' = f*c + i*g (3), h' = o*tanh(c') (1 + 1 special): 14 FLOPs, 5 special;
#   GRU (3 gates): the r and z gate sums (2), their sigmoids (4 + 2 special), n = tanh(x_n + r*h_n) (2 + 1 special),
#        h' = (1-z)*n + z*h (4): 12 FLOPs, 3 special;
#   RNN (1 gate): the gate sum and tanh: 1 FLOP, 1 special.
# Biases: two adds per gate element (b_ih and b_hh). Backward: twice the forward FLOPs (the derivative of each
# pointwise step and its chain rule, from saved activations: no special functions), plus the bias gradients (one add
# per gate element each for b_ih and b_hh).
_CELL = {4: (14, 5), 3: (12, 3), 1: (1, 1)}


def _cell_cost(gates: int):
    if gates not in _CELL:
        raise ValueError(f"a recurrent layer with {gates} gates per hidden unit (LSTM has 4, GRU 3, RNN 1)")
    return _CELL[gates]


def _rnn_layer(b, out, backward=False):
    """One layer, one direction (mkldnn_rnn_layer and its backward): T steps of B rows, input size I, hidden size H,
    G gates. Products: x W_ih^T (2*T*B*G*H*I) and h W_hh^T (2*T*B*G*H*H); the backward computes the input, hidden and
    both weight gradients: twice that."""
    w_ih = b["weight0"] if not backward else b["weight1"]
    w_hh = b["weight1"] if not backward else b["weight2"]
    x = b["input"]
    gh, i_size = int(w_ih.shape[0]), int(w_ih.shape[1])
    h = int(w_hh.shape[1])
    if h <= 0 or gh % h != 0 or i_size <= 0:
        raise ValueError(f"recurrent weights {tuple(w_ih.shape)} and {tuple(w_hh.shape)} do not fit together")
    g = gh // h
    tb = _numel(x) // i_size
    flops, special = _cell_cost(g)
    matrix = 2 * tb * gh * (i_size + h)
    units = tb * h
    biases = bool(b.get("has_biases"))
    if not backward:
        return _counts(matrix=matrix, vector=units * flops + (2 * tb * gh if biases else 0), special=units * special,
                       read=_read(b), written=_written(out))
    return _counts(matrix=2 * matrix, vector=2 * units * flops + (2 * tb * gh if biases else 0),
                   read=_read(b), written=_written(out))


def _cudnn_rnn(b, out, backward=False):
    """_cudnn_rnn: the layers and directions of the flat weight list (``weight_stride0`` tensors each: W_ih, W_hh and
    the two biases when present), each as one :func:`_rnn_layer` over every time step."""
    ws = [w for w in b["weight"]]
    stride = int(b["weight_stride0"])
    x = b["input"]
    if int(b.get("proj_size") or 0) != 0 or stride not in (2, 4):
        raise ValueError("_cudnn_rnn with projections (proj_size > 0) has no formula")
    tb = _numel(x) // int(x.shape[-1])
    matrix = vector = special = 0
    for k in range(0, len(ws) - stride + 1, stride):
        w_ih, w_hh = ws[k], ws[k + 1]
        gh, i_size, h = int(w_ih.shape[0]), int(w_ih.shape[1]), int(w_hh.shape[1])
        g = gh // h
        flops, sp = _cell_cost(g)
        matrix += 2 * tb * gh * (i_size + h)
        vector += tb * h * flops + (2 * tb * gh if stride == 4 else 0)
        special += tb * h * sp
    if backward:
        matrix, vector, special = 2 * matrix, 2 * vector, 0
    return _counts(matrix=matrix, vector=vector, special=special, read=_read(b), written=_written(out))


def _fused_cell(b, out, gates, backward=False):
    """The pointwise half of a fused LSTM / GRU cell (the products are separate mm calls): per hidden unit of each
    row the cell's pointwise FLOPs, plus two bias adds per gate element when biases are given."""
    if not backward:
        state = b["cx"] if gates == 4 else b["hx"]
        units = _numel(state)
        flops, special = _cell_cost(gates)
        biases = b.get("input_bias") is not None
        return _counts(vector=units * flops + (2 * gates * units if biases else 0), special=units * special,
                       read=_read(b), written=_written(out))
    ws = b["workspace"]
    units = _numel(ws) // (gates if gates == 4 else 5)  # LSTM keeps the 4 gates, GRU 5 values per hidden unit
    flops, _ = _cell_cost(gates)
    biases = bool(b.get("has_bias"))
    return _counts(vector=2 * units * flops + (2 * gates * units if biases else 0), read=_read(b),
                   written=_written(out))


# ---- fused transformer encoder layer --------------------------------------------------------------------------------

def _encoder_layer(b, out):
    """_transformer_encoder_layer_fwd (nn.TransformerEncoderLayer's inference fast path): per sequence of S tokens of
    width E with H heads and a feed-forward width F, products QKV (2*S*E*3E), Q K^T and P V (2*S*S*E each), the output
    projection (2*S*E*E) and the two feed-forward layers (2*S*E*F each). Vector: the bias adds (S*(5E + F)), softmax
    (4 per score + 1 exp), two layer norms (8 per element each), two residual adds (2*S*E), the activation per
    feed-forward element (ReLU 1; GELU 4 + 1 special). A padded batch given as a nested tensor counts each sequence at
    its own length."""
    src, e, h = b["src"], int(b["embed_dim"]), int(b["num_heads"])
    f = int(b["ffn_weight_1"].shape[0])
    if getattr(src, "is_nested", False):
        sizes = src._nested_tensor_size()
        if not _values_readable(sizes):
            return _data_error(b, out)
        lens = [int(r[0]) for r in sizes.tolist()]
    else:
        bs, s = int(src.shape[0]), int(src.shape[1])
        lens = [s] * bs
    tokens, pairs = sum(lens), sum(s * s for s in lens)
    matrix = 2 * tokens * e * 3 * e + 2 * (2 * pairs * e) + 2 * tokens * e * e + 2 * (2 * tokens * e * f)
    gelu = bool(b.get("use_gelu"))
    vector = tokens * (5 * e + f) + 4 * h * pairs + 16 * tokens * e + 2 * tokens * e + tokens * f * (4 if gelu else 1)
    special = h * pairs + (tokens * f if gelu else 0)
    return _counts(matrix=matrix, vector=vector, special=special, read=_read(b), written=_written(out))


# ---- attention with variable-length sequences ---------------------------------------------------------------------

def _pairs(sq: int, sk: int, mask: int) -> int:
    """Unmasked (query, key) pairs: 0 none, 1 causal aligned top-left, 2 causal aligned bottom-right: the cost
    model's count (csrc/cost.c, rl_attention_pairs), the one definition."""
    return _core.attention_pairs(int(sq), int(sk), int(mask))


def _band_pairs(sq: int, sk: int, left: int, right: int) -> int:
    """Pairs of a sliding window aligned bottom-right (flash attention's convention): query i sits at key position
    c = i + sk - sq and sees keys c - left .. c + right within 0 .. sk - 1 (a negative bound: unlimited)."""
    c = np.arange(sq, dtype=np.int64) + (sk - sq)
    lo = np.zeros(sq, dtype=np.int64) if left < 0 else np.maximum(c - left, 0)
    hi = np.full(sq, sk - 1, dtype=np.int64) if right < 0 else np.minimum(c + right, sk - 1)
    return int(np.maximum(hi - lo + 1, 0).sum())


def _flash_window(b):
    """(left, right) of flash attention's sliding window (-1: unlimited; causal: right = 0), or None without one."""
    left, right = b.get("window_size_left"), b.get("window_size_right")
    left = -1 if left is None else int(left)
    right = -1 if right is None else int(right)
    if b.get("is_causal"):
        right = 0
    if left < 0 and (right < 0 or b.get("is_causal")):
        return None
    return left, right


def _varlen(b, out, *, flash: bool, backward: bool):
    """Attention over sequences packed along one dimension and delimited by cumulative lengths (``cum_seq_q/k`` of
    flash attention, ``cu_seqlens_q/k`` of efficient attention): each sequence i attends only to itself, so the score
    pairs are sum_i Sq_i * Sk_i (with causal masking per sequence), not (sum_i S_i)^2. Dense batches (no cumulative
    lengths) use the C formula, unless flash attention has a sliding window (``window_size_left/right``): then the
    pairs inside the window are counted here, dense or not. Flash attention aligns a causal mask bottom-right.
    Efficient attention's ``window_size`` has no formula (an error record)."""
    cq = b.get("cum_seq_q" if flash else "cu_seqlens_q")
    ck = b.get("cum_seq_k" if flash else "cu_seqlens_k")
    window = _flash_window(b) if flash else None
    if not flash and b.get("window_size") is not None:
        raise ValueError("efficient attention with a window_size has no formula")
    if (cq is None or ck is None) and window is None:
        return None  # dense, no window: the C formula
    q, k, v = b["query"], b["key"], b["value"]
    # flash: (total, heads, dim); efficient: (1, total, heads, dim)
    hq, dq = int(q.shape[-2]), int(q.shape[-1])
    hkv, dv = int(k.shape[-2]), int(v.shape[-1])
    if hkv <= 0 or hq % hkv != 0:
        raise ValueError(f"attention with {hq} query heads and {hkv} key/value heads")
    if cq is None or ck is None:  # dense (batch, seq, heads, dim) with a sliding window
        sq, sk = [int(q.shape[1])] * int(q.shape[0]), [int(k.shape[1])] * int(q.shape[0])
    else:
        lq, lk = _ints(cq), _ints(ck)
        if lq is None or lk is None:
            return _data_error(b, out)
        sq = [lq[i + 1] - lq[i] for i in range(len(lq) - 1)]
        sk = [lk[i + 1] - lk[i] for i in range(len(lk) - 1)]
        if len(sq) != len(sk) or any(s < 0 for s in sq + sk):
            raise ValueError(f"cumulative sequence lengths {lq} and {lk} do not describe the same batch")
    if flash:
        mask = 2 if b.get("is_causal") else 0  # flash attention aligns a causal mask bottom-right
    else:
        mask = int(b.get("custom_mask_type") or 0)
        if mask not in (0, 1, 2):
            raise ValueError(f"custom_mask_type {mask} (0 none, 1 causal top-left, 2 causal bottom-right)")
    if window is not None:
        pairs = hq * sum(_band_pairs(a, c, window[0], window[1]) for a, c in zip(sq, sk))
    else:
        pairs = hq * sum(_pairs(a, c, mask) for a, c in zip(sq, sk))
    full = hq * sum(a * c for a, c in zip(sq, sk))  # FlopCounterMode's reading: every sequence unmasked
    per_pair = 3 * dq + 2 * dv if backward else dq + dv
    vector = 4 * pairs + (0 if backward else hq * sum(sq) * dv)
    return _counts(matrix=2 * pairs * per_pair, vector=vector, special=pairs, read=_read(b), written=_written(out),
                   flop_counter=2 * full * per_pair)


# ---- FlexAttention (higher-order operators) -------------------------------------------------------------------------

def _block_mask_pairs(bm, q, k):
    """(query, key) pairs a block-sparse kernel computes: for every (batch, head, query block) the rows of that block
    times the columns of each key block it visits (partial and full blocks), the last block of each dimension clipped
    to the sequence length. A mask with one batch or head entry is shared by every batch or head. None when the mask's
    values cannot be read."""
    q_len, kv_len = int(q.shape[-2]), int(k.shape[-2])
    tensors = [x for x in bm if _is_tensor(x)]
    ints = [x for x in bm if isinstance(x, int) and not isinstance(x, bool)]
    if len(tensors) < 2 or len(ints) < 4:
        raise ValueError("FlexAttention block mask of an unknown layout (expected sequence lengths, kv_num_blocks, "
                         "kv_indices, ..., Q_BLOCK_SIZE, KV_BLOCK_SIZE, mask_mod)")
    qb, kvb = ints[-2], ints[-1]
    kv_num, kv_idx = bm[2], bm[3]
    full_num, full_idx = bm[4], bm[5]
    if qb <= 0 or kvb <= 0:
        raise ValueError(f"FlexAttention block sizes {qb} x {kvb}")
    if not _values_readable(kv_num):
        return None
    import torch

    total = 0
    for num, idx in ((kv_num, kv_idx), (full_num, full_idx)):
        if num is None or idx is None:
            continue
        n = idx.shape[-1]
        visited = torch.arange(n, device=idx.device) < num.unsqueeze(-1)
        cols = (kv_len - idx.to(torch.int64) * kvb).clamp(0, kvb) * visited
        per_qblock = cols.sum(-1)  # (Bm, Hm, query blocks)
        nqb = per_qblock.shape[-1]
        rows = (q_len - torch.arange(nqb, device=idx.device, dtype=torch.int64) * qb).clamp(0, qb)
        s = int((per_qblock.to(torch.int64) * rows).sum().item())
        bm_b, bm_h = int(num.shape[0]), int(num.shape[1])
        total += s * (int(q.shape[0]) // bm_b) * (int(q.shape[1]) // bm_h)
    return total


def _flex(args, kwargs, out, backward=False):
    q, k, v = args[0], args[1], args[2]
    bm = args[9] if backward else args[4]
    pairs = _block_mask_pairs(bm, q, k)
    if pairs is None:
        return {"status": E_DATA}
    dq, dv = int(q.shape[-1]), int(v.shape[-1])
    read = sum(_touched_bytes(t) for a in args for t in _tensors(a))
    if backward:
        return _counts(matrix=2 * pairs * (3 * dq + 2 * dv), vector=4 * pairs, special=pairs, read=read,
                       written=_written(out))
    rows = int(q.shape[0]) * int(q.shape[1]) * int(q.shape[2])
    return _counts(matrix=2 * pairs * (dq + dv), vector=4 * pairs + rows * dv, special=pairs, read=read,
                   written=_written(out))


# ---- torchvision detection ops --------------------------------------------------------------------------------------

# Intersection over union of two boxes: 2 max + 2 min (the intersection's corners), 2 subtractions and 2 clamps at 0
# (its sides), 1 multiply (its area), 1 add + 1 subtract (the union of the two precomputed areas), 1 divide: 12.
_IOU = 12


def _nms(b, out):
    """torchvision::nms(boxes, scores, iou_threshold): sort the N scores (N ceil(log2 N) comparisons), the N areas
    (2 subtractions + 1 multiply each), and the IoU of every pair i < j (N(N-1)/2 x 12 FLOPs) with one comparison
    to the threshold each. Every pair is what the GPU kernel computes (its suppression mask); the CPU loop skips the
    pairs of boxes already suppressed, so there this is an upper bound."""
    n = int(b["dets"].shape[0]) if "dets" in b else int(b["boxes"].shape[0])
    pairs = n * (n - 1) // 2
    return _counts(vector=n * _clog2(n) + 3 * n + pairs * (_IOU + 1), read=_read(b), written=_written(out))


def _roi_samples(b, rois, ph, pw, sampling_ratio):
    """Bilinear samples per output element of each region: sampling_ratio^2, or (adaptive, sampling_ratio <= 0)
    ceil(roi_h / ph) * ceil(roi_w / pw) from the region's size. None when adaptive and the regions cannot be read."""
    k = int(rois.shape[0])
    if sampling_ratio > 0:
        return k * sampling_ratio * sampling_ratio
    if not _values_readable(rois):
        return None

    scale, aligned = float(b["spatial_scale"]), bool(b.get("aligned"))
    total = 0
    for r in rois.tolist():  # (batch index, x1, y1, x2, y2)
        h, w = (r[4] - r[2]) * scale, (r[3] - r[1]) * scale
        if not aligned:  # regions are at least one pixel
            h, w = max(h, 1.0), max(w, 1.0)
        total += max(math.ceil(h / ph), 0) * max(math.ceil(w / pw), 0)
    return total


def _roi_align(b, out, backward=False):
    """torchvision::roi_align: per output element (region, channel, bin) the average of its bilinear samples: per
    sample 4 multiplies and 3 adds (the interpolation) and 1 add (the sum), and 1 divide per element: 8 per sample + 1.
    The 4 sample positions and weights per sample are shared by the channels (not counted). Backward: each sample
    scatters its grad into 4 input elements (a multiply and an add each: 8 per sample)."""
    rois = b["rois"]
    ph, pw = int(b["pooled_height"]), int(b["pooled_width"])
    samples = _roi_samples(b, rois, ph, pw, int(b["sampling_ratio"]))
    if samples is None:
        return {"status": E_DATA}
    src = b["grad"] if backward else b["input"]
    channels = int(b["channels"]) if backward else int(src.shape[1])
    per_bin = samples * channels * ph * pw  # sample evaluations, summed over regions
    bins = int(rois.shape[0]) * channels * ph * pw
    vector = 8 * per_bin if backward else 8 * per_bin + bins
    if backward:
        read = _touched_bytes(src) + _touched_bytes(rois)
    else:  # a gather: reads the regions and at most 4 input elements per sample, never more than the input
        read = _touched_bytes(rois) + min(_touched_bytes(src), 4 * per_bin * src.element_size())
    return _counts(vector=vector, read=read, written=_written(out))


# ---- quantized products (weight-only and dynamic int8/int4 linear kernels) -------------------------------------

def _quant_mm(b, out, x_name="self", weight_terms=0, output_terms=0, block=None):
    """A product of activations ``x`` (M x K, any leading dims folded into M) with a quantized N x K weight, the
    result M x N: ``2 M N K`` matrix FLOPs in the activations' dtype, whatever the weight's storage (int8, packed
    int4). ``weight_terms`` pointwise FLOPs per weight element (dequantising it: scale and zero point),
    ``output_terms`` per output element (a per-channel scale), and with ``block`` (a group size along K) a rescale
    of each block's partial sum (a multiply and an add per output element and block). Bytes: every argument at its
    stored size (the packed weight at its real width), the result written once."""
    x = b[x_name]
    if len(x.shape) < 1 or len(out.shape) < 1:
        raise ValueError("quantized product: activations and result need a last dimension")
    k = int(x.shape[-1])
    m = math.prod(int(d) for d in x.shape[:-1])  # rows even when K is 0 (the result is M x N zeros)
    n = int(out.shape[-1])
    vector = weight_terms * n * k + output_terms * m * n
    if block is not None:
        if int(block) <= 0:
            raise ValueError(f"quantized product: block size must be positive, got {block}")
        vector += 2 * m * n * (-(-k // int(block)))  # ceil(K / block) partial sums per output element
        vector += 4 * m * k  # the activations quantised per row: min, max, scale, round per element
    return _counts(matrix=2 * m * n * k, vector=vector, read=_read(b), written=_written(out))


def _repack(b, out):
    """A weight repacked into a kernel's layout (int4 packing): no arithmetic, the weight read and written once."""
    return _counts(read=_read(b), written=_written(out))


def _out_dtype(args, kwargs, out):
    """The ``out_dtype`` higher-order op: an aten product computed into a wider result dtype (int8 x int8 -> int32,
    as torchao's int8 kernels call it off the CPU and on meta / fake tensors). ``aten.mm``: ``2 M N K`` matrix FLOPs,
    the int8 operands read at 1 byte, the int32 result written; other wrapped ops are refused (an error record)."""
    op = args[0] if args else kwargs.get("op")
    operands = args[2:]
    name = str(getattr(op, "__name__", op))
    if name not in ("mm.default", "aten.mm.default") or len(operands) != 2:
        raise ValueError(f"out_dtype: no formula for wrapped op {op}")
    a, b = operands
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise ValueError("out_dtype(mm): operands must be matrices")
    m, k, n = int(a.shape[0]), int(a.shape[1]), int(b.shape[1])
    return _counts(matrix=2 * m * n * k, read=_touched_bytes(a) + _touched_bytes(b), written=_written(out))


# ---- oneDNN / MKL ops of frozen CPU graphs -------------------------------------------------------------------------
# With ``torch._inductor.config.freezing``, Inductor replaces linear layers and convolutions (with the element-wise
# op after them, and a folded batch norm) by these. Their weights are constants reordered to the library's layout:
# what is read is the weight's logical size (a packed copy holds the same values). The fused element-wise post-ops
# are counted as the eager ops they replace; one without a formula here is not guessed (ValueError: E_ARGS).
_POST_UNARY = {"none": (0, 0), "relu": (1, 0), "gelu": (4, 1), "sigmoid": (2, 1), "tanh": (0, 1),
               "swish": (3, 1), "silu": (3, 1), "hardtanh": (2, 0), "hardsigmoid": (2, 0)}
_POST_BINARY = {"add": 1, "sub": 1, "mul": 1, "div": 1}


def _post_ops(elements, unary=None, binary=None):
    u = "none" if unary is None else str(unary)
    if u not in _POST_UNARY:
        raise ValueError(f"fused post-op {u!r} has no formula")
    flops, special = _POST_UNARY[u]
    if binary is not None:
        if str(binary) not in _POST_BINARY:
            raise ValueError(f"fused binary post-op {binary!r} has no formula")
        flops += _POST_BINARY[str(binary)]
    return flops * elements, special * elements


def _tensor_bytes(t) -> int:
    try:
        return _touched_bytes(t)
    except (RuntimeError, NotImplementedError):  # a layout without strides: its elements
        return _numel(t) * t.element_size()


def _onednn_product(b, out, weight, k, unary=None, binary=None, other=None):
    """matrix FLOPs 2 * (output elements) * k, a bias add per output element, the fused post-ops; reads the input,
    the weight (its logical size), the bias and a binary post-op's other operand; writes the result."""
    x = b["X"]
    n_out = _numel(out)
    matrix = 2 * n_out * k
    vector = n_out if b.get("B") is not None else 0
    pf, ps = _post_ops(n_out, unary, binary)
    read = _tensor_bytes(x) + _tensor_bytes(weight) + (_tensor_bytes(b["B"]) if b.get("B") is not None else 0)
    if other is not None:
        read += _tensor_bytes(other)
    return _counts(matrix=matrix, vector=vector + pf, special=ps, read=read, written=_written(out))


def _mkl_linear(b, out):
    """mkl::_mkl_linear(X, MKL_W, ORI_W, B, batch_size): X [..., K] times the weight (ORI_W, the original)."""
    k = int(b["X"].shape[-1])
    return _onednn_product(b, out, b["ORI_W"], k)


def _linear_pointwise(b, out):
    """mkldnn::_linear_pointwise: X [..., K] times W [N, K], then ``attr`` (the .binary overload: ``attr`` with
    ``other``)."""
    x, w = b["X"], b["W"]
    k = int(x.shape[-1])
    if len(w.shape) != 2 or int(w.shape[-1]) != k:
        raise ValueError(f"linear weight {tuple(w.shape)} does not fit input {tuple(x.shape)}")
    if "other" in b:
        return _onednn_product(b, out, w, k, binary=b["attr"], other=b["other"])
    return _onednn_product(b, out, w, k, unary=b["attr"])


def _convolution_pointwise(b, out):
    """mkldnn::_convolution_pointwise (and its in-place .binary): a convolution with weight [C_out, C_in / groups,
    *kernel] (2 FLOPs per output element and weight element of its group), then its post-ops."""
    x, w = b["X"], b["W"]
    groups = int(b.get("groups") or 1)
    if len(w.shape) != len(x.shape) or int(x.shape[1]) != int(w.shape[1]) * groups:
        raise ValueError(f"convolution weight {tuple(w.shape)} does not fit input {tuple(x.shape)}, groups {groups}")
    k = _numel(w) // max(int(w.shape[0]), 1)
    if "other" in b:
        return _onednn_product(b, out, w, k, unary=b.get("unary_attr"), binary=b["binary_attr"], other=b["other"])
    return _onednn_product(b, out, w, k, unary=b["attr"])


# ---- linear algebra: the standard LAPACK operation counts ---------------------------------------------------------
# The counts of LAPACK Working Note 41 (the real-arithmetic counts of the reference algorithms, multiply and add each
# one FLOP, leading terms) and of Golub & Van Loan, "Matrix Computations" (4th ed., tables 5.5.1 and 8.6.1) for the
# iterative decompositions, whose real count depends on how fast the iteration converges: those are estimates, and
# the audit table (roofline/_counting/_decisions.py) marks every op counted here as one. Per matrix of a batch; complex
# matrices 4x (a complex multiply-add is 8 real FLOPs, a real one 2). Counted as matrix FLOPs: the blocked algorithms
# spend their time in matrix products (BLAS 3). A factorization's result is written once, its input read once.
#   LU (getrf) m x n, m >= n: m n^2 - n^3 / 3 (square: 2 n^3 / 3)       Cholesky (potrf): n^3 / 3
#   QR (geqrf) m x n, m >= n: 2 m n^2 - 2 n^3 / 3                       forming Q (orgqr), k reflectors: 4 m n k -
#   2 (m + n) k^2 + 4 k^3 / 3; applying it (ormqr) to m x n, left: 4 m n k - 2 n k^2
#   triangular solve with k right-hand sides (trsm): n^2 k              LU or Cholesky solve (two of them): 2 n^2 k
#   inverse from LU (getri): 4 n^3 / 3, from Cholesky (potri): 2 n^3 / 3
#   symmetric eigenvalues (syevd): 4 n^3 / 3, with eigenvectors 9 n^3   general (geev): 10 n^3, with vectors 25 n^3
#   SVD m x n (m >= n; else transposed): values 4 m n^2 - 4 n^3 / 3; thin U, S, V: 14 m n^2 + 8 n^3;
#   full U, S, V: 4 m^2 n + 8 m n^2 + 9 n^3


def _mat(t):
    """(matrices in the batch, rows, columns, complex factor) of a (..., m, n) tensor."""
    if len(t.shape) < 2:
        raise ValueError(f"a matrix argument needs 2 dimensions, got shape {tuple(t.shape)}")
    m, n = int(t.shape[-2]), int(t.shape[-1])
    batch = _numel(t) // (m * n) if m * n else math.prod(int(d) for d in t.shape[:-2])
    return batch, m, n, (4 if "complex" in str(t.dtype) else 1)


def _rhs(b_t, left=True):
    """Columns of the right-hand side (k) of a solve with B (..., n, k), or rows when solving from the right."""
    if len(b_t.shape) == 1:
        return 1
    return int(b_t.shape[-1]) if left else int(b_t.shape[-2])


def _lu_flops(m, n):
    if m < n:
        m, n = n, m
    return m * n * n - n ** 3 // 3


def _qr_flops(m, n):
    if m < n:  # wide: the R factor is m x n, m reflectors
        return 2 * n * m * m - 2 * m ** 3 // 3
    return 2 * m * n * n - 2 * n ** 3 // 3


def _svd_flops(m, n, compute_uv=True, full=False):
    if m < n:
        m, n = n, m
    if not compute_uv:
        return 4 * m * n * n - 4 * n ** 3 // 3
    if full:
        return 4 * m * m * n + 8 * m * n * n + 9 * n ** 3
    return 14 * m * n * n + 8 * n ** 3


def _linalg(x, per_matrix, b, out, batch_of=None):
    """``per_matrix(m, n)`` real FLOPs for each matrix of ``x``'s batch (``batch_of``: the tensor whose leading
    dimensions give the batch, when it is broadcast), complex 4x; bytes by the compulsory rule."""
    batch, m, n, cf = _mat(x)
    if batch_of is not None and len(batch_of.shape) >= 2:
        batch = max(batch, math.prod(int(d) for d in batch_of.shape[:-2]))
    return _counts(matrix=batch * cf * per_matrix(m, n), read=_read(b), written=_written(out))


def _solve(b, out, a_name, b_name, factor, per_rhs, left_name=None):
    """A solve A X = B: ``factor(n)`` FLOPs to factor A (0 when given factored), then ``per_rhs`` n^2 per column of
    B."""
    a, rhs = b[a_name], b[b_name]
    left = True if left_name is None else bool(b.get(left_name, True))
    k = _rhs(rhs, left)
    return _linalg(a, lambda m, n: factor(n) + per_rhs * n * n * k, b, out, batch_of=rhs)


def _eig(b, out, symmetric, vectors):
    if symmetric:
        return _linalg(b.get("A", b.get("self")), lambda m, n: 9 * n ** 3 if vectors else 4 * n ** 3 // 3, b, out)
    return _linalg(b["self"], lambda m, n: 25 * n ** 3 if vectors else 10 * n ** 3, b, out)


def _svd(b, out):
    a = b.get("A", b.get("self"))
    uv = bool(b.get("compute_uv", True)) if "compute_uv" in b else True
    full = bool(b.get("full_matrices", False))
    return _linalg(a, lambda m, n: _svd_flops(m, n, uv, full), b, out)


def _lstsq(b, out):
    """Least squares by QR (the default drivers gelsy / gels): factor A (m x n), apply Q^T to the k columns of B
    (4 m n k - 2 n k^2 with n reflectors... taken as 4 m n k), one triangular solve (n^2 k)."""
    a, rhs = b["self"], b["b"]
    k = _rhs(rhs)
    return _linalg(a, lambda m, n: _qr_flops(m, n) + 4 * m * n * k + min(m, n) ** 2 * k, b, out, batch_of=rhs)


def _householder(b, out):
    """linalg_householder_product / orgqr: Q (m x n) from k reflectors: 4 m n k - 2 (m + n) k^2 + 4 k^3 / 3."""
    k = int(b["tau"].shape[-1])
    return _linalg(b["input"], lambda m, n: max(4 * m * n * k - 2 * (m + n) * k * k + 4 * k ** 3 // 3, 0), b, out)


def _ormqr(b, out):
    """ormqr(A, tau, C): Q (k reflectors of A) applied to C (m x n): 4 m n k - 2 n k^2 from the left, 4 m n k -
    2 m k^2 from the right."""
    k = int(b["input2"].shape[-1])
    left = bool(b.get("left", True))
    return _linalg(b["input3"], lambda m, n: max(4 * m * n * k - 2 * (n if left else m) * k * k, 0), b, out)


def _matrix_exp(b, out):
    """Scaling and squaring with a degree-18 Taylor polynomial (Bader, Blanes, Casas 2019, as torch implements it):
    at most 6 matrix products for the polynomial, plus the squarings, which depend on the matrix norm (values):
    counted as 6 products (12 n^3), a lower bound when the norm is large. An estimate."""
    return _linalg(b["self"], lambda m, n: 12 * n ** 3, b, out)


def _pinv(b, out):
    """Pseudo-inverse: an SVD with thin factors (an eigendecomposition, 9 n^3, when hermitian), then V diag(1/s) U^H:
    one product of (n x r) by (r x m), r = min(m, n): 2 m n r, and a scale per element of V (n r)."""
    if b.get("hermitian"):
        return _linalg(b["self"], lambda m, n: 9 * n ** 3 + 2 * n ** 3 + n * n, b, out)
    return _linalg(b["self"], lambda m, n: _svd_flops(m, n) + 2 * m * n * min(m, n) + n * min(m, n), b, out)


def _polar(b, out):
    """Polar decomposition A = U H from the thin SVD A = W S V^H: U = W V^H (2 m n^2), H = V S V^H (n^2 + 2 n^3)."""
    return _linalg(b["A"], lambda m, n: _svd_flops(m, n) + 2 * m * n * n + n * n + 2 * n ** 3, b, out)


def _matrix_sqrth(b, out):
    """Square root of a Hermitian matrix from its eigendecomposition: 9 n^3, then V diag(sqrt(w)) V^H: 2 n^3 + n^2."""
    return _linalg(b["self"], lambda m, n: 9 * n ** 3 + 2 * n ** 3 + n * n, b, out)


def _trace(b, out):
    """The sum of the diagonal: min(m, n) - 1 adds; reads the diagonal only."""
    x = b["self"]
    if len(x.shape) != 2:
        raise ValueError(f"trace of a {len(x.shape)}-d tensor")
    d = min(int(x.shape[0]), int(x.shape[1]))
    return _counts(vector=max(d - 1, 0), read=d * x.element_size(), written=_written(out))


def _mvlgamma(b, out):
    """The multivariate log-gamma of order p: sum of p lgamma values (x - j/2, j < p) and a constant: per element
    p special functions, p subtractions and p adds."""
    p = int(b["p"])
    n = _numel(b["self"])
    return _counts(vector=2 * p * n, special=p * n, read=_read(b), written=_written(out))


# ---- distances -------------------------------------------------------------------------------------------------------
# cdist: per pair of rows and feature a subtraction, an absolute value (or square) and an add: 3 FLOPs; a p-norm other
# than 1, 2 and infinity raises each difference to p (1 special per pair and feature); the root per pair (1 special,
# p not 1 or infinity).

def _pnorm_special(p, pairs, m):
    p = float(p)
    if p in (0.0, 1.0) or math.isinf(p):
        return 0
    return pairs + (0 if p == 2.0 else pairs * m)


def _cdist(b, out):
    x1, x2 = b["x1"], b["x2"]
    m = int(x1.shape[-1])
    pairs = _numel(out)
    return _counts(vector=3 * pairs * m, special=_pnorm_special(b["p"], pairs, m), read=_read(b),
                   written=_written(out))


def _cdist_backward(b, out):
    """Per pair and feature: the difference, its sign or ratio to the distance, the grad's scale and the add into the
    gradient: 4 FLOPs (p other than 1, 2, infinity: 1 special more for the power)."""
    x1 = b["x1"]
    m = int(x1.shape[-1])
    pairs = _numel(b["cdist"])
    p = float(b["p"])
    special = 0 if p in (1.0, 2.0) or math.isinf(p) else pairs * m
    return _counts(vector=4 * pairs * m, special=special, read=_read(b), written=_written(out))


def _pdist(b, out, backward=False):
    x = b["self"]
    m = int(x.shape[-1])
    pairs = _numel(out) if not backward else _numel(b["pdist"])
    if backward:
        return _counts(vector=4 * pairs * m, read=_read(b), written=_written(out))
    return _counts(vector=3 * pairs * m, special=_pnorm_special(b.get("p", 2.0), pairs, m), read=_read(b),
                   written=_written(out))


def _euclidean_dist(b, out):
    """The matrix-product form of the p = 2 distance: the rows' squared norms (2 per element of x1 and x2), the
    product of the (n, m + 2) augmented matrices (2 P R (M + 2), matrix FLOPs), a clamp and a root per pair."""
    x1, x2 = b["x1"], b["x2"]
    m = int(x1.shape[-1])
    pairs = _numel(out)
    return _counts(matrix=2 * pairs * (m + 2), vector=2 * (_numel(x1) + _numel(x2)) + pairs, special=pairs,
                   read=_read(b), written=_written(out))


# ---- sampling grids -----------------------------------------------------------------------------------------------------
# grid_sampler: per output element (batch, channel, output point) the interpolation of its taps (bilinear 3 lerps: 9,
# trilinear 7: 21, bicubic 5 cubic: 35, nearest 0, as the upsampling kinds count), per output point its coordinates
# unnormalised (a multiply and an add per coordinate). Reads the grid and at most the taps it gathers of the input.
# Backward: each grad_output element weighted into every tap (a multiply and an add: 8 bilinear, 16 trilinear, 32
# bicubic, 1 nearest) and, for the grid's gradient, the weights' derivatives (the same again).
_GRID_FWD = {(2, 0): (9, 4), (2, 1): (0, 1), (2, 2): (35, 16), (3, 0): (21, 8), (3, 1): (0, 1)}
_GRID_BWD = {(2, 0): 8, (2, 1): 1, (2, 2): 32, (3, 0): 16, (3, 1): 1}


def _grid_sampler(b, out, spatial, backward=False, mode=None):
    inp, grid = b["input"], b["grid"]
    mode = int(b["interpolation_mode"]) if mode is None else mode
    if (spatial, mode) not in _GRID_FWD:
        raise ValueError(f"grid_sampler: interpolation mode {mode} in {spatial}-d")
    n, c = int(inp.shape[0]), int(inp.shape[1])
    points = _numel(grid) // spatial  # (N, *out_spatial)
    elements = points * c
    coords = 2 * spatial * points
    if not backward:
        per, taps = _GRID_FWD[(spatial, mode)]
        read = _touched_bytes(grid) + min(_touched_bytes(inp), taps * elements * inp.element_size())
        return _counts(vector=per * elements + coords, read=read, written=_written(out))
    mask = b.get("output_mask", (True, True))
    per = _GRID_BWD[(spatial, mode)]
    vector = coords + (per * elements if mask[0] else 0) + (per * elements if mask[1] else 0)
    del n
    return _counts(vector=vector, read=_read(b), written=_written(out))


def _affine_grid(b, out):
    """affine_grid_generator(theta (N, 2, 3) or (N, 3, 4), size): each result element (a coordinate of an output point)
    is a row of theta times (x, y[, z], 1): a multiply-add per entry of the row, 2 * (3 or 4) FLOPs."""
    theta = b["theta"]
    return _counts(vector=2 * int(theta.shape[-1]) * _numel(out), read=_read(b), written=_written(out))


def _cudnn_grid_sampler(b, out, backward=False):
    bb = {"input": b["self"], "grid": b["grid"], "interpolation_mode": 0}
    if backward:
        bb["grad_output"] = b["grad_output"]
    bb = dict(b, **bb)
    return _grid_sampler(bb, out, 2, backward=backward, mode=0)


# ---- losses ----------------------------------------------------------------------------------------------------------

def _ctc(b, out, backward=False):
    """Connectionist temporal classification (CTC): the forward (alpha) recursion over T time steps of the 2S + 1
    states of each sequence's extended target (S its longest target): per state and step a log-sum-exp of up to three
    predecessors (2 max, 3 subtractions, 2 adds: 7 FLOPs; 3 exp, 1 log) and the emission's add (1). Counted over the
    padded (N, T, 2S + 1) lattice, the size of log_alpha, so an upper bound where sequences are shorter; an estimate.
    The backward runs the beta recursion (the same) and, per element of the gradient (T, N, C), an exp and 3 FLOPs."""
    alpha = out[1] if not backward else b["log_alpha"]
    lattice = _numel(alpha)
    if not backward:
        return _counts(vector=8 * lattice, special=4 * lattice, read=_read(b), written=_written(out))
    g = _numel(b["log_probs"])
    return _counts(vector=8 * lattice + 2 * lattice + 3 * g, special=4 * lattice + g, read=_read(b),
                   written=_written(out))


def _multilabel_margin(b, out, backward=False):
    """multilabel_margin_loss: per sample, for each of its targets (at most C, the list ends at the first -1) and each
    of the C classes, a hinge 1 - (x[y] - x[i]), clamped and added: 4 FLOPs, over N C^2 pairs: an upper bound (the
    number of targets is a value); an estimate. Backward: per pair the hinge's test and two adds (3)."""
    x = b["self"]
    c = int(x.shape[-1]) if len(x.shape) else 1
    rows = _numel(x) // max(c, 1)
    return _counts(vector=(3 if backward else 4) * rows * c * c, read=_read(b), written=_written(out))


def _pack_padded(b, out):
    """_pack_padded_sequence: the rows of the sequences (sum of the lengths) copied into one packed tensor, and the
    batch sizes per step; no arithmetic. Reads what it copies (the packed result's size) and the lengths."""
    data = out[0]
    return _counts(read=_out_bytes(data) + _touched_bytes(b["lengths"]), written=_written(out))


# ---- products the C kinds do not cover ---------------------------------------------------------------------------------

_ACT = {False: (1, 0), True: (4, 1)}  # ReLU: 1; GELU: 4 + 1 special


def _addmm_activation(b, out):
    """addmm followed by ReLU (or GELU): 2 M N K matrix FLOPs, the bias add and the activation per result element."""
    m1, m2 = b["mat1"], b["mat2"]
    m, k, n = int(m1.shape[0]), int(m1.shape[1]), int(m2.shape[1])
    f, sp = _ACT[bool(b.get("use_gelu"))]
    return _counts(matrix=2 * m * n * k, vector=(1 + f) * m * n, special=sp * m * n, read=_read(b),
                   written=_written(out))


def _linear(b, out):
    """linear (its out= variant; the functional one decomposes): 2 M N K with the bias add."""
    x, w = b["input"], b["weight"]
    k, n = int(x.shape[-1]), int(w.shape[0])
    m = _numel(x) // max(k, 1) if k else math.prod(int(d) for d in x.shape[:-1])
    bias = b.get("bias") is not None
    return _counts(matrix=2 * m * n * k, vector=m * n if bias else 0, read=_read(b), written=_written(out))


def _linear_backward(b, out, x_name="self"):
    """Gradients of a linear layer: the input's (2 M N K) and the weight's (2 M N K) products, the bias's sum (M N),
    each where ``output_mask`` asks for it."""
    x, g = b[x_name], b["grad_output"]
    k, n = int(x.shape[-1]), int(g.shape[-1])
    m = _numel(g) // max(n, 1) if n else 0
    mask = list(b.get("output_mask", (True, True, True)))
    return _counts(matrix=2 * m * n * k * (int(bool(mask[0])) + int(bool(mask[1]))),
                   vector=m * n if mask[2] else 0, read=_read(b), written=_written(out))


def _nnz(t) -> int:
    layout = str(t.layout)
    if layout == "torch.sparse_coo":
        return int(t._nnz())
    if "sparse" in layout:
        return int(t.values().numel())  # blocks' elements for BSR / BSC
    return _numel(t)


def _sparse_dense_mm(b, out, a_name="mat1", d_name="mat2", bias=True):
    """A sparse (M x K, nnz stored values) times dense (K x N) product: 2 nnz N matrix FLOPs (one multiply-add per
    stored value and output column), the scaled bias add per result element (beta * self + alpha * product: 3) when
    ``bias``. Bytes: the stored values and indices, the dense operand, the result."""
    a, d = b[a_name], b[d_name]
    n = int(d.shape[-1]) if len(d.shape) > 1 else 1
    res = out[0] if isinstance(out, (list, tuple)) else out
    vector = 3 * _numel(res) if bias else 0
    return _counts(matrix=2 * _nnz(a) * n, vector=vector, read=_read(b), written=_written(out))


def _sampled_addmm(b, out):
    """sparse_sampled_addmm(self sparse CSR, mat1 M x K, mat2 K x N): the product only at self's nnz positions: 2 K per
    position, and beta * self + alpha * product (3) per position."""
    s, m1 = b["self"], b["mat1"]
    k = int(m1.shape[-1])
    nnz = _nnz(s)
    return _counts(matrix=2 * nnz * k, vector=3 * nnz, read=_read(b), written=_written(out))


def _sparse_sparse(b, out):
    """_sparse_sparse_matmul (sparse A times sparse B): a multiply-add per pair of stored values that meet: for each
    stored a_ik, the stored values of row k of B, estimated as nnz(A) * nnz(B) / K (rows of B evenly filled). An
    estimate (the real count needs the index values)."""
    a, bb = b["self"], b["other"]
    k = int(bb.shape[0]) or 1
    return _counts(matrix=2 * (_nnz(a) * _nnz(bb) // k), read=_read(b), written=_written(out))


def _sparse_reduce(b, out, flops=1, special=0):
    """A reduction or softmax over a sparse tensor's stored values: ``flops`` per stored value."""
    nnz = _nnz(b["self"])
    return _counts(vector=flops * nnz, special=special * nnz, read=_read(b), written=_written(out))


def _sparse_copy(b, out):
    """Sparse and nested plumbing (conversions, coalescing, construction from indices and values, padding a nested
    tensor): no arithmetic, the stored values and indices (a nested tensor's components) read and the result
    written."""
    return _counts(read=_read(b), written=_written(out))


def _sparse_coalesce(b, out):
    """coalesce: sort the nnz indices (nnz ceil(log2 nnz) comparisons) and add duplicates (1 per value)."""
    nnz = _nnz(b["self"])
    return _counts(vector=nnz * _clog2(nnz) + nnz, read=_read(b), written=_written(out))


def _compute_linear_combination(b, out):
    """result[i] = sum_j coefficients[i, j] * input[j]: 2 FLOPs per coefficient and element of a slice of input."""
    x, c = b["input"], b["coefficients"]
    per_slice = _numel(x) // max(int(x.shape[0]), 1) if len(x.shape) else 1
    return _counts(vector=2 * _numel(c) * per_slice, read=_read(b), written=_written(out))


def _equal(b, out):
    """equal(self, other): one comparison per element of self (returns a Python bool, nothing written)."""
    return _counts(vector=_numel(b["self"]), read=_read(b))


def _allclose(b, out):
    """allclose(self, other): |a - b| <= atol + rtol * |b| per element (subtract, 2 absolute values, multiply, add,
    compare: 6 FLOPs) and their conjunction; returns a Python bool, nothing written."""
    return _counts(vector=6 * _numel(b["self"]), read=_read(b))


def _alias_or_copy(b, out):
    """An op that returns its input when there is nothing to do and a copy otherwise (resolve_conj on a tensor without
    the conjugate bit, an autocast cast to the dtype it has): 0 when the result is the input's storage, else the copy's
    bytes."""
    x = b["self"]
    try:
        same = out.untyped_storage().data_ptr() == x.untyped_storage().data_ptr() and out.device == x.device
    except Exception:  # noqa: BLE001 - no storage to compare (meta, fake): counted as a copy
        same = False
    if same:
        return _counts()
    return _counts(read=_touched_bytes(x), written=_written(out))


def _histogram(b, out):
    """histogram: the bin of each element (3 FLOPs, as histc) and its add (1), the edges written."""
    n = _numel(b["self"])
    return _counts(vector=4 * n, read=_read(b), written=_written(out))


def _unique(b, out):
    return _sort(b, out, None)


def _trilinear(b, out):
    """_trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim) (nn.Bilinear's kernel): the three operands broadcast
    to one shape and multiplied, summed over ``sumdim``. Torch computes it as two batched products; their leading
    term is one multiply-add per point of the broadcast shape (2 FLOPs), counted as matrix FLOPs. An estimate (the
    second, smaller product is left out)."""
    shapes = [list(b[k].shape) for k in ("i1", "i2", "i3")]
    nd = max(len(x) for x in shapes)
    full = 1
    for d in range(nd):
        full *= max(int(x[d]) if d < len(x) else 1 for x in shapes)
    return _counts(matrix=2 * full, read=_read(b), written=_written(out))


def _conv_tbc(b, out):
    """conv_tbc(self (T, B, C_in), weight (K, C_in, C_out), bias): a 1-d convolution over time: 2 C_in K FLOPs per
    output element, and the bias add."""
    w = b["weight"]
    k, cin = int(w.shape[0]), int(w.shape[1])
    n = _numel(out)
    return _counts(matrix=2 * n * cin * k, vector=n, read=_read(b), written=_written(out))


def _slow_conv2d_backward(b, out):
    """_slow_conv2d_backward: the input's and the weight's gradients, 2 FLOPs per grad_output element and weight
    element of its output channel each, and the bias's sum, where ``output_mask`` asks for them (out= overloads: all
    three)."""
    g, w = b["grad_output"], b["weight"]
    per = _numel(w) // max(int(w.shape[0]), 1)
    n = _numel(g)
    mask = list(b.get("output_mask", (True, True, True)))
    return _counts(matrix=2 * n * per * (int(bool(mask[0])) + int(bool(mask[1]))), vector=n if mask[2] else 0,
                   read=_read(b), written=_written(out))


def _mkldnn_linear_backward_input(b, out):
    g, w = b["grad_output"], b["weight"]
    n, k = int(w.shape[0]), int(w.shape[1])
    m = _numel(g) // max(n, 1)
    return _counts(matrix=2 * m * n * k, read=_read(b), written=_written(out))


def _mkldnn_linear_backward_weights(b, out):
    g, x = b["grad_output"], b["input"]
    k = int(x.shape[-1])
    n = int(g.shape[-1])
    m = _numel(g) // max(n, 1)
    return _counts(matrix=2 * m * n * k, vector=m * n if b.get("bias_defined") else 0, read=_read(b),
                   written=_written(out))


def _foreach_mm(b, out):
    """_foreach_mm(self, mat2): a matrix product per pair, 2 M N K each."""
    flops = 0
    for a, c in zip(b["self"], b["mat2"]):
        flops += 2 * int(a.shape[-2]) * int(a.shape[-1]) * int(c.shape[-1]) * (_numel(a) // max(
            int(a.shape[-2]) * int(a.shape[-1]), 1) if int(a.shape[-2]) * int(a.shape[-1]) else 1)
    return _counts(matrix=flops, read=_read(b), written=_written(out))


def _transform_bias_rescale_qkv(b, out):
    """The bias added to every element of the packed q, k, v (1) and q scaled by 1/sqrt(head dim) (1 per element of
    its third)."""
    n = _numel(b["qkv"])
    return _counts(vector=n + n // 3, read=_read(b), written=_written(out))


def _sparse_mm_reduce_backward(b, out):
    """_sparse_mm_reduce_impl_backward(self sparse M x K, grad_out M x N, weight K x N, ...): the sparse operand's
    gradient, a dot of length N per stored value (2 nnz N), and the dense operand's, self^T grad_out (2 nnz N), each
    where ``output_mask`` asks for it."""
    nnz = _nnz(b["self"])
    n = int(b["grad_out"].shape[-1])
    mask = list(b.get("output_mask", (True, True)))
    return _counts(matrix=2 * nnz * n * (int(bool(mask[0])) + int(bool(mask[1]))), read=_read(b),
                   written=_written(out))


def _linear_cross_entropy(b, out, reduced=True):
    """torch_nn::_linear_cross_entropy_batch_chunked (F.linear_cross_entropy's fused, chunked kernel: the logits are
    never materialised): N rows of D features, V classes. The logits 2 N V D (matrix FLOPs), the bias add (N V), the
    log-sum-exp per logit (max, subtract, add: 3 + 1 exp) and, with label smoothing, their sum (1 per logit). The
    reduced variant computes the gradients in the forward where asked (compute_*_grad): the input's and the weight's
    products (2 N V D each), the softmax gradient (2 per logit: the divide and the target's subtraction) and the
    bias's sum (N V). Bytes: the arguments and the results, nothing in between (the chunked kernel's point). The
    per-row loss terms are left out (N against N V): an estimate."""
    x, w = b["input"], b["linear_weight"]
    d, v = int(x.shape[-1]), int(w.shape[0])
    n = _numel(x) // max(d, 1)
    logits = n * v
    matrix = 2 * logits * d
    vector = 3 * logits + (logits if b.get("linear_bias") is not None else 0)
    if reduced and float(b.get("label_smoothing") or 0.0):
        vector += logits
    if reduced:
        gi, gw, gb = (bool(b.get(k)) for k in ("compute_input_grad", "compute_linear_weight_grad",
                                                 "compute_linear_bias_grad"))
        if gi or gw or gb:
            vector += 2 * logits
        matrix += 2 * logits * d * (int(gi) + int(gw))
        vector += logits if gb else 0
    return _counts(matrix=matrix, vector=vector, special=logits, read=_read(b), written=_written(out))


# ---- tables -------------------------------------------------------------------------------------------------------

# aten ops (qualified name, any overload) -> formula(bound arguments, result).
OPS = {
    "aten::sort": _sort, "aten::argsort": _sort, "aten::kthvalue": _sort, "aten::mode": _sort,
    "aten::msort": lambda b, out: _sort(b, out, 0),
    "aten::median": lambda b, out: _sort(b, out, None), "aten::nanmedian": lambda b, out: _sort(b, out, None),
    "aten::_unique2": lambda b, out: _sort(b, out, None), "aten::unique_dim": _sort,
    "aten::unique_consecutive": lambda b, out: _sort(b, out, None),
    "aten::topk": _topk,
    "aten::searchsorted": _searchsorted,
    "aten::bucketize": _bucketize,
    "aten::isin": _isin,
    "aten::mkldnn_rnn_layer": _rnn_layer,
    "aten::mkldnn_rnn_layer_backward": lambda b, out: _rnn_layer(b, out, backward=True),
    "aten::_cudnn_rnn": _cudnn_rnn,
    "aten::_cudnn_rnn_backward": lambda b, out: _cudnn_rnn(b, out, backward=True),
    "aten::_thnn_fused_lstm_cell": lambda b, out: _fused_cell(b, out, 4),
    "aten::_thnn_fused_gru_cell": lambda b, out: _fused_cell(b, out, 3),
    "aten::_thnn_fused_lstm_cell_backward_impl": lambda b, out: _fused_cell(b, out, 4, backward=True),
    "aten::_thnn_fused_gru_cell_backward": lambda b, out: _fused_cell(b, out, 3, backward=True),
    "aten::_transformer_encoder_layer_fwd": _encoder_layer,
    "aten::_flash_attention_forward": lambda b, out: _varlen(b, out, flash=True, backward=False),
    "aten::_flash_attention_backward": lambda b, out: _varlen(b, out, flash=True, backward=True),
    "aten::_efficient_attention_forward": lambda b, out: _varlen(b, out, flash=False, backward=False),
    "aten::_efficient_attention_backward": lambda b, out: _varlen(b, out, flash=False, backward=True),
    "aten::_weight_int8pack_mm": lambda b, out: _quant_mm(b, out, output_terms=1),
    "aten::_weight_int4pack_mm": lambda b, out: _quant_mm(b, out, weight_terms=2),
    "aten::_weight_int4pack_mm_for_cpu": lambda b, out: _quant_mm(b, out, weight_terms=2),
    "aten::_weight_int4pack_mm_with_scales_and_zeros": lambda b, out: _quant_mm(b, out, weight_terms=2),
    "aten::_dyn_quant_matmul_4bit": lambda b, out: _quant_mm(b, out, x_name="inp", block=b["block_size"]),
    "aten::_convert_weight_to_int4pack": _repack,
    "mkl::_mkl_linear": _mkl_linear,
    "mkldnn::_linear_pointwise": _linear_pointwise,  # any overload (schema name): .binary has ``other``
    "mkldnn::_convolution_pointwise": _convolution_pointwise,
    "mkldnn::_convolution_pointwise_": _convolution_pointwise,
    "aten::_convert_weight_to_int4pack_for_cpu": _repack,
    "aten::_dyn_quant_pack_4bit_weight": _repack,
    "aten::_linalg_det": lambda b, out: _linalg(b["A"], _lu_flops, b, out),
    "aten::_linalg_slogdet": lambda b, out: _linalg(b["A"], lambda m, n: _lu_flops(m, n) + 2 * n, b, out),
    "aten::linalg_lu_factor_ex": lambda b, out: _linalg(b["A"], _lu_flops, b, out),
    "aten::linalg_lu": lambda b, out: _linalg(b["A"], _lu_flops, b, out),
    "aten::linalg_cholesky_ex": lambda b, out: _linalg(b["self"], lambda m, n: n ** 3 // 3, b, out),
    "aten::linalg_ldl_factor_ex": lambda b, out: _linalg(b["self"], lambda m, n: n ** 3 // 3, b, out),
    "aten::geqrf": lambda b, out: _linalg(b["self"], _qr_flops, b, out),
    "aten::linalg_qr": lambda b, out: _linalg(
        b["A"], lambda m, n: _qr_flops(m, n) * (1 if b.get("mode", "reduced") == "r" else 2), b, out),
    "aten::linalg_inv_ex": lambda b, out: _linalg(b["A"], lambda m, n: 2 * n ** 3, b, out),
    "aten::cholesky_inverse": lambda b, out: _linalg(b["self"], lambda m, n: 2 * n ** 3 // 3, b, out),
    "aten::_linalg_solve_ex": lambda b, out: _solve(b, out, "A", "B", lambda n: 2 * n ** 3 // 3, 2, "left"),
    "aten::linalg_lu_solve": lambda b, out: _solve(b, out, "LU", "B", lambda n: 0, 2, "left"),
    "aten::linalg_ldl_solve": lambda b, out: _solve(b, out, "LD", "B", lambda n: 0, 2),
    "aten::cholesky_solve": lambda b, out: _solve(b, out, "input2", "self", lambda n: 0, 2),
    "aten::_cholesky_solve_helper": lambda b, out: _solve(b, out, "A", "self", lambda n: 0, 2),
    "aten::linalg_solve_triangular": lambda b, out: _solve(b, out, "self", "B", lambda n: 0, 1, "left"),
    "aten::triangular_solve": lambda b, out: _solve(b, out, "A", "self", lambda n: 0, 1),
    "aten::_linalg_eigh": lambda b, out: _eig(b, out, True, bool(b.get("compute_v", True))),
    "aten::linalg_eig": lambda b, out: _eig(b, out, False, True),
    "aten::linalg_eigvals": lambda b, out: _eig(b, out, False, False),
    "aten::_linalg_eigvals": lambda b, out: _eig(b, out, False, False),
    "aten::_linalg_svd": _svd,
    "prims::svd": lambda b, out: _linalg(b["A"], lambda m, n: _svd_flops(m, n, True, bool(b.get("full_matrices"))),
                                         b, out),
    "aten::linalg_lstsq": _lstsq,
    "aten::linalg_householder_product": _householder,
    "aten::ormqr": _ormqr,
    "aten::linalg_matrix_exp": _matrix_exp,
    "aten::linalg_pinv": _pinv,
    "aten::linalg_polar": _polar,
    "aten::linalg_matrix_sqrth": _matrix_sqrth,
    "aten::trace": _trace,
    "aten::mvlgamma": _mvlgamma,
    "aten::_cdist_forward": _cdist,
    "aten::_cdist_backward": _cdist_backward,
    "aten::_pdist_forward": _pdist,
    "aten::_pdist_backward": lambda b, out: _pdist(b, out, backward=True),
    "aten::_euclidean_dist": _euclidean_dist,
    "aten::affine_grid_generator": _affine_grid,
    "aten::grid_sampler_2d": lambda b, out: _grid_sampler(b, out, 2),
    "aten::_grid_sampler_2d_cpu_fallback": lambda b, out: _grid_sampler(b, out, 2),
    "aten::grid_sampler_3d": lambda b, out: _grid_sampler(b, out, 3),
    "aten::grid_sampler_2d_backward": lambda b, out: _grid_sampler(b, out, 2, backward=True),
    "aten::_grid_sampler_2d_cpu_fallback_backward": lambda b, out: _grid_sampler(b, out, 2, backward=True),
    "aten::grid_sampler_3d_backward": lambda b, out: _grid_sampler(b, out, 3, backward=True),
    "aten::cudnn_grid_sampler": _cudnn_grid_sampler,
    "aten::cudnn_grid_sampler_backward": lambda b, out: _cudnn_grid_sampler(b, out, backward=True),
    "aten::_ctc_loss": _ctc,
    "aten::_ctc_loss_backward": lambda b, out: _ctc(b, out, backward=True),
    "aten::multilabel_margin_loss_forward": _multilabel_margin,
    "aten::multilabel_margin_loss_backward": lambda b, out: _multilabel_margin(b, out, backward=True),
    "aten::_pack_padded_sequence": _pack_padded,
    "aten::_addmm_activation": _addmm_activation,
    "aten::linear": _linear,
    "aten::linear_backward": _linear_backward,
    "aten::mkldnn_linear": lambda b, out: _linear(dict(b, input=b["self"]), out),
    "aten::mkldnn_linear_backward": _linear_backward,
    "aten::_sparse_addmm": _sparse_dense_mm,
    "aten::hspmm": lambda b, out: _sparse_dense_mm(b, out, bias=False),
    "aten::sspaddmm": _sparse_dense_mm,
    "aten::_sparse_mm_reduce_impl": lambda b, out: _sparse_dense_mm(b, out, "self", "other", bias=False),
    "aten::sparse_sampled_addmm": _sampled_addmm,
    "aten::_sparse_sparse_matmul": _sparse_sparse,
    "aten::_sparse_sum": _sparse_reduce,
    "aten::_sparse_csr_sum": _sparse_reduce,
    "aten::_sparse_csr_prod": _sparse_reduce,
    "aten::_sparse_sum_backward": lambda b, out: _sparse_reduce(dict(b, self=b["grad"]), out),
    "aten::_sparse_softmax": lambda b, out: _sparse_reduce(b, out, 4, 1),
    "aten::_sparse_log_softmax": lambda b, out: _sparse_reduce(b, out, 4, 1),
    "aten::_sparse_softmax_backward_data": lambda b, out: _sparse_reduce(dict(b, self=b["output"]), out, 4),
    "aten::_sparse_log_softmax_backward_data": lambda b, out: _sparse_reduce(dict(b, self=b["output"]), out, 3, 1),
    "aten::_coalesce": _sparse_coalesce,
    "aten::_to_sparse": _sparse_copy, "aten::_to_sparse_csr": _sparse_copy, "aten::_to_sparse_csc": _sparse_copy,
    "aten::_to_sparse_bsr": _sparse_copy, "aten::_to_sparse_bsc": _sparse_copy,
    "aten::_sparse_coo_tensor_with_dims_and_tensors": _sparse_copy,
    "aten::_sparse_coo_tensor_with_dims": _sparse_copy,
    "aten::_sparse_compressed_tensor_with_dims": _sparse_copy,
    "aten::sparse_compressed_tensor": _sparse_copy, "aten::sparse_coo_tensor": _sparse_copy,
    "aten::_coalesced": _sparse_copy, "aten::sparse_mask": _sparse_copy, "aten::_sparse_mask_projection": _sparse_copy,
    "aten::copy_sparse_to_sparse": _sparse_copy, "aten::_convert_indices_from_coo_to_csr": _sparse_copy,
    "aten::_convert_indices_from_csr_to_coo": _sparse_copy,
    "aten::_to_dense": _sparse_copy, "aten::to_dense": _sparse_copy,
    # nested-tensor conversions: the C recorder cannot describe a nested tensor, these formulas can (its components)
    "aten::_nested_tensor_from_mask": _sparse_copy, "aten::to_padded_tensor": _sparse_copy,
    "aten::_nested_from_padded": _sparse_copy, "aten::_nested_from_padded_and_nested_example": _sparse_copy,
    "aten::_nested_from_padded_tensor": _sparse_copy, "aten::_jagged_to_padded_dense_forward": _sparse_copy,
    "aten::_padded_dense_to_jagged_forward": _sparse_copy, "aten::_nested_tensor_from_tensor_list": _sparse_copy,
    "aten::_nested_view_from_buffer_copy": _sparse_copy, "aten::_nested_view_from_jagged_copy": _sparse_copy,
    "aten::_nested_get_values_copy": _sparse_copy,
    "aten::_compute_linear_combination": _compute_linear_combination,
    "aten::equal": _equal,
    "aten::allclose": _allclose,
    "aten::resolve_conj": _alias_or_copy, "aten::resolve_neg": _alias_or_copy,
    "aten::histogram": _histogram,
    "aten::_unique": _unique,
    "aten::unique_dim_consecutive": _sort,
    "aten::_trilinear": _trilinear,
    "aten::conv_tbc": _conv_tbc,
    "aten::_slow_conv2d_backward": _slow_conv2d_backward,
    "aten::mkldnn_linear_backward_input": _mkldnn_linear_backward_input,
    "aten::mkldnn_linear_backward_weights": _mkldnn_linear_backward_weights,
    "aten::_foreach_mm": _foreach_mm,
    "aten::_transform_bias_rescale_qkv": _transform_bias_rescale_qkv,
    "aten::_spdiags": _sparse_copy,
    "aten::mvlgamma_": _mvlgamma,
    "aten::_coalesced_": _sparse_copy,
    "aten::copy_sparse_to_sparse_": _sparse_copy,
    "aten::_sparse_mm_reduce_impl_backward": _sparse_mm_reduce_backward,
    "torch_nn::_linear_cross_entropy_batch_chunked": _linear_cross_entropy,
    "torch_nn::_linear_cross_entropy_batch_chunked_no_reduction": lambda b, out: _linear_cross_entropy(b, out, False),
    "torchvision::nms": _nms,
    "torchvision::roi_align": _roi_align,
    "torchvision::_roi_align_backward": lambda b, out: _roi_align(b, out, backward=True),
}

# Higher-order operators (by name) -> formula(args, kwargs, result).
HOPS = {
    "flex_attention": lambda args, kwargs, out: _flex(args, kwargs, out),
    "flex_attention_backward": lambda args, kwargs, out: _flex(args, kwargs, out, backward=True),
    "out_dtype": _out_dtype,
}


def bind(schema_names, args, kwargs) -> dict:
    """The call's arguments by schema name (positional in schema order, then keywords)."""
    b = dict(zip(schema_names, args))
    b.update(kwargs)
    return b
