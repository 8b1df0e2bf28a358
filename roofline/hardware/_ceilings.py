"""The machine's ceilings: peak FLOP/s per (unit, dtype) and bandwidth per memory level.

``ceilings("cpu")`` measures them with the C microbenchmarks of ``roofline._core`` (all-core FMA peak per dtype, a
read / copy / triad bandwidth sweep over working-set sizes), ``ceilings("cuda:N")`` with the GPU benchmarks of
``roofline.hardware._gpu``. Results are cached on disk per device fingerprint and package version; see docs/ceilings.md.

Counting: a FLOP is one add or one multiply, a fused multiply-add counts 2. Bandwidth counts the bytes a kernel
must move: read N*8, copy 2*N*8 (read + write), triad ``a = b + s*c`` 3*N*8; write-allocate traffic is not
counted. Rates are FLOP/s and bytes/s (the CLI prints GFLOP/s and GB/s, 1 G = 1e9).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

import numpy as np

from roofline import _core, devices
from roofline.hardware import _gpu
from roofline.model import _document
from roofline.model._units import PEAK_DTYPES as DTYPES, UNITS
from roofline.util import _output, _progress, _safejson
from roofline.util._cachedir import ensure_private_dir, untrusted_reason
from roofline.util._format import fmt
from roofline.util._warn import warn

__all__ = [
    "Ceiling",
    "Ceilings",
    "CeilingNotAvailable",
    "PeakChoice",
    "cache_dir",
    "ceilings",
]

SCHEMA = "roofline.ceilings/1"
LEVELS = ("L1", "L2", "L3", "DRAM")
SOURCES = ("measured", "datasheet", "best")
# Bandwidth kernels in the order of Ceilings.rows (a CPU kernel not listed here follows in KERNELS order).

# Low-precision dtypes a CPU computes in float32 unless it has native instructions (which are not measured).
_CPU_F32_FALLBACK = ("bfloat16", "float16", "tfloat32")
# /proc/cpuinfo flags of native low-precision arithmetic, per dtype.
_NATIVE_LOWP_FLAGS = {
    "bfloat16": ("avx512_bf16", "amx_bf16", "bf16"),
    "float16": ("avx512_fp16", "amx_fp16", "asimdhp", "fphp"),
}
# FMA pipes per core assumed for the theoretical peak, per SIMD set (override: ROOFLINE_CPU_FMA_UNITS).
_FMA_UNITS_ASSUMED = {
    "avx512": (2, "2 assumed: typical of AVX-512 server cores (Xeon Gold/Platinum, Sapphire Rapids and later); "
                  "some parts have 1"),
    "avx2": (2, "2 assumed: typical of AVX2 cores since Haswell and Zen 2; Zen 1 splits 256-bit FMAs"),
    "neon": (2, "2 assumed: typical of Arm Neoverse N1/N2 and Cortex-A7x; Neoverse V1/V2 and Apple cores have 4"),
    "sse2": (1, "1 assumed: one multiply and one add per cycle per lane (no FMA instruction)"),
    "scalar": (1, "1 assumed: unknown instruction set, one multiply and one add per cycle"),
}


class CeilingNotAvailable(LookupError):
    """No ceiling of the requested kind exists in this ``Ceilings`` (nor any documented fallback)."""


@dataclass(frozen=True)
class Ceiling:
    """One ceiling: FLOP/s for a peak, bytes/s for a bandwidth.

    ``measured`` is this package's own benchmark result (None when not measured), ``datasheet`` the vendor figure
    (for a CPU: the theoretical peak from its clock and SIMD width; None when unknown), ``method`` how the measured
    value was obtained, ``datasheet_source`` where the datasheet value comes from.
    """

    measured: float | None
    datasheet: float | None = None
    method: str = ""
    datasheet_source: str = ""

    @property
    def ratio(self) -> float | None:
        """measured / datasheet, or None when either is missing."""
        if self.measured is None or not self.datasheet:
            return None
        return self.measured / self.datasheet

    def to_dict(self) -> dict[str, Any]:
        """``{"measured", "datasheet", "method", "datasheet_source"}``, JSON-compatible; inverse of ``from_dict``."""
        return {
            "measured": self.measured,
            "datasheet": self.datasheet,
            "method": self.method,
            "datasheet_source": self.datasheet_source,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], field: str = "ceiling") -> "Ceiling":
        """Inverse of ``to_dict``; ValueError naming ``field`` (and the key inside it) on a malformed entry: the
        figures must be null or rates in [1, 1e30] (``roofline.model._document.CEILING``)."""
        d = _document.CEILING(d, field)
        return cls(measured=d.get("measured"), datasheet=d.get("datasheet"), method=d.get("method", ""),
                   datasheet_source=d.get("datasheet_source", ""))


class PeakChoice(NamedTuple):
    """The outcome of a peak lookup (:meth:`Ceilings.resolve_peak`): ``value`` (FLOP/s), the ``unit`` and
    ``dtype`` of the entry it came from, its ``source`` ("measured" or "datasheet") and a ``note``, empty unless the
    value is a fallback for another (unit, dtype)."""

    value: float
    unit: str
    dtype: str
    source: str  # "measured" or "datasheet"
    note: str  # "" when the requested (unit, dtype) itself was used


@dataclass(eq=False)
class Ceilings:
    """Ceilings of one device.

    ``peaks`` maps (unit, dtype) to a ``Ceiling`` in FLOP/s; unit is "vector" or "matrix", dtype a torch-style name
    ("float64", "float32", "bfloat16", "float16", "tfloat32", "int8", "float8_e4m3fn"). ``bandwidths`` maps a memory
    level ("L1", "L2", "L3", "DRAM"; per-kernel figures such as "DRAM_read" may also be present) to a ``Ceiling`` in
    bytes/s. ``sweep`` holds the CPU bandwidth sweep as NumPy arrays ("sizes" in bytes, and bytes/s per kernel).

    Other fields: ``device`` ("cpu", "cuda:N"), ``name`` (CPU model or GPU name), ``fingerprint`` (hash of what
    decides the ceilings; the cache key), ``duration_s`` (seconds the measurement took; None for datasheet-only
    ceilings), ``version`` (roofline version that measured them), ``timestamp`` (UTC, ISO 8601), ``quick`` (True for
    the quick run, False for the thorough one), ``info`` (machine details: clock, cores, caches, the FMA-unit
    assumption, CPU share while measuring, ...) and ``notes`` (caveats, also printed under the table).

    Made by :func:`ceilings` (measured, cached) or :meth:`from_datasheet`; two instances compare equal when their
    ``to_dict()`` are equal.
    """

    device: str
    name: str
    fingerprint: str
    peaks: dict[tuple[str, str], Ceiling] = field(default_factory=dict)
    bandwidths: dict[str, Ceiling] = field(default_factory=dict)
    duration_s: float | None = None
    version: str = ""
    timestamp: str | None = None
    quick: bool | None = None
    info: dict[str, Any] = field(default_factory=dict)
    sweep: dict[str, np.ndarray] | None = None
    notes: list[str] = field(default_factory=list)

    # ---- lookups ----

    def resolve_peak(self, unit: str, dtype: str, source: str = "measured") -> PeakChoice:
        """Find the peak an op of (unit, dtype) is bounded by, following the documented fallbacks.

        Fallbacks, in order, until an entry with a value from ``source`` is found:

        1. the (unit, dtype) entry itself;
        2. for unit "matrix": the ("vector", dtype) entry, since a matrix product can always run on the vector
           units (on a CPU, matrix products in float32/float64 *are* vector FMA work);
        3. on a CPU, for bfloat16, float16 and tfloat32: the float32 peak (matrix, then vector): without native
           low-precision arithmetic a CPU converts to float32 and computes there. Where the CPU has native product
           instructions (AVX512_BF16, AVX512_FP16, AMX) the package measures them as the ("matrix", dtype) peak,
           found at step 1; where it advertises some that were not measured, the float32 rate is a lower bound and
           the note says so. On a GPU, for the same dtypes: the float32 vector peak, when the datasheet lists no
           non-tensor rate for them (a lower bound: packed half2 arithmetic runs at least at the fp32 rate).

        ``source`` is "measured", "datasheet", or "best" (measured where available, else datasheet). Raises
        ``CeilingNotAvailable`` when nothing matches (e.g. int8 on a CPU).
        """
        unit, dtype, source = _check_peak_args(unit, dtype, source)
        chain = [(unit, dtype)]
        if unit == "matrix":
            chain.append(("vector", dtype))
        if self.device == "cpu" and dtype in _CPU_F32_FALLBACK:
            if unit == "matrix":
                chain.append(("matrix", "float32"))
            chain.append(("vector", "float32"))
        elif dtype in _CPU_F32_FALLBACK:
            # GPU datasheets rarely list non-tensor fp16/bf16 rates (packed half2 runs at >= the fp32 rate):
            # element-wise low-precision work falls back to the fp32 vector peak, a lower bound
            chain.append(("vector", "float32"))
        for i, (u, d) in enumerate(chain):
            entry = self.peaks.get((u, d))
            if entry is None:
                continue
            for src in (("measured", "datasheet") if source == "best" else (source,)):
                value = entry.measured if src == "measured" else entry.datasheet
                if value is not None:
                    note = "" if i == 0 else self._fallback_note(unit, dtype, u, d)
                    return PeakChoice(float(value), u, d, src, note)
        available = ", ".join(f"{u}/{d}" for (u, d) in sorted(self.peaks)) or "none"
        raise CeilingNotAvailable(
            f"no {source} peak for {unit}/{dtype} on {self.device} ({self.name}) nor any fallback; "
            f"available: {available}"
            + ("" if source != "measured" else "; source='best' also accepts datasheet figures")
        )

    def peak(self, unit: str, dtype: str, source: str = "measured") -> float:
        """Peak FLOP/s for an op of (unit, dtype); see ``resolve_peak`` for the fallbacks."""
        return self.resolve_peak(unit, dtype, source).value

    def bandwidth(self, level: str = "DRAM", source: str = "measured") -> float:
        """Bandwidth of a memory level in bytes/s ("L1", "L2", "L3", "DRAM", or a per-kernel key such as
        "DRAM_read"). ``source`` as in ``resolve_peak``. Raises ``CeilingNotAvailable`` when absent."""
        if not isinstance(level, str):
            raise TypeError(f"level must be a str, not {type(level).__name__}")
        _check_source(source)
        entry = self.bandwidths.get(level)
        if entry is not None:
            for src in (("measured", "datasheet") if source == "best" else (source,)):
                value = entry.measured if src == "measured" else entry.datasheet
                if value is not None:
                    return float(value)
        available = ", ".join(self.bandwidths) or "none"
        raise CeilingNotAvailable(
            f"no {source} bandwidth for level {level!r} on {self.device} ({self.name}); available: {available}"
        )

    def _fallback_note(self, unit: str, dtype: str, used_unit: str, used_dtype: str) -> str:
        if used_dtype == dtype:
            return (
                f"no {unit}/{dtype} peak: using {used_unit}/{used_dtype} "
                "(a matrix product can run on the vector units at their rate)"
            )
        native = (self.info.get("native_lowp") or {}).get(dtype) or []
        if unit == "vector" and ("matrix", dtype) in self.peaks:
            return (
                f"vector/{dtype}: element-wise work computes in float32 on this CPU: using the {used_unit}/"
                f"{used_dtype} peak (the native {dtype} instructions are products, measured as matrix/{dtype})"
            )
        if native:
            return (
                f"{unit}/{dtype}: using the measured {used_unit}/{used_dtype} peak; this CPU has native "
                f"{dtype} instructions ({', '.join(native)}) that are not measured, so the real peak may be higher"
            )
        return (
            f"{unit}/{dtype}: this CPU has no native {dtype} arithmetic, so it computes in float32: "
            f"using the {used_unit}/{used_dtype} peak"
        )

    # ---- serialisation ----

    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible dict; ``from_dict`` inverts it exactly."""
        return {
            "schema": SCHEMA,
            "device": self.device,
            "name": self.name,
            "fingerprint": self.fingerprint,
            "version": self.version,
            "timestamp": self.timestamp,
            "duration_s": self.duration_s,
            "quick": self.quick,
            "peaks": {f"{u}/{d}": c.to_dict() for (u, d), c in self.peaks.items()},
            "bandwidth": {level: c.to_dict() for level, c in self.bandwidths.items()},
            "info": self.info,
            "sweep": None
            if self.sweep is None
            else {k: (v.tolist() if isinstance(v, np.ndarray) else list(v)) for k, v in self.sweep.items()},
            "notes": list(self.notes),
        }

    def to_json(self, indent: int | None = 1) -> str:
        """JSON text; floats are written with ``repr`` so ``from_json`` restores them bit for bit."""
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Ceilings":
        """Inverse of ``to_dict``. Raises ValueError naming the field on a wrong schema or malformed content, and no
        other exception: every field is checked against ``roofline.model._document`` (types; rates finite, in [1, 1e30]
        FLOP/s or bytes/s, so a zero or vanishing bandwidth or an overflowing peak is refused; integer sweep sizes;
        the ``info`` entries that are read back, such as ``l2_bytes``, typed; no NaN or infinity anywhere)."""
        try:
            return cls._from_dict(d)
        except _document.Invalid as e:
            raise ValueError(str(e)) from None

    @classmethod
    def _from_dict(cls, d: Any) -> "Ceilings":
        if not isinstance(d, dict):
            raise ValueError(f"ceilings JSON must be an object, not {_document.kind(d)}")
        if d.get("schema") != SCHEMA:
            raise ValueError(f"unsupported ceilings schema {_document.show(d.get('schema'))} (expected {SCHEMA!r})")
        for k in ("device", "name", "fingerprint", "peaks", "bandwidth"):
            if k not in d:
                raise ValueError(f"ceilings JSON lacks the field {k!r}")
        peaks = {}
        for key, entry in _document.Map(_document.Anything())(d["peaks"], "peaks").items():
            unit, _, dtype = key.partition("/")
            if unit not in UNITS or not dtype:
                _document.fail(_document.key("peaks", key), "is not a peak key (expected 'unit/dtype', unit "
                                                            "'vector' or 'matrix')")
            peaks[(unit, dtype)] = Ceiling.from_dict(entry, _document.key("peaks", key))
        bandwidths = {k: Ceiling.from_dict(v, _document.key("bandwidth", k))
                      for k, v in _document.Map(_document.Anything())(d["bandwidth"], "bandwidth").items()}
        sweep = None
        if d.get("sweep") is not None:
            sweep = {k: np.array(v, dtype=np.int64 if k == "sizes" else np.float64)
                     for k, v in _document.sweep(d["sweep"]).items()}
        timestamp = d.get("timestamp")
        return cls(
            device=_document.Str()(d["device"], "device"),
            name=_document.Str()(d["name"], "name"),
            fingerprint=_document.Str()(d["fingerprint"], "fingerprint"),
            peaks=peaks,
            bandwidths=bandwidths,
            duration_s=_document.Opt(_document.Seconds)(d.get("duration_s"), "duration_s"),
            version=_document.Str()(d.get("version", ""), "version"),
            timestamp=_document.Opt(_document.Str())(timestamp, "timestamp"),
            quick=_document.Opt(_document.Bool())(d.get("quick"), "quick"),
            info=_document.INFO(d.get("info", {}), "info"),
            sweep=sweep,
            notes=_document.List(_document.Str())(d.get("notes", []), "notes"),
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> "Ceilings":
        """Inverse of ``to_json``. Raises ValueError on malformed JSON (nesting deeper than a ceilings document's
        included) or a wrong schema."""
        return cls.from_dict(_safejson.loads(text, "not valid ceilings JSON"))

    @classmethod
    def from_datasheet(cls, spec: Any, device: str = "cuda") -> "Ceilings":
        """Ceilings holding only the datasheet figures of ``spec`` (a ``roofline.devices.DeviceSpec``: ``.name``,
        ``.peaks`` {(unit, dtype): FLOP/s}, ``.memory_bandwidth`` bytes/s, ``.l2_bytes``, ``.sm_count``,
        ``.boost_clock_hz``, ``.sources``). Use ``source="datasheet"`` (or "best") to look values up."""
        name = str(spec.name)
        sources = getattr(spec, "sources", None) or {}
        peaks = {}
        for key, value in (getattr(spec, "peaks", None) or {}).items():
            unit, dtype = key
            peaks[(str(unit), str(dtype))] = Ceiling(
                measured=None,
                datasheet=None if value is None else float(value),
                method="not measured",
                datasheet_source=_spec_source(sources, key, "peaks"),
            )
        bandwidths = {}
        mem_bw = getattr(spec, "memory_bandwidth", None)
        if mem_bw is not None:
            bandwidths["DRAM"] = Ceiling(
                measured=None,
                datasheet=float(mem_bw),
                method="not measured",
                datasheet_source=_spec_source(sources, "memory_bandwidth", "memory_bandwidth"),
            )
        info = {
            k: _jsonable(getattr(spec, k, None)) for k in ("sm_count", "boost_clock_hz", "l2_bytes")
        }
        info["datasheet_sources"] = {str(k): str(v) for k, v in sources.items()}
        return cls(
            device=device,
            name=name,
            fingerprint="datasheet:" + name,
            peaks=peaks,
            bandwidths=bandwidths,
            version=_version(),
            info=info,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Ceilings):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    # ---- display: written by the render floor (roofline.render._ceilings_table) ----

    def rows(self) -> list[tuple[str, float | None, float | None, float | None, str]]:
        """(label, measured, datasheet, ratio, unit) per ceiling, in display units (GFLOP/s; GOP/s for integer
        products, where a multiply and an add count one operation each; GB/s):
        :func:`roofline.render._ceilings_table.rows`."""
        return _view().rows(self)

    def table(self, methods: bool = False) -> str:
        """A text table: ceiling, measured, datasheet, measured/datasheet (and the method with methods=True):
        :func:`roofline.render._ceilings_table.table`."""
        return _view().table(self, methods)

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        parts = []
        for key in (("vector", "float64"), ("vector", "float32"), ("matrix", "bfloat16")):
            c = self.peaks.get(key)
            if c is not None and (c.measured or c.datasheet):
                v = c.measured if c.measured is not None else c.datasheet
                parts.append(f"{key[0]}/{key[1]}={v / 1e9:.1f} GFLOP/s")
        c = self.bandwidths.get("DRAM")
        if c is not None and (c.measured or c.datasheet):
            v = c.measured if c.measured is not None else c.datasheet
            parts.append(f"DRAM={v / 1e9:.1f} GB/s")
        when = f", measured in {self.duration_s:.2f} s" if self.duration_s is not None else ""
        return f"Ceilings({self.device!r}, {self.name!r}, {', '.join(parts)}{when})"


# ---------------------------------------------------------------------------------------------------------------
# Public entry point
# ---------------------------------------------------------------------------------------------------------------

Progress = Callable[[str], None]


def ceilings(
    device: Any = "cpu", refresh: bool = False, quick: bool = True, progress: Progress | None = None
) -> Ceilings:
    """Measured ceilings of ``device`` ("cpu", "cuda" or "cuda:N"; a ``torch.device`` also works).

    Results are cached on disk (in ``roofline.hardware._ceilings.cache_dir()``: ``$ROOFLINE_CACHE_DIR``, else
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
    stderr is a terminal or a notebook (``roofline.util._progress``; ``ROOFLINE_PROGRESS=0`` turns it off), and
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


# ---------------------------------------------------------------------------------------------------------------
# A stable yardstick: what a report is judged against when this run's measurement is under contention
# ---------------------------------------------------------------------------------------------------------------

YARDSTICKS = ("measured", "datasheet", "theoretical")


def reference_path(kind: str, fingerprint: str) -> str:
    """Where the last idle measurement of a device (``kind`` "cpu" or "cuda", its ``fingerprint``) is kept: every
    idle measurement replaces it, and ``python -m roofline ceilings --save`` writes it. Unlike the cache, it is
    kept across package versions: it is the machine's yardstick."""
    return os.path.join(cache_dir(), "idle", f"{kind}-{fingerprint}.json")


def saved_idle(device: Any = "cpu", path: str | None = None) -> Ceilings | None:
    """The last idle measurement of this machine's ``device`` (:func:`reference_path`), or of ``path``: None when
    there is none, or it is unreadable, of another machine, or flagged busy (with a warning for the last three)."""
    kind, _ = _parse_device(device)
    if kind != "cpu" and path is None:
        return None  # GPU measurements are not flagged for contention: nothing to stand in for
    fingerprint = _cpu_fingerprint(_cpu_info()) if kind == "cpu" else None
    where = path or reference_path(kind, fingerprint)
    if path is None and os.path.isdir(os.path.dirname(where)) and untrusted_reason(os.path.dirname(where)) is not None:
        return None  # a cache folder others can write could feed forged ceilings into every report
    c = load_file(where, quiet_missing=path is None)
    if c is None:
        return None
    if fingerprint is not None and c.fingerprint != fingerprint:
        warn(f"ignoring the saved ceilings {where}: they describe another machine (fingerprint {c.fingerprint}, "
             f"this one is {fingerprint})", RuntimeWarning)
        return None
    if c.info.get("busy"):
        warn(f"ignoring the saved ceilings {where}: they were measured under contention", RuntimeWarning)
        return None
    return c


def load_file(path: str, quiet_missing: bool = False) -> Ceilings | None:
    """Ceilings saved as JSON at ``path`` (``Ceilings.to_json``, ``python -m roofline ceilings --save``), or None
    with a warning (silently for a missing file when ``quiet_missing``)."""
    try:
        with open(path, "rb") as f:
            data = f.read(_MAX_CACHE_BYTES + 1)
        if len(data) > _MAX_CACHE_BYTES:
            raise ValueError(f"it is larger than {_MAX_CACHE_BYTES} bytes")
        return Ceilings.from_json(data)
    except (FileNotFoundError, NotADirectoryError) as e:
        if not quiet_missing:
            warn(f"cannot read the saved ceilings {path} ({e})", RuntimeWarning)
    except (OSError, ValueError) as e:
        warn(f"cannot read the saved ceilings {path} ({e})", RuntimeWarning)
    return None


def save_idle(c: Ceilings, path: str | None = None) -> str:
    """Write an idle measurement ``c`` as this machine's yardstick (:func:`reference_path`, or ``path``); returns
    where. ValueError when ``c`` was measured under contention (it would make every later report wrong)."""
    if c.info.get("busy"):
        raise ValueError("these ceilings were measured under contention ("
                         + "; ".join(map(str, c.info.get("contention") or ["flagged busy"]))
                         + "): not saved; measure again when the machine is idle")
    if c.duration_s is None:
        raise ValueError("these ceilings hold no measurement: nothing to save")
    kind, _ = _parse_device(c.device)
    where = path or reference_path(kind, c.fingerprint)
    if path is None:
        if not _store_cache(where, c):
            raise OSError(f"could not write {where} (the warning says why)")
    else:
        _output.write(where, c.to_json(), where="ceilings --save")
    return where


def theoretical(measured: Ceilings | None = None, info: dict[str, Any] | None = None) -> Ceilings:
    """This CPU's theoretical ceilings, from what it reports: the peak per float dtype = cores x clock x SIMD lanes
    x FMA units x 2 (the SIMD width detected, the FMA units per core assumed per SIMD generation unless
    ``ROOFLINE_CPU_FMA_UNITS`` says), the DRAM bandwidth = memory channels x transfer rate x bus width where the
    firmware's memory table is readable (``/sys/firmware/dmi/tables/DMI``, usually root only). Without it the
    DRAM figure is ``measured``'s (its ``datasheet`` column empty, the note saying so). The figures sit in the
    ``datasheet`` column (with ``source="best"``, a figure of the ``measured`` column is only the DRAM fallback).
    ``info["yardstick"]`` says what they are."""
    info = dict(info or (measured.info if measured is not None and measured.info.get("simd") else _cpu_info()))
    simd = str(info.get("simd") or "scalar")
    theory = _theoretical(info, simd)
    if not theory["peak"]:
        raise CeilingNotAvailable(f"no theoretical peak for this CPU: {theory['clock_note']}")
    peaks = {("vector", d): Ceiling(None, v, "", theory["formula"][d]) for d, v in theory["peak"].items()}
    notes = [f"{d} peak, {theory['formula'][d]}" for d in theory["peak"]]
    if theory["clock_note"]:
        notes.append(theory["clock_note"])
    dram = dram_theoretical()
    bandwidths = {}
    if dram is not None:
        bandwidths["DRAM"] = Ceiling(None, dram["bytes_per_s"], "", dram["formula"])
        notes.append(f"DRAM: {dram['formula']}")
    elif measured is not None and any(c.measured for c in measured.bandwidths.values()):
        # DRAM is the slowest level: under contention a level's figure can come out far off either way (a cache
        # level below DRAM is what flags it), so the lowest figure of any level is the one that does not overstate
        # DRAM's rate
        level, low = min(((k, c.measured) for k, c in measured.bandwidths.items() if c.measured),
                         key=lambda kv: kv[1])
        bandwidths["DRAM"] = Ceiling(low, None, f"the lowest bandwidth measured in this run ({level})"
                                     + (", under contention" if measured.info.get("busy") else ""), "")
        notes.append("DRAM: the memory table is not readable (/sys/firmware/dmi/tables/DMI): the bandwidth is the "
                     f"lowest this run measured ({level})" + (", under contention: MBU and the memory bounds are not "
                                                             "stable" if measured.info.get("busy") else ""))
    else:
        notes.append("DRAM: no theoretical bandwidth (the memory table is not readable) and no measurement")
    yard = {"kind": "theoretical", "formula": [theory["formula"][d] for d in theory["peak"]],
            "dram": dram["formula"] if dram else None}
    return Ceilings(device="cpu", name=str(info.get("model") or "CPU"), fingerprint=_cpu_fingerprint(info),
                    peaks=peaks, bandwidths=bandwidths, duration_s=None, version=_version(), timestamp=None,
                    quick=None, info=_jsonable(dict(info, yardstick=yard, busy=False)), notes=notes)


_DMI_TABLE = "/sys/firmware/dmi/tables/DMI"


def dram_theoretical(table: bytes | None = None) -> dict[str, Any] | None:
    """``{"bytes_per_s", "channels", "mt_s", "width_bits", "formula"}`` from the SMBIOS memory devices (type 17)
    of ``table`` (default: read from /sys/firmware/dmi/tables/DMI; None when unreadable or holding no populated
    device with a speed). Channels are the distinct channel names of the devices' locators ("CHANNEL A",
    "ChannelB", "P0 CH1", ...); where the locators name none, each populated device counts as a channel (an upper
    bound: two DIMMs on one channel share it, and the formula says so)."""
    if table is None:
        try:
            with open(_DMI_TABLE, "rb") as f:
                table = f.read(1 << 20)
        except OSError:
            return None
    devs = []
    i = 0
    while i + 4 <= len(table):
        kind, length = table[i], table[i + 1]
        if length < 4 or i + length > len(table):
            break
        end = table.find(b"\0\0", i + length)
        if end < 0:
            break
        strings = table[i + length:end].split(b"\0")
        if kind == 17 and length >= 0x17:
            body = table[i:i + length]
            size = int.from_bytes(body[0x0C:0x0E], "little")
            width = int.from_bytes(body[0x0A:0x0C], "little")  # data width, bits
            speed = int.from_bytes(body[0x15:0x17], "little")
            if length >= 0x22:
                conf = int.from_bytes(body[0x20:0x22], "little")
                speed = conf or speed
            if size not in (0, 0xFFFF) and width not in (0, 0xFFFF) and speed not in (0, 0xFFFF):

                def string(n):
                    return strings[n - 1].decode("ascii", "replace") if 0 < n <= len(strings) else ""

                locator = f"{string(body[0x10])} {string(body[0x11])}"
                devs.append((locator, width, speed))
        if kind == 127:
            break
        i = end + 2
    if not devs:
        return None
    channels = set()
    for locator, _, _ in devs:
        m = re.search(r"(?:channel|chan|ch)[\s_-]*([a-z0-9]+)", locator, re.I)
        channels.add(m.group(1).upper() if m else None)
    named = None not in channels
    n = len(channels) if named else len(devs)
    speed = min(d[2] for d in devs)
    width = min(d[1] for d in devs)
    bw = n * speed * 1e6 * width / 8
    how = "channels named by the locators" if named else "populated devices, each taken as a channel: an upper bound"
    return {"bytes_per_s": bw, "channels": n, "mt_s": speed, "width_bits": width,
            "formula": f"{n} channels ({how}) x {speed} MT/s x {width // 8} bytes (SMBIOS memory devices)"}


def stable(measured: Ceilings, saved: str | None = None) -> Ceilings:
    """The yardstick for a report whose ceilings were ``measured`` in this run: ``measured`` itself when it is
    not flagged busy; else the last idle measurement of this machine (:func:`saved_idle`, or the file ``saved``),
    else the CPU's :func:`theoretical` ceilings. The returned ceilings' ``info["yardstick"]`` says which and why:
    ``kind`` ("measured", "idle", "theoretical"), ``contention`` (why this run's measurement was not used)."""
    if not measured.info.get("busy"):
        return measured
    reasons = [str(x) for x in (measured.info.get("contention") or ["flagged busy"])]
    idle = saved_idle(measured.device, saved)
    if idle is not None:
        out = Ceilings.from_dict(idle.to_dict())
        out.info["yardstick"] = {"kind": "idle", "measured_at": idle.timestamp, "by_version": idle.version,
                                 "contention": reasons}
        out.notes = list(out.notes) + [f"the last idle measurement of this machine ({idle.timestamp}), used because "
                                       f"this run's measurement was under contention: {'; '.join(reasons)}"]
        return out
    out = theoretical(measured)
    out.info["yardstick"]["contention"] = reasons
    out.notes.insert(0, "no idle measurement of this machine is saved (python -m roofline ceilings --save when it "
                        "is idle): the theoretical peak is the yardstick, because this run's measurement was under "
                        f"contention: {'; '.join(reasons)}")
    return out


def cache_dir() -> str:
    """Directory of the ceilings cache: $ROOFLINE_CACHE_DIR, else $XDG_CACHE_HOME/roofline, else
    ~/.cache/roofline."""
    override = os.environ.get("ROOFLINE_CACHE_DIR")
    if override:
        return override
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "roofline")


