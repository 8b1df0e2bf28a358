"""Analytic cost of one op from shapes and dtypes, without torch: ``roofline.cost``."""

from __future__ import annotations

import itertools
import operator
import reprlib
import threading
from dataclasses import dataclass

import numpy as np

from roofline import _core
from roofline._counting import _registry, _resolve
from roofline._datamodel._records import DTYPE_CODES, DTYPE_NAMES, ITEMSIZE, RECORD_DTYPE, DerivedCounts, canonical_dtype

_INT64_MAX = (1 << 63) - 1
# Longest list cost() accepts as one argument (a tensor list or an int list): far above any schema's needs (a few
# dimensions, a parameter list of an optimizer step), and it bounds the memory one call can take.
MAX_LIST = 1 << 16

_short = reprlib.Repr()
_short.maxlist = _short.maxtuple = 8
_short.maxlevel = 3
_short.maxstring = _short.maxother = 120


def _brief(v) -> str:
    """repr of a value, truncated, for an error message."""
    return _short.repr(v)


def _dims(seq, kind: str):
    """A shape or stride as a tuple of ints in 0 .. 2**63-1, checked before anything proportional to its length is
    done."""
    if isinstance(seq, (str, bytes)) or not hasattr(seq, "__iter__"):
        raise TypeError(f"TensorSpec: {kind} must be a sequence of ints, got {_brief(seq)}")
    vals = []
    for i, v in enumerate(itertools.islice(seq, _core.MAX_DIMS + 1)):
        if isinstance(v, bool) or not hasattr(type(v), "__index__") or type(v).__name__ in ("bool_", "bool"):
            raise TypeError(f"TensorSpec: entry {i} of the {kind} must be an int, got {_brief(v)} "
                            f"({type(v).__name__})")
        vals.append(operator.index(v))
    if len(vals) > _core.MAX_DIMS:
        raise ValueError(f"TensorSpec: {kind} has more than {_core.MAX_DIMS} dimensions, at most {_core.MAX_DIMS} "
                         "are supported")
    noun, where = ("size", " of the shape") if kind == "shape" else (kind, "")
    for i, v in enumerate(vals):
        if v < 0:
            raise ValueError(f"TensorSpec: negative {noun} {v} at dimension {i}" +
                             (f" of shape {tuple(vals)}" if where else ""))
        if v > _INT64_MAX:
            raise OverflowError(f"TensorSpec: {noun} {v} at dimension {i}{where} does not fit in 64 bits")
    return tuple(vals)


class TensorSpec:
    """A tensor described by shape, dtype and (optionally) strides in elements, for :func:`cost`.

    ``TensorSpec(shape, dtype="float32", stride=None)``: ``shape`` a sequence of non-negative ints (at most 16),
    ``dtype`` a name (``"bfloat16"``, ``"fp16"``, ``"float"``), a ``torch.dtype`` or a NumPy dtype. A stride of 0 marks
    a broadcast (expanded) dimension, which is read only once. Without ``stride`` the tensor is contiguous.
    Attributes ``shape`` (tuple) and ``dtype`` (canonical name); ``stride()`` is a method, as on a torch tensor.
    """

    __slots__ = ("shape", "dtype", "_stride")

    def __init__(self, shape, dtype="float32", stride=None):
        shape = _dims(shape, "shape")
        self.shape = shape
        self.dtype = canonical_dtype(dtype)
        if stride is None:
            st, acc = [], 1
            for s in reversed(shape):
                st.append(acc)
                acc *= max(s, 1)
            # a contiguous stride beyond 64 bits cannot exist in memory: such a tensor is described with the
            # largest stride instead (only its sizes enter the counts)
            stride = tuple(min(x, _INT64_MAX) for x in reversed(st))
        else:
            stride = _dims(stride, "stride")
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
class Cost(DerivedCounts):
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


# One recorder serves every top-level call (the lock orders the threads). A call made while this thread is already
# inside cost() (from a TensorSpec subclass's ``shape``/``stride()``, a signal handler or a finaliser run by the
# garbage collector) must neither wait for the lock its own thread holds nor clear the recorder under the outer
# call: it gets a recorder of its own. The thread-local depth is raised before the lock is taken, so a handler that
# runs at any point of an outer call sees it.
_lock = threading.Lock()
_recorder = None
_op_cache: dict = {}
_depth = threading.local()


def _new_recorder():
    return _core.Recorder(TensorSpec, {name: code for name, code in DTYPE_CODES.items()})


def _get_recorder():
    global _recorder
    if _recorder is None:
        _recorder = _new_recorder()
    return _recorder


