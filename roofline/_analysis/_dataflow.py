"""Dataflow between op calls, and the chains of memory-bound ops a fused kernel could run in one pass.

The input is a report's access table (``Report.accesses``): one row per (op call, storage it read or wrote), with
the bytes of the storage the call's view covers. Storage ids may be reused once a storage is freed, so an edge
follows *last-writer* semantics: a read of storage ``s`` by call ``j`` depends on the latest call ``i < j`` that
wrote ``s`` (the reads of a call come before its writes, so an in-place op depends on the previous writer of its
argument, not on itself).

Pure functions over NumPy arrays (the records, the op table, the module sets, the classification); no torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from roofline._datamodel._records import ACCESS_DTYPE  # (record, storage, nbytes, write)
from roofline._datamodel._records import PHASES
from roofline._util._format import op_name

EDGE_DTYPE = np.dtype([("producer", "<u4"), ("consumer", "<u4"), ("storage", "<u8"), ("nbytes", "<u8"),
                       ("written", "<u8")])

# cost kinds (roofline._counting._registry) whose calls a fused element-wise kernel can absorb: element-wise maps, per-row
# normalisations, softmax and reductions, copies and casts, random fills (dropout masks)
FUSIBLE_KINDS = frozenset({"ewise", "ewise_in", "copy", "fill", "foreach"})
# matrix products and convolutions: a fused kernel can take an element-wise chain as their epilogue (a chain may
# start at one of them, never continue through one)
GEMM_KINDS = frozenset({"mm", "addmm", "bmm", "baddbmm", "conv", "scaled_mm", "grouped_mm"})


def check_accesses(accesses, n_records: int):
    """``accesses`` as a NumPy array of :data:`ACCESS_DTYPE`; TypeError / ValueError naming what is wrong."""
    if accesses is None:
        raise ValueError("this report has no dataflow (no access table: it was recorded without one)")
    a = np.asarray(accesses)
    if a.dtype.names is None or any(n not in a.dtype.names for n in ACCESS_DTYPE.names):
        raise TypeError(f"accesses must be a structured array with fields {ACCESS_DTYPE.names}, got dtype {a.dtype}")
    if a.ndim != 1:
        raise ValueError(f"accesses must be one-dimensional, got shape {a.shape}")
    a = a.astype(ACCESS_DTYPE, copy=False) if a.dtype != ACCESS_DTYPE else a
    if len(a) and int(a["record"].max()) >= n_records:
        raise ValueError(f"accesses refer to record {int(a['record'].max())}, but the report has {n_records} records")
    return a


def report_accesses(report):
    """The report's access table, or None when it has none: a report of a version without the dataflow capture
    (an empty table although some call moved data)."""
    a = getattr(report, "accesses", None)
    if a is None:
        return None
    if len(a) == 0 and len(report.records) and bool(active(report.records).any()):
        return None
    return a


def edges(accesses, n_records: int | None = None) -> np.ndarray:
    """Producer -> consumer edges: one row per (call that read a storage, the call that last wrote it before).

    Returns an array of :data:`EDGE_DTYPE`, sorted by consumer then producer: ``producer`` and ``consumer``
    (record indices), ``storage``, ``nbytes`` (bytes the consumer read) and ``written`` (bytes the producer
    wrote). Reads with no earlier writer in the block (inputs, parameters) have no edge."""
    a = check_accesses(accesses, n_records if n_records is not None else 1 << 32)
    if len(a) == 0:
        return np.zeros(0, EDGE_DTYPE)
    # by storage, then call, reads before writes
    order = np.lexsort((a["write"], a["record"], a["storage"]))
    s, rec, w, nb = a["storage"][order], a["record"][order], a["write"][order].astype(bool), a["nbytes"][order]
    idx = np.arange(len(a))
    last_write = np.maximum.accumulate(np.where(w, idx, -1))
    reads = ~w & (last_write >= 0)
    reads[reads] &= s[last_write[reads]] == s[reads]  # the last write is of the same storage
    src = last_write[reads]
    out = np.zeros(int(reads.sum()), EDGE_DTYPE)
    out["producer"], out["consumer"] = rec[src], rec[reads]
    out["storage"], out["nbytes"], out["written"] = s[reads], nb[reads], nb[src]
    return out[np.lexsort((out["producer"], out["consumer"]))]


@dataclass
class FusionOpportunity:
    """A chain of calls a single fused kernel could run, keeping its intermediates on chip.

    ``records``: the calls (record indices, in order); ``ops``: their op names; ``modules``: the innermost modules
    they ran in; ``kind``: "epilogue" when the chain starts at a matrix product or convolution, else "elementwise";
    ``intermediates``: how many tensors pass from one member to the next and are read by nothing else;
    ``bytes``: compulsory bytes of the members; ``saved_bytes``: the writes and reads of those intermediates, which a
    fused kernel does not do (the final value of a storage that existed before the block and that a member
    updated in place, an optimizer's state, is still written); ``t_before``: the members' roofline time (seconds,
    NaN without ceilings);
    ``t_after``: the roofline time of one kernel doing the members' FLOPs and the remaining bytes; ``saved_s``:
    ``t_before - t_after``."""

    records: list[int]
    ops: list[str]
    modules: list[str]
    kind: str
    intermediates: int
    bytes: int
    saved_bytes: int
    t_before: float
    t_after: float
    saved_s: float
    phase: str = "forward"
    edges: list[tuple[int, int, int]] = field(default_factory=list)  # (producer, consumer, bytes saved)
    # set by ``fusion_opportunities(compiled=...)``: whether the compiled run fused the chain ("taken", "partly",
    # "not taken", "unknown"), the intermediates' bytes its kernels keep on chip, and each member's kernel
    compiled: str | None = None
    compiled_saved_bytes: int | None = None
    compiled_kernels: list = field(default_factory=list)

    line: str = field(default="", repr=False, compare=False)  # describe(), written by roofline.render._advice

    def describe(self) -> str:
        """One line: the op chain, where, and what fusing saves (written by
        :func:`roofline.render._advice.describe` for the opportunities :meth:`roofline.Report.fusion_opportunities`
        returns)."""
        return self.line or " -> ".join(op_name(o) for o in self.ops)


def active(records) -> np.ndarray:
    """Calls that move data: counted (status 0) with compulsory bytes (views and metadata queries move none)."""
    return (records["status"] == 0) & ((records["bytes_read"] > 0) | (records["bytes_written"] > 0))


def data_edges(records, accesses) -> np.ndarray:
    """:func:`edges` between calls that move data (a view's call reads nothing, so it is no consumer)."""
    a = check_accesses(accesses, len(records))
    keep = active(records)[a["record"]] if len(a) else np.zeros(0, bool)
    return edges(a[keep], len(records))


def fusion_opportunities(records, ops, module_path, c, accesses, min_ops: int = 2) -> list[FusionOpportunity]:
    """Chains of calls connected through intermediates nothing else reads, where every member is memory-bound
    (or, without ceilings, of a fusible kind) except possibly a matrix product or convolution heading the chain.

    ``ops``: the op table (``OpInfo`` with ``name`` and ``kind``); ``module_path``: record's module id -> name;
    ``c``: the classification arrays (``bound``, ``t_min``, ``flops``, ``peak``, ``bw``). Sorted by time saved
    (bytes saved without ceilings)."""
    n = len(records)
    e = data_edges(records, accesses)
    if n == 0 or len(e) == 0:
        return []
    kinds = np.array([o.kind for o in ops], dtype=object)
    rk = kinds[records["op"]] if len(ops) else np.zeros(n, object)
    is_gemm = np.isin(rk, list(GEMM_KINDS))
    bound = np.asarray(c["bound"]) if c is not None else np.zeros(n, np.int64)
    have_bound = bound > 0
    # memory (1) or bandwidth (3) bound; without a classification, by kind alone
    membound = np.where(have_bound, (bound == 1) | (bound == 3), True)
    fusible = np.isin(rk, list(FUSIBLE_KINDS)) & membound & active(records)
    head = is_gemm & active(records)
    # consumers of each (producer, storage) version: an intermediate is fused away only when one call reads it
    _, inv, counts = np.unique(np.stack([e["producer"].astype(np.uint64), e["storage"]]), axis=1,
                               return_inverse=True, return_counts=True)
    single = counts[inv.ravel()] == 1
    p, q = e["producer"].astype(np.int64), e["consumer"].astype(np.int64)
    same_phase = records["phase"][p] == records["phase"][q]
    ok = single & same_phase & (fusible[p] | head[p]) & fusible[q]
    parent = list(range(n))
    gemms = {int(i): 1 for i in np.nonzero(head)[0]}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    chosen = []
    for k in np.nonzero(ok)[0].tolist():
        a, b = find(int(p[k])), find(int(q[k]))
        if a != b:
            if gemms.get(a, 0) + gemms.get(b, 0) > 1:
                continue  # one matrix product per fused kernel
            lo, hi = min(a, b), max(a, b)
            parent[hi] = lo
            gemms[lo] = gemms.get(a, 0) + gemms.get(b, 0)
        chosen.append(k)
    groups: dict[int, list[int]] = {}
    for k in chosen:
        groups.setdefault(find(int(p[k])), []).append(k)
    flops = np.asarray(c["flops"], float) if c is not None else np.zeros(n)
    peak = np.asarray(c["peak"], float) if c is not None else np.full(n, np.nan)
    bw = np.asarray(c["bw"], float) if c is not None else np.full(n, np.nan)
    t_min = np.asarray(c["t_min"], float) if c is not None else np.full(n, np.nan)
    nbytes = records["bytes_read"].astype(np.int64) + records["bytes_written"].astype(np.int64)
    mod_names: dict[int, str] = {}
    op_col, mod_col = records["op"].tolist(), records["module"].tolist()

    def mod(i):
        m = mod_col[i]
        if m not in mod_names:
            mod_names[m] = module_path(m)
        return mod_names[m]

    # an intermediate's write is avoided, except the final value of a storage that existed before the block (its
    # first access in the block is a read: a parameter, an optimizer's state) and that the producer updated in
    # place: a fused kernel still writes it back. Its read is avoided either way.
    a = check_accesses(accesses, n)
    live_in: set = set()
    if chosen and len(a):
        first = np.lexsort((a["write"], a["record"], a["storage"]))
        st_sorted = a["storage"][first]
        head_rows = first[np.r_[True, st_sorted[1:] != st_sorted[:-1]]]
        live_in = set(a["storage"][head_rows[a["write"][head_rows] == 0]].tolist())
    edge_st = set(int(e["storage"][k]) for k in chosen) & live_in
    sub = a[np.isin(a["storage"], list(edge_st))] if edge_st else a[:0]
    w_ = sub["write"].astype(bool)
    reads_of = set(zip(sub["record"][~w_].tolist(), sub["storage"][~w_].tolist()))
    writes_of = set(zip(sub["record"][w_].tolist(), sub["storage"][w_].tolist()))

    def edge_saved(k):
        st, pp, qq = int(e["storage"][k]), int(p[k]), int(q[k])
        kept = st in edge_st and (pp, st) in reads_of and (qq, st) not in writes_of
        return int(e["nbytes"][k]) + (0 if kept else int(e["written"][k]))

    out = []
    for root, ks in groups.items():
        members = sorted({int(p[k]) for k in ks} | {int(q[k]) for k in ks})
        if len(members) < min_ops:
            continue
        saved = int(sum(edge_saved(k) for k in ks))
        total = int(nbytes[members].sum())
        saved = min(saved, total)
        before = float(t_min[members].sum())
        with np.errstate(invalid="ignore", divide="ignore"):
            t_compute = float(np.sum(np.where(flops[members] > 0, flops[members] / peak[members], 0.0)))
        after = max(t_compute, (total - saved) / float(bw[members[0]]))
        out.append(FusionOpportunity(
            records=members, ops=[ops[op_col[i]].name for i in members], modules=[mod(i) for i in members],
            kind="epilogue" if head[members].any() else "elementwise",
            intermediates=len(ks), bytes=total, saved_bytes=saved, t_before=before, t_after=after,
            saved_s=(before - after) if math.isfinite(before) and math.isfinite(after) else math.nan,
            phase=PHASES[int(records["phase"][members[0]])] if int(records["phase"][members[0]]) < len(PHASES)
            else "?",
            edges=[(int(p[k]), int(q[k]), edge_saved(k)) for k in ks]))
    out.sort(key=lambda f: (-(f.saved_s if math.isfinite(f.saved_s) else 0.0), -f.saved_bytes, f.records[0]))
    return out


def group_opportunities(opps: list[FusionOpportunity]) -> list[dict]:
    """Opportunities with the same op chain and kind, merged: ``{ops, kind, count, modules, saved_bytes, saved_s,
    bytes}``, most time (then bytes) saved first."""
    groups: dict[tuple, dict] = {}
    for f in opps:
        g = groups.setdefault((tuple(f.ops), f.kind, f.phase), {"ops": list(f.ops), "kind": f.kind, "phase": f.phase,
                                                                "count": 0, "modules": [], "saved_bytes": 0,
                                                                "saved_s": 0.0, "bytes": 0})
        g["count"] += 1
        g["saved_bytes"] += f.saved_bytes
        g["bytes"] += f.bytes
        g["saved_s"] += f.saved_s
        for m in f.modules:
            if m not in g["modules"]:
                g["modules"].append(m)
    return sorted(groups.values(), key=lambda g: (-(g["saved_s"] if math.isfinite(g["saved_s"]) else 0.0),
                                                  -g["saved_bytes"]))
