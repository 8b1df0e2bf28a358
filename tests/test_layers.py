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

# static reads of the package's source (its import graph and syntax trees): the same answer on every Python, so CI's
# second-Python run leaves them to the first (tests/conftest.py)
pytestmark = pytest.mark.python_independent

PACKAGE = Path(__file__).resolve().parent.parent / "roofline"

# The floors, lowest first. A module belongs to the floor of the longest prefix that names it.
FLOORS = [
    ("extension", ["roofline._core", "roofline.cuda"]),
    ("util", ["roofline._util"]),
    ("data model", ["roofline._datamodel"]),
    ("counting and hardware", ["roofline._counting", "roofline._hardware"]),
    ("io", ["roofline._io"]),
    ("capture", ["roofline._capture", "roofline._compiled", "roofline._traces"]),
    ("analysis", ["roofline._analysis"]),
    ("render", ["roofline.render", "roofline.plot"]),
    ("report", ["roofline.report"]),
    ("above the report", ["roofline._measure", "roofline._loops", "roofline.distributed", "roofline.llm",
                           "roofline._traces._load", "roofline._traces._ranks"]),
    ("package face", ["roofline", "roofline.devices"]),
    ("integrations", ["roofline.integrations"]),
    ("command line", ["roofline.cli", "roofline._profile_cmd", "roofline._trace_cmd", "roofline.__main__"]),
]

# Packages that a function may import where it needs them: heavy (torch and what builds on it) or optional extras.
OPTIONAL_PACKAGES = {"torch", "torchvision", "timm", "transformers", "matplotlib", "pandas", "plotly", "IPython",
                     "sympy", "lightning", "pytorch_lightning", "tensorboard", "peft"}

