"""Step N of a training loop the user already runs: :func:`schedule` says which steps are measured, in
``torch.profiler``'s conventions, and :func:`profile` measures them (as ``torch.profiler.profile(schedule=...)``
does), one :class:`roofline.SteadyReport` per cycle.

The loop calls ``prof.step()`` once at the end of each step; the profiler keeps a 0-based step counter
(``step_num``, as ``torch.profiler``'s) and asks the schedule what to do with each step before it runs: nothing,
count it and discard the result (warm-up), or count it and keep it (active). Each active step runs inside its own
:func:`roofline.measure` block, opened by the ``step()`` call that ends the step before it (or by ``start()``) and
closed by the ``step()`` call that ends it; a cycle's active steps become one report through the machinery
:func:`roofline.steady` uses (:meth:`SteadyReport._from_runs`).

``roofline.profiler`` (this module's :func:`profile` before 0.5) and ``roofline.profile(step, model, warmup=,
repeat=)`` (now :func:`roofline.steady`) are kept for one release, with a DeprecationWarning.
"""

from __future__ import annotations

import collections
import enum
import functools
import operator
import sys
import threading

from roofline import _core
from roofline._hardware._contention import OP_WAITS
from roofline._measure import measure
from roofline._loops._steady import SteadyReport, _check_step_time, steady
from roofline._util import _ints
from roofline._util import _warn


class ProfilerAction(str, enum.Enum):
    """What a schedule says about one step: the members of ``torch.profiler.ProfilerAction``, with their names in
    lower case as values. A member is a ``str`` and equals its value (``ProfilerAction.RECORD == "record"``), so
    code comparing a schedule's answer with the strings keeps working.

    ``NONE``: the step runs unmeasured. ``WARMUP``: counted, its result discarded. ``RECORD``: counted and kept.
    ``RECORD_AND_SAVE``: the last active step of a cycle: counted and kept, then the cycle's report is made."""

    NONE = "none"
    WARMUP = "warmup"
    RECORD = "record"
    RECORD_AND_SAVE = "record_and_save"

    def __str__(self) -> str:  # the value, as a str of it prints (Python 3.11's mixed-in enums print the name)
        return self.value

    __format__ = str.__format__


NONE, WARMUP, RECORD, RECORD_AND_SAVE = (ProfilerAction.NONE, ProfilerAction.WARMUP, ProfilerAction.RECORD,
                                         ProfilerAction.RECORD_AND_SAVE)
ACTIONS = tuple(ProfilerAction)
_RECORDING = (RECORD, RECORD_AND_SAVE)


def _check_count(where: str, name: str, v, lo: int, hi: int | None = None) -> int:
    """``v`` as an int in ``[lo, hi]``, by the package's one rule (:func:`roofline._util._ints.count`)."""
    return _ints.count(v, name, where, lo, hi)


class Schedule:
    """Which steps of a loop :func:`roofline.profile` measures: what :func:`roofline.schedule` returns.

    Calling it with a step number (0-based) gives that step's action, a :class:`roofline.ProfilerAction` (equal to
    its string): ``NONE`` / ``"none"`` (runs unmeasured), ``WARMUP`` / ``"warmup"`` (counted, result discarded),
    ``RECORD`` / ``"record"`` (counted and kept) or ``RECORD_AND_SAVE`` / ``"record_and_save"`` (the last active
    step of a cycle: counted and kept, then the cycle's report is made). Its fields are the arguments of
    :func:`roofline.schedule`; :attr:`period` is ``wait + warmup + active``."""

    __slots__ = ("wait", "warmup", "active", "repeat", "skip_first")

    def __init__(self, wait: int, warmup: int, active: int, repeat: int, skip_first: int):
        self.wait, self.warmup, self.active = wait, warmup, active
        self.repeat, self.skip_first = repeat, skip_first

    @property
    def period(self) -> int:
        """Steps in one cycle: ``wait + warmup + active``."""
        return self.wait + self.warmup + self.active

    def __call__(self, step: int) -> ProfilerAction:
        step = _check_count("schedule", "step", step, 0)
        k = step - self.skip_first
        if k < 0 or (self.repeat and k >= self.repeat * self.period):
            return NONE
        k %= self.period
        if k < self.wait:
            return NONE
        if k < self.wait + self.warmup:
            return WARMUP
        return RECORD_AND_SAVE if k == self.period - 1 else RECORD

    def as_dict(self) -> dict:
        """The arguments, as a dict (how a report's ``meta["steady"]["schedule"]`` records them)."""
        return {name: getattr(self, name) for name in self.__slots__}

    def __repr__(self) -> str:
        return "roofline.schedule(" + ", ".join(f"{k}={v}" for k, v in self.as_dict().items()) + ")"

    def __eq__(self, other) -> bool:
        return isinstance(other, Schedule) and self.as_dict() == other.as_dict()

    __hash__ = None


