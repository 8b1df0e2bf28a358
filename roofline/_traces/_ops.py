"""The cost of the aten ops a ``torch.profiler`` (Kineto) trace records, without torch.

A trace's ``cpu_op`` event names an op (``"aten::addmm"``) and records its inputs in its ``args``: ``"Input Dims"``
(a shape per input; ``[]`` for a scalar or None; a list of shapes for a tensor list), ``"Input type"`` (a tensor's
dtype as C++ names it, ``"Scalar"``, ``"ScalarList"``, ``"TensorList"``, ``"GenericList"`` or ``""`` for None and the
types the profiler does not record), ``"Input Strides"`` and ``"Concrete Inputs"`` (the values of scalar arguments as
text). :func:`cost_event` chooses the overload those arguments fit (the argument types of every overload come from
``_ops_table``, generated from torch), derives the results the trace does not record (``_ops_shapes``) and evaluates
the cost model's formula for it, exactly as ``roofline.measure`` does for the same call.

:func:`counted` says which events of an op tree are the calls ``measure`` counts: the profiler records every op at its
nesting level (``aten::linear`` and inside it ``aten::t`` and ``aten::addmm``; ``aten::addmm`` and inside it the ops
its kernel calls), while a dispatch mode sees the outermost op that reaches it, an op with a
``CompositeImplicitAutograd`` kernel never (its parts do).

Conventions where the trace says less than the call had (each stated in :attr:`TraceOpCost.assumed`):

* a 0-d tensor of a Python number's dtype (``double``, ``long int``, ``c10::complex<double>``) in a tensor
  argument of an element-wise op other than its first tensor is taken for a wrapped number (``x.mul_(0.9)``, ATen's
  ``grad * 0.5``), which the dispatch mode sees as a number and the cost model does not read; a real 0-d float64
  tensor there (rare: ``torch.cov`` divides by one) is then 8 bytes short;
* the elements of a tensor list have no recorded dtype: they are taken to have ``list_dtype`` (given by the caller,
  else the op's first tensor's dtype, else float32);
* without ``"Input Strides"`` (older traces) every tensor is taken to be contiguous, so a broadcast (expanded) operand
  is counted at its expanded size;
* a list of optional tensors (``index_put``'s indices) is not recorded: its bytes are not counted;
* arguments an older torch did not have (trailing optional ones) take their defaults.

Where the trace cannot say (status ``"unknown"``, with the reason): ops without a formula; a result whose size
depends on the data (``nonzero``) or on an unrecorded argument (``index``'s indices); tensor lists longer than the
profiler records (it writes ``[]`` beyond a length: a large model's foreach optimizer ops).

Where a trace and ``measure`` count the same step differently, by design (tests/test_trace_cost.py checks each):
under a dispatch mode autograd and some backward formulas take their out-of-place branch (``add`` for ``add_``,
``scatter_add`` for ``scatter_add_``: the same counts under another name); ops with a composite kernel in Python
only (``native_batch_norm``, ``upsample_nearest2d``: :func:`measure_decomposes`) or with a composite kernel beside
their own (``silu_backward`` in backward) are decomposed by ``measure`` and counted whole here, as the kernel that
ran. ``bench/trace_cost_coverage.py`` compares the two over torch's OpInfo samples.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from roofline import _core
from roofline._counting import _formula_base, _formulas, _registry, _resolve, _cost as _spec
from roofline._counting._cost import Cost, TensorSpec
from roofline._datamodel._records import COUNTS_AND_FLOP_COUNTER, DTYPE_CODES, DTYPE_NAMES, ITEMSIZE
from roofline._traces import _ops_shapes
from roofline._traces._ops_shapes import NoShape
from roofline._traces._ops_table import CIA, KERNEL_CIA, NAMES, PY_CIA, TORCH_VERSION, TYPES

OK, UNKNOWN, NO_SHAPES, ERROR = "ok", "unknown", "no_shapes", "error"

# "Input type" of a tensor (c10's type names, as the profiler writes them) -> the package's dtype name.
TRACE_DTYPES = {
    "float": "float32", "double": "float64", "c10::Half": "float16", "c10::BFloat16": "bfloat16",
    "c10::Float8_e4m3fn": "float8_e4m3fn", "c10::Float8_e5m2": "float8_e5m2",
    "c10::Float8_e4m3fnuz": "float8_e4m3fnuz", "c10::Float8_e5m2fnuz": "float8_e5m2fnuz",
    "long int": "int64", "long": "int64", "long long int": "int64", "int": "int32", "short int": "int16",
    "short": "int16", "signed char": "int8", "unsigned char": "uint8", "bool": "bool",
    "short unsigned int": "uint16", "unsigned short": "uint16", "unsigned int": "uint32",
    "long unsigned int": "uint64", "unsigned long": "uint64",
    "c10::complex<float>": "complex64", "c10::complex<double>": "complex128", "c10::complex<c10::Half>": "complex32",
}
_NOT_TENSOR = frozenset({"Scalar", "ScalarList", "TensorList", "GenericList", ""})
# dtypes a wrapped Python number has (float, int, bool, complex)
_NUMBER_DTYPES = frozenset({"float64", "int64", "complex128"})  # (a Python bool is rarely an operand: 0-d bools are
# taken for tensors)
_OP_NAME = re.compile(r"[A-Za-z_]\w*::[A-Za-z_]\w*")
# ops of other kinds than "ewise" to which a number is passed as a wrapped 0-d tensor
_WRAPPING = frozenset({"where", "masked_fill", "index_fill", "fill"})


@dataclass(frozen=True)
class TraceOpCost(Cost):
    """The cost of one recorded op call: a :class:`roofline.Cost` (its counts, exact integers with the meaning and
    names of a report's records, ``roofline._datamodel._records.RECORD_DTYPE``) and what the trace said of the call.

    ``op``: the event's name; ``overload``: the overload chosen, named as a measured report names it
    (``"aten.addmm.default"``; ``""`` when none fits); ``kind``: the cost kind (``"mm"``, ``"ewise"``, ...; ``""``
    when there is none); ``dtype``: the dtype the op computes in (``"unknown"`` when there is none);
    ``status``: ``"ok"`` (counted), ``"unknown"`` (no formula, or a result the trace does not let one derive: the op
    belongs in ``unknown_ops``, its counts are not 0 but unknown), ``"no_shapes"`` (the trace was recorded without
    ``record_shapes``) or ``"error"`` (the recorded arguments contradict the op); ``reason`` says why for any status
    but ok. ``assumed``: what was taken for granted where the trace says less than the call had ("" when nothing)."""

    overload: str
    kind: str
    status: str
    reason: str = ""
    assumed: str = ""

    @property
    def dtype_code(self) -> int:
        """The dtype as a record stores it (``records["dtype"]``; 0 unknown)."""
        return DTYPE_CODES.get(self.dtype, 0)

    @property
    def ok(self) -> bool:
        return self.status == OK


def _fail(name, status, reason, overload="", kind="", assumed=""):
    return TraceOpCost(name, 0, 0, 0, 0, 0, 0, "unknown", overload=overload, kind=kind, status=status, reason=reason,
                       assumed=assumed)


# ---- the overloads of each op, by packet --------------------------------------------------------------------------

def _by_packet() -> dict:
    out: dict = {}
    for key, codes in TYPES.items():
        packet, _, ov = key.rpartition(".")
        out.setdefault(packet, []).append((ov, tuple(codes.split())))
    for ovs in out.values():  # the default overload first, then the table's order
        ovs.sort(key=lambda x: x[0] != "default")
    return out


_OVERLOADS = _by_packet()
# packets all of whose overloads are composite (those with some composite overloads and some not are in TYPES)
_CIA_PACKETS = frozenset(k.rpartition(".")[0] for k in CIA)


def _fits(recorded: str, code: str) -> bool:
    """Whether an argument recorded with type ``recorded`` can be an argument of type ``code``."""
    if recorded not in _NOT_TENSOR:
        return code in ("T", "T?")
    if recorded == "Scalar":
        return code in ("S", "S?", "i", "i?", "f", "f?", "b", "b?")
    if recorded == "ScalarList":
        return code in ("I", "I?", "F", "F?", "B", "B?", "A", "A?")
    if recorded == "TensorList":
        return code in ("L", "L?")
    if recorded == "GenericList":
        return code in ("L", "L?", "I", "I?", "F", "F?", "B", "B?", "A", "A?", "W", "W?")
    # "": None, or a type the profiler does not record (a string, a device, a list of optional tensors or of scalars)
    return code.endswith("?") or code in ("s", "D", "G", "X", "W", "A", "?")


def choose_overload(packet_key: str, types, prefix: bool = False) -> str | None:
    """The first overload of ``packet_key`` (``"addmm"``, ``"prims::convert_element_type"``) whose arguments the
    recorded ``types`` fit, default first; None when none does. ``prefix``: the recorded arguments may be the first
    ones of the overload's, the others optional (a trace of an older torch, before arguments were added)."""
    for ov, codes in _OVERLOADS.get(packet_key, ()):
        if (len(codes) == len(types) or (prefix and len(codes) > len(types) and all(
                c.endswith("?") for c in codes[len(types):]))) and all(_fits(r, c) for r, c in zip(types, codes)):
            return ov
    return None


# ---- arguments ----------------------------------------------------------------------------------------------------

_INT = re.compile(r"-?\d+")


def _value(text: str):
    """A ``"Concrete Inputs"`` entry as a Python value: ints, floats, bools, lists of them; None for ""."""
    if not text:
        return None
    if text in ("True", "False"):
        return text == "True"
    if text[0] == "[" and text[-1] == "]":
        inner = text[1:-1].strip()
        return [] if not inner else [_value(x.strip()) for x in inner.split(",")]
    if _INT.fullmatch(text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        return text


def _shape(dims, what):
    if not isinstance(dims, (list, tuple)) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                      for d in dims):
        raise ValueError(f"{what}: shape {dims!r} is not a list of non-negative ints")
    return tuple(dims)


def _strides(st, shape):
    if isinstance(st, (list, tuple)) and len(st) == len(shape) and all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in st):
        return tuple(st)
    return None


