"""The CUDA driver (libcuda) and NVRTC, found and opened with dlopen on first use (never at import, never linked):
where the libraries may be (the system, the NVIDIA wheels), which NVRTC suits the driver, and the error types of
the GPU functions.
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from roofline import _core


GpuError = _core.GpuError
CudaUnavailableError = _core.CudaUnavailableError
CudaError = _core.CudaError
NvrtcError = _core.NvrtcError


# ---------------------------------------------------------------------------------------------------------------
# Finding and loading the libraries
# ---------------------------------------------------------------------------------------------------------------


def _driver_candidates() -> List[str]:
    """Where to look for libcuda: ROOFLINE_LIBCUDA_PATH alone if set, else the loader's search then known dirs."""
    explicit = os.environ.get("ROOFLINE_LIBCUDA_PATH")
    if explicit:
        return [explicit]
    return [
        "libcuda.so.1",
        "libcuda.so",
        "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
        "/usr/lib/aarch64-linux-gnu/libcuda.so.1",
        "/usr/lib64/libcuda.so.1",
        "/usr/local/nvidia/lib64/libcuda.so.1",
        "/usr/lib/wsl/lib/libcuda.so.1",
    ]


def _nvidia_wheel_dirs() -> List[Path]:
    """Directories named ``nvidia`` that pip's NVIDIA wheels install into (a namespace package)."""
    found: List[Path] = []
    for entry in sys.path:
        if entry:
            path = Path(entry) / "nvidia"
            if path.is_dir() and path not in found:
                found.append(path)
    return found


def _soname_major(path: str) -> Optional[int]:
    """CUDA major version a libnvrtc path belongs to (``libnvrtc.so.13`` or ``.../cu13/...``), if visible."""
    match = re.search(r"libnvrtc\.so\.(\d+)", path) or re.search(r"[/\\]cu(\d+)[/\\]", path)
    return int(match.group(1)) if match else None


def _nvrtc_candidates(driver_version: Optional[int] = None) -> List[str]:
    """Where to look for NVRTC: ROOFLINE_NVRTC_PATH alone if set; else pip wheels (nvidia-cuda-nvrtc for CUDA 13
    installs nvidia/cu13/lib/libnvrtc.so.13, the CUDA 12 wheel nvidia/cuda_nvrtc/lib/libnvrtc.so.12), then
    CUDA_HOME / CUDA_PATH, /usr/local/cuda, and finally the plain sonames for the loader's own search.

    With the driver's CUDA version known, candidates newer than the driver go last: a cubin from a newer NVRTC
    major version may not load on an older driver.
    """
    explicit = os.environ.get("ROOFLINE_NVRTC_PATH")
    if explicit:
        return [explicit]
    found: List[str] = []
    for base in _nvidia_wheel_dirs():
        for rel in ("cu13/lib/libnvrtc.so.13", "cuda_nvrtc/lib/libnvrtc.so.12", "cuda_nvrtc/lib/libnvrtc.so.11.2"):
            path = base / rel
            if path.exists():
                found.append(str(path))
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    for root in roots:
        if not root:
            continue
        for libdir in ("lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"):
            directory = Path(root) / libdir
            if directory.is_dir():
                names = sorted((p.name for p in directory.glob("libnvrtc.so*")), key=len)
                found.extend(str(directory / n) for n in names if "builtins" not in n)
    found.extend(["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"])
    unique = list(dict.fromkeys(found))
    if driver_version:
        driver_major = driver_version // 1000
        unique.sort(key=lambda p: (_soname_major(p) or 0) > driver_major)
    return unique


def _ensure_driver() -> str:
    """Load libcuda (once) and return its path; raise CudaUnavailableError saying how to fix it."""
    try:  # idempotent; runs cuInit each time, so a GPU that became unusable is reported with the hint below
        return _core.gpu_load_driver(_driver_candidates())
    except CudaUnavailableError as exc:
        if exc.call == "cuInit":
            hint = (
                "libcuda loaded, but the driver reports no usable GPU: check `nvidia-smi`, CUDA_VISIBLE_DEVICES, "
                "and that the driver supports this GPU"
            )
        else:
            hint = (
                "Measuring GPU ceilings needs the NVIDIA driver's libcuda.so.1, which ships with the driver (not "
                "with the CUDA toolkit or any pip wheel): install the NVIDIA driver, or set ROOFLINE_LIBCUDA_PATH "
                "to the libcuda.so.1 file"
            )
        raise CudaUnavailableError(f"{exc}. {hint}.") from None


def _preload_nvrtc_builtins(nvrtc_path: str) -> None:
    """NVRTC dlopens libnvrtc-builtins by soname when it compiles. A wheel's lib directory is not on the loader's
    search path (the nvidia-cuda-nvrtc 13.0 wheel's libnvrtc has no RPATH to its own directory), so load the
    builtins beside the chosen libnvrtc first: the later dlopen by soname then finds them already loaded."""
    directory = Path(nvrtc_path).parent
    if not directory.is_dir():
        return
    for lib in sorted(directory.glob("libnvrtc-builtins.so*")):
        if ".alt." in lib.name:
            continue
        try:
            ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)
        except OSError:
            pass


def _ensure_nvrtc() -> str:
    """Load NVRTC (once) and return its path; raise CudaUnavailableError saying how to fix it."""
    loaded = _core.gpu_loaded()["nvrtc"]
    if loaded:
        return loaded
    driver_version = None
    if _core.gpu_loaded()["driver"]:
        try:
            driver_version = _core.gpu_driver_version()
        except GpuError:
            driver_version = None
    try:
        path = _core.gpu_load_nvrtc(_nvrtc_candidates(driver_version))
        _preload_nvrtc_builtins(path)
        return path
    except CudaUnavailableError as exc:
        raise CudaUnavailableError(
            f"{exc}. Compiling the GPU benchmark kernels needs NVRTC (libnvrtc): `pip install nvidia-cuda-nvrtc` "
            "(CUDA 13) or `pip install nvidia-cuda-nvrtc-cu12` (CUDA 12), or install the CUDA toolkit, or set "
            "ROOFLINE_NVRTC_PATH to the libnvrtc.so file."
        ) from None


def nvrtc_info() -> Dict[str, Any]:
    """NVRTC in use: ``{"path", "version": (major, minor), "archs": [80, 86, ...]}`` (loads it if needed)."""
    path = _ensure_nvrtc()
    return {"path": path, "version": tuple(_core.gpu_nvrtc_version()), "archs": list(_core.gpu_nvrtc_archs())}
