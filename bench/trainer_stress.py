"""Random interrupts against the trainer callbacks in real trainers: a Hugging Face ``Trainer`` and a Lightning
``Trainer``, each run either with two roofline callbacks (which must be refused with ValueError before the first
step, leaving nothing open) or with one callback profiling steps 2-3 with the monitor on, each run hit by one
asynchronous KeyboardInterrupt (or, one time in ten, SystemExit) at a random moment, as Ctrl-C would.

    python bench/trainer_stress.py [--runs 200] [--seed 0]

The interrupt comes from a signal handler (SIGALRM after a delay drawn uniformly from zero to 1.3 times the median
time of a whole run of that kind, measured beforehand), so it lands while the trainer is built, before training,
in a step, in a callback, in a report being written, or after. After an interrupted run the user's documented way
out is taken: the Hugging Face callback's ``close()``; Lightning calls the callbacks' ``on_exception`` itself (and
turns a KeyboardInterrupt into ``SystemExit(1)``).

After every run the process-global state must equal what it was before the first one (bench/interrupt_stress.py's
``global_state``: torch's dispatch and function mode stacks, the hook tables, roofline's registries); a run with two
callbacks that was not interrupted must have been refused with ValueError, with no report; a run with one callback
that was not interrupted must have one report (steps 2-3) and its two files; every report kept by an interrupted
run must have its files (but for a report whose writing the interrupt landed in). An interrupt that lands in a
finaliser (CPython prints "Exception ignored" and goes on: Lightning's profiler's ``__del__``, run by the garbage
collector at any moment) is counted as swallowed. Prints the counts and every failure; exits with status 1 if there
is any, 0 otherwise.
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
import warnings

_HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("roofline_bench_interrupt_stress", os.path.join(_HERE, "interrupt_stress.py"))
_stress = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_stress)
global_state, differences = _stress.global_state, _stress.differences

KINDS = ("hf two", "lightning two", "hf one", "lightning one")
STEPS = (2, 3)  # the one callback's profiled steps (step 1 is its warm-up)


class _Trainers:
    def __init__(self, out_dir):
        import torch
        import transformers

        try:
            import lightning.pytorch as pl
        except ImportError:
            import pytorch_lightning as pl
        from roofline.integrations import huggingface, lightning

        self.torch, self.transformers, self.pl = torch, transformers, pl
        self.hf_cb, self.pl_cb = huggingface.RooflineCallback, lightning.RooflineCallback
        self.out_dir = out_dir
        self.n = 0

        class Module(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.net = torch.nn.Linear(8, 4, bias=False)

            def training_step(self, batch, batch_idx):
                return self.net(batch).sum()

            def configure_optimizers(self):
                return torch.optim.SGD(self.parameters(), lr=0.1)

        self.Module = Module

    def _folder(self):
        self.n += 1
        return os.path.join(self.out_dir, f"run{self.n}")

    def callbacks(self, kind, trainer=None):
        cls = self.hf_cb if kind.startswith("hf") else self.pl_cb
        args = (trainer,) if kind.startswith("hf") else ()
        if kind.endswith("two"):
            return [cls(*args, steps=(1, 2), ceilings="theoretical"), cls(*args, monitor=True, ceilings="theoretical")]
        return [cls(*args, steps=STEPS, monitor={"recount_every": 2}, ceilings="theoretical")]

    def run(self, kind, made: list) -> str:
        """One training run of ``kind``; its callbacks are appended to ``made`` as soon as they exist. "refused"
        (ValueError of the second callback) or "done"."""
        torch = self.torch
        folder = self._folder()
        if kind.startswith("hf"):
            t = self.transformers
            model = t.GPT2LMHeadModel(t.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=32, n_positions=8))
            data = [{"input_ids": ids, "labels": ids} for ids in torch.randint(0, 32, (8, 8))]
            args = t.TrainingArguments(output_dir=folder, max_steps=4, per_device_train_batch_size=2, use_cpu=True,
                                       save_strategy="no", disable_tqdm=True, report_to=[], logging_steps=1)
            trainer = t.Trainer(model=model, args=args, train_dataset=data)
            trainer.remove_callback(t.trainer_callback.PrinterCallback)
            for cb in self.callbacks(kind, trainer):
                made.append(cb)
                trainer.add_callback(cb)
            train = trainer.train
        else:
            made.extend(self.callbacks(kind))
            trainer = self.pl.Trainer(max_steps=4, accelerator="cpu", devices=1, logger=False, callbacks=list(made),
                                      enable_checkpointing=False, enable_progress_bar=False,
                                      enable_model_summary=False, default_root_dir=folder)
            loader = torch.utils.data.DataLoader([torch.randn(3, 8) for _ in range(4)], batch_size=None)
            train = lambda: trainer.fit(self.Module(), loader)  # noqa: E731
        try:
            train()
        except ValueError as e:
            if kind.endswith("two") and "RooflineCallbacks" in str(e):
                return "refused"
            raise
        return "done"

    @staticmethod
    def close(kind, made):
        """The user's way out of an interrupted run (Lightning has called on_exception itself)."""
        if kind.startswith("hf"):
            for cb in made:
                cb.close()