# ---- cost ---------------------------------------------------------------------------------------------------------

_CACHE: dict = {}
_CACHE_BYTES = [0]  # the length of the keys' texts, which bounds the cache's memory
_CACHE_MAX_BYTES = 32 << 20  # beyond it the cache starts again (a trace repeats far fewer signatures)
_LIST_DTYPES = frozenset(TRACE_DTYPES.values())


def cost_event(name: str, args: dict, *, list_dtype: str | None = None) -> TraceOpCost:
    """The cost of one ``cpu_op`` event (``name``, its ``args`` dict); ``list_dtype``: the dtype of the elements of
    its tensor lists, which traces do not record (by default the op's first tensor's dtype, else float32). Cached per
    (name, recorded arguments): a trace repeats few signatures. Never raises for what a trace holds: arguments that
    do not describe a call give status ``"error"`` with the reason."""
    if not isinstance(name, str):
        raise TypeError(f"cost_event: name must be a str, got {type(name).__name__}")
    if not isinstance(args, dict):
        raise TypeError(f"cost_event({name!r}): args must be a dict, got {type(args).__name__}")
    if list_dtype is not None and list_dtype not in _LIST_DTYPES:
        raise ValueError(f"cost_event({name!r}): list_dtype {list_dtype!r} is not one of {sorted(_LIST_DTYPES)}")
    types, dims = args.get("Input type"), args.get("Input Dims")
    strides, concrete = args.get("Input Strides"), args.get("Concrete Inputs")
    # The key is the text of the recorded values: for JSON's lists, numbers, strings, bools and None it tells
    # different values apart, and it is built in C, twice as fast as a tuple of tuples.
    try:
        text = repr((types, dims, strides, concrete))
    except RecursionError:
        return _fail(name, ERROR, "its recorded arguments are nested too deep to be shapes")
    key = (name, text, list_dtype)
    hit = _CACHE.get(key)
    if hit is None:
        try:
            hit = _cost(name, types, dims, strides, concrete, list_dtype)
        except RecursionError:
            hit = _fail(name, ERROR, "its recorded arguments are nested too deep to be shapes")
        if _CACHE_BYTES[0] + len(text) > _CACHE_MAX_BYTES:
            _CACHE.clear()
            _CACHE_BYTES[0] = 0
        _CACHE[key] = hit
        _CACHE_BYTES[0] += len(text) + len(name)
    return hit


