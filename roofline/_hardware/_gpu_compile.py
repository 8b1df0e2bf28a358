"""The benchmark kernels' sources (``cuda/*.cu``), compiled by NVRTC for one architecture, with the cubins cached on
disk under a hash of the source, its headers, the options, the NVRTC version and the architecture; the compile-time
constants of each source (``_DEFINES``), which the work arithmetic of the runners reads.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from roofline import _core
from roofline._hardware._gpu_libs import _ensure_nvrtc
from roofline._util import _output
from roofline._util._cachedir import ensure_private_dir
from roofline._util._warn import warn


# Bump when the kernels' compile options or the cache layout change in a way the key would not notice.
_CACHE_FORMAT = "roofline-cubin-1"


# ---------------------------------------------------------------------------------------------------------------
# Kernel sources, compilation and the cubin cache
# ---------------------------------------------------------------------------------------------------------------


def _kernel_dir() -> Path:
    """Directory of the ``.cu`` files: ``roofline/cuda`` when installed as package data, else the repo's cuda/."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "cuda", package.parent / "cuda"):
        if (candidate / "bandwidth.cu").is_file():
            return candidate
    raise FileNotFoundError(
        f"roofline's CUDA kernel sources were not found (looked in {package / 'cuda'} and {package.parent / 'cuda'}); "
        "the installation is incomplete"
    )


def kernel_sources() -> Dict[str, Path]:
    """Every kernel source file, by name without the ``.cu`` suffix."""
    return {p.stem: p for p in sorted(_kernel_dir().glob("*.cu"))}


def kernel_headers() -> Dict[str, str]:
    """The headers the kernel sources include (``cuda/*.cuh``), by include name, with their text: NVRTC gets them
    with the source (it reads no files), and the cubin cache key includes them."""
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(_kernel_dir().glob("*.cuh"))}


def cache_dir() -> Path:
    """Cubin cache directory: ``$ROOFLINE_CACHE_DIR/cubin``, else ``$XDG_CACHE_HOME/roofline/cubin``, else
    ``~/.cache/roofline/cubin``. It is used only when it is the current user's own and nobody else can write to
    it (see :func:`roofline._util._cachedir.ensure_private_dir`): a cubin planted there would run on the GPU."""
    root = os.environ.get("ROOFLINE_CACHE_DIR")
    if root:
        return Path(root) / "cubin"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "roofline" / "cubin"


def _normalize_arch(arch: Any) -> str:
    """``"sm_90"``, ``"sm_90a"``, ``"90"``, ``90`` or ``(9, 0)`` -> ``"sm_90"`` / ``"sm_90a"``."""
    if isinstance(arch, (tuple, list)) and len(arch) == 2:
        return f"sm_{int(arch[0])}{int(arch[1])}"
    text = str(arch).strip().lower()
    match = re.fullmatch(r"(?:sm_|compute_)?(\d{2,3})([af]?)", text)
    if not match:
        raise ValueError(f"not a CUDA architecture: {arch!r} (expected e.g. 'sm_90', 'sm_90a', 90 or (9, 0))")
    return f"sm_{match.group(1)}{match.group(2)}"


def _cache_key(source: str, options: Sequence[str], nvrtc_version: Tuple[int, int], arch: str,
               headers: Optional[Dict[str, str]] = None) -> str:
    """Hash naming a cubin: the source text, every compiler option, NVRTC's version, the architecture, and the
    name and text of every header the compile is given."""
    h = hashlib.sha256()
    parts = [_CACHE_FORMAT, source, "\0".join(options), "%d.%d" % tuple(nvrtc_version), arch]
    for name, text in sorted((headers or {}).items()):
        parts += ["header", name, text]
    for part in parts:
        h.update(part.encode("utf-8"))
        h.update(b"\0\1")
    return h.hexdigest()


def _is_cubin(data: bytes) -> bool:
    """True when ``data`` is a complete CUDA ELF image (the C layer checks the header and that every table,
    section and segment lies inside the data), so a truncated cache file is never handed to the driver."""
    try:
        _core.gpu_check_cubin(data)
    except ValueError:
        return False
    return True