def _caused_by_interrupt(exc) -> bool:
    """Whether ``exc`` was raised while this stress's interrupt was handled (Lightning's teardown, for one, can fail
    on a run interrupted early)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, (KeyboardInterrupt, SystemExit)) and exc.args == ("interrupt_stress",):
            return True
        exc = exc.__context__
    return False


def _in_report(exc) -> bool:
    """Whether the interrupt landed while a run handed over a report (integrations/_run.py's Run._on_report: the
    report kept, its files being written), from its traceback and those of the exceptions it caused or replaced."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        tb = exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_name == "_on_report":
                return True
            tb = tb.tb_next
        exc = exc.__context__
    return False


def _files_missing(made, exempt_last: bool = False) -> list[str]:
    """Reports kept without their files; ``exempt_last``: the last report of the last callback is left out (the
    interrupt landed while it was being written)."""
    out = []
    for cb in made:
        reports = cb.reports[:-1] if exempt_last and cb is made[-1] else cb.reports
        for r in reports:
            stem = f"step{r.steps[0]}" if len(r.steps) == 1 else f"steps{r.steps[0]}-{r.steps[-1]}"
            have = {os.path.basename(f) for f in cb.files}
            out += [f"report {stem} without its {ext} file" for ext in (".json", ".html")
                    if stem + ext not in have or not any(os.path.exists(f) for f in cb.files if f.endswith(stem + ext))]
    return out


def _check(kind, outcome, made) -> list[str]:
    """What a run that was not interrupted must have given."""
    if kind.endswith("two"):
        if outcome != "refused":
            return [f"two callbacks were not refused ({outcome})"]
        return [f"a refused callback has {len(cb.reports)} reports" for cb in made if cb.reports]
    (cb,) = made
    steps = [r.steps for r in cb.reports]
    return ([] if steps == [list(STEPS)] else [f"reports of steps {steps}, not [{list(STEPS)}]"]) + _files_missing(made)


