"""Text and HTML views of a report and of a comparison: what ``print(r)``, ``r.table()``, ``repr(r)`` and a
notebook show. They read the report through its public methods only."""

from __future__ import annotations

import html
import math


def fmt(n: float, unit: str = "") -> str:
    """``n`` with a metric prefix and two decimals (``"1.50 GFLOP/s"``); plain below a thousand."""
    for scale, suffix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {suffix}{unit}"
    return f"{n:.0f} {unit}".rstrip()


def ms(t) -> str:
    """Seconds as milliseconds, "-" when missing."""
    return "-" if t is None or not math.isfinite(t) else f"{t * 1e3:.3f}"


def pct(x) -> str:
    """A fraction as a percentage, "-" when missing."""
    return "-" if x is None or not math.isfinite(x) else f"{x * 100:.1f}%"


def cell(v) -> str:
    """A table cell: floats to four significant digits, "-" when not finite."""
    if isinstance(v, float):
        return "-" if not math.isfinite(v) else f"{v:.4g}"
    return str(v)


def table(report, by: str = "op", depth: int | None = None, top: int | None = 15, phase: str | None = None) -> str:
    """The text table of :meth:`roofline.Report.table`."""
    rows = list(report.analysis(by, depth, phase).items())
    if top is not None:
        rows = rows[:top]
    if not rows:
        return "(no ops)"
    timed = any(math.isfinite(r["time"]) for _, r in rows)
    w = min(max(len(n) for n, _ in rows), 60)
    hdr = (f"{'op' if by == 'op' else 'module':<{w}} {'calls':>6} {'FLOPs':>9} {'bytes':>9} {'FLOP/B':>7} "
           f"{'roof ms':>8}")
    if timed:
        hdr += f" {'time ms':>8} {'achieved':>12} {'% roof':>7} {'MFU':>6} {'MBU':>6}"
    hdr += f" {'bound':>9}"
    lines = [hdr]
    for name, r in rows:
        n = name if len(name) <= w else "..." + name[-(w - 3):]
        line = (f"{n:<{w}} {r['calls']:>6} {fmt(r['flops']):>9} {fmt(r['bytes'], 'B'):>9} "
                f"{r['intensity']:>7.2f} {ms(r['t_min']):>8}")
        if timed:
            rate = (fmt(r["achieved_flops"], "FLOP/s") if r["flops"] else fmt(r["achieved_bytes"], "B/s")) \
                if math.isfinite(r["achieved_bytes"]) else "-"
            line += (f" {ms(r['time']):>8} {rate:>12} {pct(r['efficiency']):>7} {pct(r['mfu']):>6} "
                     f"{pct(r['mbu']):>6}")
        flag = "!" if r["above_ceiling"] else ""
        line += f" {r['bound'] + flag:>9}"
        lines.append(line)
    return "\n".join(lines)


def plain_top(report, top: int) -> str:
    """The ``top`` ops by FLOPs, counts only (a report without ceilings)."""
    ops = list(report.by_op().items())[:top]
    w = max(len(n) for n, _ in ops)
    lines = [f"{'op':<{w}}  {'calls':>6}  {'FLOPs':>10}  {'bytes':>10}  {'FLOP/B':>8}"]
    for n, t in ops:
        lines.append(f"{n:<{w}}  {t['calls']:>6}  {fmt(t['flops']):>10}  {fmt(t['bytes'], 'B'):>10}  "
                     f"{t['intensity']:>8.2f}")
    return "\n".join(lines)


