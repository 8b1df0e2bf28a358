"""The roofs of one report: a small frozen value holding every figure its ops are judged against, taken once
from its :class:`~roofline._hardware._ceilings.Ceilings` (which figures: ``source``), and read by the
classification and by every chart.

- ``peaks``: FLOP/s per (unit, dtype), each with the figure it came from and the fallback it took (a note);
- ``bandwidths``: bytes/s per memory level ("L1", "L2", "L3", "DRAM");
- ``interconnect``: the bus bandwidth collectives are judged against;
- ``contention`` and ``yardstick``: whether the ceilings were measured under contention, and what stands in.

:func:`roofline._hardware._choose.roofs` chooses them (and may measure the machine to do so); nothing here
measures anything."""

from __future__ import annotations

import math
import types
from dataclasses import dataclass, field
from typing import Any, Mapping

from roofline._hardware import _devices as devices
from roofline._hardware._ceilings_model import CeilingNotAvailable, Ceilings
from roofline._datamodel._units import PEAK_DTYPES, UNITS

LEVELS = ("L1", "L2", "L3", "DRAM")

# dtypes judged against their own peak; other (integer, bool) work is judged against the fp32 vector rate
FLOAT_DTYPES = frozenset({"float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2",
                          "float8_e4m3fnuz", "float8_e5m2fnuz", "complex64", "complex128", "complex32"})

NO_LINK = ("no interconnect bandwidth for the collectives: call roofline.distributed.measure_interconnect() under "
           "the process group before measuring, or project to a device")


@dataclass(frozen=True)
class Figure:
    """One figure of the roofs: ``value`` (FLOP/s or bytes/s; NaN when there is none), ``source`` (which figure of
    the ceilings: "measured", "datasheet", "interconnect" for a measured link, "" when none), ``note`` (the
    fallback taken, or why there is none; "" when the figure asked for was used) and, for a peak, ``peak_of``: the
    (unit, dtype) whose peak it is (another than the one asked for where a fallback was taken; () when none)."""

    value: float
    source: str = ""
    note: str = ""
    peak_of: tuple = ()


_NONE = Figure(math.nan)


@dataclass(frozen=True, eq=False)
class Roofs:
    """The roofs of one report (see the module's docstring). ``ceilings``: the Ceilings the figures were taken
    from (None when the run has none: ``note`` says why); ``source``: which of their figures ("measured",
    "datasheet", "best")."""

    ceilings: Ceilings | None = None
    source: str = "measured"
    note: str = ""
    peaks: Mapping[tuple[str, str], Figure] = field(default_factory=lambda: types.MappingProxyType({}))
    bandwidths: Mapping[str, Figure] = field(default_factory=lambda: types.MappingProxyType({}))
    interconnect: Figure = _NONE
    contention: tuple[str, ...] = ()
    yardstick: Mapping[str, Any] = field(default_factory=lambda: types.MappingProxyType({}))

    @property
    def name(self) -> str:
        return self.ceilings.name if self.ceilings is not None else ""

    def peak(self, unit: str, dtype: str) -> Figure:
        """The peak of (unit, dtype), following the ceilings' fallbacks (:meth:`Ceilings.resolve_peak`); a NaN
        figure saying why when there is none."""
        if self.ceilings is None:
            return _NONE
        return self.peaks.get((unit, dtype)) or Figure(math.nan, "", f"no {self.source} peak for {unit}/{dtype}")

    def judged_peak(self, unit: str, dtype: str) -> Figure:
        """The peak that work of (unit, dtype) is judged against: its own, except integer matrix products without
        an int8 peak and other integer or bool work, judged against the float32 rate (the note says so)."""
        if self.ceilings is None:
            return _NONE
        int_note = ""
        if unit == "matrix" and dtype in ("int8", "uint8"):
            # integer matrix products (_int_mm, quantized linears) have their own peak where one was measured or
            # is on the datasheet (VNNI / AMX / tensor cores); else the fp32 rate, and the note says so
            if math.isfinite(self.peak("matrix", "int8").value):
                dtype = "int8"
            else:
                int_note = f"no {self.source} int8 matrix peak: {dtype} matrix products judged against the float32 rate"
                dtype = "float32"
        elif dtype not in FLOAT_DTYPES:
            dtype = "float32"
        f = self.peak(unit, dtype)
        if int_note:
            return Figure(f.value, f.source, "\n".join(n for n in (f.note, int_note) if n))  # one note a line
        return f

    def bandwidth(self, level: str = "DRAM") -> Figure:
        """The bandwidth of a memory level; a NaN figure saying why when there is none."""
        if self.ceilings is None:
            return _NONE
        return self.bandwidths.get(level) or Figure(math.nan, "", f"no {self.source} bandwidth for {level}")

    def levels(self) -> list[tuple[str, Figure]]:
        """``[(level, figure)]`` of the memory levels that have a bandwidth, innermost first."""
        return [(lvl, self.bandwidths[lvl]) for lvl in LEVELS if lvl in self.bandwidths]