# ---------------------------------------------------------------------------------------------------------------
# CPU measurement: the benchmark registry
# ---------------------------------------------------------------------------------------------------------------

# Measurement settings: FMA seconds per dtype and timed repeats; sweep repeats per (kernel, size), minimum seconds
# per timed sweep run, working-set sizes per octave (doubling).
_QUICK = {"fma_seconds": 0.12, "fma_repeats": 5, "bw_repeats": 3, "bw_min_seconds": 0.001, "per_octave": 1}
_THOROUGH = {"fma_seconds": 0.6, "fma_repeats": 9, "bw_repeats": 5, "bw_min_seconds": 0.005, "per_octave": 2}
_MIN_SIZE = 16 << 10
# Below this share of their CPUs (CPU time / wall time) the benchmark threads competed with other processes.
_BUSY_SHARE = 0.85


@dataclass
class _CpuRun:
    """What the CPU benchmarks of one measurement share: the settings and machine facts they read, and the results
    they fill in (``peaks``, ``bandwidths``, ``sweep``; ``durations`` and ``shares``, the benchmark threads' CPU
    share, keyed by timed part; ``notes``)."""

    quick: bool
    settings: dict[str, Any]
    info: dict[str, Any]
    threads: int
    simd: str
    theory: dict[str, Any]
    caps: dict[str, int]
    dram_size: int
    say: Callable[[str], None]
    peaks: dict[tuple[str, str], Ceiling] = field(default_factory=dict)
    bandwidths: dict[str, Ceiling] = field(default_factory=dict)
    sweep: dict[str, Any] | None = None
    durations: dict[str, float] = field(default_factory=dict)
    shares: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    lowp_used: dict[str, str] = field(default_factory=dict)  # dtype -> the low-precision kernel measured

    @property
    def nt_min(self) -> int:
        """Working sets from this size (the aggregate last-level cache) up are written with non-temporal stores."""
        return self.caps[max(self.caps)]


