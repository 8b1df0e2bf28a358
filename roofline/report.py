"""The result of ``roofline.measure``: one record per op call, and roll-ups by op and by module."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

import base64
import binascii
import json
import math
import warnings

from roofline import _core
from roofline._records import DTYPE_NAMES, PHASES, RECORD_DTYPE

BOUNDS = {_core.BOUND_NONE: "none", _core.BOUND_MEMORY: "memory", _core.BOUND_COMPUTE: "compute",
          _core.BOUND_BANDWIDTH: "bandwidth"}
_FLOAT_DTYPES = {"float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
                 "float8_e5m2fnuz", "complex64", "complex128", "complex32"}
SCHEMA_VERSION = 1

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


@dataclass
class OpInfo:
    """One distinct operator (overload) seen in a run."""

    name: str            # "aten.mm.default"
    packet: str          # "aten.mm"
    kind: str            # cost kind name, "python" for a user formula, "unknown" without a formula
    packet_obj: object = None  # the OpOverloadPacket (FlopCounterMode's key), when torch is loaded

    def key(self):
        """FlopCounterMode's key for this op: the OpOverloadPacket when torch can resolve it, else the name."""
        if self.packet_obj is None:
            try:
                import torch

                ns, name = self.packet.split(".", 1)
                self.packet_obj = getattr(getattr(torch.ops, ns), name)
            except (ImportError, AttributeError, ValueError):
                return self.packet
        return self.packet_obj


