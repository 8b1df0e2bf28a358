"""Measured GPU ceilings: DRAM and L2 bandwidth, vector FMA and tensor-core throughput per dtype.

The kernels live in ``cuda/*.cu`` and are compiled at run time by NVRTC for the exact architecture of the device
(``-arch=sm_XY``, or ``sm_90a`` for Hopper's wgmma), with the cubins cached on disk. The CUDA driver (libcuda) and
NVRTC are opened with dlopen on first use, never at import and never linked, so ``import roofline`` works on a
machine without CUDA and only the GPU functions here raise :class:`CudaUnavailableError`.

Public entry points: :func:`measure` (the ceilings dict that ``roofline.ceilings`` consumes), :func:`device_count`,
:func:`device_info`, :func:`compile` (NVRTC with the cubin cache), :func:`kernels` (the benchmark registry).

Counting conventions (see docs/gpu.md for the arithmetic of each kernel): a fused multiply-add is 2 FLOPs, a
matrix instruction of shape m x n x k is ``2*m*n*k`` FLOPs (integer "ops" for int8), and bytes are those the
kernel's own loop reads plus those it writes (a copy counts both). Every figure is a median over repeated timed
launches after warm-up, timed with CUDA events.
"""

from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import math
import os
import re
import statistics
import struct
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from roofline import _core
from roofline._util import _output
from roofline._util._cachedir import ensure_private_dir
from roofline._util._warn import warn

GpuError = _core.GpuError
CudaUnavailableError = _core.CudaUnavailableError
CudaError = _core.CudaError
NvrtcError = _core.NvrtcError

__all__ = [
    "GpuError",
    "CudaUnavailableError",
    "CudaError",
    "NvrtcError",
    "measure",
    "device_count",
    "device_info",
    "compile",
    "compile_source",
    "kernels",
    "kernel_sources",
    "kernel_headers",
    "nvrtc_info",
    "cache_dir",
    "PEAK_KEYS",
    "BANDWIDTH_KEYS",
]

#: Keys of ``measure()["peaks"]`` (FLOP/s; int8 in integer op/s). A key the device cannot run is None.
PEAK_KEYS = (
    "vector/float64",
    "vector/float32",
    "vector/float16",
    "vector/bfloat16",
    "matrix/float16",
    "matrix/bfloat16",
    "matrix/tfloat32",
    "matrix/int8",
    "matrix/float8_e4m3fn",
)

#: Keys of ``measure()["bandwidth"]`` (bytes/s). "DRAM" is the copy figure (bytes read + bytes written).
BANDWIDTH_KEYS = ("DRAM", "DRAM_read", "DRAM_write", "DRAM_copy", "L2")

# Bump when the kernels' compile options or the cache layout change in a way the key would not notice.
_CACHE_FORMAT = "roofline-cubin-1"

# CUDA errors after which the context is unusable for the rest of the process.
_STICKY_ERRORS = {700, 702, 714, 715, 716, 717, 718, 719}
# Errors loading a cubin that usually mean "NVRTC is newer than the driver".
_IMAGE_ERRORS = {200, 209, 218, 222}

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


# ---------------------------------------------------------------------------------------------------------------
# Kernel sources, compilation and the cubin cache
# ---------------------------------------------------------------------------------------------------------------


