"""Op resolution, shared by ``roofline.measure`` and ``roofline.cost``: an operator's name -> its formula (one added
with :func:`register`, else the registry's) -> compiled against the op's schema into the arguments of
``Recorder.add_op``. Also :func:`register` / :func:`unregister`, which need no torch for ``kind=`` formulas.

The rules written once here: how a name is parsed (:func:`split_name`), which registered formula applies to an
overload (:func:`find`), and how an in-place variant falls back to its functional op
(``_registry.functional_name``, used by :func:`compile_op` and ``_registry.lookup``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from roofline.counting import _registry
from roofline.counting._registry import Entry, FormulaError, Schema
from roofline.util import _ints

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


@dataclass(frozen=True)
class Found:
    """What :func:`find` knows of an op: a Python formula registered for it, or its entry (registered by kind or
    built in), or neither."""

    formula: object = None
    entry: Entry | None = None
    registered: bool = False


def find(qualified: str, overload: str = "") -> Found:
    """The formula for ``qualified`` (``"aten::add"``, ``"mylib::op"``) overload ``overload`` (``""`` or
    ``"default"``: the default one): a registered one for the overload, then for the whole op, then the registry's
    (with its in-place and ``out=`` fallbacks)."""
    if USER:
        ov = overload or "default"
        for key in (f"{qualified}.{ov}", qualified):
            user = USER.get(key)
            if user is not None:
                if isinstance(user, Entry):
                    return Found(entry=user, registered=True)
                return Found(formula=user, registered=True)
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
    """An op resolved against its schema. ``kind``: the kind's name, ``"python"`` (a registered callable, in
    ``formula``) or ``"unknown"`` (no formula, or one that does not fit the schema: ``error`` says why).
    ``spec``: the ``Recorder.add_op`` keyword arguments, None unless a kind was compiled."""

    kind: str
    spec: dict | None = None
    formula: object = None
    entry: Entry | None = None
    registered: bool = False
    error: str | None = None


def resolve(qualified: str, overload: str, schema: Schema) -> Resolved:
    """:func:`find` then :func:`compile_op`; a formula that does not fit the schema is reported in ``error``."""
    f = find(qualified, overload)
    if f.formula is not None:
        return Resolved("python", formula=f.formula, registered=True)
    if f.entry is None:
        return Resolved("unknown")
    try:
        spec = compile_op(qualified, f.entry, schema)
    except FormulaError as e:
        return Resolved("unknown", entry=f.entry, registered=f.registered, error=str(e))
    return Resolved(f.entry.kind, spec=spec, entry=f.entry, registered=f.registered)


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
    (:func:`roofline.util._ints.count`)."""
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
