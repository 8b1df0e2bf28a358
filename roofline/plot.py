"""The matplotlib roofline chart, at its documented path: :func:`plot_report` is
:func:`roofline.render._matplotlib.plot_report`."""

from roofline.render._matplotlib import plot_report

__all__ = ["plot_report"]