def schedule(*, wait: int = 0, warmup: int = 1, active: int = 1, repeat: int = 0, skip_first: int = 0) -> Schedule:
    """Which steps :func:`roofline.profile` measures, with the meaning of ``torch.profiler.schedule``'s arguments:
    the first ``skip_first`` steps run unmeasured; then each cycle is ``wait`` steps unmeasured, ``warmup`` steps
    counted and discarded, ``active`` steps counted and kept (one report per cycle); ``repeat`` cycles, or cycles
    until the profiler stops when ``repeat=0``.

    Exactly: with ``p = wait + warmup + active`` and ``k = step - skip_first``, step ``step`` (0-based, the
    profiler's ``step_num``: the first step of the loop is 0) is active when ``k >= 0``, ``k % p >= wait +
    warmup`` and (``repeat == 0`` or ``k < repeat * p``); cycle ``c`` (0-based) is active on steps
    ``skip_first + c * p + wait + warmup`` to ``skip_first + (c + 1) * p - 1``. ``wait=2, warmup=1, active=3,
    repeat=2`` measures steps 3, 4, 5 and 9, 10, 11.

    Every argument must be an int (TypeError naming it otherwise; ValueError out of range): ``active >= 1``, the
    others ``>= 0``. Unlike
    ``torch.profiler.schedule``, ``warmup=0`` gives no warning (the steps before it ran too, uncounted; a cycle
    starting at step 0 is labelled as measuring the first step). The returned :class:`Schedule` is a callable
    ``step -> action`` (a :class:`roofline.ProfilerAction`); :func:`roofline.profile` also takes
    ``torch.profiler.schedule(...)``'s callables.

    >>> s = roofline.schedule(wait=2, warmup=1, active=3, repeat=2)
    >>> [n for n in range(14) if s(n) in ("record", "record_and_save")]
    [3, 4, 5, 9, 10, 11]
    """
    return Schedule(_check_count("schedule", "wait", wait, 0), _check_count("schedule", "warmup", warmup, 0),
                    _check_count("schedule", "active", active, 1), _check_count("schedule", "repeat", repeat, 0),
                    _check_count("schedule", "skip_first", skip_first, 0))


def _action(sched, step: int) -> ProfilerAction:
    """The action ``sched`` gives ``step``: a :class:`ProfilerAction`, from a :class:`Schedule`, one of its
    strings or a ``torch.profiler.ProfilerAction`` (by name)."""
    a = sched(step)
    if isinstance(a, str) and a in ACTIONS:
        return ProfilerAction(a)
    name = getattr(a, "name", None)
    if isinstance(name, str) and name.lower() in ACTIONS:
        return ProfilerAction(name.lower())
    raise ValueError(f"profile: schedule({step}) returned {a!r}: a schedule must return a roofline.ProfilerAction "
                     f"(or its value: {', '.join(repr(x.value) for x in ACTIONS)}) or a "
                     "torch.profiler.ProfilerAction NONE, WARMUP, RECORD or RECORD_AND_SAVE")


