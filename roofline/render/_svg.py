"""The roofline chart as self-contained SVG (no script, no external file): what the notebook view embeds, and
:meth:`roofline.Report.roofline_chart` returns. Each point has a tooltip (an SVG ``<title>``) with its op or
module, input shapes, dtypes, FLOPs, bytes, time and % of roof; the labels of the points with most time are
placed so that they overlap neither each other nor a point (:func:`place_labels`, shared with the matplotlib
chart)."""

from __future__ import annotations

import html
import math
from collections import Counter

import numpy as np

from roofline.analysis import _compiled_view, _groups
from roofline.model._records import DTYPE_NAMES
from roofline.render import _style
from roofline.util import _format, _output
from roofline.util._format import op_label

CHAR_W = 0.62  # a conservative width of one character of a sans-serif font, in font sizes


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


# ---- what a point is ---------------------------------------------------------------------------------------------
def chart_points(report, by: str = "op", depth: int | None = None):
    """The points of a roofline chart: [(name, row, mask)] for the groups with FLOPs and bytes. ``by``: "op",
    "op_shape" (when the report has shape signatures), "module" (the modules of one level of the tree,
    :func:`roofline.analysis._groups.module_level`) or "kernel" (the kernels of compiled graphs,
    :func:`roofline.analysis._compiled_view.kernel_rows`; mask None)."""
    if by == "kernel":
        if depth is not None:
            raise ValueError("depth applies to by='module' only, not by='kernel'")

        if not (_compiled_view.compiled(report) or {}).get("kernels"):
            raise ValueError("by='kernel' needs a report of a block that ran torch.compile'd code with Inductor "
                             "(this one has no compiled kernels; see docs/compiled.md)")
        pts = [(k["name"], k, None) for k in _compiled_view.kernel_rows(report)]
    elif by == "module":
        pts = [(n.name, n.row, n.mask) for n in _groups.module_level(report, depth)]
    elif by in ("op", "op_shape"):
        if depth is not None:
            raise ValueError(f"depth applies to by='module' only, not by={by!r}")
        pts = [(name, row, mask) for name, (row, mask) in _groups.op_groups(report, by).items()]
    else:
        raise ValueError(f"by must be 'op', 'op_shape', 'module' or 'kernel', got {by!r}")
    return [p for p in pts if p[1]["flops"] > 0 and p[1]["bytes"] > 0]


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


# ---- roofs -------------------------------------------------------------------------------------------------------
def roofs(report):
    """``(peaks, levels)``: [(unit, dtype name, FLOP/s)] of the (unit, dtype) pairs that carry FLOPs in this run,
    and [(memory level, bytes/s)] of the bandwidths the ceilings have."""
    c = report.ceilings
    cls = report.classification()
    r = report.records
    has = (r["matrix_flops"] + r["vector_flops"]) > 0
    pairs = []
    for unit_is_matrix, dt in sorted({(bool(m > 0), int(d)) for m, d in zip(r["matrix_flops"][has],
                                                                              r["dtype"][has])}):
        u = "matrix" if unit_is_matrix else "vector"
        sel = has & ((r["matrix_flops"] > 0) == unit_is_matrix) & (r["dtype"] == dt)
        peak = float(np.nanmax(cls["peak"][sel])) if sel.any() and np.isfinite(cls["peak"][sel]).any() else math.nan
        if math.isfinite(peak) and (u, peak) not in [(p[0], p[2]) for p in pairs]:
            pairs.append((u, DTYPE_NAMES.get(dt, "?"), peak))
    src = report.ceilings_source if report.ceilings_source in ("measured", "datasheet") else "best"
    levels = []
    for lvl in ("L1", "L2", "L3", "DRAM"):
        try:
            levels.append((lvl, float(c.bandwidth(lvl, src))))
        except Exception:
            if lvl == "DRAM" and len(cls["bw"]) and math.isfinite(cls["bw"][0]):
                levels.append((lvl, float(cls["bw"][0])))
    return pairs, levels


