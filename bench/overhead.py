"""Counting overhead of roofline.measure beside torch's FlopCounterMode, measured side by side in one run.

For each workload: the bare wall time, the time under FlopCounterMode and the time under roofline.measure, and
the ratio (roofline - bare) / (FlopCounterMode - bare): below 1.0 roofline adds less time than FlopCounterMode while
also counting bytes and vector FLOPs. Each variant runs twice untimed (its first runs: lazy imports, caches, op
resolutions), then the variants run in rounds, once each per round, in a shuffled order each round, each run after a
garbage collection and with the collector off (a collection inside one run and not another is noise of tens of
milliseconds). The objects that exist before the rounds (torch, the model, the imports) are frozen out of those
collections (gc.freeze): a collection then scans only what the runs made, in under a millisecond instead of the
~0.2 s a full scan of the ~350 k objects of torch and the workloads' imports takes, so the rounds fit several times
more runs into their time. Three estimates of the ratio are printed:

- paired (the headline): each round runs the variants back to back, so a round's differences roofline - bare and
  FlopCounterMode - bare are taken at one machine speed; the ratio is that of the medians of those per-round
  differences. It cancels the drifts of a shared or virtual machine (whose speed changes by tens of percent
  between seconds) and ignores single outliers (one run of one variant much faster or slower than all others);
- fastest: of each variant's fastest run (on a machine whose noise only adds time, the least disturbed run; one
  lucky run of one variant moves it, which a virtual machine's varying clock makes common);
- medians: of each variant's median run.

    python bench/overhead.py [--repeats N] [--seconds S] [--workload resnet|gpt2] [--clock wall|cpu] [--calls]
                             [--threads N] [--malloc pinned|default] [--floor] [--instructions]

Rounds: at least --repeats, then more while the workload's rounds have taken less than --seconds, up to 16 times
--repeats (a cheap workload gets many rounds, an expensive one the minimum). The paired ratio is printed with a 90%
interval (a bootstrap over the rounds: the rounds resampled with replacement, the ratio recomputed, its 5th and
95th percentiles; a resample in which FlopCounterMode added nothing has no ratio and counts as infinite, so an
interval whose upper end is inf says that the rounds cannot bound the ratio): when the interval is wide, the machine
was too noisy for the figure to mean much.

--malloc pinned (the default, where the C library is glibc) raises glibc's mmap and trim thresholds before the
workloads are built, so that freed large buffers stay in the process's heap: with glibc's defaults, a GPT-2 step
on CPU maps and unmaps its large activations every step (~170 k page faults and ~0.3 s of system time per step,
under every variant alike), noise tens of times larger than the differences measured. Every variant runs with the
same allocator settings; --malloc default keeps glibc's. The --instructions child runs with glibc's defaults (what
the allocator costs in page faults is the kernel's time, which callgrind does not count).

The capture (call signatures and dataflow rows, Report.signatures / Report.accesses) is part of roofline's time;
a fourth variant runs with it switched off, and "capture +%" is what it adds to roofline's counting overhead:
(roofline - roofline without capture) / (roofline without capture - bare). That difference is often below the
run-to-run noise of a whole model, so "record us" also times the recorder alone: the workload's own calls (those
taking the C path) replayed through Recorder.record, with and without the capture.

--floor also times a dispatch mode that counts nothing and only decomposes ops as FlopCounterMode does, in Python:
its share of FlopCounterMode's overhead is what dispatching every op to a Python mode and decomposing composite ops
cost before any counting. It is a reference, not a bound: roofline's per-op path runs in C and keeps the
decomposition decision per op, so it can come in below it.

--clock cpu times with this process's CPU time instead of the wall clock: on a machine loaded by other work it
is far less noisy (GPT-2 then sums the CPU time of torch's intra-op threads). --calls also prints the Python
function calls per op call under each variant, counted by cProfile: a deterministic measure of the per-op work
done in Python (it does not see C or C++ work).
"""

import argparse
import ctypes
import gc
import random
import statistics
import sys
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

import roofline
from roofline._capture import _session


def resnet50_meta_forward():
    import torchvision

    with torch.device("meta"):
        model = torchvision.models.resnet50()
        x = torch.randn(8, 3, 224, 224)

    def run():
        with torch.no_grad():
            model(x)

    return model, run


def gpt2_cpu_forward_backward(seq=128):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(loss_type="ForCausalLM"))
    ids = torch.randint(0, 50257, (1, seq))

    def run():
        model(ids, labels=ids).loss.backward()
        model.zero_grad(set_to_none=True)

    return model, run


