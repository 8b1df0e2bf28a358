"""The on-disk cache of measured ceilings: one file per device fingerprint and package version, in a private folder."""

from __future__ import annotations

import os
import re

from roofline._hardware._ceilings_model import Ceilings, _version
from roofline._util import _output
from roofline._util._cachedir import ensure_private_dir, untrusted_reason
from roofline._util._warn import warn


def cache_dir() -> str:
    """Directory of the ceilings cache: $ROOFLINE_CACHE_DIR, else $XDG_CACHE_HOME/roofline, else
    ~/.cache/roofline."""
    override = os.environ.get("ROOFLINE_CACHE_DIR")
    if override:
        return override
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "roofline")


def _cache_path(kind: str, fingerprint: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", fingerprint)
    return os.path.join(cache_dir(), f"ceilings-{kind}-{safe}.json")


_MAX_CACHE_BYTES = 16 << 20  # a ceilings file is tens of KiB; anything far larger is not one


def _load_cache(path: str, fingerprint: str, need_thorough: bool) -> Ceilings | None:
    """The cached Ceilings at `path`, or None: missing (silently), or unusable (with a warning). Never raises. A
    directory that is not the user's own or that others can write is not read (the write that follows says why):
    it could feed forged ceilings into every report."""
    if untrusted_reason(os.path.dirname(path) or ".") is not None:
        return None
    try:
        with open(path, "rb") as f:
            data = f.read(_MAX_CACHE_BYTES + 1)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        warn(f"cannot read the ceilings cache {path} ({e}); re-measuring", RuntimeWarning)
        return None
    try:
        if len(data) > _MAX_CACHE_BYTES:
            raise ValueError(f"it is larger than {_MAX_CACHE_BYTES} bytes")
        c = Ceilings.from_json(data)
        if c.fingerprint != fingerprint:
            raise ValueError(f"it describes another device (fingerprint {c.fingerprint}, expected {fingerprint})")
        if c.version != _version():
            raise ValueError(f"it was measured by roofline {c.version!r}, this is {_version()!r}")
        if c.duration_s is None:
            raise ValueError("it holds no measurement")
        if c.device == "cpu" and "lowp_kernels" not in c.info:
            raise ValueError("it predates the low-precision peaks")
        if c.info.get("busy"):
            raise ValueError("it was measured under contention")
    except ValueError as e:
        warn(f"ignoring the ceilings cache {path}: {e}; re-measuring", RuntimeWarning)
        return None
    if need_thorough and c.quick:
        return None  # a quick result does not answer a thorough request: measure again, silently
    return c


def _store_cache(path: str, c: Ceilings) -> bool:
    """Write `c` to `path` atomically (roofline._util._output.write: a temporary file in the same directory, fsync-ed
    and renamed), in a directory only this user can write. Never raises: a cache that cannot be written costs a
    re-measurement next time, with a warning now. True when written."""
    directory = os.path.dirname(path) or "."
    reason = ensure_private_dir(directory)
    if reason is not None:
        warn(f"cannot write the ceilings cache {path} ({reason})", RuntimeWarning)
        return False
    try:
        _output.write(path, c.to_json(), where="the ceilings cache", newline="\n")
        return True
    except (OSError, ValueError) as e:  # ValueError: a result that is not valid JSON (NaN) is not cached
        warn(f"cannot write the ceilings cache {path} ({e})", RuntimeWarning)
        return False
