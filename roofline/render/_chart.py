"""The roofline chart of a report as data, computed once and drawn by every chart renderer (SVG, matplotlib,
plotly): the axes, the roofs (one horizontal line per (unit, dtype) peak the run uses, one sloped line per memory
level), the points (one per op, op and shapes, module or compiled kernel), their labels and the title. A renderer
maps this model to its own drawing calls and computes nothing of the roofline itself."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np

from roofline._analysis import _compiled_view, _groups
from roofline._datamodel._records import DTYPE_NAMES
from roofline.render import _style
from roofline._util import _format
from roofline._util._format import fmt, op_label

CHAR_W = 0.62  # a conservative width of one character of a sans-serif font, in font sizes
WHAT = {"op": "ops", "op_shape": "op shapes", "module": "modules", "kernel": "compiled kernels"}


@dataclass(frozen=True)
class Roof:
    """One line of the roof. ``kind``: "peak" (FLOP/s, horizontal) or "bandwidth" (bytes/s, sloped);
    ``name``: "matrix/float32" or a memory level ("DRAM"); ``value`` in FLOP/s or bytes/s; ``x`` and ``y``: the
    segment's two ends in data coordinates; ``label``: the legend text; ``solid``: drawn solid (the matrix peaks,
    DRAM) or dashed."""

    kind: str
    name: str
    value: float
    x: tuple[float, float]
    y: tuple[float, float]
    label: str
    solid: bool

    @property
    def gid(self) -> str:
        return f"{'roof' if self.kind == 'peak' else 'bandwidth'}:{self.name}"


@dataclass(frozen=True)
class Point:
    """One point: ``name`` (the op, module or kernel), ``label`` (its short label), ``row`` (its figures),
    ``mask`` (its records; None for a kernel), ``x`` (intensity, FLOP/byte), ``y`` (FLOP/s), ``time`` (the
    seconds that size it), ``share`` (of the chart's time), ``bound``, ``color`` and ``tooltip`` (the hover text: what it is, where it
    ran, its shapes and dtypes, its counts and times)."""

    name: str
    label: str
    row: dict
    mask: object
    x: float
    y: float
    time: float
    share: float
    bound: str
    color: str
    tooltip: str = ""


@dataclass(frozen=True)
class Chart:
    """What a roofline chart shows (see the module's docstring). ``points`` are those with a finite, positive
    height; ``by_time``: their indices, most time first (the order in which labels are placed); ``skipped``: the
    groups without FLOPs, which a FLOP/s axis cannot show."""

    by: str
    timed: bool
    title: str
    x_label: str
    y_label: str
    x_range: tuple[float, float]
    y_range: tuple[float, float]
    roofs: tuple[Roof, ...]
    points: tuple[Point, ...]
    by_time: tuple[int, ...]
    skipped: int

    @property
    def peaks(self) -> tuple[Roof, ...]:
        return tuple(r for r in self.roofs if r.kind == "peak")

    @property
    def bandwidths(self) -> tuple[Roof, ...]:
        return tuple(r for r in self.roofs if r.kind == "bandwidth")


def point_label(name: str, by: str) -> str:
    """The label of a chart point: the short op name, a module's last two name components (``blocks.0``), or a
    kernel's name without its namespace."""
    if by == "module":
        return ".".join(name.split(".")[-2:]) if name.count(".") >= 2 else name.rsplit(".", 1)[-1]
    if by == "kernel":  # cpp_fused_add_relu_3; extern_kernels.mm[buf2] -> mm[buf2]; torch.ops.aten.x.default[op8] -> x
        for prefix in ("extern_kernels.", "torch.ops.aten.", "aten."):
            if name.startswith(prefix):
                name = name[len(prefix):].replace(".default[", "[")
        return name if len(name) <= 40 else name[:37] + "..."
    if by == "op_shape":
        op, _, shapes = name.partition(" [")
        return op_label(op) + (" [" + shapes if shapes else "")
    return op_label(name)


def chart_points(report, by: str = "op", depth: int | None = None):
    """The groups a roofline chart can show: [(name, row, mask)] of those with FLOPs and bytes. ``by``: "op",
    "op_shape" (when the report has shape signatures), "module" (the modules of one level of the tree,
    :func:`roofline._analysis._groups.module_level`) or "kernel" (the kernels of compiled graphs,
    :func:`roofline._analysis._compiled_view.kernel_rows`; mask None)."""
    return _groups_of(report, by, depth)[0]


def _groups_of(report, by, depth):
    """``(points, skipped, depth shown)``: see :func:`chart_points`; ``skipped`` counts the groups without FLOPs."""
    shown_depth = depth
    if by == "kernel":
        if depth is not None:
            raise ValueError("depth applies to by='module' only, not by='kernel'")
        if not (_compiled_view.compiled(report) or {}).get("kernels"):
            raise ValueError("by='kernel' needs a report of a block that ran torch.compile'd code with Inductor "
                             "(this one has no compiled kernels; see docs/compiled.md)")
        pts = [(k["name"], k, None) for k in _compiled_view.kernel_rows(report)]
        skipped = sum(1 for k in pts if not (k[1]["flops"] and k[1]["bytes"]))
    elif by == "module":
        groups = _groups.module_level(report, depth)
        pts = [(n.name, n.row, n.mask) for n in groups]
        skipped = sum(1 for n in groups if not n.row["flops"])
        # the level drawn: its deepest node (the first may be a leaf above it, drawn at its own depth)
        shown_depth = max((n.depth for n in groups), default=depth)
    elif by in ("op", "op_shape"):
        if depth is not None:
            raise ValueError(f"depth applies to by='module' only, not by={by!r}")
        pts = [(name, row, mask) for name, (row, mask) in _groups.op_groups(report, by).items()]
        skipped = sum(1 for _, row, _ in pts if not row["flops"])
    else:
        raise ValueError(f"by must be 'op', 'op_shape', 'module' or 'kernel', got {by!r}")
    return [p for p in pts if p[1]["flops"] > 0 and p[1]["bytes"] > 0], skipped, shown_depth


def chart_timed(report, by: str) -> bool:
    """Whether a chart's points sit at achieved rates: the report was timed (or projected); for ``by="kernel"``,
    whether its kernels have times (the kernels of a compiled graph are timed even where its ops are not)."""
    if by == "kernel":
        return any(math.isfinite(k["time"]) and k["time"] > 0 for k in _compiled_view.kernel_rows(report))
    return report.timed or bool(report.meta.get("projected_to"))


def point_y(row, timed: bool) -> float:
    """A point's height: its achieved FLOP/s when timed (or projected), else its attainable rate."""
    if timed and math.isfinite(row["achieved_flops"]):
        return row["achieved_flops"]
    return row["flops"] / row["t_min"] if row["t_min"] and math.isfinite(row["t_min"]) else math.nan


def roof_figures(report):
    """``(peaks, levels)``: [(unit, dtype name, FLOP/s)] of the (unit, dtype) pairs that carry FLOPs in this run,
    each at the peak of the report's roofs (:attr:`roofline.Report.roofs`), and [(memory level, bytes/s)] of the
    bandwidths the roofs have."""
    roofs = report.roofs
    r = report.records
    has = (r["matrix_flops"] + r["vector_flops"]) > 0
    pairs = []
    for unit_is_matrix, dt in sorted({(bool(m > 0), int(d)) for m, d in zip(r["matrix_flops"][has],
                                                                              r["dtype"][has])}):
        u = "matrix" if unit_is_matrix else "vector"
        peak = roofs.judged_peak(u, DTYPE_NAMES.get(dt, "unknown")).value
        if math.isfinite(peak) and (u, peak) not in [(p[0], p[2]) for p in pairs]:
            pairs.append((u, DTYPE_NAMES.get(dt, "?"), peak))
    levels = [(lvl, f.value) for lvl, f in roofs.levels() if math.isfinite(f.value)]
    return pairs, levels


def tooltip(report, name, row, mask, by) -> str:
    """The hover text of one point: what it is, where it ran, its shapes and dtypes, its counts and times."""

    if by == "kernel":
        return _kernel_tooltip(report, row)
    rec = report.records[mask]
    t = rec["t_end"] - rec["t_start"]
    w = np.where(np.isfinite(t), t, 0.0)
    lines = [name if by != "op" else f"{name} ({row['calls']} calls)"]
    if by != "module":
        mods = Counter()
        for m, wt in zip(rec["module"].tolist(), w.tolist()):
            mods[report.module_path(m)] += wt or 1e-30
        top = [m for m, _ in mods.most_common(3)]
        lines.append("module: " + ", ".join(top) + (f" (+{len(mods) - 3} more)" if len(mods) > 3 else ""))
    sigs = getattr(report, "signatures", None)
    if _groups.has_signatures(report) and by != "op_shape":
        cnt = Counter(rec["sig"].tolist())
        shown = [sigs[s] or "(no tensor inputs)" for s, _ in cnt.most_common(2) if s < len(sigs)]
        if shown:
            lines.append("shapes: " + " | ".join(shown) + (f" (+{len(cnt) - 2} more)" if len(cnt) > 2 else ""))
    dts = sorted({DTYPE_NAMES.get(d, "unknown") for d in rec["dtype"].tolist()})
    lines.append("dtype: " + ", ".join(dts))
    lines.append(f"FLOPs {_format.fmt(row['flops'], 'FLOP')}, bytes {_format.fmt(row['bytes'], 'B')}, "
                 f"intensity {row['intensity']:.2f} FLOP/B")
    proj = bool(report.meta.get("projected_to"))
    if math.isfinite(row["time"]):
        lines.append(f"{'projected ' if proj else ''}time {_format.dur(row['time'])}, achieved "
                     f"{_format.fmt(row['achieved_flops'], 'FLOP/s')}, {_format.pct(row['efficiency'])} of roof")
    lines.append(f"roofline time {_format.dur(row['t_min'])}, {row['bound']}-bound"
                 + (f"; {row['above_ceiling']} call(s) above the ceiling (!)" if row["above_ceiling"] and not proj
                    else ""))
    return "\n".join(lines)


def _kernel_tooltip(report, k) -> str:

    ops = ", ".join(op_label(o) for o in k.get("ops", ())) or "(no op of the graph: added by Inductor)"
    lines = [f"{k['name']} ({k['calls']} calls, {k['phase']}{', extern' if k.get('extern') else ''})",
             f"module: {k.get('module', 'Global')}", "ops: " + (ops if len(ops) <= 90 else ops[:87] + "...")]
    if k.get("dtype"):
        lines.append(f"dtype: {k['dtype']}")
    lines.append(f"FLOPs {_format.fmt(k['flops'], 'FLOP')}, bytes {_format.fmt(k['bytes'], 'B')} per call, "
                 f"intensity {k['intensity']:.2f} FLOP/B")
    if math.isfinite(k["time"]):
        lines.append(f"time {_format.dur(k['time'])}, achieved {_format.fmt(k['achieved_flops'], 'FLOP/s')}, "
                     f"{_format.pct(k['efficiency'])} of roof")
    lines.append(f"roofline time {_format.dur(k['t_min'])} per call, {k['bound']}-bound"
                 + ("; above the ceiling (!)" if k["above_ceiling"] else ""))
    return "\n".join(lines)


def chart(report, by: str = "op", depth: int | None = None, title: str | None = None) -> Chart:
    """The chart model of ``report`` (see the module's docstring). ValueError when the report has no ceilings."""
    if report.ceilings is None:
        raise ValueError("this report has no ceilings to draw (counted on meta?): chart r.project('<device>') "
                         "instead")
    timed = chart_timed(report, by)
    groups, skipped, shown_depth = _groups_of(report, by, depth)
    ys = [point_y(p[1], timed) for p in groups]
    keep = [i for i, y in enumerate(ys) if math.isfinite(y) and y > 0]
    groups, ys = [groups[i] for i in keep], [ys[i] for i in keep]
    xs = [float(p[1]["intensity"]) for p in groups]
    peaks, levels = roof_figures(report)
    top_peak = max((p[2] for p in peaks), default=1e12)
    x_lo = min(min(xs, default=1.0) / 4, 0.05)
    x_hi = max(max(xs, default=1.0) * 4, max((top_peak / bw for _, bw in levels), default=1.0) * 4)
    yv = ys + [p[2] for p in peaks]
    y_range = (min(yv, default=1.0) / 5, max(yv, default=1.0) * 3)
    dram = next((bw for lvl, bw in levels if lvl == "DRAM"), None)
    roofs = []
    for lvl, bw in levels:
        x_end = min(top_peak / bw, x_hi)
        roofs.append(Roof("bandwidth", lvl, bw, (x_lo, x_end), (bw * x_lo, bw * x_end), f"{lvl} {fmt(bw, 'B/s')}",
                          lvl == "DRAM"))
    for u, dt, peak in peaks:
        x_start = max(x_lo, peak / dram) if dram else x_lo
        roofs.append(Roof("peak", f"{u}/{dt}", peak, (x_start, x_hi), (peak, peak),
                          f"peak {u}/{dt}: {fmt(peak, 'FLOP/s')}", u == "matrix"))
    tt = np.array([(p[1]["time"] if timed and math.isfinite(p[1]["time"]) else p[1]["t_min"]) for p in groups],
                  dtype=np.float64)
    tt = np.where(np.isfinite(tt), tt, 0.0)
    share = tt / tt.sum() if len(tt) and tt.sum() > 0 else np.full(len(groups), 1.0 / max(len(groups), 1))
    points = tuple(Point(name, point_label(name, by), row, mask, x, y, float(t), float(s), row["bound"],
                         _style.bound_color(row["bound"]), tooltip(report, name, row, mask, by))
                   for (name, row, mask), x, y, t, s in zip(groups, xs, ys, tt.tolist(), share.tolist()))
    projected = bool(report.meta.get("projected_to"))
    where = report.meta.get("projected_to") or f"{report.ceilings.name} ({report.ceilings_source})"
    lvl = f" at depth {shown_depth}" if by == "module" else ""
    auto = (f"roofline on {where}{' (projected)' if projected else ''}: {len(points)} {WHAT[by]}{lvl}"
            + (f" ({skipped} without FLOPs not shown)" if skipped else ""))
    return Chart(by=by, timed=timed, title=title or auto,
                 x_label="arithmetic intensity (FLOP / compulsory byte)",
                 y_label="FLOP/s " + ("achieved" if timed else "attainable (not timed)"),
                 x_range=(x_lo, x_hi), y_range=y_range, roofs=tuple(roofs), points=points,
                 by_time=tuple(np.argsort(-tt, kind="stable").tolist()), skipped=skipped)


# ---- label placement ---------------------------------------------------------------------------------------------
def place_labels(points, labels, font_px: float, bounds, pad: float = 2.0) -> dict:
    """Positions for point labels that overlap neither each other nor any point, inside ``bounds``.

    ``points``: [(x, y, radius)] in pixels, y growing downwards; ``labels``: [(point index, text)] in priority
    order (a label that fits nowhere is left out: the tooltip still names the point); ``bounds``: (x0, y0, x1, y1).
    Returns {point index: (x, y_baseline, (bx0, by0, bx1, by1))}: where to draw the text (left-aligned) and the
    box it occupies."""
    x0b, y0b, x1b, y1b = bounds
    taken = [(x - r, y - r, x + r, y + r) for x, y, r in points]
    out = {}

    def free(b):
        if b[0] < x0b or b[1] < y0b or b[2] > x1b or b[3] > y1b:
            return False
        return all(b[2] <= o[0] or b[0] >= o[2] or b[3] <= o[1] or b[1] >= o[3] for o in taken)

    h = font_px * 1.2
    for i, text in labels:
        x, y, r = points[i]
        w = CHAR_W * font_px * len(text) + 2
        d = r + pad
        for dx, dy in ((d, -d - h), (d, d), (-d - w, -d - h), (-d - w, d), (-w / 2, -d - h), (-w / 2, d),
                       (d + 2, -h / 2), (-d - 2 - w, -h / 2), (d + 6, -d - h - 8), (-d - 6 - w, d + 8)):
            box = (x + dx, y + dy, x + dx + w, y + dy + h)
            if free(box):
                taken.append(box)
                out[i] = (box[0] + 1, box[3] - 0.25 * font_px, box)
                break
    return out
