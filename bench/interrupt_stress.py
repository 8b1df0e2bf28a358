"""Random interrupts against roofline.measure: short blocks, each hit by one asynchronous KeyboardInterrupt (or, one
time in ten, SystemExit) at a random moment, and after each block a check that nothing of it is left behind.

    python bench/interrupt_stress.py [--blocks 10000] [--seed 0]

The interrupt comes from a signal handler, as Ctrl-C's does: an interval timer (``signal.setitimer``) sends SIGALRM
after a random delay, and the handler raises. The delay is drawn uniformly from zero to 1.3 times the median time of
a whole iteration measured beforehand, so interrupts land before the block, while it is entered, in its body, while
it is left, and after it. The blocks vary: with and without a model, the three timing settings, an ``attention``
choice (which replaces ``F.scaled_dot_product_attention`` while open), nested inside an open outer block or not; the
model's input requires grad, so the module hooks' gradient bookkeeping runs too.

After every block (once the interrupt has landed) the process-global state must equal what it was before the first
block (:func:`global_state`): torch's dispatch and function mode stacks and its mode flags, the module and optimizer
hook tables, ``F.scaled_dot_product_attention``, the compile settings a block changes, and roofline's own
registries. An interrupt that fired but did not propagate must have been reported by CPython as unraisable (raised in
a finaliser or callback: ``sys.unraisablehook`` is watched during the run); one caught silently is a failure. Prints
how many interrupts landed in each phase; exits with status 1 on the first leak (naming what differs), when an
interrupt never arrived, or when one was caught without a report, 0 otherwise. tests/test_block_state.py runs a short version.
"""

from __future__ import annotations

import argparse
import random
import signal
import statistics
import sys
import time
import traceback

PHASES = ("before", "enter", "body", "exit", "report", "after")

# where an interrupt landed, from the innermost frame of roofline's block code in its traceback
# (the steps of roofline/_measure.py's Measure, which roofline._core.Block calls)
_STEPS = {"_prepare": "enter", "_enter": "enter", "_abort": "enter", "_closing": "exit", "_unwind": "exit",
          "_finish": "report"}


def global_state() -> dict:
    """Every piece of process-global (or this thread's) state a measure block changes while it is open, as values
    that compare equal when the state is the same (objects by identity)."""
    import torch
    import torch.nn.functional as F
    import torch.nn.modules.module as mm
    import torch.optim.optimizer as oo
    import torch.utils._python_dispatch as pd

    from roofline._capture import _collectives, _sdpa, _session, _tracking
    from roofline._compiled import _view

    def ids(xs):
        return tuple(id(x) for x in xs)

    queues = ("old_dispatch_mode_flags", "old_non_infra_dispatch_mode_flags",
              "old_without_ignore_compile_internals_dispatch_mode_flags")

    modes = [torch._C._get_dispatch_stack_at(i) for i in range(torch._C._len_torch_dispatch_stack())]
    fmodes = [torch._C._get_function_stack_at(i) for i in range(torch._C._len_torch_function_stack())]
    config = {}
    for modname, key in (("torch._functorch.config", "enable_autograd_cache"),
                         ("torch._inductor.config", "fx_graph_cache")):
        mod = sys.modules.get(modname)
        if mod is not None and hasattr(mod, key):
            config[f"{modname}.{key}"] = getattr(mod, key)
    return {
        "dispatch mode stack": ids(modes),
        "mode flag deques": tuple(len(getattr(m, q, ())) for m in modes for q in queues),
        "function mode stack": ids(fmodes),
        "torch mode flags": {k: v for k, v in vars(pd).items() if k.startswith("_is_in_")},
        "module hooks": {k: tuple((h, id(f)) for h, f in v.items()) for k, v in vars(mm).items()
                         if k.startswith("_global_") and isinstance(v, dict)},
        "optimizer hooks": {k: tuple((h, id(f)) for h, f in v.items()) for k, v in vars(oo).items()
                            if k.startswith("_global_optimizer") and isinstance(v, dict)},
        "F.scaled_dot_product_attention": id(F.__dict__.get("scaled_dot_product_attention")),
        "compile settings": config,
        "roofline module trackers": ids(_tracking._MODULE_HOOKS.trackers)
        + ids(getattr(f, "__self__", f) for f in _tracking._MODULE_HOOKS.pre + _tracking._MODULE_HOOKS.post),
        "roofline open blocks (context)": ids(_session._OPEN.get()),
        "roofline mode flag holders": ids(_session._FLAG_HOLDERS),
        "roofline attention modes": ids(_sdpa._HOLDERS) + ids(getattr(_sdpa._LOCAL, "modes", ())),
        "roofline saved sdpa": ids(_sdpa._ORIGINAL),
        "roofline DTensor guard holders": (ids(_collectives._holders), ids(_collectives._wrapped)),
        "roofline compiled collectors": ids(_view._ACTIVE) + ids(_view._CONFIG_SAVED),
        "grad enabled": torch.is_grad_enabled(),
    }