@dataclass(frozen=True)
class CpuBenchmark:
    """One CPU ceiling benchmark: ``key`` names it, ``supported(info)`` says whether it runs on the machine
    ``_cpu_info()`` describes, ``runner(run, bench)`` measures and fills ``run`` (see ``_CpuRun``), ``rows`` are
    the ceilings it fills ("vector/float64"; "bandwidth/{level}..." for one per memory level), ``params`` what the
    runner reads with ``param``."""

    key: str
    label: str
    supported: Callable[[dict[str, Any]], bool]
    runner: Callable[[_CpuRun, "CpuBenchmark"], None]
    rows: tuple[str, ...]
    params: tuple[tuple[str, Any], ...] = ()

    def param(self, name: str) -> Any:
        return dict(self.params)[name]


def _timed_peak(run: _CpuRun, key: str, what: str, peak_fn, arg) -> dict:
    """One all-core peak benchmark of the C core (``peak_fn(arg, seconds, threads, repeats=)``), announced, with
    its duration and CPU share kept under ``key``."""
    settings = run.settings
    run.say(f"measuring the {what} on {run.threads} threads")
    t = time.perf_counter()
    r = peak_fn(arg, settings["fma_seconds"], run.threads, repeats=settings["fma_repeats"])
    run.durations[key] = time.perf_counter() - t
    run.shares[key] = r["cpu_share"]
    return r


