"""Build the CPU benchmark sources (csrc/cpu_info.c, cpu_kernels.c, cpu_runs.c) with their C unit tests
(tests/c/test_cpu.c) under AddressSanitizer and UBSan, and run them."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CPU_SOURCES = [os.path.join(REPO, "csrc", f"cpu_{part}.c") for part in ("info", "kernels", "runs")]
FLAGS = ["-std=c11", "-O1", "-g", "-fno-omit-frame-pointer", "-Wall", "-Wextra", "-Werror"]
pytestmark = pytest.mark.python_independent  # pure C: built and run without Python (tests/conftest.py)


def test_cpu_c_unit_tests(sanitized_cc, tmp_path):
    exe = sanitized_cc.build([*CPU_SOURCES, os.path.join(REPO, "tests", "c", "test_cpu.c")],
                             tmp_path / "test_cpu", libs=["-lpthread", "-lm"])
    p = sanitized_cc.run(exe, timeout=120)
    print(p.stdout)
    assert "ok: 0 failure(s)" in p.stdout


@pytest.mark.skipif(
    not (shutil.which("aarch64-linux-gnu-gcc") and shutil.which("qemu-aarch64")),
    reason="needs aarch64-linux-gnu-gcc and qemu-aarch64 (Debian: gcc-aarch64-linux-gnu, qemu-user)",
)
def test_cpu_c_unit_tests_aarch64_neon(tmp_path):
    """The NEON kernels, cross-compiled for AArch64 and run under user-mode emulation."""
    exe = tmp_path / "test_cpu_arm"
    build = [
        "aarch64-linux-gnu-gcc",
        *FLAGS,
        "-static",
        "-I",
        os.path.join(REPO, "csrc"),
        *CPU_SOURCES,
        os.path.join(REPO, "tests", "c", "test_cpu.c"),
        "-o",
        str(exe),
        "-lpthread",
        "-lm",
    ]
    p = subprocess.run(build, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    p = subprocess.run(["qemu-aarch64", str(exe)], capture_output=True, text=True, timeout=300)
    print(p.stdout)
    assert p.returncode == 0 and "ok: 0 failure(s)" in p.stdout, p.stdout + p.stderr
