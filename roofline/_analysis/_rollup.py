"""Roll-ups of a report's records: exact totals, groups by op, module and phase, the roofline figures of a group,
and FlopCounterMode's structure.

Pure functions over the record array (``RECORD_DTYPE``), the op table (a list of :class:`OpInfo`, indexed by
``records["op"]``), the module sets (indexed by ``records["module"]``) and, for the roofline figures, the
classification arrays of :mod:`roofline._analysis._classification`. They keep no state; :class:`roofline.Report` calls
them. Counts are exact: uint64 columns are summed into Python ints.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from roofline import _core
from roofline._counting._registry import FLOP_COUNTER_OPS
from roofline._datamodel._records import BOUND_INTERCONNECT, BOUNDS, COUNTS, PHASES, RECOMPUTE, OpInfo  # noqa: F401

# the count columns a roll-up sums (the FLOPs and bytes of a row are derived from them)
SUMMED = COUNTS


# ---- exact counts ----------------------------------------------------------------------------------------------
def exact_sum(col) -> int:
    """Exact sum of a uint64 column (Python ints: no wrap-around)."""
    if len(col) == 0:
        return 0
    total = int(col.sum(dtype=np.uint64))
    if total < int(col.max()):  # wrapped: redo it exactly
        total = sum(int(x) for x in col)
    elif len(col) > 1 and int(col.max()) > (1 << 63) // len(col):
        total = sum(int(x) for x in col)
    return total


def count_totals(rows) -> dict:
    """The counts of a set of records: ``calls``, the :data:`SUMMED` columns, ``flops``, ``bytes`` and
    ``intensity`` (inf when FLOPs move no bytes, 0 when nothing was counted)."""
    t = {k: exact_sum(rows[k]) for k in SUMMED}
    t["calls"] = int(len(rows))
    t["flops"] = t["matrix_flops"] + t["vector_flops"]
    t["bytes"] = t["bytes_read"] + t["bytes_written"]
    t["intensity"] = (t["flops"] / t["bytes"]) if t["bytes"] else (float("inf") if t["flops"] else 0.0)
    return t


def times(records):
    """Measured seconds of each record (NaN when untimed)."""
    return records["t_end"] - records["t_start"]


def unknown_ops(records, ops) -> dict[str, int]:
    """Ops without a cost formula: name -> calls."""
    unknown = [i for i, o in enumerate(ops) if o.kind == "unknown"]
    if not unknown:
        return {}
    counts = Counter(records["op"][np.isin(records["op"], unknown)].tolist())
    return {ops[i].name: int(counts[i]) for i in unknown if counts[i]}


def errors(records, ops) -> dict[str, tuple[int, str]]:
    """Records whose cost could not be evaluated: name -> (calls, reason of the last one)."""
    bad = records[records["status"] != 0]
    out: dict[str, tuple[int, str]] = {}
    for op, st in zip(bad["op"].tolist(), bad["status"].tolist()):
        name = ops[op].name
        n, _ = out.get(name, (0, ""))
        out[name] = (n + 1, _core.status_str(st))
    return out


# ---- grouping ----------------------------------------------------------------------------------------------------
def phase_mask(records, phase):
    """Records of one phase ("forward", "backward", "optimizer"), or all of them for None; ValueError otherwise."""
    if phase is not None and phase not in PHASES:
        raise ValueError(f"phase must be one of {PHASES} or None, got {phase!r}")
    if phase is None:
        return np.ones(len(records), bool)
    return records["phase"] == PHASES.index(phase)


def module_members(module_sets) -> dict[str, list[int]]:
    """Module name -> the module-set ids of everything that ran inside it: the one definition of a module's group.
    Every module that ran is a name, and so is every dotted prefix of one (a container such as a ``ModuleList``,
    ``Net.blocks`` above ``Net.blocks.0``, which is never called itself): a group's depth is the depth of its name
    (the root is 1) and every level of the model is there. "Global" is the whole run."""
    members: dict[str, list[int]] = {}
    for mid, names in enumerate(module_sets):
        inside = set()
        for n in names:
            if n == "Global":
                inside.add(n)
                continue
            parts = n.split(".")
            inside.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
        for n in inside:
            members.setdefault(n, []).append(mid)
    return members


def time_key(row) -> float:
    """The time a group is ordered by: measured when timed, else roofline time (0 when neither is finite)."""
    t = row["time"] if math.isfinite(row["time"]) else row["t_min"]
    return t if math.isfinite(t) else 0.0


def sort_rows(rows: dict) -> dict:
    """Groups' roofline rows (name -> row, or name -> (row, ...)) most time first (:func:`time_key`), then most
    FLOPs, then by name: the one order of every roofline table, chart and roll-up."""
    def key(kv):
        r = kv[1][0] if isinstance(kv[1], tuple) else kv[1]
        return (-time_key(r), -r["flops"], kv[0])

    return dict(sorted(rows.items(), key=key))


def group_masks(records, names, module_sets, by: str, depth: int | None = None, phase: str | None = None,
                signatures=None) -> dict:
    """The groups of a roll-up, name -> boolean mask over ``records``: one per op name (``by="op"``, in op-index
    order; ``names``: the op names, indexed by ``records["op"]``), per op and input-shape signature (``by="op_shape"``, named ``"aten.mm.default [f32[8,64],
    f32[64,16]]"``; ``signatures``, the report's signature texts, indexed by ``records["sig"]``) or one per module
    (``by="module"``: :func:`module_members`, by name; ``depth`` keeps names at most that many levels deep).
    Groups without a record are left out. ``phase`` restricts to one phase."""
    sel = phase_mask(records, phase)
    groups = {}
    if by == "op":
        for i in np.unique(records["op"][sel]).tolist():
            groups[names[i]] = sel & (records["op"] == i)
    elif by == "op_shape":
        if not signatures or "sig" not in (records.dtype.names or ()):
            raise ValueError("by='op_shape' needs shape signatures: this report's records have none (recorded by an "
                             "earlier version?)")
        key = records["op"].astype(np.uint64) << np.uint64(32) | records["sig"].astype(np.uint64)
        for k in np.unique(key[sel]).tolist():
            op, sig = k >> 32, k & 0xFFFFFFFF
            text = signatures[sig] if sig < len(signatures) else "?"
            groups[f"{names[op]} [{text}]" if text else names[op]] = sel & (key == k)
    elif by == "module":
        mods = records["module"]
        for name, mids in sorted(module_members(module_sets).items()):
            if depth is not None and name != "Global" and name.count(".") + 1 > depth:
                continue
            m = sel & np.isin(mods, mids)
            if m.any():
                groups[name] = m
    else:
        raise ValueError(f"by must be 'op', 'op_shape' or 'module', got {by!r}")
    return groups


def counts_by(records, names, module_sets, by: str, depth: int | None = None, phase: str | None = None) -> dict:
    """:func:`count_totals` per group of :func:`group_masks`: ops most FLOPs first (then most bytes, then by
    name), modules by name."""
    out = {name: count_totals(records[m]) for name, m in group_masks(records, names, module_sets, by, depth,
                                                                     phase).items()}
    if by == "op":
        out = dict(sorted(out.items(), key=lambda kv: (-kv[1]["flops"], -kv[1]["bytes"], kv[0])))
    return out


def counts_by_phase(records) -> dict[str, dict]:
    """:func:`count_totals` per phase that ran, in phase order."""
    return {PHASES[p]: count_totals(records[records["phase"] == p]) for p in np.unique(records["phase"]).tolist()}


# ---- roofline figures of a group -----------------------------------------------------------------------------------
def peak_time(flops, peak) -> float:
    """Seconds the FLOPs would take at each op's own peak. Ops without FLOPs count 0; ops whose unit and dtype have
    no ceiling (complex arithmetic, say) are left out rather than making the sum NaN. NaN when there are FLOPs but
    none of them has a peak (no time to compare against: an MFU of NaN, not 0)."""
    has_flops = flops > 0
    ok = has_flops & np.isfinite(peak) & (peak > 0)
    if has_flops.any() and not ok.any():
        return math.nan
    return float(np.divide(flops, peak, out=np.zeros_like(flops), where=ok).sum())


def group_bound(bound, t_min):
    """The bound that holds for most of a group's roofline time ("mixed" when neither has 80%)."""
    ok = np.isfinite(t_min)
    total = t_min[ok].sum()
    if total <= 0:
        kinds = {BOUNDS[b] for b in bound.tolist()}
        return kinds.pop() if len(kinds) == 1 else "mixed"
    compute = t_min[ok & (bound == _core.BOUND_COMPUTE)].sum() / total
    if compute >= 0.8:
        return "compute"
    # memory-bound ops with FLOPs and bandwidth-only ops (copies) both wait on memory
    memory = t_min[ok & (bound == _core.BOUND_MEMORY)].sum() / total
    bandwidth = t_min[ok & (bound == _core.BOUND_BANDWIDTH)].sum() / total
    if memory + bandwidth >= 0.8:
        return "memory" if memory > 0 else "bandwidth"
    if t_min[ok & (bound == BOUND_INTERCONNECT)].sum() / total >= 0.8:  # collectives, on the network
        return "interconnect"
    return "mixed"


