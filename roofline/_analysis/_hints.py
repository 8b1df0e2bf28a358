"""What to change in a measured run, and what it would save: :meth:`roofline.Report.hints`.

Each rule reads the records, their classification, the dataflow edges and the ceilings, and returns a
:class:`Hint` only when its evidence holds and the estimated saving is at least ``min_share`` of the run's roofline
time (or of its bytes, for a report without ceilings). Every hint carries the calls, modules and figures it rests
on. Estimates are on the roofline (DRAM bandwidth, peaks of the ceilings): what a change could save at best, not a
prediction of the measured time.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np

from roofline._analysis import _dataflow
from roofline._datamodel._records import DTYPE_NAMES


@dataclass
class Hint:
    """One suggested change. ``kind``: the rule ("sdpa", "matmul_precision", "small_gemm", "layout_copies",
    "cast_pingpong", "optimizer_fused", "optimizer_state_init", "dropout_mask", "op_overhead"); ``message``: what to
    do and why, with the figures (written by :mod:`roofline.render._advice` from ``kind`` and ``evidence``:
    :meth:`roofline.Report.hints` returns hints with it; a rule leaves it empty); ``saved_s``: estimated seconds saved at the roof (NaN without ceilings);
    ``saved_bytes``: compulsory bytes the change avoids (0 when it avoids none: a faster unit, say); ``evidence``:
    the figures the estimate rests on; ``records``: the calls concerned; ``ops`` and ``modules``: their op names and
    innermost modules (distinct, in order)."""

    kind: str
    message: str
    saved_s: float
    saved_bytes: int
    evidence: dict
    records: list[int] = field(default_factory=list)
    ops: list[str] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)
    line: str = field(default="", repr=False, compare=False)  # str(hint), written with the message

    def __str__(self):
        return self.line or f"[{self.kind}] {self.message}"


def _distinct(xs):
    out = []
    for x in xs:
        if x not in out:
            out.append(x)
    return out


class _Ctx:
    """What the rules share: records, op names and kinds, classification, edges, ceilings."""

    def __init__(self, report, accesses):
        r = report
        self.r = r
        self.rec = r.records
        self.n = len(self.rec)
        self.names = np.array(r.op_names or [""], dtype=object)[self.rec["op"]] if self.n else \
            np.zeros(0, object)
        self.kinds = np.array(r.op_kinds or [""], dtype=object)[self.rec["op"]] if self.n else \
            np.zeros(0, object)
        self.ceil = r.ceilings
        self.c = r.classification()
        self.t_min = np.asarray(self.c["t_min"], float)
        self.bw = float(self.c["bw"][0]) if self.n else math.nan
        self.nbytes = self.rec["bytes_read"].astype(np.int64) + self.rec["bytes_written"].astype(np.int64)
        self.total_t = float(np.nansum(self.t_min)) if self.n else 0.0
        self.total_bytes = int(self.nbytes.sum())
        self.acc = accesses
        self.edges = _dataflow.data_edges(self.rec, accesses) if accesses is not None else None
        self.active = _dataflow.active(self.rec)
        sigs = getattr(r, "signatures", None)
        if accesses is not None:
            order = np.argsort(accesses["record"], kind="stable")
            self._acc_order = order
            self._acc_starts = np.searchsorted(accesses["record"][order], np.arange(self.n + 1))
            w = accesses["write"] == 1
            self.written = np.bincount(accesses["record"][w], weights=accesses["nbytes"][w].astype(float),
                                       minlength=self.n)
            self.fwd, self.bwd = _consumers(self.edges)
        self.attention: set = set()  # calls of math-path attentions found by the SDPA rule (it runs first)
        self.sigs = sigs if sigs is not None and "sig" in (self.rec.dtype.names or ()) else None

    def rows(self, i):
        """Indices into the access table of call ``i``'s rows."""
        return self._acc_order[self._acc_starts[i]:self._acc_starts[i + 1]]

    def modules(self, idx):
        return _distinct(self.r.module_path(int(self.rec["module"][i])) for i in idx)

    def ops(self, idx):
        return _distinct(str(self.names[i]) for i in idx)

    def sig(self, i):
        if self.sigs is None:
            return None
        k = int(self.rec["sig"][i])
        return self.sigs[k] if 0 <= k < len(self.sigs) else None

    def t_of_bytes(self, b):
        return b / self.bw if self.bw and math.isfinite(self.bw) else math.nan


