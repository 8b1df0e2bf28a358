"""The roofline chart of a report (matplotlib, an optional dependency)."""

from __future__ import annotations

import math

import numpy as np

from roofline._records import DTYPE_NAMES

_COLORS = {"compute": "#c0392b", "memory": "#2471a3", "mixed": "#7d3c98", "?": "#7f8c8d", "none": "#7f8c8d",
           "bandwidth": "#2471a3"}


def plot_report(report, path=None, ax=None, by: str = "op", top: int = 8, title: str | None = None):
    """Draw ``report`` on the roofline: log-log axes (x: arithmetic intensity in FLOP/byte, y: FLOP/s), one
    horizontal roof per (unit, dtype) the run uses, one sloped line per memory level, and one point per op (or
    module, ``by="module"``) with FLOPs, placed at its intensity and its achieved rate (its attainable rate when
    the run was not timed), sized by its share of time and coloured by its bound; the ``top`` points by time are
    labelled. Ops without FLOPs (copies, views) cannot sit on a FLOP/s axis and are left out; the title says how
    many. Saves to ``path`` (PNG, SVG, PDF by extension) when given; returns the matplotlib Figure."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError("plot needs matplotlib: pip install matplotlib") from None
    c = report.ceilings
    if c is None:
        raise ValueError("this report has no ceilings to draw (counted on meta?): plot r.project('<device>') instead")
    cls = report.classification()
    rows = report.analysis(by=by)
    timed = report.timed or bool(report.meta.get("projected_to"))
    pts = [(n, r) for n, r in rows.items() if r["flops"] > 0 and r["bytes"] > 0]
    if ax is not None:
        fig = ax.figure
    elif path is not None:  # a file only: a bare Figure, so the session's backend (a notebook's) is left alone
        fig = Figure(figsize=(9, 6))
        ax = fig.subplots()
    else:
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(9, 6))
    ax.set_xscale("log")
    ax.set_yscale("log")

    # roofs of the (unit, dtype) pairs that carry FLOPs in this run
    r = report.records
    has = (r["matrix_flops"] + r["vector_flops"]) > 0
    pairs = []
    for unit_is_matrix, dt in sorted({(bool(m > 0), int(d)) for m, d in zip(r["matrix_flops"][has], r["dtype"][has])}):
        u = "matrix" if unit_is_matrix else "vector"
        sel = has & ((r["matrix_flops"] > 0) == unit_is_matrix) & (r["dtype"] == dt)
        peak = float(np.nanmax(cls["peak"][sel])) if sel.any() else math.nan
        if math.isfinite(peak) and (u, peak) not in [(p[0], p[2]) for p in pairs]:
            pairs.append((u, DTYPE_NAMES.get(dt, "?"), peak))
    levels = [(lvl, c.bandwidth(lvl, _src(report, c, lvl))) for lvl in ("L1", "L2", "L3", "DRAM")
              if _has_bw(c, lvl, report)]
    xs = [p[1]["intensity"] for p in pts] or [1.0]
    x_lo = min(min(xs) / 4, 0.05)
    top_peak = max((p[2] for p in pairs), default=1e12)
    x_hi = max(max(xs) * 4, max((top_peak / bw for _, bw in levels), default=1.0) * 4)
    for u, dt, peak in pairs:
        ax.plot([x_lo, x_hi], [peak, peak], ls="-" if u == "matrix" else "--", lw=1.5, color="#444",
                label=f"peak {u}/{dt}: {peak / 1e9:.4g} GFLOP/s", gid=f"roof:{u}/{dt}")
    for lvl, bw in levels:
        x_end = top_peak / bw
        ax.plot([x_lo, x_end], [bw * x_lo, bw * x_end], ls=":" if lvl != "DRAM" else "-", lw=1.2, color="#888",
                label=f"{lvl} {bw / 1e9:.4g} GB/s", gid=f"bandwidth:{lvl}")
    if pts:
        tt = np.array([(p[1]["time"] if timed and math.isfinite(p[1]["time"]) else p[1]["t_min"]) for p in pts])
        tt = np.where(np.isfinite(tt), tt, 0.0)
        share = tt / tt.sum() if tt.sum() > 0 else np.full(len(pts), 1.0 / len(pts))
        y = []
        for _, row in pts:
            v = row["achieved_flops"] if timed and math.isfinite(row["achieved_flops"]) else \
                (row["flops"] / row["t_min"] if row["t_min"] and math.isfinite(row["t_min"]) else math.nan)
            y.append(v)
        x = np.array([p[1]["intensity"] for p in pts])
        colors = [_COLORS.get(p[1]["bound"], "#7f8c8d") for p in pts]
        ax.scatter(x, y, s=20 + 600 * share, c=colors, alpha=0.75, edgecolors="k", linewidths=0.5, zorder=3,
                   gid="ops")
        order = np.argsort(-tt)[:top]
        for i in order.tolist():
            name = pts[i][0].replace("aten.", "").replace(".default", "")
            ax.annotate(name, (x[i], y[i]), textcoords="offset points", xytext=(5, 5), fontsize=8)
        ys = [v for v in y if math.isfinite(v) and v > 0] + [p[2] for p in pairs]
        if ys:
            ax.set_ylim(min(ys) / 5, max(ys) * 3)
    ax.set_xlim(x_lo, x_hi)
    ax.set_xlabel("arithmetic intensity (FLOP / compulsory byte)")
    ax.set_ylabel("FLOP/s " + ("achieved" if timed else "attainable (not timed)"))
    skipped = sum(1 for row in rows.values() if not row["flops"])
    where = report.meta.get("projected_to") or f"{c.name} ({report.ceilings_source})"
    ax.set_title(title or f"roofline on {where}: {len(pts)} {by}s" + (f" ({skipped} without FLOPs not shown)"
                                                                      if skipped else ""))
    from matplotlib.lines import Line2D

    handles, labels = ax.get_legend_handles_labels()
    for b in ("compute", "memory", "mixed"):
        handles.append(Line2D([], [], marker="o", ls="", color=_COLORS[b]))
        labels.append(f"{b}-bound")
    ax.legend(handles, labels, fontsize=8, loc="lower right")
    ax.grid(True, which="major", alpha=0.3)
    if path is not None:
        fig.savefig(path, dpi=120, bbox_inches="tight")
    return fig


def _src(report, c, level):
    src = report.ceilings_source
    return src if src in ("measured", "datasheet") else "best"


def _has_bw(c, level, report) -> bool:
    try:
        c.bandwidth(level, _src(report, c, level))
        return True
    except Exception:
        return False
