"""The colours every view uses (the HTML report, the SVG chart, the matplotlib chart): one table, so that a bound or
a phase has one colour wherever it is drawn."""

from __future__ import annotations

OTHER = "#7f8c8d"  # a bound or phase not listed, and ops that do no work ("none")
BOUND_COLORS = {"compute": "#c0392b", "memory": "#2471a3", "bandwidth": "#2471a3", "mixed": "#7d3c98",
                "interconnect": "#d68910", "none": OTHER, "?": OTHER}
PHASE_COLORS = {"forward": "#2e86c1", "backward": "#ca6f1e", "optimizer": "#229954"}


def bound_color(bound: str) -> str:
    return BOUND_COLORS.get(bound, OTHER)
