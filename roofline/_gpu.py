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

import dataclasses
import hashlib
import math
import os
import re
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from roofline import _core

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
    import ctypes

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
    here = Path(__file__).resolve().parent
    for candidate in (here / "cuda", here.parent / "cuda"):
        if (candidate / "bandwidth.cu").is_file():
            return candidate
    raise FileNotFoundError(
        f"roofline's CUDA kernel sources were not found (looked in {here / 'cuda'} and {here.parent / 'cuda'}); "
        "the installation is incomplete"
    )


def kernel_sources() -> Dict[str, Path]:
    """Every kernel source file, by name without the ``.cu`` suffix."""
    return {p.stem: p for p in sorted(_kernel_dir().glob("*.cu"))}


def cache_dir() -> Path:
    """Cubin cache directory: ``$ROOFLINE_CACHE_DIR/cubin``, else ``$XDG_CACHE_HOME/roofline/cubin``, else
    ``~/.cache/roofline/cubin``."""
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


def _cache_key(source: str, options: Sequence[str], nvrtc_version: Tuple[int, int], arch: str) -> str:
    """Hash naming a cubin: the source text, every compiler option, NVRTC's version and the architecture."""
    h = hashlib.sha256()
    for part in (_CACHE_FORMAT, source, "\0".join(options), "%d.%d" % tuple(nvrtc_version), arch):
        h.update(part.encode("utf-8"))
        h.update(b"\0\1")
    return h.hexdigest()


def _is_cubin(data: bytes) -> bool:
    return len(data) > 64 and data[:4] == b"\x7fELF"


def compile_source(source: str, name: str, arch: Any, options: Sequence[str] = (), cache: bool = True) -> bytes:
    """Compile CUDA C++ ``source`` with NVRTC into a cubin for ``arch`` and return it.

    ``name`` is the file name used in diagnostics. The cubin is cached under :func:`cache_dir` keyed by a hash of
    the source, the options, NVRTC's version and the architecture; a cached file is reused as is. Raises
    :class:`NvrtcError` (with ``.log`` holding the full compile log) when the source does not compile, and
    :class:`CudaUnavailableError` when NVRTC cannot be found.
    """
    arch = _normalize_arch(arch)
    _ensure_nvrtc()
    opts = [f"-arch={arch}", "-std=c++17", *options]
    version = tuple(_core.gpu_nvrtc_version())
    key = _cache_key(source, opts, version, arch)
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(name).stem)
    path = cache_dir() / f"{stem}-{arch}-{key[:32]}.cubin"
    if cache:
        try:
            data = path.read_bytes()
            if _is_cubin(data):
                return data
        except OSError:
            pass
    cubin, _log = _core.gpu_compile(source, name, opts)
    if cache:
        _write_atomic(path, cubin)
    return cubin


def _write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename; a cache that cannot be written is
    skipped silently (the cubin is still returned to the caller)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".cubin")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    except OSError:
        pass


# Compile-time constants of each source. The work arithmetic below reads the same numbers, so the FLOP and byte
# counts always match the loops that ran.
_DEFINES: Dict[str, Dict[str, int]] = {
    "bandwidth": {"RL_BW_UNROLL": 4},
    "fma": {"RL_FMA_CHAINS": 8, "RL_FMA_UNROLL": 16},
    "mma": {"RL_MMA_CHAINS": 8},
    "wgmma": {"RL_WGMMA_UNROLL": 16, "RL_WGMMA_THREADS": 256},
}


def _source_options(source_name: str) -> List[str]:
    return [f"-D{k}={v}" for k, v in sorted(_DEFINES.get(source_name, {}).items())]


