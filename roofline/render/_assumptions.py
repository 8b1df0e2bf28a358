"""The summary lines of what a projection assumes (``meta["assumed"]``, made by
:func:`roofline._analysis._assumptions.describe`)."""

from __future__ import annotations


def line(assumed: dict, target: str) -> list[str]:
    """The summary lines of a projection's assumptions."""
    dt = ", ".join(f"{k} {v:.0%}" for k, v in assumed.get("matrix_dtypes", {}).items()) or "none"
    out = [f"  assumed: attention {assumed.get('attention', '?')}; matrix FLOPs in {dt}"]
    if assumed.get("no_peak"):
        items = "; ".join(f"{k} {v}" for k, v in assumed["no_peak"].items())
        out.append(f"  no peak of their dtype on {target}: {items}")
    if assumed.get("vector_fallback"):
        items = "; ".join(f"{k} {v}" for k, v in assumed["vector_fallback"].items())
        out.append(f"  element-wise work in {items}")
    return out