# ---- the SVG -----------------------------------------------------------------------------------------------------
def roofline_svg(report, by: str = "op", depth: int | None = None, top: int = 10, width: int = 820,
                 height: int = 440) -> str:
    """The roofline chart of ``report`` as an SVG element (see the module's docstring). ValueError when the report
    has no ceilings."""

    if report.ceilings is None:
        raise ValueError("this report has no ceilings to draw (counted on meta?): chart r.project('<device>')")
    timed = chart_timed(report, by)
    pts = chart_points(report, by, depth)
    peaks, levels = roofs(report)
    ys = [point_y(p[1], timed) for p in pts]
    keep = [i for i, y in enumerate(ys) if math.isfinite(y) and y > 0]
    pts, ys = [pts[i] for i in keep], [ys[i] for i in keep]
    xs = [p[1]["intensity"] for p in pts]
    top_peak = max((p[2] for p in peaks), default=1e12)
    x_lo = min(min(xs, default=1.0) / 4, 0.05)
    x_hi = max(max(xs, default=1.0) * 4, max((top_peak / bw for _, bw in levels), default=1.0) * 4)
    yv = ys + [p[2] for p in peaks]
    y_lo, y_hi = min(yv, default=1.0) / 5, max(yv, default=1.0) * 3
    ml, mr, mt, mb = 70, 240, 30, 46
    pw, ph = width - ml - mr, height - mt - mb
    lx0, lx1, ly0, ly1 = math.log10(x_lo), math.log10(x_hi), math.log10(y_lo), math.log10(y_hi)

    def X(x):
        return ml + (math.log10(x) - lx0) / (lx1 - lx0) * pw

    def Y(y):
        return mt + (ly1 - math.log10(y)) / (ly1 - ly0) * ph

    e = html.escape
    where = report.meta.get("projected_to") or f"{report.ceilings.name} ({report.ceilings_source})"
    what = {"op": "ops", "op_shape": "op shapes", "module": "modules", "kernel": "compiled kernels"}[by]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11" class="rl-roofline">',
           f'<text x="{ml}" y="18" font-size="13" font-weight="bold">roofline on {e(where)}: {len(pts)} {what}'
           f'{" (projected)" if report.meta.get("projected_to") else ""}</text>',
           f'<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="#bbb"/>']
    # decade grid and tick labels
    for k in range(math.ceil(lx0), math.floor(lx1) + 1):
        x = X(10.0 ** k)
        out.append(f'<line x1="{x:.1f}" y1="{mt}" x2="{x:.1f}" y2="{mt + ph}" stroke="#eee"/>'
                   f'<text x="{x:.1f}" y="{mt + ph + 14}" text-anchor="middle">{_tick(10.0 ** k)}</text>')
    for k in range(math.ceil(ly0), math.floor(ly1) + 1):
        y = Y(10.0 ** k)
        out.append(f'<line x1="{ml}" y1="{y:.1f}" x2="{ml + pw}" y2="{y:.1f}" stroke="#eee"/>'
                   f'<text x="{ml - 4}" y="{y + 4:.1f}" text-anchor="end">{e(_format.fmt(10.0 ** k))}</text>')
    out.append(f'<text x="{ml + pw / 2}" y="{height - 8}" text-anchor="middle">arithmetic intensity '
               f'(FLOP / compulsory byte)</text>')
    out.append(f'<text transform="translate(14,{mt + ph / 2}) rotate(-90)" text-anchor="middle">FLOP/s '
               f'{"achieved" if timed else "attainable (not timed)"}</text>')
    out.append(f'<clipPath id="rl-clip"><rect x="{ml}" y="{mt}" width="{pw}" height="{ph}"/></clipPath>'
               '<g clip-path="url(#rl-clip)">')
    legend = []
    for lvl, bw in levels:
        x_end = min(top_peak / bw, x_hi)
        dash = "" if lvl == "DRAM" else ' stroke-dasharray="2,3"'
        out.append(f'<line x1="{X(x_lo):.1f}" y1="{Y(bw * x_lo):.1f}" x2="{X(x_end):.1f}" y2="{Y(bw * x_end):.1f}" '
                   f'stroke="#888" stroke-width="1.2"{dash}><title>{e(lvl)} bandwidth '
                   f'{e(_format.fmt(bw, "B/s"))}</title></line>')
        legend.append((f"{lvl} {_format.fmt(bw, 'B/s')}", "#888", dash))
    for u, dt, peak in peaks:
        dash = "" if u == "matrix" else ' stroke-dasharray="6,3"'
        x_start = max(x_lo, peak / max((bw for lvl, bw in levels if lvl == "DRAM"), default=peak / x_lo))
        out.append(f'<line x1="{X(x_start):.1f}" y1="{Y(peak):.1f}" x2="{X(x_hi):.1f}" y2="{Y(peak):.1f}" '
                   f'stroke="#444" stroke-width="1.5"{dash}><title>peak {u}/{dt} '
                   f'{e(_format.fmt(peak, "FLOP/s"))}</title></line>')
        legend.append((f"peak {u}/{dt}: {_format.fmt(peak, 'FLOP/s')}", "#444", dash))
    out.append("</g>")
    # points, largest first so small ones stay on top
    tt = np.array([(p[1]["time"] if timed and math.isfinite(p[1]["time"]) else p[1]["t_min"]) for p in pts])
    tt = np.where(np.isfinite(tt), tt, 0.0)
    share = tt / tt.sum() if len(tt) and tt.sum() > 0 else np.full(len(pts), 1.0 / max(len(pts), 1))
    px = [(X(x), Y(y), 3.0 + 14.0 * math.sqrt(s)) for x, y, s in zip(xs, ys, share.tolist())]
    for i in sorted(range(len(pts)), key=lambda i: -px[i][2]):
        name, row, mask = pts[i]
        x, y, r = px[i]
        col = _style.bound_color(row["bound"])
        out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" fill="{col}" fill-opacity="0.7" stroke="#222" '
                   f'stroke-width="0.6" class="rl-point"><title>{e(tooltip(report, name, row, mask, by))}'
                   '</title></circle>')
    order = np.argsort(-tt, kind="stable")[:top].tolist()
    names = [point_label(p[0], by) for p in pts]
    placed = place_labels(px, [(i, names[i]) for i in order], 10.0, (ml, mt, ml + pw, mt + ph))
    for i, (x, y, _box) in placed.items():
        out.append(f'<text x="{x:.1f}" y="{y:.1f}" font-size="10" class="rl-label">{e(names[i])}</text>')
    # legend at the right
    lx, ly = ml + pw + 12, mt + 10
    for text, col, dash in legend:
        out.append(f'<line x1="{lx}" y1="{ly}" x2="{lx + 22}" y2="{ly}" stroke="{col}" stroke-width="1.5"{dash}/>'
                   f'<text x="{lx + 26}" y="{ly + 4}" font-size="10">{e(text)}</text>')
        ly += 16
    for b in ("compute", "memory", "mixed"):
        out.append(f'<circle cx="{lx + 11}" cy="{ly}" r="5" fill="{_style.bound_color(b)}" fill-opacity="0.7" stroke="#222" '
                   f'stroke-width="0.6"/><text x="{lx + 26}" y="{ly + 4}" font-size="10">{b}-bound</text>')
        ly += 16
    out.append(f'<text x="{lx}" y="{ly + 6}" font-size="9" fill="#666">point area: share of time;</text>'
               f'<text x="{lx}" y="{ly + 18}" font-size="9" fill="#666">hover a point for details</text>')
    out.append("</svg>")
    return "".join(out)


