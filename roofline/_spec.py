"""Analytic cost of one op from shapes and dtypes, without torch: ``roofline.cost``."""

from __future__ import annotations

import operator
import threading
from dataclasses import dataclass

import numpy as np

from roofline import _core, _registry
from roofline._records import DTYPE_CODES, DTYPE_NAMES, ITEMSIZE, RECORD_DTYPE, canonical_dtype


class TensorSpec:
    """A tensor described by shape, dtype and (optionally) strides in elements, for :func:`cost`.

    ``TensorSpec(shape, dtype="float32", stride=None)``: ``shape`` a sequence of non-negative ints (at most 16),
    ``dtype`` a name (``"bfloat16"``, ``"fp16"``, ``"float"``), a ``torch.dtype`` or a NumPy dtype. A stride of 0 marks
    a broadcast (expanded) dimension, which is read only once. Without ``stride`` the tensor is contiguous.
    Attributes ``shape`` (tuple) and ``dtype`` (canonical name); ``stride()`` is a method, as on a torch tensor.
    """

    __slots__ = ("shape", "dtype", "_stride")

    def __init__(self, shape, dtype="float32", stride=None):
        if isinstance(shape, (str, bytes)):
            raise TypeError(f"TensorSpec: shape must be a sequence of ints, got {shape!r}")
        try:
            shape = tuple(operator.index(s) for s in shape)
        except TypeError:
            raise TypeError(f"TensorSpec: shape must be a sequence of ints, got {shape!r}") from None
        if any(s < 0 for s in shape):
            raise ValueError(f"TensorSpec: negative size in shape {shape}")
        if len(shape) > _core.MAX_DIMS:
            raise ValueError(f"TensorSpec: {len(shape)} dimensions, at most {_core.MAX_DIMS} are supported")
        self.shape = shape
        self.dtype = canonical_dtype(dtype)
        if stride is None:
            st, acc = [], 1
            for s in reversed(shape):
                st.append(acc)
                acc *= max(s, 1)
            stride = tuple(reversed(st))
        else:
            try:
                stride = tuple(operator.index(s) for s in stride)
            except TypeError:
                raise TypeError(f"TensorSpec: stride must be a sequence of ints, got {stride!r}") from None
            if len(stride) != len(shape):
                raise ValueError(f"TensorSpec: stride {stride} has {len(stride)} entries for shape {shape}")
        self._stride = stride

    def stride(self):
        """Strides in elements (a tuple, like ``torch.Tensor.stride()``)."""
        return self._stride

    @property
    def numel(self) -> int:
        """Number of elements: the product of ``shape`` (1 for a 0-d tensor)."""
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        """``numel`` x the size of one element of ``dtype``, in bytes (the expanded size: a broadcast operand
        occupies less, which is what :func:`cost` counts)."""
        return self.numel * ITEMSIZE[self.dtype]

    def __repr__(self):
        st = "" if self._stride == TensorSpec(self.shape).stride() else f", stride={self._stride}"
        return f"TensorSpec({self.shape}, {self.dtype!r}{st})"

    def __eq__(self, other):
        return isinstance(other, TensorSpec) and (self.shape, self.dtype, self._stride) == (
            other.shape, other.dtype, other._stride)

    def __hash__(self):
        return hash((self.shape, self.dtype, self._stride))


@dataclass(frozen=True)
class Cost:
    """Cost of one op call. FLOPs and bytes are exact integers.

    ``flop_counter_flops`` is what ``torch.utils.flop_counter.FlopCounterMode`` would count for the call (0 for ops it
    does not register); ``matrix_flops`` is the true count (they differ for causal attention and for grouped
    convolution backward).

    Fields: ``op`` (the name passed to :func:`cost`), ``matrix_flops``, ``vector_flops``, ``special_ops``
    (transcendental evaluations, not FLOPs), ``bytes_read``, ``bytes_written``, ``flop_counter_flops`` and ``dtype``
    (the dtype the op computes in).
    """

    op: str
    matrix_flops: int
    vector_flops: int
    special_ops: int
    bytes_read: int
    bytes_written: int
    flop_counter_flops: int
    dtype: str

    @property
    def flops(self) -> int:
        """Matrix + vector FLOPs (special-function evaluations are counted separately)."""
        return self.matrix_flops + self.vector_flops

    @property
    def bytes(self) -> int:
        """Compulsory bytes moved: ``bytes_read + bytes_written``."""
        return self.bytes_read + self.bytes_written

    @property
    def intensity(self) -> float:
        """FLOPs per byte of compulsory traffic (inf when no bytes move, 0 when no FLOPs)."""
        if self.bytes == 0:
            return float("inf") if self.flops else 0.0
        return self.flops / self.bytes


