"""What ``print(r)`` shows: the summary (totals, phases, ceilings, rates, the top ops) and, after it, the advice
(fusion opportunities and hints)."""

from __future__ import annotations

from roofline.render import _render
from roofline.render._advice import advice_text


def report_text(report, top: int | None = 10) -> str:
    """The summary of ``report`` with its ``top`` ops, then the advice when there is any."""
    text = _render.summary(report, top, ceilings_note=report.roofs.note)
    advice = advice_text(report)
    return text + "\n\n" + advice if advice else text
