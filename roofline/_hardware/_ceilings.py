"""The machine's ceilings: peak FLOP/s per (unit, dtype) and bandwidth per memory level. This module is the
entry point, :func:`ceilings`; the data model is in ``_ceilings_model``, the CPU benchmark drivers in ``_cpu_bench``
(with ``_cpu_info``, ``_sweep``, ``_cpu_contention``), the stand-ins under contention in ``_yardstick`` and the cache
in ``_ceilings_cache``; the names users import from here are re-exported.

``ceilings("cpu")`` measures them with the C microbenchmarks of ``roofline._core`` (all-core FMA peak per dtype, a
read / copy / triad bandwidth sweep over working-set sizes), ``ceilings("cuda:N")`` with the GPU benchmarks of
``roofline._hardware._gpu``. Results are cached on disk per device fingerprint and package version; see docs/ceilings.md.

Counting: a FLOP is one add or one multiply, a fused multiply-add counts 2. Bandwidth counts the bytes a kernel
must move: read N*8, copy 2*N*8 (read + write), triad ``a = b + s*c`` 3*N*8; write-allocate traffic is not
counted. Rates are FLOP/s and bytes/s (the CLI prints GFLOP/s and GB/s, 1 G = 1e9).
"""

from __future__ import annotations

import datetime
import time
from typing import Any

from roofline._hardware import _devices as devices
from roofline._hardware import _gpu
from roofline._hardware._ceilings_cache import _cache_path, _load_cache, _store_cache, cache_dir  # noqa: F401
from roofline._hardware._ceilings_model import (LEVELS, SOURCES, CeilingNotAvailable, PeakChoice,  # noqa: F401
                                              Ceiling, Ceilings, Progress, _jsonable, _parse_device, _spec_source,
                                              _version)
from roofline._hardware._cpu_bench import _measure_cpu
from roofline._hardware._cpu_info import _cpu_fingerprint, _cpu_info
from roofline._hardware._yardstick import (YARDSTICKS, load_file, reference_path, save_idle,  # noqa: F401
                                         saved_idle, stable, theoretical)
from roofline._util import _progress
from roofline._util._warn import warn

__all__ = [
    "Ceiling",
    "Ceilings",
    "CeilingNotAvailable",
    "PeakChoice",
    "cache_dir",
    "ceilings",
]


def ceilings(
    device: Any = "cpu", refresh: bool = False, quick: bool = True, progress: Progress | None = None
) -> Ceilings:
    """Measured ceilings of ``device`` ("cpu", "cuda" or "cuda:N"; a ``torch.device`` also works).

    Results are cached on disk (in ``roofline._hardware._ceilings.cache_dir()``: ``$ROOFLINE_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/roofline``, else ``~/.cache/roofline``) per device fingerprint and package version and reused;
    ``refresh=True`` re-measures. A cache file that is corrupt, truncated, of another schema or version, or of
    another machine is ignored with a warning and re-measured; so is a cache directory that is not the user's own
    or that its group or others can write (then nothing is cached either). ``quick=True`` (the default) takes
    about 2-3 s on a small CPU; ``quick=False`` sweeps more sizes with more repeats, and a quick cached result is
    then re-measured. A measurement that looks made under contention (other processes took the CPUs, a cache level
    slower than the next, a peak far from a quick re-check: ``info["contention"]`` says which) is returned with a
    ``RuntimeWarning`` naming why and is not cached on disk; this process reuses it (still flagged) until
    ``refresh=True``.
    ``progress`` receives short status lines while measuring; without it, a progress bar is drawn on stderr when
    stderr is a terminal or a notebook (``roofline._util._progress``; ``ROOFLINE_PROGRESS=0`` turns it off), and
    nothing is printed otherwise.
    """
    if not isinstance(refresh, bool):
        raise TypeError(f"refresh must be a bool, not {type(refresh).__name__}")
    if not isinstance(quick, bool):
        raise TypeError(f"quick must be a bool, not {type(quick).__name__}")
    if progress is not None and not callable(progress):
        raise TypeError("progress must be a callable taking a str, or None")
    kind, index = _parse_device(device)
    if kind == "cuda":
        return _cuda_ceilings(index, refresh=refresh, quick=quick, progress=progress)
    info = _cpu_info()
    fingerprint = _cpu_fingerprint(info)
    path = _cache_path("cpu", fingerprint)
    if not refresh:
        cached = _load_cache(path, fingerprint, need_thorough=not quick)
        if cached is not None:
            return cached
        busy = _BUSY_RESULTS.get(path)
        if busy is not None and (quick or not busy.quick):
            return busy  # flagged, warned about once when measured; re-measuring on every report costs seconds
    bar = _progress.auto("measuring this CPU's ceilings (once; cached)") if progress is None else None
    if progress is not None:
        progress(f"measuring the CPU ceilings ({'quick' if quick else 'thorough'}): {info.get('model')}")
    try:
        result = _measure_cpu(quick=quick, progress=progress or bar, info=info)
    finally:
        if bar is not None:
            bar.close()
    if result.info.get("busy"):
        _BUSY_RESULTS[path] = result
    else:
        _BUSY_RESULTS.pop(path, None)
        if _store_cache(path, result):  # where the cache can be kept, so is the machine's last idle measurement
            _store_cache(reference_path("cpu", fingerprint), result)
    return result