def _t_sum(t) -> float:
    """The roofline time of a set of calls: their sum, or NaN when one of them has no time (a ceiling unknown): a
    saving is then judged by its bytes, never by a time made up from the calls whose time is known."""
    t = np.asarray(t, dtype=float)
    return float(t.sum()) if np.isfinite(t).all() else math.nan


def _consumers(edges):
    """producer -> list of edge indices, for walking the graph forward; consumer -> list, backward."""
    fwd: dict[int, list[int]] = {}
    bwd: dict[int, list[int]] = {}
    for k, (p, q) in enumerate(zip(edges["producer"].tolist(), edges["consumer"].tolist())):
        fwd.setdefault(p, []).append(k)
        bwd.setdefault(q, []).append(k)
    return fwd, bwd


def _is(name: str, *bases: str) -> bool:
    parts = str(name).split(".")
    base = parts[1] if len(parts) > 1 else parts[0]
    return base in bases


# ---- rules ----------------------------------------------------------------------------------------------------
_BMM = ("bmm", "baddbmm")
_SOFTMAX = ("_softmax", "_safe_softmax", "softmax")
# ops that may sit between the score product and the softmax, or between the softmax and the second product
_ATTN_MIDDLE = ("mul", "div", "add", "sub", "masked_fill", "masked_fill_", "where", "_to_copy", "native_dropout",
                "mul_", "div_", "add_", "clone", "contiguous", "_masked_scale", "bernoulli_", "bernoulli")


def _walk_to_bmm(x, start, edges, end, steps, forward_only):
    """From the op ``start`` along the dataflow (``edges``: op -> its edges; ``end``: the edge's field naming the op
    reached), through scale / mask ops (``_ATTN_MIDDLE``), at most ``steps`` ops deep, to a batched product:
    ``(the ops passed, the product or None)``. ``forward_only``: pass forward-phase ops only."""
    e = x.edges
    passed, found, frontier = [], None, [start]
    for _ in range(steps):
        nxt = []
        for v in frontier:
            for k in edges.get(v, []):
                u = int(e[end][k])
                if _is(x.names[u], *_BMM):
                    found = u
                elif _is(x.names[u], *_ATTN_MIDDLE) and u not in passed and (
                        not forward_only or x.rec["phase"][u] == 0):
                    passed.append(u)
                    nxt.append(u)
        if found is not None:
            break
        frontier = nxt
    return passed, found

def _rule_sdpa(x: _Ctx):
    if x.edges is None or not len(x.edges):
        return []
    fwd, bwd = x.fwd, x.bwd
    e = x.edges
    found = []
    used = set()
    for s in np.nonzero([_is(n, *_SOFTMAX) for n in x.names])[0].tolist():
        if x.rec["phase"][s] != 0 or s in used:
            continue
        # back from the softmax to the score product, through scale / mask ops; forward to the second product
        pre, b1 = _walk_to_bmm(x, s, bwd, "producer", 4, forward_only=False)
        if b1 is None:
            continue
        post, b2 = _walk_to_bmm(x, s, fwd, "consumer", 3, forward_only=True)
        if b2 is None:
            continue
        middle = sorted(set(pre) | {s} | set(post))
        members = sorted(set(middle) | {b1, b2})
        used.update(members)
        # the score and probability matrices: written by the first product and the middle ops, read by the middle
        # ops and the second product; the fused kernel keeps them on chip (reads of masks stay)
        inside = set(members)
        saved = sum(int(e["nbytes"][k]) for p in [b1] + middle for k in fwd.get(p, [])
                    if int(e["consumer"][k]) in inside)
        # every write of the first product and the middle ops (they end in the probabilities)
        saved += int(x.written[[b1] + middle].sum())
        # roofline times before and after; unknown (NaN) when a call's time or a ceiling is unknown, so that the
        # hint is judged by its bytes, never by a saving made up from the part that is known
        before = _t_sum(x.t_min[members])
        flops = float(x.c["flops"][[b1, b2]].sum())
        peak = float(x.c["peak"][b1])
        remaining = max(int(x.nbytes[members].sum()) - saved, 0)
        t_flops, t_bytes = flops / peak if peak > 0 else math.nan, x.t_of_bytes(remaining)
        after = max(t_flops, t_bytes) if math.isfinite(t_flops) and math.isfinite(t_bytes) else math.nan
        found.append((members, saved, before, after, b1, s, b2))
    if not found:
        return []
    saved_b = sum(f[1] for f in found)
    before = sum(f[2] for f in found)
    after = sum(f[3] for f in found)
    members = sorted(i for f in found for i in f[0])
    scores = int(x.written[found[0][4]])
    ev = {"instances": len(found), "score_bytes": scores, "saved_bytes": saved_b, "t_before_s": before,
          "t_after_s": after, "first_product": str(x.names[found[0][4]]), "softmax": str(x.names[found[0][5]])}
    if x.sig(found[0][4]):
        ev["score_product_inputs"] = x.sig(found[0][4])

    x.attention = set(members)
    return [Hint("sdpa", "", before - after, saved_b, ev, members, x.ops(members), x.modules(members))]


