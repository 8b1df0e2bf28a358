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

import hashlib
import math
import time
from typing import Any, Callable, Dict, List, Optional

from roofline import _core
from roofline._hardware._gpu_bench import (
    Benchmark, _Context, _FULL, _NAN, _QUICK, _REGISTRY, _STICKY_ERRORS, _clock_hz, _launch, _median_s, _wgmma_enabled,
    kernels)
from roofline._hardware._gpu_compile import cache_dir, compile, compile_source, kernel_headers, kernel_sources
from roofline._hardware._gpu_libs import (
    CudaError, CudaUnavailableError, GpuError, NvrtcError, _ensure_driver, _ensure_nvrtc, nvrtc_info)
from roofline._util._warn import warn


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
