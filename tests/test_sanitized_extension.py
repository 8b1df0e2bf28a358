"""The extension itself (every csrc/*.c, the Python bindings included) built with AddressSanitizer +
UndefinedBehaviorSanitizer into a temporary directory, and a fast subset of the suite run against it.

The sanitizer runtimes must be loaded before the interpreter: the subset runs in a subprocess with
``LD_PRELOAD=$(cc -print-file-name=libasan.so) $(cc -print-file-name=libubsan.so)`` (the recipe of
docs/design.md). Leak detection is off there (the interpreter itself keeps memory to exit); tests/test_leak.py
covers leaks. The in-place build of the worktree is left alone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap

import pytest
from conftest import ROOT, SANITIZE, sanitizer_report

np = pytest.importorskip("numpy")

SUBSET = textwrap.dedent(r"""
    import json, math, warnings
    import roofline
    from roofline import _core
    assert _core.__file__.startswith(SANITIZED_DIR), _core.__file__

    # cost(): every kind, and bad input raising documented errors
    assert roofline.cost("mm", [(128, 256), (256, 64)]).matrix_flops == 2 * 128 * 64 * 256
    assert roofline.cost("convolution", (1, 3, 8, 8), (4, 3, 3, 3), None, [1, 1], [1, 1], [1, 1], False, [0, 0],
                         1).matrix_flops == 2 * 64 * 9 * 4 * 3
    assert roofline.cost("_scaled_dot_product_flash_attention", (1, 2, 8, 4), (1, 2, 8, 4), (1, 2, 8, 4), 0.0,
                         True).special_ops == 2 * 36
    assert roofline.cost("add", (4, 1, 8), (3, 8)).vector_flops == 96
    assert roofline.cost("sum", (4, 10), out=()).vector_flops == 40
    assert roofline.cost("_foreach_add_", [(10,), (5,)], 1.0).vector_flops == 15
    assert roofline.cost("max_pool2d_with_indices", (1, 1, 4, 4), [2, 2], [2, 2],
                         out=[(1, 1, 2, 2), roofline.TensorSpec((1, 1, 2, 2), "int64")]).vector_flops == 16
    errors = 0
    for op, args, kw in [("mm", [(2**40, 2**40), (2**40, 2**40)], {}), ("mm", [(3, 4), (5, 6)], {}),
                         ("nope", [], {}), ("avg_pool3d", [(1, 1, 8, 8, 8), [2, 2]], dict(out=(1, 1, 4, 4, 4))),
                         ("mm", ["x", None], {}), ("relu_", [[1, 2, 3]], {})]:
        try:
            roofline.cost(op, *args, **kw)
        except (ValueError, TypeError, OverflowError):
            errors += 1
    assert errors >= 4, errors

    # TensorSpec
    t = roofline.TensorSpec((2, 3), "bf16", stride=(0, 1))
    assert (t.numel, t.nbytes, t.stride()) == (6, 12, (0, 1))
    for bad in [("x",), (-1,), tuple(range(20))]:
        try:
            roofline.TensorSpec(bad)
        except (ValueError, TypeError):
            pass
        else:
            raise AssertionError(bad)

    # measure a tiny model: forward, backward, optimizer step, per-op timing; classify against a datasheet
    import torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(8, 16)
    with roofline.measure(model, timing="op", ceilings="H100 SXM") as r:
        model(x).square().mean().backward()
        opt.step()
    # forward: 2*8*16*32 + 2*8*32*4; backward: grad input and grad weight of layer 2 (2*8*4*32 each), grad weight
    # of layer 1 (2*32*8*16); x needs no gradient
    assert r.matrix_flops == 2 * 8 * 16 * 32 + 2 * 8 * 32 * 4 + 2 * (2 * 8 * 4 * 32) + 2 * 32 * 8 * 16, r.matrix_flops
    text = str(r)
    assert "addmm" in text or "mm" in text
    a = r.analysis()
    assert a and all(v["flops"] >= 0 for v in a.values())
    cls = r.classification()
    assert len(cls["bound"]) == len(r.records)
    # the parameter counts' fingerprint (kept counts on the second block) and a sparse argument (the recorder's
    # undescribed callable): 16*32+32 + 32*4+4 parameters; 2 FLOPs per stored value (2) and column (4)
    with roofline.measure(model) as r2:
        model(x)
    assert r2.meta["parameters"]["total"] == 16 * 32 + 32 + 32 * 4 + 4 == r.meta["parameters"]["total"]
    sp = torch.tensor([[1.0, 0.0], [0.0, 2.0]]).to_sparse_csr()
    with roofline.measure() as r3:
        torch.mm(sp, torch.ones(2, 4))
    assert not r3.errors and r3.matrix_flops == 2 * 2 * 4, (r3.errors, r3.matrix_flops)

    # to_json / load round trip
    back = roofline.load(r.to_json())
    assert back.records.tobytes() == r.records.tobytes()
    assert back.to_json() == r.to_json()
    str(back)
    for bad in ['{"schema": 1}', "[1, 2]", '{"schema": 1, "records": "!!", "n_records": 1, "ops": [], '
                '"module_sets": []}']:
        try:
            roofline.load(bad)
        except (ValueError, TypeError):
            pass
        else:
            raise AssertionError(bad)
    print("sanitized subset passed")
