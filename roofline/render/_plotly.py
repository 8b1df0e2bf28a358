"""The roofline chart as a plotly Figure (plotly is an optional dependency): the chart model of
:mod:`roofline.render._chart` as plotly traces, each point's hover text the SVG chart's tooltip."""

from __future__ import annotations

from roofline.render import _chart, _style


def roofline_plotly(report, by: str = "op", depth: int | None = None):
    """The roofline chart as a plotly Figure (ImportError naming plotly without it): log axes, the roofs and
    bandwidth lines, and one marker per point whose hover text is the tooltip of
    :func:`roofline.render._chart.tooltip`."""
    try:
        import plotly.graph_objects as go
    except ImportError:
        raise ImportError("roofline_chart(backend='plotly') needs plotly: pip install plotly") from None

    model = _chart.chart(report, by, depth)
    fig = go.Figure()
    for roof in model.bandwidths + model.peaks:
        peak = roof.kind == "peak"
        fig.add_trace(go.Scatter(x=list(roof.x), y=list(roof.y), mode="lines", name=roof.label,
                                 line={"color": "#444" if peak else "#888",
                                       "dash": "solid" if roof.solid else ("dash" if peak else "dot")}))
    pts = model.points
    for bound in ("compute", "memory", "bandwidth", "mixed", "?", "none"):
        sel = [p for p in pts if p.bound == bound]
        if not sel:
            continue
        fig.add_trace(go.Scatter(
            x=[p.x for p in sel], y=[p.y for p in sel], mode="markers", name=f"{bound}-bound",
            marker={"color": _style.bound_color(bound), "opacity": 0.75,
                    "size": [6 + 40 * p.share ** 0.5 for p in sel], "line": {"width": 0.5, "color": "#222"}},
            hovertext=[p.tooltip.replace("\n", "<br>") for p in sel],
            hoverinfo="text"))
    fig.update_layout(title=model.title, template="plotly_white",
                      xaxis={"type": "log", "title": model.x_label}, yaxis={"type": "log", "title": model.y_label})
    return fig
