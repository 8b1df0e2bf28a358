"""A cache-aware roofline: which level of the memory hierarchy each op's bytes come from.

Method (see docs/concepts.md, "Cache-aware bytes"): the op stream's accesses (``Report.accesses``: per call, the
storages it read and wrote and their bytes) are replayed through one LRU stack of storages. A read of a storage is
served by the innermost cache level whose capacity holds everything touched since that storage was last touched
(its own bytes included: the LRU *stack distance* in bytes); a storage not touched before in the block, or further
away than the last level's capacity, comes from DRAM. A write lands in the innermost level that holds the call's
whole footprint (the distinct storages it touches), or goes to DRAM when none does. Each call's compulsory bytes
are then split between levels in the proportions of its accesses, and its time on the hierarchical roofline is
``max(FLOPs / peak, sum over levels of bytes at the level / bandwidth of the level)``.

Capacities are the aggregate over the cores in use (CPU: ``Ceilings.info["cache_capacity_bytes"]``, measured with
the ceilings, or sysfs; GPU: the L2 of the device properties or the datasheet). A level without a measured
bandwidth is timed at the next outer level that has one.
"""

from __future__ import annotations

import math
import os
from collections import OrderedDict

import numpy as np

from roofline._analysis._dataflow import check_accesses


def sysfs_caches(cpu: int = 0, root: str = "/sys/devices/system/cpu") -> dict[str, dict]:
    """Data and unified caches of one CPU from sysfs: ``{"L1": {"bytes", "shared_cpus"}, ...}`` (empty when sysfs
    has none, e.g. not Linux)."""
    out: dict[str, dict] = {}
    base = os.path.join(root, f"cpu{int(cpu)}", "cache")
    try:
        entries = sorted(d for d in os.listdir(base) if d.startswith("index"))
    except OSError:
        return out
    for d in entries:
        try:
            with open(os.path.join(base, d, "level")) as f:
                level = int(f.read().strip())
            with open(os.path.join(base, d, "type")) as f:
                typ = f.read().strip()
            with open(os.path.join(base, d, "size")) as f:
                size = _parse_size(f.read().strip())
            try:
                with open(os.path.join(base, d, "shared_cpu_list")) as f:
                    shared = _count_cpus(f.read().strip())
            except OSError:
                shared = 1
        except (OSError, ValueError):
            continue
        if typ == "Instruction" or size <= 0:
            continue
        out[f"L{level}"] = {"bytes": size, "shared_cpus": shared}
    return out


def _parse_size(s: str) -> int:
    s = s.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if s and s[-1] in mult:
        return int(s[:-1]) * mult[s[-1]]
    return int(s)


def _count_cpus(s: str) -> int:
    n = 0
    for part in s.split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        n += (int(hi) - int(lo) + 1) if hi else 1
    return max(1, n)


def hierarchy(roofs, threads: int | None = None) -> list[tuple[str, float, float]]:
    """``[(level, capacity bytes, bandwidth bytes/s), ...]`` inner to outer, DRAM last (capacity inf), from a
    report's roofs (:class:`roofline._hardware._roofs.Roofs`: the bandwidths, and the capacities its ceilings
    describe). Cache levels of unknown capacity, or no larger than an inner level, are left out; a level without a
    bandwidth gets the next outer level's (NaN for DRAM when the roofs have none). ``threads``: CPU cores in use,
    for aggregating private caches read from sysfs (default: the ceilings' thread count)."""
    ceilings = roofs.ceilings if roofs is not None else None
    if ceilings is None:
        return []
    info = ceilings.info or {}
    caps: dict[str, int] = {}
    if str(ceilings.device).startswith("cuda"):
        l2 = info.get("l2_cache_bytes") or info.get("l2_bytes")
        if l2:
            caps["L2"] = int(l2)
    else:
        caps = {k: int(v) for k, v in (info.get("cache_capacity_bytes") or {}).items() if v}
        if not caps:  # the probe's per-instance sizes
            caps = {k: int(c["bytes"]) * max(1, int(c.get("instances", 1)))
                    for k, c in (info.get("caches") or {}).items() if isinstance(c, dict) and c.get("bytes")}
        if not caps:  # hand-made ceilings: this machine's sysfs
            n = int(threads or info.get("threads") or 1)
            for level, c in sysfs_caches().items():
                inst = max(1, math.ceil(n / c["shared_cpus"]))
                caps[level] = c["bytes"] * inst
    levels = sorted(caps, key=lambda k: int(k[1:]) if k[1:].isdigit() else 99)
    # a level no larger than an inner one adds no capacity to the LRU stack: left out (the private L2s of many
    # cores can hold more than their shared L3)
    levels = [lv for i, lv in enumerate(levels) if all(caps[lv] > caps[inner] for inner in levels[:i])]

    def bw(level):
        return float(roofs.bandwidth(level).value)

    out = [(lv, float(caps[lv]), bw(lv)) for lv in levels] + [("DRAM", math.inf, bw("DRAM"))]
    # a level without a bandwidth is timed at the next outer known one
    for i in range(len(out) - 2, -1, -1):
        if not math.isfinite(out[i][2]):
            out[i] = (out[i][0], out[i][1], out[i + 1][2])
    return out


