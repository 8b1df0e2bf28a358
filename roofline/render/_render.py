"""Text and HTML views of a report and of a comparison: what ``print(r)``, ``r.table()``, ``repr(r)`` and a
notebook show. They read the report through its public methods only."""

from __future__ import annotations

import html
import math

import numpy as np

from roofline._analysis import _parameters, _rollup
from roofline._analysis._groups import module_tree, op_groups
from roofline.render import _style, _svg
from roofline.render._advice import advice_html
from roofline.render._assumptions import line as _assumed_lines
from roofline._util._format import cell, dur, fmt, ms, pct

LEGEND = {
    "!": "the achieved rate is above the ceiling it is judged against (the ceiling is too low for this op, or the "
         "op was too short to time): its % of roof and MFU/MBU overstate",
    "compute": "compute-bound: FLOPs at the peak of the op's unit and dtype take longer than its bytes at DRAM "
               "bandwidth",
    "memory": "memory-bound: its compulsory bytes at DRAM bandwidth take longer than its FLOPs at the peak",
    "bandwidth": "moves bytes but does no FLOPs (copies, fills): judged against bandwidth only",
    "mixed": "a group in which neither bound holds 80% of the roofline time",
    "none": "moves nothing (views, metadata)",
    "% roof": "roofline time / measured time: the fraction of the attainable rate reached",
}


def legend_text(flagged: bool = True) -> str:
    """The one-line legend under a text table (the ``!`` part when a row is flagged)."""
    return (("! = achieved above its ceiling (ceiling too low or op too short to time); " if flagged else "")
            + "% roof = roofline time / measured time; bound: compute, memory, bandwidth (no FLOPs), mixed "
              "(neither holds 80%)")


# ---- the module tree ---------------------------------------------------------------------------------------------
def _outside(roots, whole) -> bool:
    """Whether some op calls ran outside every module (then the whole run is shown as its own row)."""
    return sum(r.row["calls"] for r in roots) != whole["calls"] or len(roots) != 1


def _row_cells(r, w, name, timed):
    line = (f"{name:<{w}} {r['calls']:>6} {fmt(r['flops']):>9} {fmt(r['bytes'], 'B'):>9} "
            f"{r['intensity']:>7.2f} {ms(r['t_min']):>8}")
    if timed:
        rate = (fmt(r["achieved_flops"], "FLOP/s") if r["flops"] else fmt(r["achieved_bytes"], "B/s")) \
            if math.isfinite(r["achieved_bytes"]) else "-"
        line += (f" {ms(r['time']):>8} {rate:>12} {pct(r['efficiency']):>7} {pct(r['mfu']):>6} "
                 f"{pct(r['mbu']):>6}")
    flag = "!" if r["above_ceiling"] and not r.get("projected") else ""
    return line + f" {r['bound'] + flag:>10}"


def table(report, by: str = "op", depth: int | None = None, top: int | None = 15, phase: str | None = None) -> str:
    """The text table of :meth:`roofline.Report.table`. ``by="module"`` is the module tree, depth first (each
    module's children most time first, indented under it, by their full names; containers such as a ``ModuleList`` are rows of their
    own, so ``depth`` counts every level of the model); the whole run is a row only when ops ran outside every
    module."""
    projected = bool(report.meta.get("projected_to"))
    if by == "module":
        roots, whole = module_tree(report, phase)
        rows = []
        if roots and _outside(roots, whole):
            rows.append(("(whole run)", whole))
        for root in roots:
            for n in root.walk(depth):
                rows.append(("  " * (n.depth - 1) + n.name, n.row))
    elif by == "op":
        rows = list(report.analysis(by, depth, phase).items())
    elif by == "op_shape":
        rows = [(n, row) for n, (row, _) in op_groups(report, by, phase).items()]
    else:
        raise ValueError(f"by must be 'op', 'op_shape' or 'module', got {by!r}")
    if top is not None:
        rows = rows[:top]
    if not rows:
        return "(no ops)"
    timed = any(math.isfinite(r["time"]) for _, r in rows)
    w = min(max(len(n) for n, _ in rows), 60)
    params = (_parameters.of_report(report) or {}).get("modules") if by == "module" else None
    hdr = (f"{'module' if by == 'module' else 'op':<{w}} {'calls':>6} {'FLOPs':>9} {'bytes':>9} {'FLOP/B':>7} "
           f"{'roof ms':>8}")
    if timed:
        hdr += f" {'time ms':>8} {'achieved':>12} {'% roof':>7} {'MFU':>6} {'MBU':>6}"
    hdr += f" {'bound':>10}"
    if params is not None:
        hdr += f" {'params':>9}"
    lines = [hdr]
    flagged = False
    for name, r in rows:
        n = name if len(name) <= w else "..." + name[-(w - 3):]
        line = _row_cells(dict(r, projected=projected), w, n, timed)
        if params is not None:
            own = params.get(name.strip())
            line += f" {fmt(own['total']) if own else '-':>9}"
        lines.append(line)
        flagged |= bool(r["above_ceiling"]) and not projected
    if flagged or timed:
        lines.append(legend_text(flagged))
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


