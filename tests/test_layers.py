"""The package's floors (docs/design.md, "Layers"): each module imports only modules of its own floor or of the
floors below it, the import graph has no cycle (imports inside functions included), and a module imports inside a
function only what ``IMPORTS_IN_FUNCTIONS`` lists: a heavy or optional dependency (torch, matplotlib, ...) or a
roofline module that needs one, kept out of ``import roofline``.

The imports are read from the source with ``ast`` (nothing is imported), so a new upward import fails here before
anything runs it."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "roofline"

# The floors, lowest first. A module belongs to the floor of the longest prefix that names it.
FLOORS = [
    ("extension", ["roofline._core", "roofline.cuda"]),
    ("util", ["roofline.util"]),
    ("model", ["roofline.model"]),
    ("counting and hardware", ["roofline.counting", "roofline.hardware", "roofline.devices"]),
    ("io", ["roofline.io"]),
    ("capture", ["roofline.capture", "roofline.compiled", "roofline.traces"]),
    ("analysis", ["roofline.analysis"]),
    ("render", ["roofline.render", "roofline.plot"]),
    ("report", ["roofline.report"]),
    ("above the report", ["roofline._measure", "roofline._steady", "roofline._schedule", "roofline._monitor", "roofline.distributed", "roofline.llm",
                           "roofline.traces._load", "roofline.traces._ranks"]),
    ("package face", ["roofline"]),
    ("integrations", ["roofline.integrations"]),
    ("command line", ["roofline.cli", "roofline._profile_cmd", "roofline._trace_cmd", "roofline.__main__"]),
]

# Packages that a function may import where it needs them: heavy (torch and what builds on it) or optional extras.
OPTIONAL_PACKAGES = {"torch", "torchvision", "timm", "transformers", "matplotlib", "pandas", "plotly", "IPython",
                     "sympy", "lightning", "pytorch_lightning", "tensorboard", "peft"}

# The roofline modules imported inside a function, and why each must be: (importing module, imported module).
IMPORTS_IN_FUNCTIONS: dict[tuple[str, str], str] = {
    ("roofline._measure", "roofline.capture._torch"): "the dispatch session imports torch: made when a block is",
}


def _floor(module: str) -> int:
    best, where = -1, None
    for i, (_, prefixes) in enumerate(FLOORS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best:
                best, where = len(p), i
    if where is None:
        raise AssertionError(f"{module} is on no floor: add it to FLOORS in tests/test_layers.py and to "
                             f"docs/design.md")
    return where


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_sources() -> dict[str, str]:
    """Module name -> source text of every module of the package."""
    return {_module_name(p): p.read_text(encoding="utf-8") for p in sorted(PACKAGE.rglob("*.py"))}


def imports(module: str, source: str, modules) -> list[tuple[str, bool, int]]:
    """(imported roofline module, inside a function, line) for every import of the package in ``source``; and
    (top-level package name, True, line) for other imports inside functions."""
    return _imports(module, source, frozenset(modules))


@functools.lru_cache(maxsize=None)
def _imports(module: str, source: str, modules: frozenset) -> list[tuple[str, bool, int]]:
    tree = ast.parse(source)
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for a in child.names:
                    found.append((a.name, inside, child.lineno))
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:  # relative: resolve against this module's package
                    pkg = module.split(".") if module in _packages(modules) else module.split(".")[:-1]
                    pkg = pkg[:len(pkg) - (child.level - 1)]
                    base = ".".join(pkg + ([base] if base else []))
                for a in child.names:
                    full = f"{base}.{a.name}"
                    found.append((full if full in modules or full == "roofline._core" else base, inside,
                                  child.lineno))
            visit(child, inside)

    visit(tree, False)
    return found


def _packages(modules) -> set:
    return {m.rsplit(".", 1)[0] for m in modules if "." in m} | {"roofline"}


def check(sources: dict[str, str]) -> list[str]:
    """Every breach of the rules in ``sources`` (module name -> source), as readable lines."""
    problems, graph = [], {m: set() for m in sources}
    for module, source in sources.items():
        here = _floor(module)
        for target, in_function, line in imports(module, source, sources):
            top = target.split(".")[0]
            if top != "roofline":
                if in_function and top not in OPTIONAL_PACKAGES:
                    problems.append(f"{module}:{line} imports {target} inside a function: import it at the top "
                                    f"(only {', '.join(sorted(OPTIONAL_PACKAGES))} may be imported where needed)")
                continue
            if target == module:
                continue
            if target == "roofline":  # the package face: only the command line stands above it
                if here < _floor("roofline"):
                    problems.append(f"{module}:{line} imports the package face `roofline`: import the module "
                                    f"that defines the name")
                continue
            there = _floor(target)
            if there > here:
                problems.append(f"{module}:{line} imports {target}, a floor above it ({FLOORS[here][0]} -> "
                                f"{FLOORS[there][0]})")
            if in_function and (module, target) not in IMPORTS_IN_FUNCTIONS:
                problems.append(f"{module}:{line} imports {target} inside a function: move it to the top, or "
                                f"list it in IMPORTS_IN_FUNCTIONS with the reason")
            if target in graph:
                graph[module].add(target)
    problems += [f"import cycle: {' -> '.join(c)}" for c in _cycles(graph)]
    return problems


def _cycles(graph: dict[str, set]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp) + [sorted(comp)[0]])

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def test_every_module_is_on_a_floor_and_imports_only_downwards():
    problems = check(package_sources())
    assert not problems, "\n".join(problems)


def test_the_allow_list_names_only_imports_that_exist():
    """An entry of IMPORTS_IN_FUNCTIONS whose import is gone is removed, so the list stays the list of such places."""
    sources = package_sources()
    present = {(m, t) for m, s in sources.items() for t, inside, _ in imports(m, s, sources) if inside}
    assert set(IMPORTS_IN_FUNCTIONS) <= present, sorted(set(IMPORTS_IN_FUNCTIONS) - present)


@pytest.mark.parametrize("module, added, expected", [
    # the data model reaching up to the report
    ("roofline.model._records", "from roofline.report import Report\n", "a floor above it (model -> report)"),
    # an analysis importing the text renderer (what closed the old import cycle)
    ("roofline.analysis._hints", "from roofline.render import _render\n", "a floor above it (analysis -> render)"),
    # the same import hidden in a function: still upward, and not on the allow-list
    ("roofline.analysis._rollup", "def f():\n    from roofline.render import _render\n", "inside a function"),
    # a standard-library import inside a function
    ("roofline.report", "def f():\n    import json\n", "imports json inside a function"),
])
def test_an_upward_or_hidden_import_is_caught(module, added, expected):
    sources = package_sources()
    assert not check(sources)
    sources[module] = sources[module] + "\n" + added
    problems = check(sources)
    assert any(expected in p for p in problems), problems


def test_a_cycle_on_one_floor_is_caught():
    """Two modules of one floor may import each other's floor, but not each other in a loop."""
    sources = package_sources()
    sources["roofline.analysis._rollup"] += "\nfrom roofline.analysis import _groups\n"  # _groups imports _rollup
    problems = check(sources)
    assert any(p.startswith("import cycle:") and "roofline.analysis._rollup" in p for p in problems), problems
