"""The package builds and installs from its own source distribution: the sdist carries every file the C build
needs, a wheel built from the unpacked sdist (nothing else of the repository in reach) has an extension without
debug information, and that wheel, installed into a fresh virtual environment, imports and counts.

The builds call setuptools' PEP 517 hooks directly (what ``python -m build --no-isolation`` and ``pip wheel
--no-build-isolation`` call), so the test needs no network and no build frontend. The fresh environment gets the
running interpreter's site-packages as a plain path entry (NumPy, and torch where installed, without reinstalling
them; ``.pth`` files there, an editable roofline's included, are not processed), and the test checks that
``roofline`` is imported from the installed wheel.
"""

import os
import struct
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 300


def _hook(hook: str, cwd: Path, out: Path) -> Path:
    """Run one setuptools PEP 517 hook (``build_sdist`` or ``build_wheel``) in ``cwd``; the file it made."""
    code = f"import sys; from setuptools import build_meta as b; print(b.{hook}(sys.argv[1]))"
    env = dict(os.environ)
    env.pop("ROOFLINE_DEBUG", None)  # the default build
    res = subprocess.run([sys.executable, "-c", code, str(out)], cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=TIMEOUT)
    assert res.returncode == 0, f"{hook} failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return out / res.stdout.strip().splitlines()[-1]


def _tracked(prefix: str) -> list[str]:
    """Files of the repository under ``prefix`` (git's list when this is a checkout, else the directory's)."""
    try:
        out = subprocess.run(["git", "ls-files", prefix], cwd=ROOT, capture_output=True, text=True, timeout=30)
        files = out.stdout.split() if out.returncode == 0 else []
    except OSError:
        files = []
    return files or sorted(str(p.relative_to(ROOT)) for p in (ROOT / prefix).iterdir() if p.is_file())


