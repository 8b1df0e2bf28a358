"""The advice a report prints: the largest fusion opportunities (grouped by op chain) and the hints, as the text
section of ``print(r)`` (:func:`advice_text`) and the notebook view's list (:func:`advice_html`). The findings are
the analyses' (:mod:`roofline.analysis._hints`, :mod:`roofline.analysis._dataflow`); this module only writes them."""

from __future__ import annotations

import html
import math

from roofline.analysis import _dataflow
from roofline.util._format import dur, fmt


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