def compile(source_name: str, arch: Any) -> bytes:  # noqa: A001 - the public name the API promises
    """Compile the kernel source ``cuda/<source_name>.cu`` for ``arch`` (e.g. ``"sm_90"``) and return the cubin.

    Uses the cubin cache (see :func:`compile_source`) and the compile-time constants the benchmarks assume.
    """
    stem = Path(source_name).stem
    sources = kernel_sources()
    if stem not in sources:
        raise ValueError(f"no kernel source {source_name!r}; available: {', '.join(sources)}")
    text = sources[stem].read_text(encoding="utf-8")
    return compile_source(text, f"{stem}.cu", arch, _source_options(stem))


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

    @property
    def cc(self) -> CC:
        return (self.info["compute_capability"][0], self.info["compute_capability"][1])

    def arch(self, suffix: str = "") -> str:
        major, minor = self.cc
        return f"sm_{major}{minor}{suffix}"

    def cubin(self, source: str, suffix: str = "") -> bytes:
        key = (source, self.arch(suffix))
        if key not in self.cubins:
            self.cubins[key] = compile(source, key[1])
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
) -> Dict[str, Any]:
    cubin = ctx.cubin(bench.source, bench.arch_suffix)
    try:
        return _core.gpu_bench(
            ctx.index, cubin, bench.kernel, grid, block, 0, list(buffers), list(args), warmup, reps, readback,
            max_blocks_per_sm,
        )
    except CudaError as exc:
        raise _explain(exc, ctx, bench) from None


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


def _calibrate(ctx: _Context, bench: Benchmark, make_args: Callable[[int], list], launch_kw: Dict[str, Any]) -> Tuple[int, Dict[str, Any]]:
    """Find an iteration count whose launch lasts about ``settings.target_s``, then time it.

    Starts small, grows by 16x while a launch is shorter than 100 us, then scales linearly to the target.
    Returns (iterations, timed result).
    """
    target = ctx.settings.target_s
    iters = 16
    for _ in range(6):
        probe = _launch(ctx, bench, launch_kw["buffers"], make_args(iters), block=launch_kw["block"], warmup=1,
                        reps=1, max_blocks_per_sm=launch_kw.get("max_blocks_per_sm", 0))
        elapsed = _median_s(probe)
        if elapsed >= 1e-4 or iters >= (1 << 26):
            break
        iters *= 16
    iters = max(1, min((1 << 31) - 1, int(iters * target / elapsed)))
    result = _launch(ctx, bench, launch_kw["buffers"], make_args(iters), block=launch_kw["block"],
                     warmup=ctx.settings.warmup, reps=ctx.settings.reps,
                     max_blocks_per_sm=launch_kw.get("max_blocks_per_sm", 0))
    return iters, result


def _describe_timing(result: Dict[str, Any], median: float) -> str:
    return (
        f"{result['grid']} blocks x {result['block']} threads, median of {len(result['times_s'])} launches of "
        f"{median * 1e3:.3g} ms"
    )


# ---- bandwidth ------------------------------------------------------------------------------------------------

_FILL = 0x3C00_3C00  # buffer contents: a nonzero pattern (two fp16 1.0s per word)


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


def _run_dram(ctx: _Context, bench: Benchmark) -> Tuple[float, str]:
    """DRAM read / write / copy over one large buffer per operand. Bytes per launch: 16*n read, 16*n written, or
    2*16*n copied, with n = buffer bytes / 16."""
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
    result = _launch(ctx, bench, buffers, args, block=256, warmup=max(3, s.warmup), reps=s.bw_reps)
    median = _median_s(result)
    what = {"read": "read", "write": "written", "copy": "read + written"}[kind]
    text = (
        f"{bench.kernel}: 16-byte accesses over {size >> 20} MiB, bytes {what} / time; "
        + _describe_timing(result, median)
    )
    return moved / median, text


