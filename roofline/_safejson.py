"""JSON parsing for documents read back from disk (reports, the ceilings cache), with a nesting limit.

``json.loads`` recurses once per nesting level, so a document of a few hundred thousand ``[`` raises RecursionError
(or, in a deep call stack, worse). The documents this package writes nest a handful of levels; :func:`loads` counts
the nesting before parsing and refuses anything deeper than ``max_depth`` with a ValueError, so that malformed
input of any shape gives one kind of error.
"""

from __future__ import annotations

import json
import re

__all__ = ["loads", "MAX_DEPTH"]

MAX_DEPTH = 64

# A JSON string (escapes included) or one bracket. Strings are skipped whole, so brackets inside them do not count.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def nesting_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in ``text`` (0 for a scalar), stopping early at MAX_DEPTH + 1."""
    depth = deepest = 0
    for m in _TOKEN.finditer(text):
        c = m.group()[0]
        if c in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_DEPTH:
                    break
        elif c in "]}":
            depth -= 1
    return deepest


def loads(text, what: str, max_depth: int = MAX_DEPTH):
    """Parse ``text`` (str or UTF-8 bytes) as JSON; ValueError starting with ``what`` when it is not valid JSON, is
    nested deeper than ``max_depth`` levels, or holds an integer too long to convert."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"{what}: not UTF-8 text ({e})") from None
    if not isinstance(text, str):
        raise TypeError(f"{what}: expected JSON text (str or bytes), got {type(text).__name__}")
    depth = nesting_depth(text)
    if depth > max_depth:
        raise ValueError(f"{what}: nested more than {max_depth} levels deep")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{what}: invalid JSON ({e})") from None
    except (ValueError, RecursionError) as e:  # an integer beyond int_max_str_digits; a stack already deep
        raise ValueError(f"{what}: {e}") from None