_ENTER = operator.methodcaller("__enter__")


class _Held:
    """The measure block of a step loop's step in progress, and whether it is open, kept so that no asynchronous
    exception (Ctrl-C, a signal handler's) can separate the two.

    A block's ``__enter__`` and ``__exit__`` are C (:class:`roofline._core.Block`): an interrupt lands either before
    they start (nothing changed) or inside their Python steps (the block finishes entering or leaving, or undoes its
    entry, before the interrupt propagates). What remains is the moment between their return and the loop's
    recording of it, where the interpreter runs signal handlers. Here no bytecode runs there: the report ``__enter__``
    returns is appended to :attr:`box` by ``list.extend`` over a ``map`` (C calling C), and ``__exit__`` is preceded
    by a mark that it has started and followed by the emptying of :attr:`box` the same way. So :attr:`box` is
    non-empty exactly while the block is open, and the loop holds the :class:`_Held` before the block is entered:
    an interrupt anywhere leaves it closable."""

    __slots__ = ("block", "box")

    def __init__(self, block):
        self.block, self.box = block, []

    @property
    def open(self) -> bool:
        return bool(self.box)

    def enter(self):
        self.box.extend(map(_ENTER, (self.block,)))  # the report, appended with no bytecode after the entry
        return self.box[0]

    def exit(self, exc_type, exc, tb):
        """Leave the block if it is open; its report (None when it was not open). The block is left even when
        ``__exit__`` raises (it unwinds before raising)."""
        box = self.box
        if not box:
            return None
        report = box[0]
        started = []  # the exit has started (appended with no bytecode before __exit__)
        steps = (functools.partial(started.append, True), functools.partial(self.block.__exit__, exc_type, exc, tb),
                 box.clear)
        try:
            collections.deque(map(operator.call, steps), maxlen=0)  # C from the first step to the last
        except BaseException:
            if started:  # __exit__ raised: the block unwound before raising
                box.clear()
            raise  # else the interrupt landed before the exit: the block is still open, and held
        return report


