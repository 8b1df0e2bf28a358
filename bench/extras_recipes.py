"""Each trainer recipe of docs/training.md, run unchanged in a fresh virtual environment that has only its extra:
``pip install ".[huggingface]"`` for the Hugging Face recipe, ``".[lightning]"`` for the Lightning one. Prints, per
extra, the install time, the environment's size and whether the recipe ran (its last lines of output).

    python bench/extras_recipes.py [--extra huggingface] [--torch "torch==2.13.0"] [--keep]

``--torch``: a torch requirement installed with the extra (a CPU build on a CPU-only machine: without it pip takes
the newest torch, on Linux the CUDA build and its libraries, several GB). The static counterpart, run by the suite,
is tests/test_extras.py.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = {"huggingface": "## Hugging Face Trainer", "lightning": "## Lightning"}


def recipe(extra: str) -> str:
    text = (ROOT / "docs" / "training.md").read_text(encoding="utf-8")
    body = text.split(SECTIONS[extra] + "\n", 1)[1].split("\n## ", 1)[0]
    return re.search(r"^```python\n(.*?)^```", body, re.M | re.S).group(1)


def size_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink()) / 2 ** 20


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--extra", choices=sorted(SECTIONS), action="append")
    ap.add_argument("--torch", default="", help="a torch requirement to install with the extra")
    ap.add_argument("--keep", action="store_true", help="keep the environments (printed)")
    args = ap.parse_args()
    failed = 0
    for extra in args.extra or sorted(SECTIONS):
        where = Path(tempfile.mkdtemp(prefix=f"roofline-{extra}-"))
        venv = where / "venv"
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        cmd = [str(venv / "bin" / "pip"), "install", "-q", f"{ROOT}[{extra}]"] + ([args.torch] if args.torch else [])
        p = subprocess.run(cmd, capture_output=True, text=True)
        took = time.perf_counter() - start
        if p.returncode != 0:
            print(f"[{extra}] install failed after {took:.0f} s:\n{p.stderr[-2000:]}")
            failed += 1
            continue
        print(f"[{extra}] installed in {took:.0f} s, {size_mb(venv):.0f} MiB: {' '.join(cmd[2:])}", flush=True)
        run = where / "run"
        run.mkdir()
        (run / "recipe.py").write_text(recipe(extra), encoding="utf-8")
        start = time.perf_counter()
        p = subprocess.run([str(venv / "bin" / "python"), "recipe.py"], cwd=run, capture_output=True, text=True,
                           timeout=1800)
        ok = p.returncode == 0
        failed += not ok
        tail = "\n".join((p.stdout + p.stderr).strip().splitlines()[-6:])
        print(f"[{extra}] recipe {'ran' if ok else 'FAILED'} in {time.perf_counter() - start:.0f} s\n{tail}\n",
              flush=True)
        if args.keep:
            print(f"[{extra}] kept: {where}")
        else:
            shutil.rmtree(where, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