def _record_one(rec, op_cache: dict, key, spec, op, args, out):
    """Record one call of the op compiled as `spec` on `rec` and return its row (the recorder is left empty)."""
    idx = op_cache.get(key)
    if idx is None:
        idx = op_cache[key] = rec.add_op(**spec)
    rec.clear()
    try:
        rec.record(idx, 0, 0, args, None, out)
    except (OverflowError, ValueError, TypeError) as e:
        # The recorder's formula slot is shared by every op with the same spec, so its message says "op #N":
        # name the op the caller asked for instead.
        msg = str(e)
        if msg.startswith("op #"):
            msg = msg.split(": ", 1)[-1]
        raise type(e)(f"cost({op!r}): {msg}") from None
    row = np.frombuffer(rec.records_bytes(), dtype=RECORD_DTYPE)[0].copy()
    rec.clear()
    return row


def _evaluate(key, spec, op, args, out):
    """The record row of one call: on the shared recorder for a top-level call, on a fresh one for a call made from
    inside another call on the same thread."""
    depth = getattr(_depth, "n", 0)
    _depth.n = depth + 1
    try:
        if depth:
            return _record_one(_new_recorder(), {}, key, spec, op, args, out)
        with _lock:
            return _record_one(_get_recorder(), _op_cache, key, spec, op, args, out)
    finally:
        _depth.n = depth


def _torch_schema(qualified: str, overload: str):
    """The schema of an op the built-in table does not hold (a custom op), from torch if it is installed."""
    try:
        import torch
    except ImportError:
        return None
    ns, name = qualified.split("::", 1)
    try:
        packet = getattr(getattr(torch.ops, ns), name)
        ov = getattr(packet, overload or "default", None) or getattr(packet, packet.overloads()[0])
        return _registry.Schema.from_torch(ov._schema)
    except (AttributeError, IndexError, RuntimeError):
        return None


def _schema(qualified: str, overload: str):
    """An op's schema: the built-in table (the same with and without torch), else torch's for ops the table does not
    hold, else None."""
    sch = _registry.schema(qualified, overload)
    return sch if sch is not None else _torch_schema(qualified, overload)


def _as_tensor(v, dtype):
    if isinstance(v, TensorSpec):
        return v
    return TensorSpec(v, dtype)


def _convert_args(args, dtype):
    if len(args) == 1 and isinstance(args[0], list) and args[0] and all(
            isinstance(a, (tuple, TensorSpec)) for a in args[0]):
        args = tuple(args[0])  # cost("mm", [(M, K), (K, N)]): a list of the tensor inputs
    out = []
    for i, a in enumerate(args):
        if isinstance(a, (list, tuple)) and len(a) > MAX_LIST:
            raise ValueError(f"argument {i}: a list of {len(a)} entries; cost() takes at most {MAX_LIST}")
        if isinstance(a, (TensorSpec, tuple)):
            try:
                out.append(_as_tensor(a, dtype))
            except (TypeError, ValueError, OverflowError) as e:
                raise type(e)(f"argument {i}: {e}") from None
        elif isinstance(a, list) and a and all(isinstance(x, (TensorSpec, tuple)) for x in a):
            try:
                out.append([_as_tensor(x, dtype) for x in a])
            except (TypeError, ValueError, OverflowError) as e:
                raise type(e)(f"argument {i}: {e}") from None
        elif isinstance(a, int) and not isinstance(a, bool) and not -(1 << 63) <= a <= _INT64_MAX:
            raise OverflowError(f"argument {i}: {_brief(a)} does not fit in 64 bits")
        elif isinstance(a, list) and any(isinstance(x, int) and not -(1 << 63) <= x <= _INT64_MAX for x in a):
            raise OverflowError(f"argument {i}: an entry of {_brief(a)} does not fit in 64 bits")
        else:
            out.append(a)
    return tuple(out)


def _broadcast(shapes):
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError as e:
        raise ValueError(f"shapes {_brief(shapes)} do not broadcast: {e}") from None


def _int_list(op, name, v, n, default, lo):
    """An int / int-list argument of a convolution as n ints (one value broadcast), each >= lo."""
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        vals = [default] * n
    elif isinstance(v, bool):
        raise TypeError(f"{op}: {name} must be an int or a list of ints, got {v!r}")
    elif isinstance(v, int):
        vals = [v] * n
    elif isinstance(v, (list, tuple)) and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        if len(v) not in (1, n):
            raise ValueError(f"{op}: {name} has {len(v)} entries for {n} spatial dimensions")
        vals = list(v) * (n if len(v) == 1 else 1)
    else:
        raise TypeError(f"{op}: {name} must be an int or a list of ints, got {_brief(v)}")
    for x in vals:
        if x < lo:
            raise ValueError(f"{op}: {name} {_brief(v)} must be >= {lo}")
    return vals


