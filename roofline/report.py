"""The result of ``roofline.measure``: one record per op call, and roll-ups by op and by module."""

from __future__ import annotations

from collections import Counter

import numpy as np

from roofline import _core
from roofline._records import DTYPE_NAMES, PHASES, RECORD_DTYPE

_SUMMED = ("matrix_flops", "vector_flops", "special_ops", "bytes_read", "bytes_written")


def _sum(col) -> int:
    """Exact sum of a uint64 column (Python ints: no wrap-around)."""
    if len(col) == 0:
        return 0
    total = int(col.sum(dtype=np.uint64))
    if total < int(col.max()):  # wrapped: redo it exactly
        total = sum(int(x) for x in col)
    elif len(col) > 1 and int(col.max()) > (1 << 63) // len(col):
        total = sum(int(x) for x in col)
    return total


def _totals(rows) -> dict:
    t = {k: _sum(rows[k]) for k in _SUMMED}
    t["calls"] = int(len(rows))
    t["flops"] = t["matrix_flops"] + t["vector_flops"]
    t["bytes"] = t["bytes_read"] + t["bytes_written"]
    t["intensity"] = (t["flops"] / t["bytes"]) if t["bytes"] else (float("inf") if t["flops"] else 0.0)
    return t


def _fmt(n: float, unit: str = "") -> str:
    for scale, suffix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {suffix}{unit}"
    return f"{n:.0f} {unit}".rstrip()


