"""The advice a report prints: the largest fusion opportunities (grouped by op chain) and the hints, as the text
section of ``print(r)`` (:func:`advice_text`) and the notebook view's list (:func:`advice_html`). The findings are
the analyses' (:mod:`roofline._analysis._hints`, :mod:`roofline._analysis._dataflow`); this module only writes them."""

from __future__ import annotations

import html
import math

from roofline._analysis import _dataflow
from roofline._util._format import dur, fmt, op_name


def describe(f) -> str:
    """One line of a fusion opportunity (:class:`roofline._analysis._dataflow.FusionOpportunity`): the op chain,
    where, and what fusing saves (and whether a compiled run took it)."""
    chain = " -> ".join(op_name(o) for o in f.ops)
    where = f.modules[0] if len(set(f.modules)) == 1 else f"{f.modules[0]} .. {f.modules[-1]}"
    text = (f"{chain} in {where}: saves {fmt(f.saved_bytes, 'B')} of {fmt(f.bytes, 'B')}"
            + (f", {dur(f.saved_s)} at the roof" if math.isfinite(f.saved_s) else ""))
    if f.compiled is not None:
        text += f"; compiled: {f.compiled}"
        if f.compiled_saved_bytes is not None:
            text += f" (keeps {fmt(f.compiled_saved_bytes, 'B')} of {fmt(f.saved_bytes, 'B')} on chip)"
    return text


def described(opportunities: list) -> list:
    """``opportunities`` with their line (``describe()``) written."""
    for f in opportunities:
        f.line = describe(f)
    return opportunities


def _sdpa(h) -> str:
    ev = h.evidence
    return (f"attention runs as separate products and softmax ({ev['instances']} times; score matrix "
            f"{fmt(ev['score_bytes'], 'B')} written and re-read): use torch.nn.functional.scaled_dot_product_attention, "
            f"whose fused kernels keep scores on chip, avoiding {fmt(ev['saved_bytes'], 'B')}")


def _matmul_precision(h) -> str:
    ev = h.evidence
    dt = ev["dtype"]
    return (f"{ev['calls']} float32 matrix products ({ev['compute_bound_calls']} compute-bound) run at the float32 "
            f"peak {fmt(ev['float32_matrix_peak'], 'FLOP/s')} (the recorder cannot see whether TF32 is already "
            f"allowed); this device's {dt} matrix peak is {fmt(ev[f'{dt}_matrix_peak'], 'FLOP/s')}: {ev['how']}")


def _small_gemm(h) -> str:
    ev = h.evidence
    return (f"{ev['calls']} matrix products are memory-bound (median intensity {ev['median_intensity']:.1f} FLOP/B, "
            f"ridge {ev['ridge']:.1f}): they are too small to reach the peak; batch them (a larger batch, or stack "
            f"same-weight calls into one product). At the peak they would take {dur(ev['t_at_peak_s'])} "
            f"instead of {dur(ev['t_roof_s'])} (an upper bound on the saving)")


def _layout_copies(h) -> str:
    ev = h.evidence
    top = ", ".join(f"{k} {fmt(v, 'B')}" for k, v in sorted(ev["by_op"].items(), key=lambda kv: -kv[1])[:4])
    return (f"layout copies move {fmt(ev['bytes'], 'B')}, {ev['share_of_bytes'] * 100:.0f}% of all bytes ({top}): "
            "keep tensors in the layout their consumers read (avoid .contiguous() after transposes, preallocate "
            "instead of torch.cat, use channels_last end to end)")


def _cast_pingpong(h) -> str:
    ev = h.evidence
    return (f"{ev['pairs']} tensors are cast to another dtype and straight back ({', '.join(ev['conversions'])}), "
            f"moving {fmt(ev['bytes'], 'B')}: keep them in one dtype (check .float()/.half() calls and autocast "
            "regions)")


def _optimizer_fused(h) -> str:
    ev = h.evidence
    return (f"the optimizer step runs {ev['calls']} {'foreach' if ev['foreach'] else 'per-parameter'} kernels moving "
            f"{fmt(ev['bytes'], 'B')}; a fused step reads and writes each parameter, gradient and state once "
            f"({fmt(ev['fused_bytes'], 'B')}): pass fused=True to the optimizer (Adam/AdamW/SGD)"
            + ("" if ev["foreach"] else " or at least foreach=True"))


def _optimizer_state_init(h) -> str:
    ev = h.evidence
    return (f"the measured optimizer step creates its state ({ev['calls']} calls of {', '.join(h.ops[:3])} "
            f"writing {fmt(ev['bytes_written'], 'B')}): that happens once, on the first step; run a warm-up step "
            "before measuring so the report shows a steady-state step")


def _dropout_mask(h) -> str:
    ev = h.evidence
    return (f"{ev['calls']} dropout calls materialise their masks ({fmt(ev['mask_bytes'], 'B')} written, "
            f"{fmt(ev['mask_reread_bytes'], 'B')} read back): a fused kernel regenerates the mask from the random "
            "seed instead (torch.compile; dropout_p of scaled_dot_product_attention inside attention)")


def _op_overhead(h) -> str:
    ev = h.evidence
    gap = ev["wall_s"] - ev["ops_time_s"]
    return (f"{ev['calls']} op calls with a median roofline time of {dur(ev['median_t_min_s'])} take "
            f"{dur(ev['wall_s'])} of wall time (instrumentation removed), of which {dur(gap)} is outside the ops' "
            f"measured times: ~{dur(ev['overhead_per_call_s'])} per call goes to launch and framework overhead; "
            "fewer, larger ops (a larger batch, torch.compile, CUDA graphs) recover it")