def replay(accesses, n_records: int, capacities: list[float]) -> np.ndarray:
    """Bytes each call's accesses fetch from each level: an ``(n_records, len(capacities) + 1)`` float array whose
    last column is DRAM. ``capacities``: cache capacities in bytes, inner to outer (increasing)."""
    a = check_accesses(accesses, n_records)
    caps = [float(c) for c in capacities]
    if any(not (c > 0) for c in caps) or caps != sorted(caps):
        raise ValueError(f"cache capacities must be positive and increasing, got {capacities}")
    nl = len(caps)
    out = np.zeros((n_records, nl + 1))
    if len(a) == 0:
        return out
    last = caps[-1] if caps else 0.0
    order = np.lexsort((a["write"], a["record"]))
    rec_col = a["record"][order].tolist()
    st_col = a["storage"][order].tolist()
    nb_col = a["nbytes"][order].astype(np.float64).tolist()
    wr_col = a["write"][order].tolist()
    stack: OrderedDict = OrderedDict()  # storage -> bytes of its latest access, most recent last

    def level_of(distance):
        for i, c in enumerate(caps):
            if distance <= c:
                return i
        return nl

    k, m = 0, len(rec_col)
    while k < m:
        r = rec_col[k]
        j = k
        foot: dict = {}
        while j < m and rec_col[j] == r:
            foot[st_col[j]] = max(foot.get(st_col[j], 0.0), nb_col[j])
            j += 1
        wlevel = level_of(sum(foot.values()))
        row = out[r]
        for i in range(k, j):
            s, nb = st_col[i], nb_col[i]
            if wr_col[i]:
                row[wlevel] += nb
            else:
                if s in stack:
                    d = nb
                    for t, size in reversed(stack.items()):
                        if t == s:
                            break
                        d += size
                        if d > last:
                            break
                    row[level_of(d)] += nb
                else:
                    row[nl] += nb
            stack.pop(s, None)
            stack[s] = nb  # the walk above stops past the last level, so old entries cost nothing
        k = j
    return out


def analysis(records, accesses, c, roofs) -> dict:
    """The cache-aware figures of every record (see the module docstring), against ``roofs`` (the report's
    :class:`roofline._hardware._roofs.Roofs`, or those of another source): a dict with ``levels`` (names, inner to
    outer, DRAM last), ``capacities`` and ``bandwidths`` (per level), ``bytes_by_level`` (``(n, levels)`` float
    array of compulsory bytes split by where they come from), ``<level>_bytes`` (one column of it per level, e.g.
    ``l2_bytes``, ``dram_bytes``), ``level`` (per record, the level whose transfers take the longest: the one its
    data "comes from"; "" for records that move nothing), ``t_mem`` (seconds for the bytes at their levels),
    ``t_min`` (``max(t_compute, t_mem)``), ``t_min_dram`` (the DRAM-only roofline time of
    :meth:`roofline.Report.classification`), ``bound`` (codes as in the classification: 1 memory, 2 compute,
    3 bandwidth, 0 none) and, with per-op timing, ``above_level`` (achieved bandwidth above the roof of the level
    the model assigns: the model put the data too far out)."""
    n = len(records)
    h = hierarchy(roofs)
    if not h:
        raise ValueError("the cache model needs ceilings (a device with a memory hierarchy); this report has none")
    names = [lv for lv, _, _ in h]
    caps = [cap for _, cap, _ in h[:-1]]
    bws = np.array([bw for _, _, bw in h])
    raw = replay(accesses, n, caps)
    comp = records["bytes_read"].astype(np.float64) + records["bytes_written"].astype(np.float64)
    acc_total = raw.sum(axis=1)
    frac = np.zeros_like(raw)
    has = acc_total > 0
    frac[has] = raw[has] / acc_total[has, None]
    frac[~has, -1] = 1.0  # no access rows: all from DRAM, as the DRAM-only roofline assumes
    by_level = frac * comp[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        t_level = by_level / bws[None, :]
        t_mem = t_level.sum(axis=1)
        t_compute = np.where(c["flops"] > 0, c["flops"] / c["peak"], 0.0)
    t_min = np.maximum(t_compute, t_mem)
    idx = np.argmax(np.nan_to_num(t_level, nan=0.0), axis=1)
    level = np.where(comp > 0, np.array(names, dtype=object)[idx], "")
    bound = np.where(comp == 0, np.where(c["flops"] > 0, 2, 0),
                     np.where(c["flops"] == 0, 3, np.where(t_compute >= t_mem, 2, 1))).astype(np.uint8)
    out = {"levels": names, "capacities": [cap for _, cap, _ in h], "bandwidths": bws.tolist(),
           "bytes_by_level": by_level, "level": level, "t_mem": t_mem, "t_min": t_min, "t_min_dram": c["t_min"],
           "t_compute": t_compute, "bound": bound}
    for i, lv in enumerate(names):
        out[f"{lv.lower()}_bytes"] = by_level[:, i]
    t = records["t_end"] - records["t_start"]
    with np.errstate(invalid="ignore", divide="ignore"):
        achieved = comp / t
        lvl_bw = bws[idx]
        out["above_level"] = np.isfinite(achieved) & (comp > 0) & (achieved > lvl_bw)
    return out
