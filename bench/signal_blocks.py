"""Measure blocks run by a signal handler while a main block runs: the main block never loses its report, and
nothing is left behind.

    python bench/signal_blocks.py [--blocks 12000] [--seed 0]

A main loop runs short measure blocks (a forward and backward of a small model, with and without a model, the three
timing settings, one time in four inside an outer block). An interval timer (``signal.setitimer``) sends SIGALRM
after a random delay, drawn uniformly from zero to 1.3 times the median time of a main block measured beforehand, so
the handler lands before a block, while it is entered, in its body, while it is left, and after it. The handler runs
a block of its own (one ``add``) and keeps its report.

Checked after every main block: it returned its report with exactly the ops of the same block run alone (no
exception, nothing missing; plus the handler's one op where it ran while the main block's mode was on the stack,
as an outer block counts a nested one's ops), the handler's report either counted its one op (it ran
while the main block was open, or outside it: blocks nest) or is empty and marked incomplete with the reason (it
ran in the middle of the main block's entry or exit, where a block is refused: roofline._core.Block), and the
process-global state equals what it was before the first block (bench/interrupt_stress.py's ``global_state``).
Prints the figures; exits with status 1 on the first failure.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import signal
import statistics
import sys
import time
import warnings

_HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("roofline_bench_interrupt_stress", os.path.join(_HERE,
                                                                                              "interrupt_stress.py"))
_stress = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_stress)


def run(blocks: int = 12000, seed: int = 0, out=sys.stdout) -> dict:
    """Run the stress; returns ``{"main_ok", "main_lost", "main_wrong", "handler_counted", "handler_refused",
    "handler_wrong", "leaks", "no_signal", "seconds", "span"}`` (counts; ``leaks`` lists the first one)."""
    import torch

    import roofline

    rng = random.Random(seed)
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
    x = torch.randn(2, 8, requires_grad=True)
    one = torch.ones(3)

    def body():
        model(x).sum().backward()

    def main_block(opts, nested):
        if nested:
            with roofline.measure(timing=None):
                with roofline.measure(opts["model"], timing=opts["timing"]) as r:
                    body()
        else:
            with roofline.measure(opts["model"], timing=opts["timing"]) as r:
                body()
        return r

    handler_reports: list = []

    def handler(signum, frame):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the refusal's warning; its report says it too
            with roofline.measure(timing=None) as r:
                torch.add(one, one)
        handler_reports.append(r)

    def options():
        return {"model": model if rng.random() < 0.7 else None, "timing": rng.choice(("model", "op", None))}

    for _ in range(3):  # lazy imports, per-process calibration
        main_block({"model": model, "timing": "op"}, False)
        main_block({"model": None, "timing": None}, True)
    def ops(r):
        out: dict = {}
        for o in r.records["op"].tolist():
            out[r.op_names[o]] = out.get(r.op_names[o], 0) + 1
        return out

    expected = ops(main_block({"model": model, "timing": None}, False))
    baseline = _stress.global_state()
    t = []
    for _ in range(50):
        t0 = time.perf_counter()
        main_block(options(), rng.random() < 0.25)
        t.append(time.perf_counter() - t0)
    span = 1.3 * statistics.median(t)

    res = dict.fromkeys(("main_ok", "main_lost", "main_wrong", "handler_counted", "handler_refused", "handler_wrong",
                         "no_signal"), 0)
    res["leaks"] = []
    old = signal.signal(signal.SIGALRM, handler)
    t_start = time.perf_counter()
    try:
        for i in range(blocks):
            opts, nested = options(), rng.random() < 0.25
            handler_reports.clear()
            signal.setitimer(signal.ITIMER_REAL, max(rng.uniform(0.0, span), 1e-6))
            try:
                r = main_block(opts, nested)
            except Exception as e:  # noqa: BLE001 - counted: a main block that lost its report
                res["main_lost"] += 1
                print(f"block {i} ({opts}, nested={nested}) raised {type(e).__name__}: {e}", file=out)
                r = None
            deadline = time.perf_counter() + 1.0
            while not handler_reports and time.perf_counter() < deadline:
                pass  # the handler lands here if the block finished first
            counted = 0
            if not handler_reports:
                res["no_signal"] += 1
            for h in handler_reports:
                if len(h.records) == 1 and h.complete:
                    res["handler_counted"] += 1
                    counted += 1
                elif len(h.records) == 0 and not h.complete and "being entered or left" in h.incomplete[0]:
                    res["handler_refused"] += 1
                else:
                    res["handler_wrong"] += 1
            if r is not None:
                # the main block's own ops, plus the handler's add where the handler ran while the main block's mode
                # was on the stack (an outer block counts a nested one's ops; and a refused block's body still runs)
                got = ops(r)
                extra = got.get("aten.add.Tensor", 0) - expected.get("aten.add.Tensor", 0)
                same = {k: v for k, v in got.items() if k != "aten.add.Tensor"} == {
                    k: v for k, v in expected.items() if k != "aten.add.Tensor"}
                ok = r.complete and same and 0 <= extra <= len(handler_reports)
                res["main_ok" if ok else "main_wrong"] += 1
                if not ok and res["main_wrong"] <= 3:
                    print(f"block {i} ({opts}, nested={nested}): {got} (alone: {expected}; handler counted "
                          f"{counted}, complete {r.complete} {r.incomplete})", file=out)
            after = _stress.global_state()
            if after != baseline:
                res["leaks"].append((i, opts, nested, _stress.differences(baseline, after)))
                print(f"block {i} ({opts}, nested={nested}) left state behind:", file=out)
                for line in res["leaks"][-1][3]:
                    print("  " + line, file=out)
                break
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    res["seconds"] = time.perf_counter() - t_start
    res["span"] = span
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--blocks", type=int, default=12000, help="main blocks to run (default 12000)")
    ap.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    args = ap.parse_args(argv)
    res = run(args.blocks, args.seed)
    print(f"{args.blocks} main blocks, {res['seconds']:.1f} s (handler delays up to {res['span'] * 1e3:.2f} ms):")
    print(f"  main blocks with their full report: {res['main_ok']}; lost (raised): {res['main_lost']}; "
          f"wrong count: {res['main_wrong']}")
    print(f"  handler blocks counted: {res['handler_counted']}; refused inside an entry or exit (empty, marked "
          f"incomplete): {res['handler_refused']}; wrong: {res['handler_wrong']}; signals not arrived: "
          f"{res['no_signal']}")
    bad = res["main_lost"] or res["main_wrong"] or res["handler_wrong"] or res["no_signal"] or res["leaks"]
    print("LEAK: state left behind (see above)" if res["leaks"] else "no mode, hook or global left behind")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
