"""Numbers and durations as the reports print them: one formatter for each, shared by the text, HTML, charts, hints
and the command line. Imports nothing of roofline."""

from __future__ import annotations

import math


def fmt(n: float, unit: str = "", binary: bool = False) -> str:
    """``n`` with a metric prefix and two decimals (``"1.50 GFLOP/s"``); plain below a thousand. ``binary``:
    powers of 1024 (``"16.00 KiB"``), for sizes in bytes. The one number formatter of the package."""
    prefixes = ((1 << 50, "Pi"), (1 << 40, "Ti"), (1 << 30, "Gi"), (1 << 20, "Mi"), (1 << 10, "Ki")) if binary else \
        ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K"))
    for scale, suffix in prefixes:
        if abs(n) >= scale:
            return f"{n / scale:.2f} {suffix}{unit}"
    return f"{n:.0f} {unit}".rstrip()


def dur(t) -> str:
    """Seconds with a readable unit (``"193.1 ms"``, ``"6.20 us"``, ``"1.20 s"``), "-" when missing."""
    if t is None or not math.isfinite(t):
        return "-"
    a = abs(t)
    if a >= 1:
        return f"{t:.2f} s"
    if a >= 1e-3:
        return f"{t * 1e3:.1f} ms"
    if a == 0:
        return "0 s"
    if a >= 1e-6:
        return f"{t * 1e6:.1f} us" if a >= 1e-5 else f"{t * 1e6:.2f} us"
    return f"{t * 1e9:.1f} ns" if a >= 1e-8 else f"{t * 1e9:.2f} ns"


def ms(t) -> str:
    """Seconds as milliseconds, "-" when missing."""
    return "-" if t is None or not math.isfinite(t) else f"{t * 1e3:.3f}"


def pct(x) -> str:
    """A fraction as a percentage, "-" when missing."""
    return "-" if x is None or not math.isfinite(x) else f"{x * 100:.1f}%"


def cell(v) -> str:
    """A table cell: floats to four significant digits, "-" when not finite."""
    if isinstance(v, float):
        return "-" if not math.isfinite(v) else f"{v:.4g}"
    return str(v)


# ---- op names ----------------------------------------------------------------------------------------------------
def op_label(name: str) -> str:
    """An op as tables, charts and traces label it: ``aten.addmm.default`` -> ``addmm``; another overload keeps its
    name (``aten.add.Tensor`` -> ``add.Tensor``); another namespace is kept (``mylib.op.default`` -> ``mylib.op``)."""
    n = name[5:] if name.startswith("aten.") else name
    return n[:-8] if n.endswith(".default") else n


def op_name(name: str) -> str:
    """The operator's own name, without namespace and overload: ``aten.add_.Tensor`` -> ``add_``."""
    parts = name.split(".")
    return parts[1] if len(parts) >= 2 else name


def op_base(name: str) -> str:
    """:func:`op_name` without the in-place underscore (``aten.add_.Tensor`` -> ``add``): what a compiled kernel's
    name says it computes."""
    n = op_name(name)
    return n[:-1] if n.endswith("_") and not n.endswith("__") else n