WORKLOADS = {"resnet": ("ResNet-50 forward, meta, batch 8", resnet50_meta_forward),
             "gpt2": ("GPT-2 fwd+bwd, CPU, seq 128", gpt2_cpu_forward_backward)}


def timed(fn, repeats, wrap=None, clock=time.perf_counter, warmup=True):
    """Median seconds of `repeats` runs (after a warm-up run unless `warmup` is false), each after a full collection
    with the collector off."""
    times = []
    for i in range(repeats + bool(warmup)):
        gc.collect()
        gc.disable()
        try:
            t0 = clock()
            if wrap is None:
                fn()
            else:
                with wrap():
                    fn()
            t = clock() - t0
        finally:
            gc.enable()
        if i or not warmup:
            times.append(t)
    return statistics.median(times)


class _Floor(TorchDispatchMode):
    """A dispatch mode that counts nothing and tracks no module: torch's call into Python for every op, and the
    decomposition rule roofline shares with FlopCounterMode (an op with a CompositeImplicitAutograd kernel runs
    decomposed, its parts seen by the mode), decided in Python on every call."""

    supports_higher_order_operators = True

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if (isinstance(func, torch._ops.OpOverload) and func is not torch.ops.prim.device.default
                and func._can_decompose()):
            with self:
                out = func.decompose(*args, **kwargs)
            if out is not NotImplemented:
                return out
        return func(*args, **kwargs)


class _NoCapture:
    """roofline.measure with the signature and dataflow capture switched off."""

    def __init__(self, model):
        self.m = roofline.measure(model)

    def __enter__(self):
        _session.CAPTURE = False
        try:
            return self.m.__enter__()
        finally:
            _session.CAPTURE = True

    def __exit__(self, *exc):
        return self.m.__exit__(*exc)


def pin_malloc() -> str:
    """Raise glibc's mmap and trim thresholds (mallopt M_MMAP_THRESHOLD, M_TRIM_THRESHOLD): large freed buffers
    are then reused from the heap instead of being unmapped and mapped again (page faults) on every step. What was
    done, for the printout."""
    try:
        libc = ctypes.CDLL(None)  # TypeError on Windows
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return "default (no mallopt: not glibc)"
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    m_trim_threshold, m_mmap_threshold = -1, -3
    for limit in (1 << 30, 32 << 20):  # older glibc caps the mmap threshold at 32 MiB
        if mallopt(m_mmap_threshold, limit) == 1:
            break
    else:
        return "default (mallopt refused the thresholds)"
    if mallopt(m_trim_threshold, 1 << 30) != 1:
        return f"mmap threshold pinned at {limit >> 20} MiB, trim threshold glibc's (mallopt refused it)"
    return f"pinned (glibc mmap threshold {limit >> 20} MiB, trim threshold 1024 MiB)"


def paired_ratio(times, rng=None, n_boot=2000):
    """The paired ratio of `times` (variant -> per-round seconds), and its 90% bootstrap interval over rounds."""
    def ratio(idx):  # None where FlopCounterMode's median difference is not positive: no ratio
        d_f = statistics.median(times["fcm"][i] - times["bare"][i] for i in idx)
        d_m = statistics.median(times["roofline"][i] - times["bare"][i] for i in idx)
        return d_m / d_f if d_f > 0 else None

    n = len(times["bare"])
    point = ratio(range(n))
    if point is None:
        return float("nan"), float("nan"), float("nan")
    rng = rng or random.Random(1)
    # a resample without a ratio counts as infinite: it cannot bound the ratio from above
    boots = sorted(float("inf") if r is None else r
                   for r in (ratio([rng.randrange(n) for _ in range(n)]) for _ in range(n_boot)))
    return point, boots[int(0.05 * (n_boot - 1))], boots[int(0.95 * (n_boot - 1))]


def record_cost(run, model, capture, repeats=5):
    """Seconds per Recorder.record call: the workload's C-path calls, captured once, replayed through the session's
    recorder (cleared between repeats); best of `repeats`."""
    import types

    calls, sessions = [], []
    init = _session.Session.__init__

    def spy_init(self, *a, **k):  # the session's C dispatch, with a recorder that also keeps each call
        init(self, *a, **k)
        rec = self.recorder.record

        def record(*args):
            calls.append(args)
            return rec(*args)

        self.dispatch = _session._core.Dispatch(self.tracker.c, record, _session._graph_task_id,
                                              _session._Mode.__torch_dispatch__, rows=self.recorder)
        self.mode.__torch_dispatch__ = types.MethodType(self.dispatch, self.mode)
        sessions.append(self)

    _session.Session.__init__ = spy_init
    _session.CAPTURE = capture
    try:
        with roofline.measure(model):
            run()
    finally:
        _session.Session.__init__ = init
        _session.CAPTURE = True
    rec = sessions[0].recorder
    best = float("inf")
    for _ in range(repeats):
        rec.clear()
        t0 = time.process_time()
        for c in calls:
            rec.record(*c)
        best = min(best, time.process_time() - t0)
    return best / len(calls), len(calls)