def roofline_row(records, mask, c) -> dict:
    """Roll-up of the records selected by ``mask`` against their classification ``c``: counts, roofline time,
    measured time, rates (the row of :meth:`roofline.Report.analysis`)."""
    flops, nbytes = c["flops"][mask], c["bytes"][mask]
    t_min = c["t_min"][mask]
    measured = times(records[mask])
    out = {"calls": int(mask.sum()), "flops": float(flops.sum()), "bytes": float(nbytes.sum())}
    out["intensity"] = out["flops"] / out["bytes"] if out["bytes"] else (math.inf if out["flops"] else 0.0)
    finite = np.isfinite(t_min)
    out["t_min"] = float(t_min[finite].sum()) if finite.any() else math.nan
    bound = c["bound"][mask]
    tc = float(t_min[finite & (bound == _core.BOUND_COMPUTE)].sum()) if finite.any() else 0.0
    out["compute_share"] = tc / out["t_min"] if out["t_min"] and out["t_min"] > 0 else math.nan
    out["bound"] = (group_bound(bound, t_min) if finite.any() else
                    ("none" if not (out["flops"] or out["bytes"]) else "?"))
    timed = np.isfinite(measured)
    out["time"] = float(measured[timed].sum()) if timed.any() else math.nan
    t = out["time"]
    at_peak = peak_time(flops, c["peak"][mask]) if out["flops"] else 0.0  # time at each op's own peak
    net = c["bound"][mask] == BOUND_INTERCONNECT
    if net.any() and net.all():  # collectives only: bus bytes against the interconnect
        bw, mbu_bytes = c["link_bw"][mask][0], out["bytes"]
    else:  # memory bytes against DRAM (a group's collectives move network bytes, not DRAM bytes)
        bw = c["bw"][mask][0] if mask.any() else math.nan
        mbu_bytes = float(nbytes[~net].sum())
    if t and t > 0 and math.isfinite(t):
        out["achieved_flops"] = out["flops"] / t
        out["achieved_bytes"] = out["bytes"] / t
        out["efficiency"] = out["t_min"] / t if math.isfinite(out["t_min"]) else math.nan
        out["mfu"] = at_peak / t if out["flops"] else math.nan
        out["mbu"] = mbu_bytes / (t * bw) if bw == bw else math.nan
    else:
        for k in ("achieved_flops", "achieved_bytes", "efficiency", "mfu", "mbu"):
            out[k] = math.nan
    out["above_ceiling"] = int(((c["flags"][mask] & (_core.FLAG_ABOVE_PEAK | _core.FLAG_ABOVE_BW)) != 0).sum())
    return out


