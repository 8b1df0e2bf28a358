"""Speed of the trace op costing (roofline/_traces/_ops.py): events per second of ``counted`` and ``cost_event`` on the
H100 traces of tests/data/traces/tracelens_h100, the cost cache empty (cold) and full (warm), and on a synthetic
trace of a million op events made by repeating one of them (a real job's trace repeats its steps).

    python bench/trace_cost_speed.py [--events N]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path[:0] = [_ROOT, os.path.join(_ROOT, "tests")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000, help="op events of the synthetic trace")
    opts = ap.parse_args()

    from roofline._traces import _events, _ops, _read

    folder = os.path.join(_ROOT, "tests", "data", "traces", "tracelens_h100")
    biggest = None
    print(f"{'trace':48s} {'events':>8s} {'counted/s':>10s} {'ops':>7s} {'cold/s':>9s} {'warm/s':>9s}")
    for name in sorted(f for f in os.listdir(folder) if f.endswith(".json.gz")):
        with _read.open_trace(os.path.join(folder, name)) as raw:
            model = _events.build(raw)  # the op tree as load_trace nests it
        names, parents, args = model.tree()
        args = [a if a is not None else {} for a in args]
        evs = model.nodes
        _ops._OWN.clear()
        t = time.perf_counter()
        flags = _ops.counted(names, parents, args, [_events.KIND_NAMES[n.kind] == "op" for n in evs])
        t_counted = time.perf_counter() - t
        ops = [(n, a) for n, a, k in zip(names, args, flags) if k]
        _ops._CACHE.clear()
        t = time.perf_counter()
        for n, a in ops:
            _ops.cost_event(n, a)
        cold = time.perf_counter() - t
        t = time.perf_counter()
        for n, a in ops:
            _ops.cost_event(n, a)
        warm = time.perf_counter() - t
        print(f"{name[:48]:48s} {len(evs):8d} {len(evs) / t_counted:10.0f} {len(ops):7d} {len(ops) / cold:9.0f} "
              f"{len(ops) / warm:9.0f}")
        if biggest is None or len(ops) > len(biggest):
            biggest = ops
    reps = -(-opts.events // len(biggest))
    events = (biggest * reps)[:opts.events]
    t = time.perf_counter()
    for n, a in events:
        _ops.cost_event(n, a)
    dt = time.perf_counter() - t
    print(f"\n{len(events)} op events (the largest trace's repeated): {dt:.1f} s, {len(events) / dt:.0f} events/s")


if __name__ == "__main__":
    main()
