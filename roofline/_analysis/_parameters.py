"""Parameter counts of a model: total, trainable, frozen, bytes, per dtype and per module, each parameter counted
once however many modules hold it (tied embeddings, shared layers).

:func:`count` is a pure function over an ``nn.Module``, used duck-typed (``named_modules`` and
``named_parameters``; a parameter needs ``numel``, ``element_size``, ``requires_grad`` and ``dtype``), so this
module imports no torch. Its result is JSON data (what a report keeps as ``meta["parameters"]``); :func:`checked`
reads such data back from an untrusted document.

A parameter is one tensor object: two modules holding the same ``Parameter`` (GPT-2's ``lm_head.weight`` is its
``wte.weight``) share it, and it is counted once in the total and once in every module that holds it directly or
below it. This is what ``sum(p.numel() for p in model.parameters())`` counts (``parameters()`` yields each object
once). Each module's figures are those of its subtree. A lazy module's parameter that is not initialised yet has
no size: it is named in ``uninitialized`` and left out of the counts (which are then a lower bound).

A report counts its model's parameters when its block ends, every block: in a training loop measured step after
step that walk (``named_modules``, then ``named_parameters`` of each module) was a large share of what roofline
adds to a step. :func:`count` therefore keeps each model's last counts (beside a fingerprint of everything they
depend on) and returns a copy of them while the fingerprint is unchanged. The fingerprint is one walk in C
(csrc/module_fingerprint.c) over the modules' ``_modules`` and ``_parameters`` dicts, making no Python object per
module or parameter: the tree's shape and names, and for each parameter slot its name, the parameter's identity,
shape, dtype and ``requires_grad``. A
parameter replaced, added or removed, a submodule replaced, added or removed, a parameter frozen or unfrozen, cast
to another dtype, resized (``resize_``, or ``.data`` set to a tensor of another shape) or shared differently changes
it; values written in place (initialisation, an optimizer step) change no count and are not looked at. A module
whose class lists its parameters or submodules its own way (it overrides ``named_parameters`` or
``named_modules``), a parameter without a shape yet (lazy) or a model that cannot be a weak dict key is counted
afresh every time.
"""

from __future__ import annotations

import weakref

from roofline import _core

KEYS = ("total", "trainable", "frozen", "bytes")


def _size(p) -> tuple[int, int] | None:
    """(elements, bytes) of a parameter, or None when it has no size yet (an uninitialised lazy parameter)."""
    try:
        n = int(p.numel())
        return n, n * int(p.element_size())
    except (RuntimeError, ValueError, TypeError, AttributeError, NotImplementedError):
        return None


def _dtype(p) -> str:
    return str(getattr(p, "dtype", "unknown")).replace("torch.", "")


_cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # model -> (root, fingerprint, counts)


def _base(model):
    """torch's ``nn.Module`` among the classes of ``model``, or None (a duck-typed module)."""
    for c in type(model).__mro__:
        if c.__name__ == "Module" and c.__module__ == "torch.nn.modules.module":
            return c
    return None


def fingerprint(model) -> bytes | None:
    """Everything :func:`count`'s result depends on, as bytes to compare with ``==``; None when ``model`` cannot be
    fingerprinted this way (then it is counted afresh).

    ``_core.module_fingerprint`` (csrc/module_fingerprint.c) walks every path of the module tree breadth first, as
    ``named_modules(remove_duplicate=False)`` does, and writes per module the names of its submodule and parameter
    slots with the address of each slot's value (0 for an empty slot: the walk's shape, hence every module's name,
    can be read back), then per parameter its shape, dtype and ``requires_grad``. The addresses of live objects are
    unique, so equal addresses are the same sharing; an address reused by a new parameter after the old one was
    freed leaves the counts equal anyway when shape, dtype and ``requires_grad`` are equal too (counts read nothing
    else). None for a module class that lists its parameters or submodules its own way, a parameter without a shape
    (lazy), or a module that holds itself below it."""
    base = _base(model)
    if base is None:
        return None
    return _core.module_fingerprint(model, base.named_parameters, base.named_modules)


def _copy(counts: dict) -> dict:
    """A copy of :func:`count`'s result that shares no mutable part with it."""
    out = dict(counts)
    out["by_dtype"] = dict(counts["by_dtype"])
    out["tied"] = [list(g) for g in counts["tied"]]
    out["uninitialized"] = list(counts["uninitialized"])
    out["modules"] = {k: dict(v) for k, v in counts["modules"].items()}
    return out