def _cost(name, types, dims, strides, concrete, list_dtype) -> TraceOpCost:
    if not _OP_NAME.fullmatch(name):
        return _fail(name, UNKNOWN, "not an operator name")
    if types is None or dims is None:
        return _fail(name, NO_SHAPES, "recorded without shapes (torch.profiler's record_shapes=True records them)")
    ns, _, packet = name.partition("::")
    packet_key = packet if ns == "aten" else name
    if not isinstance(types, list) or not isinstance(dims, list) or len(types) != len(dims) or not all(
            isinstance(t, str) for t in types):
        return _fail(name, ERROR, f"'Input type' {types!r} and 'Input Dims' {dims!r} do not describe the same inputs")
    if not isinstance(strides, list) or len(strides) != len(dims):
        strides = None
    if not isinstance(concrete, list) or len(concrete) != len(dims):
        concrete = [""] * len(dims)
    functional = _registry.functional_name(packet_key)
    if packet_key not in _OVERLOADS:
        found = _resolve.find(f"{ns}::{packet}")
        if found.entry is None and found.formula is None:
            return _fail(name, UNKNOWN, "no cost formula")
        return _fail(name, UNKNOWN, f"its overloads are not in the table generated from torch "
                                    f"{TORCH_VERSION} (python -m roofline._traces._ops_gen)")
    ov = choose_overload(packet_key, types)
    older = ""
    if ov is None:
        # a trace of an older torch, whose schema had fewer (trailing, optional) arguments
        ov = choose_overload(packet_key, types, prefix=True)
        if ov is None:
            return _fail(name, ERROR, f"the recorded argument types {types} fit no overload of {name}")
        extra = len(dict(_OVERLOADS[packet_key])[ov]) - len(types)
        types, dims = list(types) + [""] * extra, list(dims) + [[]] * extra
        strides = None if strides is None else list(strides) + [[]] * extra
        concrete = list(concrete) + [""] * extra
        older = f"{extra} trailing argument(s) not recorded (an older torch): taken as their defaults"
    overload = f"{ns}.{packet}.{ov}"
    if f"{packet_key}.{ov}" in CIA and f"{packet_key}.{ov}" not in KERNEL_CIA:
        return _fail(name, UNKNOWN, "a CompositeImplicitAutograd op: its parts are counted, not it", overload)
    found = _resolve.find(f"{ns}::{packet}", ov)
    if found.formula is not None:
        return _fail(name, UNKNOWN, "its formula (roofline.register(formula=...)) runs on tensors, not on a trace",
                     overload)
    entry = found.entry
    builtin = _formulas.OPS.get(f"{ns}::{packet}") if not found.registered else None
    if builtin is not None and f"{packet_key}.{ov}" in NAMES:
        try:
            c = _evaluate_python(name, overload, builtin, f"{packet_key}.{ov}", packet_key, ov, functional, types,
                                 dims, strides, concrete, list_dtype)
        except NoShape as e:
            return _fail(name, UNKNOWN, str(e), overload, "python")
        except (ValueError, OverflowError, TypeError, IndexError, KeyError) as e:
            return _fail(name, ERROR, str(e), overload, "python")
        if older:
            c = dataclasses.replace(c, assumed="; ".join(x for x in (older, c.assumed) if x))
        return c
    if entry is None:
        return _fail(name, UNKNOWN, "no cost formula", overload)
    sch = _registry.schema(f"{ns}::{packet}", ov)
    if sch is None:
        return _fail(name, UNKNOWN, "no schema for the overload in roofline._counting._schemas", overload, entry.kind)
    try:
        c = _evaluate(name, overload, entry, sch, f"{ns}::{packet}", ov, functional, types, dims, strides,
                      concrete, list_dtype)
        if older:
            c = dataclasses.replace(c, assumed="; ".join(x for x in (older, c.assumed) if x))
        return c
    except NoShape as e:
        return _fail(name, UNKNOWN, str(e), overload, entry.kind)
    except (ValueError, OverflowError, TypeError, IndexError, KeyError) as e:
        return _fail(name, ERROR, str(e), overload, entry.kind)


