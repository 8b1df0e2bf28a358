"""Sweep planning: the working-set sizes of the bandwidth sweep per cache level and DRAM, and the plateaus that
make each level's figure."""

from __future__ import annotations

import statistics

import numpy as np

from roofline._hardware._cpu_info import _available_memory


_MIN_SIZE = 16 << 10  # the smallest working set of the sweep, in bytes


def _dram_size(llc: int, threads: int) -> tuple[int, bool]:
    """Working set for the DRAM plateau: 4 x the last-level cache, capped at a quarter of available memory.
    Returns (bytes, capped)."""
    want = max(4 * llc, 64 << 20)
    avail = _available_memory()
    if avail is not None and want > avail // 4:
        return max(avail // 4 // (1 << 20) << 20, 1024 * threads), True
    return want, False


def _sweep_sizes(caps: dict[str, int], dram: int, threads: int, quick: bool, per_octave: int) -> np.ndarray:
    """Working-set sizes in bytes: geometric from 16 KiB (or 4 KiB per thread) with `per_octave` sizes per
    doubling; quick stops at half the last-level cache and adds the DRAM size, thorough runs up to it."""
    lo = max(_MIN_SIZE, 4096 * threads)
    llc = caps[max(caps)]
    top = min(llc // 2 if quick else dram, dram)
    sizes = []
    k = 0
    while True:
        s = int(round(lo * 2 ** (k / per_octave))) // 64 * 64
        if s > top:
            break
        sizes.append(s)
        k += 1
    sizes.append(dram)
    return np.array(sorted(set(sizes)), dtype=np.int64)


def _level_range(level: str, caps: dict[str, int], lo: int) -> tuple[int, int]:
    """Working sets attributed to a cache level: from twice the previous level's capacity to half this one's."""
    names = sorted(caps)
    i = names.index(level)
    prev = caps[names[i - 1]] if i > 0 else 0
    return max(lo, 2 * prev), caps[level] // 2


def _plateaus(
    sizes: np.ndarray, rates: np.ndarray, caps: dict[str, int], dram: int, kernels: tuple[str, ...]
) -> dict[str, tuple[int, int, dict[str, float]]]:
    """Median rate per kernel within each level's range of working sets (see _level_range; DRAM: sizes >= the
    DRAM working set). A level whose range holds no size falls back to the sizes between the previous capacity
    and its own; a level with none at all is left out. ``rates[j]`` are the rates of ``kernels[j]``. Returns
    {level: (lo, hi, {kernel: bytes/s})}."""
    out = {}
    lo_all = int(sizes.min())
    ranges = {level: _level_range(level, caps, lo_all) for level in sorted(caps)}
    ranges["DRAM"] = (dram, int(sizes.max()))
    for level, (lo, hi) in ranges.items():
        mask = (sizes >= lo) & (sizes <= hi)
        if not mask.any() and level != "DRAM":
            names = sorted(caps)
            i = names.index(level)
            prev = caps[names[i - 1]] if i > 0 else 0
            mask = (sizes > prev) & (sizes <= caps[level])
        if not mask.any():
            continue
        chosen = sizes[mask]
        out[level] = (
            int(chosen.min()),
            int(chosen.max()),
            {k: float(statistics.median(rates[j][mask].tolist())) for j, k in enumerate(kernels)},
        )
    return out