class Report:
    """Counts of one ``measure`` block.

    ``records`` is a NumPy structured array with one row per op call (fields: ``matrix_flops``, ``vector_flops``,
    ``special_ops``, ``bytes_read``, ``bytes_written``, ``compat_flops`` (FlopCounterMode's count for the call),
    ``t_start``, ``t_end``, ``op`` (index into :attr:`op_names`), ``module`` (index into :attr:`module_sets`),
    ``phase`` (0 forward, 1 backward, 2 optimizer), ``dtype`` (code, see :attr:`dtype_names`), ``status``
    (0, or why the row's counts are missing), ``kind``, ``seq``).

    Bytes are compulsory traffic (each input read once, each output written once, no reuse across ops): a lower
    bound on memory traffic, not a measurement.

    Other attributes: ``module_sets`` (one tuple of module names per ``records["module"]`` value: every module that
    was active when the op ran, "Global" included), ``wall_time`` (seconds of the ``measure`` block, device
    synchronised at entry and exit; None when ``timing=None``), ``meta`` (timing mode, devices that ran ops,
    package version, ceilings source, ``projected_to`` for a projection) and ``overhead`` (the per-op cost of the
    instrumentation, seconds: ``counting_per_op_s`` and, with ``timing="op"``, ``timing_per_op_s``).

    A report is built by :func:`roofline.measure` (or :func:`roofline.load`, :meth:`project`); constructing one
    by hand is not part of the API.
    """

    def __init__(self, records, ops, module_sets, wall_time=None, meta=None, ceilings=None, overhead=None):
        self.records = np.asarray(records, dtype=RECORD_DTYPE)
        self._ops = list(ops)
        self.module_sets = [tuple(m) for m in module_sets]
        self.wall_time = wall_time
        self.meta = dict(meta or {})
        self.overhead = dict(overhead or {})
        self._ceilings_spec = ceilings
        self._ceilings = None      # resolved Ceilings
        self._source = "measured"  # which figures of it: "measured" or "datasheet"
        self._ceilings_note = ""
        self._class = None         # cached per-record classification

    # ---- tables ---------------------------------------------------------------------------------------------------
    @property
    def op_names(self) -> list[str]:
        """Operator overload names, e.g. ``"aten.mm.default"``, indexed by ``records["op"]``."""
        return [o.name for o in self._ops]

    @property
    def dtype_names(self) -> dict[int, str]:
        """Dtype code -> name (``"float32"``, ``"bfloat16"``, ...; 0 is ``"unknown"``), for ``records["dtype"]``."""
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
        """Vector FLOPs (element-wise ops, norms, softmax, reductions, losses, optimizer updates, bias adds), exact."""
        return _sum(self.records["vector_flops"])

    @property
    def special_ops(self) -> int:
        """Transcendental / special-function evaluations (exp, log, sqrt, tanh, erf, random draws)."""
        return _sum(self.records["special_ops"])

    @property
    def total_flops(self) -> int:
        """``matrix_flops + vector_flops`` (special-function evaluations are not FLOPs: see :attr:`special_ops`)."""
        return self.matrix_flops + self.vector_flops

    @property
    def bytes_read(self) -> int:
        """Compulsory bytes read: every input once, at the size it occupies in memory."""
        return _sum(self.records["bytes_read"])

    @property
    def bytes_written(self) -> int:
        """Compulsory bytes written: every output (or in-place argument) once."""
        return _sum(self.records["bytes_written"])

    @property
    def bytes(self) -> int:
        """Compulsory bytes moved (read + written)."""
        return self.bytes_read + self.bytes_written

    @property
    def intensity(self) -> float:
        """Arithmetic intensity of the whole run, ``total_flops / bytes`` in FLOP per byte (inf when FLOPs move no
        bytes, 0 when nothing was counted)."""
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
        """Totals per phase that ran (``"forward"``, ``"backward"``, ``"optimizer"``), each with the fields of
        :meth:`by_op`."""
        return {PHASES[p]: _totals(self.records[self.records["phase"] == p])
                for p in np.unique(self.records["phase"]).tolist()}

    def flop_counter_compatible(self) -> dict:
        """The counts in exactly the structure of ``FlopCounterMode.get_flop_counts()``: ``{module name: {op packet:
        FLOPs}}`` with "Global", FlopCounterMode's module names and its (sometimes over-stated) formulas, so the two
        tools can be compared one to one. The true counts are in :attr:`matrix_flops`."""
        fcm_ops = [i for i, o in enumerate(self._ops)
                   if o.packet.startswith("aten.") and o.packet.split(".", 1)[-1] in _fcm_ops()]
        rows = self.records[np.isin(self.records["op"], fcm_ops)]
        out: dict = {}
        for op, mid, f in zip(rows["op"].tolist(), rows["module"].tolist(), rows["compat_flops"].tolist()):
            key = self._ops[op].key()
            for name in self.module_sets[mid]:
                d = out.setdefault(name, {})
                d[key] = d.get(key, 0) + int(f)
        return out

    # ---- ceilings and classification -----------------------------------------------------------------------
    @property
    def ceilings(self):
        """The :class:`roofline.Ceilings` ops are judged against (resolved on first use), or None when the
        run has no device with ceilings (e.g. counted on meta: use :meth:`project`)."""
        if self._ceilings is None and self._ceilings_spec is not None:
            self._resolve_ceilings()
        return self._ceilings

    @property
    def ceilings_source(self) -> str:
        """Which figures of :attr:`ceilings` the roofline uses: "measured", "datasheet", or "best" (measured where
        present, else datasheet: for a :class:`roofline.Ceilings` passed to ``measure`` or ``project``)."""
        self.ceilings  # noqa: B018  (resolves)
        return self._source

    def _resolve_ceilings(self):
        from roofline import _ceilings as _ceil
        from roofline import devices

        spec = self._ceilings_spec
        self._ceilings_spec = None
        if isinstance(spec, _ceil.Ceilings):
            self._ceilings, self._source = spec, self.meta.get("ceilings_source", "best")
            return
        devs = self.meta.get("devices") or []
        device = next((d for d in devs if d.startswith("cuda")), "cpu" if "cpu" in devs else None)
        if "meta" in devs or "fake" in devs:
            device = None  # counted without running: only a projection has ceilings
        if spec in ("measured", "datasheet"):
            if device is None:
                self._ceilings_note = (f"ops ran on {', '.join(devs) or 'no device'}: no ceilings to judge them "
                                       "against; use r.project('<device>')")
                return
            if spec == "datasheet" and device.startswith("cuda"):
                import torch

                name = torch.cuda.get_device_name(torch.device(device))
                ds = devices.lookup(name)
                if ds is None:
                    warnings.warn(f"roofline: no datasheet entry for {name!r}; using measured ceilings",
                                  stacklevel=3)
                else:
                    self._ceilings, self._source = _ceil.Ceilings.from_datasheet(ds, device=device), "datasheet"
                    return
            try:
                self._ceilings = _ceil.ceilings(device)
                self._source = "measured" if spec == "measured" else "datasheet"
            except Exception as e:  # a GPU without NVRTC, say: say so, and keep the counts usable
                self._ceilings_note = f"ceilings of {device} unavailable: {e}"
            return
        if isinstance(spec, str):
            self._ceilings = _ceil.Ceilings.from_datasheet(devices.get(spec))
            self._source = "datasheet"
            return
        raise TypeError(f"ceilings must be 'measured', 'datasheet', a device name or a Ceilings, got {spec!r}")

    def _peaks(self, rows):
        """Per-record (peak FLOP/s of the record's own unit and dtype, DRAM bandwidth), NaN where unknown."""
        c = self.ceilings
        n = len(rows)
        if c is None:
            return np.full(n, np.nan), np.full(n, np.nan)
        from roofline._ceilings import CeilingNotAvailable

        unit = (rows["matrix_flops"] > 0).astype(np.int64)  # 1 matrix, 0 vector
        key = unit * 256 + rows["dtype"].astype(np.int64)
        peak = np.full(n, np.nan)
        notes = []
        for k in np.unique(key).tolist():
            u, dt = ("matrix" if k // 256 else "vector"), DTYPE_NAMES.get(k % 256, "unknown")
            if dt not in _FLOAT_DTYPES:
                dt = "float32"  # integer / bool element-wise work: judged against the fp32 vector rate
            try:
                choice = c.resolve_peak(u, dt, self._source)
                value = choice.value
                if choice.note:
                    notes.append(choice.note)
            except (CeilingNotAvailable, ValueError) as e:  # e.g. complex or fp8 variants with no ceiling
                value = math.nan
                notes.append(str(e))
            peak[key == k] = value
        try:
            bw = c.bandwidth("DRAM", self._source)
        except CeilingNotAvailable as e:
            try:  # a CPU has no datasheet bandwidth: use the measured one, and say so
                bw = c.bandwidth("DRAM", "best")
                notes.append(f"no {self._source} DRAM bandwidth: using the measured one")
            except CeilingNotAvailable:
                bw = math.nan
                notes.append(str(e))
        self._peak_notes = sorted(set(notes))
        return peak, np.full(n, bw)

    def _times(self, rows):
        return rows["t_end"] - rows["t_start"]

    @property
    def timed(self) -> bool:
        """Whether ops were timed individually (``timing="op"``)."""
        return bool(len(self.records)) and bool(np.isfinite(self.records["t_start"]).any())

    def classification(self) -> dict:
        """Per-record roofline arithmetic (computed in C, see csrc/classify.h): a dict of NumPy arrays aligned with
        :attr:`records`: ``intensity`` (FLOP/byte), ``ridge`` (peak / bw), ``attainable`` (FLOP/s), ``t_min``
        (seconds on the roofline: ``max(flops / peak, bytes / bw)``), ``achieved_flops``, ``achieved_bytes``,
        ``efficiency`` (achieved / attainable = t_min / time), ``mfu`` (flops / (time x peak)), ``mbu`` (bytes /
        (time x bw)), ``bound`` (codes: 0 none, 1 memory, 2 compute, 3 bandwidth; names in
        ``roofline.report.BOUNDS``), ``flags`` (bits: 1 above the peak, 2 above the bandwidth, 4 untimed, 8 zero
        time, 16 no ceiling), and the ``peak`` (FLOP/s of the record's own unit and dtype), ``bw`` (DRAM bytes/s),
        ``flops`` (matrix + vector) and ``bytes`` each record is judged with. Rates are NaN for untimed records and
        where a ceiling is missing. A record is "matrix" when it has matrix FLOPs; all its FLOPs are then judged
        against the matrix peak of its dtype."""
        if self._class is None:
            r = self.records
            peak, bw = self._peaks(r)
            flops = r["matrix_flops"].astype(np.float64) + r["vector_flops"].astype(np.float64)
            nbytes = r["bytes_read"].astype(np.float64) + r["bytes_written"].astype(np.float64)
            res = _core.classify(flops, nbytes, self._times(r), peak, bw)
            res["peak"], res["bw"], res["flops"], res["bytes"] = peak, bw, flops, nbytes
            self._class = res
        return self._class

    # ---- grouped analysis ------------------------------------------------------------------------------------
    def _group(self, mask, c) -> dict:
        """Roll-up of the records selected by ``mask``: counts, roofline time, measured time, rates."""
        flops, nbytes = c["flops"][mask], c["bytes"][mask]
        t_min = c["t_min"][mask]
        times = self._times(self.records[mask])
        out = {"calls": int(mask.sum()), "flops": float(flops.sum()), "bytes": float(nbytes.sum())}
        out["intensity"] = out["flops"] / out["bytes"] if out["bytes"] else (math.inf if out["flops"] else 0.0)
        finite = np.isfinite(t_min)
        out["t_min"] = float(t_min[finite].sum()) if finite.any() else math.nan
        bound = c["bound"][mask]
        tc = float(t_min[finite & (bound == _core.BOUND_COMPUTE)].sum()) if finite.any() else 0.0
        out["compute_share"] = tc / out["t_min"] if out["t_min"] and out["t_min"] > 0 else math.nan
        out["bound"] = (_group_bound(bound, t_min) if finite.any() else
                        ("none" if not (out["flops"] or out["bytes"]) else "?"))
        timed = np.isfinite(times)
        out["time"] = float(times[timed].sum()) if timed.any() else math.nan
        t = out["time"]
        peak_time = _peak_time(flops, c["peak"][mask]) if out["flops"] else 0.0  # time at each op's own peak
        bw = c["bw"][mask][0] if mask.any() else math.nan
        if t and t > 0 and math.isfinite(t):
            out["achieved_flops"] = out["flops"] / t
            out["achieved_bytes"] = out["bytes"] / t
            out["efficiency"] = out["t_min"] / t if math.isfinite(out["t_min"]) else math.nan
            out["mfu"] = peak_time / t if out["flops"] else math.nan
            out["mbu"] = out["bytes"] / (t * bw) if bw == bw else math.nan
        else:
            for k in ("achieved_flops", "achieved_bytes", "efficiency", "mfu", "mbu"):
                out[k] = math.nan
        out["above_ceiling"] = int(((c["flags"][mask] & (_core.FLAG_ABOVE_PEAK | _core.FLAG_ABOVE_BW)) != 0).sum())
        return out

    def analysis(self, by: str = "op", depth: int | None = None, phase: str | None = None) -> dict[str, dict]:
        """Roofline roll-up per op name (``by="op"``) or per module (``by="module"``, with ``depth``), most time
        first (roofline time when untimed): each row has calls, flops, bytes, intensity, t_min (seconds on the
        roofline), time (measured, NaN when untimed), achieved_flops, achieved_bytes, efficiency (t_min / time:
        the fraction of the attainable rate reached), mfu, mbu, bound ("compute", "memory", "bandwidth" for ops
        with no FLOPs, "none" for ops that move nothing, "mixed" when neither bound holds 80% of the group's
        roofline time, or "?" without ceilings), compute_share (share of roofline time in compute-bound calls) and
        above_ceiling (calls whose achieved rate exceeds its ceiling). A group's mfu is the time its calls' FLOPs
        would take at their own peaks over their measured time; its mbu is bytes / (measured time x DRAM
        bandwidth)."""
        c = self.classification()
        if phase is not None and phase not in PHASES:
            raise ValueError(f"phase must be one of {PHASES} or None, got {phase!r}")
        sel = np.ones(len(self.records), bool) if phase is None else self.records["phase"] == PHASES.index(phase)
        rows = {}
        if by == "op":
            for i in np.unique(self.records["op"][sel]).tolist():
                rows[self._ops[i].name] = self._group(sel & (self.records["op"] == i), c)
        elif by == "module":
            mods = self.records["module"]
            for name, mids in sorted(self._module_members().items()):
                if depth is not None and name != "Global" and name.count(".") + 1 > depth:
                    continue
                m = sel & np.isin(mods, mids)
                if m.any():
                    rows[name] = self._group(m, c)
        else:
            raise ValueError(f"by must be 'op' or 'module', got {by!r}")

        def key(kv):
            r = kv[1]
            t = r["time"] if math.isfinite(r["time"]) else r["t_min"]
            return (-(t if math.isfinite(t) else 0.0), -r["flops"], kv[0])

        return dict(sorted(rows.items(), key=key))

    def totals(self) -> dict:
        """Whole-run figures, a dict with the keys of an :meth:`analysis` row over all records (``calls``,
        ``flops``, ``bytes``, ``intensity``, ``t_min``, ``compute_share``, ``bound``, ``above_ceiling``) plus
        ``wall_time``; when the block was timed, ``time`` is the wall time and the rates use it: ``achieved_flops``
        and ``achieved_bytes`` (per second of wall time), ``efficiency`` (t_min / wall time), MFU (the time each
        op's FLOPs would take at the peak of its own unit and dtype, summed, over the wall time) and MBU (bytes /
        (wall time x DRAM bandwidth)). The wall time includes Python and framework overhead between ops, so these
        are lower than the per-op figures of :meth:`analysis`."""
        c = self.classification()
        g = self._group(np.ones(len(self.records), bool), c)
        t = self.wall_time
        if t and t > 0:
            g["time"] = t
            g["achieved_flops"] = g["flops"] / t
            g["achieved_bytes"] = g["bytes"] / t
            g["mfu"] = _peak_time(c["flops"], c["peak"]) / t if g["flops"] else math.nan
            g["mbu"] = g["bytes"] / (t * c["bw"][0]) if len(c["bw"]) else math.nan
            g["efficiency"] = g["t_min"] / t if math.isfinite(g["t_min"]) else math.nan
        g["wall_time"] = t
        return g

    # ---- display ----------------------------------------------------------------------------------------------
    def table(self, by: str = "op", depth: int | None = None, top: int | None = 15, phase: str | None = None) -> str:
        """A text table of :meth:`analysis` (``top`` rows, None for all)."""
        rows = list(self.analysis(by, depth, phase).items())
        if top is not None:
            rows = rows[:top]
        if not rows:
            return "(no ops)"
        timed = any(math.isfinite(r["time"]) for _, r in rows)
        w = min(max(len(n) for n, _ in rows), 60)
        hdr = (f"{'op' if by == 'op' else 'module':<{w}} {'calls':>6} {'FLOPs':>9} {'bytes':>9} {'FLOP/B':>7} "
               f"{'roof ms':>8}")
        if timed:
            hdr += f" {'time ms':>8} {'achieved':>12} {'% roof':>7} {'MFU':>6} {'MBU':>6}"
        hdr += f" {'bound':>9}"
        lines = [hdr]
        for name, r in rows:
            n = name if len(name) <= w else "..." + name[-(w - 3):]
            line = (f"{n:<{w}} {r['calls']:>6} {_fmt(r['flops']):>9} {_fmt(r['bytes'], 'B'):>9} "
                    f"{r['intensity']:>7.2f} {_ms(r['t_min']):>8}")
            if timed:
                rate = (_fmt(r["achieved_flops"], "FLOP/s") if r["flops"] else _fmt(r["achieved_bytes"], "B/s")) \
                    if math.isfinite(r["achieved_bytes"]) else "-"
                line += (f" {_ms(r['time']):>8} {rate:>12} {_pct(r['efficiency']):>7} {_pct(r['mfu']):>6} "
                         f"{_pct(r['mbu']):>6}")
            flag = "!" if r["above_ceiling"] else ""
            line += f" {r['bound'] + flag:>9}"
            lines.append(line)
        return "\n".join(lines)

    def summary(self, top: int = 10) -> str:
        """The text ``print(r)`` shows: totals, phases, ceilings, achieved rates, MFU/MBU (against the wall time),
        unknown ops and errors, then the ``top`` ops by time (:meth:`table`, or by FLOPs without ceilings)."""
        lines = [f"roofline report: {len(self.records)} op calls"
                 + (f", {self.wall_time * 1e3:.1f} ms wall" if self.wall_time is not None else "")
                 + (f", projected onto {self.meta['projected_to']}" if self.meta.get("projected_to") else "")]
        lines.append(f"  FLOPs   {_fmt(self.total_flops)} (matrix {_fmt(self.matrix_flops)}, vector "
                     f"{_fmt(self.vector_flops)}; special functions {_fmt(self.special_ops)})")
        lines.append(f"  bytes   {_fmt(self.bytes, 'B')} compulsory (read {_fmt(self.bytes_read, 'B')}, written "
                     f"{_fmt(self.bytes_written, 'B')}; a lower bound: no reuse across ops)")
        lines.append(f"  intensity {self.intensity:.2f} FLOP/byte")
        ph = self.by_phase()
        if ph:
            lines.append("  phases  " + ", ".join(f"{k} {_fmt(v['flops'])}FLOP" for k, v in ph.items()))
        c = self.ceilings
        if c is not None and len(self.records):
            t = self.totals()
            lines.append(f"  ceilings ({self._source}) {c.name}: DRAM {_fmt(self.classification()['bw'][0], 'B/s')}")
            if t["wall_time"]:
                lines.append(f"  achieved {_fmt(t['achieved_flops'], 'FLOP/s')}, {_fmt(t['achieved_bytes'], 'B/s')}"
                             f"; MFU {_pct(t['mfu'])}, MBU {_pct(t['mbu'])}")
            lines.append(f"  roofline time {_ms(t['t_min'])} ms; compute-bound share {_pct(t['compute_share'])}")
            if self.overhead.get("counting_per_op_s"):
                o = self.overhead
                est = o["counting_per_op_s"] * len(self.records) + o.get("timing_per_op_s", 0) * len(self.records)
                lines.append(f"  instrumentation: ~{o['counting_per_op_s'] * 1e6:.1f} us/op counting"
                             + (f" + {o['timing_per_op_s'] * 1e6:.2f} us/op timing" if o.get("timing_per_op_s")
                                else "") + f" (~{est * 1e3:.1f} ms of the wall time)")
        elif self._ceilings_note:
            lines.append(f"  {self._ceilings_note}")
        if self.unknown_ops:
            lines.append(f"  ops without a formula (FLOPs not counted): {self.unknown_ops}")
        if self.errors:
            lines.append(f"  ops whose cost could not be evaluated: {self.errors}")
        if len(self.records):
            lines.append("")
            lines.append(self.table("op", top=top) if c is not None else _plain_top(self, top))
        return "\n".join(lines)

    def __str__(self):
        return self.summary()

    def __repr__(self):
        return (f"<roofline.Report {len(self.records)} calls, {_fmt(self.total_flops)}FLOP, "
                f"{_fmt(self.bytes, 'B')}>")

    def _repr_html_(self):
        import html

        rows = list(self.analysis("op").items())[:15] if self.ceilings is not None else []
        head = "".join(f"<li>{html.escape(line.strip())}</li>" for line in self.summary().split("\n")[1:8]
                       if line.strip())
        out = [f"<div><b>roofline report</b>: {len(self.records)} op calls<ul>{head}</ul>"]
        if rows:
            cols = ["calls", "flops", "bytes", "intensity", "t_min", "time", "efficiency", "mfu", "mbu", "bound"]
            out.append("<table><tr><th>op</th>" + "".join(f"<th>{c}</th>" for c in cols) + "</tr>")
            for name, r in rows:
                cells = "".join(f"<td>{html.escape(_cell(r[c]))}</td>" for c in cols)
                out.append(f"<tr><td>{html.escape(name)}</td>{cells}</tr>")
            out.append("</table>")
        out.append("</div>")
        return "".join(out)

    # ---- export -------------------------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """A JSON-compatible dict of everything in the report (records as base64 of their raw bytes); inverse of
        :meth:`from_dict`. Resolves the ceilings first, so they are saved with the counts."""
        c = self.ceilings
        return {
            "schema": SCHEMA_VERSION,
            "records": base64.b64encode(self.records.tobytes()).decode("ascii"),
            "n_records": int(len(self.records)),
            "ops": [{"name": o.name, "packet": o.packet, "kind": o.kind} for o in self._ops],
            "module_sets": [list(m) for m in self.module_sets],
            "wall_time": self.wall_time,
            "meta": self.meta,
            "overhead": self.overhead,
            "ceilings": None if c is None else c.to_dict(),
            "ceilings_source": self._source,
        }

    def to_json(self, path=None, indent: int | None = None) -> str:
        """Everything (records bit for bit, op and module tables, ceilings, metadata) as JSON; written to ``path``
        when given. :func:`roofline.load` reads it back."""
        text = json.dumps(self.to_dict(), indent=indent, allow_nan=True)
        if path is not None:
            with open(path, "w") as f:
                f.write(text)
        return text

    @classmethod
    def from_dict(cls, d: dict) -> "Report":
        """Rebuild a report from :meth:`to_dict`. The whole document is checked against its schema version before
        anything is built: ValueError naming the first field that is wrong (another schema, a corrupt record block,
        a record whose op, module, phase, dtype or status is out of range, a field of the wrong type)."""
        records, ops, module_sets, wall_time, meta, overhead, ceil, source = _validate(d)
        meta["ceilings_source"] = source
        r = cls(records, ops, module_sets, wall_time, meta, ceilings=ceil, overhead=overhead)
        if ceil is None:
            r._ceilings_spec = None
        return r

    def to_dataframe(self):
        """A pandas DataFrame with one row per op call (needs pandas). Columns: ``op``, ``module`` (innermost),
        ``phase``, ``dtype`` (names), the counts ``matrix_flops``, ``vector_flops``, ``special_ops``, ``bytes_read``,
        ``bytes_written``, ``compat_flops``, the measured ``time`` (seconds, NaN when untimed) and the
        classification ``intensity``, ``t_min``, ``achieved_flops``, ``achieved_bytes``, ``efficiency``, ``mfu``,
        ``mbu``, ``bound`` (a name)."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("to_dataframe needs pandas: pip install pandas") from None
        return pd.DataFrame(self._flat_columns())

    def _flat_columns(self) -> dict:
        r = self.records
        c = self.classification()
        cols = {
            "op": [self._ops[i].name for i in r["op"].tolist()],
            "module": [self.module_path(m) for m in r["module"].tolist()],
            "phase": [PHASES[p] for p in r["phase"].tolist()],
            "dtype": [DTYPE_NAMES.get(d, "unknown") for d in r["dtype"].tolist()],
        }
        for f in ("matrix_flops", "vector_flops", "special_ops", "bytes_read", "bytes_written", "compat_flops"):
            cols[f] = r[f]
        cols["time"] = self._times(r)
        for f in ("intensity", "t_min", "achieved_flops", "achieved_bytes", "efficiency", "mfu", "mbu"):
            cols[f] = c[f]
        cols["bound"] = [BOUNDS[b] for b in c["bound"].tolist()]
        return cols

    def to_csv(self, path=None) -> str:
        """One row per op call (the :meth:`to_dataframe` columns) as CSV; written to ``path`` when given."""
        import csv
        import io

        cols = self._flat_columns()
        names = list(cols)
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(names)
        for row in zip(*(cols[n] for n in names)):
            w.writerow([repr(float(v)) if isinstance(v, (float, np.floating)) else v for v in row])
        text = buf.getvalue()
        if path is not None:
            with open(path, "w", newline="") as f:
                f.write(text)
        return text

    # ---- comparison and projection --------------------------------------------------------------------------
    def compare(self, other: "Report", by: str = "op", depth: int | None = None) -> "Comparison":
        """What changed from ``self`` (before) to ``other`` (after), op by op or module by module."""
        return Comparison(self, other, by, depth)

    def project(self, target, name: str | None = None) -> "Report":
        """This run's ops on another device: each op's time is estimated as ``max(FLOPs / peak of its unit and
        dtype, bytes / bandwidth)`` from ``target`` (a device name from :mod:`roofline.devices`, or a
        ``Ceilings``), and a report of the same shape is returned whose times are those estimates (its wall time
        is their sum: ops run back to back)."""
        from roofline import devices
        from roofline._ceilings import Ceilings

        if isinstance(target, str):
            ceil, label = Ceilings.from_datasheet(devices.get(target)), devices.get(target).name
        elif isinstance(target, Ceilings):
            ceil, label = target, name or target.name
        else:
            raise TypeError(f"project: target must be a device name or a Ceilings, got {type(target).__name__}")
        meta = dict(self.meta, projected_to=label, ceilings_source="datasheet" if isinstance(target, str) else "best")
        proj = Report(self.records.copy(), self._ops, self.module_sets, None, meta, ceilings=ceil,
                      overhead=None)
        proj._ceilings, proj._source, proj._ceilings_spec = ceil, meta["ceilings_source"], None
        t_min = proj.classification()["t_min"]
        if np.isnan(t_min).any():
            missing = sorted({self._ops[i].name for i in proj.records["op"][np.isnan(t_min)].tolist()})
            warnings.warn(f"roofline: {label} has no ceiling for some ops ({missing[:5]}...); they are left out of "
                          "the projected time", stacklevel=2)
        t = np.where(np.isnan(t_min), 0.0, t_min)
        ends = np.cumsum(t)
        proj.records["t_start"] = ends - t
        proj.records["t_end"] = ends
        proj.wall_time = float(ends[-1]) if len(ends) else 0.0
        proj._class = None
        return proj

    # ---- plotting -------------------------------------------------------------------------------------------
    def plot(self, path=None, ax=None, by: str = "op", top: int = 8, **kwargs):
        """Draw the roofline chart (matplotlib): see :func:`roofline.plot.plot_report`."""
        from roofline.plot import plot_report

        return plot_report(self, path=path, ax=ax, by=by, top=top, **kwargs)


class Comparison:
    """Before/after of two reports, by op or by module (made by :meth:`Report.compare`).

    ``rows`` maps each op (or module) name to a pair ``(before, after)`` of :meth:`Report.analysis` rows (or of
    :meth:`Report.by_op` / :meth:`Report.by_module` rows with NaN times when a report has no ceilings); a side is
    None when the name is absent from that report. ``before``, ``after``: the two reports; ``by``: "op" or
    "module". ``str(comparison)`` is a table of the 25 largest changes.
    """

    FIELDS = ("flops", "bytes", "time", "t_min", "calls")

    def __init__(self, before: Report, after: Report, by: str = "op", depth: int | None = None):
        a = before.analysis(by, depth) if before.ceilings is not None else _plain(before, by, depth)
        b = after.analysis(by, depth) if after.ceilings is not None else _plain(after, by, depth)
        self.by = by
        self.rows = {k: (a.get(k), b.get(k)) for k in list(a) + [k for k in b if k not in a]}
        self.before, self.after = before, after

    def delta(self, name: str, field: str = "flops") -> float:
        """``after - before`` of ``field`` ("flops", "bytes", "time", "t_min", "calls", ...) for one name (a missing
        side counts 0). KeyError when the name is in neither report."""
        x, y = self.rows[name]
        return (y or {}).get(field, 0.0) - (x or {}).get(field, 0.0)

    def changed(self, field: str = "flops") -> dict[str, tuple[float, float]]:
        """Names whose ``field`` differs: name -> (before, after) (0 when absent on one side)."""
        out = {}
        for k, (x, y) in self.rows.items():
            vx, vy = (x or {}).get(field, 0.0), (y or {}).get(field, 0.0)
            if not (vx == vy or (isinstance(vx, float) and isinstance(vy, float) and math.isnan(vx) and math.isnan(vy))):
                out[k] = (vx, vy)
        return out

    def __str__(self):
        tb, ta = self.before.wall_time, self.after.wall_time
        lines = [f"comparison by {self.by}: FLOPs {_fmt(self.before.total_flops)} -> {_fmt(self.after.total_flops)}, "
                 f"bytes {_fmt(self.before.bytes, 'B')} -> {_fmt(self.after.bytes, 'B')}"
                 + (f", wall {tb * 1e3:.1f} -> {ta * 1e3:.1f} ms" if tb and ta else "")]
        rows = sorted(self.rows.items(), key=lambda kv: -abs(self.delta(kv[0], "flops")) - abs(self.delta(kv[0], "bytes")))
        w = min(max((len(k) for k in self.rows), default=10), 50)
        lines.append(f"{'name':<{w}} {'FLOPs before':>13} {'after':>10} {'ratio':>6} {'bytes before':>13} {'after':>10} "
                     f"{'time before':>11} {'after':>8}")
        for k, (x, y) in rows[:25]:
            x, y = x or {}, y or {}
            fr = (y.get("flops", 0) / x["flops"]) if x.get("flops") else math.nan
            lines.append(f"{k[-w:]:<{w}} {_fmt(x.get('flops', 0)):>13} {_fmt(y.get('flops', 0)):>10} {fr:>6.2f} "
                         f"{_fmt(x.get('bytes', 0), 'B'):>13} {_fmt(y.get('bytes', 0), 'B'):>10} "
                         f"{_ms(x.get('time', math.nan)):>11} {_ms(y.get('time', math.nan)):>8}")
        return "\n".join(lines)


def _plain(report, by, depth):
    src = report.by_op() if by == "op" else report.by_module(depth)
    return {k: dict(v, time=math.nan, t_min=math.nan) for k, v in src.items()}


def _plain_top(report, top):
    ops = list(report.by_op().items())[:top]
    w = max(len(n) for n, _ in ops)
    lines = [f"{'op':<{w}}  {'calls':>6}  {'FLOPs':>10}  {'bytes':>10}  {'FLOP/B':>8}"]
    for n, t in ops:
        lines.append(f"{n:<{w}}  {t['calls']:>6}  {_fmt(t['flops']):>10}  {_fmt(t['bytes'], 'B'):>10}  "
                     f"{t['intensity']:>8.2f}")
    return "\n".join(lines)


def _peak_time(flops, peak) -> float:
    """Seconds the FLOPs would take at each op's own peak. Ops without FLOPs count 0; ops whose unit and dtype have
    no ceiling (complex arithmetic, say) are left out rather than making the sum NaN."""
    ok = (flops > 0) & np.isfinite(peak) & (peak > 0)
    return float(np.divide(flops, peak, out=np.zeros_like(flops), where=ok).sum())


def _group_bound(bound, t_min):
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
    return "mixed"


def _ms(t) -> str:
    return "-" if t is None or not math.isfinite(t) else f"{t * 1e3:.3f}"


def _pct(x) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x * 100:.1f}%"


