"""What a projection assumes about the counted run: which attention kernel its counts are those of, and in which
dtypes its products ran. :meth:`roofline.Report.project` stores this in the projected report's
``meta["assumed"]`` and its summary prints it, so a projection never hides that it was counted on the math path or
in float32.
"""

from __future__ import annotations

import math

import numpy as np

from roofline._analysis._classification import FLOAT_DTYPES
from roofline._capture import _sdpa
from roofline._datamodel._records import DTYPE_NAMES

# op-name fragment -> the attention kernel it is (first match wins)
_KERNELS = (("flash_attention_for_cpu", "flash (CPU fused kernel)"), ("flash_attention", "flash"),
            ("efficient_attention", "efficient"), ("cudnn_attention", "cudnn"),
            ("fused_attention_overrideable", "fused (backend-defined)"))


def attention(report) -> str:
    """The attention kernel(s) the report's counts are those of: the backend chosen at count time
    (``measure(..., attention=...)``), else what the op names show; ``"math"`` when scores were computed with
    ``bmm`` and a softmax (PyTorch's math path, or attention written by hand); ``"none"`` without attention."""
    chosen = report.meta.get("attention")
    if isinstance(chosen, dict) and chosen.get("backend"):
        return _sdpa.label(chosen, report.op_names)
    found = []
    for n in sorted(set(report.op_names)):
        for frag, label in _KERNELS:
            if frag in n:
                if label not in found:
                    found.append(label)
                break
    if found:
        return ", ".join(found) + " (as run)"
    names = set(report.op_names)
    if any(n.startswith("aten.bmm") for n in names) and any("softmax" in n for n in names):
        return "math (bmm + softmax: the full score matrix)"
    return "none"


def matrix_dtypes(report) -> dict[str, float]:
    """Share of the matrix FLOPs in each dtype, largest first (``{"bfloat16": 1.0}``); empty without products."""
    rec = report.records
    mf = rec["matrix_flops"].astype(np.float64)
    total = float(mf.sum())
    if not total:
        return {}
    out = {}
    for code in np.unique(rec["dtype"][mf > 0]).tolist():
        out[DTYPE_NAMES.get(code, str(code))] = float(mf[rec["dtype"] == code].sum()) / total
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def no_peak(report, roofs) -> dict[str, str]:
    """Ops whose unit and dtype have no peak of their own dtype in ``roofs`` (a
    :class:`roofline._hardware._roofs.Roofs`): ``"op (dtype)"`` -> what happened
    to them (``"N calls: judged against the <unit>/<dtype> peak"``, or left out of the projected time when nothing
    matches). A matrix product judged against the vector peak of its own dtype is not listed: that is the
    documented rule for products on the vector units, not a missing dtype."""
    rec = report.records
    names = report.op_names
    verdict: dict[tuple[str, str], str | None] = {}
    out: dict[str, list] = {}
    flops = (rec["matrix_flops"] > 0) | (rec["vector_flops"] > 0)  # an op without FLOPs needs no peak
    for op, code, mf in zip(rec["op"][flops].tolist(), rec["dtype"][flops].tolist(),
                            (rec["matrix_flops"][flops] > 0).tolist()):
        unit, dt = ("matrix" if mf else "vector"), DTYPE_NAMES.get(code, str(code))
        if unit == "vector" and dt in _LOW_VECTOR:
            continue  # the documented fallback of low-precision element-wise work: see vector_fallback()
        if (unit, dt) not in verdict:
            asked = dt if dt in FLOAT_DTYPES else "float32"
            own = (dt,)
            if unit == "matrix" and dt in ("int8", "uint8"):
                # the classification's rule: integer matrix products use the int8 matrix peak where there is one
                # (VNNI / AMX / tensor cores), else the float32 rate
                if math.isfinite(roofs.peak("matrix", "int8").value):
                    asked, own = "int8", (dt, "int8")
            choice = roofs.peak(unit, asked)
            if math.isfinite(choice.value):
                verdict[(unit, dt)] = (None if choice.peak_of[1] in own else
                                       f"judged against the {choice.peak_of[0]}/{choice.peak_of[1]} peak")
            else:
                verdict[(unit, dt)] = "no peak: left out of the projected time"
        v = verdict[(unit, dt)]
        if v is not None:
            key = f"{names[op]} ({dt})"
            out.setdefault(key, [0, v])[0] += 1
    return {k: f"{n} call{'s' if n != 1 else ''}: {v}" for k, (n, v) in out.items()}


def no_peak_share(report, no_peak_ops: dict) -> float:
    """Share of the report's FLOPs in the records :func:`no_peak` lists (0.0 when none)."""
    if not no_peak_ops:
        return 0.0
    rec = report.records
    names = report.op_names
    keys = set(no_peak_ops)
    flops = rec["matrix_flops"].astype(np.float64) + rec["vector_flops"].astype(np.float64)
    total = float(flops.sum())
    mine = sum(float(f) for op, code, f in zip(rec["op"].tolist(), rec["dtype"].tolist(), flops.tolist())
               if f and f"{names[op]} ({DTYPE_NAMES.get(code, str(code))})" in keys)
    return mine / total if total else 0.0


_LOW_VECTOR = ("bfloat16", "float16")


def vector_fallback(report, roofs) -> dict[str, str]:
    """Low-precision dtypes of element-wise work (with FLOPs) judged against another dtype's vector peak, e.g. on
    a GPU whose datasheet lists no bfloat16 non-tensor rate: dtype -> what was used (a lower bound on the rate)."""
    rec = report.records
    mask = (rec["matrix_flops"] == 0) & (rec["vector_flops"] > 0)
    out = {}
    for code in np.unique(rec["dtype"][mask]).tolist():
        dt = DTYPE_NAMES.get(code, str(code))
        if dt not in _LOW_VECTOR:
            continue
        choice = roofs.peak("vector", dt)
        if not math.isfinite(choice.value):
            out[dt] = "no peak: left out of the projected time"
            continue
        if choice.peak_of[1] != dt:
            out[dt] = f"judged against the {choice.peak_of[0]}/{choice.peak_of[1]} peak (a lower bound on the rate)"
    return out


def describe(report, roofs) -> dict:
    """The ``meta["assumed"]`` of a projection onto ``roofs`` (the projection's
    :class:`roofline._hardware._roofs.Roofs`): ``attention``, ``matrix_dtypes`` and
    ``no_peak`` (per op) with ``no_peak_flop_share`` (their share of the FLOPs), and ``vector_fallback`` (per dtype,
    element-wise work)."""
    missing = no_peak(report, roofs)
    return {"attention": attention(report), "matrix_dtypes": matrix_dtypes(report),
            "no_peak": missing, "no_peak_flop_share": no_peak_share(report, missing),
            "vector_fallback": vector_fallback(report, roofs)}
