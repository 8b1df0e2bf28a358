"""Module paths of FX graph nodes: the ``nn_module_stack`` Dynamo writes on each node, as (root, dotted path) pairs
that name the same modules as the eager module tracker."""

from __future__ import annotations

import re


def module_path(path: str) -> tuple[str, str]:
    """Split an ``nn_module_stack`` path as Dynamo writes it (``"L['self'].layers[0].attn"``,
    ``"L['self']._modules['fc1']"``, ``"getattr(L['self'].layer1, '0').conv1"``) into its root (``"self"``) and
    the dotted path below it (``"layers.0.attn"``)."""
    root, parts = _parse_path(path.strip())
    return root, ".".join(p for p in parts if p not in ("_modules", "_orig_mod"))


def _parse_path(path: str) -> tuple[str, list]:
    if path.startswith("getattr("):
        depth, comma, end = 0, None, None
        for i, ch in enumerate(path[len("getattr("):], len("getattr(")):
            if ch in "([":
                depth += 1
            elif ch in ")]":
                if depth == 0:
                    end = i
                    break
                depth -= 1
            elif ch == "," and depth == 0 and comma is None:
                comma = i
        if comma is None or end is None:
            return "", [path]
        root, parts = _parse_path(path[len("getattr("):comma].strip())
        member = path[comma + 1:end].strip().strip("'\"")
        rest = path[end + 1:]
        return root, parts + [member] + _tokens(rest, 0)
    m = re.match(r"\s*(?:[LG]\[\s*['\"]([^'\"]+)['\"]\s*\]|([A-Za-z_]\w*))", path)
    if not m:
        return "", [path]
    return m.group(1) or m.group(2), _tokens(path, m.end())


def node_chain(node) -> tuple:
    """The ``nn_module_stack`` of a node (a backward node: of the forward node it differentiates) as (key, (root,
    path)) pairs, outermost first; the key tells two calls of modules apart."""
    stack = node.meta.get("nn_module_stack") or node.meta.get("fwd_nn_module_stack") or {}
    out = []
    for key, value in stack.items():
        path = value[0] if isinstance(value, tuple) else str(value)
        out.append((key, module_path(path)))
    return tuple(out)


def node_modules(node) -> tuple:
    return tuple(pair for _key, pair in node_chain(node))


def _tokens(path: str, start: int) -> list:
    return [next(g for g in tok.groups() if g is not None) for tok in _PATH_TOKEN.finditer(path, start)]


_PATH_TOKEN = re.compile(r"\.(\w+)|\[(-?\d+)\]|\[\s*'([^']*)'\s*\]|\[\s*\"([^\"]*)\"\s*\]")