_FASTER = (("tfloat32", "torch.set_float32_matmul_precision('high') (TF32 matrix units)", 1.0),
           ("bfloat16", "torch.autocast(dtype=torch.bfloat16)", 0.5),
           ("float16", "torch.autocast(dtype=torch.float16)", 0.5))


def _rule_matmul_precision(x: _Ctx):
    if x.ceil is None:
        return []
    f32 = DTYPE_NAMES_INV.get("float32")
    idx = np.nonzero((x.rec["matrix_flops"] > 0) & (x.rec["dtype"] == f32) & x.active)[0]
    if not len(idx):
        return []
    roofs = x.r.roofs
    p32 = roofs.peak("matrix", "float32").value
    if not math.isfinite(p32):
        return []
    flops = x.c["flops"][idx].astype(float)
    nb = x.nbytes[idx].astype(float)
    best = None
    for dt, how, byte_scale in _FASTER:
        own = roofs.peak("matrix", dt)  # only a unit the device really has, of the roofs' source: no fallback
        if own.peak_of != ("matrix", dt) or (roofs.source != "best" and own.source != roofs.source):
            continue
        value = own.value
        if not value or not math.isfinite(value) or value <= p32 * 1.05:
            continue
        after = np.maximum(flops / value, nb * byte_scale / x.bw)
        saved = _t_sum(x.t_min[idx]) - _t_sum(after)
        # the largest saving; a known one over an unknown (NaN) one
        if best is None or saved > best[0] or (math.isnan(best[0]) and not math.isnan(saved)):
            best = (saved, dt, how, value, int(nb.sum() * (1 - byte_scale)))
    if best is None:
        return []
    saved, dt, how, value, saved_b = best
    compute = int((x.c["bound"][idx] == 2).sum())

    ev = {"calls": int(len(idx)), "compute_bound_calls": compute, "flops": float(flops.sum()),
          "float32_matrix_peak": p32, f"{dt}_matrix_peak": value, "t_before_s": _t_sum(x.t_min[idx]),
          "t_after_s": _t_sum(x.t_min[idx]) - saved}
    ev["dtype"], ev["how"] = dt, how  # the faster dtype and how to use it
    return [Hint("matmul_precision", "", saved, saved_b, ev, idx.tolist(), x.ops(idx), x.modules(idx))]


def _rule_small_gemm(x: _Ctx):
    if x.ceil is None:
        return []
    idx = np.nonzero((x.rec["matrix_flops"] > 0) & (x.c["bound"] == 1) & x.active)[0]
    # the products of a math-path attention are the SDPA hint's business, not batching's
    idx = np.array([i for i in idx.tolist() if i not in x.attention], dtype=np.int64)
    if not len(idx):
        return []
    t = x.t_min[idx]
    at_peak = x.c["flops"][idx] / x.c["peak"][idx]
    saved = _t_sum(t) - _t_sum(at_peak)
    ridge = float(np.nanmedian(x.c["ridge"][idx])) if "ridge" in x.c else float(np.nanmedian(x.c["peak"][idx] / x.bw))
    inten = x.c["flops"][idx] / x.c["bytes"][idx]
    ev = {"calls": int(len(idx)), "median_intensity": float(np.median(inten)), "ridge": ridge,
          "t_roof_s": _t_sum(t), "t_at_peak_s": _t_sum(at_peak)}
    shapes = _distinct(s for s in (x.sig(i) for i in idx[:50]) if s)
    if shapes:
        ev["shapes"] = shapes[:5]
    return [Hint("small_gemm", "", saved, 0, ev, idx.tolist(), x.ops(idx), x.modules(idx))]


_LAYOUT = ("clone", "contiguous", "copy_", "copy", "cat", "stack", "permute_copy", "transpose_copy", "t_copy",
           "expand_copy", "view_copy", "_unsafe_view_copy", "constant_pad_nd", "repeat", "hstack", "vstack")