_warned_cache: set = set()


def _usable_cache_dir() -> Optional[Path]:
    """:func:`cache_dir`, created private if missing, or None (with one warning per directory and process) when it
    may not be trusted: not owned by the current user, writable by others, or a symbolic link."""
    directory = cache_dir()
    reason = ensure_private_dir(directory)
    if reason is None:
        return directory
    if str(directory) not in _warned_cache:
        _warned_cache.add(str(directory))
        warn(f"roofline: not using the cubin cache: {reason}; kernels are compiled afresh each time", RuntimeWarning)
    return None


def compile_source(source: str, name: str, arch: Any, options: Sequence[str] = (), cache: bool = True,
                   headers: Optional[Dict[str, str]] = None) -> bytes:
    """Compile CUDA C++ ``source`` with NVRTC into a cubin for ``arch`` and return it.

    ``name`` is the file name used in diagnostics; ``headers`` ({include name: text}) are what the source's
    ``#include "name"`` lines find. The cubin is cached under :func:`cache_dir` keyed by a hash of the source, the
    headers, the options, NVRTC's version and the architecture; a cached file is reused when it is a complete
    CUDA ELF image, and the cache is skipped when its directory is not private to the user. Raises
    :class:`NvrtcError` (with ``.log`` holding the full compile log) when the source does not compile, and
    :class:`CudaUnavailableError` when NVRTC cannot be found.
    """
    arch = _normalize_arch(arch)
    _ensure_nvrtc()
    opts = [f"-arch={arch}", "-std=c++17", *options]
    version = tuple(_core.gpu_nvrtc_version())
    key = _cache_key(source, opts, version, arch, headers)
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(name).stem)
    directory = _usable_cache_dir() if cache else None
    path = directory / f"{stem}-{arch}-{key[:32]}.cubin" if directory is not None else None
    if path is not None:
        try:
            data = path.read_bytes()
            if _is_cubin(data):
                return data
        except OSError:
            pass
    cubin, _log = _core.gpu_compile(source, name, opts, dict(headers) if headers else None)
    if path is not None:
        _write_atomic(path, cubin)
    return cubin


def _write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` (in a directory already checked private) atomically
    (:func:`roofline._util._output.write`); a cache that cannot be written is skipped silently (the cubin is still
    returned to the caller)."""
    try:
        _output.write(path, data, where="the kernel cache")
    except OSError:
        pass


# Compile-time constants of each source. The work arithmetic below reads the same numbers, so the FLOP and byte
# counts always match the loops that ran.
_DEFINES: Dict[str, Dict[str, int]] = {
    "bandwidth": {"RL_BW_UNROLL": 4, "RL_L2_LOADS": 4},
    "fma": {"RL_FMA_CHAINS": 8, "RL_FMA_UNROLL": 64},
    "mma": {"RL_MMA_CHAINS": 8, "RL_MMA_SETS": 4},
    "wgmma": {"RL_WGMMA_UNROLL": 16, "RL_WGMMA_THREADS": 256, "RL_WGMMA_TILES": 4},
}


def _source_options(source_name: str) -> List[str]:
    return [f"-D{k}={v}" for k, v in sorted(_DEFINES.get(source_name, {}).items())]


def compile(source_name: str, arch: Any) -> bytes:  # noqa: A001 - the public name the API promises
    """Compile the kernel source ``cuda/<source_name>.cu`` for ``arch`` (e.g. ``"sm_90"``) and return the cubin.

    Uses the cubin cache (see :func:`compile_source`), the shared headers (:func:`kernel_headers`) and the
    compile-time constants the benchmarks assume.
    """
    stem = Path(source_name).stem
    sources = kernel_sources()
    if stem not in sources:
        raise ValueError(f"no kernel source {source_name!r}; available: {', '.join(sources)}")
    text = sources[stem].read_text(encoding="utf-8")
    return compile_source(text, f"{stem}.cu", arch, _source_options(stem), headers=kernel_headers())
