"""Contention heuristics: measured CPU ceilings that cannot be the hardware's (a cache level slower than the next,
a peak far from a quick re-check of it), and the load average."""

from __future__ import annotations

import os

from roofline._hardware._ceilings_model import Ceiling, LEVELS


# Below this share of their CPUs (CPU time / wall time) the benchmark threads competed with other processes.
_BUSY_SHARE = 0.85

# Contention tests. A cache level's read bandwidth below this share of the next (slower) level's, or of DRAM's,
# cannot be the hardware; nor can a peak below this share of a quick re-check of it (or the re-check below it).
_HIERARCHY_TOLERANCE = 0.8
_RECHECK_TOLERANCE = 0.7


def contention_reasons(
    shares: dict[str, float],
    bandwidths: dict[str, Ceiling],
    peaks: dict[tuple[str, str], Ceiling],
    recheck: dict[str, float] | None = None,
) -> list[str]:
    """Why a set of CPU ceilings looks measured under contention (empty when nothing does): the benchmark
    threads' CPU share (``shares``, per timed part) below 85%; an implausible memory hierarchy (a cache level's
    read bandwidth, or its triad headline, below 80% of a slower level's); a peak that disagrees with a quick
    re-check (``recheck``: {"unit/dtype": FLOP/s}) by more than 30%. A pure function of its arguments."""
    out = []
    low = {k: v for k, v in shares.items() if 0 < v < _BUSY_SHARE}
    if low:
        worst = min(low, key=low.get)
        out.append(f"other processes used the CPUs: the benchmark threads got {100 * low[worst]:.0f}% of their "
                   f"CPUs ({worst})")
    levels = [lvl for lvl in LEVELS if lvl in bandwidths]
    for suffix, label in (("_read", "read"), ("", "triad")):
        value = {lvl: (bandwidths.get(f"{lvl}{suffix}") or Ceiling(None)).measured for lvl in levels}
        for i, fast in enumerate(levels):
            for slow in levels[i + 1:]:
                if value[fast] and value[slow] and value[fast] < _HIERARCHY_TOLERANCE * value[slow]:
                    out.append(f"implausible hierarchy: {fast} {label} bandwidth {value[fast] / 1e9:.1f} GB/s is "
                               f"below {slow}'s {value[slow] / 1e9:.1f} GB/s")
                    break
    for key, again in (recheck or {}).items():
        unit, _, dtype = key.partition("/")
        first = (peaks.get((unit, dtype)) or Ceiling(None)).measured
        if first and again and min(first, again) < _RECHECK_TOLERANCE * max(first, again):
            out.append(f"the {key} peak {first / 1e9:.1f} GFLOP/s and a quick re-check {again / 1e9:.1f} GFLOP/s "
                       "disagree by more than 30%")
    return out


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None
