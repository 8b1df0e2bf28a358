"""What the result rules of :mod:`roofline._traces._ops_shapes` build on: the dtype categories, type promotion
(``torch.result_type``'s rule) and the scalar types of a trace, broadcasting and reduced shapes, and the reading of
an op's recorded arguments (a tensor, a list of ints, dims); :class:`NoShape` when a result cannot be derived.
"""

from __future__ import annotations


from roofline._counting._cost import TensorSpec


FLOATS = ("float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
          "float8_e5m2fnuz")
COMPLEX = ("complex128", "complex64", "complex32")
INTS = ("uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64")


class NoShape(Exception):
    """A result's shape cannot be derived from what the trace records (the message says why)."""


# ---- dtypes --------------------------------------------------------------------------------------------------------

def _category(dt: str) -> int:
    return 0 if dt == "bool" else 1 if dt in INTS else 3 if dt in COMPLEX else 2


_RANK = {"bool": 0, "uint8": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 3, "uint32": 3, "int64": 4, "uint64": 4,
         "float8_e4m3fn": 5, "float8_e5m2": 5, "float8_e4m3fnuz": 5, "float8_e5m2fnuz": 5, "float16": 6,
         "bfloat16": 6, "float32": 7, "float64": 8, "complex32": 9, "complex64": 10, "complex128": 11}


def promote(a: str | None, b: str | None) -> str | None:
    """torch.promote_types for the dtypes traces name (None: nothing yet)."""
    if a is None or a == b:
        return b
    if b is None:
        return a
    ca, cb = _category(a), _category(b)
    if ca != cb:
        hi, lo = (a, b) if ca > cb else (b, a)
        if _category(hi) == 3 and lo == "float64":
            return "complex128"
        return hi
    if ca == 2 and _RANK[a] == _RANK[b]:  # float16 with bfloat16, or two float8 formats
        return "float32"
    if {a, b} == {"uint8", "int8"}:
        return "int16"
    return a if _RANK[a] >= _RANK[b] else b


def result_type(tensors, scalars) -> str:
    """torch.result_type of tensors (TensorSpec) and Python numbers: a dimensioned tensor's dtype wins within its
    category; a 0-d tensor or a number raises the category only (a Python float to the default float32)."""
    dim = zero = wrapped = None
    for t in tensors:
        if len(t.shape):
            dim = promote(dim, t.dtype)
        else:
            zero = promote(zero, t.dtype)
    for s in scalars:
        wrapped = promote(wrapped, "bool" if isinstance(s, bool) else "int64" if isinstance(s, int) else
                          "complex64" if isinstance(s, complex) else "float32")

    def combine(hi, lo):
        if hi is None:
            return lo
        if lo is None or _category(hi) >= _category(lo):
            return hi
        if _category(lo) == 3 and hi == "float64":
            return "complex128"
        if _category(lo) == 3 and hi in ("float16", "bfloat16", "float32"):
            return "complex64" if hi != "float16" else "complex32"
        if _category(lo) == 2 and _category(hi) == 2:
            return hi
        return lo
    out = combine(combine(dim, zero), wrapped)
    return out or "float32"


# ScalarType codes (c10/core/ScalarType.h), as a trace records a dtype argument ("6" for float32).
SCALAR_TYPES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32",
                7: "float64", 8: "complex32", 9: "complex64", 10: "complex128", 11: "bool", 15: "bfloat16",
                23: "float8_e5m2", 24: "float8_e4m3fn", 25: "float8_e5m2fnuz", 26: "float8_e4m3fnuz",
                27: "uint16", 28: "uint32", 29: "uint64"}


def scalar_type(v, default: str | None = None) -> str | None:
    """A dtype argument (its ScalarType code) as a dtype name; ``default`` when absent."""
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int) or v not in SCALAR_TYPES:
        raise NoShape(f"dtype argument {v!r} is not a ScalarType the cost model knows")
    return SCALAR_TYPES[v]


# ---- shapes --------------------------------------------------------------------------------------------------------

def broadcast(shapes) -> tuple:
    nd = max((len(s) for s in shapes), default=0)
    out = [1] * nd
    for s in shapes:
        for i, d in enumerate(s):
            j = nd - len(s) + i
            if d != 1:
                if out[j] not in (1, d):
                    raise ValueError(f"shapes {[tuple(x) for x in shapes]} do not broadcast")
                out[j] = d
            elif out[j] == 1:
                out[j] = d
    return tuple(out)


def _t(shape, dtype) -> TensorSpec:
    return TensorSpec(tuple(shape), dtype)


def _like(t: TensorSpec, dtype=None) -> TensorSpec:
    return TensorSpec(t.shape, dtype or t.dtype)


def _wrap(d: int, nd: int) -> int:
    n = max(nd, 1)
    if not -n <= d < n:
        raise ValueError(f"dimension {d} out of range for a tensor of {nd} dimensions")
    return d % n


def _dims_arg(dim, nd) -> list:
    """A reduction's ``dim`` argument: None or [] reduces all dimensions."""
    if dim is None or dim == []:
        return list(range(nd))
    if isinstance(dim, int):
        dim = [dim]
    return sorted({_wrap(d, nd) for d in dim})


def reduced(shape, dim, keepdim) -> tuple:
    dims = _dims_arg(dim, len(shape))
    if keepdim:
        return tuple(1 if i in dims else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in dims)


def _tensor(a, name) -> TensorSpec:
    t = a.get(name)
    if not isinstance(t, TensorSpec):
        raise ValueError(f"argument {name!r} must be a tensor, got {t!r}")
    return t


def _int_list(v, n, name):
    if isinstance(v, int):
        return [v] * n
    if not isinstance(v, list) or not all(isinstance(x, int) for x in v):
        raise ValueError(f"argument {name!r} must be an int list, got {v!r}")
    if len(v) == 1:
        return v * n
    return list(v)