def _run_fma(run: _CpuRun, bench: CpuBenchmark) -> None:
    """All-core FMA peak of one dtype (``_core.cpu_fma_peak``): FLOPs = FMAs x 2, per second."""
    dtype = bench.param("dtype")
    r = _timed_peak(run, f"fma_{dtype}", f"{dtype} FMA peak", _core.cpu_fma_peak, dtype)
    op = "FMA x = x*m + a (2 FLOP)" if r["fma"] else "multiply + add x = x*m + a (2 FLOP)"
    method = (
        f"{r['threads']} {'pinned ' if r['pinned'] else ''}threads x {r['accumulators']} independent {run.simd} "
        f"chains of {r['lanes']} {dtype} lanes, {op}; median of {r['repeats']} timed repeats after calibration"
    )
    run.peaks[("vector", dtype)] = Ceiling(
        measured=r["flops"],
        datasheet=run.theory["peak"].get(dtype),
        method=method,
        datasheet_source=run.theory["formula"].get(dtype, ""),
    )


class _BwKernel(NamedTuple):
    text: str  # how the method line names the kernel
    stores: bool  # it writes memory (so non-temporal stores apply beyond the last-level cache)
    suffix: str  # of its ceiling key: "" for the level's headline figure, else "_<kernel>"


# The kernels of the bandwidth sweep (each one a row of cpu.c's kernel table, same name), in sweep order. The
# bytes of a pass are `arrays` x N*8, `arrays` from _core.cpu_kernels(). Triad is each level's headline figure.
_BW_KERNELS = {
    "read": _BwKernel("read", False, "_read"),
    "copy": _BwKernel("copy", True, "_copy"),
    "triad": _BwKernel("triad a = b + s*c", True, ""),
}
KERNELS = tuple(_BW_KERNELS)


