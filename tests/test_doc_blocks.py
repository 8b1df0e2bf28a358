"""Every piece of code the documentation shows still names things that exist: each code block of README.md and
docs/*.md (```python, ```pycon and the ``python -c`` / ``python -m`` / script lines of ```bash blocks, GPU-only
blocks marked ``skip-test`` included), each inline code span that is code (``python -c "..."``, an import), each
docstring of the package (``>>>`` examples, ``python -c`` spans), and each dotted name ``roofline.x.y``, file path
(``roofline/_util/_format.py``, ``bench/overhead.py``) or ``_module.name`` reference they contain.

Checked without running the blocks (tests/test_doc_snippets.py runs every ```python block of the docs, and this test
runs the docstrings' ``>>>`` examples not marked ``+SKIP``): each block is compiled; each ``import`` of roofline is
imported and each name imported ``from`` it must exist; a module of another package must be installed (found, not
imported: the trainers' packages are slow to import); each ``roofline.x.y`` chain, in code or prose, must resolve
(modules imported, then attributes, as long as they are modules or classes); a ``_name.attr`` reference whose
``_name`` is the basename of one module of the package must name an attribute of it.

A broken import in a snippet that never runs (a GPU-only block, a shell line in prose, a docstring) fails here.
"""

from __future__ import annotations

import ast
import doctest
import importlib
import importlib.util
import re
import sys
from functools import lru_cache
from pathlib import Path

import pytest

import roofline

# the docs import torch, torchvision and the trainers' packages: checked where they are installed (the torch-free run
# of the suite on a second Python skips this file)
pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PACKAGE = ROOT / "roofline"

FENCE = re.compile(r"^```(\w*)\s*$")
INLINE = re.compile(r"(?<!`)``?(?!`)([^`\n]+?)(?<!`)``?(?!`)")
DOTTED = re.compile(r"(?<![\w./-])roofline(?:\.[A-Za-z_]\w*)+")
PATH = re.compile(r"(?<![\w./-])((?:roofline|tests|bench|docs|csrc|cuda|notebooks)/[\w./<>*-]*[\w/>])")
SHORT = re.compile(r"(?<![\w./])(_[a-z]\w*)\.(?!(?:py|pyi|c|h|md|so|json)\b)([A-Za-z_]\w*)(?![\w<])")
PYTHON_C = re.compile(r"""python3?\s+-c\s+(?:"((?:[^"\\]|\\.)*)"|'([^']*)')""")
PYTHON_M = re.compile(r"python3?\s+-m\s+([\w.]+)")
SCRIPT = re.compile(r"(?:python3?|bash|sh)\s+((?:bench|docs|tests|\.ci)/[\w./-]+)")
PLACEHOLDER = re.compile(r"<[^>]*>|\.\.\.")
FILE_SUFFIXES = {"png", "svg", "html", "json", "csv", "pdf", "txt", "md", "py", "so", "jpg", "gz", "zip", "log"}
# names that look like paths and are not: the trainers' logged scalars (roofline/profile/mfu, roofline/monitor/mfu)
NOT_PATHS = ("roofline/profile/", "roofline/monitor/")
# a module of the package importing one of these at its top is slow to import: unless something imported it
# already, its names are read from its source instead
HEAVY = {"torch", "transformers", "lightning", "pytorch_lightning", "matplotlib", "pandas", "plotly"}