def _arguments(names, codes, kind, functional, types, dims, strides, concrete, list_dtype):
    """The call's arguments as the cost model takes them (TensorSpec, lists of them, numbers, None), its tensors, its
    numbers, and what was assumed."""
    if len(names) != len(types):
        raise ValueError(f"{len(types)} inputs recorded for a schema of {len(names)} ({', '.join(names)})")
    assumed = []
    first_dtype = next((TRACE_DTYPES.get(t) for t in types if t not in _NOT_TENSOR), None)
    ldt = list_dtype or first_dtype or "float32"
    if list_dtype is None and "TensorList" in types:
        assumed.append(f"tensor-list elements taken as {ldt}")
    if strides is None and any(t not in _NOT_TENSOR or t == "TensorList" for t in types):
        assumed.append("no strides recorded: tensors taken as contiguous")
    args, tensors, scalars = [], [], []
    seen_tensor = False
    # where Python and ATen's C++ operators pass a number as a tensor argument (x * 0.5, grad.mul_(beta)): the
    # element-wise ops, whose numbers become 0-d "wrapped" tensors of the number's dtype
    wraps = kind == "ewise" or functional.rpartition("::")[2] in _WRAPPING
    for i, (t, d) in enumerate(zip(types, dims)):
        st = strides[i] if strides is not None else None
        where = f"argument {names[i]}"
        if t not in _NOT_TENSOR:
            dt = TRACE_DTYPES.get(t)
            if dt is None:
                raise NoShape(f"{where}: dtype {t!r} is not one the cost model knows")
            shape = _shape(d, where)
            if seen_tensor and not shape and dt in _NUMBER_DTYPES and codes[i] == "T" and wraps:
                v = {"float64": 1.0, "int64": 1, "complex128": 1j}[dt]
                args.append(v)
                scalars.append(v)
                assumed.append(f"0-d {dt} {names[i]} taken for a Python number")
                continue
            seen_tensor = True
            ts = TensorSpec(shape, dt, _strides(st, shape))
            args.append(ts)
            tensors.append(ts)
        elif t == "TensorList":
            if not isinstance(d, list):
                raise ValueError(f"{where}: a tensor list recorded without its shapes")
            if not d and not any(tt == "TensorList" and dd for tt, dd in zip(types, dims)):
                # the profiler records a list's shapes up to a length, and [] beyond it; an empty list is told apart
                # only where another list of the call is recorded (the lists of a foreach op are that long or empty)
                raise NoShape(f"{where}: the trace does not record the shapes of this tensor list (a long list)")
            sts = st if isinstance(st, list) and len(st) == len(d) else [None] * len(d)
            lst = []
            for j, dd in enumerate(d):
                shape = _shape(dd, f"{where}[{j}]")
                lst.append(TensorSpec(shape, ldt, _strides(sts[j], shape)))
            args.append(lst)
            tensors.extend(lst)
            seen_tensor = True
        elif t in ("Scalar", "ScalarList"):
            v = _value(concrete[i]) if isinstance(concrete[i], str) else None
            args.append(v)
            if isinstance(v, (int, float, complex)) and t == "Scalar":
                scalars.append(v)
        else:
            args.append(None)
            if codes[i] == "L?":  # a list of optional tensors (index's indices): the profiler writes ""
                assumed.append(f"{names[i]} not recorded: its bytes are not counted")
    return args, tensors, scalars, assumed


