"""Op resolution, shared by ``roofline.measure``, ``roofline.cost`` and the trace reader: an operator's name -> its
formula -> compiled against the op's schema into the arguments of ``Recorder.add_op``, or a :class:`Formula` computed
in Python. Also :func:`register` / :func:`unregister`, which need no torch for ``kind=`` formulas, and
:func:`scoped_formulas`, the check of ``measure(formulas=...)``.

The rules written once here: how a name is parsed (:func:`split_name`), which formula applies to an overload
(:func:`find`: one scoped to the block, then one registered, then the built-in ones), how an in-place variant falls
back to its functional op (``_registry.functional_name``, used by :func:`compile_op` and ``_registry.lookup``), and
how a Python formula is called and its counts checked (:class:`Formula`: one calling convention for the formulas of
users, the built-in Python formulas and those of higher-order operators). The block's side (its op table, the
decomposition rule, the recorder entries) is ``roofline._capture._optable``.
"""

from __future__ import annotations

import operator
import os
import re
from dataclasses import dataclass

from roofline._counting import _formula_base, _formulas, _registry
from roofline._counting._registry import Entry, FormulaError, Schema
from roofline._datamodel._records import COUNTS
from roofline._util import _ints

USER = _registry.USER  # formulas added with register(): qualified name [".overload"] -> Entry or callable


def split_name(op) -> tuple[str, str]:
    """``'aten::add.Tensor'`` / ``'aten.add.Tensor'`` / ``'add'`` -> ``('aten::add', 'Tensor')``; the default overload
    is ``''``."""
    s = str(op)
    if "::" in s:
        ns, _, rest = s.partition("::")
    elif s.startswith("aten."):
        ns, rest = "aten", s[len("aten."):]
    else:
        ns, rest = "aten", s
    name, _, overload = rest.partition(".")
    return f"{ns}::{name}", ("" if overload == "default" else overload)


COUNT_KEYS = COUNTS
_MAX_COUNT = (1 << 64) - 1  # the records hold unsigned 64-bit counts


class Formula:
    """A cost formula computed in Python, called one way wherever it comes from: :meth:`counts` takes the op's
    positional arguments, keyword arguments and result, and returns the record's counts ``(matrix_flops,
    vector_flops, special_ops, bytes_read, bytes_written, flop_counter_flops, status)``, or None where the op's C
    formula counts the call.

    ``source`` says how ``fn`` is called: ``"user"`` (``roofline.register(formula=)`` or ``measure(formulas=)``):
    ``fn(*args, out=result, **kwargs)`` returns a :class:`roofline.Cost` or a dict of the five counts, its exceptions
    propagate, and a count that is not an int in 0 .. 2**64 - 1 raises; ``"builtin"`` (``_formulas.OPS``):
    ``fn(arguments bound to the schema's names, result)``; ``"hop"`` (``_formulas.HOPS``): ``fn(args, kwargs,
    result)``. A built-in formula returns the counts with ``flop_counter_flops`` and ``status``, or None; arguments it
    cannot count (any exception) give an error record (status ``E_ARGS``), never a failed step
    (``ROOFLINE_DEBUG=1`` raises instead)."""

    __slots__ = ("fn", "source", "names")

    def __init__(self, fn, source: str, names=None):
        self.fn, self.source, self.names = fn, source, names

    def counts(self, op: str, args, kwargs, out):
        if self.source == "user":
            return _user_counts(op, self.fn(*args, **{**kwargs, "out": out}))  # an out= overload's own `out` too
        try:
            if self.source == "hop":
                res = self.fn(args, kwargs, out)
            else:
                res = self.fn(_formulas.bind(self.names, args, kwargs), out)
        except (ValueError, IndexError):  # arguments the formula cannot count: an error record, never a guess
            res = {"status": _formula_base.E_ARGS}
        except Exception:  # noqa: BLE001 - inputs a built-in formula did not foresee: an error record (r.errors)
            if os.environ.get("ROOFLINE_DEBUG"):
                raise
            res = {"status": _formula_base.E_ARGS}
        if res is None:
            return None
        return (*(count(op, k, res.get(k, 0)) for k in COUNT_KEYS + ("flop_counter_flops",)),
                int(res.get("status", 0)))

    def __repr__(self):
        return f"Formula({self.fn!r}, {self.source!r})"