def utilization(t: dict) -> str:
    """MFU and MBU of a report's totals; with recomputation (activation checkpointing), MFU (model FLOPs, each op
    counted once) and HFU (every FLOP executed) side by side."""
    if t.get("recompute_flops"):
        share = t["recompute_flops"] / t["flops"] if t["flops"] else 0.0
        return (f"MFU {pct(t['mfu'])} (model FLOPs, counted once), HFU {pct(t['hfu'])} (all FLOPs executed; "
                f"{pct(share)} of them recomputed), MBU {pct(t['mbu'])}")
    return f"MFU {pct(t['mfu'])}, MBU {pct(t['mbu'])}"


def tokens_line(report) -> str:
    """The useful-work figures, where the block knows which tokens were real ("" otherwise)."""
    if not report.meta.get("tokens") or not len(report.records):
        return ""
    try:
        u = report.useful_work()
    except ValueError:  # no call signatures: the shares are unknown, the token counts are not
        t = report.meta["tokens"]
        return f"  tokens  {sum(t['lengths'])} real of {t['batch'] * t['seq_len']} positions"
    if not u["matched"]:
        t = report.meta["tokens"]
        return (f"  tokens  a layout of {t['batch']} x {t['seq_len']} positions that matches no call of the step "
                "(no tensor has its token dims): no token figures")
    rate = f"; {fmt(u['real_tokens_per_s'], 'tokens/s')} real" if u["real_tokens_per_s"] == u["real_tokens_per_s"] \
        else ""
    line = (f"  tokens  {u['real_tokens']} real of {u['positions']} positions; {pct(u['padding_share'])} of the FLOPs "
            f"({fmt(u['padding_flops'], 'FLOP')}) ran on padding{rate}")
    if u["ambiguous"]:
        line += f" (uncertain: dims {u['ambiguous']} are also weight dims)"
    return line


def attribution_line(report) -> str:
    """What the summary says about backward work it could not credit to the module that caused it ("" if none)."""
    a = report.attribution
    if a["unlinked_calls"]:
        ops = ", ".join(f"{k} x{v}" for k, v in list(a["unlinked_by_op"].items())[:4])
        return (f"  backward calls not linked to the forward module that caused them: {a['unlinked_calls']} "
                f"({fmt(a['unlinked_flops'], 'FLOP')}; {ops}): credited as torch's ModuleTracker credits them")
    if a.get("note"):
        return f"  module attribution: {a['note']}"
    return ""


def trace_line(t: dict) -> str:
    """One line on where a trace report's GPU time went (``meta["trace"]``, docs/traces.md)."""
    step = f"step {t['step']}" if t.get("step") is not None else "the whole trace"
    total = t.get("kernel_time") or 0.0
    share = (lambda x: f"{x / total:.1%}") if total else (lambda x: "-")
    return (f"  trace   {t.get('source') or 'a profiler trace'}, {step}: GPU kernel time {dur(total)}, "
            f"{share(t.get('attributed_time', 0.0))} in ops with FLOPs and bytes, "
            f"{share(t.get('collective_time', 0.0))} in collectives, "
            f"{share(t.get('unattributed_time', 0.0))} launched by no op")