# ---- what the documentation holds ----------------------------------------------------------------------------------
def _md_pieces(path: Path):
    """(where, kind, text) of ``path``: kind "python" (a block or pycon block, as code), "shell" (a shell block),
    "prose" (everything else, inline code included)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    rel = path.relative_to(ROOT).as_posix()
    out, prose, i = [], [], 0
    while i < len(lines):
        m = FENCE.match(lines[i].strip())
        if not m:
            prose.append((i + 1, lines[i]))
            i += 1
            continue
        lang, start = m.group(1), i
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        body = lines[start + 1:j]
        where = f"{rel}:{start + 1}"
        if lang == "python":
            out.append((where, "python", "\n".join(body) + "\n"))
        elif lang == "pycon":
            out.append((where, "python", _pycon("\n".join(body))))
        elif lang in ("bash", "sh", "shell", "console"):
            out.append((where, "shell", "\n".join(body)))
        i = j + 1
    for n, line in prose:
        out.append((f"{rel}:{n}", "prose", line))
    return out


def _pycon(text: str) -> str:
    """The code of a ``>>>`` session (prompts removed, output lines dropped)."""
    code = [line[4:] for line in text.splitlines() if line.startswith((">>> ", "... ")) or line in (">>>", "...")]
    return "\n".join(code) + "\n"


def _docstrings():
    """(where, docstring) of every module, class and function of the package, read with ``ast``."""
    for rel, tree in _trees():
        todo = [tree]
        while todo:  # statements only: the generated tables' huge literals are not walked
            node = todo.pop()
            doc = ast.get_docstring(node, clean=True)
            if doc:
                yield f"{rel}:{getattr(node, 'lineno', 1)}", doc
            for child in node.body:
                if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                    todo.append(child)
                elif (isinstance(child, ast.Assign) and isinstance(child.value, ast.Constant)
                      and isinstance(child.value.value, str)
                      and any(isinstance(t, ast.Attribute) and t.attr == "__doc__" for t in child.targets)):
                    yield f"{rel}:{child.lineno}", child.value.value  # `register.__doc__ = """..."""`


@lru_cache(maxsize=None)
def _trees() -> tuple:
    """(path relative to the repository, ast) of every module of the package; of a generated table ("do not edit"
    in its docstring), only its docstring is parsed (its literals take most of the parsing time)."""
    out = []
    for p in sorted(PACKAGE.rglob("*.py")):
        text = p.read_text(encoding="utf-8")
        if "do not edit" in text[:1000]:
            m = re.match(r'\s*("""(?:[^"\\]|\\.|"(?!""))*""")', text)
            text = m.group(1) + "\n" if m else ""
        out.append((p.relative_to(ROOT).as_posix(), ast.parse(text)))
    return tuple(out)


# ---- resolving names -----------------------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _module_basenames() -> dict:
    """Basename -> dotted names of the package's modules (``_export`` -> ``roofline._io._export``)."""
    out: dict = {}
    for p in PACKAGE.rglob("*.py"):
        parts = p.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out.setdefault(parts[-1], []).append(".".join(parts))
    for so in PACKAGE.glob("_core*.so"):
        out.setdefault("_core", []).append("roofline._core")
    return out


@lru_cache(maxsize=None)
def _import(name: str):
    """The module ``name``, None when there is none. A roofline module must come from this checkout: an editable
    install of another one can map an old module name to its own files."""
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name and (name == e.name or name.startswith(e.name + ".")):
            return None
        raise
    if name.split(".")[0] == "roofline" and not _ours(module):
        for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:  # leave no trace of it
            if not _ours(sys.modules[key]):
                del sys.modules[key]
        parent, _, child = name.rpartition(".")
        if getattr(sys.modules.get(parent), child, None) is module:
            delattr(sys.modules[parent], child)
        return None
    return module


def _ours(module) -> bool:
    where = getattr(module, "__file__", None) or next(iter(getattr(module, "__path__", None) or []), None)
    return where is None or Path(where).resolve().is_relative_to(PACKAGE)


@lru_cache(maxsize=None)
def _source(module: str) -> Path | None:
    """The source file of a module of the package (None when there is none)."""
    base = ROOT / module.replace(".", "/")
    for p in (base.with_suffix(".py"), base / "__init__.py"):
        if p.is_file():
            return p
    return None


@lru_cache(maxsize=None)
def _tree(module: str):
    return ast.parse(_source(module).read_text(encoding="utf-8"))


def _static(module: str) -> bool:
    """Whether ``module`` (of the package) is checked from its source: not imported yet, and importing it would
    import a heavy package (torch, a trainer's framework)."""
    if module in sys.modules or _source(module) is None:
        return False
    todo = list(_tree(module).body)
    while todo:  # module-level statements, those inside try / if included (not inside functions)
        node = todo.pop()
        if isinstance(node, (ast.Try, ast.If, ast.With)):
            todo += node.body + getattr(node, "orelse", []) + getattr(node, "finalbody", []) + \
                [s for h in getattr(node, "handlers", []) for s in h.body]
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
        if any(n.split(".")[0] in HEAVY for n in names):
            return True
    return False


@lru_cache(maxsize=None)
def _static_names(module: str) -> frozenset:
    """The top-level names of a module of the package, read from its source (nothing imported)."""
    tree = _tree(module)
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return frozenset(names)


def resolve_dotted(dotted: str) -> str | None:
    """None when ``dotted`` (``roofline.a.b.c``) names a module or an attribute reachable through modules and
    classes; else what is wrong."""
    if dotted == "roofline.cuda" or dotted.startswith("roofline.cuda."):  # package-dir: cuda/ when installed
        return None if (ROOT / "cuda").is_dir() else "no folder cuda/"
    parts = dotted.split(".")
    for i in range(len(parts), 1, -1):  # the longest prefix that is a module to read from its source
        name = ".".join(parts[:i])
        if _source(name) is not None:
            if not _static(name):
                break
            if i == len(parts) or parts[i] in _static_names(name) or _source(f"{name}.{parts[i]}"):
                return None
            return f"{name} has no {parts[i]!r}"
    obj, i = None, len(parts)
    while i > 0:  # the longest prefix that is a module
        obj = _import(".".join(parts[:i]))
        if obj is not None:
            break
        i -= 1
    if obj is None:
        return f"no module {parts[0]}"
    for k in range(i, len(parts)):
        if not (isinstance(obj, type) or type(obj).__name__ == "module"):
            return None  # an attribute of an object: not followed
        if not hasattr(obj, parts[k]):
            return f"{'.'.join(parts[:k])} has no attribute {parts[k]!r}"
        obj = getattr(obj, parts[k])
    return None


def _installed(top: str) -> bool:
    return importlib.util.find_spec(top) is not None


def check_code(code: str) -> list[str]:
    """What is wrong with the imports and ``roofline`` references of ``code`` (a compile error included)."""
    try:
        tree = ast.parse(code)
    except SyntaxError as e:
        return [f"does not compile: {e.msg} (line {e.lineno})"]
    problems, bound = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                top = a.name.split(".")[0]
                if top == "roofline":
                    why = resolve_dotted(a.name)
                    if why or _import(a.name) is None:
                        problems.append(f"import {a.name}: {why or 'no such module'}")
                    else:
                        bound[a.asname or top] = a.asname and a.name or top
                elif not _installed(top) and top not in OPTIONAL_NOT_INSTALLED:
                    problems.append(f"import {a.name}: no such module installed")
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            top = node.module.split(".")[0]
            if top != "roofline":
                if not _installed(top) and top not in OPTIONAL_NOT_INSTALLED:
                    problems.append(f"from {node.module} import ...: no such module installed")
                continue
            why = resolve_dotted(node.module)
            if why is None and _static(node.module):
                missing = [a.name for a in node.names if a.name not in _static_names(node.module)]
                problems += [f"from {node.module} import {n}: {node.module} has no {n!r}" for n in missing]
                continue
            module = _import(node.module) if why is None else None
            if module is None:
                problems.append(f"from {node.module} import ...: {why or 'no such module'}")
                continue
            for a in node.names:
                if a.name == "*":
                    continue
                if not hasattr(module, a.name) and _import(f"{node.module}.{a.name}") is None:
                    problems.append(f"from {node.module} import {a.name}: {node.module} has no {a.name!r}")
                else:
                    bound[a.asname or a.name] = f"{node.module}.{a.name}"
    for node in ast.walk(tree):  # attribute chains on what was imported from roofline
        if isinstance(node, ast.Attribute):
            chain, n = [], node
            while isinstance(n, ast.Attribute):
                chain.append(n.attr)
                n = n.value
            if isinstance(n, ast.Name) and n.id in bound and isinstance(node.ctx, ast.Load):
                dotted = ".".join([bound[n.id], *reversed(chain)])
                why = resolve_dotted(dotted)
                if why:
                    problems.append(f"{dotted}: {why}")
    return sorted(set(problems))


OPTIONAL_NOT_INSTALLED = {"cupy", "triton", "deepspeed", "accelerate", "peft", "tensorboard", "wandb", "apex"}


def check_prose(text: str) -> list[str]:
    """Dotted names, file paths and ``_module.name`` references in prose (or in a docstring)."""
    problems = []
    for dotted in DOTTED.findall(text):
        if dotted.rsplit(".", 1)[-1] in FILE_SUFFIXES:  # a file name (roofline.png)
            continue
        why = resolve_dotted(dotted.rstrip("."))
        if why:
            problems.append(f"{dotted}: {why}")
    for path in PATH.findall(text):
        if PLACEHOLDER.search(path) or "*" in path or path.startswith(NOT_PATHS):
            continue
        if path.startswith("roofline/cuda"):  # the CUDA sources: cuda/ in the repository
            path = path[len("roofline/"):]
        if not (ROOT / path).exists():
            problems.append(f"{path}: no such file or folder")
    for span in INLINE.findall(text):
        for code in _python_c(span):
            problems += [f"python -c {code!r}: {p}" for p in check_code(code)]
        if re.match(r"\s*(?:from\s+\S+\s+)?import\s", span) and not PLACEHOLDER.search(span):
            problems += [f"{span!r}: {p}" for p in check_code(span.strip())]
        for short, attr in SHORT.findall(span):
            modules = _module_basenames().get(short, [])
            if len(modules) == 1 and _static(modules[0]):
                if attr not in _static_names(modules[0]):
                    problems.append(f"{short}.{attr}: {modules[0]} has no {attr!r}")
            elif len(modules) == 1:
                module = _import(modules[0])
                if module is not None and not hasattr(module, attr) and _import(f"{modules[0]}.{attr}") is None:
                    problems.append(f"{short}.{attr}: {modules[0]} has no {attr!r}")
    return problems


def _python_c(text: str) -> list[str]:
    out = []
    for m in PYTHON_C.finditer(text):
        code = m.group(1) if m.group(1) is not None else m.group(2)
        out.append(code.replace('\\"', '"'))
    return out


def check_shell(text: str) -> list[str]:
    problems = []
    for code in _python_c(text):
        problems += [f"python -c: {p}" for p in check_code(code)]
    for module in PYTHON_M.findall(text):
        top = module.split(".")[0]
        if top == "roofline":
            if importlib.util.find_spec(module) is None:
                problems.append(f"python -m {module}: no such module")
        elif top not in ("pip", "pytest", "venv") and not _installed(top):
            problems.append(f"python -m {module}: not installed")
    for script in SCRIPT.findall(text):
        if not (ROOT / script).exists():
            problems.append(f"{script}: no such file")
    return problems + check_prose(text)


# ---- the tests -----------------------------------------------------------------------------------------------------
def _doc_items():
    items = []
    for path in DOCS:
        for where, kind, text in _md_pieces(path):
            items.append((where, kind, text))
    for where, doc in _docstrings():
        items.append((where, "docstring", doc))
    return items


ITEMS = _doc_items()
FILES = sorted({w.rsplit(":", 1)[0] for w, _, _ in ITEMS})


def check_item(kind: str, text: str) -> list[str]:
    if kind == "python":
        return check_code(text) + check_prose(text)
    if kind == "shell":
        return check_shell(text)
    if kind == "docstring":
        problems = check_prose(text)
        code = _pycon(text)
        if code.strip():
            problems += check_code(code)
        return problems
    return check_prose(text)


@pytest.mark.parametrize("name", FILES)
def test_documentation_names_what_exists(name):
    """One case per file: every block, span and docstring of it."""
    problems = []
    for where, kind, text in ITEMS:
        if where.rsplit(":", 1)[0] == name:
            problems += [f"{where}: {p}" for p in check_item(kind, text)]
    assert not problems, "\n".join(problems)


def test_docstring_examples_run():
    """The ``>>>`` examples of the package's docstrings that are not marked ``+SKIP`` run and print what they show
    (each in its module's namespace, with ``roofline`` imported)."""
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    parser = doctest.DocTestParser()
    ran = 0
    for where, doc in _docstrings():
        if ">>>" not in doc:
            continue
        path = where.rsplit(":", 1)[0]
        module = _import(path[:-len(".py")].replace("/", ".").removesuffix(".__init__"))
        test = parser.get_doctest(doc, {**vars(module), "roofline": roofline}, where, path, 0)
        test.examples = [e for e in test.examples if not e.options.get(doctest.SKIP)]
        if test.examples:
            ran += len(test.examples)
            runner.run(test)
    assert ran >= 2  # at least schedule()'s example
    assert runner.failures == 0, f"{runner.failures} docstring example(s) failed (printed above)"


# ---- the checker itself: each kind of breakage is caught -----------------------------------------------------------
@pytest.mark.parametrize("kind, text, expected", [
    ("python", "from roofline import _registry\n", "has no '_registry'"),
    ("python", "import roofline\nroofline.profile_steady(1)\n", "has no attribute 'profile_steady'"),
    ("python", "import roofline.model\n", "roofline.model"),
    ("python", "x = (\n", "does not compile"),
    ("shell", 'python -c "from roofline import _gpu; _gpu.measure()"', "has no '_gpu'"),
    ("shell", "python -m roofline.nowhere", "no such module"),
    ("shell", "python bench/not_a_script.py", "no such file"),
    ("prose", "the column table is `_export.columns(report)`", "roofline._io._export has no 'columns'"),
    ("prose", "`return _export.to_<format>(_export.columns(self), path)`", "roofline._io._export has no 'columns'"),
    ("prose", "see `roofline/util/_format.py`", "no such file or folder"),
    ("prose", "`roofline._counting._cost.nothing`", "has no attribute 'nothing'"),
    ("docstring", "``python -c \"from roofline import _registry; _registry.write_schema_table()\"``",
     "has no '_registry'"),
    ("docstring", ">>> from roofline.analysis import _rollup\n", "roofline.analysis"),
])
def test_a_broken_reference_is_caught(kind, text, expected):
    problems = check_item(kind, text)
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize("kind, text", [
    ("python", "import roofline\nr = roofline.cost('mm', [(2, 3), (3, 4)])\nprint(r.matrix_flops)\n"),
    ("shell", 'python -c "from roofline._counting import _registry; _registry.write_schema_table()"'),
    ("shell", "python -m roofline.devices\npython docs/gen_api.py"),
    ("prose", "`_tables.columns(report)` in `roofline/render/_tables.py`; `roofline.Report.to_csv`"),
    ("prose", "`to_<format>(cols, path=None)` and `roofline/render/_<format>.py`"),  # placeholders
])
def test_what_exists_passes(kind, text):
    assert check_item(kind, text) == []