def _is_cost(res) -> bool:
    """``isinstance(res, roofline.Cost)``, without importing ``roofline._counting._cost`` (which imports this)."""
    return any(c.__name__ == "Cost" and c.__module__ == "roofline._counting._cost" for c in type(res).__mro__)


def _user_counts(op: str, res) -> tuple:
    if _is_cost(res):
        res = {k: getattr(res, k) for k in COUNT_KEYS}
    elif isinstance(res, dict):
        unknown = set(res) - set(COUNT_KEYS)
        if unknown:
            raise ValueError(f"roofline formula for {op} returned unknown keys {sorted(map(str, unknown))}")
    else:
        raise TypeError(f"roofline formula for {op} must return a dict or roofline.Cost, got {type(res).__name__}")
    return (*(count(op, k, res.get(k, 0)) for k in COUNT_KEYS), 0, 0)


def count(op: str, key: str, value) -> int:
    """One count returned by a formula, checked: an int (a float would be truncated, a bool is a mistake), >= 0, and
    small enough for the record's 64-bit field (never stored modulo 2**64)."""
    try:
        if isinstance(value, bool):
            raise TypeError
        n = operator.index(value)
    except TypeError:
        raise TypeError(f"roofline formula for {op} returned {key}={value!r} ({type(value).__name__}); counts must "
                        "be ints") from None
    if n < 0:
        raise ValueError(f"roofline formula for {op} returned a negative count: {key}={n}")
    if n > _MAX_COUNT:
        raise OverflowError(f"roofline formula for {op} returned {key}={n}, which does not fit 64 bits")
    return n


def builtin_formula(qualified: str, names) -> Formula | None:
    """The built-in Python formula of an op (roofline/_counting/_formulas.py), called with ``names`` (the schema's
    argument names), or None."""
    fn = _formulas.OPS.get(qualified)
    return None if fn is None else Formula(fn, "builtin", tuple(names))


def hop_formula(name: str) -> Formula | None:
    """The built-in formula of a higher-order operator (FlexAttention, ``out_dtype``), or None."""
    fn = _formulas.HOPS.get(name)
    return None if fn is None else Formula(fn, "hop")


@dataclass(frozen=True)
class Found:
    """What :func:`find` knows of an op: a Python formula (a :class:`Formula` of the user's) for it, or its entry
    (registered by kind or built in), or neither. ``scoped``: the formula is the block's (``measure(formulas=)``)."""

    formula: Formula | None = None
    entry: Entry | None = None
    registered: bool = False
    scoped: bool = False


def find(qualified: str, overload: str = "", scoped=None) -> Found:
    """The formula for ``qualified`` (``"aten::add"``, ``"mylib::op"``) overload ``overload`` (``""`` or
    ``"default"``: the default one): one of ``scoped`` (the block's, from :func:`scoped_formulas`) for the overload,
    then for the whole op; then a registered one, likewise; then the registry's (with its in-place and ``out=``
    fallbacks)."""
    ov = overload or "default"
    if scoped:
        for key in (f"{qualified}.{ov}", qualified):
            f = scoped.get(key)
            if f is not None:
                return Found(formula=f, registered=True, scoped=True)
    if USER:
        for key in (f"{qualified}.{ov}", qualified):
            user = USER.get(key)
            if user is not None:
                if isinstance(user, Entry):
                    return Found(entry=user, registered=True)
                return Found(formula=Formula(user, "user"), registered=True)
    return Found(entry=_registry.lookup(qualified, "" if overload == "default" else overload))