def summary(report, top: int = 10, ceilings_note: str = "") -> str:
    """The text of :meth:`roofline.Report.summary`; ``ceilings_note`` says why a report has no ceilings."""
    r = report
    projected = r.meta.get("projected_to")
    if projected:
        head = f", projected onto {projected}: {dur(r.wall_time)} of roofline time (ops back to back, not measured)"
    else:
        kind = ((r.meta.get("steady") or {}).get("step_time") or {}).get("kind")  # profile(step_time=...)
        label = {"min": "least wall", "unwaited": "unwaited step time",
                 "unwaited_min": "least unwaited step time", "ops_min": "step time of least ops"}.get(kind, "wall")
        if kind == "ops_min" and not isinstance((r.meta["steady"]["step_time"]).get("ops"), dict):
            label = "wall"  # could not be composed: the median wall time stands
        head = f", {dur(r.wall_time)} {label}" if r.wall_time is not None else ""
    lines = [f"roofline report: {len(r.records)} op calls" + head]
    incomplete = r.incomplete  # work that ran uncounted: said first, and on every total
    low = " [INCOMPLETE: a lower bound]" if incomplete else ""
    if incomplete:
        lines[0] += " -- INCOMPLETE"
        lines.extend(f"  INCOMPLETE: {why}" for why in incomplete)
    if r.meta.get("contention") and not projected:  # a projection's times were not measured
        lines.append(f"  measured under contention: {'; '.join(map(str, r.meta['contention']))}: timings are low")
    if r.meta.get("ceilings_contention") and not projected:
        lines.append(f"  ceilings measured under contention: {'; '.join(map(str, r.meta['ceilings_contention']))}: "
                     f"peaks and bandwidths are low, bounds and shares against them unreliable")
    lines.append(f"  FLOPs   {fmt(r.total_flops)} (matrix {fmt(r.matrix_flops)}, vector "
                 f"{fmt(r.vector_flops)}; special functions {fmt(r.special_ops)}){low}")
    lines.append(f"  bytes   {fmt(r.bytes, 'B')} compulsory (read {fmt(r.bytes_read, 'B')}, written "
                 f"{fmt(r.bytes_written, 'B')}; a lower bound: no reuse across ops){low}")
    lines.append(f"  intensity {r.intensity:.2f} FLOP/byte")
    if parameters_line(r):
        lines.append(f"  parameters {parameters_line(r)}")
    ph = r.by_phase()
    if ph:
        lines.append("  phases  " + ", ".join(f"{k} {fmt(v['flops'], 'FLOP')}" for k, v in ph.items()))
    if r.meta.get("assumed") and r.meta.get("projected_to"):
        lines.extend(_assumed_lines(r.meta["assumed"], r.meta["projected_to"]))
    if isinstance(r.meta.get("trace"), dict):
        lines.append(trace_line(r.meta["trace"]))
    c = r.ceilings
    if c is not None and len(r.records):
        t = r.totals()
        lines.append(f"  ceilings ({r.ceilings_source}) {c.name}: DRAM {fmt(r.classification()['bw'][0], 'B/s')}")
        if yardstick_line(r):
            lines.append(f"  yardstick: {yardstick_line(r)}")
        if t["wall_time"]:
            lines.append(f"  achieved {fmt(t['achieved_flops'], 'FLOP/s')}, {fmt(t['achieved_bytes'], 'B/s')}"
                         f"; {utilization(t)}{low}")
        lines.append(f"  roofline time {dur(t['t_min'])}; compute-bound share {pct(t['compute_share'])}")
        if r.overhead.get("counting_per_op_s"):
            o = r.overhead
            est = o["counting_per_op_s"] * len(r.records) + o.get("timing_per_op_s", 0) * len(r.records)
            lines.append(f"  instrumentation: ~{o['counting_per_op_s'] * 1e6:.1f} us/op counting"
                         + (f" + {o['timing_per_op_s'] * 1e6:.2f} us/op timing" if o.get("timing_per_op_s")
                            else "") + f" (~{dur(est)} of the wall time as calibrated on one small op; a CPU step pays more)")
    elif ceilings_note:
        lines.append(f"  {ceilings_note}")
    if attribution_line(r):
        lines.append(attribution_line(r))
    if tokens_line(r):
        lines.append(tokens_line(r))
    if r.unknown_ops:
        lines.append(f"  ops without a formula (FLOPs not counted): {r.unknown_ops}")
    if r.errors:
        lines.append(f"  ops whose cost could not be evaluated: {r.errors}")
    if len(r.records):
        lines.append("")
        lines.append(r.table("op", top=top) if c is not None else plain_top(r, top))
    return "\n".join(lines)


def yardstick_line(report) -> str:
    """What the report is judged against when it is not this run's own measurement (``meta["ceilings_yardstick"]``):
    the last idle measurement, the CPU's theoretical peak, a saved file; "" otherwise."""
    y = report.meta.get("ceilings_yardstick")
    if not isinstance(y, dict) or report.meta.get("projected_to"):
        return ""
    why = y.get("contention")
    because = f"; this run's measurement was under contention ({'; '.join(map(str, why))})" if why else ""
    kind = y.get("kind")
    if kind == "idle":
        return f"the last idle measurement of this machine ({y.get('measured_at') or 'undated'}){because}"
    if kind == "theoretical":
        formula = (y.get("formula") or [""])[-1]
        return (f"the CPU's theoretical peak ({formula}){because}; `python -m roofline ceilings --save` on an idle "
                "machine saves a measured yardstick")
    if kind == "file":
        return f"the saved ceilings {y.get('path')} (measured {y.get('measured_at') or 'undated'})"
    return ""