# Ceilings measured under contention are not written to disk; they are kept for this process (keyed by cache path),
# so that each report classified afterwards does not re-measure for seconds. refresh=True measures again.
_BUSY_RESULTS: dict = {}


def _cuda_ceilings(index: int, refresh: bool, quick: bool, progress: Progress | None) -> Ceilings:
    device = f"cuda:{index}"
    path = None
    device_info = getattr(_gpu, "device_info", None)
    if device_info is not None:
        dev = device_info(index)
        path = _cache_path("cuda", str(dev["fingerprint"]))
        if not refresh:
            cached = _load_cache(path, str(dev["fingerprint"]), need_thorough=not quick)
            if cached is not None:
                return cached
    if progress is not None:
        progress(f"measuring the ceilings of {device} ({'quick' if quick else 'thorough'})")
    start = time.perf_counter()
    bar = _progress.auto(f"measuring the ceilings of {device} (once; cached)") if progress is None else None
    try:
        result = _gpu.measure(index, quick=quick, progress=progress or bar)
    finally:
        if bar is not None:
            bar.close()
    c = _from_gpu_result(result, device, quick, time.perf_counter() - start)
    if path is None:
        path = _cache_path("cuda", c.fingerprint)
    _store_cache(path, c)
    return c


def _from_gpu_result(result: dict[str, Any], device: str, quick: bool, wall: float) -> Ceilings:
    """Convert the dict of roofline._hardware._gpu.measure into Ceilings, adding datasheet figures from roofline.devices."""
    dev = dict(result["device"])
    name = str(dev["name"])
    spec = devices.lookup(name)
    notes = []
    if spec is None:
        warn(f"no datasheet entry for the GPU {name!r}: showing measured ceilings only")
        notes.append(f"no datasheet entry for {name!r}")
    methods = result.get("method") or {}
    sources = (getattr(spec, "sources", None) or {}) if spec is not None else {}
    spec_peaks = (getattr(spec, "peaks", None) or {}) if spec is not None else {}
    peaks = {}
    for key, value in (result.get("peaks") or {}).items():
        if value is None:  # not supported on this device, or its benchmark failed: the datasheet fills it below
            continue
        unit, _, dtype = key.partition("/")
        sheet = spec_peaks.get((unit, dtype))
        peaks[(unit, dtype)] = Ceiling(
            measured=float(value),
            datasheet=None if sheet is None else float(sheet),
            method=str(methods.get(key, "")),
            datasheet_source=_spec_source(sources, (unit, dtype), "peaks") if sheet is not None else "",
        )
    for (unit, dtype), sheet in spec_peaks.items():
        if (unit, dtype) not in peaks and sheet is not None:
            peaks[(unit, dtype)] = Ceiling(
                measured=None,
                datasheet=float(sheet),
                method="not measured",
                datasheet_source=_spec_source(sources, (unit, dtype), "peaks"),
            )
    bandwidths = {}
    for level, value in (result.get("bandwidth") or {}).items():
        if value is None:
            continue
        sheet = getattr(spec, "memory_bandwidth", None) if (spec is not None and level == "DRAM") else None
        bandwidths[level] = Ceiling(
            measured=float(value),
            datasheet=None if sheet is None else float(sheet),
            method=str(methods.get(level, methods.get(f"bandwidth/{level}", ""))),
            datasheet_source=_spec_source(sources, "memory_bandwidth", "memory_bandwidth") if sheet else "",
        )
    duration = result.get("duration_s")
    info = _jsonable(dev)
    if spec is not None:
        info["datasheet_sources"] = {str(k): str(v) for k, v in sources.items()}
    return Ceilings(
        device=device,
        name=name,
        fingerprint=str(dev.get("fingerprint", name)),
        peaks=peaks,
        bandwidths=bandwidths,
        duration_s=float(duration) if duration is not None else wall,
        version=_version(),
        timestamp=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        quick=quick,
        info=info,
        sweep=None,
        notes=notes,
    )
