"""Every ```python block of README.md and docs/*.md runs as written, each in a fresh interpreter, and prints what
the text says it prints.

A block is skipped only when the line before it (blank lines aside) is a visible marker
``<!-- skip-test: <reason> -->``; the reason is shown as the skip reason. Use it for GPU-only snippets and nothing
else. Blocks run in a temporary directory (files they write land there) with matplotlib's non-interactive
backend; the ceilings cache is the user's, so a measured machine is not re-measured for every snippet.

Stated outputs: a one-line ``print(...)`` whose trailing comment starts with a value (a number, ``~``, ``-``, ``{``,
``[``, ``(``, ``None``, ``True``, ``False``) states its output, up to the first ``": "`` outside brackets and quotes
(the rest is prose), and the test checks it, token by token (whitespace-separated): a token equal to the printed
one; ``~x`` a number within 1% of x; ``x...`` a printed token that starts with x. Comments that start with a word
(``# totals, time, ...``) describe the output and are not checked.
"""

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SKIP = re.compile(r"<!--\s*skip-test:\s*(.*?)\s*-->")
IMPORT = re.compile(r"^\s*(?:import|from)\s+([A-Za-z_][\w]*)", re.M)
OPTIONAL = {"torch", "torchvision", "transformers", "matplotlib", "pandas"}


def _blocks():
    """(id, code, skip reason or None) for each python block, in file order."""
    out = []
    for path in DOCS:
        lines = path.read_text().splitlines()
        i = 0
        while i < len(lines):
            if lines[i].strip() == "```python":
                start = i
                j = i + 1
                while j < len(lines) and lines[j].strip() != "```":
                    j += 1
                assert j < len(lines), f"{path.name}:{start + 1}: unterminated ```python block"
                code = "\n".join(lines[start + 1:j]) + "\n"
                k = start - 1
                while k >= 0 and not lines[k].strip():
                    k -= 1
                marker = SKIP.search(lines[k]) if k >= 0 else None
                out.append((f"{path.relative_to(ROOT)}:{start + 1}", code, marker.group(1) if marker else None))
                i = j
            i += 1
    return out


BLOCKS = _blocks()

_STATED = re.compile(r"^(\s*)print\((.*)\)\s+#\s*((?:[~\d\-{\[(]|None\b|True\b|False\b).*)$")


def _stated_value(comment: str) -> str:
    """The value part of a stated-output comment: up to the first ": " outside brackets and quotes."""
    depth, quote = 0, None
    for i, c in enumerate(comment):
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == ":" and depth == 0 and comment[i + 1:i + 2] in (" ", ""):
            return comment[:i].strip()
    return comment.strip()


def _matches(printed: str, stated: str) -> bool:
    """Whether the printed text is the stated output (see the module docstring for the notation)."""
    got, want = printed.split(), stated.split()
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if w.startswith("~"):
            try:
                x, y = float(w[1:]), float(g)
            except ValueError:
                return False
            if not abs(y - x) <= 0.01 * abs(x):
                return False
        elif w.endswith("...") and len(w) > 3:
            if not g.startswith(w[:-3]):
                return False
        elif g != w:
            return False
    return True


def _check_stated_output(where, stated, *args, **kwargs):
    import io

    buf = io.StringIO()
    print(*args, file=buf, **kwargs)
    printed = buf.getvalue()
    print(printed, end="")
    if not _matches(printed, stated):
        raise AssertionError(f"{where}: the text says this prints {stated!r}, it printed {printed.strip()!r}")


def _with_output_checks(where: str, code: str):
    """``code`` with each stated-output print replaced by a checked one; and the (line, stated value) pairs."""
    lines, checks = [], []
    first = int(where.rsplit(":", 1)[1]) + 1
    for i, line in enumerate(code.splitlines()):
        m = _STATED.match(line)
        if m:
            indent, args, comment = m.groups()
            stated = _stated_value(comment)
            at = f"{where.rsplit(':', 1)[0]}:{first + i}"
            checks.append((at, stated))
            line = f"{indent}_check_stated_output({at!r}, {stated!r}, {args})"
        lines.append(line)
    if not checks:
        return code, checks
    prelude = "\n".join(inspect.getsource(f) for f in (_matches, _check_stated_output))
    return prelude + "\n" + "\n".join(lines) + "\n", checks


def test_blocks_are_found():
    files = {b[0].split(":")[0] for b in BLOCKS}
    assert "README.md" in files and "docs/quickstart.md" in files
    skipped = [b for b in BLOCKS if b[2]]
    assert len(skipped) <= 3, f"skip-test markers are for GPU-only snippets: {[b[0] for b in skipped]}"


@pytest.mark.parametrize("where,code,skip", BLOCKS, ids=[b[0] for b in BLOCKS])
def test_snippet_runs(where, code, skip, tmp_path):
    if skip:
        pytest.skip(skip)
    for module in sorted(set(IMPORT.findall(code)) & OPTIONAL):
        pytest.importorskip(module)
    env = dict(os.environ, MPLBACKEND="Agg")
    code, _ = _with_output_checks(where, code)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         env=env)
    assert out.returncode == 0, f"{where} failed:\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}"


def test_readme_stated_outputs_are_checked():
    """The outputs README states are among the checked ones (the notation cannot silently stop matching them)."""
    stated = {value for where, code, _ in BLOCKS if where.startswith("README.md")
              for _, value in _with_output_checks(where, code)[1]}
    assert {"{}", "137438953472 100663296 1365.33...", "~0.5"} <= stated, stated


def test_stated_output_notation():
    assert _stated_value("{}: every op had a formula") == "{}"
    assert _stated_value("{'demo.scale_add.default': 1}: bytes counted") == "{'demo.scale_add.default': 1}"
    assert _stated_value("~0.5: causal attention does half the work") == "~0.5"
    assert _matches("137438953472 100663296 1365.3333333333333\n", "137438953472 100663296 1365.33...")
    assert not _matches("137438953472 100663296 1365.4\n", "137438953472 100663296 1365.33...")
    assert not _matches("137438953471 100663296 1365.3333\n", "137438953472 100663296 1365.33...")
    assert not _matches("137438953472 100663296\n", "137438953472 100663296 1365.33...")
    assert _matches("0.500244140625\n", "~0.5") and not _matches("0.51\n", "~0.5")
    assert not _matches("{'aten.add.Tensor': 1}\n", "{}") and _matches("{}\n", "{}")
    code, checks = _with_output_checks("X.md:1", "x = 2\nprint(x + 1)  # 4: wrong on purpose\n")
    assert checks == [("X.md:3", "4")]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "X.md:3: the text says this prints '4', it printed '3'" in out.stderr