def _evaluate(name, overload, entry, sch, qualified, ov, functional, types, dims, strides, concrete, list_dtype):
    names = list(sch.names)
    codes = dict(_OVERLOADS[qualified[len("aten::"):] if qualified.startswith("aten::") else qualified])[ov]
    args, tensors, scalars, assumed = _arguments(names, codes, entry.kind, functional, types, dims, strides,
                                                 concrete, list_dtype)
    a = dict(zip(names, args))
    outs = sch.outs
    inplace = functional != (qualified[len("aten::"):] if qualified.startswith("aten::") else qualified)
    if outs:
        out = [a[n] for n in outs]
        out = out[0] if len(out) == 1 else out
    elif inplace:
        out = None
    else:
        short = functional.rpartition("::")[2]
        out = _ops_shapes.results(short, entry.kind, a, tensors, scalars)
        if short == "log_sigmoid_forward":
            assumed.append("its buffer taken as input-sized (CPU); on CUDA it is empty")
        if out is None and entry.kind != "zero":  # the products, convolutions and attention: the cost model's own rule
            out = _spec._infer_out(entry, short, names, args, "float32")
            if out is None:
                raise NoShape(f"the result shape of {short} is not derived from its recorded inputs")
    spec = _compiled(qualified, ov, entry, sch)
    row = _spec._evaluate(spec[0], spec[1], overload, tuple(args), out)
    st = int(row["status"])
    if st == _core.E_OVERFLOW:
        raise OverflowError("a count does not fit in 64 bits")
    if st != 0:
        raise ValueError(_core.status_str(st))
    return TraceOpCost(name, *(int(row[k]) for k in COUNTS_AND_FLOP_COUNTER),
                       DTYPE_NAMES.get(int(row["dtype"]), "unknown"), overload=overload, kind=entry.kind, status=OK, assumed="; ".join(dict.fromkeys(assumed)))