class _StepLoop(_core.Block):
    """What :class:`Profiler` and :class:`roofline._loops._monitor.Monitor` share: start/stop, the ``with`` form, the
    0-based step counter, the thread check, the measure block of the step in progress, and the callbacks.

    Single use: ``start`` once (RuntimeError after), ``step`` only between ``start`` and ``stop``, on the thread
    that started it. Subclasses implement ``_on_start``, ``_on_stop`` and ``_on_abort`` (the loop raised, or
    leaving a block failed: drop what is in progress), and re-bind the public members (so that each class lists
    them).

    Callbacks (``on_report``, ``on_step``) run through :meth:`_call_back`, never while a block of the loop is open.
    Inside one, ``stop()`` runs at once (a ``step()`` in progress then opens no block after the callback returns; a
    ``stop()`` of a loop already stopping does nothing), and ``step()`` is refused with RuntimeError: the callback
    runs inside a ``step()`` (or ``stop()``) call, which ends the step it was called for."""

    _who = "profile"
    _callback_name = "on_report"
    # the C driver lets a block be entered inside this block's _enter under the lock (step 0's measure block): any
    # other block's steps refuse a block entered in their middle (csrc/binding_track.c, _refused)
    _nests = True

    def _init_loop(self):
        self._state, self._thread, self._step_num = "new", None, 0
        self._block = None      # a _Held: the block of the step in progress, open or not
        self._failure = None
        self._calling = 0       # callbacks of this loop running (nested: stop() from one flushes to the others)

    @property
    def step_num(self) -> int:
        """The number of the step in progress (0-based): how many times :meth:`step` has been called."""
        return self._step_num

    @property
    def running(self) -> bool:
        """Whether :meth:`start` has been called and :meth:`stop` not yet."""
        return self._state == "running"

    def start(self):
        """Start: the step about to run is step 0 (opened for measuring if it is to be measured). RuntimeError if
        already started (single use: make a new one for another run). Returns ``self``."""
        if self._state != "new":
            raise RuntimeError(f"this roofline.{self._who}(...) has already been started; it is single-use: make a "
                               f"new roofline.{self._who}(...) for another run")
        try:
            self._state, self._thread, self._step_num = "running", threading.get_ident(), 0
            self._on_start()
            return self
        except BaseException as e:
            self._state, self._failure = "stopped", 0
            self._release(e)  # a block opened before the failure (an interrupt): no with statement will close it
            raise

    def stop(self):
        """Stop: close the measure block of the step in progress, if any (that step did not end with
        :meth:`step`: nothing of it is kept), then hand over what the steps already ended have left (the
        profiler's partial cycle, the monitor's figures still waiting for their CUDA events). RuntimeError if
        not running; called from inside the loop's own callback once the loop is stopping, it does nothing. The
        end of a ``with`` block calls it."""
        if self._state != "running":
            if self._calling and self._state == "stopped" and self._thread == threading.get_ident():
                return  # from a callback that stop() itself runs (or after one stopped the loop)
            raise RuntimeError(f"roofline.{self._who}(...).stop(): not running "
                               f"({'never started' if self._state == 'new' else 'already stopped'})")
        self._check_thread("stop")
        try:
            self._close_block(None, None, None)
        finally:
            self._state = "stopped"
        self._on_stop()

    # ---- the with statement: roofline._core.Block's C __enter__ and __exit__ call the steps below, so that an
    # interrupt landing as __exit__ starts (a Python __exit__'s first instruction) cannot skip the closing: the
    # closing steps are repeated until they complete (see csrc/binding_track.c)
    def _misuse(self, what):
        if what == "__enter__":
            raise RuntimeError(f"this roofline.{self._who}(...) has already been started; it is single-use: make a "
                               f"new roofline.{self._who}(...) for another run")
        raise RuntimeError(f"roofline.{self._who}(...).__exit__ called outside a with block of it")

    def _prepare(self):
        if self._state != "new":
            self._misuse("__enter__")

    def _enter(self):  # under the block lock (so is the entry of step 0's measure block)
        return self.start()

    def _abort(self):  # _enter raised, wherever an interrupt landed in it: undo the start; idempotent
        self._abandon(RuntimeError(f"roofline.{self._who}(...): interrupted while its with block was entered"))

    def _closing(self, exc_type, exc, tb):  # idempotent: does nothing once the loop is stopped
        self._leave(exc_type, exc, tb)

    def _unwind(self):  # idempotent
        self._release()

    def _finish(self, exc_type, exc, tb):
        return False  # the loop's exception propagates unchanged

    def _leave(self, exc_type, exc, tb):
        """The end of the with block: :meth:`stop`, or, when the loop raised, close the step in progress with the
        exception (the block leaves torch as it was and keeps nothing) and drop what is in progress."""
        if self._state != "running":
            return  # stopped inside the block (stop(), or step() failed): nothing open
        if exc_type is None:
            self.stop()
            return
        self._state = "stopped"
        try:
            self._close_block(exc_type, exc, tb)
        except RuntimeError:
            pass  # the block's own complaint (left out of order); the loop's exception is the one to see
        finally:
            self._on_abort()

    def _release(self, exc: BaseException | None = None):
        """Close the block an interrupt left open (held, not yet left), with ``exc`` (or a RuntimeError saying so)
        as the reason: nothing of it is kept. Errors of the block's own are dropped (an exception is propagating,
        or the block is left all the same)."""
        held = self._block
        if held is None or not held.open:
            return
        if exc is None:
            exc = RuntimeError(f"roofline.{self._who}(...): the step in progress was interrupted")
        try:
            held.exit(type(exc), exc, exc.__traceback__)
        except Exception:  # noqa: BLE001 - the block unwinds before raising
            pass
        finally:
            if not held.open:
                self._block = None

    def _abandon(self, exc: BaseException):
        """The run around the loop raised (a trainer's exception): stop the loop if it is running, close its open
        block with ``exc`` (torch left as it was) and drop what is in progress. Also closes a block an interrupt
        left open after the loop had stopped."""
        if self._state == "running":
            self._leave(type(exc), exc, exc.__traceback__)
        self._release(exc)

    def _check_running(self, what: str):
        if self._calling and what == "step":
            raise RuntimeError(f"roofline.{self._who}(...).step() called from inside its own {self._callback_name} "
                               f"callback: the callback runs inside step() (or stop()), which is ending the step; "
                               f"call step() from the loop only (stop() may be called from the callback)")
        if self._state != "running":
            why = ("start() it first, or use it as a with block" if self._state == "new" else
                   f"it stopped after an error at step {self._failure}" if self._failure is not None else
                   "it has been stopped")
            raise RuntimeError(f"roofline.{self._who}(...).{what}() called outside start()/stop(): {why}")
        self._check_thread(what)

    def _check_thread(self, what: str):
        if threading.get_ident() != self._thread:
            raise RuntimeError(f"roofline.{self._who}(...).{what}() called from another thread than the one that "
                               "started it: a measure block counts the ops of its own thread")

    def _call_back(self, fn, arg):
        """``fn(arg)``: a callback of the loop (no block of the loop is open), with re-entry guarded."""
        self._calling += 1
        try:
            fn(arg)
        finally:
            self._calling -= 1

    def _open_block(self, model, **kwargs):
        """Enter a measure block for the step about to run, held (:class:`_Held`) before it is entered: an
        interrupt landing anywhere leaves it closable by :meth:`stop`, the next step or the ``with`` statement. An
        entry that raised left nothing open (the error propagates)."""
        held = self._block
        if held is not None and held.open:  # never two: a block of the loop's is closed before the next opens
            raise RuntimeError(f"roofline.{self._who}(...): a measure block of the loop is still open")
        held = self._block = _Held(measure(model, **kwargs))
        waits = OP_WAITS.set(getattr(self, "step_time", "median") == "ops_min")  # read as the block's session is made
        try:
            held.enter()
        finally:
            OP_WAITS.reset(waits)

    def _close_block(self, exc_type, exc, tb):
        """Leave the open measure block, if any; its report (None when none was open). On an error leaving it,
        the loop stops (``_failure``) and the error propagates."""
        held = self._block
        if held is None:
            return None
        try:
            report = held.exit(exc_type, exc, tb)
        except BaseException:
            if self._state == "running":
                self._state, self._failure = "stopped", self._step_num
                self._on_abort()
            raise
        finally:
            if not held.open:  # else an interrupt landed before the block was left: still held, to close
                self._block = None
        return report

    def _on_start(self):
        raise NotImplementedError

    def _on_stop(self):
        raise NotImplementedError

    def _on_abort(self):
        raise NotImplementedError