def summary(report, top: int = 10, ceilings_note: str = "") -> str:
    """The text of :meth:`roofline.Report.summary`; ``ceilings_note`` says why a report has no ceilings."""
    r = report
    lines = [f"roofline report: {len(r.records)} op calls"
             + (f", {r.wall_time * 1e3:.1f} ms wall" if r.wall_time is not None else "")
             + (f", projected onto {r.meta['projected_to']}" if r.meta.get("projected_to") else "")]
    if r.meta.get("contention"):
        lines.append(f"  measured under contention: {'; '.join(map(str, r.meta['contention']))}: timings are low")
    lines.append(f"  FLOPs   {fmt(r.total_flops)} (matrix {fmt(r.matrix_flops)}, vector "
                 f"{fmt(r.vector_flops)}; special functions {fmt(r.special_ops)})")
    lines.append(f"  bytes   {fmt(r.bytes, 'B')} compulsory (read {fmt(r.bytes_read, 'B')}, written "
                 f"{fmt(r.bytes_written, 'B')}; a lower bound: no reuse across ops)")
    lines.append(f"  intensity {r.intensity:.2f} FLOP/byte")
    ph = r.by_phase()
    if ph:
        lines.append("  phases  " + ", ".join(f"{k} {fmt(v['flops'])}FLOP" for k, v in ph.items()))
    if r.meta.get("assumed") and r.meta.get("projected_to"):
        from roofline._assumptions import line as _assumed_lines

        lines.extend(_assumed_lines(r.meta["assumed"], r.meta["projected_to"]))
    c = r.ceilings
    if c is not None and len(r.records):
        t = r.totals()
        lines.append(f"  ceilings ({r.ceilings_source}) {c.name}: DRAM {fmt(r.classification()['bw'][0], 'B/s')}")
        if t["wall_time"]:
            lines.append(f"  achieved {fmt(t['achieved_flops'], 'FLOP/s')}, {fmt(t['achieved_bytes'], 'B/s')}"
                         f"; MFU {pct(t['mfu'])}, MBU {pct(t['mbu'])}")
        lines.append(f"  roofline time {ms(t['t_min'])} ms; compute-bound share {pct(t['compute_share'])}")
        if r.overhead.get("counting_per_op_s"):
            o = r.overhead
            est = o["counting_per_op_s"] * len(r.records) + o.get("timing_per_op_s", 0) * len(r.records)
            lines.append(f"  instrumentation: ~{o['counting_per_op_s'] * 1e6:.1f} us/op counting"
                         + (f" + {o['timing_per_op_s'] * 1e6:.2f} us/op timing" if o.get("timing_per_op_s")
                            else "") + f" (~{est * 1e3:.1f} ms of the wall time)")
    elif ceilings_note:
        lines.append(f"  {ceilings_note}")
    if r.unknown_ops:
        lines.append(f"  ops without a formula (FLOPs not counted): {r.unknown_ops}")
    if r.errors:
        lines.append(f"  ops whose cost could not be evaluated: {r.errors}")
    if len(r.records):
        lines.append("")
        lines.append(r.table("op", top=top) if c is not None else plain_top(r, top))
    return "\n".join(lines)


def short(report) -> str:
    """``repr(report)``."""
    return (f"<roofline.Report {len(report.records)} calls, {fmt(report.total_flops)}FLOP, "
            f"{fmt(report.bytes, 'B')}>")


def to_html(report) -> str:
    """The notebook view: the summary's head lines and the 15 ops with most time (with ceilings)."""
    rows = list(report.analysis("op").items())[:15] if report.ceilings is not None else []
    head = "".join(f"<li>{html.escape(line.strip())}</li>" for line in report.summary().split("\n")[1:8]
                   if line.strip())
    out = [f"<div><b>roofline report</b>: {len(report.records)} op calls<ul>{head}</ul>"]
    if rows:
        cols = ["calls", "flops", "bytes", "intensity", "t_min", "time", "efficiency", "mfu", "mbu", "bound"]
        out.append("<table><tr><th>op</th>" + "".join(f"<th>{c}</th>" for c in cols) + "</tr>")
        for name, r in rows:
            cells = "".join(f"<td>{html.escape(cell(r[c]))}</td>" for c in cols)
            out.append(f"<tr><td>{html.escape(name)}</td>{cells}</tr>")
        out.append("</table>")
    out.append("</div>")
    return "".join(out)


def comparison(cmp) -> str:
    """``str(comparison)``: the totals before and after, then the 25 largest changes."""
    before, after = cmp.before, cmp.after
    tb, ta = before.wall_time, after.wall_time
    lines = [f"comparison by {cmp.by}: FLOPs {fmt(before.total_flops)} -> {fmt(after.total_flops)}, "
             f"bytes {fmt(before.bytes, 'B')} -> {fmt(after.bytes, 'B')}"
             + (f", wall {tb * 1e3:.1f} -> {ta * 1e3:.1f} ms" if tb and ta else "")]
    rows = sorted(cmp.rows.items(), key=lambda kv: -abs(cmp.delta(kv[0], "flops")) - abs(cmp.delta(kv[0], "bytes")))
    w = min(max((len(k) for k in cmp.rows), default=10), 50)
    lines.append(f"{'name':<{w}} {'FLOPs before':>13} {'after':>10} {'ratio':>6} {'bytes before':>13} {'after':>10} "
                 f"{'time before':>11} {'after':>8}")
    for k, (x, y) in rows[:25]:
        x, y = x or {}, y or {}
        fr = (y.get("flops", 0) / x["flops"]) if x.get("flops") else math.nan
        lines.append(f"{k[-w:]:<{w}} {fmt(x.get('flops', 0)):>13} {fmt(y.get('flops', 0)):>10} {fr:>6.2f} "
                     f"{fmt(x.get('bytes', 0), 'B'):>13} {fmt(y.get('bytes', 0), 'B'):>10} "
                     f"{ms(x.get('time', math.nan)):>11} {ms(y.get('time', math.nan)):>8}")
    return "\n".join(lines)
