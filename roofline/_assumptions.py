"""What a projection assumes about the counted run: which attention kernel its counts are those of, and in which
dtypes its products ran. :meth:`roofline.Report.project` stores this in the projected report's
``meta["assumed"]`` and its summary prints it, so a projection never hides that it was counted on the math path or
in float32.
"""

from __future__ import annotations

import numpy as np

from roofline._records import DTYPE_NAMES

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
        calls = chosen.get("calls") or {}
        extra = [k for k in calls if k != chosen["backend"]]
        s = f"{chosen['backend']} (chosen at count time)"
        return s + (f"; also {', '.join(f'{k} x{calls[k]}' for k in extra)}" if extra else "")
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


def no_peak(report, missing: np.ndarray) -> dict[str, int]:
    """``"op (dtype)"`` -> calls, for the records flagged in ``missing`` (a boolean mask: no ceiling on the
    target for the record's unit and dtype)."""
    rec = report.records
    names = report.op_names
    out: dict[str, int] = {}
    for op, code in zip(rec["op"][missing].tolist(), rec["dtype"][missing].tolist()):
        key = f"{names[op]} ({DTYPE_NAMES.get(code, str(code))})"
        out[key] = out.get(key, 0) + 1
    return out


def describe(report, missing: np.ndarray) -> dict:
    """The ``meta["assumed"]`` of a projection: ``attention``, ``matrix_dtypes`` and ``no_peak``."""
    return {"attention": attention(report), "matrix_dtypes": matrix_dtypes(report),
            "no_peak": no_peak(report, missing)}


def line(assumed: dict, target: str) -> list[str]:
    """The summary lines of a projection's assumptions."""
    dt = ", ".join(f"{k} {v:.0%}" for k, v in assumed.get("matrix_dtypes", {}).items()) or "none"
    out = [f"  assumed: attention {assumed.get('attention', '?')}; matrix FLOPs in {dt}"]
    if assumed.get("no_peak"):
        items = ", ".join(f"{k} x{v}" for k, v in assumed["no_peak"].items())
        out.append(f"  no peak on {target} for: {items} (left out of the projected time)")
    return out