def _run_bandwidth(run: _CpuRun, bench: CpuBenchmark) -> None:
    """The bandwidth sweep of every kernel over working sets from L1 to DRAM, reduced to a plateau per level."""
    kernels = bench.param("kernels")
    settings, threads = run.settings, run.threads
    sizes = _sweep_sizes(run.caps, run.dram_size, threads, run.quick, settings["per_octave"])
    run.say(
        f"measuring bandwidth: {', '.join(kernels)} over {len(sizes)} working sets up to {run.dram_size >> 20} MiB"
    )
    t = time.perf_counter()
    rates, stats = _core.cpu_bandwidth_sweep(
        sizes,
        kernels,
        threads,
        settings["bw_repeats"],
        min_seconds=settings["bw_min_seconds"],
        nt_min_bytes=run.nt_min,
        return_stats=True,
        # Transparent huge pages raise the DRAM figure (fewer TLB misses), but their first touch can stall for
        # seconds while the kernel compacts memory: only the thorough run asks for them.
        hugepages=not run.quick,
    )
    run.durations["bandwidth_sweep"] = time.perf_counter() - t
    run.shares["bandwidth_sweep"] = stats["cpu_share"]
    run.sweep = {"sizes": sizes}
    run.sweep.update({k: rates[i] for i, k in enumerate(kernels)})
    arrays = dict(_core.cpu_kernels()["bandwidth"])
    headline_first = sorted(kernels, key=lambda k: _BW_KERNELS[k].suffix != "")
    for level, (lo, hi, values) in _plateaus(sizes, rates, run.caps, run.dram_size, kernels).items():
        n = len([s for s in sizes if lo <= s <= hi])
        span = fmt(lo, "B", binary=True) if lo == hi else f"{fmt(lo, 'B', binary=True)} to {fmt(hi, 'B', binary=True)}"
        nt_text = (
            "; stores are non-temporal (the working set exceeds the last-level cache)"
            if lo >= run.nt_min and run.simd != "neon" and run.simd != "scalar"
            else ""
        )
        base = (
            f"median over {n} working set{'s' if n != 1 else ''} of {span} ({threads} "
            f"{'pinned ' if stats['pinned'] else ''}threads, "
            f"{settings['bw_repeats']} repeats each, median)"
        )
        for k in headline_first:
            kernel = _BW_KERNELS[k]
            count = "N*8" if arrays[k] == 1 else f"{arrays[k]}*N*8"
            run.bandwidths[f"{level}{kernel.suffix}"] = Ceiling(
                measured=values[k],
                datasheet=None,
                method=f"{kernel.text}, {count} bytes per pass; {base}{nt_text if kernel.stores else ''}",
            )


# The low-precision product kernels of cpu.c (``_core.cpu_lowp_kernels()``): what one instruction does, and the
# operations per core per cycle the theoretical peak assumes ("fma": per FMA unit, like the float32 FMA peak).
_LOWP_KERNELS = {
    "avx512_bf16": ("each vdpbf16ps adds 2 bf16 x bf16 products into each of 16 fp32 lanes (4 FLOP per lane)",
                    ("fma", 64), "16 fp32 lanes x 2 bf16 products x 2 FLOP per vdpbf16ps"),
    "avx512_fp16": ("each vfmadd231ph is 32 fp16 lanes x FMA (2 FLOP)", ("fma", 64),
                    "32 fp16 lanes x 2 FLOP per vfmadd231ph"),
    "avx512_vnni": ("each vpdpbusd adds 4 u8 x s8 products into each of 16 int32 lanes (8 operations per lane)",
                    ("fma", 128), "16 int32 lanes x 4 int8 products x 2 operations per vpdpbusd"),
    "avx_vnni": ("each vpdpbusd ymm adds 4 u8 x s8 products into each of 8 int32 lanes (8 operations per lane)",
                 ("fma", 64), "8 int32 lanes x 4 int8 products x 2 operations per vpdpbusd ymm"),
    "amx_bf16": ("4 tiles, each tdpbf16ps 16x16 fp32 += 16x32 bf16 x 32x16 bf16 (16,384 FLOP)", ("core", 1024),
                 "1,024 bf16 FLOP per cycle per core (one 16x16x32 tdpbf16ps per 16 cycles, as on Sapphire Rapids: "
                 "assumed)"),
    "amx_int8": ("4 tiles, each tdpbssd 16x16 int32 += 16x64 s8 x 64x16 s8 (32,768 operations)", ("core", 2048),
                 "2,048 int8 operations per cycle per core (one 16x16x64 tdpbssd per 16 cycles, as on Sapphire "
                 "Rapids: assumed)"),
}