def differences(before: dict, after: dict) -> list[str]:
    return [f"{k}: {before[k]!r} -> {after[k]!r}" for k in before if before[k] != after.get(k)]


class _Alarm:
    """One asynchronous exception per arm(): SIGALRM after `delay` seconds, its handler raising."""

    def __init__(self):
        if signal.getitimer(signal.ITIMER_REAL) != (0.0, 0.0):
            raise RuntimeError("interrupt_stress: the real interval timer (SIGALRM) is already in use")
        self.fired = True
        self.exc = KeyboardInterrupt
        self._old = signal.signal(signal.SIGALRM, self._handler)

    def _handler(self, signum, frame):
        self.fired = True
        raise self.exc("interrupt_stress")

    def arm(self, delay: float, exc) -> None:
        self.fired, self.exc = False, exc
        signal.setitimer(signal.ITIMER_REAL, max(delay, 1e-6))

    def close(self):
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self._old)


def _landed(exc) -> str:
    """The phase an interrupt landed in, from its traceback."""
    phase = None
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename.endswith(("roofline/_measure.py", "roofline\\_measure.py")) and code.co_name in _STEPS:
            phase = _STEPS[code.co_name]
        elif code.co_name == "_body" and phase is None:
            phase = "body"
        elif code.co_name == "_wait" and phase is None:
            phase = "after"
        tb = tb.tb_next
    return phase or "before"


class _Unraisable:
    """While installed as ``sys.unraisablehook``: counts the reports of this stress's interrupts (raised where
    CPython cannot propagate them, in a finaliser or a weakref or garbage-collector callback, and only reports them);
    other reports go to the previous hook."""

    def __init__(self):
        self.count = 0
        self._old = None

    def __call__(self, report):
        exc = report.exc_value
        if isinstance(exc, (KeyboardInterrupt, SystemExit)) and exc.args == ("interrupt_stress",):
            self.count += 1
        else:
            self._old(report)

    def __enter__(self):
        self._old, sys.unraisablehook = sys.unraisablehook, self
        return self

    def __exit__(self, *exc):
        sys.unraisablehook = self._old