def _conv_out(op, entry, names, args):
    """Output shape of a convolution whose arguments are laid out as ``names`` (the op's schema)."""
    def get(name, default=None):
        i = names.index(name) if name in names else -1
        return args[i] if 0 <= i < len(args) else default

    x, w = (args[0] if args else None), (args[1] if len(args) > 1 else None)
    if not isinstance(x, TensorSpec) or not isinstance(w, TensorSpec):
        raise ValueError(f"{op}: the input and the weight must be tensors, got {_brief(args[:2])}")
    if len(x.shape) < 3 or len(w.shape) != len(x.shape):
        raise ValueError(f"{op}: input {x.shape} and weight {w.shape} must both be (N, C, spatial...) and "
                         "(C_out, C_in/groups, kernel...) with the same number of dimensions")
    sp = len(x.shape) - 2
    transposed = bool(entry.params.get("always_transposed")) or bool(get(entry.params.get("transposed", "transposed"),
                                                                          False))
    if "groups" in names:
        groups = get("groups", 1)
        groups = 1 if groups is None else groups
        if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
            raise ValueError(f"{op}: groups must be a positive int, got {_brief(groups)}")
    else:
        groups = x.shape[1] if entry.params.get("depthwise") else 1
    stride = _int_list(op, "stride", get("stride"), sp, 1, 1)
    padding = _int_list(op, "padding", get("padding"), sp, 0, 0)
    dilation = _int_list(op, "dilation", get("dilation"), sp, 1, 1)
    out_pad = _int_list(op, "output_padding", get("output_padding"), sp, 0, 0)
    cin = x.shape[1]
    if transposed:
        cout = w.shape[1] * groups
        if w.shape[0] != cin or cin % groups:
            raise ValueError(f"{op}: a transposed convolution's weight {w.shape} must be (C_in={cin}, "
                             f"C_out/groups, ...) with C_in divisible by groups={groups}")
    else:
        cout = w.shape[0]
        if w.shape[1] * groups != cin or cout % groups:
            raise ValueError(f"{op}: weight {w.shape} does not fit input {x.shape} with groups={groups}: "
                             f"the weight's second dimension times groups must be the {cin} input channels")
    dims = []
    for i in range(sp):
        n, k, s, p, d = x.shape[2 + i], w.shape[2 + i], stride[i], padding[i], dilation[i]
        if transposed:
            o = (n - 1) * s - 2 * p + d * (k - 1) + out_pad[i] + 1
        else:
            o = (n + 2 * p - d * (k - 1) - 1) // s + 1
        if o < 0 or (o == 0 and n > 0):
            raise ValueError(f"{op}: the kernel {w.shape[2:]} (dilation {dilation}) does not fit the input "
                             f"{x.shape[2:]} with padding {padding}: spatial dimension {i} of the result would be {o}")
        dims.append(o)
    return (x.shape[0], cout, *dims)


def _infer_out(entry, name, names, args, dtype):
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
        return TensorSpec(_conv_out(name, entry, names, args), args[0].dtype)
    if k == _registry.ATTN:
        q, v = tensors[0], tensors[2]
        return TensorSpec(q.shape[:-1] + (v.shape[-1],), q.dtype)
    if name in ("mv", "addmv") and len(tensors) >= 2:  # (M, N) matrix times a vector of N: M results
        mat = tensors[0] if name == "mv" else tensors[1]
        return TensorSpec(mat.shape[:1], mat.dtype)
    if name in ("_softmax", "_log_softmax", "_safe_softmax", "clone", "_to_copy") and tensors:
        return TensorSpec(tensors[0].shape, tensors[0].dtype)
    return None


def _place_destinations(args, names, outs, out):
    """For an out= overload, the result is the destination: put it at the destinations' positions when they are not
    among the arguments (the positions in between are None)."""
    first = names.index(outs[0])
    if len(args) > first or out is None:
        return args
    results = out if isinstance(out, list) else [out]
    if len(results) != len(outs):
        raise ValueError(f"out: {len(results)} result(s) for the {len(outs)} destination(s) {list(outs)}")
    return tuple(args) + (None,) * (first - len(args)) + tuple(
        results[outs.index(n)] if n in outs else None for n in names[first:first + len(outs)])


