"""OpInfo sweep: does roofline count every op PyTorch's own test suite describes?

Runs the sample inputs of every OpInfo of ``torch.testing._internal.common_methods_invocations.op_db`` (the database
PyTorch's tests use: 700 operators, their dtypes, autograd support and edge-case inputs) on the CPU, in float32 and in
the low-precision dtypes each supports (bfloat16, float16), forward and, where the OpInfo supports autograd (floating
dtypes), backward, inside ``roofline.measure``. Each sample is first run without roofline: a sample that fails there is
not runnable and is skipped. Reported per OpInfo and in total:

* fully counted: every sample ran inside the block with no unknown op and no count error;
* ``unknown``: the aten ops without a formula (``Report.unknown_ops``), with how many OpInfos hit each;
* ``count errors``: records whose formula could not evaluate the call (``Report.errors``);
* ``raised inside``: the sample raised inside ``measure`` although it runs without it (a roofline bug);
* OpInfos that support none of the requested dtypes (integer-only and complex-only ops) run in the first of int64,
  int32, uint8, bool, complex64 they support;
* ``fcm!=``: samples whose FlopCounterMode-compatible total (``Report.flop_counter_compatible``) differs from
  ``FlopCounterMode``'s own total on the same sample (should be empty; only the matrix ops have FlopCounterMode
  formulas).

    python bench/opinfo.py                          # every OpInfo, 2 samples each, one process
    nice -n 10 python bench/opinfo.py --jobs 2      # in 2 worker processes
    python bench/opinfo.py --only linalg.svd,cdist --samples 4 --dtypes float32
    python bench/opinfo.py --part 1/4 --json part1.json   # a quarter of the database (parts are disjoint)

``torch.testing._internal`` imports ``expecttest``; without it a stand-in is used (the database does not need it).
The last line is "K/N OpInfos fully counted".
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import time
import warnings
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

LOW_PRECISION = ("bfloat16", "float16")
# An OpInfo that supports none of the dtypes asked for (integer-only ops such as the bitwise ones, complex-only ones)
# runs in the first of these it supports, forward only unless the dtype is floating.
FALLBACK = ("int64", "int32", "uint8", "bool", "complex64")


def _full_name(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def _expecttest():
    """``torch.testing._internal`` imports ``expecttest`` for its TestCase base class (expected-output tests), which
    the OpInfo database itself does not use: where the package is not installed, a stand-in module with
    ``unittest.TestCase`` lets the database import."""
    try:
        import expecttest  # noqa: F401
    except ImportError:
        import types
        import unittest

        stand_in = types.ModuleType("expecttest")
        stand_in.TestCase = unittest.TestCase
        stand_in.ACCEPT = False
        sys.modules["expecttest"] = stand_in


def op_database():
    """The OpInfos, by full name (``name.variant``)."""
    _expecttest()
    from torch.testing._internal.common_methods_invocations import op_db

    return {_full_name(op): op for op in op_db}


def _tensors(x):
    import torch

    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for y in x:
            yield from _tensors(y)
    elif isinstance(x, dict):
        for y in x.values():
            yield from _tensors(y)


def _run(op, sample, backward):
    """One call of the OpInfo on the sample; with ``backward``, the gradient of the sum of its differentiable
    outputs with respect to the inputs that require grad."""
    import torch

    out = op(sample.input, *sample.args, **sample.kwargs)
    if backward:
        outs = [t for t in _tensors(out) if t.requires_grad and (t.is_floating_point() or t.is_complex())]
        ins = [t for t in _tensors((sample.input, sample.args, sample.kwargs)) if t.requires_grad]
        if outs and ins:
            loss = sum(t.abs().sum() if t.is_complex() else t.sum() for t in outs)
            torch.autograd.grad(loss, ins, allow_unused=True)
    return out


def _fcm_total(op, sample, backward) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as fcm:
        _run(op, sample, backward)
    return int(fcm.get_total_flops())


def check_op(op, samples=2, dtypes=("float32",) + LOW_PRECISION, backward=True) -> dict:
    """Every (dtype, sample, direction) of one OpInfo: what roofline counted. Returns a dict with ``runs`` (samples
    run inside the block), ``skipped`` (not runnable without roofline), ``unknown`` (op -> calls), ``errors`` (op ->
    reason), ``raised`` (messages), ``fcm`` (differences from FlopCounterMode), ``seconds``."""
    import torch

    import roofline

    t0 = time.perf_counter()
    res = {"runs": 0, "skipped": 0, "unknown": {}, "errors": {}, "raised": [], "fcm": [], "seconds": 0.0}
    supported = op.supported_dtypes("cpu")
    if not any(getattr(torch, d) in supported for d in dtypes):
        dtypes = [d for d in FALLBACK if getattr(torch, d) in supported][:1]
    for dname in dtypes:
        dtype = getattr(torch, dname)
        if dtype not in supported:
            continue
        grad = backward and op.supports_autograd and (dtype.is_floating_point or dtype.is_complex)
        try:
            gen = op.sample_inputs("cpu", dtype, requires_grad=grad)
            batch = []
            for s in gen:
                batch.append(s)
                if len(batch) >= samples:
                    break
        except Exception as e:  # noqa: BLE001 - the OpInfo's own sample generator fails: nothing to run
            res["skipped"] += 1
            res.setdefault("sample_errors", []).append(f"{dname}: {type(e).__name__}: {str(e)[:120]}")
            continue
        for i, sample in enumerate(batch):
            for bwd in ((False, True) if grad else (False,)):
                where = f"{dname} sample {i}{' backward' if bwd else ''}"
                try:
                    _run(op, sample, bwd)
                except Exception:  # noqa: BLE001 - not runnable without roofline: not counted against it
                    res["skipped"] += 1
                    continue
                try:
                    with roofline.measure() as r:
                        _run(op, sample, bwd)
                except Exception as e:  # noqa: BLE001 - runs without roofline, raises with it: a roofline bug
                    msg = f"{where}: {type(e).__name__}: {str(e)[:200]}"
                    try:  # FlopCounterMode's module tracker shares some limits of torch's ModuleTracker
                        _fcm_total(op, sample, bwd)
                    except Exception:  # noqa: BLE001
                        msg += " (FlopCounterMode raises too)"
                    res["raised"].append(msg)
                    continue
                res["runs"] += 1
                for name, calls in r.unknown_ops.items():
                    res["unknown"][name] = res["unknown"].get(name, 0) + calls
                for name, (calls, why) in r.errors.items():
                    res["errors"][name] = why
                if r.matrix_flops or any(k in name for name in r.by_op() for k in ("mm", "conv", "attention")):
                    try:
                        ours = sum(r.flop_counter_compatible().get("Global", {}).values())
                        theirs = _fcm_total(op, sample, bwd)
                    except Exception as e:  # noqa: BLE001 - FlopCounterMode itself fails on the sample
                        ours, theirs = 0, f"FlopCounterMode raised {type(e).__name__}"
                    if ours != theirs:
                        res["fcm"].append(f"{where}: roofline {ours} FlopCounterMode {theirs}")
    res["seconds"] = round(time.perf_counter() - t0, 2)
    return res


def fully_counted(res) -> bool:
    return res["runs"] > 0 and not (res["unknown"] or res["errors"] or res["raised"] or res["fcm"])


def _worker(args):
    name, samples, dtypes, backward = args
    import torch

    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    ops = _worker.ops if hasattr(_worker, "ops") else op_database()
    _worker.ops = ops
    with contextlib.redirect_stderr(io.StringIO()):
        try:
            return name, check_op(ops[name], samples, dtypes, backward)
        except Exception as e:  # noqa: BLE001 - the sweep goes on; the failure is reported
            return name, {"runs": 0, "skipped": 0, "unknown": {}, "errors": {},
                          "raised": [f"sweep: {type(e).__name__}: {e}"], "fcm": [], "seconds": 0.0}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="comma-separated OpInfo names (name or name.variant; a name "
                    "selects all its variants)")
    ap.add_argument("--samples", type=int, default=2, help="the first N sample inputs of each dtype (default 2)")
    ap.add_argument("--dtypes", default="float32," + ",".join(LOW_PRECISION))
    ap.add_argument("--no-backward", action="store_true")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--part", default="", help="K/N: the K-th of N disjoint parts of the database")
    ap.add_argument("--json", default="", help="write the per-OpInfo results here")
    a = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    names = sorted(op_database())
    if a.only:
        wanted = [w.strip() for w in a.only.split(",") if w.strip()]
        names = [n for n in names if any(n == w or n.startswith(w + ".") for w in wanted)]
        missing = [w for w in wanted if not any(n == w or n.startswith(w + ".") for n in names)]
        if missing:
            ap.error(f"no OpInfo named {missing}")
    if a.part:
        k, n = (int(x) for x in a.part.split("/"))
        if not 1 <= k <= n:
            ap.error(f"--part {a.part}: K must be in 1..N")
        names = names[k - 1::n]
    dtypes = tuple(d.strip() for d in a.dtypes.split(",") if d.strip())
    tasks = [(n, a.samples, dtypes, not a.no_backward) for n in names]
    results = {}
    t0 = time.perf_counter()
    # a bar on a terminal's stderr (nothing in a log or a pipe), the result lines printed above it
    from roofline._util import _progress as progress_bar

    bar = progress_bar.auto(f"OpInfo sweep, {len(tasks)} OpInfos")
    show = bar.above if bar is not None else (lambda text: print(text, flush=True))
    if a.jobs > 1:
        import multiprocessing as mp

        with mp.get_context("fork").Pool(a.jobs, maxtasksperchild=50) as pool:
            it = pool.imap_unordered(_worker, tasks)
            for i, (name, res) in enumerate(it, 1):
                results[name] = res
                show(_progress(i, len(tasks), name, res))
                if bar is not None:
                    bar(f"{name} done ({i}/{len(tasks)})")
    else:
        for i, t in enumerate(tasks, 1):
            if bar is not None:
                bar(f"{t[0]} ({i - 1}/{len(tasks)})")
            name, res = _worker(t)
            results[name] = res
            show(_progress(i, len(tasks), name, res))
    if bar is not None:
        bar.close(f"{len(results)} OpInfos")
    _summary(results, time.perf_counter() - t0)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1, sort_keys=True)
    return 0 if all(fully_counted(r) or r["runs"] == 0 and not r["raised"] for r in results.values()) else 1


def _progress(i, n, name, res) -> str:
    """The result line of OpInfo ``name``, the ``i``-th of ``n``."""
    if fully_counted(res):
        status = "ok"
    elif res["runs"] == 0 and not res["raised"]:
        status = "no runnable sample"
    else:
        parts = []
        if res["unknown"]:
            parts.append("unknown " + " ".join(sorted(res["unknown"])))
        if res["errors"]:
            parts.append("errors " + " ".join(f"{k} ({v})" for k, v in sorted(res["errors"].items())))
        if res["raised"]:
            parts.append("raised " + res["raised"][0])
        if res["fcm"]:
            parts.append("fcm!= " + res["fcm"][0])
        status = "; ".join(parts)
    return f"[{i}/{n}] {name} ({res['runs']} runs, {res['seconds']} s): {status}"


def _summary(results, seconds):
    runnable = {n: r for n, r in results.items() if r["runs"] > 0 or r["raised"]}
    full = [n for n, r in runnable.items() if fully_counted(r)]
    unknown = Counter()
    for r in runnable.values():
        for op in r["unknown"]:
            unknown[op] += 1
    raised = [n for n, r in runnable.items() if r["raised"]]
    errors = [n for n, r in runnable.items() if r["errors"]]
    fcm = [n for n, r in runnable.items() if r["fcm"]]
    print()
    print(f"OpInfos: {len(results)}, with runnable samples: {len(runnable)}, samples run: "
          f"{sum(r['runs'] for r in results.values())}, in {seconds:.0f} s")
    print(f"with unknown ops: {sum(1 for r in runnable.values() if r['unknown'])} ({len(unknown)} distinct ops)")
    for op, k in unknown.most_common():
        print(f"    {op}: {k} OpInfos")
    print(f"with count errors: {len(errors)} {errors[:20]}")
    print(f"raised inside the block: {len(raised)} {raised[:20]}")
    print(f"FlopCounterMode differences: {len(fcm)} {fcm[:20]}")
    print(f"{len(full)}/{len(runnable)} OpInfos fully counted")


if __name__ == "__main__":
    raise SystemExit(main())
