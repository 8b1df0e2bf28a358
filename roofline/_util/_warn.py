"""Warnings that point at the user's line, not at this package's.

Every warning the package gives goes through :func:`warn`: the file and line ``warnings`` reports (and the
``__warningregistry__`` that "once per location" filters use) are those of the first frame outside this package
and outside the frameworks that call it on the user's behalf (torch's dispatch and module machinery, the trainers
whose callbacks it provides, ``contextlib``'s ``with`` plumbing). A user reading
``train.py:42: RuntimeWarning: ...`` sees the line of their own that led to it.

Python >= 3.12 does the walk itself (``warnings.warn(..., skip_file_prefixes=...)``); on 3.10 and 3.11 the stack
level is counted here by walking the frames.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep

# Packages whose frames stand between the user's line and this package: skipped when they are already imported
# (nothing is imported to find them).
_FRAMEWORKS = ("torch", "transformers", "accelerate", "lightning", "pytorch_lightning")


def _prefixes() -> tuple[str, ...]:
    found = [_PACKAGE_DIR, os.path.abspath(contextlib.__file__)]
    for name in _FRAMEWORKS:
        mod = sys.modules.get(name)
        path = getattr(mod, "__file__", None) if mod is not None else None
        if path:
            found.append(os.path.dirname(os.path.abspath(path)) + os.sep)
    return tuple(found)


def _external(filename: str, prefixes: tuple[str, ...]) -> bool:
    if filename.startswith("<frozen "):  # importlib's bootstrap: never the user's
        return False
    return not os.path.abspath(filename).startswith(prefixes) if not filename.startswith("<") else True


def stacklevel(prefixes: tuple[str, ...] | None = None) -> int:
    """The ``stacklevel`` that names, for a ``warnings.warn`` called by this function's caller, the first frame
    outside ``prefixes`` (default: this package and the frameworks above); the outermost frame when every frame is
    inside them."""
    prefixes = _prefixes() if prefixes is None else prefixes
    frame = sys._getframe(1)  # the frame that calls warnings.warn: level 1
    level = 1
    while frame.f_back is not None and not _external(frame.f_code.co_filename, prefixes):
        frame = frame.f_back
        level += 1
    return level


def warn(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn(message, category)`` attributed to the user's frame (see the module's docstring)."""
    prefixes = _prefixes()
    if sys.version_info >= (3, 12):
        warnings.warn(message, category, stacklevel=2, skip_file_prefixes=prefixes)
    else:
        warnings.warn(message, category, stacklevel=stacklevel(prefixes))
