"""Integers at the API's boundary: one rule for what counts as one."""

import operator


def as_index(v):
    """``v`` as an int when it is an integer (anything with ``__index__``, a NumPy integer say; a bool is not a
    count), else None: the caller raises its own error, naming its argument."""
    if isinstance(v, bool):
        return None
    try:
        return operator.index(v)
    except TypeError:
        return None
