"""Breadth check of the trace op costing (roofline/_traces/_ops.py) against measure, over torch's OpInfo samples.

For every OpInfo of torch's test suite (``op_db``) with a float32 CPU sample, the first sample is run once under
``roofline.measure`` and once under ``torch.profiler`` (record_shapes); the trace's counted events are costed with
``cost_event`` and compared with measure's records, op by op (in-place and functional variants under one name, as
tests/test_trace_cost.py compares them). Prints, per OpInfo, what differs or what the trace could not cost, then a
summary: how many OpInfos agree exactly, how many have ops the trace lists as unknown (with the reasons), and how
many differ.

    python bench/trace_cost_coverage.py [--limit N] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile

_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path[:0] = [_ROOT, os.path.join(_ROOT, "tests")]


def _by_packet(d):
    out = collections.defaultdict(lambda: [0] * 6)
    for k, v in d.items():
        t = out[k.rsplit(".", 1)[0] if k.count(".") == 2 else k]
        for i, x in enumerate(v):
            t[i] += x
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=0, help="at most this many OpInfos (0: all)")
    ap.add_argument("--only", nargs="*", default=None, help="only these OpInfo names")
    opts = ap.parse_args()

    import torch
    from torch.testing._internal.common_methods_invocations import op_db

    import roofline
    import test_trace_cost as T
    from roofline._traces import _ops

    torch.set_num_threads(1)
    tmp = tempfile.mkdtemp()
    agree, unknown, differ, skipped = [], collections.Counter(), [], 0
    ops = [o for o in op_db if opts.only is None or o.name in opts.only]
    for n, info in enumerate(ops[:opts.limit or None]):
        try:
            sample = next(iter(info.sample_inputs("cpu", torch.float32, requires_grad=False)))
        except Exception:  # noqa: BLE001 - an OpInfo without a float32 CPU sample
            skipped += 1
            continue

        def call():
            info.op(sample.input, *sample.args, **sample.kwargs)
        try:
            call()
            with roofline.measure() as r:
                call()
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as p:
                call()
        except Exception:  # noqa: BLE001 - a sample that does not run here
            skipped += 1
            continue
        path = os.path.join(tmp, "t.json")
        p.export_chrome_trace(path)
        evs, parents = T._tree(path)
        flags = _ops.counted([e["name"] for e in evs], parents, [e.get("args") for e in evs])
        costs = [_ops.cost_event(e["name"], e.get("args", {})) for e, k in zip(evs, flags) if k]
        bad = [c for c in costs if c.status != "ok"]
        ms = T._fold(T._by_op_measure(r))
        for k in list(T.NOT_IN_TRACES) + [T._canonical(u) for u in r.unknown_ops]:
            ms.pop(k, None)  # ops measure has no formula for: the trace lists them as unknown
        tr = T._fold(T._by_op_trace([c for c in costs if c.status == "ok"]))
        for c in bad:
            unknown[(c.op, c.status, c.reason[:100])] += 1
            ms.pop(T._canonical(c.overload), None) if c.overload else None
        # out= and functional variants (a decomposition's branch under a dispatch mode) under one name: the packet
        tr, ms = _by_packet(tr), _by_packet(ms)
        diffs = {k: (tr.get(k), ms.get(k)) for k in set(ms) | set(tr)
                 if tr.get(k, [0] * 6)[1:] != ms.get(k, [0] * 6)[1:]}
        if diffs:
            differ.append(info.name)
            print(f"DIFF {info.name}: " + "; ".join(f"{k} trace {a} measure {b}" for k, (a, b) in diffs.items()))
        elif not bad:
            agree.append(info.name)
    print(f"\n{len(agree)} OpInfos agree exactly, {len(differ)} differ, {skipped} skipped (no float32 CPU sample "
          "that runs); events the trace could not cost:")
    for (op, st, why), k in unknown.most_common():
        print(f"  {k:4d} {st:8s} {op}: {why}")


if __name__ == "__main__":
    main()