def _cell(v) -> str:
    if isinstance(v, float):
        return "-" if not math.isfinite(v) else f"{v:.4g}"
    return str(v)


def _fcm_ops():
    from roofline._registry import FLOP_COUNTER_OPS

    return FLOP_COUNTER_OPS


# ---- reading a report back: the schema, checked field by field ------------------------------------------------
_OP_KINDS = None  # the kind names a report's op table may hold (built on first use)
_CEILINGS_SOURCES = ("measured", "datasheet", "best")
_TIMINGS = ("model", "op", None)


def _bad(field: str, problem: str):
    raise ValueError(f"corrupt roofline report: {field} {problem}")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _type(v) -> str:
    return "null" if v is None else type(v).__name__


def _list_of_str(v, field: str) -> list[str]:
    if not isinstance(v, list):
        _bad(field, f"must be a list of str, not {_type(v)}")
    for i, x in enumerate(v):
        if not isinstance(x, str):
            _bad(f"{field}[{i}]", f"must be a str, not {_type(x)}")
    return v


def _time(v, field: str):
    if v is None:
        return None
    if not _is_number(v) or not math.isfinite(float(v)) or v < 0:
        _bad(field, f"must be a finite number of seconds >= 0 or null, not {v!r}")
    return float(v)


def _validate(d):
    """The parts of a report document, each checked; ValueError naming the first wrong field."""
    global _OP_KINDS
    if not isinstance(d, dict):
        raise ValueError(f"not a roofline report (schema {SCHEMA_VERSION} expected): a JSON object is needed, not "
                         f"{_type(d)}")
    schema = d.get("schema")
    if not (_is_int(schema) and schema == SCHEMA_VERSION):
        raise ValueError(f"not a roofline report (schema {SCHEMA_VERSION} expected, the document has "
                         f"schema {schema!r})")
    for key in ("records", "n_records", "ops", "module_sets"):
        if key not in d:
            _bad(key, "is missing")
    # op and module tables
    if _OP_KINDS is None:
        from roofline._registry import KIND_NAMES

        _OP_KINDS = frozenset(KIND_NAMES.values()) | {"python", "unknown"}
    if not isinstance(d["ops"], list):
        _bad("ops", f"must be a list, not {_type(d['ops'])}")
    ops = []
    for i, o in enumerate(d["ops"]):
        if not isinstance(o, dict):
            _bad(f"ops[{i}]", f"must be an object, not {_type(o)}")
        for k in ("name", "packet", "kind"):
            if not isinstance(o.get(k), str):
                _bad(f"ops[{i}].{k}", f"must be a str, not {_type(o.get(k))}")
        if o["kind"] not in _OP_KINDS:
            _bad(f"ops[{i}].kind", f"is {o['kind']!r}, not a cost kind ({', '.join(sorted(_OP_KINDS))})")
        ops.append(OpInfo(o["name"], o["packet"], o["kind"]))
    if not isinstance(d["module_sets"], list):
        _bad("module_sets", f"must be a list, not {_type(d['module_sets'])}")
    module_sets = [tuple(_list_of_str(m, f"module_sets[{i}]")) for i, m in enumerate(d["module_sets"])]
    # the record block
    if not isinstance(d["records"], str):
        _bad("records", f"must be a base64 str, not {_type(d['records'])}")
    try:
        raw = base64.b64decode(d["records"], validate=True)
    except (binascii.Error, ValueError) as e:
        _bad("records", f"is not base64 ({e})")
    if len(raw) % RECORD_DTYPE.itemsize:
        _bad("records", f"is truncated ({len(raw)} bytes, not a multiple of the {RECORD_DTYPE.itemsize}-byte record)")
    records = np.frombuffer(raw, dtype=RECORD_DTYPE).copy()
    n = d["n_records"]
    if not _is_int(n) or n != len(records):
        _bad("n_records", f"is {n!r}: the record count does not match the {len(records)} records in the block")
    _check_records(records, len(ops), len(module_sets))
    # scalars and small objects
    wall_time = _time(d.get("wall_time"), "wall_time")
    meta = d.get("meta")
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        _bad("meta", f"must be an object, not {_type(meta)}")
    meta = dict(meta)
    if "timing" in meta and meta["timing"] not in _TIMINGS:
        _bad("meta.timing", f"is {meta['timing']!r}, not one of {_TIMINGS}")
    if "devices" in meta:
        _list_of_str(meta["devices"], "meta.devices")
    for k in ("version", "projected_to", "ceilings_source"):
        if meta.get(k) is not None and not isinstance(meta[k], str):
            _bad(f"meta.{k}", f"must be a str, not {_type(meta[k])}")
    overhead = d.get("overhead")
    if overhead is None:
        overhead = {}
    if not isinstance(overhead, dict):
        _bad("overhead", f"must be an object, not {_type(overhead)}")
    for k, v in overhead.items():
        _time(v, f"overhead.{k}")
        if v is None:
            _bad(f"overhead.{k}", "must be a number of seconds, not null")
    source = d.get("ceilings_source", "measured")
    if source not in _CEILINGS_SOURCES:
        _bad("ceilings_source", f"is {source!r}, not one of {_CEILINGS_SOURCES}")
    ceil = None
    if d.get("ceilings") is not None:
        from roofline._ceilings import Ceilings

        try:
            ceil = Ceilings.from_dict(d["ceilings"])
        except ValueError as e:
            _bad("ceilings", f"are malformed: {e}")
    return records, ops, module_sets, wall_time, meta, dict(overhead), ceil, source