def _peak(c: Ceilings, unit: str, dtype: str, source: str) -> Figure:
    try:
        choice = c.resolve_peak(unit, dtype, source)
    except (CeilingNotAvailable, ValueError) as e:  # e.g. complex or fp8 variants with no ceiling
        return Figure(math.nan, "", str(e))
    return Figure(choice.value, choice.source, choice.note, (choice.unit, choice.dtype))


def _bandwidth(c: Ceilings, level: str, source: str) -> Figure | None:
    """A level's bandwidth of ``source``. DRAM: a CPU has no datasheet bandwidth, so the measured one then, saying
    so; NaN with the reason when there is none. A cache level: None when ``source`` has none."""
    try:
        return Figure(c.bandwidth(level, source), source)
    except CeilingNotAvailable as e:
        if level != "DRAM":
            return None
        try:
            return Figure(c.bandwidth("DRAM", "best"), "measured", f"no {source} DRAM bandwidth: using the measured one")
        except CeilingNotAvailable:
            return Figure(math.nan, "", str(e))


def link(meta: dict, ceilings, source: str) -> Figure:
    """The interconnect bandwidth collectives are judged against. A projection or a datasheet roofline uses the
    device's datasheet link; otherwise the bus bandwidth measured by
    :func:`roofline.distributed.measure_interconnect` before the block (meta.distributed.interconnect), else the
    datasheet link of the device, else NaN (and a note)."""
    spec = devices.lookup(ceilings.name) if ceilings is not None and getattr(ceilings, "name", None) else None
    datasheet = spec.interconnect_bandwidth if spec is not None else None
    dist_meta = meta.get("distributed")
    link_meta = dist_meta.get("interconnect") if isinstance(dist_meta, dict) else None
    measured = link_meta.get("busbw") if isinstance(link_meta, dict) else None
    if meta.get("projected_to") or source == "datasheet":
        if datasheet:
            return Figure(float(datasheet), "datasheet")
    elif isinstance(measured, (int, float)) and measured > 0:
        return Figure(float(measured), "measured")
    elif datasheet:
        return Figure(float(datasheet), "datasheet", "collectives judged against the datasheet interconnect bandwidth")
    return Figure(math.nan, "", NO_LINK)


def of(ceilings: Ceilings | None, source: str = "best", meta: dict | None = None, note: str = "") -> Roofs:
    """The roofs of ``ceilings`` (figures of ``source``) for a report whose metadata is ``meta``; empty roofs
    (``note`` saying why) for None."""
    meta = meta or {}
    if ceilings is None:
        return Roofs(None, source, note)
    peaks = {(u, d): _peak(ceilings, u, d, source) for u in UNITS for d in sorted(set(PEAK_DTYPES) | FLOAT_DTYPES)}
    bws = {lvl: f for lvl in LEVELS if (f := _bandwidth(ceilings, lvl, source)) is not None}
    info = getattr(ceilings, "info", None) or {}
    contention = tuple(str(x) for x in (info.get("contention") or ["flagged busy"])) \
        if (info.get("busy") or info.get("contention")) else ()
    yard = info.get("yardstick")
    return Roofs(ceilings, source, note, types.MappingProxyType(peaks), types.MappingProxyType(bws),
                 link(meta, ceilings, source), contention,
                 types.MappingProxyType(dict(yard) if isinstance(yard, dict) else {}))