_lock = threading.Lock()
_recorder = None
_op_cache: dict = {}


def _get_recorder():
    global _recorder
    if _recorder is None:
        _recorder = _core.Recorder(TensorSpec, {name: code for name, code in DTYPE_CODES.items()})
    return _recorder


def _split_name(op: str):
    """'aten::add.Tensor' / 'aten.add.Tensor' / 'add' -> ('aten::add', 'Tensor')."""
    s = str(op)
    if "::" in s:
        ns, _, rest = s.partition("::")
    elif s.startswith("aten."):
        ns, rest = "aten", s[len("aten."):]
    else:
        ns, rest = "aten", s
    name, _, overload = rest.partition(".")
    return f"{ns}::{name}", ("" if overload == "default" else overload)


def _schema_names(qualified: str, overload: str):
    """(argument names, written names) for an op: the built-in table, else torch's schema if torch is installed."""
    short = qualified.split("::", 1)[1]
    base = short[:-1] if short.endswith("_") and not short.endswith("__") else short
    if base in _registry.SCHEMAS:
        names = _registry.SCHEMAS[base]
        return names, ((names[0],) if base != short else ())
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        ns, name = qualified.split("::", 1)
        try:
            packet = getattr(getattr(torch.ops, ns), name)
            ov = getattr(packet, overload or "default", None) or getattr(packet, packet.overloads()[0])
            args = ov._schema.arguments
            return ([a.name for a in args], [a.name for a in args if a.alias_info and a.alias_info.is_write])
        except (AttributeError, IndexError, RuntimeError):
            pass
    return None, (("self",) if base != short else ())


def _as_tensor(v, dtype):
    if isinstance(v, TensorSpec):
        return v
    return TensorSpec(v, dtype)


def _convert_args(args, dtype):
    if len(args) == 1 and isinstance(args[0], list) and args[0] and all(
            isinstance(a, (tuple, TensorSpec)) for a in args[0]):
        args = tuple(args[0])  # cost("mm", [(M, K), (K, N)]): a list of the tensor inputs
    out = []
    for a in args:
        if isinstance(a, (TensorSpec, tuple)):
            out.append(_as_tensor(a, dtype))
        elif isinstance(a, list) and a and all(isinstance(x, (TensorSpec, tuple)) for x in a):
            out.append([_as_tensor(x, dtype) for x in a])
        else:
            out.append(a)
    return tuple(out)


def _broadcast(shapes):
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError as e:
        raise ValueError(f"shapes {shapes} do not broadcast: {e}") from None


