"""Trust checks for the on-disk caches (measured ceilings, compiled cubins).

A cache directory is used only when it is the current user's own and nobody else can write to it: a cache that
another user can write could feed forged ceilings into every report, or a forged cubin into the CUDA driver. A
directory that fails the check is not an error: the caller measures or compiles afresh and does not cache.
"""

from __future__ import annotations

import os
import stat

__all__ = ["ensure_private_dir", "untrusted_reason"]


def untrusted_reason(path: str | os.PathLike) -> str | None:
    """Why ``path`` (an existing directory) must not be used as a cache, or None when it may.

    The directory must not be a symlink, must be owned by the effective user, and must not be writable by its group
    or by others. On platforms without ``os.geteuid`` only the symlink and type checks apply.
    """
    path = os.fspath(path)
    try:
        st = os.lstat(path)
    except OSError as e:
        return f"cannot stat {path}: {e.strerror}"
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    geteuid = getattr(os, "geteuid", None)
    if geteuid is not None:
        if st.st_uid != geteuid():
            return f"{path} is owned by uid {st.st_uid}, not by the current user (uid {geteuid()})"
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return f"{path} is writable by its group or by others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def ensure_private_dir(path: str | os.PathLike) -> str | None:
    """Create ``path`` (mode 0700, parents as needed) if missing; return None when it may be used as a cache, else
    the reason it may not (see :func:`untrusted_reason`)."""
    path = os.fspath(path)
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError as e:
        return f"cannot create {path}: {e.strerror}"
    return untrusted_reason(path)