def _tick(v: float) -> str:
    return f"{v:g}" if 1e-3 <= v < 1e5 else f"1e{round(math.log10(v))}"


class Chart:
    """An interactive roofline chart for a notebook: renders as inline SVG (hover a point for its details);
    ``svg`` is the markup, :meth:`save` writes it (``.svg``, or ``.html`` wrapped in a page)."""

    def __init__(self, svg: str, title: str = "roofline"):
        self.svg = svg
        self.title = title

    def _repr_html_(self) -> str:
        return f"<div>{self.svg}</div>"

    def save(self, path) -> str:
        """Write the chart to ``path`` (UTF-8): an SVG file, or an HTML page when the name ends in ``.html`` or
        ``.htm``. ``path`` is a file name (str, ``os.PathLike`` or bytes: TypeError otherwise), written as
        ``Report.to_json`` writes one (a regular file replaced atomically, a symbolic link written through, a FIFO or
        device written into). Returns the path as a str."""
        p = _output.check_path(path, "Chart.save")
        text = self.svg if not p.lower().endswith((".html", ".htm")) else (
            f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(self.title)}</title></head>"
            f"<body>{self.svg}</body></html>")
        return _output.write(p, text, where="Chart.save")


def roofline_plotly(report, by: str = "op", depth: int | None = None):
    """The roofline chart as a plotly Figure (plotly is optional: ImportError naming it without): log axes, the
    roofs and bandwidth lines, and one marker per point whose hover text is the tooltip of :func:`tooltip`."""
    try:
        import plotly.graph_objects as go
    except ImportError:
        raise ImportError("roofline_chart(backend='plotly') needs plotly: pip install plotly") from None

    if report.ceilings is None:
        raise ValueError("this report has no ceilings to draw (counted on meta?): chart r.project('<device>')")
    timed = chart_timed(report, by)
    pts = [p for p in chart_points(report, by, depth) if math.isfinite(point_y(p[1], timed))]
    peaks, levels = roofs(report)
    xs = [p[1]["intensity"] for p in pts] or [1.0]
    top_peak = max((p[2] for p in peaks), default=1e12)
    x_lo = min(min(xs) / 4, 0.05)
    x_hi = max(max(xs) * 4, max((top_peak / bw for _, bw in levels), default=1.0) * 4)
    fig = go.Figure()
    for lvl, bw in levels:
        x_end = top_peak / bw
        fig.add_trace(go.Scatter(x=[x_lo, x_end], y=[bw * x_lo, bw * x_end], mode="lines",
                                 name=f"{lvl} {_format.fmt(bw, 'B/s')}",
                                 line={"color": "#888", "dash": "solid" if lvl == "DRAM" else "dot"}))
    for u, dt, peak in peaks:
        fig.add_trace(go.Scatter(x=[x_lo, x_hi], y=[peak, peak], mode="lines",
                                 name=f"peak {u}/{dt}: {_format.fmt(peak, 'FLOP/s')}",
                                 line={"color": "#444", "dash": "solid" if u == "matrix" else "dash"}))
    tt = np.array([(p[1]["time"] if timed and math.isfinite(p[1]["time"]) else p[1]["t_min"]) for p in pts])
    tt = np.where(np.isfinite(tt), tt, 0.0)
    share = tt / tt.sum() if len(tt) and tt.sum() > 0 else np.full(len(pts), 1.0 / max(len(pts), 1))
    for bound in ("compute", "memory", "bandwidth", "mixed", "?", "none"):
        sel = [i for i, p in enumerate(pts) if p[1]["bound"] == bound]
        if not sel:
            continue
        fig.add_trace(go.Scatter(
            x=[pts[i][1]["intensity"] for i in sel], y=[point_y(pts[i][1], timed) for i in sel], mode="markers",
            name=f"{bound}-bound", marker={"color": _style.bound_color(bound), "opacity": 0.75,
                                          "size": [6 + 40 * math.sqrt(share[i]) for i in sel],
                                          "line": {"width": 0.5, "color": "#222"}},
            hovertext=[tooltip(report, *pts[i], by).replace("\n", "<br>") for i in sel], hoverinfo="text"))
    where = report.meta.get("projected_to") or f"{report.ceilings.name} ({report.ceilings_source})"
    fig.update_layout(title=f"roofline on {where}", template="plotly_white",
                      xaxis={"type": "log", "title": "arithmetic intensity (FLOP / compulsory byte)"},
                      yaxis={"type": "log", "title": "FLOP/s " + ("achieved" if timed else "attainable")})
    return fig
