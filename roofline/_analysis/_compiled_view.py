"""The compiled part of a report (``report.meta["compiled"]``, written by roofline._compiled._view): kernel rows (with
their roofline figures, against the report's roofs) and the fusion figures; the views are in
roofline.render._kernels. NumPy only: a report read back from JSON has them too."""

from __future__ import annotations

import math

import numpy as np

from roofline import _core
from roofline._datamodel._records import BOUNDS, intensity


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
    roofs = report.roofs
    bw = roofs.bandwidth("DRAM").value  # the bandwidth op records are judged against
    rows, peaks, ftot, btot, times = [], [], [], [], []
    for k in c.get("kernels", ()):
        r = dict(k)
        flops = int(k.get("matrix_flops", 0)) + int(k.get("vector_flops", 0))
        nbytes = int(k.get("bytes_read", 0)) + int(k.get("bytes_written", 0))
        r["flops"], r["bytes"] = flops, nbytes
        r["intensity"] = intensity(flops, nbytes)
        p = roofs.peak("matrix" if k.get("matrix_flops") else "vector", k.get("dtype") or "float32").value
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
