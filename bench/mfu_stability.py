"""MFU of the same training step over several runs on a busy machine: each choice of yardstick and step time side
by side.

Two busy-looping processes (``--hogs``) compete for the CPUs the whole time. Each run is a fresh process (as a
user's new job is: a measurement under contention is never cached on disk) that measures the ceilings, profiles
the same step (a small MLP's forward, backward and SGD update: ``roofline.steady``, one warm-up step, ``--repeat``
measured steps, every op timed with its thread's waits for a CPU: ``timing="op"``, ``step_time="ops_min"``) and
reports its MFU ten times from the same counts and the same measured steps:

* yardstick (the denominator's peak): ``stable``, judged as roofline does by default (``ceilings="measured"``):
  under contention, the last idle measurement of this machine, else the CPU's theoretical peak
  (``meta["ceilings_yardstick"]`` says which); ``plain``, the ceilings this run measured, contended as they are;
* step time (the numerator's time, ``profile(step_time=...)``): ``median``, the median wall time (the default);
  ``min``, the least wall time of the repeats; ``unwaited``, each step's wall time with its threads' waits for a
  CPU taken out (Linux scheduler statistics), median over the repeats; ``unwaited_min``, the least of those;
  ``ops_min``, the step composed of each op call's and each interval between ops' least time over the repeats,
  each with its waits for a CPU taken out.

Per run: the load average when it started, the step times, how much of their runnable time the step's threads
waited for a CPU, the spread of the steps' unwaited times, whether the report flagged OpenMP spin-waiting, and the
ten MFUs.
Then for each choice the spread over the runs, (max - min) / median, and the largest deviation from the median:
the target is an MFU within +-5% of its median. The FLOPs are exact and the same each run, so with the stable
yardstick what remains is the step time's own variation under the load.

    python bench/mfu_stability.py [--runs 5] [--hogs 2] [--threads N] [--repeat 5] [--seconds S] [--saved PATH]
                                  [--omp-passive] [--plain]

The target, MFU within +-5% over 5 runs under two busy processes: ``python bench/mfu_stability.py --runs 5
--threads 1 --seconds 15 --plain`` (the ``ops_min / stable`` row; ``--plain`` adds the step run outside roofline as
a control: where it moves more than 5% itself, so does any measurement of it). ``--seconds S``: each run keeps measuring steps past
``--repeat`` until they have taken S seconds (``roofline.steady(seconds=...)``): the host's own speed moves in phases
of seconds, and steps spread over them let the least times reach its quicker phases in every run.

``--saved PATH``: saved idle ceilings (``python -m roofline ceilings --save PATH`` on an idle machine) as this
machine's yardstick; without it each run starts from an empty cache folder, so the theoretical peak stands in.
``--plain``: each run also runs the step outside roofline right after each measured step (``steady(plain=True)``)
and prints the least of those plain wall times and ops_min's ratio to it. The plain step's least time moves with
the host's own speed alone: where ops_min moves with it and their ratio holds still, what remains of ops_min's
spread is the machine's, not the measurement's; the ratio itself is what the instrumentation adds.
``--omp-passive``: the runs start with ``OMP_WAIT_POLICY=PASSIVE`` (intra-op threads sleep at a barrier instead of
spinning on a CPU that the step's other thread may be waiting for).
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
from roofline._loops._steady import STEP_TIMES, SteadyReport
from roofline._hardware import _ceilings
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
repeat = int(sys.argv[3])
seconds = float(sys.argv[4]) or None
plain = sys.argv[5] == "1"
r = roofline.steady(step, model, warmup=1, repeat=repeat, timing="op", ceilings=saved or "measured",
                    step_time="ops_min", seconds=seconds, plain=plain)  # every op timed, with its waits for a CPU: every kind can be judged
plain_ceilings = _ceilings.ceilings("cpu")  # this run's own measurement (kept for the process, flagged)
r.totals()  # judged: meta["ceilings_yardstick"] says against what
out = {"flops": r.total_flops, "yardstick": r.meta.get("ceilings_yardstick", {}).get("kind"),
       "peak_stable": r.ceilings.peak("vector", "float32", r.ceilings_source),
       "peak_plain": plain_ceilings.peak("vector", "float32"),
       "contention": plain_ceilings.info.get("contention") or [],
       "wait_share": [q.meta.get("load", {}).get("wait_share") for q in r.repeats],
       "step_contention": sum(bool(q.meta.get("contention")) for q in r.repeats),
       "steps": len(r.repeats), "halves": r.meta["steady"]["step_time"].get("halves"),
       "plain": r.meta["steady"].get("plain")}
st = SteadyReport._from_runs(r.repeats, warmup=1, ceilings=saved or "measured", step_time="unwaited")
out["unwaited_spread"] = st.meta["steady"]["step_time"].get("unwaited", {}).get("spread")
out["spin"] = bool(st.meta["steady"]["step_time"].get("spin"))
# the same measured steps, each step time: the package's own aggregation, judged against both yardsticks
for st in STEP_TIMES:
    s = SteadyReport._from_runs(r.repeats, warmup=1, ceilings=saved or "measured", step_time=st)
    plain = Report(s.records, s._ops, s.module_sets, s.wall_time, dict(s.meta), ceilings=plain_ceilings,
                   overhead=s.overhead)
    out[st] = {"time": s.wall_time, "stable": s.totals()["mfu"], "plain": plain.totals()["mfu"]}
print(json.dumps(out))
"""