class Profiler(_StepLoop):
    """What :func:`roofline.profile` returns: call :meth:`step` once at the end of each step of the loop,
    between :meth:`start` and :meth:`stop` (or inside a ``with`` block).

    Attributes: ``reports`` (one :class:`roofline.SteadyReport` per cycle, in order), ``schedule``,
    :attr:`step_num`, :attr:`running`."""

    _who = "profile"
    start, stop, step_num, running = _StepLoop.start, _StepLoop.stop, _StepLoop.step_num, _StepLoop.running

    def __init__(self, model, sched, on_report, measure_kwargs):
        self._init_loop()
        self._model, self.schedule, self._on_report, self._kwargs = model, sched, on_report, measure_kwargs
        self.reports: list = []
        self._action = NONE
        self._runs: list = []      # (step number, report) of the cycle's active steps so far
        self._warmups = 0          # warm-up steps counted (and discarded) since the last cycle closed
        self._cycle = 0

    def step(self) -> None:
        """End the step in progress (call it once at the end of each step of the loop): close its measure block
        (an active step's report is kept, a warm-up step's discarded), close the cycle when that step was its last
        active one (the report goes to ``reports`` and ``on_report``), and open the next step's block if the
        schedule measures it. RuntimeError outside :meth:`start` / :meth:`stop`, from another thread, or from
        inside ``on_report``; an error opening the next step's block propagates, and that step runs unmeasured."""
        self._check_running("step")
        done, action = self._step_num, self._action
        self._action = NONE
        report = self._close_block(None, None, None)
        if action in _RECORDING and report is not None:
            self._runs.append((done, report))
        elif action == WARMUP and report is not None:
            self._warmups += 1
        self._step_num = done + 1
        nxt = _action(self.schedule, self._step_num)
        if action in _RECORDING and (action == RECORD_AND_SAVE or nxt not in _RECORDING):
            self._close_cycle(partial=False)
        if self._state == "running":  # on_report may have stopped the profiler
            self._begin(nxt)

    def _begin(self, action):
        self._action = action  # kept when the block fails to open: the step ends unmeasured, its cycle knows it
        if action != NONE:
            self._open_block(self._model, **self._kwargs)

    def _on_start(self):
        self._begin(_action(self.schedule, 0))

    def _on_stop(self):
        # the step in progress (its block closed by stop) never ended with step(): not kept. Active steps of an
        # unfinished cycle make a report labelled partial, as torch.profiler hands over its unfinished trace
        self._action = NONE
        if self._runs:
            self._close_cycle(partial=True)

    def _on_abort(self):
        self._action, self._runs, self._warmups = NONE, [], 0

    def _close_cycle(self, partial: bool):
        """Make the cycle's report (its warnings point at the user's call of step() or stop(): roofline._util._warn)."""
        runs, warm = self._runs, self._warmups
        self._runs, self._warmups = [], 0
        if not runs:  # none of the cycle's active steps was measured (opening their blocks failed)
            _warn.warn(f"roofline.profile: cycle {self._cycle} has no report: none of its active steps was "
                       "measured (opening their measure blocks failed)")
            self._cycle += 1
            return
        numbers = [n for n, _ in runs]
        sched = self.schedule
        as_dict, active = getattr(sched, "as_dict", None), getattr(sched, "active", None)
        extra = {"cycle": self._cycle, "partial": partial,
                 "schedule": as_dict() if callable(as_dict) else repr(sched)}
        if isinstance(active, int) and not isinstance(active, bool):
            extra["active"] = active
        report = SteadyReport._from_runs([r for _, r in runs], warmup=warm, ceilings=self._kwargs["ceilings"],
                                         first_step=numbers[0] == 0, step_numbers=numbers, extra=extra,
                                         who="roofline.profile", step_time=getattr(self, "step_time", "median"))
        report.steps, report.cycle = numbers, self._cycle
        self._cycle += 1
        self.reports.append(report)
        if self._on_report is not None:
            self._call_back(self._on_report, report)


