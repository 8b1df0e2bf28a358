"""Build the branch-by-branch C tests of the cost model (tests/c/test_cost_branches.c) with AddressSanitizer +
UndefinedBehaviorSanitizer and -Werror, and run them: every formula of csrc/cost.c against hand-derived counts."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CC = os.environ.get("CC", "gcc")


@pytest.mark.skipif(shutil.which(CC) is None, reason=f"no C compiler ({CC})")
def test_cost_model_branches_under_sanitizers(tmp_path):
    exe = tmp_path / "test_cost_branches"
    cmd = [CC, "-std=c11", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-fsanitize=address,undefined",
           "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", f"-I{ROOT / 'csrc'}",
           str(ROOT / "tests" / "c" / "test_cost_branches.c"), str(ROOT / "csrc" / "cost.c"), "-o", str(exe)]
    build = subprocess.run(cmd, capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1", UBSAN_OPTIONS="print_stacktrace=1")
    run = subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "all C cost branch tests passed" in run.stdout
