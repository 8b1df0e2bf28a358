"""What the trainer callbacks share: the options, and one training run's :class:`Run` (a
:func:`roofline.profiler` and optionally a :func:`roofline.monitor` driven from the trainer's step boundaries, the
reports written and merged, the figures handed to the trainer's loggers).

Step numbers. The callbacks take ``steps=(first, last)`` in the trainer's own numbering: the step that brings the
trainer's global step to ``k`` is step ``k`` (1-based, as the trainer logs it; a resumed run continues from its
checkpoint's step). The profiler and the monitor count the steps of this run from 0: profiler step ``p`` is trainer
step ``offset + p + 1``, where ``offset`` is the trainer's global step when training starts. A
``schedule=roofline.schedule(...)`` is in the profiler's numbering; the reports it hands over are labelled with the
trainer's numbers (``report.steps``, ``meta["steady"]["step_numbers"]``, ``meta["trainer"]["steps"]``).

Profiler and monitor together. Each opens its own measure blocks at step boundaries, and blocks must be left in
the reverse order they were entered, so the two never count the same step: the monitor does not count a step that
the profiler measures (warm-up or active; it counts the next step it may), and at each boundary the loop whose block
is open ends its step first. The monitor's figures of steps whose time includes counting (its own recounts, the
profiler's steps) are not logged; they stay in ``monitor.history``.
"""

from __future__ import annotations

import html
import json
import math
import operator
import os
import statistics
import warnings
from collections.abc import Mapping

import roofline
from roofline.util import _output
from roofline.util._ints import as_index

# the keys of roofline.monitor that the callbacks pass through (``monitor={...}``); model, on_step, ceilings and
# attention are the callback's own
MONITOR_OPTIONS = ("warmup", "recount_every", "history_size", "max_signatures")
# the profile's logged scalars: name -> key of Report.totals()
PROFILE_SCALARS = {"mfu": "mfu", "mbu": "mbu", "achieved_flops": "achieved_flops",
                   "achieved_bytes": "achieved_bytes", "compute_share": "compute_share"}
PREFIX = "roofline/"
_TOKEN_KEYS = ("input_ids", "attention_mask")


class Options:
    """The callback's arguments, checked once at construction (ValueError / TypeError naming the argument)."""

    def __init__(self, who, *, steps, schedule, monitor, output_dir, tokens, timing, ceilings, attention,
                 gather_timeout, log):
        self.who = who
        self.steps = _check_steps(who, steps)
        if schedule is not None and not callable(schedule):
            raise TypeError(f"{who}: schedule must be a roofline.schedule(...) or a callable step -> action, got "
                            f"{type(schedule).__name__}")
        if schedule is not None and self.steps is not None:
            raise ValueError(f"{who}: give steps= or schedule=, not both")
        self.schedule = schedule
        if isinstance(monitor, bool):
            self.monitor = {} if monitor else None
        elif isinstance(monitor, Mapping):
            bad = sorted(set(monitor) - set(MONITOR_OPTIONS))
            if bad:
                raise ValueError(f"{who}: monitor={{...}} takes roofline.monitor's {', '.join(MONITOR_OPTIONS)}; "
                                 f"got {', '.join(map(repr, bad))}")
            self.monitor = dict(monitor)
        else:
            raise TypeError(f"{who}: monitor must be True, False or a dict of roofline.monitor options, got "
                            f"{type(monitor).__name__}")
        if self.steps is None and self.schedule is None and self.monitor is None:
            raise ValueError(f"{who}: nothing to do: give steps=(first, last) or schedule= to profile steps, or "
                             "monitor=True to log every step's MFU")
        if output_dir is not None:
            output_dir = _output.check_path(output_dir, who, " (output_dir: a folder name)")
        self.output_dir = output_dir
        if tokens is not None and tokens is not False and not callable(tokens):
            raise TypeError(f"{who}: tokens must be None (read from the batch), False (none) or a callable "
                            f"batch -> number of tokens, got {type(tokens).__name__}")
        self.tokens = tokens
        if not isinstance(gather_timeout, (int, float)) or isinstance(gather_timeout, bool):
            raise TypeError(f"{who}: gather_timeout must be a number of seconds, got {type(gather_timeout).__name__}")
        if not (math.isfinite(gather_timeout) and gather_timeout > 0):
            raise ValueError(f"{who}: gather_timeout must be a finite number of seconds > 0, got {gather_timeout!r}")
        self.gather_timeout = float(gather_timeout)
        if not isinstance(log, bool):
            raise TypeError(f"{who}: log must be True or False, got {type(log).__name__}")
        self.log = log
        self.measure_kwargs = {"timing": timing, "ceilings": ceilings, "attention": attention}
        # the profiler's and the monitor's own checks, now rather than when training starts
        roofline.profiler(None, schedule=self.schedule, **self.measure_kwargs)
        if self.monitor is not None:
            roofline.monitor(None, ceilings=ceilings, attention=attention, **self.monitor)


