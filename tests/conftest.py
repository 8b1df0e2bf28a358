"""Shared fixtures: building and running C code under AddressSanitizer + UndefinedBehaviorSanitizer."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Under pytest-xdist (README's test command runs two processes), each process and what it starts (notebook kernels,
# compiled-code workers) runs torch's kernels on one OpenMP thread: two processes spinning two threads each on two
# cores slowed the notebooks down by 2x. Set here, before any test module imports torch.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")

SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
# What a sanitizer prints when it finds something (a report fails the test even if the exit status were 0).
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:", "SUMMARY: UndefinedBehavior")
SANITIZER_ENV = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:halt_on_error=1",
                 "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"}


def sanitizer_report(text: str) -> str | None:
    """The first line of a sanitizer report in `text`, or None."""
    for line in text.splitlines():
        if any(m in line for m in SANITIZER_MARKERS):
            return line
    return None


class SanitizedCC:
    """A C compiler that builds with -fsanitize=address,undefined, and a runner for what it builds."""

    def __init__(self, cc: str):
        self.cc = cc

    def build(self, sources, exe, flags=(), libs=()) -> Path:
        """Compile `sources` into `exe` with the project's warning flags and the sanitizers; fails the test with
        the compiler's messages when the build fails."""
        cmd = [self.cc, "-std=c11", "-O1", "-g", "-Wall", "-Wextra", "-Werror", *SANITIZE, f"-I{ROOT / 'csrc'}",
               *flags, *map(str, sources), "-o", str(exe), *libs]
        p = subprocess.run(cmd, capture_output=True, text=True)
        assert p.returncode == 0, f"{' '.join(cmd)}\n{p.stderr}"
        return Path(exe)

    def run(self, exe, *args, timeout=120, expect_rc=0) -> subprocess.CompletedProcess:
        """Run `exe` with leak detection on; asserts the exit status and that no sanitizer reported."""
        p = subprocess.run([str(exe), *args], capture_output=True, text=True, env=dict(os.environ, **SANITIZER_ENV),
                           timeout=timeout)
        out = p.stdout + p.stderr
        assert p.returncode == expect_rc, out[-5000:]
        report = sanitizer_report(out)
        assert report is None, out[-5000:]
        return p


def _sanitizer_compiler() -> tuple[str | None, str]:
    names = [os.environ.get("CC"), "cc", "gcc", "clang"]
    for name in filter(None, names):
        path = shutil.which(name)
        if path:
            return path, ""
    return None, "no C compiler (set CC, or install gcc or clang)"


@pytest.fixture(scope="session")
def sanitized_cc(tmp_path_factory) -> SanitizedCC:
    """A C compiler able to build with ASan + UBSan; skips the test when there is none."""
    cc, why = _sanitizer_compiler()
    if cc is None:
        pytest.skip(why)
    probe_dir = tmp_path_factory.mktemp("sanitizer-probe")
    src = probe_dir / "probe.c"
    src.write_text("int main(void) { return 0; }\n")
    p = subprocess.run([cc, *SANITIZE, str(src), "-o", str(probe_dir / "probe")], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"{cc} cannot build with -fsanitize=address,undefined: {p.stderr.strip()[:300]}")
    return SanitizedCC(cc)


# ---- C and CUDA that no Python builds or loads -----------------------------------------------------------------
# A test marked `python_independent` checks C or CUDA code that the interpreter neither builds nor loads (the C unit
# tests, the C fuzzer's harness, nvcc's and cuobjdump's view of the kernels), or reads the package's source
# statically (tests/test_layers.py): its outcome is the same under every Python. CI's run on a second Python sets ROOFLINE_SKIP_PYTHON_INDEPENDENT=1 and skips them (its first run ran
# them); the extension, which each Python builds for itself, is tested on both.
SKIP_PYTHON_INDEPENDENT = os.environ.get("ROOFLINE_SKIP_PYTHON_INDEPENDENT", "") not in ("", "0")