def _kernel_dir() -> Path:
    """Directory of the ``.cu`` files: ``roofline/cuda`` when installed as package data, else the repo's cuda/."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "cuda", package.parent / "cuda"):
        if (candidate / "bandwidth.cu").is_file():
            return candidate
    raise FileNotFoundError(
        f"roofline's CUDA kernel sources were not found (looked in {package / 'cuda'} and {package.parent / 'cuda'}); "
        "the installation is incomplete"
    )


def kernel_sources() -> Dict[str, Path]:
    """Every kernel source file, by name without the ``.cu`` suffix."""
    return {p.stem: p for p in sorted(_kernel_dir().glob("*.cu"))}


def kernel_headers() -> Dict[str, str]:
    """The headers the kernel sources include (``cuda/*.cuh``), by include name, with their text: NVRTC gets them
    with the source (it reads no files), and the cubin cache key includes them."""
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(_kernel_dir().glob("*.cuh"))}


def cache_dir() -> Path:
    """Cubin cache directory: ``$ROOFLINE_CACHE_DIR/cubin``, else ``$XDG_CACHE_HOME/roofline/cubin``, else
    ``~/.cache/roofline/cubin``. It is used only when it is the current user's own and nobody else can write to
    it (see :func:`roofline._util._cachedir.ensure_private_dir`): a cubin planted there would run on the GPU."""
    root = os.environ.get("ROOFLINE_CACHE_DIR")
    if root:
        return Path(root) / "cubin"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "roofline" / "cubin"


def _normalize_arch(arch: Any) -> str:
    """``"sm_90"``, ``"sm_90a"``, ``"90"``, ``90`` or ``(9, 0)`` -> ``"sm_90"`` / ``"sm_90a"``."""
    if isinstance(arch, (tuple, list)) and len(arch) == 2:
        return f"sm_{int(arch[0])}{int(arch[1])}"
    text = str(arch).strip().lower()
    match = re.fullmatch(r"(?:sm_|compute_)?(\d{2,3})([af]?)", text)
    if not match:
        raise ValueError(f"not a CUDA architecture: {arch!r} (expected e.g. 'sm_90', 'sm_90a', 90 or (9, 0))")
    return f"sm_{match.group(1)}{match.group(2)}"


def _cache_key(source: str, options: Sequence[str], nvrtc_version: Tuple[int, int], arch: str,
               headers: Optional[Dict[str, str]] = None) -> str:
    """Hash naming a cubin: the source text, every compiler option, NVRTC's version, the architecture, and the
    name and text of every header the compile is given."""
    h = hashlib.sha256()
    parts = [_CACHE_FORMAT, source, "\0".join(options), "%d.%d" % tuple(nvrtc_version), arch]
    for name, text in sorted((headers or {}).items()):
        parts += ["header", name, text]
    for part in parts:
        h.update(part.encode("utf-8"))
        h.update(b"\0\1")
    return h.hexdigest()


def _is_cubin(data: bytes) -> bool:
    """True when ``data`` is a complete CUDA ELF image (the C layer checks the header and that every table,
    section and segment lies inside the data), so a truncated cache file is never handed to the driver."""
    try:
        _core.gpu_check_cubin(data)
    except ValueError:
        return False
    return True


_warned_cache: set = set()


def _usable_cache_dir() -> Optional[Path]:
    """:func:`cache_dir`, created private if missing, or None (with one warning per directory and process) when it
    may not be trusted: not owned by the current user, writable by others, or a symbolic link."""
    directory = cache_dir()
    reason = ensure_private_dir(directory)
    if reason is None:
        return directory
    if str(directory) not in _warned_cache:
        _warned_cache.add(str(directory))
        warn(f"roofline: not using the cubin cache: {reason}; kernels are compiled afresh each time", RuntimeWarning)
    return None


def compile_source(source: str, name: str, arch: Any, options: Sequence[str] = (), cache: bool = True,
                   headers: Optional[Dict[str, str]] = None) -> bytes:
    """Compile CUDA C++ ``source`` with NVRTC into a cubin for ``arch`` and return it.

    ``name`` is the file name used in diagnostics; ``headers`` ({include name: text}) are what the source's
    ``#include "name"`` lines find. The cubin is cached under :func:`cache_dir` keyed by a hash of the source, the
    headers, the options, NVRTC's version and the architecture; a cached file is reused when it is a complete
    CUDA ELF image, and the cache is skipped when its directory is not private to the user. Raises
    :class:`NvrtcError` (with ``.log`` holding the full compile log) when the source does not compile, and
    :class:`CudaUnavailableError` when NVRTC cannot be found.
    """
    arch = _normalize_arch(arch)
    _ensure_nvrtc()
    opts = [f"-arch={arch}", "-std=c++17", *options]
    version = tuple(_core.gpu_nvrtc_version())
    key = _cache_key(source, opts, version, arch, headers)
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(name).stem)
    directory = _usable_cache_dir() if cache else None
    path = directory / f"{stem}-{arch}-{key[:32]}.cubin" if directory is not None else None
    if path is not None:
        try:
            data = path.read_bytes()
            if _is_cubin(data):
                return data
        except OSError:
            pass
    cubin, _log = _core.gpu_compile(source, name, opts, dict(headers) if headers else None)
    if path is not None:
        _write_atomic(path, cubin)
    return cubin


def _write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` (in a directory already checked private) atomically
    (:func:`roofline._util._output.write`); a cache that cannot be written is skipped silently (the cubin is still
    returned to the caller)."""
    try:
        _output.write(path, data, where="the kernel cache")
    except OSError:
        pass


# Compile-time constants of each source. The work arithmetic below reads the same numbers, so the FLOP and byte
# counts always match the loops that ran.
_DEFINES: Dict[str, Dict[str, int]] = {
    "bandwidth": {"RL_BW_UNROLL": 4, "RL_L2_LOADS": 4},
    "fma": {"RL_FMA_CHAINS": 8, "RL_FMA_UNROLL": 64},
    "mma": {"RL_MMA_CHAINS": 8, "RL_MMA_SETS": 4},
    "wgmma": {"RL_WGMMA_UNROLL": 16, "RL_WGMMA_THREADS": 256, "RL_WGMMA_TILES": 4},
}


def _source_options(source_name: str) -> List[str]:
    return [f"-D{k}={v}" for k, v in sorted(_DEFINES.get(source_name, {}).items())]


def compile(source_name: str, arch: Any) -> bytes:  # noqa: A001 - the public name the API promises
    """Compile the kernel source ``cuda/<source_name>.cu`` for ``arch`` (e.g. ``"sm_90"``) and return the cubin.

    Uses the cubin cache (see :func:`compile_source`), the shared headers (:func:`kernel_headers`) and the
    compile-time constants the benchmarks assume.
    """
    stem = Path(source_name).stem
    sources = kernel_sources()
    if stem not in sources:
        raise ValueError(f"no kernel source {source_name!r}; available: {', '.join(sources)}")
    text = sources[stem].read_text(encoding="utf-8")
    return compile_source(text, f"{stem}.cu", arch, _source_options(stem), headers=kernel_headers())


# ---------------------------------------------------------------------------------------------------------------
# Devices
# ---------------------------------------------------------------------------------------------------------------


def device_count() -> int:
    """Number of CUDA devices the driver sees (raises CudaUnavailableError without a driver)."""
    _ensure_driver()
    return _core.gpu_device_count()


def _uuid_text(raw: Optional[bytes]) -> Optional[str]:
    if not raw:
        return None
    h = raw.hex()
    return f"GPU-{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def device_info(index: int = 0) -> Dict[str, Any]:
    """Driver-reported properties of device ``index``.

    Keys: name, index, uuid, compute_capability [major, minor], sm_count, clock_hz (the boost clock the driver
    reports), memory_clock_hz, memory_bus_width_bits, memory_bandwidth_theoretical (bytes/s: 2 transfers per
    memory clock x bus width / 8, or None when the driver does not report both), l2_cache_bytes,
    total_memory_bytes, max_threads_per_sm, registers_per_sm, max_shared_per_block_optin, pci_bus_id,
    driver_version (1000*major + 10*minor), fingerprint (stable hash of identity, clocks and driver version).
    """
    _ensure_driver()
    p = _core.gpu_device_props(index)
    clock_hz = p["clock_khz"] * 1000 if p["clock_khz"] else None
    mem_clock_hz = p["memory_clock_khz"] * 1000 if p["memory_clock_khz"] else None
    bus = p["memory_bus_width_bits"]
    theoretical = float(2 * mem_clock_hz * bus // 8) if mem_clock_hz and bus else None
    driver_version = _core.gpu_driver_version()
    uuid = _uuid_text(p["uuid"])
    pci = None
    if p["pci_bus"] is not None:
        pci = "%04x:%02x:%02x.0" % (p["pci_domain"] or 0, p["pci_bus"], p["pci_device"] or 0)
    identity = "|".join(
        str(x)
        for x in (
            p["name"],
            uuid,
            p["compute_capability"],
            p["sm_count"],
            p["clock_khz"],
            p["memory_clock_khz"],
            bus,
            p["total_memory_bytes"],
            driver_version,
        )
    )
    return {
        "name": p["name"],
        "index": index,
        "uuid": uuid,
        "compute_capability": [p["compute_capability"][0], p["compute_capability"][1]],
        "sm_count": p["sm_count"],
        "clock_hz": clock_hz,
        "memory_clock_hz": mem_clock_hz,
        "memory_bus_width_bits": bus,
        "memory_bandwidth_theoretical": theoretical,
        "l2_cache_bytes": p["l2_cache_bytes"],
        "total_memory_bytes": p["total_memory_bytes"],
        "max_threads_per_sm": p["max_threads_per_sm"],
        "registers_per_sm": p["registers_per_sm"],
        "max_shared_per_block_optin": p["max_shared_per_block_optin"],
        "pci_bus_id": pci,
        "driver_version": driver_version,
        "fingerprint": hashlib.sha256(identity.encode("utf-8")).hexdigest()[:16],
    }


# ---------------------------------------------------------------------------------------------------------------
# The benchmark registry
# ---------------------------------------------------------------------------------------------------------------

CC = Tuple[int, int]


@dataclasses.dataclass(frozen=True)
class _Settings:
    """How long and how often to run each benchmark."""

    target_s: float  # wanted duration of one timed launch of a compute kernel
    warmup: int  # untimed launches before timing
    reps: int  # timed launches (the median is reported)
    bw_reps: int  # timed launches of the bandwidth kernels
    dram_bytes_max: int  # largest DRAM buffer
    warmup_s: float  # untimed work at the start so the clocks leave idle


_QUICK = _Settings(target_s=0.004, warmup=2, reps=9, bw_reps=15, dram_bytes_max=1 << 30, warmup_s=0.25)
_FULL = _Settings(target_s=0.02, warmup=5, reps=31, bw_reps=61, dram_bytes_max=2 << 30, warmup_s=1.0)


@dataclasses.dataclass
class _Context:
    index: int
    info: Dict[str, Any]
    settings: _Settings
    cubins: Dict[Tuple[str, str], bytes] = dataclasses.field(default_factory=dict)
    compile_errors: Dict[Tuple[str, str], GpuError] = dataclasses.field(default_factory=dict)
    last: Optional[Dict[str, Any]] = None  # result of the latest launch (the timed one, after a runner returns)
    unchecked_params: bool = False  # some launch ran without the driver checking its arguments

    @property
    def cc(self) -> CC:
        return (self.info["compute_capability"][0], self.info["compute_capability"][1])

    def arch(self, suffix: str = "") -> str:
        major, minor = self.cc
        return f"sm_{major}{minor}{suffix}"

    def prepare(self, source: str, suffix: str = "") -> None:
        """Compile (or fetch from the cache) ``source`` for this device now; a compile error is kept and raised
        by :meth:`cubin` when a benchmark asks for it, so the other benchmarks still run."""
        key = (source, self.arch(suffix))
        if key in self.cubins or key in self.compile_errors:
            return
        try:
            self.cubins[key] = compile(source, key[1])
        except (NvrtcError, GpuError) as exc:
            self.compile_errors[key] = exc

    def cubin(self, source: str, suffix: str = "") -> bytes:
        key = (source, self.arch(suffix))
        self.prepare(source, suffix)
        if key in self.compile_errors:
            raise self.compile_errors[key]
        return self.cubins[key]


@dataclasses.dataclass(frozen=True)
class Benchmark:
    """One ceiling benchmark: which result key it measures, with which kernel, and where it can run."""

    key: str  # "matrix/bfloat16", "bandwidth/DRAM_copy", ...
    label: str  # short text for progress callbacks
    source: str  # cuda/<source>.cu
    kernel: str  # extern "C" name
    supported: Callable[[CC], bool]
    runner: Callable[["_Context", "Benchmark"], Tuple[float, str]]
    params: Tuple[Tuple[str, Any], ...] = ()
    arch_suffix: str = ""  # "a" for sm_90a-only instructions

    def param(self, name: str) -> Any:
        return dict(self.params)[name]


def _median_s(result: Dict[str, Any]) -> float:
    times = [t for t in result["times_s"] if t > 0]
    if not times:
        raise GpuError(f"every timed launch took 0 s: {result!r}")
    return statistics.median(times)


def _clock_hz(result: Optional[Dict[str, Any]]) -> Optional[float]:
    """Average SM clock of a launch's timed runs, from the cycles and nanoseconds the kernel's block 0 counted
    (``%clock64`` / ``%globaltimer``), or None when the kernel did not count them."""
    if not result:
        return None
    cycles, ns = result.get("clock_cycles") or 0, result.get("clock_ns") or 0
    if cycles <= 0 or ns <= 0:
        return None
    return cycles / ns * 1e9


def _launch(
    ctx: _Context,
    bench: Benchmark,
    buffers: Sequence[Tuple[int, int]],
    args: Sequence[Tuple[str, Any]],
    *,
    block: int,
    warmup: int,
    reps: int,
    grid: int = 0,
    max_blocks_per_sm: int = 0,
    readback: Optional[Tuple[int, int, int]] = None,
    launches_per_rep: int = 1,
) -> Dict[str, Any]:
    cubin = ctx.cubin(bench.source, bench.arch_suffix)
    try:
        result = _core.gpu_bench(
            ctx.index, cubin, bench.kernel, grid, block, 0, list(buffers), list(args), warmup, reps, readback,
            max_blocks_per_sm, launches_per_rep,
        )
    except CudaError as exc:
        raise _explain(exc, ctx, bench) from None
    ctx.last = result
    if not result.get("params_checked", True):
        ctx.unchecked_params = True
    return result


def _explain(exc: CudaError, ctx: _Context, bench: Benchmark) -> CudaError:
    """Add what the user can do to a driver error from a benchmark launch."""
    text = f"{bench.label} ({bench.kernel} from {bench.source}.cu for {ctx.arch(bench.arch_suffix)}): {exc}"
    if exc.code in _STICKY_ERRORS:
        text += ". The CUDA context of this process is now unusable; restart the process"
    elif exc.code in _IMAGE_ERRORS:
        version = "%d.%d" % tuple(_core.gpu_nvrtc_version())
        driver = _core.gpu_driver_version()
        text += (
            f". The cubin came from NVRTC {version}; the driver supports CUDA {driver // 1000}.{driver % 1000 // 10}."
            " Use an NVRTC whose major version is not newer than the driver's (ROOFLINE_NVRTC_PATH)"
        )
    new = CudaError(text)
    new.call, new.code = exc.call, exc.code
    return new


# Sentinels for the "store only if the result equals this" guards: a NaN never compares equal; the integer ones
# are values the kernels' folds cannot produce (see the .cu files).
_NAN = float("nan")
_INT_SENTINEL = 0x5BD1E995

# Calibration: probes grow the iteration count 16x at a time until one lasts _PROBE_MIN_S, for at most
# _PROBE_MAX probes.
_PROBE_MIN_S = 1e-4
_PROBE_MAX = 6
_ITERS_MAX = (1 << 31) - 1


def _calibrate(ctx: _Context, bench: Benchmark, make_args: Callable[[int], list], launch_kw: Dict[str, Any]) -> Tuple[int, Dict[str, Any]]:
    """Find an iteration count whose launch lasts about ``settings.target_s``, then time it.

    Probes start at 16 iterations and grow 16x while a probe is shorter than 100 us (at most 6 probes), then the
    count scales linearly from the last probe, the one actually timed, to the target. Returns (iterations, timed
    result).
    """
    target = ctx.settings.target_s
    common = {"block": launch_kw["block"], "grid": launch_kw.get("grid", 0),
              "max_blocks_per_sm": launch_kw.get("max_blocks_per_sm", 0)}
    iters = 16
    for probe_number in range(1, _PROBE_MAX + 1):
        probe = _launch(ctx, bench, launch_kw["buffers"], make_args(iters), warmup=1, reps=1, **common)
        elapsed = _median_s(probe)
        if elapsed >= _PROBE_MIN_S or probe_number == _PROBE_MAX or iters * 16 > _ITERS_MAX:
            break
        iters *= 16
    # `elapsed` is the time of `iters` iterations: the count that was probed last.
    iters = max(1, min(_ITERS_MAX, int(iters * target / elapsed)))
    result = _launch(ctx, bench, launch_kw["buffers"], make_args(iters), warmup=ctx.settings.warmup,
                     reps=ctx.settings.reps, **common)
    return iters, result


def _describe_timing(result: Dict[str, Any], median: float) -> str:
    per = result.get("launches_per_rep", 1) or 1
    batch = f" (timed {per} back-to-back launches per CUDA event pair)" if per > 1 else ""
    return (
        f"{result['grid']} blocks x {result['block']} threads, median of {len(result['times_s'])} launches of "
        f"{median * 1e3:.3g} ms{batch}"
    )


# ---- bandwidth ------------------------------------------------------------------------------------------------

_FILL = 0x3C00_3C00  # buffer contents: a nonzero pattern (two fp16 1.0s per word)
_LAUNCHES_PER_REP_MAX = 1000


def _dram_bytes(ctx: _Context) -> int:
    """Buffer size for the DRAM kernels: 32x the L2 (so nothing survives in it) within [256 MiB, max], at most a
    sixth of the free memory (a copy needs two buffers), rounded down to a multiple of 1 MiB."""
    l2 = ctx.info.get("l2_cache_bytes") or (64 << 20)
    want = min(max(256 << 20, 32 * l2), ctx.settings.dram_bytes_max)
    try:
        free, _total = _core.gpu_mem_info(ctx.index)
        want = min(want, free // 6)
    except GpuError:
        pass
    size = (want >> 20) << 20
    if size < (16 << 20):
        raise GpuError(f"too little free device memory for the bandwidth benchmarks ({want} bytes usable)")
    return size


def _launches_per_rep(ctx: _Context, one_launch_s: float) -> int:
    """How many launches one CUDA event pair times so that the pair spans about ``settings.target_s``: an event
    pair around a single sub-millisecond launch adds its own fixed cost to the time and reads the rate low."""
    if one_launch_s <= 0:
        return 1
    return max(1, min(_LAUNCHES_PER_REP_MAX, math.ceil(ctx.settings.target_s / one_launch_s)))


def _run_dram(ctx: _Context, bench: Benchmark) -> Tuple[float, str]:
    """DRAM read / write / copy over one large buffer per operand. Bytes per launch: 16*n read, 16*n written, or
    2*16*n copied, with n = buffer bytes / 16. One probe launch gives the time of a launch; each timed sample
    then covers enough back-to-back launches to last about ``settings.target_s`` (time per launch reported)."""
    kind = bench.param("kind")
    size = _dram_bytes(ctx)
    n = size // 16
    s = ctx.settings
    if kind == "read":
        buffers = [(size, _FILL), (128, 0)]
        args = [("buffer", 0), ("u64", n), ("buffer", 1), ("i32", _INT_SENTINEL)]
        moved = 16 * n
    elif kind == "write":
        buffers = [(size, 0)]
        args = [("buffer", 0), ("u64", n), ("i32", 0x1234)]
        moved = 16 * n
    else:
        buffers = [(size, _FILL), (size, 0)]
        args = [("buffer", 0), ("buffer", 1), ("u64", n)]
        moved = 2 * 16 * n
    probe = _launch(ctx, bench, buffers, args, block=256, warmup=1, reps=1)
    per_rep = _launches_per_rep(ctx, _median_s(probe))
    result = _launch(ctx, bench, buffers, args, block=256, warmup=max(3, s.warmup), reps=s.bw_reps,
                     launches_per_rep=per_rep)
    median = _median_s(result)
    what = {"read": "read", "write": "written", "copy": "read + written"}[kind]
    text = (
        f"{bench.kernel}: 16-byte accesses over {size >> 20} MiB, bytes {what} / time; "
        + _describe_timing(result, median)
    )
    return moved / median, text


def _l2_shape(l2_bytes: int, full_grid: int, block: int, sm_count: int) -> Tuple[int, int]:
    """(blocks, n) for the L2 kernel: n 16-byte words, a whole number of trips of RL_L2_LOADS loads by every
    thread of ``blocks`` blocks, so that no thread has a partial trip.

    The working set stays near a quarter of the L2 and never above a third of it. The whole device (``full_grid``
    blocks) is used when one trip of every thread fits in that third; on a GPU whose L2 is small for its thread
    count, the grid shrinks to whole waves of ``sm_count`` blocks (at least one block per multiprocessor).
    """
    loads = _DEFINES["bandwidth"]["RL_L2_LOADS"]
    per_block = loads * block * 16  # bytes one block reads in one trip
    blocks = full_grid
    if blocks * per_block > l2_bytes // 3:
        sms = max(1, sm_count)
        blocks = max(sms, (l2_bytes // 3 // per_block) // sms * sms)
        blocks = min(blocks, full_grid)
    trips = max(1, (l2_bytes // 4) // (blocks * per_block))
    return blocks, trips * blocks * block * loads


def _run_l2(ctx: _Context, bench: Benchmark) -> Tuple[float, str]:
    """L2 read: a working set of about a quarter of the L2 (a whole number of RL_L2_LOADS-load trips per thread,
    see :func:`_l2_shape`), read `passes` times with L1-bypassing loads. Bytes per launch: 16 * n * passes."""
    l2 = ctx.info.get("l2_cache_bytes") or (4 << 20)
    block = 256
    sink = (128, 0)

    def make_args(n: int, passes: int) -> list:
        return [("buffer", 0), ("u64", n), ("i32", passes), ("buffer", 1), ("i32", _INT_SENTINEL)]

    # One short launch to learn the grid that fills the device.
    shape_probe = _launch(ctx, bench, [(1 << 20, _FILL), sink], make_args(1 << 16, 1), block=block, warmup=0,
                          reps=1)
    blocks, n = _l2_shape(l2, shape_probe["grid"], block, ctx.info.get("sm_count") or 1)
    size = 16 * n
    passes, result = _calibrate(ctx, bench, lambda p: make_args(n, p),
                                {"buffers": [(size, _FILL), sink], "block": block, "grid": blocks})
    median = _median_s(result)
    loads = _DEFINES["bandwidth"]["RL_L2_LOADS"]
    text = (
        f"{bench.kernel}: {size >> 10} KiB working set (L2 is {l2 >> 20} MiB) read {passes} times with "
        f"ld.global.cg (L1 bypassed), 16-byte accesses, {n // (blocks * block)} per thread per pass in trips of "
        f"{loads} loads in flight; " + _describe_timing(result, median)
    )
    return 16 * n * passes / median, text


# ---- vector FMA -----------------------------------------------------------------------------------------------


def _run_fma(ctx: _Context, bench: Benchmark) -> Tuple[float, str]:
    """FLOPs per launch = threads * iters * RL_FMA_UNROLL * RL_FMA_CHAINS * lanes * 2."""
    lanes = bench.param("lanes")
    argkind = bench.param("argkind")
    chains = _DEFINES["fma"]["RL_FMA_CHAINS"]
    unroll = _DEFINES["fma"]["RL_FMA_UNROLL"]
    if argkind == "x2":
        tail = [("f32", 0.999), ("f32", 0.001), ("u32", 0xFFFFFFFF)]  # XOR of positive halves: sign bits stay 0
    else:
        tail = [(argkind, 0.999), (argkind, 0.001), (argkind, _NAN)]

    def make_args(iters: int) -> list:
        return [("buffer", 0), ("i32", iters)] + tail

    iters, result = _calibrate(ctx, bench, make_args, {"buffers": [(256, 0)], "block": 256})
    median = _median_s(result)
    threads = result["grid"] * result["block"]
    flops = 2 * threads * iters * unroll * chains * lanes
    text = (
        f"{bench.param('instruction')}: {chains} independent chains x {unroll} per loop x {iters} loops per "
        f"thread, {lanes} lane(s) per instruction, 2 FLOPs per FMA; " + _describe_timing(result, median)
    )
    return flops / median, text


# ---- tensor cores ---------------------------------------------------------------------------------------------

# Result check of the tensor-core kernels (their `check` argument = 1): all-ones operands, one block, a few loops.
_CHECK_ITERS = 4
_CHECK_BLOCK = 256


def _tensor_check_layout(bench: Benchmark) -> Tuple[int, int]:
    """(threads, values per thread) the check mode of a tensor-core kernel stores: block 0's accumulators."""
    if bench.source == "wgmma":
        return _DEFINES["wgmma"]["RL_WGMMA_THREADS"], 128
    return _CHECK_BLOCK, _DEFINES["mma"]["RL_MMA_CHAINS"] * 4


def _tensor_check_expected(bench: Benchmark, iters: int) -> List[float]:
    """What a tensor-core kernel's check mode must store after ``iters`` loops on all-ones operands: each matrix
    instruction adds K (the dot product of K ones) to every accumulator element, and the kernels start from
    known values (see cuda/mma.cu and cuda/wgmma.cu).

    mma.sync: value (c, j) of a thread, for accumulator chain c and element j, is INIT(c, j) + iters * K, with
    INIT(c, j) = 0.125 * (4c + j) for a float accumulator and 4c + j for int32. wgmma: value i of a thread is
    (i & 15) + iters * RL_WGMMA_UNROLL * K."""
    _m, _n, k = bench.param("shape")
    threads, per_thread = _tensor_check_layout(bench)
    if bench.source == "wgmma":
        step = iters * _DEFINES["wgmma"]["RL_WGMMA_UNROLL"] * k
        one = [(i & 15) + step if bench.param("integer") else float((i & 15) + step) for i in range(per_thread)]
    else:
        integer = bench.param("integer")
        one = [(i if integer else 0.125 * i) + iters * k for i in range(per_thread)]
    return one * threads


def _tensor_check_compare(bench: Benchmark, data: bytes, iters: int) -> List[str]:
    """Compare the bytes a check launch read back with :func:`_tensor_check_expected`; return a description of
    each of the first few mismatches (an empty list when every value matches exactly)."""
    expected = _tensor_check_expected(bench, iters)
    code = "i" if bench.param("integer") else "f"
    if len(data) != 4 * len(expected):
        return [f"read back {len(data)} bytes, expected {4 * len(expected)}"]
    got = struct.unpack(f"<{len(expected)}{code}", data)
    _threads, per_thread = _tensor_check_layout(bench)
    problems = []
    for index, (g, e) in enumerate(zip(got, expected)):
        if g != e:
            thread, value = divmod(index, per_thread)
            problems.append(f"thread {thread} value {value}: {g!r} instead of {e!r}")
            if len(problems) == 5:
                problems.append("...")
                break
    return problems


def _tensor_check(ctx: _Context, bench: Benchmark) -> None:
    """Run ``bench``'s kernel once in its check mode and raise GpuError when D is not what the instruction count
    and K imply, so that no throughput is ever reported for a kernel that computes something else."""
    threads, per_thread = _tensor_check_layout(bench)
    nbytes = 4 * threads * per_thread
    sentinel = ("i32", -_INT_SENTINEL) if bench.param("integer") else ("f32", _NAN)
    args = [("buffer", 0), ("i32", _CHECK_ITERS), ("u32", 0), sentinel, ("i32", 1)]
    result = _launch(ctx, bench, [(nbytes, 0)], args, block=threads, grid=1, warmup=0, reps=1,
                     readback=(0, 0, nbytes))
    problems = _tensor_check_compare(bench, result["readback"], _CHECK_ITERS)
    if problems:
        raise GpuError(f"{bench.kernel} computed wrong results on all-ones operands ({_CHECK_ITERS} loops): "
                       + "; ".join(problems))


def _tensor_rate(ctx: _Context, bench: Benchmark, launch_kw: Dict[str, Any], group_threads: int,
                 per_iter: int) -> Tuple[float, int, str]:
    """Check the tensor-core kernel of ``bench`` on all-ones operands, then calibrate and time it on random ones
    (arguments: sink, iters, seed, sentinel, check=0). FLOPs per launch = groups * iters * per_iter * 2*m*n*k, a
    group being ``group_threads`` threads that issue ``per_iter`` instructions per loop. Returns (FLOP/s, iters,
    the timing description)."""
    m, n, k = bench.param("shape")
    sentinel = ("i32", -_INT_SENTINEL) if bench.param("integer") else ("f32", _NAN)
    _tensor_check(ctx, bench)

    def make_args(iters: int) -> list:
        return [("buffer", 0), ("i32", iters), ("u32", 0x9E3779B9), sentinel, ("i32", 0)]

    iters, result = _calibrate(ctx, bench, make_args, {"buffers": [(256, 0)], **launch_kw})
    median = _median_s(result)
    groups = result["grid"] * result["block"] // group_threads
    flops = groups * iters * per_iter * 2 * m * n * k
    return flops / median, iters, _describe_timing(result, median)


def _run_mma(ctx: _Context, bench: Benchmark) -> Tuple[float, str]:
    """FLOPs per launch = warps * iters * RL_MMA_CHAINS * 2*m*n*k."""
    m, n, k = bench.param("shape")
    chains = _DEFINES["mma"]["RL_MMA_CHAINS"]
    sets = _DEFINES["mma"]["RL_MMA_SETS"]
    rate, iters, timing = _tensor_rate(ctx, bench, {"block": 256}, 32, chains)
    return rate, (
        f"mma.sync m{m}n{n}k{k} {bench.param('types')}: {chains} independent accumulators per warp x {iters} "
        f"loops, 2*m*n*k per instruction, random operands cycling through {sets} A and {sets} B fragment sets, "
        f"result checked on all-ones operands; " + timing
    )


def _run_wgmma(ctx: _Context, bench: Benchmark) -> Tuple[float, str]:
    """FLOPs per launch = warpgroups * iters * RL_WGMMA_UNROLL * 2*64*256*k."""
    m, n, k = bench.param("shape")
    unroll = _DEFINES["wgmma"]["RL_WGMMA_UNROLL"]
    tiles = _DEFINES["wgmma"]["RL_WGMMA_TILES"]
    launch = {"block": _DEFINES["wgmma"]["RL_WGMMA_THREADS"], "max_blocks_per_sm": 1}
    rate, iters, timing = _tensor_rate(ctx, bench, launch, 128, unroll)
    return rate, (
        f"wgmma.mma_async m{m}n{n}k{k} {bench.param('types')} (sm_90a), A and B from shared memory: {unroll} per "
        f"commit group x {iters} loops per warpgroup, 2*m*n*k per instruction, random operands cycling through "
        f"{tiles} A and {tiles} B tiles, result checked on all-ones operands; " + timing
    )


def _sm80(cc: CC) -> bool:
    return cc >= (8, 0)


def _fp8_mma_sync(cc: CC) -> bool:
    # Native e4m3 mma.sync (QMMA): sm_89 and sm_12x. sm_90 / sm_100 only emulate it through fp16 (see mma.cu).
    return cc == (8, 9) or cc[0] == 12


def _hopper(cc: CC) -> bool:
    return cc == (9, 0)


def _always(cc: CC) -> bool:
    return True


def _wgmma_enabled() -> bool:
    return os.environ.get("ROOFLINE_GPU_WGMMA", "1") != "0"


_REGISTRY: Tuple[Benchmark, ...] = (
    Benchmark("bandwidth/DRAM_read", "DRAM read", "bandwidth", "rl_bw_read", _always, _run_dram, (("kind", "read"),)),
    Benchmark("bandwidth/DRAM_write", "DRAM write", "bandwidth", "rl_bw_write", _always, _run_dram,
              (("kind", "write"),)),
    Benchmark("bandwidth/DRAM_copy", "DRAM copy", "bandwidth", "rl_bw_copy", _always, _run_dram, (("kind", "copy"),)),
    Benchmark("bandwidth/L2", "L2 read", "bandwidth", "rl_l2_read", _always, _run_l2),
    Benchmark("vector/float64", "fp64 FMA", "fma", "rl_fma_f64", _always, _run_fma,
              (("lanes", 1), ("argkind", "f64"), ("instruction", "DFMA"))),
    Benchmark("vector/float32", "fp32 FMA", "fma", "rl_fma_f32", _always, _run_fma,
              (("lanes", 1), ("argkind", "f32"), ("instruction", "FFMA"))),
    Benchmark("vector/float16", "fp16x2 FMA", "fma", "rl_fma_f16x2", _sm80, _run_fma,
              (("lanes", 2), ("argkind", "x2"), ("instruction", "fma.rn.f16x2 (HFMA2)"))),
    Benchmark("vector/bfloat16", "bf16x2 FMA", "fma", "rl_fma_bf16x2", _sm80, _run_fma,
              (("lanes", 2), ("argkind", "x2"), ("instruction", "fma.rn.bf16x2 (HFMA2.BF16)"))),
    Benchmark("matrix/float16", "fp16 mma.sync", "mma", "rl_mma_f16", _sm80, _run_mma,
              (("shape", (16, 8, 16)), ("types", "f16 x f16 -> f32"), ("integer", False))),
    Benchmark("matrix/bfloat16", "bf16 mma.sync", "mma", "rl_mma_bf16", _sm80, _run_mma,
              (("shape", (16, 8, 16)), ("types", "bf16 x bf16 -> f32"), ("integer", False))),
    Benchmark("matrix/tfloat32", "tf32 mma.sync", "mma", "rl_mma_tf32", _sm80, _run_mma,
              (("shape", (16, 8, 8)), ("types", "tf32 x tf32 -> f32"), ("integer", False))),
    Benchmark("matrix/int8", "int8 mma.sync", "mma", "rl_mma_s8", _sm80, _run_mma,
              (("shape", (16, 8, 32)), ("types", "s8 x s8 -> s32"), ("integer", True))),
    Benchmark("matrix/float8_e4m3fn", "fp8 e4m3 mma.sync", "mma", "rl_mma_e4m3", _fp8_mma_sync, _run_mma,
              (("shape", (16, 8, 32)), ("types", "e4m3 x e4m3 -> f32"), ("integer", False))),
    # Hopper only; run last, since they are the newest code path (see docs/gpu.md). ROOFLINE_GPU_WGMMA=0 skips them.
    Benchmark("matrix/float16", "fp16 wgmma", "wgmma", "rl_wgmma_f16", _hopper, _run_wgmma,
              (("shape", (64, 256, 16)), ("types", "f16 x f16 -> f32"), ("integer", False)), "a"),
    Benchmark("matrix/bfloat16", "bf16 wgmma", "wgmma", "rl_wgmma_bf16", _hopper, _run_wgmma,
              (("shape", (64, 256, 16)), ("types", "bf16 x bf16 -> f32"), ("integer", False)), "a"),
    Benchmark("matrix/tfloat32", "tf32 wgmma", "wgmma", "rl_wgmma_tf32", _hopper, _run_wgmma,
              (("shape", (64, 256, 8)), ("types", "tf32 x tf32 -> f32"), ("integer", False)), "a"),
    Benchmark("matrix/int8", "int8 wgmma", "wgmma", "rl_wgmma_s8", _hopper, _run_wgmma,
              (("shape", (64, 256, 32)), ("types", "s8 x s8 -> s32"), ("integer", True)), "a"),
    Benchmark("matrix/float8_e4m3fn", "fp8 e4m3 wgmma", "wgmma", "rl_wgmma_e4m3", _hopper, _run_wgmma,
              (("shape", (64, 256, 32)), ("types", "e4m3 x e4m3 -> f32"), ("integer", False)), "a"),
)


def kernels(compute_capability: Optional[Sequence[int]] = None) -> List[Dict[str, Any]]:
    """The benchmark registry: one dict per benchmark with ``key``, ``label``, ``source``, ``kernel``, ``arch``
    (``"sm_XY"`` or ``"sm_XYa"`` pattern) and, when ``compute_capability`` is given, ``supported`` for it."""
    out = []
    for bench in _REGISTRY:
        entry = {
            "key": bench.key,
            "label": bench.label,
            "source": bench.source,
            "kernel": bench.kernel,
            "arch": "sm_XY" + bench.arch_suffix,
        }
        if compute_capability is not None:
            cc = (int(compute_capability[0]), int(compute_capability[1]))
            entry["supported"] = bool(bench.supported(cc))
        out.append(entry)
    return out


# ---------------------------------------------------------------------------------------------------------------
# measure()
# ---------------------------------------------------------------------------------------------------------------


def _warm_up(ctx: _Context) -> None:
    """Keep the GPU busy for ``settings.warmup_s`` so its clocks leave idle before anything is timed."""
    bench = next(b for b in _REGISTRY if b.key == "vector/float32")

    def args(iters: int) -> list:
        return [("buffer", 0), ("i32", iters), ("f32", 0.999), ("f32", 0.001), ("f32", _NAN)]

    probe = _launch(ctx, bench, [(256, 0)], args(256), block=256, warmup=1, reps=1)
    per_iter = max(_median_s(probe) / 256, 1e-9)
    iters = max(1, min((1 << 31) - 1, int(0.02 / per_iter)))
    launches = max(1, int(ctx.settings.warmup_s / 0.02))
    _launch(ctx, bench, [(256, 0)], args(iters), block=256, warmup=launches, reps=1)


def measure(device_index: int = 0, quick: bool = True, progress: Optional[Callable[[str], None]] = None) -> Dict[str, Any]:
    """Measure the ceilings of CUDA device ``device_index`` with roofline's own kernels.

    Returns::

        {"device": {"name", "index", "sm_count", "compute_capability": [major, minor], "clock_hz",
                    "memory_bandwidth_theoretical", "fingerprint"},
         "peaks": {"vector/float64": FLOP/s, "vector/float32", "vector/float16", "vector/bfloat16",
                   "matrix/float16", "matrix/bfloat16", "matrix/tfloat32", "matrix/int8" (op/s),
                   "matrix/float8_e4m3fn"},
         "bandwidth": {"DRAM" (= DRAM_copy), "DRAM_read", "DRAM_write", "DRAM_copy", "L2"},   # bytes/s
         "method": {key: how it was measured, or why it is None},
         "sm_clock_hz": {key: average SM clock during the reported figure's timed launches, or None},
         "notes": [remarks about the whole run],
         "duration_s": seconds this call took}

    Every kernel this device runs is compiled (or read from the cubin cache) first, then the GPU is kept busy
    for a moment so its clocks leave idle, then the benchmarks run back to back, so a slow compile never lets the
    clocks drop between warm-up and measurement. The SM clock of each benchmark is measured inside its kernel
    (block 0's ``%clock64`` cycles over ``%globaltimer`` nanoseconds) and appears in ``sm_clock_hz`` and in the
    ``method`` line: a figure taken at a throttled clock shows it. The tensor-core kernels are run once on
    all-ones operands and their results compared before they are timed; one that computes wrong results is
    reported as failed, not measured.

    A peak the device cannot run (fp8 before sm_89, say) is None, with the reason in ``method``. Where several
    kernels measure one key (mma.sync and, on Hopper, wgmma) the higher rate is reported and ``method`` names
    the kernel. ``quick`` (the default) takes a few seconds on a large GPU once the kernels are cached; the full
    run takes longer launches and more repetitions. ``progress`` is called with a short label before each
    benchmark. Raises :class:`CudaUnavailableError` when libcuda, NVRTC or a GPU is missing.
    """
    start = time.perf_counter()
    _ensure_driver()
    count = _core.gpu_device_count()
    if count == 0:
        raise CudaUnavailableError("libcuda loaded, but the driver reports no CUDA device")
    if not 0 <= device_index < count:
        raise ValueError(f"device_index {device_index} is out of range: {count} CUDA device(s)")
    info = device_info(device_index)
    _ensure_nvrtc()
    ctx = _Context(device_index, info, _QUICK if quick else _FULL)
    cc = ctx.cc

    peaks: Dict[str, Optional[float]] = {k: None for k in PEAK_KEYS}
    bandwidth: Dict[str, Optional[float]] = {k: None for k in BANDWIDTH_KEYS}
    method: Dict[str, str] = {}
    notes: Dict[str, List[str]] = {}

    clocks: Dict[str, Optional[float]] = {}
    run_notes: List[str] = []

    def wanted(bench: Benchmark) -> bool:
        return bench.supported(cc) and (bench.source != "wgmma" or _wgmma_enabled())

    if progress:
        progress("compile")
    for bench in _REGISTRY:
        if wanted(bench):
            ctx.prepare(bench.source, bench.arch_suffix)
    if progress:
        progress("warm-up")
    _warm_up(ctx)

    for bench in _REGISTRY:
        group, name = bench.key.split("/", 1)
        table = bandwidth if group == "bandwidth" else peaks
        result_key = name if group == "bandwidth" else bench.key
        if not bench.supported(cc):
            if table[result_key] is None and result_key not in method:
                method[result_key] = f"{bench.label}: not available on compute capability {cc[0]}.{cc[1]}"
            continue
        if bench.source == "wgmma" and not _wgmma_enabled():
            notes.setdefault(result_key, []).append(f"{bench.label} skipped (ROOFLINE_GPU_WGMMA=0)")
            continue
        if progress:
            progress(bench.label)
        ctx.last = None
        try:
            value, text = bench.runner(ctx, bench)
            clock = _clock_hz(ctx.last)
            text += "; SM clock " + (f"{clock / 1e9:.4g} GHz during the timed launches" if clock else "not recorded")
        except (CudaError, NvrtcError, GpuError) as exc:
            if isinstance(exc, CudaError) and exc.code in _STICKY_ERRORS:
                raise
            first_line = str(exc).splitlines()[0]
            warn(f"roofline: GPU benchmark {bench.label} failed: {first_line}", RuntimeWarning)
            notes.setdefault(result_key, []).append(f"{bench.label} failed: {first_line}")
            continue
        if not (value > 0 and math.isfinite(value)):
            notes.setdefault(result_key, []).append(f"{bench.label} gave no usable rate ({value!r})")
            continue
        previous = table[result_key]
        if previous is None or value > previous:
            if previous is not None:
                notes.setdefault(result_key, []).append(
                    f"also measured: {method[result_key].split(':', 1)[0]} at {previous:.4g}/s"
                )
            table[result_key] = value
            method[result_key] = text
            clocks[result_key] = clock
        else:
            notes.setdefault(result_key, []).append(f"also measured: {bench.label} at {value:.4g}/s")

    bandwidth["DRAM"] = bandwidth["DRAM_copy"]
    method["DRAM"] = "same as DRAM_copy (bytes read + bytes written per second)"
    clocks["DRAM"] = clocks.get("DRAM_copy")
    if ctx.unchecked_params:
        run_notes.append(
            "kernel arguments were not checked against the kernels' parameter lists: the driver has no "
            "cuFuncGetParamInfo (CUDA 12.4 and later)"
        )
    for key, extra in notes.items():
        base = method.get(key, "not measured")
        method[key] = base + " | " + "; ".join(extra)

    device = {k: info[k] for k in ("name", "index", "sm_count", "compute_capability", "clock_hz",
                                   "memory_bandwidth_theoretical", "fingerprint")}
    return {
        "device": device,
        "peaks": peaks,
        "bandwidth": bandwidth,
        "method": method,
        "sm_clock_hz": {k: clocks.get(k) for k in list(PEAK_KEYS) + list(BANDWIDTH_KEYS)},
        "notes": run_notes,
        "duration_s": time.perf_counter() - start,
    }
