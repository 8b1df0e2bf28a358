"""A report as a Chrome / Perfetto trace (:meth:`roofline.Report.to_chrome_trace`)."""

from __future__ import annotations

import json
import math

import numpy as np

from roofline import _core
from roofline._analysis import _groups
from roofline._io._export import check_path, write
from roofline._datamodel._records import BOUNDS, DTYPE_NAMES, PHASES
from roofline._util._format import op_label


def chrome_trace(report) -> dict:
    """The report as a Trace Event Format document (the JSON object format that Perfetto and chrome://tracing
    open): on one track, a slice per phase, inside it a slice per module run (every level of the module tree,
    containers included), inside that a slice per timed op call, in call order; each op slice's ``args`` hold its
    FLOPs, bytes, intensity, bound, roofline time, % of roof, dtype, module and input shapes. Two counter tracks
    give the achieved FLOP/s and bytes/s of the op running at each moment (0 between ops).

    Times are nanoseconds from the first op, written as microseconds with three decimals (exact in the format's
    double-precision ``ts``), so a parent slice always covers its children exactly. A module that runs, stops
    and runs again (a layer called twice, forward then backward) is one slice per run. ValueError when the report
    has no per-op times (``timing="op"`` or a projection has them)."""
    r = report.records
    t0s, t1s = r["t_start"], r["t_end"]
    timed = np.isfinite(t0s) & np.isfinite(t1s)
    if not timed.any():
        raise ValueError("to_chrome_trace needs per-op times: measure with timing='op', or trace a projected report "
                         "(r.project('<device>'))")
    idx = np.flatnonzero(timed)
    idx = idx[np.argsort(t0s[idx], kind="stable")]
    base = float(t0s[idx[0]])
    ns0 = np.rint((t0s - base) * 1e9)
    ns1 = np.maximum(np.rint((t1s - base) * 1e9), ns0)
    c = report.classification()
    names, sigs = report.op_names, report.signatures if _groups.has_signatures(report) else None
    projected = report.meta.get("projected_to")
    pid, tid = 1, 1
    where = projected and f"projected onto {projected}" or ", ".join(report.meta.get("devices", [])) or "run"
    events = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": f"roofline: {where}"}},
              {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": "ops"}}]
    slices = []
    counters = []
    stack = []  # open frames: [key, name, cat, start ns, end ns, args]

    def close(frame):
        key, name, cat, s, e, args = frame
        slices.append(({"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid, "ts": _us(s),
                        "dur": _us(e - s), "args": args}, (s, s - e, len(stack))))

    module_paths = {}
    for i in idx.tolist():
        mid = int(r["module"][i])
        if mid not in module_paths:
            inner = report.module_path(mid)
            parts = [] if inner == "Global" else inner.split(".")
            module_paths[mid] = [".".join(parts[:k]) for k in range(1, len(parts) + 1)]
        phase = PHASES[int(r["phase"][i])]
        path = [("phase", phase)] + [("module", m) for m in module_paths[mid]]
        s, e = int(ns0[i]), int(ns1[i])
        k = 0
        while k < len(stack) and k < len(path) and stack[k][0] == path[k]:
            k += 1
        while len(stack) > k:
            close(stack.pop())
        for key in path[k:]:
            label = key[1] if key[0] == "phase" else _module_label(key[1])
            args = {"phase": key[1]} if key[0] == "phase" else {"module": key[1]}
            stack.append([key, label, key[0], s, e, args])
        for frame in stack:
            frame[4] = max(frame[4], e)
        flops, nbytes = float(c["flops"][i]), float(c["bytes"][i])
        args = {"op": names[int(r["op"][i])], "module": report.module_path(mid), "phase": phase,
                "dtype": DTYPE_NAMES.get(int(r["dtype"][i]), "unknown"), "flops": flops, "bytes": nbytes,
                "intensity": _finite(c["intensity"][i]), "bound": BOUNDS[int(c["bound"][i])],
                "roofline_time_us": _finite(c["t_min"][i] * 1e6), "time_us": _us(e - s),
                "pct_of_roof": _finite(c["efficiency"][i] * 100)}
        if sigs is not None:
            args["shapes"] = sigs[int(r["sig"][i])] if int(r["sig"][i]) < len(sigs) else "?"
        if int(c["flags"][i]) & (_core.FLAG_ABOVE_PEAK | _core.FLAG_ABOVE_BW) and not projected:
            args["above_ceiling"] = True
        slices.append(({"ph": "X", "name": op_label(names[int(r["op"][i])]), "cat": "op", "pid": pid, "tid": tid,
                        "ts": _us(s), "dur": _us(e - s), "args": args}, (s, s - e, len(stack))))
        if e > s:
            sec = (e - s) * 1e-9
            counters.append((s, flops / sec, nbytes / sec))
            counters.append((e, 0.0, 0.0))
    while stack:
        close(stack.pop())
    # in start order; at one start, the longer first and, at equal length, the outer first (viewers nest in order)
    slices.sort(key=lambda ev: ev[1])
    events += [ev for ev, _ in slices]
    for ns, f, b in counters:
        events.append({"ph": "C", "name": "achieved FLOP/s", "pid": pid, "ts": _us(ns), "args": {"FLOP/s": f}})
        events.append({"ph": "C", "name": "achieved bandwidth", "pid": pid, "ts": _us(ns), "args": {"B/s": b}})
    other = {"roofline_version": report.meta.get("version"), "wall_time_s": report.wall_time,
             "timing": report.meta.get("timing"), "projected_to": projected}
    if report.ceilings is not None:
        other["ceilings"] = f"{report.ceilings.name} ({report.ceilings_source})"
    return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": other}


def _us(ns) -> float:
    """Integer nanoseconds as microseconds (three decimals: exact enough to read back the same nanosecond)."""
    return round(int(ns) / 1000.0, 3)


def _finite(v):
    v = float(v)
    return v if math.isfinite(v) else None


def _module_label(name: str) -> str:
    """A module slice's name: its last name component, with its parent's for an index (``blocks.0``)."""
    parts = name.split(".")
    return ".".join(parts[-2:]) if parts[-1].isdigit() and len(parts) > 1 else parts[-1]


def to_chrome_trace(report, path=None) -> str:
    """:func:`chrome_trace` as JSON text (no NaN: the format is strict JSON), written to ``path`` when given."""
    check_path(path, "Report.to_chrome_trace")  # before the trace is built
    return write(json.dumps(chrome_trace(report), allow_nan=False), path, "Report.to_chrome_trace")
