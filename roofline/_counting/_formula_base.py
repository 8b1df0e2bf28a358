"""What every built-in Python formula builds on: the tensors among an op's arguments, their elements and the bytes
they touch (broadcast, sparse and nested layouts), the bytes read and written, and the dict of counts a formula
returns (the keys of ``roofline.Cost``). The formulas themselves are in the ``_formulas_*`` modules; their table is
``_formulas.OPS``.

Needs no torch at import; the helpers only call methods of the tensors they are given.
"""

from __future__ import annotations


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