def _check_steps(who, steps):
    """``steps`` as ``(first, last)``, 1-based and inclusive, or None."""
    if steps is None:
        return None
    pair = (steps, steps) if not isinstance(steps, (tuple, list)) else tuple(steps)
    if len(pair) != 2:
        raise ValueError(f"{who}: steps must be a step number or a pair (first, last), got {steps!r}")
    out = []
    for v in pair:
        n = as_index(v)
        if n is None:
            raise TypeError(f"{who}: steps must be ints, got {type(v).__name__} in {steps!r}")
        v = n
        if v < 1:
            raise ValueError(f"{who}: steps are numbered from 1 (the trainer's global step after the step), got "
                             f"{steps!r}")
        out.append(v)
    if out[0] > out[1]:
        raise ValueError(f"{who}: steps=(first, last) needs first <= last, got {steps!r}")
    return tuple(out)


def describe(x, depth: int = 0):
    """What a batch looks like, for the monitor's signature, without holding on to it: tensors as (shape, dtype,
    device), containers as tuples of their parts, ints, bools, strings and None by value, anything else by type."""
    shape = getattr(x, "shape", None)
    if shape is not None and hasattr(x, "dtype") and hasattr(x, "device"):
        return ("T", tuple(shape), str(x.dtype), str(x.device))
    if x is None or isinstance(x, (bool, int, str)):
        return x
    if depth < 8:
        if isinstance(x, Mapping):
            return ("M", tuple((str(k), describe(v, depth + 1)) for k, v in x.items()))
        if isinstance(x, (tuple, list)):
            return (type(x).__name__, tuple(describe(v, depth + 1) for v in x))
    return type(x).__qualname__


def batch_tokens(batch):
    """Tokens in a batch, from its shapes: the number of elements of ``input_ids`` or, without it, of
    ``attention_mask`` (padding included: the positions the model computes on); None when the batch is not a
    mapping with one of them."""
    if not isinstance(batch, Mapping):
        return None
    for key in _TOKEN_KEYS:
        v = batch.get(key)
        if v is not None and hasattr(v, "numel"):
            return int(v.numel())
    return None


def user_tokens(who, fn, batch):
    """``fn(batch)`` as an int >= 0, run outside any measure block (its tensor ops are not counted)."""
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes():  # a tensor's conversion to an int (item) too
        n = fn(batch)
        if n is None:
            return None
        try:
            if isinstance(n, bool):
                raise TypeError
            n = operator.index(n)
        except TypeError:
            raise TypeError(f"{who}: tokens(batch) must return an int >= 0 or None, got {type(n).__name__}") from None
    if n < 0:
        raise ValueError(f"{who}: tokens(batch) must return an int >= 0 or None, got {n}")
    return n


def _world():
    """(rank, world size) of the default process group, or None outside one."""
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover - torch without distributed
        return None
    if not (dist.is_available() and dist.is_initialized()):
        return None
    return dist.get_rank(), dist.get_world_size()


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _page(report, title: str) -> str:
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>' + html.escape(title)
            + "</title></head>\n<body>\n" + report._repr_html_() + "\n</body></html>\n")