def python_calls(run, wrap=None):
    """Python function calls (cProfile's count, built-ins included) of one run of `run`, after a warm-up."""
    import cProfile
    import pstats

    for _ in range(2):
        prof = cProfile.Profile()
        prof.enable()
        try:
            if wrap is None:
                run()
            else:
                with wrap():
                    run()
        finally:
            prof.disable()
    return pstats.Stats(prof).total_calls


# ---- instruction counts (valgrind's callgrind) --------------------------------------------------------------------
# The machine this runs on may be shared and its clock noisy (runs of one variant differing by half); instructions
# executed are not. --instructions reruns the workloads in a child process under callgrind: each variant runs once
# uninstrumented (warm-up), then once inside a region a small C helper marks with callgrind's client requests
# (instrumentation and collection switched on around the call only, a dump named after the variant at its end).
# The ratio is then (roofline - bare) / (FlopCounterMode - bare) in instructions: the work each adds, on every
# machine the same up to the allocator's and the JIT's state.
_HELPER = r"""
#include <valgrind/callgrind.h>
typedef void (*rl_fn)(void);
volatile int rl_bench_calls;
void rl_bench_region(rl_fn fn, const char *name) {
    CALLGRIND_START_INSTRUMENTATION;
    CALLGRIND_TOGGLE_COLLECT;
    fn();
    CALLGRIND_TOGGLE_COLLECT;
    CALLGRIND_DUMP_STATS_AT(name);
    CALLGRIND_STOP_INSTRUMENTATION;
    rl_bench_calls++;
}
"""


def _build_helper(directory):
    import subprocess

    src = f"{directory}/helper.c"
    with open(src, "w") as f:
        f.write(_HELPER)
    out = f"{directory}/helper.so"
    p = subprocess.run(["gcc", "-O1", "-shared", "-fPIC", "-o", out, src], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"--instructions needs gcc and valgrind's headers (valgrind/callgrind.h): {p.stderr[:400]}")
    return out


def _instructions_child(key, helper):
    """In the child under callgrind: each variant once to warm up, then once in a counted region."""
    import ctypes

    lib = ctypes.CDLL(helper)
    lib.rl_bench_region.argtypes = [ctypes.CFUNCTYPE(None), ctypes.c_char_p]
    _, build = WORKLOADS[key]
    # GPT-2 at 2 tokens: the same ops as at 128 (what the counting costs is per op) with little arithmetic, which
    # under callgrind takes tens of minutes per run even at 16 tokens
    model, run = build(2) if key == "gpt2" else build()
    variants = {"bare": None, "fcm": lambda: FlopCounterMode(display=False),
                "roofline": lambda: roofline.measure(model), "nocap": lambda: _NoCapture(model)}
    for name, wrap in variants.items():
        def body(wrap=wrap):
            if wrap is None:
                run()
            else:
                with wrap():
                    run()

        body()
        gc.collect()
        gc.disable()
        cb = ctypes.CFUNCTYPE(None)(body)
        lib.rl_bench_region(cb, f"{key}:{name}".encode())
        gc.enable()