class _Tensor:
    """What the built-in Python formulas (``roofline._counting._formulas``) read of a tensor: its shape, strides, dtype
    and element size; its device is ``meta``, so a formula that needs the values says so (a trace has none)."""

    __slots__ = ("shape", "dtype", "_stride", "_size")
    is_nested = False
    is_mkldnn = False
    device = type("Device", (), {"type": "meta"})()

    def __init__(self, spec: TensorSpec):
        self.shape, self.dtype, self._stride = spec.shape, spec.dtype, spec.stride()
        self._size = ITEMSIZE[spec.dtype]

    def stride(self):
        return self._stride

    def element_size(self):
        return self._size


def _as_formula_value(v):
    if isinstance(v, TensorSpec):
        return _Tensor(v)
    if isinstance(v, list) and v and all(isinstance(x, TensorSpec) for x in v):
        return [_Tensor(x) for x in v]
    return v


def _evaluate_python(name, overload, formula, key, packet_key, ov, functional, types, dims, strides, concrete,
                     list_dtype):
    """A call of an op with a built-in Python formula, as ``measure`` counts it (``Session.record_formula``)."""
    names = NAMES[key].split()
    codes = dict(_OVERLOADS[packet_key])[ov]
    args, tensors, scalars, assumed = _arguments(names, codes, "python", functional, types, dims, strides, concrete,
                                                 list_dtype)
    a = dict(zip(names, args))
    out = _ops_shapes.results(functional.rpartition("::")[2], "python", a, tensors, scalars)
    if out is None:
        raise NoShape(f"the result shape of {functional} is not derived from its recorded inputs")
    res = formula({k: _as_formula_value(v) for k, v in a.items()},
                  [_as_formula_value(o) if o is not None else None for o in out] if len(out) != 1 else
                  _as_formula_value(out[0]))
    if res is None:
        raise NoShape(f"{functional}'s formula counts this call with the C formula of its kind, which it lacks")
    st = int(res.get("status", 0))
    if st == _formula_base.E_DATA:
        raise NoShape(f"{functional}'s count depends on tensor values, which a trace does not record")
    if st != 0:
        raise ValueError(f"{functional}'s formula cannot count these arguments")
    vals = [int(res.get(k, 0)) for k in COUNTS_AND_FLOP_COUNTER]
    if any(not 0 <= v < 1 << 64 for v in vals):
        raise OverflowError("a count does not fit in 64 bits")
    dtype = tensors[0].dtype if tensors else "unknown"
    return TraceOpCost(name, *vals, dtype, overload=overload, kind="python", status=OK,
                       assumed="; ".join(dict.fromkeys(assumed)))


_SPECS: dict = {}


