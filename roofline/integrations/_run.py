"""What the trainer callbacks share: the options, and one training run's :class:`Run` (a
:func:`roofline.profile` and optionally a :func:`roofline.monitor` driven from the trainer's step boundaries, the
reports written and merged, the figures handed to the trainer's loggers).

Step numbers. The callbacks take ``steps=(first, last)`` in the trainer's own numbering: a step is named by the
trainer's global step after it (1-based, as the trainer logs it; a resumed run continues from its checkpoint's
step), read from the trainer at each step boundary. Usually the global step moves by 1 per step; where it moves by
more (Lightning's manual optimisation steps it once per ``optimizer.step()`` call: two optimizers, 2 per batch), the
steps are those after which it equals a number in ``first..last`` (``steps=(4, 6)`` with two optimizers: the
batches that bring it to 4 and to 6, one report named ``steps4-6``). Whether the next step is measured is decided
before it runs, from the global step now and how far the latest step moved it; the report's names are the
global steps read after each of its steps. The profiler and the monitor count the steps of this run from 0 (one
per step boundary); a ``schedule=roofline.schedule(...)`` is in that numbering, and the reports it hands over are
labelled with the trainer's names (``report.steps``, ``meta["steady"]["step_numbers"]``,
``meta["trainer"]["steps"]``, the file names).

One roofline callback per training run: two would open and close their measure blocks at the same step
boundaries, out of order. A second one is refused with ValueError when training starts (the Lightning callback and
the Hugging Face callback given its trainer read the trainer's callbacks; otherwise, when the second run starts,
and the first is closed with it): no measure block is left open.

Profiler and monitor together. Each opens its own measure blocks at step boundaries, and blocks must be left in
the reverse order they were entered, so the two never count the same step: the monitor does not count a step that
the profiler measures (warm-up or active; it counts the next step it may), and at each boundary the loop whose block
is open ends its step first. The monitor's figures of steps whose time includes counting (its own recounts, the
profiler's steps) are not logged; they stay in ``monitor.history``.
"""

from __future__ import annotations

import json
import math
import operator
import os
import statistics
import threading
import weakref
from collections.abc import Mapping

import roofline
from roofline._loops._monitor import _leaf_signature
from roofline._util import _ints, _output
from roofline._util._ints import as_index
from roofline._util import _warn

# the keys of roofline.monitor that the callbacks pass through (``monitor={...}``); model, on_step, ceilings and
# attention are the callback's own
MONITOR_OPTIONS = ("warmup", "recount_every", "history_size", "max_signatures")
# the profile's logged scalars: name -> key of Report.totals()
PROFILE_SCALARS = {"mfu": "mfu", "mbu": "mbu", "achieved_flops": "achieved_flops",
                   "achieved_bytes": "achieved_bytes", "compute_share": "compute_share"}
PREFIX = "roofline/"
# the logged ceilings_code: which figures MFU and MBU were divided by (meta["ceilings_yardstick"]["kind"])
CEILINGS_CODES = {"measured": 0, "idle": 1, "theoretical": 2, "datasheet": 3, "file": 4, "given": 5}
STEP_TIME_CODES = {"median": 0, "min": 1, "unwaited": 2, "unwaited_min": 3, "ops_min": 4}
_TOKEN_KEYS = ("input_ids", "attention_mask")
_MAX_TOKENS = 2**63 - 1  # a step's tokens: an int64, its tokens/s a finite float
_RUNS = weakref.WeakSet()  # the runs made and not yet stopped or aborted (one per thread at a time)


NOT_GIVEN = object()  # a callback's deprecated tokens= left out


def token_count_option(who: str, token_count, tokens):
    """A callback's ``token_count`` option, or its deprecated name ``tokens`` (before 0.5) with a
    DeprecationWarning; TypeError when both are given."""
    if tokens is NOT_GIVEN:
        return token_count
    _warn.warn(f"{who}(tokens=...) is deprecated since 0.5 and will be removed in 0.7: use token_count=... (tokens "
                  "is which positions are real, as roofline.measure takes it)", DeprecationWarning)
    if token_count is not None:
        raise TypeError(f"{who}: give token_count only (tokens= is its deprecated name)")
    return tokens