def cost(op: str, *args, out=None, dtype="float32") -> Cost:
    """FLOPs and compulsory bytes of one call of ``op``, from shapes and dtypes alone (torch is not needed).

    ``op`` is an ATen operator name: ``"mm"``, ``"aten::addmm"``, ``"aten.add.Tensor"``, ``"add_"``. The arguments
    follow the operator's schema, positionally: a tuple (or :class:`TensorSpec`) is a tensor of that shape, a list
    of them a tensor list, other values (ints, lists of ints, bools, floats, None) are passed as they are. For
    convenience the tensor inputs may be given as one list of shapes: ``cost("mm", [(M, K), (K, N)])``. ``dtype``
    applies to tensors given as bare shapes. ``out`` (a shape, a TensorSpec, or a list of them) gives the result;
    it is inferred for matrix products, convolutions, attention, element-wise ops and softmax, and required
    otherwise. ``cost`` is thread-safe and re-entrant: it may be called again from code a call runs (a
    ``TensorSpec`` subclass's ``shape`` or ``stride()``, a signal handler, a finaliser).

    >>> cost("mm", [(128, 256), (256, 64)], dtype="bfloat16").matrix_flops  # 2*128*64*256
    4194304
    """
    qualified, overload = _resolve.split_name(op)
    found = _resolve.find(qualified, overload)
    if found.formula is not None:
        raise ValueError(f"{op!r} has a Python formula (registered with roofline.register(formula=...)), which runs "
                         "on real tensors inside measure(); roofline.cost() evaluates built-in kinds only")
    entry = found.entry
    if entry is None:
        raise ValueError(f"no cost formula for {op!r}; register one with roofline.register(op, kind=...)")
    dtype = canonical_dtype(dtype)
    args = _convert_args(args, dtype)
    if len(args) > _core.MAX_ARGS:
        raise ValueError(f"{op}: {len(args)} arguments; an operator takes at most {_core.MAX_ARGS}")
    short = qualified.split("::", 1)[1]
    inplace = _registry.functional_name(short) != short
    sch = _schema(qualified, overload)
    if sch is None:  # an op without a known schema: its arguments are positional; an in-place one writes the first
        names = tuple(f"arg{i}" for i in range(len(args)))
        sch = _registry.Schema(names, 0, names[:1] if inplace else (), inplace)
    names, outs = list(sch.names), list(sch.outs)
    if len(args) > len(names):
        raise ValueError(f"{op}: {len(args)} arguments for a schema of {len(names)} ({', '.join(names)})")
    if out is None and not inplace:
        try:
            out = _infer_out(entry, short, names, args, dtype)
        except (IndexError, AttributeError, TypeError, ZeroDivisionError) as e:
            raise ValueError(f"{op}: arguments do not fit the op's schema ({type(e).__name__}: {e}); "
                             f"got {_brief(args)}") from None
        if out is None and entry.kind != "zero":
            raise ValueError(f"cannot infer the result shape of {op!r}; pass out=<shape or TensorSpec>")
    try:
        if isinstance(out, (tuple, TensorSpec)):
            out = _as_tensor(out, dtype)
        elif isinstance(out, list):
            if len(out) > MAX_LIST:
                raise ValueError(f"a list of {len(out)} results; cost() takes at most {MAX_LIST}")
            out = [None if o is None else _as_tensor(o, dtype) for o in out]  # None: an output not computed
        elif out is not None:
            raise TypeError(f"must be a shape, a TensorSpec or a list of them, got {_brief(out)}")
    except (TypeError, ValueError, OverflowError) as e:
        raise type(e)(f"{op}: out: {e}") from None
    if outs:
        args = _place_destinations(args, names, outs, out)
    try:
        spec = _resolve.compile_op(qualified, entry, sch)
    except _registry.FormulaError as e:
        raise ValueError(str(e)) from None
    key = tuple(sorted((k, tuple(sorted(v.items())) if isinstance(v, dict) else v) for k, v in spec.items()))
    row = _evaluate(key, spec, op, args, out)
    st = int(row["status"])
    if st == _core.E_OVERFLOW:
        raise OverflowError(f"{op}: a count does not fit in 64 bits (arguments: {_brief(args)})")
    if st != 0:
        raise ValueError(f"{op}: {_core.status_str(st)} (arguments: {_brief(args)})")
    return Cost(op=str(op), matrix_flops=int(row["matrix_flops"]), vector_flops=int(row["vector_flops"]),
                special_ops=int(row["special_ops"]), bytes_read=int(row["bytes_read"]),
                bytes_written=int(row["bytes_written"]), flop_counter_flops=int(row["flop_counter_flops"]),
                dtype=DTYPE_NAMES.get(int(row["dtype"]), "unknown"))
