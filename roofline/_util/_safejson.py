"""JSON parsing for documents read back from disk (reports, merged reports, the ceilings cache), with a nesting
limit, in time linear in the length of the text.

``json.loads`` recurses once per nesting level, so a document of a few hundred thousand ``[`` raises RecursionError
(or, in a deep call stack, worse). The documents this package writes nest a handful of levels; :func:`loads` counts
the nesting before parsing and refuses anything deeper than ``max_depth`` with a ValueError, so that malformed
input of any shape gives one kind of error.

The count is linear whatever the input: strings are removed by one regular expression that matches at every
``"`` it starts from (a string left open runs to the end of the text), so the scan never restarts inside a
string, and the brackets left are summed by NumPy. (A pattern that can fail on an unterminated string is retried
from every later quote: quadratic, minutes for a few hundred kilobytes of ``\\"``.)
"""

from __future__ import annotations

import gc
import json
import re

import numpy as np

__all__ = ["loads", "nesting_depth", "MAX_DEPTH"]

MAX_DEPTH = 64

# A JSON string, escapes included, or the rest of the text when the string is never closed (an unterminated string,
# or one ending in a lone backslash). Unambiguous: each character is consumed one way, so a match never backtracks.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
_OPEN, _CLOSE = (ord("["), ord("{")), (ord("]"), ord("}"))


def nesting_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in ``text`` (0 for a scalar); brackets inside strings do not
    count. Linear in ``len(text)``."""
    bare = _STRING.sub("", text)
    # brackets are ASCII, and no byte of a multi-byte UTF-8 sequence is: the bytes hold the same brackets
    b = np.frombuffer(bare.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    if not len(b):
        return 0
    step = np.zeros(len(b), dtype=np.int8)
    for c in _OPEN:
        step[b == c] = 1
    for c in _CLOSE:
        step[b == c] = -1
    return max(int(np.cumsum(step, dtype=np.int32).max()), 0)


def _parse(text: str):
    """``json.loads`` with the cyclic garbage collector paused. Parsing allocates a container per array and object
    and creates no cycle; each burst of allocations triggers a collection that walks every tracked object of the
    process (with torch imported, millions): a megabyte of small nested arrays took 0.5 s with the collector on,
    0.06 s without. It is switched back on, when it was on, however the parse ends."""
    was_on = gc.isenabled()
    if was_on:
        gc.disable()
    try:
        return json.loads(text)
    finally:
        if was_on:
            gc.enable()


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
        return _parse(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{what}: invalid JSON ({e})") from None
    except (ValueError, RecursionError) as e:  # an integer beyond int_max_str_digits; a stack already deep
        raise ValueError(f"{what}: {e}") from None
