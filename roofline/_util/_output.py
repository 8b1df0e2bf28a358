"""Every file the package writes for its user goes through :func:`write`: reports (``Report.to_json``,
``to_csv``, ``to_chrome_trace``), charts (``Report.plot``, ``Chart.save``), ``roofline merge -o`` and
``roofline profile --json`` / ``--plot``. The command line checks its output paths up front with
:func:`check_writable`, which never creates, truncates or opens the file itself.

What a path means
-----------------
``path`` is a ``str``, an ``os.PathLike`` or ``bytes`` (decoded with :func:`os.fsdecode`). Anything else (an
``int``, which ``open`` would take as a file descriptor to write to and close; a ``bool``, a ``float``) is a
TypeError naming the method and the argument; an empty name is a ValueError. ``"-"`` is a file named ``-``: only
the command line reads it as stdout.

* **A regular file, or a name that does not exist yet**: the data go to a temporary file in the same folder
  (``.NAME.XXXXXXXX.tmp``, NAME cut to 50 characters), which is ``fsync``-ed and then renamed over the target
  with :func:`os.replace` (the folder is ``fsync``-ed after; a file system without ``fsync``, EINVAL or ENOTSUP,
  is not an error). A reader sees the old file or the new one, never a part. If anything fails (a full disk, a
  file-size limit, Ctrl-C) the temporary file is removed and the old file is left as it was. A replaced file keeps
  its permission bits (and, where the process may set them, its owner and group); a new one gets ``0o666`` less
  the umask, as ``open`` would give it. A file the process may not write (read-only) is refused with
  PermissionError, as ``open`` would refuse it, though the rename could replace it. The folder must be writable
  (the temporary file is made there); another hard link to the old file keeps the old content.
* **A symbolic link** is written through: the file at the end of the chain is replaced as above and the link
  stays a link. A dangling link creates the file it points to (its folder must exist), as ``open(link, "w")``
  does. A loop is an OSError (``ELOOP``).
* **A FIFO, a character or block device or a socket** (``/dev/null``, a terminal, a named pipe) cannot be
  renamed over: the data are written into it directly (opened write-only, not created; a FIFO blocks until a
  reader opens it, as it does for any writer). ``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N`` and
  ``/proc/self/fd/N`` are written to this process's descriptor ``N`` itself, after flushing ``sys.stdout`` /
  ``sys.stderr`` when they use it, and the descriptor stays open: output redirected to a file is appended where
  the process's own writes are, not truncated. Another process's ``/proc/PID/fd/N`` is opened through the link.
* **A folder** is an IsADirectoryError.

Text is encoded as UTF-8; ``newline`` translates ``"\\n"`` as :func:`open` does (``None``: ``os.linesep``,
``""``: untranslated).
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import secrets
import stat
import sys
from typing import NamedTuple

_MAX_LINKS = 40  # symbolic links followed before ELOOP, as Linux does
_FD_DIR = re.compile(r"/proc/(\d+)(?:/task/\d+)?/fd")


def check_path(path, where: str, hint: str = "") -> str:
    """``path`` as a ``str`` (``os.fspath``; ``bytes`` decoded with ``os.fsdecode``). TypeError naming ``where``
    (e.g. ``"Report.to_json"``) for anything that is not a path (``hint`` is added to the message); ValueError
    for an empty name."""
    if isinstance(path, (str, bytes, os.PathLike)):
        try:
            p = os.fsdecode(path)
        except TypeError:  # a PathLike whose __fspath__ returns something else
            p = None
        if p is not None:
            if not p:
                raise ValueError(f"{where}: the file name is empty")
            return p
    raise TypeError(f"{where}: path must be a file name (str or os.PathLike), not {type(path).__name__} "
                    f"{path!r}{hint}")


class Target(NamedTuple):
    """Where :func:`write` puts the data: ``kind`` is ``"new"`` (no file yet), ``"file"`` (a regular file to
    replace), ``"stream"`` (a FIFO, device or socket to write into) or ``"fd"`` (this process's descriptor
    ``fd``); ``path`` is the end of the symbolic-link chain; ``st`` its ``lstat`` (None for ``"new"``)."""

    kind: str
    path: str
    st: os.stat_result | None = None
    fd: int | None = None


def _own_fd(link: str) -> int | None:
    """The descriptor number when ``link`` is an entry of this process's ``/proc/<pid>/fd`` folder (also reached
    as ``/proc/self/fd``, ``/dev/fd``), else None."""
    name = os.path.basename(link)
    if not name.isdigit():
        return None
    folder = os.path.realpath(os.path.dirname(link))
    m = _FD_DIR.fullmatch(folder)
    if m is None:
        return None
    if int(m.group(1)) != os.getpid():
        return -1  # another process's descriptor: written through the link, as a stream
    return int(name)


def resolve(path: str, where: str) -> Target:
    """What ``path`` is (see the module docstring), without opening or creating anything. IsADirectoryError for a
    folder, OSError for a link loop or a path that cannot be looked at."""
    p = path
    for _ in range(_MAX_LINKS):
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            return Target("new", p)
        if stat.S_ISLNK(st.st_mode):
            fd = _own_fd(p)
            if fd is not None:
                return Target("fd", p, st, fd) if fd >= 0 else Target("stream", p, st)
            # relative to the link's folder; not normalised, so that ".." after a linked folder means what the
            # kernel makes of it
            p = os.path.join(os.path.dirname(p), os.readlink(p))
            continue
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(f"{where}: {path!r} is a folder; give a file name")
        return Target("file" if stat.S_ISREG(st.st_mode) else "stream", p, st)
    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)


def _encode(data, encoding: str, newline: str | None) -> bytes:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    nl = os.linesep if newline is None else (newline or "\n")
    if nl != "\n":
        data = data.replace("\n", nl)
    return data.encode(encoding)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _temp(folder: str, base: str) -> tuple[int, str]:
    """A new file in ``folder`` for the data that will replace ``base`` there: ``(descriptor, path)``, created
    with mode 0o666 less the umask (as ``open`` creates a file)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = os.path.join(folder, f".{base[:50]}.{secrets.token_hex(4)}.tmp")  # within NAME_MAX in any encoding
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary file name", os.path.join(folder, base))