def roofline_by(records, names, module_sets, c, by: str = "op", depth: int | None = None,
                phase: str | None = None, signatures=None) -> dict[str, dict]:
    """:func:`roofline_row` per group of :func:`group_masks`, in :func:`sort_rows` order."""
    return sort_rows({name: roofline_row(records, m, c)
                      for name, m in group_masks(records, names, module_sets, by, depth, phase, signatures).items()})


def roofline_totals(records, c, wall_time) -> dict:
    """:func:`roofline_row` over every record, plus ``wall_time``, ``model_flops`` (every phase but recompute) and
    ``recompute_flops``; when the block was timed (``wall_time`` > 0) ``time`` is the wall time and the rates,
    efficiency, MFU (model FLOPs), HFU (all FLOPs executed) and MBU are taken against it."""
    g = roofline_row(records, np.ones(len(records), bool), c)
    net = c["bound"] == BOUND_INTERCONNECT
    if net.any():  # collectives' bus bytes are network traffic: kept out of the memory figures
        g["network_bytes"] = float(c["bytes"][net].sum())
        g["bytes"] = float(c["bytes"][~net].sum())
        g["intensity"] = g["flops"] / g["bytes"] if g["bytes"] else (math.inf if g["flops"] else 0.0)
    # model FLOPs count each op of the model once: forward work run again inside a backward (activation
    # checkpointing's recompute phase) is hardware work, in the HFU and not the MFU
    model = records["phase"] != RECOMPUTE
    g["recompute_flops"] = float(c["flops"][~model].sum())
    g["model_flops"] = g["flops"] - g["recompute_flops"]
    t = wall_time
    if t and t > 0:
        g["time"] = t
        g["achieved_flops"] = g["flops"] / t
        g["achieved_bytes"] = g["bytes"] / t
        g["hfu"] = peak_time(c["flops"], c["peak"]) / t if g["flops"] else math.nan
        g["mfu"] = (peak_time(c["flops"][model], c["peak"][model]) / t if g["model_flops"] else
                    math.nan if g["flops"] else g["hfu"])
        g["mbu"] = g["bytes"] / (t * c["bw"][0]) if len(c["bw"]) else math.nan
        g["efficiency"] = g["t_min"] / t if math.isfinite(g["t_min"]) else math.nan
    g.setdefault("hfu", g["mfu"])
    g["wall_time"] = t
    return g


# ---- FlopCounterMode's structure -------------------------------------------------------------------------------
def flop_counter_counts(records, ops, module_sets) -> dict:
    """``{module name: {op key: FLOPs}}`` from the ``flop_counter_flops`` column, over the ops FlopCounterMode
    has a formula for, keyed as FlopCounterMode keys them (:meth:`OpInfo.key`)."""
    flop_counter_ops = [i for i, o in enumerate(ops)
                        if o.packet.startswith("aten.") and o.packet.split(".", 1)[-1] in FLOP_COUNTER_OPS]
    rows = records[np.isin(records["op"], flop_counter_ops)]
    out: dict = {}
    for op, mid, f in zip(rows["op"].tolist(), rows["module"].tolist(), rows["flop_counter_flops"].tolist()):
        key = ops[op].key()
        for name in module_sets[mid]:
            d = out.setdefault(name, {})
            d[key] = d.get(key, 0) + int(f)
    return out