# ---- Breadth -------------------------------------------------------------------------------------------------
# A test marked `breadth` repeats, on more models or larger ones, what a test of the suite already checks on a
# representative sample (a compiled model in its other mode, GPT-2 with all twelve of its layers). The suite skips
# them, saying so; bench/breadth.sh runs them (ROOFLINE_BREADTH=1), and fixtures read BREADTH to build the larger
# models.
BREADTH = os.environ.get("ROOFLINE_BREADTH", "") not in ("", "0")


# The test files that take longest, longest first (worker seconds measured with --durations=0 on the 2-core
# machine). The files run in this order, so that under `-n 2 --dist loadfile` the long ones start first and the two
# processes finish together instead of one waiting for the other's last notebook; a file missing from the list runs
# after these, in collection order. Only the run's length depends on this list being current.
SLOWEST_FIRST = ("test_notebooks.py", "test_doc_snippets.py", "test_fuzz_c.py", "test_compiled_models.py",
                 "test_gpu.py", "test_models.py", "test_sanitized_extension.py", "test_packaging.py",
                 "test_compiled.py", "test_notebooks_vlm.py", "test_distributed.py", "test_leak.py",
                 "test_block_state.py", "test_coverage_zoo.py", "test_opinfo_sample.py", "test_html.py",
                 "test_report.py", "test_trace_import.py")


def pytest_configure(config):
    if hasattr(config.option, "loadscopereorder"):
        # pytest-xdist orders the files by their number of tests unless told not to: keep the order set below
        config.option.loadscopereorder = False
    config.addinivalue_line("markers", "python_independent: tests C or CUDA code no Python builds or loads, or reads "
                                       "the package's source statically (the second-Python CI run skips it: "
                                       "ROOFLINE_SKIP_PYTHON_INDEPENDENT=1)")
    config.addinivalue_line("markers", "breadth: more models or larger ones than the suite's sample; run by "
                                       "bench/breadth.sh (ROOFLINE_BREADTH=1)")


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: a file's own order is kept
    skips = []
    if SKIP_PYTHON_INDEPENDENT:
        skips.append(("python_independent", pytest.mark.skip(
            reason="C/CUDA code no Python builds or loads: run once, under the first Python "
                   "(ROOFLINE_SKIP_PYTHON_INDEPENDENT is set)")))
    if not BREADTH:
        skips.append(("breadth", pytest.mark.skip(reason="breadth beyond the suite's sample: bench/breadth.sh runs it "
                                                         "(ROOFLINE_BREADTH=1)")))
    for item in items:
        for marker, skip in skips:
            if item.get_closest_marker(marker):
                item.add_marker(skip)


# ---- Without torch ---------------------------------------------------------------------------------------------
# `import roofline` needs only NumPy, and the C extension is what differs between Python versions, so the suite also
# runs where torch is not installed (CI's second-Python run). Test modules that import torch, torchvision or
# transformers at module level are then not collected, and the header says which.
_TORCH_MODULES = {"torch", "torchvision", "transformers"}


def _imports_torch_at_module_level(path: Path) -> bool:
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in tree.body:
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] in _TORCH_MODULES for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] in _TORCH_MODULES:
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "_models":
            return True
    return False


def _torch_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None


collect_ignore = []
if not _torch_installed():
    collect_ignore = sorted(p.name for p in Path(__file__).parent.glob("*.py") if _imports_torch_at_module_level(p))


def pytest_report_header(config):
    if collect_ignore:
        return f"torch is not installed: not collected (they import torch): {', '.join(collect_ignore)}"
    return None


# ---- JSON document mutation (property tests of the readers) ---------------------------------------------------------

def json_values(st, int_bound: int, text_size: int, max_leaves: int):
    """A Hypothesis strategy of JSON-like values: scalars (None, bools, ints in +-int_bound, floats, short text),
    nested in lists and dicts, at most `max_leaves` leaves."""
    scalars = st.none() | st.booleans() | st.integers(-int_bound, int_bound) | st.floats() | st.text(max_size=text_size)
    return st.recursive(scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c,
                                                                                     max_size=3), max_leaves=max_leaves)


def json_paths(obj, max_items: int, prefix=()):
    """Every path into a JSON document, the empty one first: the keys of objects and the first `max_items` indexes of
    arrays."""
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from json_paths(v, max_items, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:max_items]):
            yield from json_paths(v, max_items, prefix + (i,))
