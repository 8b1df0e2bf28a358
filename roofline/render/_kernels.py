"""The compiled kernels of a report as views: the text table of ``r.table(by="kernel")`` and the DataFrame of
``r.to_dataframe(by="kernel")``; the rows are :func:`roofline._analysis._compiled_view.kernel_rows`."""

from __future__ import annotations

import math

from roofline._analysis._compiled_view import compiled, kernel_rows
from roofline._util._format import fmt, ms, pct


def table(report, top: int | None = 15) -> str:
    """The kernels, most time first (most bytes first untimed), ``top`` of them (None: all), and the graphs' and
    breaks' counts."""
    rows = kernel_rows(report)
    if not rows:
        return "(no compiled kernels)"
    rows.sort(key=lambda r: (-(r["time"] if not math.isnan(r["time"]) else -1), -r["bytes"]))
    if top is not None:
        rows = rows[:top]

    timed = any(not math.isnan(r["time"]) for r in rows)
    w = min(max(len(r["name"]) for r in rows), 48)
    hdr = f"{'kernel':<{w}} {'phase':>8} {'calls':>5} {'FLOPs':>9} {'bytes':>9} {'FLOP/B':>7} {'roof ms':>8}"
    if timed:
        hdr += f" {'time ms':>8} {'% roof':>7}"
    hdr += "  fused ops"
    lines = [hdr]
    for r in rows:
        n = r["name"] if len(r["name"]) <= w else r["name"][: w - 3] + "..."
        line = (f"{n:<{w}} {r['phase']:>8} {r['calls']:>5} {fmt(r['flops']):>9} {fmt(r['bytes'], 'B'):>9} "
                f"{r['intensity']:>7.2f} {ms(r['t_min']):>8}")
        if timed:
            line += f" {ms(r['time']):>8} {pct(r['efficiency']):>7}"
        ops = ", ".join(o.replace("aten.", "") for o in r.get("ops", ()))
        line += "  " + (ops if len(ops) <= 70 else ops[:67] + "...")
        lines.append(line)
    c = compiled(report) or {}
    lines.append(f"{c.get('graphs', 0)} compiled graphs ({c.get('graph_calls', 0)} calls), "
                 f"{c.get('graph_breaks', 0)} graph breaks")
    return "\n".join(lines)


def dataframe(report):
    """One row per kernel (pandas)."""
    import pandas as pd

    cols = ("name", "graph", "phase", "calls", "module", "ops", "matrix_flops", "vector_flops", "flops",
            "bytes_read", "bytes_written", "bytes", "unfused_bytes", "intensity", "t_min", "time", "achieved_flops",
            "achieved_bytes", "efficiency", "extern", "bytes_known")
    rows = kernel_rows(report)
    # a kernel's ops, as the table shows them: none when the document leaves them out (only name, phase and calls
    # are required)
    return pd.DataFrame([{c: (", ".join(r.get("ops", ())) if c == "ops" else r.get(c)) for c in cols} for r in rows],
                        columns=list(cols))
