"""roofline: FLOPs and bytes of every PyTorch op, the machine's ceilings, and where each op sits on the roofline."""

from roofline import _core  # noqa: F401

__version__ = "0.1.0"
