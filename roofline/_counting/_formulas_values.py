"""Formulas of ops whose count depends on the values they compare: ordering (sort, topk, searchsorted, bucketize,
isin, unique), equality tests and histograms, and ops that copy only when they must.
"""

from __future__ import annotations

from roofline._counting._formula_base import (
    _clog2, _counts, _dim_size, _is_tensor, _numel, _read, _touched_bytes, _written)


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