def count(model, root: str | None = None) -> dict:
    """The parameter counts of ``model`` (an ``nn.Module``) as JSON data:

    ``total``, ``trainable`` (``requires_grad``), ``frozen`` (the rest) in elements, ``bytes`` (elements x element
    size), ``by_dtype`` (dtype name -> elements), ``tied`` (a list of groups: the names under which one parameter is
    held, when more than one), ``uninitialized`` (names of lazy parameters without a size yet) and ``modules``:
    module name -> ``{"total", "trainable", "frozen", "bytes"}`` of the module's subtree, every module that holds a
    parameter at or below it. Module names are those of a report's module table: ``root`` (default: the model's
    class name) for the model, ``root.path`` below it. TypeError when ``model`` has no ``named_modules``.

    The last counts of each model are kept while its :func:`fingerprint` is unchanged (see the module's
    docstring); every call returns a fresh copy."""
    if not callable(getattr(model, "named_modules", None)):
        raise TypeError(f"parameter counts need an nn.Module, got {type(model).__name__}")
    if root is None:
        root = type(model).__name__
    fp = fingerprint(model)
    if fp is not None:
        try:
            hit = _cache.get(model)
        except TypeError:  # unhashable (a class defining __eq__ without __hash__): not kept
            hit, fp = None, None
        if hit is not None and hit[0] == root and hit[1] == fp:
            return _copy(hit[2])
    out = _walk(model, root)
    if fp is not None:
        try:
            _cache[model] = (root, fp, _copy(out))
        except TypeError:
            pass
    return out


def _walk(model, root: str) -> dict:
    """:func:`count` without the cache."""
    try:
        mods = list(model.named_modules(remove_duplicate=False))
    except TypeError:  # a duck-typed module without the keyword
        mods = list(model.named_modules())
    params: dict[int, object] = {}   # id -> the parameter (kept alive: ids stay unique)
    names: dict[int, list[str]] = {}
    own: dict[str, set[int]] = {}
    for path, m in mods:
        name = f"{root}.{path}" if path else root
        here = own.setdefault(name, set())
        for pname, p in m.named_parameters(recurse=False):
            if p is None:
                continue
            params.setdefault(id(p), p)
            names.setdefault(id(p), [])
            full = f"{name}.{pname}"
            if full not in names[id(p)]:
                names[id(p)].append(full)
            here.add(id(p))
    sizes = {k: _size(p) for k, p in params.items()}
    trainable = {k: bool(getattr(p, "requires_grad", False)) for k, p in params.items()}

    def figures(ids) -> dict:
        out = dict.fromkeys(KEYS, 0)
        for k in ids:
            s = sizes[k]
            if s is None:
                continue
            out["total"] += s[0]
            out["bytes"] += s[1]
            out["trainable" if trainable[k] else "frozen"] += s[0]
        return out

    # each module's subtree: its own parameters and those of every module whose name extends it
    subtree: dict[str, set[int]] = {}
    for name in sorted(own, key=lambda n: -n.count(".")):  # deepest first: children before their parents
        ids = subtree.setdefault(name, set())
        ids |= own[name]
        if "." in name:
            subtree.setdefault(name.rsplit(".", 1)[0], set()).update(ids)
    out = figures(params)
    by_dtype: dict[str, int] = {}
    for k, p in params.items():
        if sizes[k] is not None:
            by_dtype[_dtype(p)] = by_dtype.get(_dtype(p), 0) + sizes[k][0]
    out["by_dtype"] = dict(sorted(by_dtype.items(), key=lambda kv: -kv[1]))
    out["tied"] = [names[k] for k in params if len(names[k]) > 1]
    out["uninitialized"] = [names[k][0] for k in params if sizes[k] is None]
    out["modules"] = {name: figures(subtree[name]) for name in sorted(subtree) if subtree[name]}
    return out


def _nonneg_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2 ** 63


def checked(d) -> dict | None:
    """``d`` when it is parameter counts as :func:`count` makes them (read from a saved report: every figure a
    non-negative int, trainable + frozen = total, names strings), else None."""
    if not isinstance(d, dict) or not all(_nonneg_int(d.get(k)) for k in KEYS):
        return None
    if d["trainable"] + d["frozen"] != d["total"]:
        return None
    mods = d.get("modules", {})
    if not isinstance(mods, dict):
        return None
    for name, row in mods.items():
        if not isinstance(name, str) or not isinstance(row, dict) or not all(_nonneg_int(row.get(k)) for k in KEYS):
            return None
    for key in ("tied", "uninitialized"):
        v = d.get(key, [])
        if not isinstance(v, list):
            return None
    if not all(isinstance(g, list) and all(isinstance(n, str) for n in g) for g in d.get("tied", [])):
        return None
    if not all(isinstance(n, str) for n in d.get("uninitialized", [])):
        return None
    by_dtype = d.get("by_dtype", {})
    if not isinstance(by_dtype, dict) or not all(isinstance(k, str) and _nonneg_int(v) for k, v in by_dtype.items()):
        return None
    return d


def of_report(report) -> dict | None:
    """The parameter counts a report holds (``meta["parameters"]``), checked; None when it holds none (or
    unreadable ones)."""
    return checked(report.meta.get("parameters"))