def compile_op(qualified: str, entry: Entry, schema: Schema) -> dict:
    """``Recorder.add_op`` keyword arguments (kind, params, masks, flags) of ``entry`` for an op with ``schema``.
    An in-place variant (``add_``) is compiled as its functional op for FlopCounterMode's list; the schema says which
    arguments it writes. Raises :class:`FormulaError` when the schema lacks an argument the formula needs."""
    ns, _, short = qualified.partition("::")
    packet = short if ns == "aten" else qualified
    return _registry.compile_entry(entry, _registry.functional_name(packet), schema.names, schema.written,
                                   schema.outs)


@dataclass(frozen=True)
class Resolved:
    """An op resolved against its schema. ``kind``: the kind's name, ``"python"`` (a user's :class:`Formula`, in
    ``formula``) or ``"unknown"`` (no formula, or one that does not fit the schema: ``error`` says why).
    ``spec``: the ``Recorder.add_op`` keyword arguments, None unless a kind was compiled. The op's built-in Python
    formula, if any, is looked up apart (:func:`builtin_formula`): a block's op table keeps resolutions, not it."""

    kind: str
    spec: dict | None = None
    formula: Formula | None = None
    entry: Entry | None = None
    registered: bool = False
    error: str | None = None
    scoped: bool = False


def resolve(qualified: str, overload: str, schema: Schema, scoped=None) -> Resolved:
    """:func:`find` then :func:`compile_op`; a formula that does not fit the schema is reported in ``error``."""
    f = find(qualified, overload, scoped)
    if f.formula is not None:
        return Resolved("python", formula=f.formula, registered=True, scoped=f.scoped)
    if f.entry is None:
        return Resolved("unknown")
    try:
        spec = compile_op(qualified, f.entry, schema)
    except FormulaError as e:
        return Resolved("unknown", entry=f.entry, registered=f.registered, error=str(e))
    return Resolved(f.entry.kind, spec=spec, entry=f.entry, registered=f.registered)


def scoped_formulas(formulas) -> dict:
    """``measure(formulas=...)`` checked at the call: a dict ``{op: callable}`` (``op`` as :func:`register` takes
    it: an ``OpOverload``, an ``OpOverloadPacket`` or a name) -> ``{key: Formula}``. TypeError naming what is wrong
    (not a dict, a key that is no op, a value that is not callable); ValueError for a name that is no operator name or
    an op given twice (as a packet and by name, say)."""
    if formulas is None:
        return {}
    if not isinstance(formulas, dict):
        raise TypeError(f"measure: formulas must be a dict {{op: formula}}, got {type(formulas).__name__}")
    out = {}
    for op, fn in formulas.items():
        if not isinstance(op, str) and not any(c.__module__ == "torch._ops" and c.__name__ in (
                "OpOverload", "OpOverloadPacket") for c in type(op).__mro__):
            raise TypeError(f"measure: formulas keys must be torch ops (torch.ops.aten.mm.default, "
                            f"torch.ops.mylib.op) or their names (\"mylib::op\"), got {type(op).__name__} {op!r}")
        key = _op_key(op, "measure(formulas=...)")
        if not callable(fn):
            raise TypeError(f"measure: formulas[{key}] must be callable (a formula(*args, out=..., **kwargs) "
                            f"returning a roofline.Cost or a dict of counts), got {type(fn).__name__}")
        if key in out:
            raise ValueError(f"measure: formulas names {key} twice")
        out[key] = Formula(fn, "user")
    return out


# ---- register / unregister ----------------------------------------------------------------------------------------

# Kinds a user may register by name: their parameters need no positions from a schema roofline knows.
REGISTRABLE = frozenset(name for name, k in _registry.KINDS.items() if not k.needs_schema)
# Of those, the kinds whose flops/special are counts per element (of the result, the first tensor, the first list).
PER_ELEMENT = frozenset(name for name in REGISTRABLE if "flops" in _registry.KINDS[name].param_names)
_MAX_PER_ELEMENT = (1 << 63) - 1  # the C parameters are int64 (rl_op.param in csrc/cost.h)