def _compiled(qualified, ov, entry, sch):
    k = (qualified, ov, id(entry))
    hit = _SPECS.get(k)
    if hit is None:
        spec = _resolve.compile_op(qualified, entry, sch)
        key = tuple(sorted((n, tuple(sorted(v.items())) if isinstance(v, dict) else v) for n, v in spec.items()))
        hit = _SPECS[k] = (key, spec)
    return hit


# ---- which events are counted -------------------------------------------------------------------------------------

def is_composite(name: str, args: dict | None = None) -> bool:
    """Whether the op event ``name`` (with its ``args``, when recorded) is a ``CompositeImplicitAutograd`` overload:
    such a call never reaches a dispatch mode, its parts do. Without recorded argument types an op some of whose
    overloads are composite and some not is judged by its default overload."""
    ns, _, packet = name.partition("::")
    key = packet if ns == "aten" else name
    ovs = _OVERLOADS.get(key)
    if ovs is None:
        return key in _CIA_PACKETS
    types = args.get("Input type") if isinstance(args, dict) else None
    ov = choose_overload(key, types) if isinstance(types, list) else None
    return f"{key}.{ov or ovs[0][0]}" in CIA


_OWN: dict = {}  # name -> whether an event of that name is counted, where no overload has to be chosen


def _own(name, args) -> bool:
    """Whether an event is counted unless an event above it is: an operator that is not composite."""
    hit = _OWN.get(name)
    if hit is None:
        if not isinstance(name, str) or not _OP_NAME.fullmatch(name):
            hit = False
        else:
            ns, _, packet = name.partition("::")
            ovs = _OVERLOADS.get(packet if ns == "aten" else name)
            mixed = ovs is not None and len({f"{packet if ns == 'aten' else name}.{ov}" in CIA
                                             for ov, _ in ovs}) > 1
            if mixed:
                return not is_composite(name, args)
            hit = not is_composite(name, None)
        if len(_OWN) >= 1 << 16:  # a hostile trace's endless names: the cache starts again
            _OWN.clear()
        _OWN[name] = hit
    return hit


def _kernel_composite(name, args) -> bool:
    """Whether the event is a composite overload with a kernel of its own (``KERNEL_CIA``)."""
    if not isinstance(name, str) or not _OP_NAME.fullmatch(name):
        return False
    ns, _, packet = name.partition("::")
    key = packet if ns == "aten" else name
    if not any(k.rpartition(".")[0] == key for k in KERNEL_CIA):
        return False
    types = args.get("Input type") if isinstance(args, dict) else None
    ov = choose_overload(key, types) if isinstance(types, list) else None
    return f"{key}.{ov or 'default'}" in KERNEL_CIA


def counted(names, parents, args=None, ops=None) -> list:
    """Which events of an op tree ``measure`` counts. ``names[i]``: event i's name; ``parents[i]``: the index of its
    parent event (-1 for a root); ``args``: the events' ``args`` dicts (or None), which decide the overload where an
    op's overloads differ in being composite; ``ops``: whether each event is an operator call (the trace's ``cpu_op``
    category), so that an annotation named like an op (``record_function("model::step")``, category
    ``user_annotation``) is not taken for one; by default an event is an operator when its name is ``ns::name``.

    An event is counted when it is an operator (``ns::name``; autograd nodes, module and annotation events are not),
    is not ``CompositeImplicitAutograd`` (:func:`is_composite`), and no event above it is counted: a dispatch mode
    sees the outermost op that reaches it, and what that op's kernel calls runs below it (``aten::copy_`` inside
    ``aten::_to_copy``), while a composite op's parts reach it (``aten::t`` and ``aten::addmm`` inside
    ``aten::linear``). A composite op that also has a kernel of its own and has no operator below it ran that kernel
    (``aten::silu_backward`` in backward, ``aten::_fused_rms_norm`` on CUDA): it is counted itself, where ``measure``
    counts the parts of its decomposition instead. A composite op without a kernel and without parts did nothing
    (``aten::to`` to the tensor's own dtype, ``aten::contiguous`` of a contiguous tensor)."""
    n = len(names)
    if len(parents) != n or (args is not None and len(args) != n) or (ops is not None and len(ops) != n):
        raise ValueError(f"counted: {n} names, {len(parents)} parents" +
                         ("" if args is None else f", {len(args)} args") + ("" if ops is None else f", {len(ops)} ops"))
    is_op = [isinstance(nm, str) and bool(_OP_NAME.fullmatch(nm)) and (ops is None or bool(ops[i]))
             for i, nm in enumerate(names)]
    own = [is_op[i] and _own(nm, args[i] if args is not None else None) for i, nm in enumerate(names)]
    parted = [False] * n  # whether an operator is below the event
    for i, p in enumerate(parents):
        if isinstance(p, int) and 0 <= p < n and is_op[i]:
            parted[p] = True
    for i, nm in enumerate(names):
        if is_op[i] and not own[i] and not parted[i] and _kernel_composite(nm, args[i] if args is not None else None):
            own[i] = True
    covered = [None] * n  # whether an ancestor is counted
    out = [False] * n
    for i in range(n):
        path = []
        j = i
        while j != -1 and covered[j] is None:
            path.append(j)
            p = parents[j]
            if not (-1 <= p < n) or p == j or len(path) > n:
                raise ValueError(f"counted: parent {p} of event {j} is not an event index (or the tree has a cycle)")
            j = p
        above = False if j == -1 else (covered[j] or out[j])
        for k in reversed(path):
            covered[k] = above
            out[k] = own[k] and not above
            above = above or out[k]
    return out


