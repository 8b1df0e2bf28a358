"""Warnings point at the user's line: the ``filename`` of every warning the package gives is the file of the code
that called into it (here: this test file), never a file of the package or of torch."""

from __future__ import annotations

import ast
import os
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import roofline
from roofline._util import _warn

from _ceilings_modules import ceilings_mod  # noqa: E402  (the ceilings modules as one)
HERE = os.path.abspath(__file__)
PACKAGE = Path(roofline.__file__).resolve().parent
G = 1e9


def _recorded(fn, *args, **kwargs):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        result = fn(*args, **kwargs)
    return result, w


class _ContendedCore:
    """roofline._core with fixed FMA results and a sweep whose rate grows with the working set: DRAM faster than
    every cache, an implausible hierarchy, so the measurement is judged contended (and takes no time)."""

    def cpu_fma_peak(self, dtype, seconds, threads, repeats):
        return {"flops": {"float64": 100 * G, "float32": 200 * G}[dtype], "threads": threads, "pinned": True,
                "repeats": repeats, "lanes": 8, "accumulators": 12, "fma": True, "cpu_share": 0.99}

    def cpu_bandwidth_sweep(self, sizes, kernels, threads, repeats, **kwargs):
        return np.array([[float(s) for s in sizes] for _ in kernels]), {"pinned": True, "cpu_share": 0.99}

    def __getattr__(self, name):
        from roofline import _core

        return getattr(_core, name)


STUB_INFO = {"cpus": 2, "physical_cores": 2, "clock_hz": 2.0e9, "clock_source": "test", "simd": "avx2",
             "model": "stub CPU", "caches": {"L1": {"bytes": 32 << 10, "instances": 2},
                                              "L2": {"bytes": 1 << 20, "instances": 2}},
             "lowp_kernels": {}}


@pytest.fixture
def stub_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(ceilings_mod, "_core", _ContendedCore())
    monkeypatch.setattr(ceilings_mod, "_cpu_info", lambda: dict(STUB_INFO))
    monkeypatch.setattr(ceilings_mod, "_BUSY_RESULTS", {})
    return tmp_path


def test_the_contention_warning_of_the_ceilings_names_the_callers_line(stub_machine):
    line = sys._getframe().f_lineno + 1
    c, w = _recorded(roofline.ceilings, "cpu", refresh=True)
    assert c.info["busy"]
    hits = [x for x in w if "measured under contention" in str(x.message)]
    assert len(hits) == 1 and hits[0].category is RuntimeWarning
    # the line of this file that called roofline.ceilings (through _recorded), not a line of the package
    assert hits[0].filename == HERE and hits[0].lineno in (line, _recorded.__code__.co_firstlineno + 3)


def test_a_corrupt_cache_warning_names_the_callers_file(stub_machine):
    info = dict(STUB_INFO)
    path = ceilings_mod._cache_path("cpu", ceilings_mod._cpu_fingerprint(info))
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    Path(path).write_text("{not json")
    _, w = _recorded(roofline.ceilings, "cpu")
    hits = [x for x in w if "ignoring the ceilings cache" in str(x.message)]
    assert len(hits) == 1 and hits[0].filename == HERE


def test_a_projection_without_a_peak_names_the_callers_file():
    sys.path.insert(0, str(Path(__file__).parent))
    try:
        from _reports import two_op_report
    finally:
        sys.path.pop(0)
    r = two_op_report()
    # a target with a float64 peak only: the float32 ops have none (both of them: 100% of the FLOPs)
    target = roofline.Ceilings(device="cuda", name="f64 only", fingerprint="t",
                               peaks={("vector", "float64"): roofline.Ceiling(1e12)},
                               bandwidths={"DRAM": roofline.Ceiling(1e11)})
    _, w = _recorded(r.project, target)
    hits = [x for x in w if "has no peak for the dtype" in str(x.message)]
    assert len(hits) == 1 and hits[0].filename == HERE


def test_frames_of_the_package_and_of_torch_are_skipped(monkeypatch):
    """A warning given two library frames deep (a stand-in for roofline, called by a stand-in for torch) names the
    user's frame: the walk (Python < 3.12) and skip_file_prefixes (>= 3.12) agree."""
    lib = "/nonexistent/lib/"
    monkeypatch.setattr(_warn, "_prefixes", lambda: (lib, _warn._PACKAGE_DIR))
    code = compile("def inner(msg):\n    warn(msg, RuntimeWarning)\n", lib + "pkg/inner.py", "exec")
    ns = {"warn": _warn.warn}
    exec(code, ns)
    outer_code = compile("def outer(msg):\n    inner(msg)\n", lib + "framework/outer.py", "exec")
    ns2 = {"inner": ns["inner"]}
    exec(outer_code, ns2)
    line = sys._getframe().f_lineno + 3
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        ns2["outer"]("deep")
    assert [(x.filename, x.lineno, str(x.message)) for x in w] == [(HERE, line, "deep")]
    # the stack level the walk computes for the same chain: inner (1), outer (2), this frame (3)
    levels = []
    exec(compile("def probe():\n    levels.append(stacklevel(('/nonexistent/lib/',)))\n", lib + "pkg/p.py", "exec"),
         ns3 := {"levels": levels, "stacklevel": _warn.stacklevel})
    exec(compile("def via():\n    probe()\n", lib + "framework/v.py", "exec"), ns4 := {"probe": ns3["probe"]})
    ns4["via"]()
    assert levels == [3]


def test_no_module_of_the_package_warns_past_the_helper():
    """Every warning of the package goes through roofline._util._warn.warn; the modules listed here still call
    warnings.warn with a hand-counted stacklevel and are to move to the helper."""
    pending = set()  # every module warns through roofline._util._warn
    direct = set()
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).as_posix()
        if rel == "roofline/_util/_warn.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "warn"
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "warnings"):
                direct.add(rel)
    assert direct <= pending, f"warnings.warn called directly (use roofline._util._warn.warn): {direct - pending}"
