"""Every ```python block of README.md and docs/*.md runs as written, each in a fresh interpreter.

A block is skipped only when the line before it (blank lines aside) is a visible marker
``<!-- skip-test: <reason> -->``; the reason is shown as the skip reason. Use it for GPU-only snippets and nothing
else. Blocks run in a temporary directory (files they write land there) with matplotlib's non-interactive
backend; the ceilings cache is the user's, so a measured machine is not re-measured for every snippet.
"""

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
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         env=env)
    assert out.returncode == 0, f"{where} failed:\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}"