def _rule_layout(x: _Ctx, share: float = 0.10):
    idx = np.nonzero(np.array([_is(n, *_LAYOUT) for n in x.names], bool) & x.active)[0] if x.n else []
    if not len(idx) or not x.total_bytes:
        return []
    b = int(x.nbytes[idx].sum())
    frac = b / x.total_bytes
    if frac < share:
        return []
    t = _t_sum(x.t_min[idx]) if x.ceil is not None else math.nan
    by = {}
    for i in idx:
        by[str(x.names[i])] = by.get(str(x.names[i]), 0) + int(x.nbytes[i])

    ev = {"calls": int(len(idx)), "bytes": b, "share_of_bytes": frac, "by_op": by, "t_roof_s": t}
    return [Hint("layout_copies", "", t, b, ev, list(map(int, idx)), x.ops(idx), x.modules(idx))]


def _rule_cast_pingpong(x: _Ctx):
    if x.edges is None or not len(x.edges):
        return []
    e = x.edges
    cast = np.array([_is(n, "_to_copy", "to") for n in x.names], bool)
    pairs = []
    read = {}
    a = x.acc
    for rr, nb, w in zip(a["record"].tolist(), a["nbytes"].tolist(), a["write"].tolist()):
        if cast[rr]:
            read.setdefault(rr, [0, 0])[w] += nb
    for p, q in zip(e["producer"].tolist(), e["consumer"].tolist()):
        if cast[p] and cast[q] and x.rec["dtype"][p] != x.rec["dtype"][q]:
            rp, rq = read.get(p, [0, 0]), read.get(q, [0, 0])
            if rp[0] and rq[1] == rp[0]:  # converted back to the size it had: A -> B -> A
                pairs.append((p, q))
    if not pairs:
        return []
    idx = sorted({i for pq in pairs for i in pq})
    b = int(x.nbytes[idx].sum())
    t = _t_sum(x.t_min[idx]) if x.ceil is not None else math.nan
    names = {DTYPE_NAMES.get(int(x.rec["dtype"][p]), "?") + " -> " + DTYPE_NAMES.get(int(x.rec["dtype"][q]), "?")
             + " -> back" for p, q in pairs}
    ev = {"pairs": len(pairs), "bytes": b, "t_roof_s": t, "casts": [(int(p), int(q)) for p, q in pairs[:10]],
          "conversions": sorted(names)}
    return [Hint("cast_pingpong", "", t, b, ev, idx, x.ops(idx), x.modules(idx))]


def _rule_optimizer(x: _Ctx):
    opt = np.nonzero((x.rec["phase"] == 2) & x.active)[0]
    if len(opt) < 2 or x.acc is None:
        return []
    names = [str(x.names[i]) for i in opt]
    if any("_fused_" in n for n in names):
        return []
    a = x.acc
    m = np.isin(a["record"], opt)
    b = int(x.nbytes[opt].sum())
    # a fused kernel reads each storage it needs once and writes each it updates once; temporaries (storages
    # whose first access in the step is a write by a call that is not a fill: sqrt(v), its sum with eps) stay in
    # registers. A fill creates optimizer state (zeros_like), which is kept.
    sub = a[m]
    order = np.lexsort((sub["write"], sub["record"], sub["storage"]))
    st_sorted = sub["storage"][order]
    firsts = order[np.r_[True, st_sorted[1:] != st_sorted[:-1]]] if len(order) else order
    is_fill = np.array([k == "fill" for k in x.kinds], bool)
    temp = firsts[(sub["write"][firsts] == 1) & ~is_fill[sub["record"][firsts]]]
    m &= ~np.isin(a["storage"], sub["storage"][temp])
    minimal = 0
    for w in (0, 1):
        sel = m & (a["write"] == w)
        if sel.any():
            st, nb = a["storage"][sel], a["nbytes"][sel]
            order = np.lexsort((nb, st))
            st, nb = st[order], nb[order]
            last = np.r_[st[1:] != st[:-1], True]
            minimal += int(nb[last].sum())
    saved = b - minimal
    if saved <= 0.2 * b:
        return []
    foreach = any("_foreach_" in n for n in names)

    ev = {"calls": int(len(opt)), "bytes": b, "fused_bytes": minimal, "foreach": foreach}
    return [Hint("optimizer_fused", "", x.t_of_bytes(saved), saved, ev, opt.tolist(), x.ops(opt),
                 x.modules(opt))]


def _rule_state_init(x: _Ctx):
    fill = np.array([k == "fill" for k in x.kinds], bool) if x.n else np.zeros(0, bool)
    idx = np.nonzero((x.rec["phase"] == 2) & fill & (x.rec["bytes_written"] > 8))[0]
    if not len(idx):
        return []
    b = int(x.rec["bytes_written"][idx].sum())
    t = _t_sum(x.t_min[idx]) if x.ceil is not None else math.nan

    ev = {"calls": int(len(idx)), "bytes_written": b, "t_roof_s": t}
    return [Hint("optimizer_state_init", "", t, b, ev, idx.tolist(), x.ops(idx), x.modules(idx))]