# The roofline modules imported inside a function, and why each must be: (importing module, imported module).
IMPORTS_IN_FUNCTIONS: dict[tuple[str, str], str] = {
    ("roofline._measure", "roofline._capture._session"): "the dispatch session imports torch: made when a block is",
    ("roofline._loops._steady", "roofline._capture._session"): "its device synchronisation, for steady(plain=True)'s "
                                                              "steps outside any block: the session imports torch",
    ("roofline", "roofline._traces._load"): "the trace reader (some 30 ms of imports): loaded by roofline.load_trace",
    ("roofline", "roofline._traces._ranks"): "the rank-directory reader, installed into load_trace with it",
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
    ("roofline._datamodel._records", "from roofline.report import Report\n", "a floor above it (data model -> report)"),
    # an analysis importing the text renderer (what closed the old import cycle)
    ("roofline._analysis._hints", "from roofline.render import _render\n", "a floor above it (analysis -> render)"),
    # the same import hidden in a function: still upward, and not on the allow-list
    ("roofline._analysis._rollup", "def f():\n    from roofline.render import _render\n", "inside a function"),
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
    sources["roofline._analysis._rollup"] += "\nfrom roofline._analysis import _groups\n"  # _groups imports _rollup
    problems = check(sources)
    assert any(p.startswith("import cycle:") and "roofline._analysis._rollup" in p for p in problems), problems


# ---- who writes views, who measures (docs/design.md, "Layers") ------------------------------------------------------
# The hardware modules that hold figures and measure nothing: the data model of ceilings, a report's roofs, the
# interconnect figure measured earlier in this process, the datasheet table (roofline.devices). Every other hardware module measures the machine (or chooses
# ceilings, which may measure): roofline._hardware._ceilings (the entry point), _cpu_bench, _cpu_info, _sweep,
# _cpu_contention, _yardstick, _ceilings_cache, _gpu, _contention, _choose.
HARDWARE_DATA = {"roofline._hardware._ceilings_model", "roofline._hardware._roofs", "roofline._hardware._interconnect",
                 "roofline._hardware._devices"}

# The number formatters of roofline._util._format: what writes a figure for a reader.
FORMATTERS = {"fmt", "dur", "ms", "pct", "cell"}

# Modules outside roofline/render/ that still format figures into text, and why each may.
TEXT_OUTSIDE_RENDER: dict[str, str] = {
    "roofline._profile_cmd": "the command line prints what it does",
    "roofline._trace_cmd": "the command line prints what it does",
    "roofline._hardware._cpu_bench": "progress lines while the benchmarks run",
}

# Names of number formatters a module might define for itself (with or without a leading underscore).
OWN_FORMATTERS = FORMATTERS | {"human", "scale", "fmt_row", "format_number", "si"}

# An object's own text: a method of these names that formats a figure (an f-string format spec) builds a view.
TEXT_METHODS = {"__repr__", "__str__", "__format__"}

VIEW_PACKAGES = {"html", "matplotlib", "plotly", "pandas"}
_TAG = __import__("re").compile(r"<(div|svg|table|tr|td|th|li|ul|span|details|summary|text|circle|line|b)[ >/]")


@functools.lru_cache(maxsize=None)
def _tree(source: str) -> ast.Module:
    return ast.parse(source)


@functools.lru_cache(maxsize=None)
def _strings_of(source: str) -> tuple:
    return tuple(_strings(source))


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


@functools.lru_cache(maxsize=None)
def _imported_names(module: str, source: str) -> list[tuple[str, str, int]]:
    """(module imported from, name, line) of every ``from X import name`` in ``source``, relative imports resolved."""
    out = []
    for node in ast.walk(_tree(source)):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = module.split(".")[:-1][:len(module.split(".")) - node.level]
                base = ".".join(pkg + ([base] if base else []))
            out += [(base, a.name, node.lineno) for a in node.names]
    return out


def _strings(source: str):
    """(line, text) of the string constants of ``source`` that are not docstrings."""
    tree = _tree(source)
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body and \
                isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant):
            docs.add(id(node.body[0].value))
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def view_problems(sources: dict[str, str]) -> list[str]:
    """Every module outside roofline/render/ that builds a view: imports a view library (html, matplotlib, plotly,
    pandas), holds an HTML tag, or formats figures with the number formatters (TEXT_OUTSIDE_RENDER excepted)."""
    problems = []
    for module, source in sources.items():
        if _in(module, "roofline.render") or _in(module, "roofline._util._format"):
            continue
        for target, _inside, line in imports(module, source, sources):
            if target.split(".")[0] in VIEW_PACKAGES:
                problems.append(f"{module}:{line} imports {target}: a view, which belongs in roofline/render/")
        for line, text in _strings_of(source):
            if _TAG.search(text):
                problems.append(f"{module}:{line} writes HTML ({text[:40]!r}): a view, which belongs in "
                                "roofline/render/")
        if module not in TEXT_OUTSIDE_RENDER:
            for base, name, line in _imported_names(module, source):
                if base == "roofline._util._format" and name in FORMATTERS:
                    problems.append(f"{module}:{line} imports the formatter {name}: it writes a view, which "
                                    "belongs in roofline/render/")
        for node in ast.walk(_tree(source)):  # one number formatter: roofline._util._format's
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.lstrip("_") in OWN_FORMATTERS:
                problems.append(f"{module}:{node.lineno} defines its own number formatter {node.name}: use "
                                "roofline._util._format")
        for cls in ast.walk(_tree(source)):  # an object's text (repr, str) is a view too: written in render/
            if not isinstance(cls, ast.ClassDef):
                continue
            for fn in cls.body:
                if isinstance(fn, ast.FunctionDef) and fn.name in TEXT_METHODS and any(
                        isinstance(n, ast.FormattedValue) and n.format_spec is not None for n in ast.walk(fn)):
                    problems.append(f"{module}:{fn.lineno} {cls.name}.{fn.name} formats its own figures: a view, "
                                    "which belongs in roofline/render/ (delegate to it)")
    return problems