def parameters_line(report) -> str:
    """The model's parameter counts (``meta["parameters"]``) in one line; "" when the report has none."""
    p = _parameters.of_report(report)
    if p is None:
        return "" if report.meta.get("parameters") is None else "unreadable (meta[\"parameters\"] is malformed)"
    line = (f"{fmt(p['total'])} ({p['total']:,}): trainable {fmt(p['trainable'])}, frozen {fmt(p['frozen'])}; "
            f"{fmt(p['bytes'], 'B')}")
    if len(p.get("by_dtype") or {}) > 1:
        line += " (" + ", ".join(f"{k} {fmt(v)}" for k, v in p["by_dtype"].items()) + ")"
    tied = p.get("tied") or []
    if tied:
        line += (f"; {len(tied)} shared parameter{'s' if len(tied) != 1 else ''} counted once ("
                 + ", ".join(" = ".join(g) for g in tied[:2]) + (", ..." if len(tied) > 2 else "") + ")")
    if p.get("uninitialized"):
        line += (f"; {len(p['uninitialized'])} lazy parameter(s) not initialised yet, not counted: "
                 "a lower bound")
    return line


def short(report) -> str:
    """``repr(report)``."""
    return (f"<roofline.Report {len(report.records)} calls, {fmt(report.total_flops, 'FLOP')}, "
            f"{fmt(report.bytes, 'B')}{', INCOMPLETE' if report.incomplete else ''}>")


# ---- the notebook view -------------------------------------------------------------------------------------------
_CSS = (".rl-report{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:13px;line-height:1.35;"
        "max-width:1100px}"
        ".rl-report h3{margin:.2em 0 .4em 0;font-size:16px}"
        ".rl-report .rl-proj{background:#fdebd0;color:#7e5109;border:1px solid #f0b27a;border-radius:3px;"
        "padding:1px 6px;font-size:12px;margin-left:6px}"
        ".rl-report .rl-incomplete{background:#fadbd8;color:#922b21;border-color:#e6b0aa;font-weight:700}"
        ".rl-report table{border-collapse:collapse;margin:.3em 0 .8em 0}"
        ".rl-report td,.rl-report th{padding:2px 8px;text-align:right;border-bottom:1px solid #eee;"
        "white-space:nowrap}"
        ".rl-report th{background:#f4f6f7;font-weight:600}"
        ".rl-report td.l,.rl-report th.l{text-align:left}"
        ".rl-report table.rl-facts td{text-align:left;border:none;padding:1px 8px;white-space:normal}"
        ".rl-report table.rl-facts td.k{color:#566573;font-weight:600}"
        ".rl-report .rl-flag{color:#b03a2e;font-weight:700}"
        ".rl-report .rl-bar{display:inline-block;height:11px;vertical-align:middle;border-radius:2px}"
        ".rl-report details{margin-left:14px}"
        ".rl-report details>summary{cursor:pointer;list-style-position:outside}"
        ".rl-report .rl-node{display:inline-grid;column-gap:6px;font-variant-numeric:tabular-nums}"
        ".rl-report .rl-node span{text-align:right}.rl-report .rl-node span.l{text-align:left;overflow:hidden;"
        "text-overflow:ellipsis}"
        ".rl-report .rl-legend{color:#566573;font-size:12px;margin-top:.6em}"
        ".rl-report .rl-legend b{color:#2c3e50}")


def _e(x) -> str:
    return html.escape(str(x))


def _bound_cell(row, projected) -> str:
    b = row["bound"]
    flag = row["above_ceiling"] and not projected
    color = _style.bound_color(b)
    mark = (f'<span class="rl-flag" title="{row["above_ceiling"]} call(s) achieved a rate above their ceiling">'
            '!</span>') if flag else ""
    return f'<span style="color:{color}">{_e(b)}</span>{mark}'


def _rate(row) -> str:
    if not math.isfinite(row.get("achieved_bytes", math.nan)):
        return "-"
    return fmt(row["achieved_flops"], "FLOP/s") if row["flops"] else fmt(row["achieved_bytes"], "B/s")


def _time_label(report) -> str:
    if report.meta.get("projected_to"):
        return "projected time"
    return "time" if report.timed else "roofline time"