def _replace(t: Target, data: bytes, shown: str) -> None:
    folder = os.path.dirname(t.path) or "."
    try:
        fd, tmp = _temp(folder, os.path.basename(t.path))
    except OSError as e:
        if e.errno is None:
            raise
        if t.kind == "file" and e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise type(e)(e.errno, f"{e.strerror} (the file is replaced through a temporary file in its folder, "
                          "which must be writable)", shown) from None
        raise type(e)(e.errno, e.strerror, shown) from None
    try:
        if t.st is not None:  # the replaced file's owner and permission bits, where the file system keeps them
            own = os.fstat(fd)
            try:
                if (own.st_uid, own.st_gid) != (t.st.st_uid, t.st.st_gid):
                    os.fchown(fd, t.st.st_uid, t.st.st_gid)
            except (OSError, AttributeError):  # not the owner; no fchown
                pass
            try:
                os.fchmod(fd, stat.S_IMODE(t.st.st_mode))
            except (OSError, AttributeError):  # a file system without permission bits
                pass
        _write_all(fd, data)
        try:
            os.fsync(fd)
        except OSError as e:
            if e.errno not in (errno.EINVAL, errno.ENOTSUP):  # EINVAL, ENOTSUP: a file system without fsync
                raise
        # the descriptor is forgotten before it is closed: an interrupt between the two then leaks it at worst,
        # where the other order would close it twice (EBADF in place of the interrupt, or another thread's file)
        fd, closing = -1, fd
        os.close(closing)
        os.replace(tmp, t.path)
    except BaseException as e:
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError) and e.errno is not None and e.filename in (None, tmp):
            raise type(e)(e.errno, e.strerror, shown) from None
        raise
    try:  # the rename itself, on disk
        dfd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def _stream(t: Target, data: bytes) -> None:
    if t.kind == "fd":
        for f in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                if f is not None and f.fileno() == t.fd:
                    f.flush()
            except (AttributeError, OSError, ValueError):  # replaced by an object without a descriptor, closed
                pass
        _write_all(t.fd, data)
        return
    flags = os.O_WRONLY | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(t.path, flags)
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):  # another process's descriptor of a regular file
            os.ftruncate(fd, 0)
        _write_all(fd, data)
    finally:
        os.close(fd)


