"""The compiled part of a report (``report.meta["compiled"]``, written by roofline.compiled._compiled): kernel rows, the
kernel table and the fusion figures. NumPy only: a report read back from JSON has them too."""

from __future__ import annotations

import math

import numpy as np

from roofline import _core
from roofline.analysis._classification import BOUNDS, dram_bandwidth
from roofline.model._records import intensity
from roofline.util._format import fmt, ms, pct


def compiled(report) -> dict | None:
    return report.meta.get("compiled")


def kernel_rows(report) -> list[dict]:
    """One dict per generated kernel (see :attr:`roofline.Report.kernels`), with roofline figures added: ``flops``
    (matrix + vector of the aten ops it fused, per call), ``bytes`` (its input and output buffers, per call),
    ``intensity``, ``t_min`` (seconds per call on the roofline), ``time`` (measured, all calls, seconds or NaN),
    ``achieved_flops``, ``achieved_bytes``, ``efficiency`` (t_min x calls / time), ``bound`` ("compute",
    "memory", "bandwidth" for a kernel without FLOPs, or "unknown" without a ceiling), ``above_ceiling`` (1 when
    it ran faster than its roof); classified as op records are (``_core.classify``)."""
    c = compiled(report) or {}
    peak = bw = math.nan
    ceil = report.ceilings
    if ceil is not None:  # the bandwidth op records are judged against (a CPU's measured one for "datasheet")
        bw, _ = dram_bandwidth(ceil, report.ceilings_source)
    rows, peaks, ftot, btot, times = [], [], [], [], []
    for k in c.get("kernels", ()):
        r = dict(k)
        flops = int(k.get("matrix_flops", 0)) + int(k.get("vector_flops", 0))
        nbytes = int(k.get("bytes_read", 0)) + int(k.get("bytes_written", 0))
        r["flops"], r["bytes"] = flops, nbytes
        r["intensity"] = intensity(flops, nbytes)
        p = peak
        if ceil is not None:
            try:
                unit = "matrix" if k.get("matrix_flops") else "vector"
                p = ceil.peak(unit, k.get("dtype") or "float32", source=report.ceilings_source)
            except Exception:  # noqa: BLE001
                p = math.nan
        t = k.get("time")
        r["time"] = float(t) if t is not None else math.nan
        calls = max(int(k.get("calls", 0)), 1)
        peaks.append(p)
        ftot.append(float(flops) * calls)
        btot.append(float(nbytes) * calls)
        times.append(r["time"])
        rows.append(r)
    if not rows:
        return rows
    # the classification of op records (csrc/classify.c), over each kernel's calls: the same bound, rates and
    # above-the-ceiling rule as for ops
    res = _core.classify(np.array(ftot), np.array(btot), np.array(times), np.array(peaks),
                         np.full(len(rows), bw))
    above = _core.FLAG_ABOVE_PEAK | _core.FLAG_ABOVE_BW
    for i, r in enumerate(rows):
        calls = max(int(r.get("calls", 0)), 1)
        r["t_min"] = float(res["t_min"][i]) / calls
        r["achieved_flops"] = float(res["achieved_flops"][i])
        r["achieved_bytes"] = float(res["achieved_bytes"][i])
        r["efficiency"] = float(res["efficiency"][i])
        r["bound"] = "unknown" if int(res["flags"][i]) & _core.FLAG_NO_CEILING else BOUNDS[int(res["bound"][i])]
        r["above_ceiling"] = int(bool(int(res["flags"][i]) & above))
    return rows


def table(report, top: int | None = 15) -> str:
    rows = kernel_rows(report)
    if not rows:
        return "(no compiled kernels)"
    rows.sort(key=lambda r: (-(r["time"] if not math.isnan(r["time"]) else -1), -r["bytes"]))
    if top is not None:
        rows = rows[:top]

    timed = any(not math.isnan(r["time"]) for r in rows)
    w = min(max(len(r["name"]) for r in rows), 48)
    hdr = f"{'kernel':<{w}} {'phase':>8} {'calls':>5} {'FLOPs':>9} {'bytes':>9} {'FLOP/B':>7} {'roof ms':>8}"
    if timed:
        hdr += f" {'time ms':>8} {'% roof':>7}"
    hdr += "  fused ops"
    lines = [hdr]
    for r in rows:
        n = r["name"] if len(r["name"]) <= w else r["name"][: w - 3] + "..."
        line = (f"{n:<{w}} {r['phase']:>8} {r['calls']:>5} {fmt(r['flops']):>9} {fmt(r['bytes'], 'B'):>9} "
                f"{r['intensity']:>7.2f} {ms(r['t_min']):>8}")
        if timed:
            line += f" {ms(r['time']):>8} {pct(r['efficiency']):>7}"
        ops = ", ".join(o.replace("aten.", "") for o in r.get("ops", ()))
        line += "  " + (ops if len(ops) <= 70 else ops[:67] + "...")
        lines.append(line)
    c = compiled(report) or {}
    lines.append(f"{c.get('graphs', 0)} compiled graphs ({c.get('graph_calls', 0)} calls), "
                 f"{c.get('graph_breaks', 0)} graph breaks")
    return "\n".join(lines)


def fusion(report) -> dict:
    """Bytes of the compiled graphs' aten ops counted one by one (each input read, each output written: the
    traffic of running them unfused) against the bytes of the kernels Inductor generated for them (their input
    and output buffers), in total and per module (``by_module`` assigns each op to the kernel that computes it;
    with dynamic sizes its unfused bytes are the first call's times the calls). ``added_bytes``, part of
    ``compiled_bytes``: kernels with no op of the graph behind them, which Inductor adds itself (on CPU, copying
    convolution weights to the channels-last layout on every forward call); they can make ``saved_bytes``
    negative for a small batch."""
    c = compiled(report) or {}
    per_module: dict = {}
    compiled_bytes = unfused = added = 0
    for k in c.get("kernels", ()):
        calls = int(k.get("calls", 0))
        if "bytes_read_total" in k:
            b = int(k["bytes_read_total"]) + int(k["bytes_written_total"])
        else:
            b = (int(k.get("bytes_read", 0)) + int(k.get("bytes_written", 0))) * calls
        u = int(k.get("unfused_bytes", 0)) * calls
        compiled_bytes += b
        unfused += u
        if not k.get("ops"):
            added += b
        m = per_module.setdefault(k.get("module", "Global"), {"unfused_bytes": 0, "compiled_bytes": 0})
        m["unfused_bytes"] += u
        m["compiled_bytes"] += b
    for m in per_module.values():
        m["saved_bytes"] = m["unfused_bytes"] - m["compiled_bytes"]
    if "aten_bytes" in c:  # every op of every graph call, counted exactly (dynamic sizes included)
        unfused = int(c["aten_bytes"])
    return {"unfused_bytes": unfused, "compiled_bytes": compiled_bytes, "saved_bytes": unfused - compiled_bytes,
            "added_bytes": added, "aten_bytes": int(c.get("aten_bytes", 0)), "by_module": per_module}


def dataframe(report):
    import pandas as pd

    cols = ("name", "graph", "phase", "calls", "module", "ops", "matrix_flops", "vector_flops", "flops",
            "bytes_read", "bytes_written", "bytes", "unfused_bytes", "intensity", "t_min", "time", "achieved_flops",
            "achieved_bytes", "efficiency", "extern", "bytes_known")
    rows = kernel_rows(report)
    return pd.DataFrame([{c: (", ".join(r[c]) if c == "ops" else r.get(c)) for c in cols} for r in rows],
                        columns=list(cols))
