"""The roofline chart of a report drawn with matplotlib (an optional dependency): the chart model of
:mod:`roofline.render._chart` on matplotlib axes."""

from __future__ import annotations

import io
import math
import os
import sys

import numpy as np

from roofline.render import _chart, _style
from roofline._util import _output


def plot_report(report, path=None, ax=None, by: str = "op", top: int = 8, title: str | None = None,
                depth: int | None = None):
    """Draw ``report`` on the roofline: log-log axes (x: arithmetic intensity in FLOP/byte, y: FLOP/s), one
    horizontal roof per (unit, dtype) the run uses, one sloped line per memory level, and one point per op
    (``by="op"``), per op and input shapes (``by="op_shape"``, reports with shape signatures) or per module of one
    level of the module tree (``by="module"``, ``depth`` levels deep; default: the root's children) or per kernel
    ``torch.compile`` generated (``by="kernel"``: its fused ops' FLOPs over its buffers' bytes), with FLOPs,
    placed at its intensity and its achieved rate (its attainable rate when the run was not timed), sized by its
    share of time and coloured by its bound. The ``top`` points by time are labelled where a label fits without
    overlapping another label or a point. Ops without FLOPs (copies, views) cannot sit on a FLOP/s axis and are left
    out; the title says how many. Saves to ``path`` when given: the format is the extension's (``.png``, ``.svg``,
    ``.pdf``, any format matplotlib writes; without one, ``savefig.format`` is used and its extension added, as
    matplotlib does). ``path`` is a file name (str, ``os.PathLike`` or bytes), written as ``Report.to_json``
    writes one (a regular file replaced atomically, a symbolic link written through, a FIFO or device written
    into), or a binary file object, handed to matplotlib; anything else is a TypeError before anything is drawn.

    Returns the matplotlib Figure. Without ``path`` or ``ax`` the figure is made with pyplot (so ``plt.show()``
    shows it in a script); in a notebook it is drawn once, as the cell's result, whether or not the cell also
    flushes pyplot's figures."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError("plot needs matplotlib: pip install matplotlib") from None

    if path is not None and not hasattr(path, "write"):
        path = _output.check_path(path, "plot")
    if report.ceilings is None:
        raise ValueError("this report has no ceilings to draw (counted on meta?): plot r.project('<device>') instead")
    if depth is not None and by != "module":
        raise ValueError(f"depth applies to by='module' only, not by={by!r}")
    model = _chart.chart(report, by, depth, title)
    if ax is not None:
        fig = ax.figure
    elif path is not None:  # a file only: a bare Figure, so the session's backend (a notebook's) is left alone
        fig = Figure(figsize=(9, 6))
        ax = fig.subplots()
    else:
        import matplotlib.pyplot as plt

        cls = _notebook_figure()
        fig = plt.figure(figsize=(9, 6), FigureClass=cls)
        ax = fig.subplots()
        _register_display(cls)
    draw(model, fig, ax, top)
    if path is not None:
        _save(fig, path)
    return fig


def draw(model: _chart.Chart, fig, ax, top: int = 8) -> None:
    """Draw the chart ``model`` on the matplotlib axes ``ax`` of ``fig``, labelling its ``top`` points by time."""
    from matplotlib.lines import Line2D

    ax.set_xscale("log")
    ax.set_yscale("log")
    for roof in model.peaks + model.bandwidths:
        peak = roof.kind == "peak"
        ax.plot(list(roof.x), list(roof.y), ls="-" if roof.solid else ("--" if peak else ":"),
                lw=1.5 if peak else 1.2, color="#444" if peak else "#888", label=roof.label, gid=roof.gid)
    ax.set_xlim(*model.x_range)
    ax.set_ylim(*model.y_range)
    pts = model.points
    if pts:
        x = np.array([p.x for p in pts])
        y = [p.y for p in pts]
        sizes = 20 + 600 * np.array([p.share for p in pts])
        ax.scatter(x, y, s=sizes, c=[p.color for p in pts], alpha=0.75, edgecolors="k", linewidths=0.5,
                   zorder=3, gid="ops")
        _label(fig, ax, model, x, y, sizes, top)
    ax.set_xlabel(model.x_label)
    ax.set_ylabel(model.y_label)
    ax.set_title(model.title)
    handles, labels = ax.get_legend_handles_labels()
    for b in ("compute", "memory", "mixed"):
        handles.append(Line2D([], [], marker="o", ls="", color=_style.bound_color(b)))
        labels.append(f"{b}-bound")
    # outside the axes, so that it hides no point (saved with bbox_inches="tight", as notebooks show figures)
    ax.legend(handles, labels, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    ax.grid(True, which="major", alpha=0.3)


def _save(fig, path) -> None:
    """``fig`` to ``path``: a file object as matplotlib writes it, a file name through the package's writer (the
    chart is drawn in memory first, so a failed drawing leaves an old file as it was)."""
    if hasattr(path, "write"):
        fig.savefig(path, dpi=120, bbox_inches="tight")
        return


    fmt = os.path.splitext(path)[1][1:].lower()
    if not fmt:  # as matplotlib names a file without an extension
        fmt = fig.canvas.get_default_filetype()
        path = path.rstrip(".") + "." + fmt
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=120, bbox_inches="tight")
    _output.write(path, buf.getvalue(), where="plot")


def _label(fig, ax, model, x, y, sizes, top):
    """Label the ``top`` points by time where a label fits (see :func:`roofline.render._chart.place_labels`)."""
    fontsize = 8
    dpi = fig.dpi
    font_px = fontsize * dpi / 72.0
    trans = ax.transData
    height = fig.bbox.height
    disp = [trans.transform((xi, yi)) for xi, yi in zip(x.tolist(), y)]
    # pixels, y down; marker radius from its area in points^2
    px = [(dx, height - dy, math.sqrt(s / math.pi) * dpi / 72.0) for (dx, dy), s in zip(disp, sizes.tolist())]
    bbox = ax.bbox
    bounds = (bbox.x0, height - bbox.y1, bbox.x1, height - bbox.y0)
    names = [p.label for p in model.points]
    placed = _chart.place_labels(px, [(i, names[i]) for i in model.by_time[:top]], font_px, bounds)
    inv = ax.transData.inverted()
    for i, (tx, ty, _box) in placed.items():
        pos = inv.transform((tx, height - ty))
        ax.annotate(names[i], (x[i], y[i]), xytext=tuple(pos), textcoords="data", fontsize=fontsize,
                    ha="left", va="baseline", gid=f"label:{names[i]}")


_FIGURE_CLASS = None


def _notebook_figure():
    """The Figure class :func:`plot_report` makes with pyplot (made once; matplotlib is imported lazily)."""
    global _FIGURE_CLASS
    if _FIGURE_CLASS is None:
        from matplotlib.figure import Figure

        class NotebookFigure(Figure):
            """A pyplot figure that a notebook draws once: when IPython displays it as a cell's result it is
            closed in pyplot first, so the inline backend's end-of-cell flush does not draw it again (and when
            the result is not displayed, ``r.plot();``, the flush draws it)."""

        _FIGURE_CLASS = NotebookFigure
    return _FIGURE_CLASS


def _register_display(cls):
    """In IPython, display ``cls`` with the printers registered for Figure, each closing the figure first."""
    if "IPython" not in sys.modules:
        return
    from IPython import get_ipython
    from matplotlib.figure import Figure

    ip = get_ipython()
    if ip is None:
        return
    for f in ip.display_formatter.formatters.values():
        try:
            printer = f.lookup_by_type(Figure)
        except KeyError:
            continue
        f.for_type(cls, _closing(printer))


def _closing(printer):
    def show(fig, *args, **kwargs):
        import matplotlib.pyplot as plt

        plt.close(fig)
        return printer(fig, *args, **kwargs)

    return show
