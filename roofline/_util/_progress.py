"""Progress of long work (the ceilings measurement, trace loading, the bench sweeps): a bar on a terminal or in a
Jupyter notebook, nothing when the output is not one (a log file, a pipe, CI), so logs never fill with redraws.

:func:`auto` gives a :class:`Bar` (a callable taking status lines, as the measuring functions' ``progress=``
argument does) or None; :func:`track` wraps an iterable with one. A status line that ends in ``(i/n)`` moves the
bar to ``i`` of ``n``. ``ROOFLINE_PROGRESS`` set to ``0`` turns the bar off, ``1`` turns it on even when the output
is not a terminal.
"""

from __future__ import annotations

import os
import re
import sys
import time
from typing import TextIO

_STEP = re.compile(r"\((\d+)/(\d+)\)\s*$")
WIDTH = 24


def interactive(stream: TextIO) -> bool:
    """Whether ``stream`` is shown to a person as it is written: a terminal, or a Jupyter kernel's output."""
    setting = os.environ.get("ROOFLINE_PROGRESS", "").strip()
    if setting in ("0", "1"):
        return setting == "1"
    try:
        if stream.isatty():
            return True
    except (AttributeError, ValueError):  # closed or not a file
        return False
    # a notebook: IPython's kernel replaces sys.stdout / sys.stderr by its own streams, which are no terminals
    return type(stream).__module__.startswith("ipykernel")


class Bar:
    """A one-line progress bar redrawn in place (``\\r``) on ``stream``: ``title [#####.....] i/n status, 1.2 s``."""

    def __init__(self, title: str, stream: TextIO) -> None:
        self.title, self.stream = title, stream
        self.start = time.perf_counter()
        self.done = self.total = 0
        self.width = 0
        self.message = ""
        self.closed = False

    def __call__(self, message: str) -> None:
        m = _STEP.search(message)
        if m:
            self.done, self.total = int(m.group(1)), max(int(m.group(2)), 1)
            message = message[:m.start()].rstrip()
        self.message = message
        filled = WIDTH * min(self.done, self.total) // self.total if self.total else 0
        bar = "#" * filled + "." * (WIDTH - filled)
        count = f" {self.done}/{self.total}" if self.total else ""
        line = f"{self.title} [{bar}]{count} {message[:60]}, {time.perf_counter() - self.start:.1f} s"
        self._draw(line)

    def _draw(self, line: str) -> None:
        pad = max(self.width - len(line), 0)
        self.width = len(line)
        try:
            self.stream.write("\r" + line + " " * pad)
            self.stream.flush()
        except (OSError, ValueError):
            self.closed = True

    def above(self, text: str, stream: TextIO | None = None) -> None:
        """Print ``text`` (a line of results; default stream ``sys.stdout``) above the bar: the bar's line is
        cleared first and drawn again after it, so that the results are never written over a half-drawn bar when
        both go to the same terminal."""
        stream = sys.stdout if stream is None else stream
        if not self.closed:
            try:
                self.stream.write("\r" + " " * self.width + "\r")
                self.stream.flush()
            except (OSError, ValueError):
                self.closed = True
        print(text, file=stream, flush=True)
        if not self.closed and self.width:
            self.width = 0
            self(self.message + (f" ({self.done}/{self.total})" if self.total else ""))

    def close(self, message: str = "done") -> None:
        """The finished bar, then a new line."""
        if self.closed:
            return
        self.done = self.total = max(self.total, 1)
        self._draw(f"{self.title} [{'#' * WIDTH}] {message} in {time.perf_counter() - self.start:.1f} s")
        try:
            self.stream.write("\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass
        self.closed = True


def auto(title: str, stream: TextIO | None = None) -> Bar | None:
    """A :class:`Bar` on ``stream`` (default: ``sys.stderr``) when it is :func:`interactive`, else None."""
    stream = sys.stderr if stream is None else stream
    return Bar(title, stream) if interactive(stream) else None


def track(items, title: str, total: int | None = None, label=None, stream: TextIO | None = None):
    """Yield the elements of ``items`` with a :class:`Bar` (from :func:`auto`) moving over them: ``total`` (default
    ``len(items)``) steps, each labelled ``label(item)`` (default ``str(item)``) once it has been handed out. Nothing
    is drawn where :func:`auto` gives no bar. The bar is closed when the iteration ends, also early."""
    bar = auto(title, stream)
    if bar is None:
        yield from items
        return
    n = len(items) if total is None else total
    try:
        for i, item in enumerate(items):
            bar(f"{(label or str)(item)} ({i}/{n})")
            yield item
        bar.close()
    finally:
        if not bar.closed:
            bar.close("stopped")