def _run_l2(ctx: _Context, bench: Benchmark) -> Tuple[float, str]:
    """L2 read: a working set of a quarter of the L2, read `passes` times with L1-bypassing loads. Bytes per
    launch: 16 * n * passes."""
    l2 = ctx.info.get("l2_cache_bytes") or (4 << 20)
    size = max(1 << 20, (l2 // 4 >> 16) << 16)
    n = size // 16

    def make_args(passes: int) -> list:
        return [("buffer", 0), ("u64", n), ("i32", passes), ("buffer", 1), ("i32", _INT_SENTINEL)]

    passes, result = _calibrate(ctx, bench, make_args, {"buffers": [(size, _FILL), (128, 0)], "block": 256})
    median = _median_s(result)
    text = (
        f"{bench.kernel}: {size >> 10} KiB working set (L2 is {l2 >> 20} MiB) read {passes} times with "
        f"ld.global.cg (L1 bypassed), 16-byte accesses; " + _describe_timing(result, median)
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


def _run_mma(ctx: _Context, bench: Benchmark) -> Tuple[float, str]:
    """FLOPs per launch = warps * iters * RL_MMA_CHAINS * 2*m*n*k."""
    m, n, k = bench.param("shape")
    chains = _DEFINES["mma"]["RL_MMA_CHAINS"]
    integer = bench.param("integer")
    sentinel = ("i32", -_INT_SENTINEL) if integer else ("f32", _NAN)

    def make_args(iters: int) -> list:
        return [("buffer", 0), ("i32", iters), ("u32", 0x9E3779B9), sentinel]

    iters, result = _calibrate(ctx, bench, make_args, {"buffers": [(256, 0)], "block": 256})
    median = _median_s(result)
    warps = result["grid"] * result["block"] // 32
    flops = warps * iters * chains * 2 * m * n * k
    text = (
        f"mma.sync m{m}n{n}k{k} {bench.param('types')}: {chains} independent accumulators per warp x {iters} "
        f"loops, 2*m*n*k per instruction, random operands; " + _describe_timing(result, median)
    )
    return flops / median, text


def _run_wgmma(ctx: _Context, bench: Benchmark) -> Tuple[float, str]:
    """FLOPs per launch = warpgroups * iters * RL_WGMMA_UNROLL * 2*64*256*k."""
    m, n, k = bench.param("shape")
    unroll = _DEFINES["wgmma"]["RL_WGMMA_UNROLL"]
    threads = _DEFINES["wgmma"]["RL_WGMMA_THREADS"]
    integer = bench.param("integer")
    sentinel = ("i32", -_INT_SENTINEL) if integer else ("f32", _NAN)

    def make_args(iters: int) -> list:
        return [("buffer", 0), ("i32", iters), ("u32", 0x9E3779B9), sentinel]

    iters, result = _calibrate(
        ctx, bench, make_args, {"buffers": [(256, 0)], "block": threads, "max_blocks_per_sm": 1}
    )
    median = _median_s(result)
    warpgroups = result["grid"] * result["block"] // 128
    flops = warpgroups * iters * unroll * 2 * m * n * k
    text = (
        f"wgmma.mma_async m{m}n{n}k{k} {bench.param('types')} (sm_90a), A and B from shared memory: {unroll} per "
        f"commit group x {iters} loops per warpgroup, 2*m*n*k per instruction, random operands; "
        + _describe_timing(result, median)
    )
    return flops / median, text


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
         "duration_s": seconds this call took}

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
        try:
            value, text = bench.runner(ctx, bench)
        except (CudaError, NvrtcError, GpuError) as exc:
            if isinstance(exc, CudaError) and exc.code in _STICKY_ERRORS:
                raise
            first_line = str(exc).splitlines()[0]
            warnings.warn(f"roofline: GPU benchmark {bench.label} failed: {first_line}", RuntimeWarning, stacklevel=2)
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
        else:
            notes.setdefault(result_key, []).append(f"also measured: {bench.label} at {value:.4g}/s")

    bandwidth["DRAM"] = bandwidth["DRAM_copy"]
    method["DRAM"] = "same as DRAM_copy (bytes read + bytes written per second)"
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
        "duration_s": time.perf_counter() - start,
    }
