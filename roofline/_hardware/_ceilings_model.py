"""The data model of a device's ceilings: :class:`Ceilings` (peaks per (unit, dtype), bandwidths per memory level, with
their sources), :class:`Ceiling`, :class:`PeakChoice`, the JSON form and the datasheet form. Nothing here
measures; the text view is written by roofline.render._ceilings_table."""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

import numpy as np

from roofline._datamodel import _document
from roofline._datamodel._units import PEAK_DTYPES as DTYPES, UNITS
from roofline._util import _safejson


SCHEMA = "roofline.ceilings/1"


LEVELS = ("L1", "L2", "L3", "DRAM")


# The one list of ceilings sources. A figure is "measured" or from a "datasheet"; "best" is the measured figure where
# there is one, else the datasheet's; a ``ceilings=`` argument may name a yardstick (the figures of this run, of a
# datasheet, or the theoretical peak), besides a device, a file or a Ceilings.
FIGURE_SOURCES = ("measured", "datasheet")
SOURCES = (*FIGURE_SOURCES, "best")
YARDSTICKS = (*FIGURE_SOURCES, "theoretical")


# Low-precision dtypes a CPU computes in float32 unless it has native instructions (which are not measured).
_CPU_F32_FALLBACK = ("bfloat16", "float16", "tfloat32")


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
        figures must be null or rates in [1, 1e30] (``roofline._datamodel._document.CEILING``)."""
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
            for src in (FIGURE_SOURCES if source == "best" else (source,)):
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
            for src in (FIGURE_SOURCES if source == "best" else (source,)):
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
        other exception: every field is checked against ``roofline._datamodel._document`` (types; rates finite, in [1, 1e30]
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
        return _view().summary(self)


Progress = Callable[[str], None]


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