def profile(model=None, *, schedule=None, on_report=None, timing: str | None = "model", ceilings="measured",
             attention: str | None = None, step_time: str = "median", formulas=None) -> Profiler:
    """Measure steps of a training loop you already have, as ``torch.profiler.profile(schedule=...)`` does (the
    same name, the same ``schedule`` and ``step()``):
    call ``prof.step()`` once at the end of each step; the steps ``schedule`` makes active are each counted inside
    a :func:`roofline.measure` block, and each cycle's active steps give one :class:`roofline.SteadyReport` (the
    counts of one step, the median wall time, the spread over the active steps: what :func:`roofline.steady`
    gives), passed to ``on_report(report)`` at the end of the cycle and kept in ``prof.reports``.

    ``schedule``: a :func:`roofline.schedule` (default ``roofline.schedule(warmup=1, active=5, repeat=1)``: step
    0 counted and discarded, steps 1 to 5 measured, one report, as ``roofline.steady(step, warmup=1, repeat=5)``), or
    any callable ``step -> action`` such as ``torch.profiler.schedule(...)``'s. Steps are numbered from 0 (the
    profiler's ``step_num``: the step running before the first ``step()`` call is step 0); see
    :func:`roofline.schedule` for which numbers are active. Warm-up steps run inside a measure block too, and their
    reports are discarded (the first-call costs of counting stay out of the active steps).

    Each report says what it covers: ``report.steps`` (the loop's step numbers of its active steps),
    ``report.cycle`` (0-based), and ``report.meta["steady"]``: ``step_numbers``, ``cycle``, ``schedule``,
    ``warmup`` (warm-up steps counted and discarded in the cycle), ``partial`` and the keys of
    :func:`roofline.steady`'s reports. When the active steps of a cycle did not all run the same ops (another
    branch, other shapes), the report is that of the steps that ran the most common op sequence: the others are
    named in ``meta["steady"]["other_steps"]`` (1-based positions in the cycle; the summary's first line gives their
    step numbers) and in a warning; same ops with other counts set ``counts_agree`` False with a warning. A cycle
    starting at step 0 measures the loop's first step (its one-off work included) and is labelled so.

    ``stop()`` (or the end of the ``with`` block) closes the step in progress, whose measurement is dropped (it
    did not end with ``step()``); active steps of an unfinished cycle give a report with
    ``meta["steady"]["partial"]`` True. An exception in the loop inside the ``with`` block leaves torch as it was
    (the open measure block is left with the exception), drops the cycle in progress, calls no ``on_report`` and
    propagates unchanged.

    ``on_report`` runs inside ``step()`` (or ``stop()``), with none of the profiler's measure blocks open:
    ``prof.stop()`` from it stops the profiler there (no further step is measured), and ``prof.step()`` from it is
    refused with RuntimeError. When a measure block cannot be opened (an error entering it), ``step()``
    raises that error and the step runs unmeasured: the profiler goes on, and a cycle none of whose active steps
    was measured gives no report (a warning says so); ``start()`` raises it and the profiler does not start.

    ``step_time`` (``"median"``, ``"min"``, ``"unwaited"``, ``"unwaited_min"`` or ``"ops_min"``, the last with
    ``timing="op"``) chooses each report's step time as in :func:`roofline.steady`: ``"ops_min"`` and the unwaited
    kinds keep MFU comparable between runs on a shared machine.

    ``model``, ``timing``, ``ceilings``, ``attention`` and ``formulas`` (the block's own formulas, as
    ``measure(formulas=...)`` takes them: used in every measured step) are passed to :func:`roofline.measure` and
    checked now, with ``step_time``, ``schedule`` (callable, TypeError; what it returns for step 0, ValueError) and
    ``on_report`` (None or callable, TypeError). ``step()`` outside ``start()`` / ``stop()`` raises RuntimeError;
    so does calling it from another thread, and starting a profiler twice (single use).

    Arguments of ``torch.profiler.profile`` that have no meaning here (``activities``, ``on_trace_ready``,
    ``record_shapes``, ...) are refused with a TypeError that says what to use instead. Before 0.5 this function
    was ``roofline.profiler`` (still there, deprecated), and ``roofline.profile`` was the steady repeat of a step
    function, now :func:`roofline.steady`: ``roofline.profile(step, model, warmup=..., repeat=...)`` (a step
    function, not a module, first; or ``warmup`` / ``repeat``) still calls it, with a DeprecationWarning.

    >>> with roofline.profile(model, schedule=roofline.schedule(wait=1, warmup=1, active=3),
    ...                        on_report=print) as prof:                    # doctest: +SKIP
    ...     for batch in loader:
    ...         train_step(batch)
    ...         prof.step()
    """
    if schedule is None:
        schedule = Schedule(wait=0, warmup=1, active=5, repeat=1, skip_first=0)
    elif not callable(schedule):
        raise TypeError(f"profile: schedule must be a roofline.schedule(...) or a callable step -> action, got "
                        f"{type(schedule).__name__}")
    if on_report is not None and not callable(on_report):
        raise TypeError(f"profile: on_report must be None or a callable taking the report, got "
                        f"{type(on_report).__name__}")
    kwargs = {"timing": timing, "ceilings": ceilings, "attention": attention, "formulas": formulas}
    measure(model, **kwargs)  # checks the arguments now
    _check_step_time(step_time, "profile", timing)
    _action(schedule, 0)  # and what the schedule returns
    prof = Profiler(model, schedule, on_report, kwargs)
    prof.step_time = step_time
    return prof