# a hint's kind -> how its message is written from its evidence (a new rule of roofline/_analysis/_hints.py adds one)
MESSAGES = {"sdpa": _sdpa, "matmul_precision": _matmul_precision, "small_gemm": _small_gemm,
            "layout_copies": _layout_copies, "cast_pingpong": _cast_pingpong, "optimizer_fused": _optimizer_fused,
            "optimizer_state_init": _optimizer_state_init, "dropout_mask": _dropout_mask,
            "op_overhead": _op_overhead}


def message(h) -> str:
    """What to do and why, with the figures of the hint ``h``: its own message when its rule wrote one (a rule
    added by a user), else the one of its kind."""
    return h.message or MESSAGES[h.kind](h)


def line(h) -> str:
    """``str(hint)``: ``[kind] message (saves ~time, bytes)``."""
    saved = f"saves ~{dur(h.saved_s)}" if math.isfinite(h.saved_s) else "time saved unknown"
    if h.saved_bytes:
        saved += f", {fmt(h.saved_bytes, 'B')}"
    return f"[{h.kind}] {message(h)} ({saved})"


def written(hints: list) -> list:
    """``hints`` (of :func:`roofline._analysis._hints.hints`) with their message and line written."""
    for h in hints:
        h.message = message(h)
        h.line = line(h)
    return hints


def _advice_parts(report) -> tuple[list, list, list[str]]:
    """What the advice sections show, gathered once for the text and the HTML view: (fusion-opportunity groups,
    hints, problems). A failing opportunity finder or hint rule becomes a problem line: the report prints whatever
    a rule does, and says what failed."""
    groups: list = []
    hs: list = []
    problems: list[str] = []
    if _dataflow.report_accesses(report) is not None:
        try:
            groups = _dataflow.group_opportunities(report.fusion_opportunities())
        except Exception as exc:  # noqa: BLE001 - reported, see above
            problems.append(f"fusion opportunities unavailable: {type(exc).__name__}: {exc}")
    try:
        hs = report.hints()
    except Exception as exc:  # noqa: BLE001 - reported, see above
        problems.append(f"hints unavailable: {type(exc).__name__}: {exc}")
    return groups, hs, problems


def _chain_names(group: dict) -> list[str]:
    """The ops of an opportunity group without their namespace (``aten.add`` -> ``add``)."""
    return [o.split(".")[1] if "." in o else o for o in group["ops"]]


def _modules_list(group: dict, most: int) -> str:
    return ", ".join(group["modules"][:most]) + (", ..." if len(group["modules"]) > most else "")


def advice_text(report, top: int = 5) -> str:
    """The section ``print(r)`` adds after the op table: the largest fusion opportunities (grouped by op chain) and
    hints; empty when the report has neither (no records, or no access table and no hint)."""
    if not len(report.records):
        return ""

    groups, hs, problems = _advice_parts(report)
    lines = list(problems)
    if groups:
        saved_b = sum(g["saved_bytes"] for g in groups)
        saved_t = sum(g["saved_s"] for g in groups if math.isfinite(g["saved_s"]))
        n = sum(g["count"] for g in groups)
        lines.append(f"fusion opportunities: {n} {'chain' if n == 1 else 'chains'} could each run as one "
                     f"kernel, avoiding {fmt(saved_b, 'B')}" + (f" and {dur(saved_t)} at the roof"
                                                               if saved_t else ""))
        for g in groups[:top]:
            t = f", {dur(g['saved_s'])}" if math.isfinite(g["saved_s"]) else ""
            lines.append(f"  {g['count']:>4} x {' -> '.join(_chain_names(g))} ({g['kind']}, {g['phase']}): saves "
                         f"{fmt(g['saved_bytes'], 'B')}{t}; in {_modules_list(g, 3)}")
    if hs:
        if lines:
            lines.append("")
        lines.append("hints (most time saved first):")
        lines.extend(f"  - {h}" for h in hs[:top])
    return "\n".join(lines)


def advice_html(report, top: int = 3) -> str:
    """The notebook view's section of :func:`advice_text`: the ``top`` fusion opportunities (grouped by op chain)
    and hints, with their bytes and time at the roof; empty when the report has neither."""
    if not len(report.records):
        return ""

    groups, hs, problems = _advice_parts(report)
    items = [html.escape(p) for p in problems]
    for g in groups[:top]:
        chain = " &rarr; ".join(html.escape(o) for o in _chain_names(g))
        t = f", {dur(g['saved_s'])} at the roof" if math.isfinite(g["saved_s"]) else ""
        items.append(f"<b>fuse</b> {g['count']} &times; {chain} ({html.escape(g['phase'])}): saves "
                     f"{fmt(g['saved_bytes'], 'B')}{t}; in {html.escape(_modules_list(g, 2))}")
    items.extend(html.escape(str(h)) for h in hs[:top])
    if not items:
        return ""
    lis = "".join(f"<li>{x}</li>" for x in items)
    return (f'<div class="rl-advice"><b>what to change</b> (fusion opportunities, then hints; most time '
            f'saved first in each)'
            f'<ul style="margin:.2em 0">{lis}</ul></div>')