""")


def _runtime(cc: str, name: str) -> str | None:
    p = subprocess.run([cc, f"-print-file-name={name}"], capture_output=True, text=True)
    path = p.stdout.strip()
    return path if p.returncode == 0 and os.path.isabs(path) and os.path.exists(path) else None


@pytest.fixture(scope="module")
def sanitized_package(sanitized_cc, tmp_path_factory):
    """A copy of the roofline package whose _core extension is built with ASan + UBSan; (directory, preload)."""
    if not sys.platform.startswith("linux"):
        pytest.skip("the LD_PRELOAD recipe is for Linux")
    cc = sanitized_cc.cc
    libs = [_runtime(cc, "libasan.so"), _runtime(cc, "libubsan.so")]
    if None in libs:
        pytest.skip(f"{cc} has no shared libasan/libubsan to preload")
    d = tmp_path_factory.mktemp("sanitized")
    shutil.copytree(ROOT / "roofline", d / "roofline", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    shutil.copytree(ROOT / "cuda", d / "roofline" / "cuda")  # the package data the GPU side reads
    shutil.copytree(ROOT / "csrc", d / "csrc")
    ext = sysconfig.get_config_var("EXT_SUFFIX")
    sources = sorted(str(p) for p in (d / "csrc").glob("*.c"))
    cmd = [cc, "-std=c11", "-O1", "-g", "-Wall", "-Wextra", *SANITIZE, "-shared", "-fPIC", "-fvisibility=hidden",
           f"-I{d / 'csrc'}", f"-I{sysconfig.get_paths()['include']}", f"-I{np.get_include()}", *sources,
           "-o", str(d / "roofline" / f"_core{ext}"), "-ldl", "-lpthread", "-lm"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-5000:]
    return d, " ".join(libs)


def _run(sanitized_package, tmp_path, script):
    d, preload = sanitized_package
    env = dict(os.environ, LD_PRELOAD=preload, PYTHONPATH=str(d), ROOFLINE_CACHE_DIR=str(tmp_path / "cache"),
               ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=0",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1", PYTHONMALLOC="malloc")
    script = f"SANITIZED_DIR = {str(d)!r}\n" + script
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path,
                       timeout=600)
    out = p.stdout + p.stderr
    assert sanitizer_report(out) is None, out[-8000:]
    assert p.returncode == 0, out[-8000:]
    return p.stdout


def test_fast_subset_under_asan_and_ubsan(sanitized_package, tmp_path):
    pytest.importorskip("torch")
    assert "sanitized subset passed" in _run(sanitized_package, tmp_path, SUBSET)


HUGE_SHAPES = textwrap.dedent(r"""
    import roofline
    for op, args, kw in [("sum", [(2**62, 2**62, 4)], dict(out=())), ("add", [(2**62, 2**62, 4), (1,)], {}),
                         ("clone", [(2**40, 2**40, 0)], dict(out=(2**40, 2**40, 0)))]:
        try:
            roofline.cost(op, *args, **kw)
        except (ValueError, TypeError, OverflowError):
            pass
    print("huge shapes passed")
""")


def test_huge_shapes_under_ubsan(sanitized_package, tmp_path):
    assert "huge shapes passed" in _run(sanitized_package, tmp_path, HUGE_SHAPES)