def _lowp_usable(bench: "CpuBenchmark", info: dict[str, Any]) -> list[str]:
    """The kernels of a low-precision benchmark that can run on the machine ``info`` describes, fastest first."""
    kernels = info.get("lowp_kernels") or {}
    return [k for k in bench.param("kernels") if (kernels.get(k) or {}).get("available")]


def _run_lowp(run: _CpuRun, bench: CpuBenchmark) -> None:
    """All-core peak of the fastest low-precision product kernel of one dtype that runs here
    (``_core.cpu_lowp_peak``), as the ("matrix", dtype) ceiling: the rate of products in that dtype."""
    dtype = bench.param("dtype")
    usable = _lowp_usable(bench, run.info)
    kernel = usable[0]
    r = _timed_peak(run, f"lowp_{dtype}", f"{dtype} product peak ({kernel})", _core.cpu_lowp_peak, kernel)
    run.lowp_used[dtype] = kernel
    what, _, _ = _LOWP_KERNELS[kernel]
    skipped = [
        (run.info["lowp_kernels"].get(k) or {}).get("reason", "")
        for k in bench.param("kernels") if k not in usable
    ]
    method = (
        f"{r['threads']} {'pinned ' if r['pinned'] else ''}threads x {r['accumulators']} independent "
        f"accumulators; {what}; median of {r['repeats']} timed repeats after calibration"
        + "".join(f"; not used: {why}" for why in skipped if why)
    )
    peak, formula = _lowp_theory(run, kernel)
    run.peaks[("matrix", dtype)] = Ceiling(measured=r["flops"], datasheet=peak, method=method,
                                           datasheet_source=formula)


def _lowp_theory(run: _CpuRun, kernel: str) -> tuple[float | None, str]:
    """Theoretical peak of a low-precision kernel: cores x clock x operations per cycle, with its assumptions."""
    clock = float(run.info.get("clock_hz") or 0.0)
    if clock <= 0:
        return None, ""
    cores = run.theory["cores"]
    _, (per, ops), text = _LOWP_KERNELS[kernel]
    src = run.info.get("clock_source", "unknown")
    if per == "fma":
        units = run.theory["fma_units"]
        return (cores * clock * ops * units,
                f"theoretical: {cores} cores x {clock / 1e9:.2f} GHz ({src}) x {text} x {units} units "
                f"({run.theory['fma_units_source']}; the float32 FMA assumption)")
    return cores * clock * ops, f"theoretical: {cores} cores x {clock / 1e9:.2f} GHz ({src}) x {text}"


def _always(info: dict[str, Any]) -> bool:
    return True


def _lowp_supported(dtype: str) -> Callable[[dict[str, Any]], bool]:
    def supported(info: dict[str, Any]) -> bool:
        bench = next(b for b in _CPU_REGISTRY if b.key == f"matrix/{dtype}")
        return bool(_lowp_usable(bench, info))

    supported.__name__ = f"_lowp_supported_{dtype}"
    return supported


# The CPU benchmarks, in the order they run. A new ceiling is one entry here; a new kernel is also a row in one of
# cpu.c's tables (the FMA dtypes, the bandwidth kernels), which _core.cpu_kernels() lists.
_CPU_REGISTRY: tuple[CpuBenchmark, ...] = (
    CpuBenchmark("vector/float64", "float64 FMA", _always, _run_fma, ("vector/float64",),
                 (("dtype", "float64"), ("elem_bytes", 8))),
    CpuBenchmark("vector/float32", "float32 FMA", _always, _run_fma, ("vector/float32",),
                 (("dtype", "float32"), ("elem_bytes", 4))),
    # Native low-precision products: the first kernel that runs here, in the order given (AMX before AVX-512).
    CpuBenchmark("matrix/bfloat16", "bfloat16 products", _lowp_supported("bfloat16"), _run_lowp,
                 ("matrix/bfloat16",), (("dtype", "bfloat16"), ("kernels", ("amx_bf16", "avx512_bf16")))),
    CpuBenchmark("matrix/float16", "float16 products", _lowp_supported("float16"), _run_lowp,
                 ("matrix/float16",), (("dtype", "float16"), ("kernels", ("avx512_fp16",)))),
    CpuBenchmark("matrix/int8", "int8 products", _lowp_supported("int8"), _run_lowp,
                 ("matrix/int8",), (("dtype", "int8"), ("kernels", ("amx_int8", "avx512_vnni", "avx_vnni")))),
    CpuBenchmark("bandwidth", "bandwidth sweep", _always, _run_bandwidth,
                 tuple(f"bandwidth/{{level}}{_BW_KERNELS[k].suffix}" for k in KERNELS), (("kernels", KERNELS),)),
)


