"""Random interrupts against the step loops: monitored and profiled loops (roofline.monitor, roofline.profile),
their callbacks (some of which stop the loop from inside), and the trainer callbacks' machinery (a profiler and a
monitor driven together; a second run started on the same thread, which must be refused), each hit by one
asynchronous KeyboardInterrupt (or, one time in ten, SystemExit) at a random moment; after each loop, a check that
nothing of it is left behind and that no report or figure of a step that had ended was lost.

    python bench/loop_stress.py [--loops 10000] [--seed 0] [--sweep]

The interrupt comes from a signal handler, as Ctrl-C's does (an interval timer, ``signal.setitimer``, sends SIGALRM
after a random delay drawn uniformly from zero to 1.3 times the median time of a whole loop measured beforehand), so
it lands before the loop, while a block is entered or left, in a step, in a callback, in stop() or after. The loop
is written as a user writes it: ``with`` for the monitor and profiler; for the trainer callbacks' runs, start(),
step() at each boundary, stop() at the end and abort(exc) when the loop raises (what Lightning's ``on_exception``
and the Hugging Face callback's ``close()`` do).

After every loop (once the interrupt has landed) the process-global state must equal what it was before the first
loop (bench/interrupt_stress.py's ``global_state``: torch's dispatch and function mode stacks, the hook tables,
roofline's registries). An interrupt that comes out of the loop as another exception (raised while handling it)
is counted and named, with where it was raised. ``lost`` counts what a loop dropped of the steps that had ended before the interrupt: a
profiler's reports of the cycles whose last active step had ended (and, after a stop() that returned, the partial
cycle's), a report handed to ``on_report`` and not kept (or kept and never handed over), a monitor's figures of a
step whose ``step()`` returned, a run's report without its files. ``--sweep`` instead interrupts every instruction
of the loops' own code in turn (a trace function raising before the k-th one, as tests/test_hardening_loops.py does
for every third one). Prints what leaked and what was lost; exits with status 1 if anything did, 0 otherwise.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import os
import random
import signal
import statistics
import sys
import tempfile
import time
import traceback

_HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("roofline_bench_interrupt_stress",
                                               os.path.join(_HERE, "interrupt_stress.py"))
_stress = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_stress)
global_state, differences = _stress.global_state, _stress.differences

KINDS = ("monitor", "profiler", "run", "two runs")
_LOOP_FILES = ("_loops/_schedule.py", "_loops/_monitor.py", "_loops/_steady.py", os.path.join("integrations", "_run.py"))


def _where(exc) -> str:
    """The innermost function of the step loops' code in the interrupt's traceback ("loop body" if none)."""
    where = None
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename.endswith(_LOOP_FILES):
            where = f"{os.path.basename(code.co_filename)[:-3]}.{code.co_name}"
        elif code.co_filename.endswith("_measure.py") and where is not None:
            where = where.split(" ")[0] + " (in the measure block)"
        tb = tb.tb_next
    return where or "loop body"


class _Loops:
    """Makes and runs the loops; each ``run_one`` returns what the loop left to check."""

    def __init__(self, rng, out_dir):
        import torch

        import roofline
        from _graph_ceilings import ceilings  # tests/_graph.py (_setup_ceilings)

        self.torch, self.roofline, self.rng, self.out_dir = torch, roofline, rng, out_dir
        self.ceil = ceilings()
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
        self.opt = torch.optim.SGD(self.model.parameters(), lr=1e-3)
        self.xs = [torch.randn(b, 8) for b in (2, 2, 2, 3)]  # epochs of three full batches and a small one

    def _train(self, x):
        self.opt.zero_grad()
        self.model(x).sum().backward()
        self.opt.step()

    # ---- the loops ------------------------------------------------------------------------------------------------
    def make(self, kind):
        rng, roofline = self.rng, self.roofline
        steps = rng.randint(2, 6)
        stops = rng.random() < 0.2  # a callback that stops its loop from inside
        if kind == "monitor":
            handed = []

            def on_step(m):
                handed.append(m["step"])
                if stops and m["step"] == 1:
                    mon._stopped_from_callback = True
                    mon.stop()

            mon = roofline.monitor(self.model, on_step=on_step, ceilings=self.ceil, warmup=rng.randint(0, 1),
                                   recount_every=rng.choice((None, 2)))
            mon._stopped_from_callback = False
            return {"kind": kind, "loop": mon, "steps": steps, "handed": handed, "ended": -1, "stopped": False}
        if kind == "profiler":
            handed = []

            def on_report(r):
                handed.append(r)
                if stops:
                    prof._stopped_from_callback = True
                    prof.stop()

            sched = roofline.schedule(wait=rng.randint(0, 1), warmup=rng.randint(0, 1), active=rng.randint(1, 2),
                                      repeat=rng.randint(0, 2))
            prof = roofline.profile(self.model, schedule=sched, on_report=on_report, ceilings=self.ceil,
                                     timing=rng.choice(("model", "op", None)))
            prof._stopped_from_callback = False
            return {"kind": kind, "loop": prof, "steps": steps, "handed": handed, "ended": -1, "stopped": False,
                    "sched": sched}
        from roofline.integrations import _run

        def run(**kw):
            opts = _run.Options("stress", **{**dict(steps=None, schedule=None, monitor=False, output_dir=None,
                                                     tokens=None, timing="model", ceilings=self.ceil,
                                                     attention=None, gather_timeout=10.0, log=True), **kw})
            return _run.Run(opts, self.model, offset=0, output_dir=self.out_dir, framework="stress",
                             log=lambda values, step: None, delta=rng.randint(1, 2))

        first = rng.randint(1, 3)
        r = run(steps=(first, first + rng.randint(0, 1)), monitor={"recount_every": 2})
        spec = {"kind": kind, "loop": r, "steps": steps, "ended": -1, "stopped": False, "moves": rng.randint(1, 2)}
        if kind == "two runs":
            spec["other"] = run(monitor=True)
        return spec

    def run_one(self, spec):
        kind, loop = spec["kind"], spec["loop"]
        spec["lost"] = []
        xs = self.xs
        if kind in ("monitor", "profiler"):
            with loop:
                for i in range(spec["steps"]):
                    x = xs[i % len(xs)]
                    self._train(x)
                    if not loop.running:
                        break
                    if kind == "monitor":
                        loop.step(inputs=x, token_count=x.shape[0])
                    else:
                        loop.step()
                    spec["ended"] = i
                    self._check(spec, final=False)
            spec["stopped"] = True
            self._check(spec, final=True)
            return
        g = 0
        try:
            loop.start()
            for i in range(spec["steps"]):
                x = xs[i % len(xs)]
                self._train(x)
                g += spec["moves"]
                loop.step(inputs=x, tokens=x.shape[0], global_step=g)
                spec["ended"] = i
                self._check(spec, final=False)
                if kind == "two runs" and i == 0:
                    try:
                        spec["other"].start()
                    except ValueError as e:
                        if "another roofline callback" not in str(e):
                            raise
                        spec["refused"] = True
                        return
            loop.stop()
            spec["stopped"] = True
            self._check(spec, final=True)
        except BaseException as e:
            loop.abort(e)
            raise

    # ---- what must not be lost ---------------------------------------------------------------------------------
    def _check(self, spec, final: bool):
        """After a step() (or the loop's end) that returned: nothing of the steps ended so far is missing."""
        kind, loop, ended, lost = spec["kind"], spec["loop"], spec["ended"], spec["lost"]
        if kind == "monitor":
            got = [m["step"] for m in loop.history]
            if got != spec["handed"]:
                lost.append(f"history {got} != handed to on_step {spec['handed']}")
            elif loop.running and got != list(range(ended + 1)):
                lost.append(f"steps 0-{ended} ended, history has {got}")
        elif kind == "profiler":
            n, handed = len(loop.reports), spec["handed"]
            if [id(r) for r in loop.reports] != [id(r) for r in handed]:
                lost.append(f"{n} reports kept, {len(handed)} handed to on_report")
            if loop._stopped_from_callback:
                return
            sched = spec["sched"]
            rec = ("record", "record_and_save")
            active = [s for s in range(ended + 1) if sched(s) in rec]
            cycle = {s: (s - sched.skip_first) // sched.period for s in active}
            if final:  # stop() made the partial cycle's report
                want = len(set(cycle.values()))
            else:
                want = len({cycle[s] for s in active if sched(s) == "record_and_save" or sched(s + 1) not in rec})
            if n != want:
                lost.append(f"{n} reports, {want} cycles had ended (steps 0-{ended} ended, {sched!r})")
        else:
            if loop.profiler is not None and len(loop.reports) != len(loop.profiler.reports):
                lost.append(f"{len(loop.profiler.reports)} profiler reports, {len(loop.reports)} reached the run")
            for r in loop.reports:
                stem = f"step{r.steps[0]}" if len(r.steps) == 1 else f"steps{r.steps[0]}-{r.steps[-1]}"
                for ext in (".json", ".html"):
                    if not os.path.exists(os.path.join(self.out_dir, stem + ext)):
                        lost.append(f"report {stem} without its {ext} file")

    def lost(self, spec) -> list[str]:
        return spec.get("lost", [])

    def cleanup(self, spec):
        """After a leak: close what the loop still holds, so that the next loops start clean."""
        loops = [spec["loop"]] + ([spec["other"]] if "other" in spec else [])
        for loop in loops:
            for inner in ((loop.profiler, loop.monitor) if hasattr(loop, "profiler") and hasattr(loop, "opts")
                          else (loop,)):
                if inner is not None:
                    inner._abandon(RuntimeError("loop_stress cleanup"))


def _setup_ceilings():
    """tests/_graph.py's ceilings() (a synthetic device) when the tests are there, else the datasheet."""
    tests = os.path.join(os.path.dirname(_HERE), "tests")
    if os.path.exists(os.path.join(tests, "_graph.py")):
        sys.path.insert(0, tests)
        import _graph

        sys.modules["_graph_ceilings"] = _graph
    else:  # pragma: no cover - an installed package without its tests
        import types

        sys.modules["_graph_ceilings"] = types.SimpleNamespace(ceilings=lambda: "datasheet")


def run(loops: int = 10000, seed: int = 0, out=sys.stdout) -> dict:
    """Run the stress; returns ``{"landed": Counter(where), "kinds": Counter, "leaks": [...], "lost": [...],
    "swallowed", "silent", "refused", "seconds", "span"}``."""
    _setup_ceilings()
    rng = random.Random(seed)
    tmp = tempfile.TemporaryDirectory(prefix="roofline-loop-stress-")
    maker = _Loops(rng, tmp.name)
    import warnings

    warnings.simplefilter("ignore")  # the profiler's "other ops" warnings of interrupted steps, the runs' warnings
    for kind in KINDS * 2:  # first loops: lazy imports, per-process calibration
        maker.run_one(maker.make(kind))
    baseline = global_state()
    times = []
    for i in range(40):
        spec = maker.make(KINDS[i % len(KINDS)])
        t0 = time.perf_counter()
        maker.run_one(spec)
        times.append(time.perf_counter() - t0)
    assert global_state() == baseline, differences(baseline, global_state())
    span = 1.3 * statistics.median(times)

    alarm = _stress._Alarm()
    unraisable = _stress._Unraisable()
    landed, kinds = collections.Counter(), collections.Counter()
    leaks, lost, silent, replaced = [], [], [], []
    swallowed = refused = never = torch_leaks = 0
    t_start = time.perf_counter()

    def _wait():
        deadline = time.perf_counter() + 1.0
        while not alarm.fired:
            if time.perf_counter() > deadline:
                return False
        return True

    try:
        unraisable.__enter__()
        for i in range(loops):
            kind = rng.choice(KINDS)
            kinds[kind] += 1
            exc = SystemExit if rng.random() < 0.1 else KeyboardInterrupt
            spec = None
            try:
                reported = unraisable.count
                alarm.arm(rng.uniform(0.0, span), exc)
                spec = maker.make(kind)
                maker.run_one(spec)
                if alarm.fired:
                    swallowed += 1
                    if unraisable.count == reported:
                        silent.append((i, kind))
                elif _wait():
                    landed["after the loop"] += 1
                else:
                    never += 1
                where, where_landed = "no interrupt arrived", None
            except Exception as e:  # noqa: BLE001 - the interrupt replaced by another exception on its way out
                ctx = e.__context__
                if not (isinstance(ctx, exc) and str(ctx) == "interrupt_stress"):
                    raise
                tb = traceback.extract_tb(e.__traceback__)[-1]
                replaced.append((i, kind, f"{type(e).__name__}: {e} at {os.path.relpath(tb.filename)}:{tb.lineno}"))
                print(f"loop {i} ({kind}): the interrupt became {replaced[-1][2]}", file=out)
                where, where_landed = "".join(traceback.format_exception(e)), "replaced"
                landed["replaced by another exception"] += 1
            except (KeyboardInterrupt, SystemExit) as e:
                if not isinstance(e, exc) or str(e) != "interrupt_stress":
                    raise
                where_landed = _where(e) if spec is not None else "making the loop"
                landed[where_landed] += 1
                where = "".join(traceback.format_exception(e))
            if spec is not None:
                refused += bool(spec.get("refused"))
                for what in maker.lost(spec):
                    lost.append((i, kind, what))
                    print(f"loop {i} ({kind}) LOST: {what}", file=out)
            after = global_state()
            if after["grad enabled"] != baseline["grad enabled"] and where_landed == "loop body":
                # torch.optim's step sets grad mode off and back around the update without a with statement: an
                # interrupt between the two leaves it off. The loop's own code never ran there: not its leak
                torch_leaks += 1
                maker.torch.set_grad_enabled(baseline["grad enabled"])
                after = global_state()
            if after != baseline:
                leaks.append((i, kind, differences(baseline, after)))
                print(f"loop {i} ({kind}) left state behind:", file=out)
                for line in leaks[-1][2]:
                    print("  " + line, file=out)
                print(f"the interrupt: {where}", file=out)
                if spec is not None:
                    maker.cleanup(spec)
                if global_state() != baseline:
                    print("could not be cleaned up: stopping", file=out)
                    break
    finally:
        alarm.close()
        unraisable.__exit__()
        tmp.cleanup()
    return {"landed": landed, "kinds": kinds, "leaks": leaks, "lost": lost, "swallowed": swallowed,
            "unraisable": unraisable.count, "silent": silent, "refused": refused, "never": never,
            "torch_leaks": torch_leaks, "replaced": replaced,
            "seconds": time.perf_counter() - t_start, "span": span}


def sweep(out=sys.stdout) -> dict:
    """Every instruction of the loops' own code in turn, in a three-step monitor and a three-step profiler loop:
    ``{kind: (instructions, leaks)}``."""
    _setup_ceilings()
    sys.path.insert(0, os.path.join(os.path.dirname(_HERE), "tests"))
    import test_hardening_loops as t

    res = {}
    for kind in ("profiler", "monitor"):
        k, fired, leaks = 0, True, []
        while fired:
            k += 1
            tracer, loop = t._interrupted_loop(kind, k)
            fired = tracer.fired
            if t._modes() != ([], 0):
                leaks.append(k)
                print(f"{kind}: mode left by an interrupt before instruction {k}", file=out)
                loop._abandon(RuntimeError("cleanup"))
        res[kind] = (k - 1, leaks)
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--loops", type=int, default=10000, help="loops to run (default 10000)")
    ap.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    ap.add_argument("--sweep", action="store_true", help="interrupt every instruction of the loops' code instead")
    args = ap.parse_args(argv)
    if args.sweep:
        res = sweep()
        for kind, (n, leaks) in res.items():
            print(f"{kind}: {n} instructions interrupted in turn, {len(leaks)} left a mode behind")
        return 1 if any(leaks for _, leaks in res.values()) else 0
    res = run(args.loops, args.seed)
    total = sum(res["landed"].values())
    print(f"{args.loops} loops ({', '.join(f'{k} {n}' for k, n in sorted(res['kinds'].items()))}), "
          f"{total} interrupts, {res['seconds']:.1f} s (delays up to {res['span'] * 1e3:.2f} ms); "
          f"second runs refused: {res['refused']}")
    print("where the interrupts landed:")
    for where, n in res["landed"].most_common():
        print(f"  {n:6d}  {where}")
    if res["swallowed"]:
        print(f"  {res['swallowed']} raised where Python ignores exceptions; {res['unraisable']} reported by "
              "sys.unraisablehook")
    if res["silent"]:
        print(f"SWALLOWED: {len(res['silent'])} interrupts caught without a report: {res['silent'][:10]}")
    if res["never"]:
        print(f"{res['never']} interrupts never arrived")
    if res["torch_leaks"]:
        print(f"  {res['torch_leaks']} interrupts in torch.optim's step left grad mode off (torch's own code, "
              "not the loop's; put back)")
    print(f"modes or other state left behind: {len(res['leaks'])} loops; reports or figures lost: "
          f"{len(res['lost'])}; interrupts replaced by another exception: {len(res['replaced'])}")
    for i, kind, what in res["replaced"][:10]:
        print(f"  loop {i} ({kind}): {what}")
    return 1 if res["leaks"] or res["lost"] or res["silent"] or res["never"] or res["replaced"] else 0


if __name__ == "__main__":
    sys.exit(main())
