"""The roofline chart as self-contained SVG (no script, no external file): what the notebook view embeds, and
:meth:`roofline.Report.roofline_chart` returns. Each point has a tooltip (an SVG ``<title>``) with its op or
module, input shapes, dtypes, FLOPs, bytes, time and % of roof; the labels of the points with most time are
placed so that they overlap neither each other nor a point (:func:`roofline.render._chart.place_labels`). The chart
itself (axes, roofs, points, title) is the model of :mod:`roofline.render._chart`, shared with the matplotlib and
plotly charts."""

from __future__ import annotations

import html
import math

from roofline.render import _chart, _style
from roofline.render._chart import chart_points, place_labels, point_label  # noqa: F401  (their former home)
from roofline.render._plotly import roofline_plotly  # noqa: F401  (its former home)
from roofline._util import _format, _output


# ---- the SVG -----------------------------------------------------------------------------------------------------
def roofline_svg(report, by: str = "op", depth: int | None = None, top: int = 10, width: int = 820,
                 height: int = 440) -> str:
    """The roofline chart of ``report`` as an SVG element (see the module's docstring). ValueError when the report
    has no ceilings."""
    return draw(_chart.chart(report, by, depth), top, width, height)


def draw(model: _chart.Chart, top: int = 10, width: int = 820, height: int = 440) -> str:
    """The chart ``model`` as an SVG element, its ``top`` points by time labelled."""
    (x_lo, x_hi), (y_lo, y_hi) = model.x_range, model.y_range
    pts = model.points
    ml, mr, mt, mb = 70, 240, 30, 46
    pw, ph = width - ml - mr, height - mt - mb
    lx0, lx1, ly0, ly1 = math.log10(x_lo), math.log10(x_hi), math.log10(y_lo), math.log10(y_hi)

    def X(x):
        return ml + (math.log10(x) - lx0) / (lx1 - lx0) * pw

    def Y(y):
        return mt + (ly1 - math.log10(y)) / (ly1 - ly0) * ph

    e = html.escape
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11" class="rl-roofline">',
           f'<text x="{ml}" y="18" font-size="13" font-weight="bold">{e(model.title)}</text>',
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
    out.append(f'<text x="{ml + pw / 2}" y="{height - 8}" text-anchor="middle">{e(model.x_label)}</text>')
    out.append(f'<text transform="translate(14,{mt + ph / 2}) rotate(-90)" text-anchor="middle">'
               f'{e(model.y_label)}</text>')
    out.append(f'<clipPath id="rl-clip"><rect x="{ml}" y="{mt}" width="{pw}" height="{ph}"/></clipPath>'
               '<g clip-path="url(#rl-clip)">')
    legend = []
    for roof in model.bandwidths + model.peaks:
        peak = roof.kind == "peak"
        dash = "" if roof.solid else (' stroke-dasharray="6,3"' if peak else ' stroke-dasharray="2,3"')
        col = "#444" if peak else "#888"
        what = f"peak {roof.name}" if peak else f"{roof.name} bandwidth"
        out.append(f'<line x1="{X(roof.x[0]):.1f}" y1="{Y(roof.y[0]):.1f}" x2="{X(roof.x[1]):.1f}" '
                   f'y2="{Y(roof.y[1]):.1f}" stroke="{col}" stroke-width="{1.5 if peak else 1.2}"{dash}>'
                   f'<title>{e(what)} {e(_format.fmt(roof.value, "FLOP/s" if peak else "B/s"))}</title></line>')
        legend.append((roof.label, col, dash))
    out.append("</g>")
    # points, largest first so small ones stay on top
    px = [(X(p.x), Y(p.y), 3.0 + 14.0 * math.sqrt(p.share)) for p in pts]
    for i in sorted(range(len(pts)), key=lambda i: -px[i][2]):
        p = pts[i]
        x, y, r = px[i]
        out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" fill="{p.color}" fill-opacity="0.7" stroke="#222" '
                   f'stroke-width="0.6" class="rl-point"><title>{e(p.tooltip)}'
                   '</title></circle>')
    placed = _chart.place_labels(px, [(i, pts[i].label) for i in model.by_time[:top]], 10.0,
                                 (ml, mt, ml + pw, mt + ph))
    for i, (x, y, _box) in placed.items():
        out.append(f'<text x="{x:.1f}" y="{y:.1f}" font-size="10" class="rl-label">{e(pts[i].label)}</text>')
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