def _rule_dropout(x: _Ctx):
    if x.acc is None:
        return []
    idx = np.nonzero(np.array([_is(n, "native_dropout", "bernoulli_", "bernoulli") for n in x.names], bool)
                     & (x.rec["phase"] == 0) & x.active)[0] if x.n else []
    if not len(idx):
        return []
    a, e = x.acc, x.edges
    mask_bytes, reread = 0, 0
    for i in idx:
        w = [j for j in x.rows(int(i)).tolist() if a["write"][j] == 1]
        if _is(x.names[i], "native_dropout"):
            if len(w) < 2:
                continue
            j = min(w, key=lambda k: int(a["nbytes"][k]))  # the mask: one byte per element, the smaller output
        elif w:
            j = w[0]
        else:
            continue
        st = a["storage"][j]
        mask_bytes += int(a["nbytes"][j])
        reread += sum(int(e["nbytes"][k]) for k in x.fwd.get(int(i), []) if e["storage"][k] == st)
    saved = mask_bytes + reread
    if not saved:
        return []

    ev = {"calls": int(len(idx)), "mask_bytes": mask_bytes, "mask_reread_bytes": reread}
    return [Hint("dropout_mask", "", x.t_of_bytes(saved), saved, ev, list(map(int, idx)), x.ops(idx),
                 x.modules(idx))]


def _rule_overhead(x: _Ctx, min_calls: int = 50, tiny_s: float = 10e-6):
    """Many tiny ops and a wall time mostly spent between them: the wall time less the instrumentation's own
    estimate and less the ops' measured times. Needs per-op timing: without it, time between ops cannot be told
    from slow kernels."""
    r = x.r
    if r.wall_time is None or x.ceil is None or x.n < min_calls or not r.timed:
        return []
    act = np.nonzero(x.active)[0]
    if len(act) < min_calls:
        return []
    instr = ((r.overhead.get("counting_per_op_s") or 0.0) + (r.overhead.get("timing_per_op_s") or 0.0)) * x.n
    wall = float(r.wall_time) - instr
    inside = float(np.nansum(x.rec["t_end"] - x.rec["t_start"]))
    gap = wall - inside
    med = float(np.nanmedian(x.t_min[act]))
    per_op = gap / len(act)
    if wall <= 0 or gap < 0.5 * wall or not med < tiny_s or not med < per_op:
        return []
    ev = {"calls": int(len(act)), "median_t_min_s": med, "wall_s": wall, "ops_time_s": inside,
          "instrumentation_s": instr, "overhead_per_call_s": per_op}
    return [Hint("op_overhead", "", gap, 0, ev, [], [], [])]


RULES = (_rule_sdpa, _rule_matmul_precision, _rule_small_gemm, _rule_layout, _rule_cast_pingpong, _rule_optimizer,
         _rule_state_init, _rule_dropout, _rule_overhead)

DTYPE_NAMES_INV = {v: k for k, v in DTYPE_NAMES.items()}


def hints(report, accesses=None, min_share: float = 0.01) -> list[Hint]:
    """The hints of :meth:`roofline.Report.hints`: every rule's finding whose saving is at least ``min_share`` of
    the run's roofline time (of its compulsory bytes when the saving has no time), most time saved first."""
    if isinstance(min_share, bool) or not isinstance(min_share, numbers.Real):
        raise TypeError(f"hints: min_share must be a number in [0, 1], got {min_share!r} ({type(min_share).__name__})")
    if not 0 <= min_share <= 1:
        raise ValueError(f"hints: min_share must be a number in [0, 1], got {min_share!r}")
    if accesses is not None:
        accesses = _dataflow.check_accesses(accesses, len(report.records))
    x = _Ctx(report, accesses)
    out = []
    for rule in RULES:
        for h in rule(x):
            if math.isfinite(h.saved_s) and x.total_t > 0:
                keep = h.saved_s >= min_share * x.total_t
            else:
                keep = x.total_bytes > 0 and h.saved_bytes >= min_share * x.total_bytes
            if keep:
                out.append(h)
    # most time saved first; hints whose saving is unknown after all the timed ones, most bytes first
    out.sort(key=lambda h: (not math.isfinite(h.saved_s), -h.saved_s if math.isfinite(h.saved_s) else 0.0,
                            -h.saved_bytes))
    return out