def instructions(keys):
    """{workload: {variant: instructions}} from one callgrind child per workload."""
    import glob
    import os
    import subprocess
    import tempfile

    if subprocess.run(["valgrind", "--version"], capture_output=True).returncode != 0:
        raise SystemExit("--instructions needs valgrind")
    out = {}
    with tempfile.TemporaryDirectory() as d:
        helper = _build_helper(d)
        for key in keys:
            # one thread: valgrind runs threads one at a time, and OpenMP workers spinning at a barrier would burn
            # the time of the one doing the work (and add their spins to the counts)
            # and one hash seed: string hashes decide dict and set layouts, whose probing differs by some 10^5
            # instructions from one seed to another
            env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONHASHSEED="0")
            p = subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no", "--collect-atstart=no",
                                f"--callgrind-out-file={d}/cg.{key}.%p", sys.executable, os.path.abspath(__file__),
                                "--instructions-child", key, "--helper", helper, "--threads", "1"],
                               capture_output=True, text=True, env=env)
            if p.returncode != 0:
                raise SystemExit(f"callgrind run of {key} failed: {p.stderr[-2000:]}")
            counts = {}
            for path in glob.glob(f"{d}/cg.{key}.*"):
                label = total = None
                with open(path) as f:
                    for line in f:
                        if line.startswith("desc: Trigger: Client Request: "):
                            label = line.split(": ", 3)[-1].strip()
                        elif line.startswith(("totals:", "summary:")):
                            total = int(line.split()[1])
                if label and label.startswith(f"{key}:") and total is not None:
                    counts[label.split(":", 1)[1]] = total
            out[key] = counts
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=16, help="least rounds of the four variants")
    ap.add_argument("--seconds", type=float, default=120.0,
                    help="more rounds (up to 16 x --repeats) while a workload's rounds have taken less than this "
                         "(0: exactly --repeats)")
    ap.add_argument("--floor", action="store_true",
                    help="also time a dispatch mode that counts nothing and only decomposes as FlopCounterMode does")
    ap.add_argument("--malloc", choices=("pinned", "default"), default="pinned",
                    help="glibc's allocator thresholds: pinned (large buffers stay mapped) or glibc's defaults")
    ap.add_argument("--workload", choices=sorted(WORKLOADS), action="append",
                    help="run only this workload (repeatable; default: all)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    ap.add_argument("--calls", action="store_true", help="also count Python function calls per op (cProfile)")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch intra-op threads (default: torch's); 1 makes the CPU clock steadier on a shared machine")
    ap.add_argument("--instructions", action="store_true",
                    help="also count instructions under valgrind's callgrind (deterministic; minutes per workload)")
    ap.add_argument("--instructions-child", help=argparse.SUPPRESS)
    ap.add_argument("--helper", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    if args.instructions_child:
        _instructions_child(args.instructions_child, args.helper)
        return 0
    if args.repeats < 1 or args.seconds < 0:
        ap.error("--repeats must be at least 1 and --seconds at least 0")
    malloc = pin_malloc() if args.malloc == "pinned" else "default"
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    rows, calls, recs, floors = [], [], [], []
    for key in args.workload or list(WORKLOADS):
        name, build = WORKLOADS[key]
        model, run = build()
        n_ops = None
        with roofline.measure(model) as r:
            run()
        n_ops = len(r.records)
        # interleave the variants, in a new order each round, so drifts in machine load hit all of them alike
        variants = {"bare": None, "fcm": lambda: FlopCounterMode(display=False),
                    "roofline": lambda: roofline.measure(model), "nocap": lambda: _NoCapture(model)}
        if args.floor:
            variants["floor"] = _Floor
        times = {k: [] for k in variants}
        order = list(variants)
        for k in order:  # each variant's first two runs (caches, lazy imports, op resolutions) are not kept
            timed(run, 1, variants[k], clock=clock)
        # what exists now (torch, the model, the imports) is left out of every collection: a full collection
        # scans only what the runs made (under 1 ms instead of ~0.2 s)
        gc.collect()
        gc.freeze()
        rng = random.Random(0)
        start = time.perf_counter()
        rounds = 0
        try:
            while rounds < args.repeats or (time.perf_counter() - start < args.seconds
                                            and rounds < 16 * args.repeats):
                rng.shuffle(order)
                for k in order:
                    times[k].append(timed(run, 1, variants[k], clock=clock, warmup=False))
                rounds += 1
        finally:
            gc.unfreeze()
        b, f, m, m0 = (min(times[k]) for k in ("bare", "fcm", "roofline", "nocap"))
        bm, fm, mm = (statistics.median(times[k]) for k in ("bare", "fcm", "roofline"))
        ratio_fastest = (m - b) / (f - b) if f > b else float("nan")
        ratio_median = (mm - bm) / (fm - bm) if fm > bm else float("nan")
        # per round: the differences to that round's bare run (the same machine speed), then their medians
        d_f, d_m, d_m0 = (statistics.median(x - y for x, y in zip(times[k], times["bare"]))
                          for k in ("fcm", "roofline", "nocap"))
        ratio, lo, hi = paired_ratio(times)
        if args.floor:
            d_floor = statistics.median(x - y for x, y in zip(times["floor"], times["bare"]))
            floors.append((name, d_floor, d_floor / d_f if d_f > 0 else float("nan")))
        capture = (d_m - d_m0) / d_m0 if d_m0 > 0 else float("nan")
        rows.append((name, n_ops, bm, bm + d_f, bm + d_m, ratio, bm + d_m0, capture, ratio_median, ratio_fastest,
                     lo, hi, rounds))
        (on, n_c), (off, _) = record_cost(run, model, True), record_cost(run, model, False)
        recs.append((name, n_c, on, off, (on - off) * n_c / (m0 - b) if m0 > b else float("nan")))
        if args.calls:
            c = [python_calls(run, w) for w in (None, lambda: FlopCounterMode(display=False),
                                                 lambda: roofline.measure(model), lambda: _NoCapture(model))]
            calls.append((name, n_ops, *c))
    print(f"{'workload':<34} {'ops':>6} {'bare ms':>9} {'FCM ms':>9} {'roofline ms':>12} "
          f"{'FCM us/op':>10} {'roofline us/op':>15} {'ratio':>6} {'90% interval':>13} {'rounds':>7} "
          f"{'(fastest)':>10} {'(medians)':>10} {'no-capture ms':>14} {'capture +%':>11}")
    for name, n, b, f, m, ratio, m0, capture, ratio_median, ratio_fastest, lo, hi, rounds in rows:
        print(f"{name:<34} {n:>6} {b * 1e3:>9.1f} {f * 1e3:>9.1f} {m * 1e3:>12.1f} "
              f"{(f - b) / n * 1e6:>10.1f} {(m - b) / n * 1e6:>15.1f} {ratio:>6.2f} {f'[{lo:.2f}, {hi:.2f}]':>13} "
              f"{rounds:>7} {ratio_fastest:>10.2f} {ratio_median:>10.2f} {m0 * 1e3:>14.1f} {capture * 100:>10.1f}%")
    print("ratio = (roofline - bare) / (FlopCounterMode - bare), paired: the medians over rounds of each round's "
          "differences to its bare run, with its 90% bootstrap interval over the rounds; (fastest): of each "
          "variant's fastest run; (medians): of each variant's median. roofline also counts bytes and vector FLOPs.")
    print("times: bare = its median run, the others = bare + their median paired difference. capture +% = "
          "(roofline - roofline without capture) / (roofline without capture - bare): what the signatures and "
          "dataflow rows add to the counting overhead.")
    print(f"clock: {args.clock}; at least {args.repeats} rounds of the variants in shuffled order, more within "
          f"{args.seconds:g} s per workload (at most {16 * args.repeats}); torch threads: {torch.get_num_threads()}; "
          f"malloc: {malloc}")
    print(f"\n{'record us (process CPU time)':<34} {'calls':>6} {'capture':>9} {'no capture':>11} "
          f"{'capture adds':>13} {'of overhead':>12}")
    for name, n, on, off, share in recs:
        print(f"{name:<34} {n:>6} {on * 1e6:>9.2f} {off * 1e6:>11.2f} {(on - off) * 1e6:>10.2f} us "
              f"{share * 100:>11.1f}%")
    print("of overhead = (capture - no capture) per call x C-path calls / (roofline without capture - bare)")
    if floors:
        print(f"\n{'floor (a mode that only decomposes)':<36} {'ms added':>9} {'of FCM':>7}")
        for name, d, share in floors:
            print(f"{name:<36} {d * 1e3:>9.1f} {share:>7.2f}")
        print("of FCM = (floor - bare) / (FlopCounterMode - bare): dispatching every op to a Python mode and "
              "decomposing, before any counting (a reference: roofline's C path can come in below it)")
    if calls:
        print(f"\n{'Python calls per op':<34} {'ops':>6} {'bare':>9} {'FCM +':>9} {'roofline +':>12} {'ratio':>6} "
              f"{'no-capture +':>13}")
        for name, n, b, f, m, m0 in calls:
            print(f"{name:<34} {n:>6} {b / n:>9.1f} {(f - b) / n:>9.1f} {(m - b) / n:>12.1f} "
                  f"{(m - b) / (f - b):>6.2f} {(m0 - b) / n:>13.1f}")
    if args.instructions:
        counted = instructions(args.workload or list(WORKLOADS))
        print(f"\n{'instructions (callgrind)':<34} {'bare M':>9} {'FCM M':>9} {'roofline M':>11} {'no-capture M':>13} "
              f"{'ratio':>6}")
        for key, c in counted.items():
            b, f, m, m0 = (c.get(k, float("nan")) / 1e6 for k in ("bare", "fcm", "roofline", "nocap"))
            print(f"{WORKLOADS[key][0]:<34} {b:>9.1f} {f:>9.1f} {m:>11.1f} {m0:>13.1f} {(m - b) / (f - b):>6.2f}")
        print("ratio = (roofline - bare) / (FlopCounterMode - bare) in instructions executed, one warm run each "
              "(GPT-2 at 2 tokens: the same ops, little arithmetic)")
    return 0 if all(r[5] <= 1.0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