class Run:
    """One training run (``train()`` / ``fit()`` call): the profiler and the monitor, started at its start,
    ended at each step boundary, stopped at its end.

    ``offset``: the trainer's global step at the start. ``log(values, step)``: hands scalars to the trainer's
    loggers (``step`` is the trainer's step they belong to). ``framework``: recorded in each report's
    ``meta["trainer"]``."""

    def __init__(self, opts: Options, model, *, offset: int, output_dir: str, framework: str, log):
        self.opts, self.offset, self.output_dir, self.framework = opts, offset, output_dir, framework
        self._log = log
        world = _world()
        self.world = world if world is not None and world[1] > 1 else None  # (rank, size) of a distributed run
        self.reports, self.merged, self.files = [], [], []
        self._n = 0               # the step in progress, in the profiler's numbering
        self._tokens = {}         # profiler step -> tokens, for the steps the profiler measures
        self._pending = None      # sums over the monitor's loggable steps since its figures were last logged
        self.started = self.stopped = False
        sched = opts.schedule
        if opts.steps is not None:
            sched = self._steps_schedule(*opts.steps)
        self.schedule = sched
        kw = opts.measure_kwargs
        self.profiler = (roofline.profiler(model, schedule=sched, on_report=self._on_report, **kw)
                         if sched is not None else None)
        self.monitor = None
        if opts.monitor is not None:
            mon = roofline.monitor(model, on_step=self._on_step, ceilings=kw["ceilings"], attention=kw["attention"],
                           **opts.monitor)
            if self.profiler is not None:
                if mon._warmup == 0 and self._measured(0):
                    raise ValueError(f"{opts.who}: monitor warmup=0 counts step 0, which the profiler measures: "
                                     "give the monitor warmup >= 1 or profile later steps")
                count_next = mon._count_next  # never count a step the profiler measures (see the module doc)
                mon._count_next = lambda nxt, unknown: not self._measured(nxt) and count_next(nxt, unknown)
            self.monitor = mon

    # ---- step numbers --------------------------------------------------------------------------------------------
    def trainer_step(self, p: int) -> int:
        return self.offset + p + 1

    def _steps_schedule(self, first: int, last: int):
        a, b = first - 1 - self.offset, last - 1 - self.offset
        if b < 0:
            warnings.warn(f"{self.opts.who}: steps {first}-{last} are not profiled: training starts after step "
                          f"{self.offset}", stacklevel=4)
            return None
        if a < 0:
            warnings.warn(f"{self.opts.who}: training starts after step {self.offset}: steps {self.offset + 1}-"
                          f"{last} are profiled, not {first}-{last}", stacklevel=4)
            a = 0
        warm = 1 if a >= 1 else 0  # the step before the first one is counted and discarded, as profile's warm-up
        return roofline.schedule(skip_first=a - warm, warmup=warm, active=b - a + 1, repeat=1)

    def _measured(self, p: int) -> bool:
        """Whether the profiler counts step ``p`` (warm-up or active): the schedule's action is not "none" (a
        ``roofline.schedule`` gives the name, a ``torch.profiler.schedule`` a ``ProfilerAction``)."""
        if self.profiler is None:
            return False
        action = self.schedule(p)
        return str(getattr(action, "name", action)).lower() != "none"

    # ---- the loop --------------------------------------------------------------------------------------------------
    def start(self):
        """Start both: the step about to run is step 0."""
        self.started = True
        started = []
        try:
            for loop in (self.profiler, self.monitor):
                if loop is not None:
                    started.append(loop.start())
        except BaseException as e:
            for loop in reversed(started):
                loop.__exit__(type(e), e, e.__traceback__)
            raise

    def step(self, inputs=None, tokens=None):
        """End the step in progress: the loop whose block is open ends its step first."""
        p = self._n
        self._n += 1
        first, second = self.monitor, self.profiler
        if self._measured(p):
            self._tokens[p] = tokens
            first, second = self.profiler, self.monitor
        try:
            if first is not None:
                self._end(first, inputs, tokens)
        finally:
            if second is not None:
                self._end(second, inputs, tokens)

    def _end(self, loop, inputs, tokens):
        if loop is self.monitor:
            loop.step(inputs=inputs, tokens=tokens)
        else:
            loop.step()

    def stop(self):
        """Stop both (the step in progress is dropped; the profiler's unfinished cycle gives a partial report).
        Warns when ``steps=`` were asked for and not profiled. Once: a second call does nothing."""
        if self.stopped:
            return
        self.stopped = True
        try:
            if self.profiler is not None and self.profiler.running:
                self.profiler.stop()
        finally:
            if self.monitor is not None and self.monitor.running:
                self.monitor.stop()
        if self.opts.steps is not None and self.profiler is not None and not self.reports:
            first, last = self.opts.steps
            warnings.warn(f"{self.opts.who}: steps {first}-{last} were not profiled: training ended after step "
                          f"{self.offset + self._n}", stacklevel=3)

    def abort(self, exc: BaseException):
        """The trainer raised: close the open measure block with the exception (torch is left as it was) and drop
        what is in progress."""
        for loop in (self.monitor, self.profiler):
            if loop is not None and loop.running:
                loop.__exit__(type(exc), exc, exc.__traceback__)

    @property
    def running(self) -> bool:
        return any(loop is not None and loop.running for loop in (self.profiler, self.monitor))

    # ---- what the loops hand over ------------------------------------------------------------------------------
    def _on_step(self, m: dict):
        t = m["time_s"]
        if m["flops"] is None or m["recounted"] or self._measured(m["step"]) or not (_finite(t) and t > 0):
            return  # no figures, or a time that includes counting
        acc = self._pending or {"step": 0, "n": 0, "time": 0.0, "peak_time": 0.0, "dram_time": 0.0, "flops": 0.0,
                                "bytes": 0.0, "tokens": 0}
        acc["step"] = self.trainer_step(m["step"])
        acc["n"] += 1
        acc["time"] += t
        acc["peak_time"] += m["mfu"] * t  # the step's FLOPs at their peaks, in seconds
        acc["dram_time"] += m["mbu"] * t  # its bytes at the DRAM bandwidth, in seconds
        acc["flops"] += m["flops"]
        acc["bytes"] += m["bytes"]
        acc["tokens"] = None if acc["tokens"] is None or m["tokens"] is None else acc["tokens"] + m["tokens"]
        self._pending = acc

    def take_monitor_figures(self):
        """``(trainer step, {name: value})``: the monitor's figures over the steps it has handed over since the
        last call (its latest step's number; on CUDA a step is handed over once its end event has completed),
        leaving out the steps whose time includes counting; None when there are none. Over one step they are the
        step's own; over several, each is the total over their total time (MFU: the FLOPs' time at their peaks
        over the steps' time; step time: the mean)."""
        acc, self._pending = self._pending, None
        if acc is None:
            return None
        t = acc["time"]
        vals = {"mfu": acc["peak_time"] / t, "mbu": acc["dram_time"] / t, "achieved_flops": acc["flops"] / t,
                "achieved_bytes": acc["bytes"] / t, "step_time": t / acc["n"],
                "tokens_per_s": acc["tokens"] / t if acc["tokens"] is not None else None}
        return acc["step"], {PREFIX + "monitor/" + k: float(v) for k, v in vals.items() if _finite(v)}

    def _on_report(self, report):
        steps = [self.trainer_step(p) for p in report.steps]
        tokens = [self._tokens.get(p) for p in report.steps]
        self._tokens.clear()  # this cycle's steps and its warm-up steps
        # the loop is the trainer's: its step numbers label the report (steady_line, meta["steady"]["step_numbers"])
        report.steps, report.meta["steady"]["step_numbers"] = steps, list(steps)
        report.meta["trainer"] = {"framework": self.framework, "steps": steps, "tokens": tokens}
        self.reports.append(report)
        stem = f"step{steps[0]}" if len(steps) == 1 else f"steps{steps[0]}-{steps[-1]}"
        os.makedirs(self.output_dir, exist_ok=True)
        base = os.path.join(self.output_dir, stem + (f".rank{self.world[0]}" if self.world else ""))
        report.to_json(base + ".json")
        self.files.append(base + ".json")
        self.files.append(_output.write(base + ".html", _page(report, f"roofline: {stem}"),
                                        where=self.opts.who))
        if self.world:
            merged = roofline.gather(report, dst=0, timeout=self.opts.gather_timeout)
            if merged is not None:
                self.merged.append(merged)
                path = os.path.join(self.output_dir, stem + ".merged")
                self.files.append(_output.write(path + ".json", json.dumps(merged.to_dict()), where=self.opts.who))
                self.files.append(_output.write(path + ".txt", merged.table() + "\n", where=self.opts.who))
        if self.opts.log:
            self._log(self.profile_figures(report, tokens), steps[-1])

    @staticmethod
    def profile_figures(report, tokens) -> dict:
        """The scalars of a profiler cycle's report: MFU, MBU, achieved FLOP/s and bytes/s, compute-bound share
        (of the roofline time), the median step time, and tokens/s (median tokens per step over it)."""
        t = report.totals()
        vals = {PREFIX + "profile/" + name: float(t[key]) for name, key in PROFILE_SCALARS.items()
                if _finite(t.get(key))}
        wall = report.wall_time
        if _finite(wall) and wall > 0:
            vals[PREFIX + "profile/step_time"] = float(wall)
            if tokens and all(n is not None for n in tokens):
                vals[PREFIX + "profile/tokens_per_s"] = float(statistics.median(tokens)) / wall
        return vals


class Outputs:
    """What a callback made over its training runs (``self._runs``: one :class:`Run` per run or fit): shared by
    the Hugging Face and Lightning callbacks."""

    @property
    def reports(self) -> list:
        """This rank's reports (:class:`roofline.SteadyReport`), one per profiled cycle, of every training run."""
        return [r for run in self._runs for r in run.reports]

    @property
    def merged(self) -> list:
        """The merged reports (:class:`roofline.distributed.MergedReport`) on rank 0 of a distributed run; empty
        elsewhere and in a single process."""
        return [m for run in self._runs for m in run.merged]

    @property
    def files(self) -> list:
        """The paths written, in order."""
        return [f for run in self._runs for f in run.files]

    @property
    def profiler(self):
        """The :func:`roofline.profiler` of the latest training run (None before it, or without ``steps`` /
        ``schedule``)."""
        return self._runs[-1].profiler if self._runs else None

    @property
    def monitor(self):
        """The :func:`roofline.monitor` of the latest training run (None before it, or without ``monitor``): its
        ``history`` has every step's figures."""
        return self._runs[-1].monitor if self._runs else None