_profile = profile

# torch.profiler.profile's arguments that roofline.profile does not take, and what to use instead
_TORCH_ONLY = {
    "activities": "roofline counts every op of a measured step, whatever device it runs on",
    "on_trace_ready": "use on_report=, called with each cycle's roofline.SteadyReport",
    "record_shapes": "every op's shapes are recorded (r.signatures)",
    "profile_memory": "compulsory bytes are counted for every op (bytes_read, bytes_written)",
    "with_stack": "ops are credited to modules (r.table(by='module'))",
    "with_flops": "FLOPs are always counted",
    "with_modules": "ops are credited to modules (r.table(by='module'))",
    "experimental_config": None, "execution_trace_observer": None, "acc_events": None, "use_cuda": None,
    "custom_trace_id_callback": None,
}


def _steady_form(args, kwargs) -> bool:
    """Whether a call of :func:`profile` is one of the steady repeat as ``roofline.profile`` took it before 0.5
    (``profile(step, model=None, *, warmup=, repeat=, ...)``): a second positional argument, ``step``, ``warmup`` or
    ``repeat``, or a first argument that is callable and not a module."""
    if len(args) >= 2 or {"step", "warmup", "repeat"} & set(kwargs):
        return True
    if args and args[0] is not None and callable(args[0]):
        torch = sys.modules.get("torch")  # an nn.Module exists only once torch is imported
        return not (torch is not None and isinstance(args[0], torch.nn.Module))
    return False


