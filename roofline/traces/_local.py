"""A stand-in for the trace reader (``_read``) while it is absent from the package: the whole file read with
``json`` (no streaming, no bound on memory). ``_load`` imports ``_read`` first."""

from __future__ import annotations

import gzip
import json
import os


class TraceError(ValueError):
    """A trace file that cannot be read, naming the file and the problem."""


class RawTrace:
    """The header and events of one trace read whole."""

    def __init__(self, doc: dict, path: str):
        self._doc, self.path = doc, path
        self.header = {k: v for k, v in doc.items() if k != "traceEvents"}

    def events(self):
        ev = self._doc.get("traceEvents")
        if not isinstance(ev, list):
            raise TraceError(f"{self.path}: no traceEvents list")
        yield from ev


def open_trace(path) -> RawTrace:
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            head = f.read(2)
        opener = gzip.open if head == b"\x1f\x8b" else open
        with opener(path, "rb") as f:
            doc = json.loads(f.read())
    except (OSError, EOFError, ValueError) as e:
        raise TraceError(f"{path}: not a readable JSON trace ({e})") from None
    if not isinstance(doc, dict):
        raise TraceError(f"{path}: the top level is not an object")
    return RawTrace(doc, path)