def run(blocks: int = 10000, seed: int = 0, out=sys.stdout) -> dict:
    """Run the stress; returns ``{"landed": {phase: count}, "swallowed": n, "unraisable": n, "silent": [...],
    "leaks": [...], "lost": n, "seconds": s}``: ``swallowed`` interrupts fired but did not propagate, ``unraisable``
    of them were reported by CPython (``sys.unraisablehook``), and ``silent`` lists the blocks (index, options) where
    one was swallowed without a report (something caught it). Stops at the first leak."""
    import torch

    import roofline

    rng = random.Random(seed)
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
    x = torch.randn(2, 8, requires_grad=True)
    q = torch.empty(1, 2, 8, 4, device="meta", dtype=torch.bfloat16)

    def options():
        return {"model": model if rng.random() < 0.7 else None, "timing": rng.choice(("model", "op", None)),
                "attention": "flash" if rng.random() < 0.3 else None}

    def _body(opts):
        model(x).sum().backward()
        if opts["attention"]:
            torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)

    def one(opts, nested):
        if nested:
            with roofline.measure(timing=None):
                with roofline.measure(opts["model"], timing=opts["timing"], attention=opts["attention"]):
                    _body(opts)
        else:
            with roofline.measure(opts["model"], timing=opts["timing"], attention=opts["attention"]):
                _body(opts)

    for _ in range(3):  # first blocks: lazy imports, per-process calibration and probes
        for nested in (False, True):
            one({"model": model, "timing": "op", "attention": "flash"}, nested)
            one({"model": None, "timing": None, "attention": None}, nested)
    baseline = global_state()
    t = []
    for _ in range(50):
        opts, nested = options(), rng.random() < 0.25
        t0 = time.perf_counter()
        one(opts, nested)
        t.append(time.perf_counter() - t0)
    span = 1.3 * statistics.median(t)

    alarm = _Alarm()
    landed = dict.fromkeys(PHASES, 0)
    leaks, lost, swallowed, silent = [], 0, 0, []
    unraisable = _Unraisable()
    t_start = time.perf_counter()

    def _wait():
        deadline = time.perf_counter() + 1.0
        while not alarm.fired:  # the interrupt lands here if the block finished first
            if time.perf_counter() > deadline:
                return False
        return True

    try:
        unraisable.__enter__()
        for i in range(blocks):
            opts, nested = options(), rng.random() < 0.25
            exc = SystemExit if rng.random() < 0.1 else KeyboardInterrupt
            try:
                reported = unraisable.count
                alarm.arm(rng.uniform(0.0, span), exc)
                one(opts, nested)
                if alarm.fired:  # raised, but not here: reported by CPython ("Exception ignored in ..."), or caught
                    swallowed += 1
                    if unraisable.count == reported:
                        silent.append((i, opts, nested))
                elif not _wait():
                    lost += 1
                where = "no interrupt arrived"
            except (KeyboardInterrupt, SystemExit) as e:
                if not isinstance(e, exc) or str(e) != "interrupt_stress":
                    raise
                landed[_landed(e)] += 1
                where = "".join(traceback.format_exception(e))
            after = global_state()
            if after != baseline:
                leaks.append((i, opts, nested, differences(baseline, after)))
                print(f"block {i} ({opts}, nested={nested}) left state behind:", file=out)
                for line in leaks[-1][3]:
                    print("  " + line, file=out)
                print(f"the interrupt: {where}", file=out)
                break
    finally:
        alarm.close()
        unraisable.__exit__()
    seconds = time.perf_counter() - t_start
    return {"landed": landed, "leaks": leaks, "lost": lost, "swallowed": swallowed, "unraisable": unraisable.count,
            "silent": silent, "seconds": seconds, "span": span}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--blocks", type=int, default=10000, help="blocks to run (default 10000)")
    ap.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    args = ap.parse_args(argv)
    res = run(args.blocks, args.seed)
    total = sum(res["landed"].values())
    print(f"{total} interrupts in {args.blocks} blocks, {res['seconds']:.1f} s "
          f"(delays up to {res['span'] * 1e3:.2f} ms):")
    for phase in PHASES:
        print(f"  {phase:>7}: {res['landed'][phase]}")
    if res["swallowed"]:
        print(f"  {res['swallowed']} raised where Python ignores exceptions (a finaliser or callback: "
              f"'Exception ignored in ...'); {res['unraisable']} reported by sys.unraisablehook")
    if res["silent"]:
        print(f"SWALLOWED: {len(res['silent'])} interrupts caught without a report, in blocks "
              + ", ".join(f"{i} ({opts}, nested={nested})" for i, opts, nested in res["silent"][:10]))
    if res["lost"]:
        print(f"{res['lost']} interrupts never arrived")
    if res["leaks"]:
        print("LEAK: state left behind (see above)")
        return 1
    if res["lost"] or res["silent"]:
        return 1
    print("no mode, hook or global left behind")
    return 0


if __name__ == "__main__":
    sys.exit(main())