@functools.wraps(_profile)
def profile(*args, **kwargs) -> Profiler:  # the documented signature is _profile's (inspect follows __wrapped__)
    if _steady_form(args, kwargs):
        _warn.warn("roofline.profile(step, model, warmup=..., repeat=...) is deprecated since 0.5 and will be "
                      "removed in 0.7: the steady repeat of a step function is roofline.steady(step, model, "
                      "warmup=..., repeat=...); roofline.profile(model, schedule=...) is now what torch calls "
                      "torch.profiler.profile", DeprecationWarning)
        return steady(*args, **kwargs)
    for name in kwargs:
        if name in _TORCH_ONLY:
            hint = _TORCH_ONLY[name]
            raise TypeError(f"profile: {name} is an argument of torch.profiler.profile that roofline.profile does not "
                            f"take" + (f" ({hint})" if hint else "") + "; roofline.profile takes model, schedule, "
                            "on_report, timing, ceilings, attention, step_time and formulas")
    return _profile(*args, **kwargs)


def profiler(*args, **kwargs) -> Profiler:
    """Deprecated since 0.5 (removed in 0.7): :func:`roofline.profile`, under its name before 0.5. Same arguments,
    same result, and a DeprecationWarning."""
    _warn.warn("roofline.profiler is deprecated since 0.5 and will be removed in 0.7: use roofline.profile (the "
                  "same arguments; the name torch.profiler.profile has)", DeprecationWarning)
    return _profile(*args, **kwargs)