def cpu_benchmarks(info: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The CPU benchmark registry: one dict per benchmark with ``key``, ``label`` and ``rows`` (the ceilings it
    fills) and, when ``info`` (a ``_cpu_info()`` dict) is given, ``supported`` on that machine."""
    out = []
    for bench in _CPU_REGISTRY:
        entry: dict[str, Any] = {"key": bench.key, "label": bench.label, "rows": list(bench.rows)}
        if info is not None:
            entry["supported"] = bool(bench.supported(info))
        out.append(entry)
    return out


def _measure_cpu(quick: bool, progress: Progress | None, info: dict[str, Any]) -> Ceilings:
    """Run the CPU benchmarks of the registry and build a Ceilings (the cache is handled by the caller)."""
    settings = _QUICK if quick else _THOROUGH
    start = time.perf_counter()
    load_before = _loadavg()
    threads = int(info["cpus"])
    simd = str(info["simd"])
    theory = _theoretical(info, simd)  # first: a bad ROOFLINE_CPU_FMA_UNITS fails before any measuring
    notes = []
    caps = _cache_capacities(info)
    if not caps:
        caps = {"L1": 32 << 10, "L2": 1 << 20, "L3": 32 << 20}
        notes.append("cache sizes unknown: assumed 32 KiB L1, 1 MiB L2, 32 MiB L3 (aggregate) for the sweep ranges")
    llc = caps[max(caps)]
    dram_size, capped = _dram_size(llc, threads)
    if capped:
        notes.append(
            f"the DRAM working set is {dram_size >> 20} MiB, less than 4 x the last-level cache "
            f"({4 * llc >> 20} MiB), to stay within a quarter of the available memory: the DRAM figure may "
            "include cache hits"
        )
    benches = [b for b in _CPU_REGISTRY if b.supported(info)]
    step = [0]

    def say(msg: str) -> None:
        if progress is not None:
            progress(f"{msg} ({step[0]}/{len(benches)})")

    run = _CpuRun(quick, settings, info, threads, simd, theory, caps, dram_size, say, notes=notes)
    for bench in benches:
        step[0] += 1
        bench.runner(run, bench)

    if theory["clock_note"]:
        notes.append(theory["clock_note"])
    f64 = run.peaks.get(("vector", "float64"))
    if f64 is not None and f64.datasheet and f64.measured > 1.05 * f64.datasheet:
        implied = f64.measured / (theory["cores"] * _lanes(simd, 8) * theory["fma_units"] * 2)
        notes.append(
            f"the measured float64 peak exceeds the theoretical one: it implies an all-core clock of "
            f"{implied / 1e9:.2f} GHz at {theory['fma_units']} FMA units per core, above the "
            f"{info['clock_hz'] / 1e9:.2f} GHz used for the theoretical peak"
        )
    native = info.get("native_lowp") or {}
    lowp = info.get("lowp_kernels") or {}
    for dtype in ("bfloat16", "float16", "int8"):
        if ("matrix", dtype) in run.peaks:
            continue  # measured by a benchmark of its own
        why = "; ".join(k["reason"] for k in lowp.values() if k.get("dtype") == dtype and k.get("reason"))
        why = f" ({why})" if why else ""
        if dtype == "int8":
            notes.append(f"int8: no native int8 product kernel ran{why}; there is no int8 peak")
        elif native.get(dtype):
            notes.append(
                f"{dtype}: the CPU advertises {', '.join(native[dtype])}, but no kernel of this package ran{why}; "
                f"{dtype} peaks fall back to the float32 peak (a lower bound)"
            )
        else:
            notes.append(f"{dtype}: no native product kernel ran{why}; {dtype} peaks fall back to the float32 peak")

    recheck = None
    f32 = run.peaks.get(("vector", "float32"))
    if f32 is not None and f32.measured:
        # A short second measurement of the float32 peak: the two disagree when the machine's load changed.
        r = _core.cpu_fma_peak("float32", settings["fma_seconds"] / 3, threads, repeats=3)
        recheck = {"vector/float32": r["flops"]}
        run.shares["recheck_float32"] = r["cpu_share"]
    reasons = contention_reasons(run.shares, run.bandwidths, run.peaks, recheck)
    if reasons:
        msg = (
            "the ceilings look measured under contention (" + "; ".join(reasons) + "): they are not cached; "
            "reports judge against the last idle measurement of this machine, else its theoretical peak "
            "(`python -m roofline ceilings --save` on an idle machine keeps one)"
        )
        notes.append(msg)
        warn(msg, RuntimeWarning)

    duration = time.perf_counter() - start
    run.durations["total"] = duration
    cpu_info = dict(info)
    cpu_info.update(
        {
            "threads": threads,
            "fma_units": theory["fma_units"],
            "fma_units_source": theory["fma_units_source"],
            "theoretical_cores": theory["cores"],
            "cache_capacity_bytes": caps,
            "dram_working_set_bytes": dram_size,
            "nt_min_bytes": run.nt_min,
            "durations_s": run.durations,
            "cpu_share": run.shares,
            "busy": bool(reasons),
            "contention": reasons,
            "lowp_used": run.lowp_used,
            "recheck": recheck,
            "loadavg": [load_before, _loadavg()],
        }
    )
    return Ceilings(
        device="cpu",
        name=str(info.get("model") or "CPU"),
        fingerprint=_cpu_fingerprint(info),
        peaks=run.peaks,
        bandwidths=run.bandwidths,
        duration_s=duration,
        version=_version(),
        timestamp=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        quick=quick,
        info=_jsonable(cpu_info),
        sweep=run.sweep,
        notes=notes,
    )


# Contention tests. A cache level's read bandwidth below this share of the next (slower) level's, or of DRAM's,
# cannot be the hardware; nor can a peak below this share of a quick re-check of it (or the re-check below it).
_HIERARCHY_TOLERANCE = 0.8
_RECHECK_TOLERANCE = 0.7


def contention_reasons(
    shares: dict[str, float],
    bandwidths: dict[str, Ceiling],
    peaks: dict[tuple[str, str], Ceiling],
    recheck: dict[str, float] | None = None,
) -> list[str]:
    """Why a set of CPU ceilings looks measured under contention (empty when nothing does): the benchmark
    threads' CPU share (``shares``, per timed part) below 85%; an implausible memory hierarchy (a cache level's
    read bandwidth, or its triad headline, below 80% of a slower level's); a peak that disagrees with a quick
    re-check (``recheck``: {"unit/dtype": FLOP/s}) by more than 30%. A pure function of its arguments."""
    out = []
    low = {k: v for k, v in shares.items() if 0 < v < _BUSY_SHARE}
    if low:
        worst = min(low, key=low.get)
        out.append(f"other processes used the CPUs: the benchmark threads got {100 * low[worst]:.0f}% of their "
                   f"CPUs ({worst})")
    levels = [lvl for lvl in LEVELS if lvl in bandwidths]
    for suffix, label in (("_read", "read"), ("", "triad")):
        value = {lvl: (bandwidths.get(f"{lvl}{suffix}") or Ceiling(None)).measured for lvl in levels}
        for i, fast in enumerate(levels):
            for slow in levels[i + 1:]:
                if value[fast] and value[slow] and value[fast] < _HIERARCHY_TOLERANCE * value[slow]:
                    out.append(f"implausible hierarchy: {fast} {label} bandwidth {value[fast] / 1e9:.1f} GB/s is "
                               f"below {slow}'s {value[slow] / 1e9:.1f} GB/s")
                    break
    for key, again in (recheck or {}).items():
        unit, _, dtype = key.partition("/")
        first = (peaks.get((unit, dtype)) or Ceiling(None)).measured
        if first and again and min(first, again) < _RECHECK_TOLERANCE * max(first, again):
            out.append(f"the {key} peak {first / 1e9:.1f} GFLOP/s and a quick re-check {again / 1e9:.1f} GFLOP/s "
                       "disagree by more than 30%")
    return out


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def _cache_capacities(info: dict[str, Any]) -> dict[str, int]:
    """Aggregate capacity per cache level over the CPUs in use: size of one instance x instances."""
    caps = {}
    for level, c in (info.get("caches") or {}).items():
        if c.get("bytes", 0) > 0:
            caps[level] = int(c["bytes"]) * max(1, int(c.get("instances", 1)))
    return caps


def _available_memory() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _dram_size(llc: int, threads: int) -> tuple[int, bool]:
    """Working set for the DRAM plateau: 4 x the last-level cache, capped at a quarter of available memory.
    Returns (bytes, capped)."""
    want = max(4 * llc, 64 << 20)
    avail = _available_memory()
    if avail is not None and want > avail // 4:
        return max(avail // 4 // (1 << 20) << 20, 1024 * threads), True
    return want, False


def _sweep_sizes(caps: dict[str, int], dram: int, threads: int, quick: bool, per_octave: int) -> np.ndarray:
    """Working-set sizes in bytes: geometric from 16 KiB (or 4 KiB per thread) with `per_octave` sizes per
    doubling; quick stops at half the last-level cache and adds the DRAM size, thorough runs up to it."""
    lo = max(_MIN_SIZE, 4096 * threads)
    llc = caps[max(caps)]
    top = min(llc // 2 if quick else dram, dram)
    sizes = []
    k = 0
    while True:
        s = int(round(lo * 2 ** (k / per_octave))) // 64 * 64
        if s > top:
            break
        sizes.append(s)
        k += 1
    sizes.append(dram)
    return np.array(sorted(set(sizes)), dtype=np.int64)


def _level_range(level: str, caps: dict[str, int], lo: int) -> tuple[int, int]:
    """Working sets attributed to a cache level: from twice the previous level's capacity to half this one's."""
    names = sorted(caps)
    i = names.index(level)
    prev = caps[names[i - 1]] if i > 0 else 0
    return max(lo, 2 * prev), caps[level] // 2


def _plateaus(
    sizes: np.ndarray, rates: np.ndarray, caps: dict[str, int], dram: int, kernels: tuple[str, ...] = KERNELS
) -> dict[str, tuple[int, int, dict[str, float]]]:
    """Median rate per kernel within each level's range of working sets (see _level_range; DRAM: sizes >= the
    DRAM working set). A level whose range holds no size falls back to the sizes between the previous capacity
    and its own; a level with none at all is left out. ``rates[j]`` are the rates of ``kernels[j]``. Returns
    {level: (lo, hi, {kernel: bytes/s})}."""
    out = {}
    lo_all = int(sizes.min())
    ranges = {level: _level_range(level, caps, lo_all) for level in sorted(caps)}
    ranges["DRAM"] = (dram, int(sizes.max()))
    for level, (lo, hi) in ranges.items():
        mask = (sizes >= lo) & (sizes <= hi)
        if not mask.any() and level != "DRAM":
            names = sorted(caps)
            i = names.index(level)
            prev = caps[names[i - 1]] if i > 0 else 0
            mask = (sizes > prev) & (sizes <= caps[level])
        if not mask.any():
            continue
        chosen = sizes[mask]
        out[level] = (
            int(chosen.min()),
            int(chosen.max()),
            {k: float(statistics.median(rates[j][mask].tolist())) for j, k in enumerate(kernels)},
        )
    return out


def _theoretical(info: dict[str, Any], simd: str) -> dict[str, Any]:
    """Theoretical peak = cores x clock x SIMD lanes x FMA units x 2 FLOP, per dtype, with its assumptions."""
    cores = int(info.get("physical_cores") or 0) or int(info["cpus"])
    clock = float(info.get("clock_hz") or 0.0)
    clock_source = info.get("clock_source", "unknown")
    env = os.environ.get("ROOFLINE_CPU_FMA_UNITS")
    if env:
        try:
            units = int(env)
            if units < 1:
                raise ValueError
        except ValueError:
            raise ValueError(f"ROOFLINE_CPU_FMA_UNITS must be a positive integer, not {env!r}") from None
        units_source = "ROOFLINE_CPU_FMA_UNITS"
    else:
        units, units_source = _FMA_UNITS_ASSUMED.get(simd, _FMA_UNITS_ASSUMED["scalar"])
    lanes = {b.param("dtype"): _lanes(simd, b.param("elem_bytes")) for b in _CPU_REGISTRY if b.runner is _run_fma}
    out = {"cores": cores, "fma_units": units, "fma_units_source": units_source, "peak": {}, "formula": {},
           "clock_note": ""}
    if clock <= 0:
        out["clock_note"] = "the CPU clock is unknown: no theoretical peak"
        return out
    if "cpuinfo" in clock_source:
        out["clock_note"] = (
            f"clock {clock / 1e9:.2f} GHz from {clock_source}: often the nominal (base) clock in a VM; all-core "
            "turbo can exceed it, so measured/theoretical above 100% is possible"
        )
    for dtype, n in lanes.items():
        out["peak"][dtype] = cores * clock * n * units * 2.0
        out["formula"][dtype] = (
            f"theoretical: {cores} cores x {clock / 1e9:.2f} GHz ({clock_source}) x {n} {simd} {dtype} lanes x "
            f"{units} FMA units ({units_source}) x 2 FLOP"
        )
    return out


def _lanes(simd: str, elem_bytes: int) -> int:
    width = {"avx512": 64, "avx2": 32, "sse2": 16, "neon": 16}.get(simd)
    return 1 if width is None else width // elem_bytes


def _cpu_info() -> dict[str, Any]:
    """_core.cpu_info() plus the native low-precision instructions the CPU advertises."""
    info = _core.cpu_info()
    info["native_lowp"] = _native_lowp()
    kernels, _ = _core.cpu_lowp_kernels()
    info["lowp_kernels"] = {
        k["name"]: {"dtype": k["dtype"], "instruction": k["instruction"], "available": k["available"],
                    "reason": k["reason"]}
        for k in kernels
    }
    return info


def _native_lowp() -> dict[str, list[str]]:
    """Native low-precision instruction flags per dtype, from /proc/cpuinfo."""
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key = line.split(":", 1)[0].strip()
                if key in ("flags", "Features"):
                    flags.update(line.split(":", 1)[1].split())
                    break
    except OSError:
        return {}
    return {dtype: [f for f in names if f in flags] for dtype, names in _NATIVE_LOWP_FLAGS.items()}


def _cpu_fingerprint(info: dict[str, Any]) -> str:
    """Hash of what decides the CPU's ceilings: model, CPU counts, SIMD set, cache sizes and instances."""
    key = {
        "model": info.get("model"),
        "cpus": info.get("cpus"),
        "physical_cores": info.get("physical_cores"),
        "simd": info.get("simd"),
        "caches": info.get("caches"),
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------------------------------------------


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
    """Convert the dict of roofline.hardware._gpu.measure into Ceilings, adding datasheet figures from roofline.devices."""
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


# ---------------------------------------------------------------------------------------------------------------
# Cache
# ---------------------------------------------------------------------------------------------------------------


def _cache_path(kind: str, fingerprint: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", fingerprint)
    return os.path.join(cache_dir(), f"ceilings-{kind}-{safe}.json")


_MAX_CACHE_BYTES = 16 << 20  # a ceilings file is tens of KiB; anything far larger is not one


def _load_cache(path: str, fingerprint: str, need_thorough: bool) -> Ceilings | None:
    """The cached Ceilings at `path`, or None: missing (silently), or unusable (with a warning). Never raises. A
    directory that is not the user's own or that others can write is not read (the write that follows says why):
    it could feed forged ceilings into every report."""
    if untrusted_reason(os.path.dirname(path) or ".") is not None:
        return None
    try:
        with open(path, "rb") as f:
            data = f.read(_MAX_CACHE_BYTES + 1)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        warn(f"cannot read the ceilings cache {path} ({e}); re-measuring", RuntimeWarning)
        return None
    try:
        if len(data) > _MAX_CACHE_BYTES:
            raise ValueError(f"it is larger than {_MAX_CACHE_BYTES} bytes")
        c = Ceilings.from_json(data)
        if c.fingerprint != fingerprint:
            raise ValueError(f"it describes another device (fingerprint {c.fingerprint}, expected {fingerprint})")
        if c.version != _version():
            raise ValueError(f"it was measured by roofline {c.version!r}, this is {_version()!r}")
        if c.duration_s is None:
            raise ValueError("it holds no measurement")
        if c.device == "cpu" and "lowp_kernels" not in c.info:
            raise ValueError("it predates the low-precision peaks")
        if c.info.get("busy"):
            raise ValueError("it was measured under contention")
    except ValueError as e:
        warn(f"ignoring the ceilings cache {path}: {e}; re-measuring", RuntimeWarning)
        return None
    if need_thorough and c.quick:
        return None  # a quick result does not answer a thorough request: measure again, silently
    return c


def _store_cache(path: str, c: Ceilings) -> bool:
    """Write `c` to `path` atomically (temporary file in the same directory + os.replace), in a directory only this
    user can write. Never raises: a cache that cannot be written costs a re-measurement next time, with a warning
    now. True when written."""
    directory = os.path.dirname(path) or "."
    tmp = None
    reason = ensure_private_dir(directory)
    if reason is not None:
        warn(f"cannot write the ceilings cache {path} ({reason})", RuntimeWarning)
        return False
    try:
        fd, tmp = tempfile.mkstemp(prefix=".ceilings-", suffix=".tmp", dir=directory)
        with os.fdopen(fd, "w") as f:
            f.write(c.to_json())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
        return True
    except (OSError, ValueError) as e:  # ValueError: a result that is not valid JSON (NaN) is not cached
        warn(f"cannot write the ceilings cache {path} ({e})", RuntimeWarning)
        return False
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


# ---------------------------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------------------------


def _parse_device(device: Any) -> tuple[str, int]:
    if hasattr(device, "type") and not isinstance(device, str):  # torch.device
        kind, index = device.type, device.index
        device = kind if index is None else f"{kind}:{index}"
    if not isinstance(device, str):
        raise TypeError(f"device must be a str such as 'cpu' or 'cuda:0', not {type(device).__name__}")
    m = re.fullmatch(r"(cpu|cuda)(?::(\d+))?", device.strip())
    if m is None or (m.group(1) == "cpu" and m.group(2) not in (None, "0")):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', not {device!r}")
    return m.group(1), int(m.group(2) or 0)


def _check_source(source: str) -> str:
    if source not in SOURCES:
        raise ValueError(f"source must be one of {', '.join(map(repr, SOURCES))}, not {source!r}")
    return source


def _check_peak_args(unit: str, dtype: str, source: str) -> tuple[str, str, str]:
    if not isinstance(unit, str) or unit not in UNITS:
        raise ValueError(f"unit must be 'vector' or 'matrix', not {unit!r}")
    if not isinstance(dtype, str):
        dtype = str(dtype).replace("torch.", "")  # accept torch.float32 and the like
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
    return unit, dtype, _check_source(source)


def _spec_source(sources: dict, key: Any, fallback_key: str) -> str:
    for k in (key, "/".join(key) if isinstance(key, tuple) else None, fallback_key):
        if k is not None and k in sources:
            return str(sources[k])
    return ""


def _version() -> str:
    module = sys.modules.get("roofline")
    return str(getattr(module, "__version__", "")) if module is not None else ""


def _jsonable(obj: Any) -> Any:
    """Plain JSON types: dict keys become str, tuples lists, NumPy scalars Python numbers."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


_VIEWS: list = []  # the module that writes ceilings as text: roofline.render._ceilings_table, installed on import


def _view():
    """The text view of ceilings, which the render floor installs (this floor writes no text)."""
    if not _VIEWS:  # pragma: no cover - importing roofline installs it
        raise RuntimeError("the ceilings' text view is not installed: import roofline")
    return _VIEWS[-1]
