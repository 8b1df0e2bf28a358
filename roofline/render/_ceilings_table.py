"""Ceilings as text: the table ``python -m roofline ceilings`` prints, ``str(c)`` and ``c.table()`` show, and
``repr(c)``.
Installed into :mod:`roofline._hardware._ceilings_model` when imported, so that the hardware floor writes no text."""

from __future__ import annotations

import sys

from roofline._hardware import _ceilings_model
from roofline._hardware._ceilings_model import LEVELS, Ceilings
from roofline._datamodel._units import PEAK_DTYPES, UNITS
from roofline._util._format import fmt

_KERNEL_ROWS = ("", "read", "write", "copy", "triad")  # a level's per-kernel bandwidths in this order, others after


def _entries(c: Ceilings):
    """``[(label, Ceiling, unit)]`` in display order: peaks by unit and dtype (widest first), then bandwidths by
    level and kernel; unit "FLOP/s", "OP/s" (integer products: a multiply and an add count one operation each)
    or "B/s"."""
    def dtype_order(key):
        unit, dtype = key
        return (UNITS.index(unit), PEAK_DTYPES.index(dtype) if dtype in PEAK_DTYPES else len(PEAK_DTYPES), dtype)

    def level_order(level):
        base, _, kernel = level.partition("_")
        return (LEVELS.index(base) if base in LEVELS else len(LEVELS),
                _KERNEL_ROWS.index(kernel) if kernel in _KERNEL_ROWS else len(_KERNEL_ROWS), level)

    out = [(f"{u} {d}", c.peaks[(u, d)], "OP/s" if d.startswith(("int", "uint")) else "FLOP/s")
           for u, d in sorted(c.peaks, key=dtype_order)]
    out += [(f"bandwidth {level}", c.bandwidths[level], "B/s") for level in sorted(c.bandwidths, key=level_order)]
    return out


def rows(c: Ceilings) -> list[tuple[str, float | None, float | None, float | None, str]]:
    """(label, measured, datasheet, ratio, unit) per ceiling, in giga-units (GFLOP/s, GOP/s, GB/s)."""
    def giga(v):
        return None if v is None else v / 1e9

    return [(label, giga(e.measured), giga(e.datasheet), e.ratio, "G" + unit)
            for label, e, unit in _entries(c)]


def table(c: Ceilings, methods: bool = False) -> str:
    """A text table: ceiling, measured, datasheet, measured/datasheet (and each figure's method with
    ``methods=True``), then the ceilings' notes."""
    header = ("ceiling", "measured", "datasheet", "meas/data")
    body = [(label, "-" if e.measured is None else fmt(e.measured, unit),
             "-" if e.datasheet is None else fmt(e.datasheet, unit), "-" if e.ratio is None else f"{100 * e.ratio:.0f}%")
            for label, e, unit in _entries(c)]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    lines = [f"{c.name} ({c.device})"]
    when = []
    if c.timestamp:
        when.append(f"measured {c.timestamp}")
    if c.duration_s is not None:
        when.append(f"in {c.duration_s:.2f} s" + (" (quick)" if c.quick else " (thorough)"))
    if when:
        lines.append(" ".join(when))

    def line(row):
        return "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))

    lines.append(line(header))
    lines.append("  ".join("-" * w for w in widths))
    lines.extend(line(row) for row in body)
    if methods:
        lines.append("")
        for (u, d), e in c.peaks.items():
            lines.append(f"{u} {d}: {e.method}")
            if e.datasheet_source:
                lines.append(f"  datasheet: {e.datasheet_source}")
        for level, e in c.bandwidths.items():
            lines.append(f"bandwidth {level}: {e.method}")
            if e.datasheet_source:
                lines.append(f"  datasheet: {e.datasheet_source}")
    if c.notes:
        lines.append("")
        lines.extend(f"note: {n}" for n in c.notes)
    return "\n".join(lines)


def summary(c: Ceilings) -> str:
    """``repr(c)``: the device, the name, the fp64 and fp32 vector and bf16 matrix peaks and the DRAM bandwidth
    (measured, else datasheet), and how long the measurement took."""
    parts = []
    for key in (("vector", "float64"), ("vector", "float32"), ("matrix", "bfloat16")):
        e = c.peaks.get(key)
        if e is not None and (e.measured or e.datasheet):
            v = e.measured if e.measured is not None else e.datasheet
            parts.append(f"{key[0]}/{key[1]}={v / 1e9:.1f} GFLOP/s")
    e = c.bandwidths.get("DRAM")
    if e is not None and (e.measured or e.datasheet):
        v = e.measured if e.measured is not None else e.datasheet
        parts.append(f"DRAM={v / 1e9:.1f} GB/s")
    when = f", measured in {c.duration_s:.2f} s" if c.duration_s is not None else ""
    return f"Ceilings({c.device!r}, {c.name!r}, {', '.join(parts)}{when})"


_ceilings_model._VIEWS.append(sys.modules[__name__])  # Ceilings.table, rows and str() write through this module