def run(runs: int = 200, seed: int = 0, out=sys.stdout) -> dict:
    rng = random.Random(seed)
    tmp = tempfile.TemporaryDirectory(prefix="roofline-trainer-stress-")
    warnings.simplefilter("ignore")  # the trainers' own warnings, the profiler's warnings of interrupted steps
    import logging

    for name in ("pytorch_lightning", "lightning", "lightning.pytorch", "transformers"):
        logging.getLogger(name).setLevel(logging.ERROR)
    trainers = _Trainers(tmp.name)
    sigint = signal.getsignal(signal.SIGINT)
    for kind in KINDS:  # lazy imports, the first run's one-off work
        made = []
        assert not _check(kind, trainers.run(kind, made), made), _check(kind, "?", made)
    baseline = global_state()
    times = collections.defaultdict(list)
    for i in range(3 * len(KINDS)):
        kind, made = KINDS[i % len(KINDS)], []
        t0 = time.perf_counter()
        outcome = trainers.run(kind, made)
        times[kind].append(time.perf_counter() - t0)
        problems = _check(kind, outcome, made)
        assert not problems, problems
    assert global_state() == baseline, differences(baseline, global_state())
    span = {k: 1.3 * statistics.median(v) for k, v in times.items()}

    alarm = _stress._Alarm()
    outcomes = collections.Counter()
    failures, leaks = [], []
    t_start = time.perf_counter()
    try:
        for i in range(runs):
            kind = rng.choice(KINDS)
            exc = SystemExit if rng.random() < 0.1 else KeyboardInterrupt
            made, outcome = [], None
            try:
                alarm.arm(rng.uniform(0.0, span[kind]), exc)
                outcome = trainers.run(kind, made)
                signal.setitimer(signal.ITIMER_REAL, 0)
                if alarm.fired:  # landed where the trainer swallowed it
                    outcome = "swallowed"
            except (KeyboardInterrupt, SystemExit) as e:
                signal.setitimer(signal.ITIMER_REAL, 0)
                if not (alarm.fired and (str(e) == "interrupt_stress" or isinstance(e, SystemExit))):
                    raise
                outcome = "interrupted while a report was made" if _in_report(e) else "interrupted"
            except Exception as e:  # noqa: BLE001 - the interrupt replaced by another exception on its way out
                signal.setitimer(signal.ITIMER_REAL, 0)
                if not (alarm.fired and _caused_by_interrupt(e)):
                    raise
                outcome = f"interrupt replaced by {type(e).__name__}" + (" while a report was made" if _in_report(e)
                                                                          else "")
            signal.signal(signal.SIGINT, sigint)  # Lightning ignores Ctrl-C once it has caught one
            outcomes[(kind, outcome)] += 1
            if outcome in ("refused", "done"):
                problems = _check(kind, outcome, made)
            else:
                trainers.close(kind, made)
                problems = _files_missing(made, exempt_last=outcome.endswith("while a report was made"))
            for p in problems:
                failures.append((i, kind, outcome, p))
                print(f"run {i} ({kind}, {outcome}): {p}", file=out)
            after = global_state()
            if after["grad enabled"] != baseline["grad enabled"]:
                # torch.optim's step sets grad mode off and back around the update without a with statement (an
                # interrupt between the two leaves it off), and so does Lightning's validation: not roofline's
                outcomes[("(any)", "grad mode left off by the trainer")] += 1
                trainers.torch.set_grad_enabled(baseline["grad enabled"])
                after = global_state()
            if after != baseline:
                leaks.append((i, kind, outcome, differences(baseline, after)))
                print(f"run {i} ({kind}, {outcome}) left state behind: {differences(baseline, after)}", file=out)
                for cb in made:  # start the next run clean
                    for r in cb._runs:
                        r.abort(RuntimeError("trainer_stress cleanup"))
    finally:
        alarm.close()
        signal.signal(signal.SIGINT, sigint)
        tmp.cleanup()
    return {"outcomes": outcomes, "failures": failures, "leaks": leaks, "seconds": time.perf_counter() - t_start,
            "span": span}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    sys.path.insert(0, os.path.dirname(_HERE))
    res = run(args.runs, args.seed)
    print(f"{args.runs} trainer runs in {res['seconds']:.1f} s (interrupt within "
          + ", ".join(f"{k} {v:.2f} s" for k, v in res["span"].items()) + ")")
    for (kind, outcome), n in sorted(res["outcomes"].items(), key=str):
        print(f"  {kind}: {outcome}: {n}")
    print(f"{len(res['leaks'])} runs left state behind, {len(res['failures'])} failures (lost report or file, "
          "two callbacks not refused)")
    return 1 if res["leaks"] or res["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