def _conv_out(x, w, stride, padding, dilation, transposed, output_padding, groups):
    sp = len(x.shape) - 2

    def at(v, i, d):
        if v is None:
            return d
        v = list(v) if isinstance(v, (list, tuple)) else [v]
        return v[i] if len(v) > 1 else v[0]

    dims = []
    for i in range(sp):
        k = w.shape[2 + i]
        s, p, d = at(stride, i, 1), at(padding, i, 0), at(dilation, i, 1)
        n = x.shape[2 + i]
        if transposed:
            dims.append((n - 1) * s - 2 * p + d * (k - 1) + at(output_padding, i, 0) + 1)
        else:
            dims.append((n + 2 * p - d * (k - 1) - 1) // s + 1)
    cout = w.shape[1] * groups if transposed else w.shape[0]
    return (x.shape[0], cout, *dims)


def _infer_out(entry, name, args, dtype):
    tensors = [a for a in args if isinstance(a, TensorSpec)]
    k = entry.kind
    if k == _registry.MM:
        return TensorSpec((args[0].shape[0], args[1].shape[1]), args[0].dtype)
    if k == _registry.ADDMM:
        return TensorSpec((args[1].shape[0], args[2].shape[1]), args[1].dtype)
    if k == _registry.BMM:
        return TensorSpec((args[0].shape[0], args[0].shape[1], args[1].shape[2]), args[0].dtype)
    if k == _registry.BADDBMM:
        return TensorSpec((args[1].shape[0], args[1].shape[1], args[2].shape[2]), args[1].dtype)
    if k == _registry.SCALED_MM:
        return TensorSpec((args[0].shape[0], args[1].shape[1]), "bfloat16")
    if k == _registry.EWISE and tensors:
        return TensorSpec(_broadcast([t.shape for t in tensors]), tensors[0].dtype)
    if k == _registry.CONV:
        a = list(args) + [None] * (9 - len(args))
        x, w = a[0], a[1]
        return TensorSpec(_conv_out(x, w, a[3], a[4], a[5], bool(a[6]), a[7], a[8] or 1), x.dtype)
    if k == _registry.ATTN:
        q, v = tensors[0], tensors[2]
        return TensorSpec(q.shape[:-1] + (v.shape[-1],), q.dtype)
    if name in ("_softmax", "_log_softmax", "_safe_softmax", "clone", "_to_copy") and tensors:
        return TensorSpec(tensors[0].shape, tensors[0].dtype)
    return None


def cost(op: str, *args, out=None, dtype="float32") -> Cost:
    """FLOPs and compulsory bytes of one call of ``op``, from shapes and dtypes alone (torch is not needed).

    ``op`` is an ATen operator name: ``"mm"``, ``"aten::addmm"``, ``"aten.add.Tensor"``, ``"add_"``. The arguments
    follow the operator's schema, positionally: a tuple (or :class:`TensorSpec`) is a tensor of that shape, a list
    of them a tensor list, other values (ints, lists of ints, bools, floats, None) are passed as they are. For
    convenience the tensor inputs may be given as one list of shapes: ``cost("mm", [(M, K), (K, N)])``. ``dtype``
    applies to tensors given as bare shapes. ``out`` (a shape, a TensorSpec, or a list of them) gives the result;
    it is inferred for matrix products, convolutions, attention, element-wise ops and softmax, and required
    otherwise.

    >>> cost("mm", [(128, 256), (256, 64)], dtype="bfloat16").matrix_flops  # 2*128*64*256
    4194304
    """
    qualified, overload = _split_name(op)
    keys = (f"{qualified}.{overload}", qualified) if overload else (qualified,)
    user = next((_registry.USER[k] for k in keys if k in _registry.USER), None)
    if user is not None and not isinstance(user, _registry.Entry):
        raise ValueError(f"{op!r} has a Python formula (registered with roofline.register(formula=...)), which runs "
                         "on real tensors inside measure(); roofline.cost() evaluates built-in kinds only")
    entry = user if user is not None else _registry.lookup(qualified, overload)
    if entry is None:
        raise ValueError(f"no cost formula for {op!r}; register one with roofline.register(op, kind=...)")
    dtype = canonical_dtype(dtype)
    args = _convert_args(args, dtype)
    short = qualified.split("::", 1)[1]
    inplace = short.endswith("_") and not short.endswith("__")
    if out is None and not inplace:
        try:
            out = _infer_out(entry, short, args, dtype)
        except (IndexError, AttributeError, TypeError, ZeroDivisionError) as e:
            raise ValueError(f"{op}: arguments do not fit the op's schema ({type(e).__name__}: {e}); "
                             f"got {args!r}") from None
        if out is None and entry.kind not in (_registry.ZERO,):
            raise ValueError(f"cannot infer the result shape of {op!r}; pass out=<shape or TensorSpec>")
    if isinstance(out, tuple) and all(isinstance(s, int) for s in out):
        out = TensorSpec(out, dtype)
    elif isinstance(out, list):
        out = [None if o is None else _as_tensor(o, dtype) for o in out]  # None: an output not computed
    elif out is not None and not isinstance(out, TensorSpec):
        raise TypeError(f"out must be a shape, a TensorSpec or a list of them, got {type(out).__name__}")
    names, written = _schema_names(qualified, overload)
    if names is None:
        names = [f"arg{i}" for i in range(len(args))]
        if written:
            written = (names[0],) if names else ()
    packet = qualified.split("::", 1)[1] if qualified.startswith("aten::") else qualified
    try:
        spec = _registry.compile_entry(entry, packet.rstrip("_") if inplace else packet, names, written)
    except _registry.FormulaError as e:
        raise ValueError(str(e)) from None
    key = tuple(sorted(spec.items()))
    with _lock:
        rec = _get_recorder()
        idx = _op_cache.get(key)
        if idx is None:
            idx = _op_cache[key] = rec.add_op(**spec)
        rec.clear()
        rec.record(idx, 0, 0, args, None, out)
        row = np.frombuffer(rec.records_bytes(), dtype=RECORD_DTYPE)[0]
        rec.clear()
    st = int(row["status"])
    if st == _core.E_OVERFLOW:
        raise OverflowError(f"{op}: a count does not fit in 64 bits")
    if st != 0:
        raise ValueError(f"{op}: {_core.status_str(st)} (arguments: {args!r})")
    return Cost(op=str(op), matrix_flops=int(row["matrix_flops"]), vector_flops=int(row["vector_flops"]),
                special_ops=int(row["special_ops"]), bytes_read=int(row["bytes_read"]),
                bytes_written=int(row["bytes_written"]), flop_counter_flops=int(row["compat_flops"]),
                dtype=DTYPE_NAMES.get(int(row["dtype"]), "unknown"))
