"""Integers at the API's boundary: one rule for what counts as one, and one message when something does not.

The rule: an int, or any object with ``__index__`` (a NumPy integer, a 0-d integer tensor); never a bool (``True``
is not a count, though Python calls it an int), a str (``"3"``) or a float (``3.0``: a count is never rounded).
Every public argument that is a count (steps, repeats, sizes, ``top``, ``depth``...) goes through :func:`count`:
the wrong type is a TypeError, the wrong value a ValueError, both naming the function and the argument in one
shape::

    schedule: active must be an int >= 1, got '3' (str)
    schedule: active must be an int >= 1, got 0
"""

from __future__ import annotations

import operator

__all__ = ["as_index", "count"]


def as_index(v):
    """``v`` as an int when it is an integer by the rule above, else None."""
    if isinstance(v, bool) or (type(v).__module__ == "numpy" and type(v).__name__ in ("bool", "bool_")):
        return None  # nor is NumPy's bool
    try:
        return operator.index(v)
    except TypeError:
        return None


def _short(v) -> str:
    """``repr(v)``, cut to 60 characters (a huge int has hundreds of digits)."""
    try:
        r = repr(v)
    except ValueError:  # an int beyond sys.get_int_max_str_digits()
        return f"an int of {v.bit_length()} bits"
    return r if len(r) <= 60 else r[:57] + "..."


def wanted(lo: int | None = 0, hi: int | None = None, none: bool = False) -> str:
    """What :func:`count` asks for, in words: ``an int >= 1``, ``an int in [0, 255] or None``."""
    if lo is not None and hi is not None:
        text = f"an int in [{lo}, {hi}]"
    elif hi is not None:
        text = f"an int <= {hi}"
    else:
        text = "an int" if lo is None else f"an int >= {lo}"
    return text + (" or None" if none else "")


def count(v, name: str, where: str, lo: int | None = 0, hi: int | None = None, none: bool = False):
    """``v`` as an int in ``[lo, hi]`` (either bound None: open), or None when ``v`` is None and ``none``.
    TypeError when ``v`` is not an int by the rule of this module, ValueError when it is out of range; both say
    ``"{where}: {name} must be {what}, got ..."``."""
    if v is None and none:
        return None
    n = as_index(v)
    if n is None:
        raise TypeError(f"{where}: {name} must be {wanted(lo, hi, none)}, got {_short(v)} ({type(v).__name__})")
    if (lo is not None and n < lo) or (hi is not None and n > hi):
        raise ValueError(f"{where}: {name} must be {wanted(lo, hi, none)}, got {_short(n)}")
    return n