class Report:
    """Counts of one ``measure`` block.

    ``records`` is a NumPy structured array with one row per op call (fields: ``matrix_flops``, ``vector_flops``,
    ``special_ops``, ``bytes_read``, ``bytes_written``, ``compat_flops`` (FlopCounterMode's count for the call),
    ``t_start``, ``t_end``, ``op`` (index into :attr:`op_names`), ``module`` (index into :attr:`module_sets`),
    ``phase`` (0 forward, 1 backward, 2 optimizer), ``dtype`` (code, see :attr:`dtype_names`), ``status``
    (0, or why the row's counts are missing), ``kind``, ``seq``).

    Bytes are compulsory traffic (each input read once, each output written once, no reuse across ops): a lower
    bound on memory traffic, not a measurement.
    """

    def __init__(self, records, ops, module_sets, wall_time=None, meta=None):
        self.records = np.asarray(records, dtype=RECORD_DTYPE)
        self._ops = list(ops)
        self.module_sets = [tuple(m) for m in module_sets]
        self.wall_time = wall_time
        self.meta = dict(meta or {})

    # ---- tables ---------------------------------------------------------------------------------------------------
    @property
    def op_names(self) -> list[str]:
        """Operator overload names, e.g. ``"aten.mm.default"``, indexed by ``records["op"]``."""
        return [o.name for o in self._ops]

    @property
    def dtype_names(self) -> dict[int, str]:
        return dict(DTYPE_NAMES)

    def module_path(self, module_id: int) -> str:
        """The innermost module of a module set (the deepest name; "Global" outside any module)."""
        names = [m for m in self.module_sets[module_id] if m != "Global"] or ["Global"]
        return max(names, key=lambda n: (n.count("."), n))

    # ---- totals ---------------------------------------------------------------------------------------------------
    @property
    def matrix_flops(self) -> int:
        """True matrix FLOPs (products: mm family, convolutions, attention)."""
        return _sum(self.records["matrix_flops"])

    @property
    def vector_flops(self) -> int:
        return _sum(self.records["vector_flops"])

    @property
    def special_ops(self) -> int:
        """Transcendental / special-function evaluations (exp, log, sqrt, tanh, erf, random draws)."""
        return _sum(self.records["special_ops"])

    @property
    def total_flops(self) -> int:
        return self.matrix_flops + self.vector_flops

    @property
    def bytes_read(self) -> int:
        return _sum(self.records["bytes_read"])

    @property
    def bytes_written(self) -> int:
        return _sum(self.records["bytes_written"])

    @property
    def bytes(self) -> int:
        """Compulsory bytes moved (read + written)."""
        return self.bytes_read + self.bytes_written

    @property
    def intensity(self) -> float:
        return self.total_flops / self.bytes if self.bytes else float("inf") if self.total_flops else 0.0

    @property
    def unknown_ops(self) -> dict[str, int]:
        """Ops without a cost formula (name -> calls). Their bytes are counted, their FLOPs are not."""
        unknown = [i for i, o in enumerate(self._ops) if o.kind == "unknown"]
        if not unknown:
            return {}
        counts = Counter(self.records["op"][np.isin(self.records["op"], unknown)].tolist())
        return {self._ops[i].name: int(counts[i]) for i in unknown if counts[i]}

    @property
    def errors(self) -> dict[str, tuple[int, str]]:
        """Op calls whose cost could not be evaluated (name -> (calls, reason)); their counts are 0."""
        bad = self.records[self.records["status"] != 0]
        out: dict[str, tuple[int, str]] = {}
        for op, st in zip(bad["op"].tolist(), bad["status"].tolist()):
            name = self._ops[op].name
            n, _ = out.get(name, (0, ""))
            out[name] = (n + 1, _core.status_str(st))
        return out

    # ---- roll-ups -------------------------------------------------------------------------------------------------
    def _rows(self, phase):
        if phase is None:
            return self.records
        if phase not in PHASES:
            raise ValueError(f"phase must be one of {PHASES} or None, got {phase!r}")
        return self.records[self.records["phase"] == PHASES.index(phase)]

    def by_op(self, phase: str | None = None) -> dict[str, dict]:
        """Totals per operator overload, most FLOPs first: ``{name: {calls, flops, matrix_flops, vector_flops,
        special_ops, bytes_read, bytes_written, bytes, intensity}}``. ``phase``: "forward", "backward", "optimizer"
        or None (all)."""
        rows = self._rows(phase)
        out = {}
        for i in np.unique(rows["op"]).tolist():
            out[self._ops[i].name] = _totals(rows[rows["op"] == i])
        return dict(sorted(out.items(), key=lambda kv: (-kv[1]["flops"], -kv[1]["bytes"], kv[0])))

    def _module_members(self) -> dict[str, list[int]]:
        members: dict[str, list[int]] = {}
        for mid, names in enumerate(self.module_sets):
            for n in names:
                members.setdefault(n, []).append(mid)
        return members

    def by_module(self, depth: int | None = None, phase: str | None = None) -> dict[str, dict]:
        """Totals per module, each including everything that ran inside it (forward and, attributed the way
        FlopCounterMode does, backward). ``depth`` keeps modules at most that many levels deep (the root is 1).
        "Global" is the whole run. ``phase`` restricts to one phase."""
        rows = self._rows(phase)
        out = {}
        mods = rows["module"]
        for name, mids in sorted(self._module_members().items()):
            if depth is not None and name != "Global" and name.count(".") + 1 > depth:
                continue
            sel = rows[np.isin(mods, mids)]
            if len(sel):
                out[name] = _totals(sel)
        return out

    def by_phase(self) -> dict[str, dict]:
        return {PHASES[p]: _totals(self.records[self.records["phase"] == p])
                for p in np.unique(self.records["phase"]).tolist()}

    def flop_counter_compatible(self) -> dict:
        """The counts in exactly the structure of ``FlopCounterMode.get_flop_counts()``: ``{module name: {op packet:
        FLOPs}}`` with "Global", FlopCounterMode's module names and its (sometimes over-stated) formulas, so the two
        tools can be compared one to one. The true counts are in :attr:`matrix_flops`."""
        fcm_ops = [i for i, o in enumerate(self._ops) if o.packet.split(".", 1)[-1] in _fcm_ops()]
        rows = self.records[np.isin(self.records["op"], fcm_ops)]
        out: dict = {}
        for op, mid, f in zip(rows["op"].tolist(), rows["module"].tolist(), rows["compat_flops"].tolist()):
            key = self._ops[op].packet_obj if self._ops[op].packet_obj is not None else self._ops[op].packet
            for name in self.module_sets[mid]:
                d = out.setdefault(name, {})
                d[key] = d.get(key, 0) + int(f)
        return out

    # ---- display --------------------------------------------------------------------------------------------------
    def summary(self, top: int = 10) -> str:
        lines = []
        ph = self.by_phase()
        lines.append(f"roofline report: {len(self.records)} op calls"
                     + (f", {self.wall_time * 1e3:.1f} ms wall" if self.wall_time is not None else ""))
        lines.append(f"  FLOPs   {_fmt(self.total_flops)} (matrix {_fmt(self.matrix_flops)}, vector "
                     f"{_fmt(self.vector_flops)}; special functions {_fmt(self.special_ops)})")
        lines.append(f"  bytes   {_fmt(self.bytes, 'B')} compulsory (read {_fmt(self.bytes_read, 'B')}, written "
                     f"{_fmt(self.bytes_written, 'B')}; a lower bound: no reuse across ops)")
        lines.append(f"  intensity {self.intensity:.2f} FLOP/byte")
        if ph:
            lines.append("  phases  " + ", ".join(f"{k} {_fmt(v['flops'])}FLOP" for k, v in ph.items()))
        if self.unknown_ops:
            lines.append(f"  ops without a formula (FLOPs not counted): {self.unknown_ops}")
        if self.errors:
            lines.append(f"  ops whose cost could not be evaluated: {self.errors}")
        ops = list(self.by_op().items())[:top]
        if ops:
            w = max(len(n) for n, _ in ops)
            lines.append(f"  {'op':<{w}}  {'calls':>6}  {'FLOPs':>10}  {'bytes':>10}  {'FLOP/B':>8}")
            for n, t in ops:
                lines.append(f"  {n:<{w}}  {t['calls']:>6}  {_fmt(t['flops']):>10}  {_fmt(t['bytes'], 'B'):>10}  "
                             f"{t['intensity']:>8.2f}")
        return "\n".join(lines)

    def __str__(self):
        return self.summary()

    def __repr__(self):
        return (f"<roofline.Report {len(self.records)} calls, {_fmt(self.total_flops)}FLOP, "
                f"{_fmt(self.bytes, 'B')}>")


def _fcm_ops():
    from roofline._registry import FLOP_COUNTER_OPS

    return FLOP_COUNTER_OPS
