"""Every Python snippet in README.md runs as written."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SNIPPETS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)


@pytest.mark.parametrize("code", SNIPPETS, ids=[f"readme-{i}" for i in range(len(SNIPPETS))])
def test_readme_snippet_runs(code):
    if "torch" in code:
        pytest.importorskip("torchvision")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