def _check_records(records, n_ops: int, n_module_sets: int):
    """Every record's references and codes are in range (the roll-ups index tables with them)."""
    if not len(records):
        return

    def first(mask, field, problem):
        if mask.any():
            i = int(np.flatnonzero(mask)[0])
            _bad(f"records[{i}].{field}", problem(records[field][i]))

    first(records["op"] >= n_ops, "op", lambda v: f"is {v}, but the report lists {n_ops} ops")
    first(records["module"] >= n_module_sets, "module",
          lambda v: f"is {v}, but the report lists {n_module_sets} module sets")
    first(records["phase"] >= len(PHASES), "phase",
          lambda v: f"is {v}, not a phase (" + ", ".join(f"{i} {p}" for i, p in enumerate(PHASES)) + ")")
    first(~np.isin(records["dtype"], list(DTYPE_NAMES)), "dtype", lambda v: f"is {v}, not a dtype code")
    statuses = np.unique(records["status"]).tolist()
    bad = [st for st in statuses if st != 0 and _core.status_str(st) == _core.status_str(-1)]
    first(np.isin(records["status"], bad), "status", lambda v: f"is {v}, not a status code")
    t0, t1 = records["t_start"], records["t_end"]
    first(np.isinf(t0), "t_start", lambda v: f"is {v}, not a time")
    first(np.isinf(t1), "t_end", lambda v: f"is {v}, not a time")
    first(np.isnan(t0) != np.isnan(t1), "t_end", lambda v: "and t_start must both be times or both be NaN")
    with np.errstate(invalid="ignore"):
        first(t1 < t0, "t_end", lambda v: f"is {v}, before the record's t_start")
