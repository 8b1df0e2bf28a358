"""Build csrc/cpu.c with its C unit tests (tests/c/test_cpu.c) under AddressSanitizer and UBSan, and run them."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLAGS = ["-std=c11", "-O1", "-g", "-fno-omit-frame-pointer", "-Wall", "-Wextra", "-Werror"]
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all"]


def _compiler():
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


@pytest.fixture(scope="module")
def sanitizer_cc(tmp_path_factory):
    cc = _compiler()
    if cc is None:
        pytest.skip("no C compiler")
    probe_dir = tmp_path_factory.mktemp("probe")
    src = probe_dir / "probe.c"
    src.write_text("int main(void) { return 0; }\n")
    p = subprocess.run([cc, *SANITIZE, str(src), "-o", str(probe_dir / "probe")], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"{cc} cannot build with sanitizers: {p.stderr.strip()[:200]}")
    return cc


def test_cpu_c_unit_tests(sanitizer_cc, tmp_path):
    exe = tmp_path / "test_cpu"
    build = [
        sanitizer_cc,
        *FLAGS,
        *SANITIZE,
        "-I",
        os.path.join(REPO, "csrc"),
        os.path.join(REPO, "csrc", "cpu.c"),
        os.path.join(REPO, "tests", "c", "test_cpu.c"),
        "-o",
        str(exe),
        "-lpthread",
        "-lm",
    ]
    p = subprocess.run(build, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0", UBSAN_OPTIONS="print_stacktrace=1")
    p = subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=120)
    print(p.stdout)
    assert p.returncode == 0, p.stdout + p.stderr
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
        os.path.join(REPO, "csrc", "cpu.c"),
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