KINDS = ("median", "min", "unwaited", "unwaited_min", "ops_min")
COMBOS = [(st, y) for st in KINDS for y in ("stable", "plain")]


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
    ap.add_argument("--repeat", type=int, default=5, help="measured steps per run (profile's repeat)")
    ap.add_argument("--seconds", type=float, default=0.0, help="keep measuring steps past --repeat until they "
                    "have taken this long (steady(seconds=...)); 0: just --repeat")
    ap.add_argument("--omp-passive", action="store_true", help="run the steps with OMP_WAIT_POLICY=PASSIVE")
    ap.add_argument("--plain", action="store_true", help="also run the step outside roofline after each "
                    "measured step (steady(plain=True)): its least wall time moves with the host's speed alone")
    args = ap.parse_args()

    hogs = [_hog() for _ in range(args.hogs)]
    rows = []
    try:
        time.sleep(1.0)
        for i in range(args.runs):
            cache = tempfile.mkdtemp(prefix="roofline-mfu-")
            env = dict(os.environ, ROOFLINE_CACHE_DIR=cache, PYTHONPATH=ROOT + os.pathsep
                       + os.environ.get("PYTHONPATH", ""), ROOFLINE_PROGRESS="0")
            if args.omp_passive:
                env["OMP_WAIT_POLICY"] = "PASSIVE"
            load = os.getloadavg()
            try:
                p = subprocess.run([sys.executable, "-c", RUN, str(args.threads), args.saved, str(args.repeat),
                                    str(args.seconds), "1" if args.plain else "0"],
                                   env=env, capture_output=True, text=True, timeout=900)
            finally:
                shutil.rmtree(cache, ignore_errors=True)
            if p.returncode != 0:
                print(p.stderr[-3000:], file=sys.stderr)
                return 1
            row = json.loads(p.stdout.strip().splitlines()[-1])
            rows.append(row)
            waits = [w for w in row["wait_share"] if w is not None]
            print(f"run {i + 1} (load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at its start): step median "
                  f"{row['median']['time'] * 1e3:7.1f} ms, min {row['min']['time'] * 1e3:7.1f}, unwaited "
                  f"{row['unwaited']['time'] * 1e3:7.1f}, unwaited_min {row['unwaited_min']['time'] * 1e3:7.1f}, "
                  f"ops_min {row['ops_min']['time'] * 1e3:7.1f} "
                  f"(spread of the steps' unwaited times {row['unwaited_spread'] or 0:.0%}"
                  f"{', SPIN flagged' if row['spin'] else ''}); threads waited "
                  f"{statistics.median(waits) if waits else float('nan'):.0%} for a CPU (median), "
                  f"{row['step_contention']}/{row['steps']} steps flagged"
                  + (f"; ops_min from each half of the steps {row['halves'][0] * 1e3:.2f} and "
                     f"{row['halves'][1] * 1e3:.2f} ms" if row["halves"] else "")
                  + f"; peak stable {row['peak_stable'] / 1e9:.1f} "
                  f"({row['yardstick']}), plain {row['peak_plain'] / 1e9:.1f} GFLOP/s"
                  f"{' (contended)' if row['contention'] else ''}", flush=True)
            print("       MFU " + "  ".join(f"{st}/{y} {row[st][y]:6.2%}" for st, y in COMBOS), flush=True)
            if row["plain"]:
                print(f"       plain steps (outside roofline, each after a measured one): least "
                      f"{row['plain']['least'] * 1e3:.2f} ms of {row['plain']['steps']}; ops_min / that "
                      f"{row['ops_min']['time'] / row['plain']['least']:.3f}", flush=True)
    finally:
        for h in hogs:
            h.kill()
            h.wait()

    print()
    print(f"{args.runs} runs, {args.hogs} busy processes, {args.threads} torch threads"
          f"{' (OMP_WAIT_POLICY=PASSIVE)' if args.omp_passive else ''}, "
          + (f"steps measured for {args.seconds:g} s (at least {args.repeat}; "
             f"{min(r['steps'] for r in rows)} to {max(r['steps'] for r in rows)})" if args.seconds
             else f"{args.repeat} measured steps")
          + f" per run, {rows[0]['flops'] / 1e9:.3f} GFLOP per step; load average now {os.getloadavg()[0]:.1f}")
    print(f"{'step time / yardstick':<22}{'median':>9}{'min':>9}{'max':>9}{'(max-min)/med':>15}{'largest dev':>13}"
          "  +-5%")
    for st, y in COMBOS:
        vals = [r[st][y] for r in rows]
        rng, dev = _spread(vals)
        print(f"{st + ' / ' + y:<22}{statistics.median(vals):>9.2%}{min(vals):>9.2%}{max(vals):>9.2%}"
              f"{rng:>15.1%}{dev:>13.1%}  {'met' if dev <= 0.05 else 'NOT met'}")
    for st in KINDS:
        vals = [r[st]["time"] for r in rows]
        rng, dev = _spread(vals)
        print(f"step time {st:<12}{statistics.median(vals) * 1e3:>7.1f} ms  min {min(vals) * 1e3:.1f}  max "
              f"{max(vals) * 1e3:.1f}  (max-min)/median {rng:.1%}  largest deviation {dev:.1%}")
    if args.plain:
        for name, vals in (("plain least wall", [r["plain"]["least"] for r in rows]),
                           ("ops_min / plain least", [r["ops_min"]["time"] / r["plain"]["least"] for r in rows])):
            rng, dev = _spread(vals)
            unit = (lambda v: f"{v * 1e3:.2f} ms") if "wall" in name else (lambda v: f"{v:.3f}")
            print(f"{name:<22}{unit(statistics.median(vals))}  min {unit(min(vals))}  max {unit(max(vals))}  "
                  f"(max-min)/median {rng:.1%}  largest deviation {dev:.1%}")
    peaks = [r["peak_plain"] for r in rows]
    print(f"measured float32 peak per run: {', '.join(f'{p / 1e9:.1f}' for p in peaks)} GFLOP/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
