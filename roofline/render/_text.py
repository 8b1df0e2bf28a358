"""What ``print(r)`` shows: the summary (totals, phases, ceilings, rates, the top ops) and, after it, the advice
(fusion opportunities and hints); and what ``print`` shows of the LLM cross-checks (``roofline.llm.CrossCheck``)."""

from __future__ import annotations

from roofline.render import _render
from roofline.render._advice import advice_text


def report_text(report, top: int | None = 10) -> str:
    """The summary of ``report`` with its ``top`` ops, then the advice when there is any."""
    text = _render.summary(report, top, ceilings_note=report.roofs.note)
    advice = advice_text(report)
    return text + "\n\n" + advice if advice else text


def cross_check(c) -> str:
    """``str(check)`` of a ``roofline.llm.CrossCheck``: the field, the measured and the expected count, their relative
    difference and whether it is within the tolerance."""
    verdict = "within" if c.ok else "NOT within"
    return (f"{c.field}: measured {c.measured:,} vs expected {c.expected:,}: {c.rel_diff:+.3%} "
            f"({verdict} {c.tolerance:.0%})")