def _bars(items, unit_total, what) -> str:
    """Horizontal HTML bars: ``items`` = [(label, seconds, colour, tooltip)]."""
    items = [it for it in items if it[1] > 0]
    if not items or unit_total <= 0:
        return ""
    top = max(t for _, t, _, _ in items)
    out = [f'<table class="rl-bars"><tr><th class="l">{_e(what)}</th><th class="l"></th><th>time</th>'
           '<th>share</th></tr>']
    for label, t, color, tip in items:
        w = max(1.0, 320.0 * t / top)
        out.append(f'<tr title="{_e(tip)}"><td class="l">{_e(label)}</td><td class="l">'
                   f'<span class="rl-bar" style="width:{w:.0f}px;background:{color}"></span></td>'
                   f'<td>{dur(t)}</td><td>{pct(t / unit_total)}</td></tr>')
    out.append("</table>")
    return "".join(out)


def _node_time(row, use_measured) -> float:
    t = row["time"] if use_measured else row["t_min"]
    return t if math.isfinite(t) else 0.0


_TREE_COLS = "60px 110px 100px 90px 70px 100px"


def _grid(depth: int, params: bool = False) -> str:
    """The columns of a tree row ``depth`` deep: the name column narrows as the row is indented."""
    return f'style="grid-template-columns:{max(120, 300 - 14 * depth)}px {_TREE_COLS}{" 80px" if params else ""}"'


def _tree_html(node, use_measured, projected, open_depth=2, params=None) -> str:
    r = node.row
    kind = "" if node.called else ' <i title="a container (ModuleList, ModuleDict) whose children ran">(container)</i>'
    cell_p = ""
    if params is not None:
        own = params.get(node.name)
        cell_p = (f'<span title="{own["total"]:,} parameters ({own["trainable"]:,} trainable), '
                  f'{fmt(own["bytes"], "B")}">{fmt(own["total"])}</span>') if own else "<span>-</span>"
    line = (f'<span class="rl-node" {_grid(node.depth, params is not None)}><span class="l" '
            f'title="{_e(node.name)}">{_e(node.label)}{kind}</span>'
            f'<span>{r["calls"]}</span><span>{fmt(r["flops"], "FLOP")}</span><span>{fmt(r["bytes"], "B")}</span>'
            f'<span>{dur(_node_time(r, use_measured))}</span><span>{pct(r["efficiency"])}</span>'
            f'<span>{_bound_cell(r, projected)}</span>{cell_p}</span>')
    if not node.children:
        return f'<div style="margin-left:17px">{line}</div>'
    inner = "".join(_tree_html(c, use_measured, projected, open_depth, params) for c in node.children)
    op = " open" if node.depth < open_depth else ""
    return f"<details{op}><summary>{line}</summary>{inner}</details>"


