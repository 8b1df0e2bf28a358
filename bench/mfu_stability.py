"""MFU of the same training step over several runs on a busy machine: the stable yardstick beside plain measured
ceilings.

Two busy-looping processes (``--hogs``) compete for the CPUs the whole time. Each run is a fresh process (as a
user's new job is: a measurement under contention is never cached on disk) that measures the ceilings, profiles
the same step (a small MLP's forward, backward and SGD update: ``roofline.profile``, one warm-up step, the median
of 3) and reports its MFU twice from the same counts and times:

* stable: judged as roofline does by default (``ceilings="measured"``): under contention, the last idle
  measurement of this machine, else the CPU's theoretical peak (``meta["ceilings_yardstick"]`` says which);
* plain: against the ceilings this run measured, contended as they are.

The spread of each over the runs, (max - min) / median, and the largest deviation from the median are printed
side by side: the target is the stable MFU within +-5% of its median. The MFU's numerator (FLOPs) is exact and the
same each run, so what remains in the stable column is the step time's own variation under the load.

    python bench/mfu_stability.py [--runs 5] [--hogs 2] [--saved PATH]

``--saved PATH``: saved idle ceilings (``python -m roofline ceilings --save PATH`` on an idle machine) as this
machine's yardstick; without it each run starts from an empty cache folder, so the theoretical peak stands in.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

RUN = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
import torch
import roofline
from roofline.hardware import _ceilings
from roofline.report import Report

torch.manual_seed(0)
torch.set_num_threads(int(sys.argv[1]))
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 512))
x = torch.randn(256, 512)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)


def step():
    model(x).square().mean().backward()
    opt.step()
    opt.zero_grad()


saved = sys.argv[2] or None
r = roofline.profile(step, model, warmup=1, repeat=3, timing="model", ceilings=saved or "measured")
stable = r.totals()["mfu"]
plain_ceilings = _ceilings.ceilings("cpu")  # this run's own measurement (kept for the process, flagged)
plain = Report(r.records, r._ops, r.module_sets, r.wall_time, dict(r.meta), ceilings=plain_ceilings,
               overhead=r.overhead).totals()["mfu"]
c = r.ceilings
print(json.dumps({"stable": stable, "plain": plain, "wall": r.wall_time, "flops": r.total_flops,
                  "yardstick": r.meta.get("ceilings_yardstick", {}).get("kind"),
                  "peak_stable": c.peak("vector", "float32", r.ceilings_source),
                  "peak_plain": plain_ceilings.peak("vector", "float32"),
                  "contention": plain_ceilings.info.get("contention") or []}))
"""


def _hog() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def _spread(values: list[float]) -> tuple[float, float]:
    med = statistics.median(values)
    return (max(values) - min(values)) / med, max(abs(v / med - 1) for v in values)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--hogs", type=int, default=2, help="busy-looping processes competing for the CPUs")
    ap.add_argument("--saved", default="", help="saved idle ceilings to use as the yardstick")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch threads of the step")
    args = ap.parse_args()

    hogs = [_hog() for _ in range(args.hogs)]
    rows = []
    try:
        time.sleep(1.0)
        for i in range(args.runs):
            cache = tempfile.mkdtemp(prefix="roofline-mfu-")
            env = dict(os.environ, ROOFLINE_CACHE_DIR=cache, PYTHONPATH=ROOT + os.pathsep
                       + os.environ.get("PYTHONPATH", ""), ROOFLINE_PROGRESS="0")
            try:
                p = subprocess.run([sys.executable, "-c", RUN, str(args.threads), args.saved], env=env,
                                   capture_output=True, text=True, timeout=900)
            finally:
                shutil.rmtree(cache, ignore_errors=True)
            if p.returncode != 0:
                print(p.stderr[-3000:], file=sys.stderr)
                return 1
            row = json.loads(p.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(f"run {i + 1}: step {row['wall'] * 1e3:7.1f} ms  MFU stable {row['stable']:7.2%} "
                  f"(yardstick {row['yardstick']}, {row['peak_stable'] / 1e9:6.1f} GFLOP/s)  plain "
                  f"{row['plain']:7.2%} (measured {row['peak_plain'] / 1e9:6.1f} GFLOP/s"
                  f"{', contended' if row['contention'] else ''})", flush=True)
    finally:
        for h in hogs:
            h.kill()
            h.wait()

    print()
    print(f"{args.runs} runs, {args.hogs} busy processes, {rows[0]['flops'] / 1e9:.3f} GFLOP per step")
    for key, label in (("stable", "stable yardstick"), ("plain", "plain measured"), ("wall", "step time")):
        vals = [r[key] for r in rows]
        rng, dev = _spread(vals)
        fmt = (lambda v: f"{v:.2%}") if key != "wall" else (lambda v: f"{v * 1e3:.1f} ms")
        print(f"{label:<17} median {fmt(statistics.median(vals)):>9}  min {fmt(min(vals)):>9}  "
              f"max {fmt(max(vals)):>9}  (max-min)/median {rng:6.1%}  largest deviation {dev:6.1%}")
    peaks = [r["peak_plain"] for r in rows]
    print(f"measured float32 peak per run: {', '.join(f'{p / 1e9:.1f}' for p in peaks)} GFLOP/s")
    _, dev = _spread([r["stable"] for r in rows])
    print(f"target: stable MFU within +-5% of its median: {'met' if dev <= 0.05 else 'NOT met'} ({dev:.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