def write(path, data, *, where: str, hint: str = "", encoding: str = "utf-8", newline: str | None = None) -> str:
    """Write ``data`` (``str``, encoded with ``encoding``, or bytes) to ``path`` as the module docstring says:
    atomically for a regular file (a temporary file in the same folder, flushed, fsync-ed, renamed over it),
    through a symbolic link, directly into a FIFO or device. Returns the path as a str. ``where`` (the method, e.g.
    ``"Report.to_json"``) names the caller in the errors: TypeError for a non-path, ValueError for an empty name,
    IsADirectoryError for a folder, PermissionError for a read-only file, OSError from the write itself."""
    shown = check_path(path, where, hint)
    blob = _encode(data, encoding, newline)
    t = resolve(shown, where)
    if t.kind in ("stream", "fd"):
        _stream(t, blob)
    else:
        if t.kind == "file" and not os.access(t.path, os.W_OK):
            raise PermissionError(errno.EACCES, f"{where}: the file is read-only", shown)
        _replace(t, blob, shown)
    return shown


def check_writable(path, where: str) -> str:
    """Whether :func:`write` could write ``path``, checked without creating, truncating or opening it (so a FIFO's
    reader sees no end of file and a dangling link stays a link): its folder exists and a temporary file can be made
    there (made and removed again), an existing file is writable, a FIFO or device is writable, a descriptor is open
    for writing. ValueError naming ``where`` (e.g. ``"--json"``) and what is wrong; returns the path as a str."""
    shown = check_path(path, where)
    try:
        t = resolve(shown, where)
    except IsADirectoryError:
        raise ValueError(f"{where} {shown!r} is a folder; give a file name") from None
    except OSError as e:
        raise ValueError(f"{where} {shown!r}: not writable ({e.strerror or e})") from None
    if t.kind == "fd":
        try:
            mode = fcntl.fcntl(t.fd, fcntl.F_GETFL) & os.O_ACCMODE
        except OSError as e:
            raise ValueError(f"{where} {shown!r}: descriptor {t.fd} is not open ({e.strerror})") from None
        if mode not in (os.O_WRONLY, os.O_RDWR):
            raise ValueError(f"{where} {shown!r}: descriptor {t.fd} is not open for writing")
        return shown
    if t.kind == "stream":
        if not os.access(t.path, os.W_OK):
            raise ValueError(f"{where} {shown!r}: not writable (permission denied)")
        return shown
    folder = os.path.dirname(t.path) or "."
    if not os.path.isdir(folder):
        raise ValueError(f"{where} {shown!r}: the folder {os.path.abspath(folder)} does not exist")
    if t.kind == "file" and not os.access(t.path, os.W_OK):
        raise ValueError(f"{where} {shown!r}: not writable (the file is read-only)")
    try:  # as the write will: os.access says yes to root everywhere, even under /proc, which takes no file
        fd, tmp = _temp(folder, os.path.basename(t.path))
    except OSError as e:
        raise ValueError(f"{where} {shown!r}: not writable ({e.strerror or e}: no file can be made in "
                         f"{os.path.abspath(folder)})") from None
    os.close(fd)
    try:
        os.unlink(tmp)
    except OSError:
        pass
    return shown