def _positive(v) -> bool:
    """A number of seconds a view can show: a finite int or float above 0, not a bool (a hand-edited file)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def plain_text(steady) -> str:
    """The step run outside roofline (``steady(plain=True)``: ``meta["steady"]["plain"]``) against the least measured
    step, like with like, or nothing where it is missing or malformed (a hand-edited file)."""
    p = steady.get("plain") if isinstance(steady, dict) else None
    if not isinstance(p, dict):
        return ""
    least, n, measured = p.get("least"), p.get("steps"), p.get("measured_least")
    if not (_positive(least) and isinstance(n, int) and not isinstance(n, bool) and n > 0):
        return ""
    text = f"least {least * 1e3:.2f} ms over {n} step{'s' if n != 1 else ''} run outside roofline"
    if _positive(measured):
        more = measured / least - 1
        text += (f"; the least measured step took {measured * 1e3:.2f} ms, {more:+.1%}: "
                 + ("what roofline's instrumentation adds" if more >= 0 else
                    "quicker than the plain steps (the host's speed or load differed between them)"))
    return text


def halves_text(h) -> str:
    """The ops_min composition from each half of the steps (``meta["steady"]["step_time"]["halves"]``), or
    nothing where it is missing or malformed (a hand-edited file)."""
    if not (isinstance(h, list) and len(h) == 2 and all(_positive(v) for v in h)):
        return ""
    # to the hundredth of a millisecond, as the first line says them: halves of a step differ by a few percent
    return f"; from each half of the steps: {h[0] * 1e3:.2f} and {h[1] * 1e3:.2f} ms"


def facts(report, ceilings_note: str = "") -> list[tuple[str, str]]:
    """The header facts of a report as (label, text) pairs: what the notebook view lists above its tables."""
    r = report
    out = [("INCOMPLETE", why + ": the totals are lower bounds") for why in r.incomplete]
    out.append(("op calls", f"{len(r.records)}"))
    projected = r.meta.get("projected_to")
    if projected:
        out.append(("projected", f"onto {projected}: {dur(r.wall_time)} if every op ran at its roofline time, "
                                 "back to back (estimated, not measured)"))
    elif r.wall_time is not None:
        out.append(("wall time", f"{dur(r.wall_time)} (the measure block, device synchronised at entry and exit)"))
    else:
        out.append(("wall time", "not timed (timing=None)"))
    if untimed_ops(r):
        out.append(("op times", UNTIMED_NOTE))
    out.append(("FLOPs", f"{fmt(r.total_flops, 'FLOP')} (matrix {fmt(r.matrix_flops, 'FLOP')}, vector "
                         f"{fmt(r.vector_flops, 'FLOP')}); special functions {fmt(r.special_ops)}"))
    out.append(("bytes", f"{fmt(r.bytes, 'B')} compulsory (read {fmt(r.bytes_read, 'B')}, written "
                         f"{fmt(r.bytes_written, 'B')}): a lower bound, no reuse across ops"))
    out.append(("intensity", f"{r.intensity:.2f} FLOP/byte"))
    if parameters_line(r):
        out.append(("parameters", parameters_line(r)))
    ph = r.by_phase()
    if ph:
        out.append(("phases", ", ".join(f"{k} {fmt(v['flops'], 'FLOP')}" for k, v in ph.items())))
    if r.meta.get("assumed") and projected:
        for text in _assumed_lines(r.meta["assumed"], projected):
            label, _, rest = text.strip().partition(": ")
            out.append((label, rest))
    c = r.ceilings
    if c is not None and len(r.records):
        cls = r.classification()
        peaks = sorted({float(p) for p in cls["peak"].tolist() if math.isfinite(p)}, reverse=True)
        src = r.ceilings_source
        out.append(("ceilings", f"{c.name} ({src} figures): DRAM {fmt(float(cls['bw'][0]), 'B/s')}; peaks used "
                                + ", ".join(fmt(p, "FLOP/s") for p in peaks[:4])))
        if yardstick_line(r):
            out.append(("yardstick", yardstick_line(r)))
        t = r.totals()
        if t["wall_time"]:
            out.append(("achieved", f"{fmt(t['achieved_flops'], 'FLOP/s')}, {fmt(t['achieved_bytes'], 'B/s')} "
                                    f"over the {'projected' if projected else 'wall'} time; {utilization(t)}"))
        out.append(("roofline time", f"{dur(t['t_min'])}; compute-bound share {pct(t['compute_share'])}"))
    elif ceilings_note:
        out.append(("ceilings", ceilings_note))
    if r.overhead.get("counting_per_op_s"):
        o = r.overhead
        est = (o["counting_per_op_s"] + o.get("timing_per_op_s", 0)) * len(r.records)
        out.append(("instrumentation", f"~{o['counting_per_op_s'] * 1e6:.1f} us/op counting"
                    + (f" + {o['timing_per_op_s'] * 1e6:.2f} us/op timing" if o.get("timing_per_op_s") else "")
                    + f" (~{dur(est)} of the wall time as calibrated on one small op; a CPU step pays more)"))
    cont = r.meta.get("contention")
    if cont and not projected:  # reasons the block counts as measured under contention
        out.append(("contention", "measured under contention: "
                    + (cont if isinstance(cont, str) else "; ".join(map(str, cont))) + ": timings are low"))
    busy = r.meta.get("ceilings_contention")
    if busy and not projected:
        out.append(("ceilings", "measured under contention: " + "; ".join(map(str, busy))))
    st = (r.meta.get("steady") or {}).get("step_time")  # profile(step_time=...): what the figures divide by
    if isinstance(st, dict) and st.get("kind") == "ops_min" and r.wall_time and not projected:
        o, med = st.get("ops"), st.get("wall_median")
        if not (isinstance(o, dict) and all(isinstance(o.get(k), (int, float)) for k in ("least", "between_least"))):
            o = None  # not composed (or a hand-edited file): said as such
        out.append(("step time", f"{dur(r.wall_time)}: " + (
            f"LEAST OPS (each op call's least time over the measured steps, {dur(o['least'])}, plus the least time "
            f"between ops, {dur(o['between_least'])}" + ("; each part's waits for a CPU taken out" if st.get("waits")
                                                         else "") + halves_text(st.get("halves")) + ")"
            if isinstance(o, dict) else
            f"the median wall time (least ops not composed: {st.get('missing', 'no op times')})")
            + (f"; median wall time {dur(med)}" if isinstance(med, (int, float)) else "")))
    if isinstance(st, dict) and st.get("kind") in ("min", "unwaited", "unwaited_min") and r.wall_time \
            and not projected:
        med = st.get("wall_median")
        out.append(("step time", f"{dur(r.wall_time)}: " + {
            "min": "the least wall time of the measured steps",
            "unwaited": "UNWAITED (the threads' waits for a CPU taken out)",
            "unwaited_min": "the least UNWAITED time of the measured steps (the threads' waits for a CPU taken out)",
        }[st["kind"]] + (f"; median wall time {dur(med)}" if isinstance(med, (int, float)) else "")
            + (f"; SPIN: {st['spin']}" if st.get("spin") else "")))
    plain = plain_text(r.meta.get("steady"))
    if plain and not projected:
        out.append(("without roofline", plain))
    if attribution_line(r):
        out.append(("attribution", attribution_line(r).strip()))
    if tokens_line(r):
        out.append(("tokens", tokens_line(r).strip()[len("tokens"):].strip()))
    if r.unknown_ops:
        out.append(("no formula", ", ".join(f"{k} ({v})" for k, v in r.unknown_ops.items())
                    + ": FLOPs not counted"))
    if r.errors:
        out.append(("errors", ", ".join(f"{k} ({n}: {why})" for k, (n, why) in r.errors.items())))
    if r.meta.get("version"):
        out.append(("recorded by", f"roofline {r.meta['version']}"
                    + (f", timing={r.meta['timing']!r}" if "timing" in r.meta else "")
                    + (f", devices {', '.join(r.meta['devices'])}" if r.meta.get("devices") else "")))
    return out


UNTIMED_NOTE = ("not measured (timing=\"model\": the step is timed as a whole): each op is shown at its roofline "
                "time, no measured point and no % of roof per op. For measured per-op points, time the ops: "
                "timing=\"op\" in roofline.steady / roofline.measure / roofline.profile / the trainer callbacks, "
                "or --timing op on the command line (about 1-2 us per op)")


def untimed_ops(report) -> bool:
    """True when the report has records but no per-op times and is not a projection: its views have no measured
    point per op and say so (:data:`UNTIMED_NOTE`)."""
    return bool(len(report.records)) and not report.timed and not report.meta.get("projected_to")


def legend_html() -> str:
    items = "".join(f"<li><b>{_e(k)}</b>: {_e(v)}</li>" for k, v in LEGEND.items())
    return f'<div class="rl-legend"><b>Legend</b><ul style="margin:.2em 0">{items}</ul></div>'


def to_html(report, ceilings_note: str = "", top: int = 15, chart: bool = True) -> str:
    """The notebook view (``_repr_html_``): header facts, bars of time by phase and by module, the roofline
    chart (inline SVG, a tooltip per point), the ``top`` ops by time with units, the collapsible module tree and
    a legend. Self-contained HTML: no script, no external file."""
    r = report
    projected = bool(r.meta.get("projected_to"))
    badge = (f'<span class="rl-proj" title="times are roofline estimates, not measurements">projected onto '
             f'{_e(r.meta["projected_to"])}</span>') if projected else ""
    if r.incomplete:  # work ran uncounted (Report.incomplete): the facts below say what
        badge += ('<span class="rl-proj rl-incomplete" title="work that ran was not counted: the totals are lower '
                  'bounds">INCOMPLETE</span>')
    if untimed_ops(r):
        badge += (f'<span class="rl-proj rl-untimed" title="{_e(UNTIMED_NOTE)}">op times not measured: '
                  f'timing=&quot;op&quot; measures them</span>')
    out = [f'<div class="rl-report"><style>{_CSS}</style><h3>roofline report{badge}</h3>',
           '<table class="rl-facts">']
    out += [f'<tr><td class="k">{_e(k)}</td><td>{_e(v)}</td></tr>' for k, v in facts(r, ceilings_note)]
    out.append("</table>")
    if not len(r.records):
        return "".join(out) + "<p>(no ops)</p></div>"
    has_ceil = r.ceilings is not None
    use_measured = r.timed  # projected reports carry their estimates as times
    tlabel = _time_label(r)
    roots, whole = module_tree(r)
    if use_measured or has_ceil:
        c = r.classification()
        phases = []
        for name in r.by_phase():
            row = _rollup.roofline_row(r.records, _rollup.phase_mask(r.records, name), c)
            phases.append((name, _node_time(row, use_measured), _style.PHASE_COLORS.get(name, _style.OTHER),
                           f"{name}: {fmt(row['flops'], 'FLOP')}, {fmt(row['bytes'], 'B')}"))
        total = sum(p[1] for p in phases)
        out.append(_bars(phases, total, f"{tlabel} by phase"))
        level = roots[0].children if len(roots) == 1 and roots[0].children else roots
        mods = [(n.name, _node_time(n.row, use_measured), _style.bound_color(n.row["bound"]),
                 f"{n.name}: {fmt(n.row['flops'], 'FLOP')}, {fmt(n.row['bytes'], 'B')}, {n.row['bound']}-bound")
                for n in level[:12]]
        out.append(_bars(mods, _node_time(whole, use_measured), f"{tlabel} by module"))
    if has_ceil and chart:
        try:
            out.append(f"<div>{_svg.roofline_svg(r)}</div>")
        except ValueError:
            pass
    if has_ceil:
        rows = list(r.analysis("op").items())[:top]
        timed = any(math.isfinite(row["time"]) for _, row in rows)
        cols = ["op", "calls", "FLOPs", "bytes", "FLOP/B", "roofline time"]
        cols += ([tlabel, "achieved", "% roof", "MFU", "MBU"] if timed else []) + ["bound"]
        out.append(f"<div><b>top {len(rows)} ops by {tlabel if timed else 'roofline time'}</b></div><table><tr>"
                   + "".join(f'<th class="{"l" if i == 0 else ""}">{_e(h)}</th>' for i, h in enumerate(cols))
                   + "</tr>")
        for name, row in rows:
            cells = [f'<td class="l">{_e(name)}</td>', f"<td>{row['calls']}</td>",
                     f"<td>{fmt(row['flops'], 'FLOP')}</td>", f"<td>{fmt(row['bytes'], 'B')}</td>",
                     f"<td>{row['intensity']:.2f}</td>", f"<td>{dur(row['t_min'])}</td>"]
            if timed:
                cells += [f"<td>{dur(row['time'])}</td>", f"<td>{_rate(row)}</td>",
                          f"<td>{pct(row['efficiency'])}</td>", f"<td>{pct(row['mfu'])}</td>",
                          f"<td>{pct(row['mbu'])}</td>"]
            cells.append(f"<td>{_bound_cell(row, projected)}</td>")
            out.append("<tr>" + "".join(cells) + "</tr>")
        out.append("</table>")
    else:
        ops = list(r.by_op().items())[:top]
        out.append(f"<div><b>top {len(ops)} ops by FLOPs</b></div><table><tr><th class='l'>op</th><th>calls</th>"
                   "<th>FLOPs</th><th>bytes</th><th>FLOP/B</th></tr>")
        for name, t in ops:
            out.append(f'<tr><td class="l">{_e(name)}</td><td>{t["calls"]}</td><td>{fmt(t["flops"], "FLOP")}</td>'
                       f'<td>{fmt(t["bytes"], "B")}</td><td>{t["intensity"]:.2f}</td></tr>')
        out.append("</table>")
    if roots:
        params = (_parameters.of_report(r) or {}).get("modules")
        head = (f'<span class="rl-node" {_grid(1, params is not None)}><span class="l"><b>module</b></span>'
                f'<span><b>calls</b></span>'
                f'<span><b>FLOPs</b></span><span><b>bytes</b></span><span><b>{_e(tlabel)}</b></span>'
                f'<span><b>% roof</b></span><span><b>bound</b></span>'
                f'{"<span><b>params</b></span>" if params is not None else ""}</span>')
        out.append(f'<div><b>module tree</b> (click a module to expand it)</div><div class="rl-tree">'
                   f'<div style="margin-left:31px">'
                   f'{head}</div>')
        out += [_tree_html(n, use_measured, projected, params=params) for n in roots]
        out.append("</div>")

    out.append(advice_html(r))
    out.append(legend_html())
    out.append("</div>")
    return "".join(out)


def page(report, title: str | None = None, ceilings_note: str = "", top: int = 15) -> str:
    """A full, self-contained HTML page of ``report``: :func:`to_html` (the notebook view) in a document with its
    title. What ``Report.to_html`` writes and the trainer callbacks save."""
    if title is None:
        where = report.meta.get("projected_to")
        title = "roofline report" + (f" (projected onto {where})" if where else "")
    return document(title, to_html(report, ceilings_note=ceilings_note, top=top))


def document(title: str, body: str) -> str:
    """A full HTML page titled ``title`` around ``body`` (HTML)."""
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>' + _e(title)
            + '</title><meta name="viewport" content="width=device-width, initial-scale=1"></head>\n<body>\n'
            + body + "\n</body></html>\n")


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
