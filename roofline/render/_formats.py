"""The files a report is saved as, by format name: what :meth:`roofline.report.BaseReport.save` writes.

A format is a name, the file suffixes it claims (``.html``; the longest suffix of a path decides, so
``.trace.json`` is the Chrome trace and ``.json`` the report document) and ``write(report, path)``. The built-in
formats are the report's own writers (the report document, the HTML page, the per-call CSV, the Chrome trace, the
SVG chart, the matplotlib chart as PNG or PDF); a new format is one new module of this folder that calls
:func:`register` when imported (every module of ``roofline/render/`` is imported before the first save), so
neither ``Report`` nor this table changes for it. A report class that has no writer for a format (a merged report
has no per-call rows) refuses it with a TypeError that names the formats it has.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Format:
    """One file format: ``name`` (what ``save(format=)`` takes), ``suffixes`` (lower case, with the dot),
    ``write(report, path)`` (writes the file; an AttributeError for a report class without the writer it calls) and
    ``doc`` (one line for error messages and the docs)."""

    name: str
    suffixes: tuple[str, ...]
    write: Callable
    doc: str


_FORMATS: dict[str, Format] = {}
_LOADED = [False]


def register(name: str, suffixes, write, doc: str = "") -> Format:
    """Add a format. ValueError when the name or one of the suffixes is taken already (by another format), or a
    suffix does not start with a dot; TypeError for a name that is not a str or a ``write`` that is not callable."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"register: name must be a non-empty str, got {name!r}")
    if not callable(write):
        raise TypeError(f"register: write must be callable, got {type(write).__name__}")
    suffixes = tuple(suffixes)
    if not suffixes or not all(isinstance(s, str) and s.startswith(".") and len(s) > 1 for s in suffixes):
        raise ValueError(f"register: suffixes of {name!r} must be strings such as '.html', got {suffixes!r}")
    suffixes = tuple(s.lower() for s in suffixes)
    if name in _FORMATS:
        raise ValueError(f"register: the format {name!r} exists already")
    for f in _FORMATS.values():
        taken = set(f.suffixes) & set(suffixes)
        if taken:
            raise ValueError(f"register: {', '.join(sorted(taken))} is the suffix of the format {f.name!r} already")
    fmt = Format(name, suffixes, write, doc)
    _FORMATS[name] = fmt
    return fmt


def unregister(name: str) -> None:
    """Remove a format (KeyError when there is none of that name)."""
    del _FORMATS[name]


def _load() -> None:
    """Import every module of roofline/render/, so each format that a module registers is known."""
    if _LOADED[0]:
        return
    package = importlib.import_module("roofline.render")
    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"roofline.render.{info.name}")
    _LOADED[0] = True


def formats() -> dict[str, Format]:
    """Every format by name, the built-in ones and those the modules of this folder register."""
    _load()
    return dict(_FORMATS)


def choose(path, format: str | None = None) -> Format:
    """The format named ``format``, else the one whose suffix ends ``path`` (the longest that matches). ValueError
    naming the formats when there is none."""
    known = formats()
    listing = ", ".join(f"{f.name} ({' '.join(f.suffixes)})" for f in known.values())
    if format is not None:
        if not isinstance(format, str):
            raise TypeError(f"save: format must be a str or None, got {type(format).__name__}")
        if format not in known:
            raise ValueError(f"save: unknown format {format!r}; the formats are {listing}")
        return known[format]
    name = os.fsdecode(os.fspath(path)).lower()
    matches = [(len(s), f) for f in known.values() for s in f.suffixes if name.endswith(s)]
    if not matches:
        raise ValueError(f"save: cannot tell the format of {os.fsdecode(os.fspath(path))!r} from its suffix; pass "
                         f"format= (the formats are {listing})")
    return max(matches, key=lambda m: m[0])[1]


def save(report, path, format: str | None = None) -> str:
    """Write ``report`` to ``path`` in its format (see :func:`choose`); returns the format's name."""
    if path is None or isinstance(path, int) or not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"save: path must be a file name (str, bytes or os.PathLike), got {type(path).__name__}")
    fmt = choose(path, format)
    try:
        fmt.write(report, path)
    except AttributeError as e:
        if getattr(e, "obj", None) is not report:
            raise
        have = [f.name for f in formats().values() if _serves(f, report)]
        raise TypeError(f"save: a {type(report).__name__} cannot be saved as {fmt.name}; its formats are "
                        f"{', '.join(have)}") from None
    return fmt.name


def _serves(fmt: Format, report) -> bool:
    return all(hasattr(report, m) for m in getattr(fmt.write, "methods", ()))


def _method(name: str, *args):
    """``write(report, path)`` that calls the report's own writer ``name(path, *args)``."""
    def write(report, path):
        getattr(report, name)(path, *args)

    write.methods = (name,)
    return write


def _svg_chart(report, path):
    report.roofline_chart().save(path)


_svg_chart.methods = ("roofline_chart",)

register("json", (".json",), _method("to_json"), "the report document, which roofline.load reads back")
register("html", (".html", ".htm"), _method("to_html"), "the self-contained HTML page")
register("csv", (".csv",), _method("to_csv"), "one row per op call")
register("chrome-trace", (".trace.json",), _method("to_chrome_trace"), "a trace for Perfetto or chrome://tracing")
register("svg", (".svg",), _svg_chart, "the roofline chart as SVG")
register("png", (".png",), _method("plot"), "the roofline chart drawn by matplotlib")
register("pdf", (".pdf",), _method("plot"), "the roofline chart drawn by matplotlib")
