"""Formulas of neural-network layers the C kinds do not cover: recurrent layers and cells, the fused transformer
encoder layer, attention over variable-length sequences, FlexAttention (higher-order operators), torchvision's
detection ops, sampling grids, and the sequence losses (CTC, multilabel margin) and packing.
"""

from __future__ import annotations

import math

import numpy as np

from roofline import _core
from roofline._counting._formula_base import (
    E_DATA, _clog2, _counts, _data_error, _ints, _is_tensor, _numel, _out_bytes, _read, _tensors, _touched_bytes,
    _values_readable, _written)


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