def _missing_build_requirements() -> str:
    """What of pyproject.toml's build requirements this interpreter lacks ("" when it has them all): the hooks
    run here, without an isolated build environment."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        st = tuple(int(x) for x in version("setuptools").split(".")[:2])
    except (PackageNotFoundError, ValueError):
        return "setuptools"
    if st < (68, 0):
        return f"setuptools>=68 (this is {version('setuptools')})"
    if st < (70, 1):  # bdist_wheel moved into setuptools in 70.1
        try:
            version("wheel")
        except PackageNotFoundError:
            return "wheel"
    return ""


@pytest.fixture(scope="module")
def sdist(tmp_path_factory) -> Path:
    missing = _missing_build_requirements()
    if missing:
        pytest.skip(f"the build runs in this interpreter, which lacks {missing}")
    return _hook("build_sdist", ROOT, tmp_path_factory.mktemp("sdist"))


def test_sdist_carries_every_file_the_build_needs(sdist):
    with tarfile.open(sdist) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    needed = _tracked("csrc") + _tracked("cuda") + ["LICENSE", "README.md", "CHANGELOG.md", "setup.py",
                                                     "pyproject.toml"]
    needed += [f for f in _tracked("roofline") if f.endswith(".py")]
    assert [f for f in needed if f not in names] == []
    assert any(f.endswith(".h") for f in needed) and any(f.endswith(".cuh") for f in needed)
    assert not [n for n in names if n.startswith(("tests/", "notebooks/", "bench/")) or n.endswith((".so", ".o"))]


def _elf_sections(path: Path) -> list[str]:
    """Section names of a 64-bit little-endian ELF file."""
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, "not a 64-bit little-endian ELF file"
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    heads = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    str_off, str_size = heads[shstrndx][4], heads[shstrndx][5]
    strtab = data[str_off:str_off + str_size]
    return [strtab[h[0]:strtab.index(b"\0", h[0])].decode() for h in heads]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="checks an ELF extension and a POSIX venv")
def test_wheel_from_the_sdist_installs_into_a_fresh_venv_and_counts(sdist, tmp_path):
    with tarfile.open(sdist) as t:
        t.extractall(tmp_path / "src", filter="data")
    (src,) = (tmp_path / "src").iterdir()
    wheel = _hook("build_wheel", src, tmp_path / "wheel")
    assert wheel.name.startswith("roofline-") and wheel.suffix == ".whl"

    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        (ext,) = [n for n in names if n.startswith("roofline/_core") and n.endswith(".so")]
        z.extract(ext, tmp_path / "unzipped")
    assert {"roofline/cuda/mma.cu", "roofline/cuda/rl_device.cuh"} <= set(names)
    sections = _elf_sections(tmp_path / "unzipped" / ext)
    assert ".text" in sections  # the parser read the real table
    assert [s for s in sections if s.startswith((".debug", ".zdebug"))] == []

    # the environment of a user's shell: no PYTHONPATH pointing into a checkout
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=TIMEOUT)
    py = venv / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True, timeout=60, env=env).stdout.strip()
    deps = [p for p in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]} if p != site]
    (Path(site) / "zz_parent_site.pth").write_text("\n".join(deps) + "\n")  # after the venv's own packages
    res = subprocess.run([str(py), "-m", "pip", "install", "--no-deps", "--no-index", "--disable-pip-version-check",
                          str(wheel)], capture_output=True, text=True, timeout=TIMEOUT, env=env)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]

    check = (
        "import sys, roofline\n"
        "assert roofline.__file__.startswith(sys.prefix), roofline.__file__\n"
        f"assert roofline.__version__ == {_pyproject_version()!r}, roofline.__version__\n"
        "c = roofline.cost('mm', [(64, 32), (32, 16)])\n"
        "assert c.matrix_flops == 2 * 64 * 32 * 16 and c.bytes_read == 4 * (64 * 32 + 32 * 16), c\n"
        "try:\n"
        "    import torch\n"
        "except ImportError:\n"
        "    print('no torch'); sys.exit(0)\n"
        "m = torch.nn.Linear(32, 16)\n"
        "with roofline.measure(m, timing=None) as r:\n"
        "    m(torch.randn(64, 32))\n"
        "assert r.matrix_flops == 2 * 64 * 32 * 16, r.matrix_flops\n"
        "print('measured', r.matrix_flops)\n"
    )
    res = subprocess.run([str(py), "-c", check], cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT,
                         env=env)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert res.stdout.strip() in ("no torch", f"measured {2 * 64 * 32 * 16}")


def _pyproject_version() -> str:
    """pyproject.toml's [project] version, read with a TOML parser (not the package's own reading)."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


def test_the_version_has_one_source_and_every_report_carries_it():
    import re

    import roofline
    from roofline._util import _version

    v = _pyproject_version()
    assert roofline.__version__ == v
    assert re.fullmatch(r"\d+\.\d+\.\d+", v), v  # MAJOR.MINOR.PATCH
    assert _version.from_pyproject('[project]\nname = "other"\nversion = "9.9.9"\n') is None
    assert _version.from_pyproject('[tool.x]\nversion = "1.0.0"\n[project]\nname = "roofline"\nversion = "2.3.4"\n'
                                   '[tool.y]\nversion = "5.0.0"\n') == "2.3.4"
    # the changelog's newest entry is this version
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.search(r"^## (\S+)", changelog, re.M).group(1) == v
    torch = pytest.importorskip("torch")
    m = torch.nn.Linear(4, 2)
    fixed = roofline.Ceilings(device="cpu", name="fixed", fingerprint="fixed",
                              peaks={("vector", "float32"): roofline.Ceiling(1e9)},
                              bandwidths={"DRAM": roofline.Ceiling(1e9)})
    with roofline.measure(m, timing=None, ceilings=fixed) as r:
        m(torch.randn(3, 4))
    assert r.meta["version"] == v and roofline.load(r.to_json()).meta["version"] == v
    assert f"roofline {v}" in r._repr_html_()