def register(op, formula=None, *, kind=None, flops=0, special=0):
    """See ``roofline.register``. A ``kind=`` formula needs no torch; a ``formula=`` callable runs inside
    ``measure`` and so needs torch."""
    key = _op_key(op)
    if (formula is None) == (kind is None):
        raise TypeError(f"register({key}): pass exactly one of formula= (a callable) or kind= (a built-in formula "
                        "name)")
    if formula is not None:
        if not callable(formula):
            raise TypeError(f"register({key}): formula must be callable, got {type(formula).__name__}")
        if _per_element_count(key, "flops", flops) or _per_element_count(key, "special", special):
            raise TypeError(f"register({key}): flops= and special= go with kind=; a formula= returns its own counts")
        try:
            import torch  # noqa: F401  (the formula runs inside measure())
        except ImportError:
            raise ImportError(f"register({key}): a formula= callable runs on real tensors inside roofline.measure(), "
                              "which needs torch (not installed); without torch register a built-in kind= formula, "
                              "which roofline.cost() evaluates") from None
        entry = formula
    else:
        if not isinstance(kind, str):
            raise TypeError(f"register({key}): kind must be a str (one of {sorted(REGISTRABLE)}), "
                            f"got {type(kind).__name__}")
        if kind not in _registry.KINDS:
            raise ValueError(f"register({key}): unknown kind {kind!r}; choose from {sorted(REGISTRABLE)}")
        if kind not in REGISTRABLE:
            raise ValueError(f"register({key}): kind {kind!r} needs argument positions from a schema it knows; "
                             f"register a formula= callable instead, or one of {sorted(REGISTRABLE)}")
        counts = []
        for name, value in (("flops", flops), ("special", special)):
            n = _per_element_count(key, name, value)
            if n and kind not in PER_ELEMENT:
                raise ValueError(f"register({key}): kind {kind!r} takes no {name}= (only "
                                 f"{', '.join(sorted(PER_ELEMENT))} count per element); got {name}={n}")
            counts.append(n)
        entry = Entry(kind, counts[0], counts[1])
    if key in USER:
        raise ValueError(f"a formula for {key} is already registered; call roofline.unregister({key!r}) first")
    USER[key] = entry


def _per_element_count(key: str, name: str, value) -> int:
    """``value`` as a per-element count for the C op table: an int (bool and float refused: 2.7 FLOPs per element
    cannot be stored, and truncating it would be a silently wrong count) in 0 .. 2**63-1, by the package's one rule
    (:func:`roofline._util._ints.count`)."""
    return _ints.count(value, name, f"register({key})", 0, _MAX_PER_ELEMENT)


def unregister(op) -> None:
    """Remove a formula added with :func:`register` (KeyError if there is none)."""
    key = _op_key(op, "unregister")
    if key not in USER:
        raise KeyError(f"no formula registered for {key}")
    del USER[key]


def _op_key(op, what: str = "register") -> str:
    """The key a formula is registered under: ``"ns::op"`` for a whole op, ``"ns::op.overload"`` for one overload.
    Torch op objects are recognised by type name, so that a name needs no torch."""
    torch_types = {c.__name__ for c in type(op).__mro__ if c.__module__ == "torch._ops"}
    if "OpOverload" in torch_types:
        return f"{op._schema.name}.{op._overloadname}"
    if "OpOverloadPacket" in torch_types:
        return op._qualified_op_name
    if isinstance(op, str):
        qualified, overload = split_name(op)
        if not _OP_NAME.fullmatch(qualified) or not _OVERLOAD.fullmatch(overload):
            raise ValueError(f"{what}: {op!r} is not an operator name (\"mylib::op\", \"mylib::op.overload\", "
                             "or an aten name such as \"gelu\")")
        return f"{qualified}.{overload}" if overload else qualified
    raise TypeError(f"{what}: op must be a torch op or its name, got {type(op).__name__}")


_OP_NAME = re.compile(r"[A-Za-z_]\w*::[A-Za-z_]\w*")
_OVERLOAD = re.compile(r"\w*")
