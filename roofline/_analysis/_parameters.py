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
"""

from __future__ import annotations

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


def count(model, root: str | None = None) -> dict:
    """The parameter counts of ``model`` (an ``nn.Module``) as JSON data:

    ``total``, ``trainable`` (``requires_grad``), ``frozen`` (the rest) in elements, ``bytes`` (elements x element
    size), ``by_dtype`` (dtype name -> elements), ``tied`` (a list of groups: the names under which one parameter is
    held, when more than one), ``uninitialized`` (names of lazy parameters without a size yet) and ``modules``:
    module name -> ``{"total", "trainable", "frozen", "bytes"}`` of the module's subtree, every module that holds a
    parameter at or below it. Module names are those of a report's module table: ``root`` (default: the model's
    class name) for the model, ``root.path`` below it. TypeError when ``model`` has no ``named_modules``."""
    if not callable(getattr(model, "named_modules", None)):
        raise TypeError(f"parameter counts need an nn.Module, got {type(model).__name__}")
    if root is None:
        root = type(model).__name__
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