def _ceilings_lookups(source: str):
    """(line, name) of every call that looks a figure up in a Ceilings rather than in a report's roofs:
    ``c.resolve_peak(...)``, ``c.bandwidth(level, source)``, ``c.peak(unit, dtype, source)`` (the roofs' own
    ``bandwidth(level)`` and ``peak(unit, dtype)`` take no source)."""
    for node in ast.walk(_tree(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name, n_args = node.func.attr, len(node.args) + len(node.keywords)
            if name == "resolve_peak" or (name == "bandwidth" and n_args >= 2) or (name == "peak" and n_args >= 3):
                yield node.lineno, name


def analysis_problems(sources: dict[str, str]) -> list[str]:
    """Every analysis module that imports the render floor, writes HTML or text, imports a hardware module that
    measures (HARDWARE_DATA excepted), or looks a figure up in the ceilings instead of the report's roofs."""
    problems = []
    for module, source in sources.items():
        if not _in(module, "roofline._analysis"):
            continue
        for target, _inside, line in imports(module, source, sources):
            if _in(target, "roofline.render"):
                problems.append(f"{module}:{line} imports {target}: analysis returns data, render writes it")
            if target == "html":
                problems.append(f"{module}:{line} imports html: analysis writes no HTML")
            if _in(target, "roofline._hardware") and target not in HARDWARE_DATA and target != "roofline._hardware":
                problems.append(f"{module}:{line} imports {target}, which measures the machine: analysis reads "
                                "the report's roofs (roofline._hardware._roofs) and never measures")
        if module not in TEXT_OUTSIDE_RENDER:
            for base, name, line in _imported_names(module, source):
                if base == "roofline._util._format" and name in FORMATTERS:
                    problems.append(f"{module}:{line} imports the formatter {name}: analysis writes no text")
        for line, name in _ceilings_lookups(source):
            problems.append(f"{module}:{line} looks a figure up in the ceilings ({name}): read the report's roofs "
                            "(roofline._hardware._roofs), chosen once for the report")
    return problems


def render_problems(sources: dict[str, str]) -> list[str]:
    """Every render module that imports a hardware module that measures, or looks a figure up in a report's
    Ceilings instead of its roofs (``c.bandwidth(level, source)``, ``c.resolve_peak(...)``, ``c.peak(u, d,
    source)``): a chart reads the roofs chosen once for the report."""
    problems = []
    for module, source in sources.items():
        if not (_in(module, "roofline.render") or module == "roofline.plot"):
            continue
        for target, _inside, line in imports(module, source, sources):
            if _in(target, "roofline._hardware") and target not in HARDWARE_DATA and target != "roofline._hardware":
                problems.append(f"{module}:{line} imports {target}, which measures the machine")
        for line, name in _ceilings_lookups(source):
            problems.append(f"{module}:{line} looks a figure up in the ceilings ({name}): read report.roofs")
    return problems


def test_analysis_imports_no_render_writes_no_view_and_never_measures():
    problems = analysis_problems(package_sources())
    assert not problems, "\n".join(problems)


def test_render_reads_the_roofs_and_imports_no_measurement():
    problems = render_problems(package_sources())
    assert not problems, "\n".join(problems)


def test_no_module_outside_render_builds_a_view():
    problems = view_problems(package_sources())
    assert not problems, "\n".join(problems)


def test_the_text_allow_list_names_only_modules_that_format():
    """An entry of TEXT_OUTSIDE_RENDER whose module no longer formats is removed, so the list stays the list of
    views still written outside roofline/render/."""
    sources = package_sources()
    formatting = {m for m, s in sources.items()
                  if any(b == "roofline._util._format" and n in FORMATTERS for b, n, _ in _imported_names(m, s))}
    assert set(TEXT_OUTSIDE_RENDER) <= formatting, sorted(set(TEXT_OUTSIDE_RENDER) - formatting)


@pytest.mark.parametrize("module, added, check_fn, expected", [
    ("roofline._analysis._rollup", "import html\n", "analysis", "analysis writes no HTML"),
    ("roofline._analysis._rollup", "from roofline._util._format import fmt\n", "analysis", "analysis writes no text"),
    ("roofline._analysis._rollup", "from roofline._hardware import _ceilings\n", "analysis", "measures the machine"),
    ("roofline._analysis._groups", "from roofline._hardware._cpu_bench import cpu_benchmarks\n", "analysis",
     "measures the machine"),
    ("roofline._analysis._assumptions", "def f(c):\n    return c.resolve_peak('vector', 'float32', 'best')\n",
     "analysis", "read the report's roofs"),
    ("roofline._analysis._cache_model", "def f(c):\n    return c.bandwidth('L2', 'measured')\n", "analysis",
     "read the report's roofs"),
    ("roofline.render._chart", "from roofline._hardware import _choose\n", "render", "measures the machine"),
    ("roofline.render._svg", "def f(c):\n    return c.bandwidth('DRAM', 'best')\n", "render", "read report.roofs"),
    ("roofline.report", "def f():\n    import matplotlib\n", "view", "a view, which belongs in roofline/render/"),
    ("roofline.report", "X = '<div class=\"x\">'\n", "view", "writes HTML"),
    ("roofline._hardware._ceilings_model", "from roofline._util._format import fmt\n", "view", "formatter fmt"),
    ("roofline._hardware._ceilings_model", "def _human(n):\n    return f'{n} B'\n", "view", "own number formatter"),
    ("roofline._hardware._ceilings_model", "class C:\n    def __repr__(self):\n        return f'{self.v / 1e9:.1f} GB/s'\n",
     "view", "formats its own figures"),
])
def test_a_view_or_a_measurement_in_the_wrong_floor_is_caught(module, added, check_fn, expected):
    fn = {"analysis": analysis_problems, "render": render_problems, "view": view_problems}[check_fn]
    sources = package_sources()
    assert not fn(sources)
    sources[module] = sources[module] + "\n" + added
    assert any(expected in p for p in fn(sources)), fn(sources)