def measure_decomposes(overload: str) -> bool:
    """Whether ``roofline.measure`` counts the parts of ``overload`` (``"aten.native_batch_norm.default"``) instead of
    the op: it has a ``CompositeImplicitAutograd`` kernel in Python only, which a dispatch mode uses while the profiler
    records the C++ kernel that runs without one. The same work, under other names (``native_batch_norm`` becomes
    ``_native_batch_norm_legit``)."""
    ns, _, rest = overload.partition(".")
    return (rest if ns == "aten" else f"{ns}::{rest}") in PY_CIA


# Element types as CUDA/ROCm kernel names spell them in their template arguments, most specific first.
_KERNEL_TYPES = (("c10::BFloat16", "bfloat16"), ("__nv_bfloat16", "bfloat16"), ("__hip_bfloat16", "bfloat16"),
                 ("c10::Half", "float16"), ("__half", "float16"), ("c10::Float8_e4m3fnuz", "float8_e4m3fnuz"),
                 ("c10::Float8_e5m2fnuz", "float8_e5m2fnuz"), ("c10::Float8_e4m3fn", "float8_e4m3fn"),
                 ("c10::Float8_e5m2", "float8_e5m2"), ("c10::complex<float>", "complex64"),
                 ("c10::complex<double>", "complex128"), ("double", "float64"), ("float", "float32"))
_OPAQUE = re.compile(r"OpaqueType<(\d+)u?>")
_BY_SIZE = {1: "uint8", 2: "bfloat16", 4: "float32", 8: "float64", 16: "complex128"}
_TEMPLATE_ARG = re.compile(r"[<,]\s*([\w:]+(?:<[\w:]+>)?)\s*(?=[,>])")


def list_dtype_from_kernels(kernel_names) -> tuple[str | None, bool]:
    """The element dtype of an op's tensor lists, read from the names of the GPU kernels it launched (a trace records
    no dtype for a list): ``(dtype, exact)``. A type named among a kernel's template arguments
    (``BinaryOpListAlphaFunctor<c10::BFloat16, ...>``) is exact; ``OpaqueType<2u>`` (``aten::cat``'s copy kernels)
    gives only the element size, for which a dtype of that size is returned (the bytes are right, the dtype a guess:
    ``exact`` False). ``(None, False)`` when no kernel name says."""
    sized = None
    for name in kernel_names:
        if not isinstance(name, str):
            continue
        args = set(_TEMPLATE_ARG.findall(name))
        for spelled, dt in _KERNEL_TYPES:
            if spelled in args:
                return dt, True
        m = _OPAQUE.search(name)
        if m and sized is None:
            sized = _BY_SIZE.get(int(m.group(1)))
    return sized, False