class Options:
    """The callback's arguments, checked once at construction (ValueError / TypeError naming the argument)."""

    def __init__(self, who, *, steps, schedule, monitor, output_dir, tokens, timing, ceilings, attention,
                 gather_timeout, log, step_time="median"):
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
            check_output_dir(who, "output_dir", output_dir)
        self.output_dir = output_dir
        if tokens is not None and tokens is not False and not callable(tokens):
            raise TypeError(f"{who}: token_count must be None (read from the batch), False (none) or a callable "
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
        self.step_time = step_time  # the profiler's reports' step time (roofline.profile's step_time)
        roofline.profile(None, schedule=self.schedule, step_time=step_time, **self.measure_kwargs)
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
    for v in pair:  # numbered from 1: the trainer's global step after the step
        out.append(_ints.count(v, "steps", who, 1))
    if out[0] > out[1]:
        raise ValueError(f"{who}: steps=(first, last) needs first <= last, got {steps!r}")
    return tuple(out)


def check_output_dir(who: str, name: str, path: str) -> str:
    """``path`` as a folder the reports can be written into, checked without creating anything: it is a folder or
    does not exist yet, and the nearest existing folder above it is writable. ValueError (a part of it is a file)
    or PermissionError naming ``name``, now rather than when the first report is written."""
    full = os.path.abspath(path)
    probe = full
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if os.path.exists(probe) and not os.path.isdir(probe):
        what = "is a file" if probe == full else f"is under {probe!r}, which is a file"
        raise ValueError(f"{who}: {name} {path!r} {what}, not a folder: the reports could not be written there")
    if not os.access(probe, os.W_OK | os.X_OK):
        what = "" if probe == full else f" ({probe!r}, where it would be made)"
        raise PermissionError(f"{who}: {name} {path!r}: the folder{what} is not writable: the reports could not be "
                              "written there")
    return full


def describe(x, depth: int = 0):
    """What a batch looks like, for the monitor's signature, without holding on to it: tensors as (shape, dtype,
    device), containers as tuples of their parts, ints, bools, strings and None by value, anything else by type."""
    if getattr(x, "is_nested", False) is True:  # a nested tensor: its signature as the monitor reads it
        return _leaf_signature(x, type(x))
    try:
        shape = getattr(x, "shape", None)
    except Exception:  # noqa: BLE001 - a tensor subclass whose shape cannot be read: its type
        return type(x).__qualname__
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
            n = int(v.numel())
            return n if n <= _MAX_TOKENS else None
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
    if n > _MAX_TOKENS:
        raise ValueError(f"{who}: tokens(batch) must return an int <= 2**63 - 1 or None, got an int of "
                         f"{n.bit_length()} bits")
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
    return report.to_html(title=title)  # the page Report.to_html writes (one renderer)


class Run:
    """One training run (``train()`` / ``fit()`` call): the profiler and the monitor, started at its start,
    ended at each step boundary, stopped at its end.

    ``offset``: the trainer's global step at the start. ``delta``: how far one step is expected to move it before
    the first step has shown it (1, or the number of optimizers under Lightning's manual optimisation).
    ``log(values, step)``: hands scalars to the trainer's loggers (``step`` is the trainer's step they belong to).
    ``framework``: recorded in each report's ``meta["trainer"]``. ``close``: the owner's way to close the run (and
    whatever it installed) when a second roofline callback's run is refused. ValueError when another run is in
    progress on this thread (see the module doc)."""

    def __init__(self, opts: Options, model, *, offset: int, output_dir: str, framework: str, log, delta: int = 1,
                 close=None):
        self.opts, self.offset, self.output_dir, self.framework = opts, offset, output_dir, framework
        self._log = log
        self._close = close
        self._thread = threading.get_ident()
        world = _world()
        self.world = world if world is not None and world[1] > 1 else None  # (rank, size) of a distributed run
        self.reports, self.merged, self.files = [], [], []
        self._n = 0               # the step in progress, in the profiler's numbering
        self._global = offset     # the trainer's global step after the latest step (at the start: offset)
        self._delta = max(1, int(delta))  # how far the latest step moved it
        self._names = {}          # profiler step -> the trainer's global step after it (its name)
        self._plan = {}           # profiler step -> the schedule's action for it, decided once, before it runs
        self._tokens = {}         # profiler step -> tokens, for the steps the profiler measures
        self._pending = None      # sums over the monitor's loggable steps since its figures were last logged
        self.started = self.stopped = False
        self._setup(model)

    def _claim(self):
        """Register the run as started; refuse it when another run is in progress on this thread (two roofline
        callbacks in one training run, or a run that raised and was not closed): the other is closed with it."""
        others = [r for r in list(_RUNS) if r is not self and r._thread == self._thread and not r.stopped]
        if others:
            for r in others:  # close the other one too: its blocks would interleave with this one's
                r.abort(RuntimeError(f"{self.opts.who}: a second roofline callback's run was started"))
                if r._close is not None:
                    r._close()
            raise ValueError(
                f"{self.opts.who}: another roofline callback's training run is in progress on this thread: two "
                "callbacks in one training run open and close their measure blocks at the same step boundaries, "
                "out of order, and cannot run together (use one callback with steps= or schedule= and monitor= "
                "together); a run that raised and was not closed (close()) is another such run. Both have been "
                "closed, nothing of them is left open")
        _RUNS.add(self)

    def _setup(self, model):
        opts = self.opts
        sched = opts.schedule
        if opts.steps is not None:
            sched = self._steps_schedule(*opts.steps)
        self.schedule = sched
        kw = opts.measure_kwargs
        self.profiler = (roofline.profile(model, schedule=_Planned(self), on_report=self._on_report,
                                          step_time=opts.step_time, **kw)
                         if sched is not None else None)
        self.monitor = None
        if opts.monitor is not None:
            mon = roofline.monitor(model, on_step=self._on_step, ceilings=kw["ceilings"], attention=kw["attention"],
                           **opts.monitor)
            if self.profiler is not None:
                if mon._warmup == 0 and self._measured(0):
                    raise ValueError(f"{opts.who}: monitor warmup=0 counts step 0, which the profiler measures: "
                                     "give the monitor warmup >= 1 or profile later steps")
                mon._skip = self._measured  # never count a step the profiler measures (see the module doc)
            self.monitor = mon

    # ---- step numbers --------------------------------------------------------------------------------------------
    def trainer_step(self, p: int) -> int:
        """The trainer's name of profiler step ``p``: its global step after the step (once ``p`` has ended; before,
        the one expected)."""
        name = self._names.get(p)
        return name if name is not None else self._global + (p - self._n + 1) * self._delta

    def _steps_schedule(self, first: int, last: int):
        if last <= self.offset:
            _warn.warn(f"{self.opts.who}: steps {first}-{last} are not profiled: training starts after step "
                       f"{self.offset}")
            return None
        if first <= self.offset:
            _warn.warn(f"{self.opts.who}: training starts after step {self.offset}: steps {self.offset + 1}-"
                       f"{last} are profiled, not {first}-{last}")
            first = self.offset + 1
        return _GlobalSteps(self, first, last)

    def _action(self, p: int):
        """The profiler's schedule: the schedule's action for step ``p``, asked once (before ``p`` runs) and kept, so
        that the profiler, the monitor and the callbacks agree on it whenever they ask."""
        a = self._plan.get(p)
        if a is None:
            a = self._plan[p] = self.schedule(p)
            if len(self._plan) > 4096:  # the monitor asks about steps a few boundaries old at most (CUDA events)
                for k in [k for k in self._plan if k < p - 2048]:
                    del self._plan[k]
        return a

    def _measured(self, p: int) -> bool:
        """Whether the profiler counts step ``p`` (warm-up or active): the schedule's action is not "none" (a
        ``roofline.schedule`` gives the name, a ``torch.profiler.schedule`` a ``ProfilerAction``)."""
        if self.profiler is None:
            return False
        action = self._action(p)
        return str(getattr(action, "name", action)).lower() != "none"

    # ---- the loop --------------------------------------------------------------------------------------------------
    def start(self):
        """Start both: the step about to run is step 0. ValueError when another run is in progress on this thread
        (:meth:`_claim`)."""
        self._claim()
        self.started = True
        started = []
        try:
            for loop in (self.profiler, self.monitor):
                if loop is not None:
                    loop.start()
                    started.append(loop)
        except BaseException as e:
            self.stopped = True
            _RUNS.discard(self)
            for loop in reversed(started):
                loop._abandon(e)
            raise

    def step(self, inputs=None, tokens=None, global_step=None):
        """End the step in progress: the loop whose block is open ends its step first. ``global_step``: the
        trainer's global step after it (its name; default: the one expected)."""
        p = self._n
        g = as_index(global_step) if global_step is not None else None
        if g is None or g <= self._global:  # not given, or the trainer's count did not move (nothing to learn)
            g = self._global + self._delta
        else:
            self._delta = g - self._global
        self._names[p] = self._global = g
        if len(self._names) > 4096:
            for k in [k for k in self._names if k < p - 2048 and k not in self._tokens]:
                del self._names[k]
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
            loop.step(inputs=inputs, token_count=tokens)
        else:
            loop.step()

    def stop(self):
        """Stop both (the step in progress is dropped; the profiler's unfinished cycle gives a partial report).
        Warns when ``steps=`` were asked for and not profiled. Once: a second call does nothing."""
        if self.stopped:
            return
        self.stopped = True
        _RUNS.discard(self)
        try:
            if self.profiler is not None and self.profiler.running:
                self.profiler.stop()
        finally:
            if self.monitor is not None and self.monitor.running:
                self.monitor.stop()
        if self.opts.steps is not None and self.profiler is not None and not self.reports:
            first, last = self.opts.steps
            _warn.warn(f"{self.opts.who}: steps {first}-{last} were not profiled: training ended after step "
                       f"{self._global}")

    def abort(self, exc: BaseException):
        """The trainer raised: close the open measure block with the exception (torch is left as it was) and drop
        what is in progress. The run is over (``stopped``)."""
        self.stopped = True
        _RUNS.discard(self)
        for loop in (self.monitor, self.profiler):
            if loop is not None:
                loop._abandon(exc)

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
        acc["tokens"] = (None if acc["tokens"] is None or m["token_count"] is None else
                         acc["tokens"] + m["token_count"])
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
        # token_counts: the tokens of each step; "tokens" is the same list under its name before 0.5 (deprecated,
        # removed in 0.7: a report's "tokens" is which positions are real, meta["tokens"])
        report.meta["trainer"] = {"framework": self.framework, "steps": steps, "token_counts": tokens,
                                  "tokens": tokens}
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
        # what the figures were divided by: 1 when the ceilings were measured under contention (then a stable stand-in,
        # the last idle measurement or the theoretical peak, is used: ceilings_code says which), so that a logged
        # MFU series can be filtered or explained
        meta = report.meta
        vals[PREFIX + "profile/contention"] = float(bool(meta.get("ceilings_contention") or meta.get("contention")))
        kind = (meta.get("ceilings_yardstick") or {}).get("kind")
        if kind in CEILINGS_CODES:
            vals[PREFIX + "profile/ceilings_code"] = float(CEILINGS_CODES[kind])
        # which step time they divide by (roofline.profile's step_time): 0 the median wall time, 1 the least, 2 the
        # unwaited time (the threads' waits for a CPU taken out), 3 the least unwaited time, 4 the step composed of
        # each op's least time (0 when it could not be composed: the median wall time stood)
        st = (meta.get("steady") or {}).get("step_time") or {}
        chosen = st.get("kind", "median")
        if chosen == "ops_min" and not isinstance(st.get("ops"), dict):
            chosen = "median"
        if chosen in STEP_TIME_CODES:
            vals[PREFIX + "profile/step_time_code"] = float(STEP_TIME_CODES[chosen])
        if st.get("spin") or st.get("threads"):
            # the step time overstates the step: the unwaited time includes intra-op threads' spin-waiting, or the
            # composed one (ops_min) several threads' waits under contention
            vals[PREFIX + "profile/step_time_spin"] = 1.0
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
        """The :func:`roofline.profile` of the latest training run (None before it, or without ``steps`` /
        ``schedule``)."""
        return self._runs[-1].profiler if self._runs else None

    @property
    def monitor(self):
        """The :func:`roofline.monitor` of the latest training run (None before it, or without ``monitor``): its
        ``history`` has every step's figures."""
        return self._runs[-1].monitor if self._runs else None


class _Planned:
    """What the run's profiler is given as its schedule: :meth:`Run._action` (each step's action decided once),
    described as the run's schedule (``as_dict`` and ``active`` where it has them) in the reports' meta."""

    def __init__(self, run: Run):
        self._run = run

    def __call__(self, p: int):
        return self._run._action(p)

    def __getattr__(self, name):
        if name in ("as_dict", "active"):
            return getattr(self._run.schedule, name)
        raise AttributeError(name)

    def __repr__(self) -> str:
        return repr(self._run.schedule)


class _GlobalSteps:
    """The profiler's schedule for ``steps=(first, last)``: a step is active when the trainer's global step after it
    is expected in ``first..last`` (the global step now plus how far the latest step moved it), and the step before
    the first active one is the warm-up (counted and discarded). Asked once per step, before the step runs
    (:meth:`Run._action`). :attr:`first` and :attr:`last` are the trainer's numbers."""

    def __init__(self, run: Run, first: int, last: int):
        self.run, self.first, self.last = run, first, last

    def __call__(self, p: int) -> str:
        run = self.run
        end = run.trainer_step(p)  # the global step expected after step p
        if self.first <= end <= self.last:
            return "record"
        if end < self.first <= end + run._delta:
            return "warmup"
        return "none"

    def as_dict(self) -> dict:
        return {"steps": [self.first, self.last], "numbering": "the trainer's global step after each step"}

    def __repr__(self) -> str:
        return f"steps=({self.first}, {self.last}) (the trainer's global steps)"
