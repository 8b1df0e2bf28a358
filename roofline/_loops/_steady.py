"""Steady-state measurement: :func:`roofline.steady` runs a step function a few times uncounted (warm-up), then
``repeat`` times inside :func:`roofline.measure`, and reports the median step with the spread over the repeats.

A ``with`` block runs once, so repeating needs the work as a function: ``steady(step)``. (Before 0.5 this was
``roofline.profile``, which now has ``torch.profiler.profile``'s meaning: :mod:`roofline._loops._schedule`.) The first call of a
training step does work that later steps do not (the optimizer creates its state: ``aten.zeros_like`` for every
parameter; lazy modules and caches initialise); the warm-up steps absorb it, so the measured step is the one a
training loop repeats. ``warmup=0`` measures the first step on purpose, and the report says so.
"""

from __future__ import annotations

import functools
import inspect
import math
import os
import statistics
from time import perf_counter as _perf_counter

import numpy as np

from roofline._measure import measure
from roofline._datamodel import _records
from roofline._hardware._contention import OP_WAITS
from roofline.render._render import halves_text, plain_text
from roofline.report import Report
from roofline._util import _ints
from roofline._util import _warn

# count columns that must agree between repeats of the same step
_COUNTS = _records.COUNTS


def _check_int(name: str, v, lo: int, where: str = "steady") -> int:
    """``v`` as an int >= ``lo``, by the package's one rule (:func:`roofline._util._ints.count`)."""
    return _ints.count(v, name, where, lo)


STEP_TIMES = ("median", "min", "unwaited", "unwaited_min", "ops_min")

# steady(seconds=...): the most steps it measures to fill the time (every measured step's report is kept until
# they are aggregated); more only when repeat asks for more
SECONDS_MAX_STEPS = 2000


def _check_seconds(v, where: str = "steady"):
    """``v`` (``seconds=``) as a float > 0, or None: TypeError for a non-number (a bool included), ValueError
    for a number that is not finite and positive."""
    if v is None:
        return None
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float)) and not hasattr(v, "__float__"):
        raise TypeError(f"{where}: seconds must be a number of seconds or None, got {type(v).__name__}")
    try:
        f = float(v)
    except OverflowError:  # an int beyond a float's range
        f = math.inf
    except (TypeError, ValueError) as e:
        raise TypeError(f"{where}: seconds must be a number of seconds or None, got {type(v).__name__}") from e
    if not math.isfinite(f) or f <= 0:
        raise ValueError(f"{where}: seconds must be a finite number of seconds > 0, got {v!r}")
    return f


def steady(step, model=None, *, warmup: int = 1, repeat: int = 5, timing: str | None = "model",
           ceilings="measured", attention: str | None = None, step_time: str = "median",
           formulas=None, seconds: float | None = None, plain: bool = False) -> "SteadyReport":
    """Measure the steady state of ``step`` (a callable taking no arguments, e.g. one training step): run it
    ``warmup`` times uncounted, then ``repeat`` times each inside :func:`roofline.measure`, and return a
    :class:`SteadyReport` of the median step.

    The report's counts are those of the step: the steps that ran the most common op sequence are aggregated (a
    warning names the others, left out), its ``wall_time`` is the median of those steps' wall times and, with ``timing="op"``, each op call's time is
    the median of that call's times over the repeats. :attr:`SteadyReport.spread` has the minimum, median and
    maximum of the wall time and of each op's time per step. ``model``, ``timing``, ``ceilings``, ``attention`` and
    ``formulas`` (the block's own formulas) are passed to :func:`roofline.measure` (checked before anything runs).

    ``step_time`` chooses the step's time, the one its MFU and roofline figures divide by: ``"median"`` (default),
    the median wall time; ``"min"``, the least wall time of the repeats (the least disturbed one); ``"unwaited"``,
    the median of each repeat's wall time with its threads' waits for a CPU held by other processes taken out
    (Linux's scheduler statistics of every thread of the process, read right outside the step's clock reads:
    ``meta["load"]["step"]["unwaited_s"]``, at most the wall time; equal to the wall time on an idle machine, the
    wall time where the statistics are missing);
    ``"unwaited_min"``, the least of those unwaited times (the least disturbed step: on a busy machine every step
    is slowed, never sped up, by what the statistics cannot take out; use ``repeat`` of 10 or more);
    ``"ops_min"`` (needs ``timing="op"``), the step composed of its least disturbed parts: each op call's least time
    over the steps, summed, plus the least time the steps spent outside ops (:func:`_ops_min`; use ``repeat`` of 10
    or more). On a shared machine ``"ops_min"`` keeps MFU comparable between runs best, then the unwaited kinds
    (docs/training.md); the report says which
    (``meta["steady"]["step_time"]``, with the steps' unwaited ``min``, ``median``, ``max`` and ``spread``, and the
    first line of ``print(r)``). When steps ran under contention with several intra-op threads whose OpenMP runtime
    spin-waits, the spinning counts as time on a CPU and the unwaited time overstates the step: the report says so
    (``meta["steady"]["step_time"]["spin"]``, a warning) and how to avoid it (``OMP_WAIT_POLICY=PASSIVE`` or one
    thread). Per-op times (``timing="op"``) stay as measured.

    ``seconds``: keep measuring steps, past ``repeat``, until this much wall time has passed since the first
    measured step began (the steps and the building of each one's report; at most 2,000 steps, or ``repeat`` where
    it asks for more; a warning says when that limit stopped it). On a shared host the machine's own speed moves in phases of seconds (other tenants' work), slowing
    every op alike; a fraction of a second of steps may all fall in a slow phase, so a step time comparable between
    runs there (``"ops_min"``, ``"unwaited_min"``) needs steps spread over ten seconds or more: ``seconds=15``.
    ``plain=True``: after each measured step, run the step once more outside any measure block and time it (the
    current CUDA device synchronised around it, as a block's wall time is): ``meta["steady"]["plain"]`` has their
    number, ``least`` and ``median`` wall time and the least measured step's wall time (``measured_least``), and the
    report's first line compares the two least times. That is the step without roofline: what the instrumentation
    adds to the measured step (on a CPU, tens of microseconds an op) is the difference, less whatever load fell on
    one kind of step only. Each plain step runs right after a measured one, in the same phase of a shared host. It
    doubles the steps ``step`` runs for a given ``repeat``; with ``seconds``, the plain steps share the time, so
    about half as many steps are measured.
    ``meta["steady"]["seconds"]`` has what was asked, the time the steps took and whether the limit stopped them;
    with ``"ops_min"``, ``meta["steady"]["step_time"]["halves"]`` compares the first half of the steps with the
    last (as many steps in each). Every measured step's report is kept until they are aggregated (memory grows with the steps).

    ``warmup`` (default 1) steps run first, uncounted: optimizer state creation, lazy initialisation and the
    first-call costs of the allocator and of kernel selection stay out of the measured steps. ``warmup=0``
    measures the first step on purpose: the report is then labelled (``r.meta["steady"]["first_step"]``), and with
    ``repeat >= 2`` the ops the first step ran more often than the last are listed in
    ``r.meta["steady"]["first_step_ops"]``.

    ``step`` runs synchronously: a generator function or an ``async def`` function (whose call only creates a
    generator or coroutine, running none of its body) is refused with TypeError, and so is a step that returns a
    generator, coroutine or other awaitable.

    Before 0.5 this function was ``roofline.profile`` (a call in that form still reaches it, with a
    DeprecationWarning): ``roofline.profile`` is now the loop profiler, as ``torch.profiler.profile``.

    >>> r = roofline.steady(lambda: train_step(batch), model, warmup=2, repeat=5)    # doctest: +SKIP
    >>> print(r)                                                                     # doctest: +SKIP
    """
    if not callable(step):
        raise TypeError(f"steady: step must be a callable taking no arguments, got {type(step).__name__}")
    _check_synchronous(step)
    warmup = _check_int("warmup", warmup, 0)
    repeat = _check_int("repeat", repeat, 1)
    seconds = _check_seconds(seconds)
    if not isinstance(plain, (bool, np.bool_)):
        raise TypeError(f"steady: plain must be True or False, got {type(plain).__name__}")
    _check_step_time(step_time, "steady", timing)
    measure(model, timing=timing, ceilings=ceilings, attention=attention, formulas=formulas)  # checks them now
    for _ in range(warmup):
        _check_result(step())
    runs, plain_times = [], []
    most = max(repeat, SECONDS_MAX_STEPS) if seconds is not None else repeat
    waits = OP_WAITS.set(step_time == "ops_min")  # each op's waits for a CPU, for the composition (_ops_min)
    began = _clock()
    try:
        while len(runs) < repeat or (seconds is not None and _clock() - began < seconds and len(runs) < most):
            with measure(model, timing=timing, ceilings=ceilings, attention=attention, formulas=formulas) as r:
                _check_result(step())
            runs.append(r)
            if plain:  # the same step outside any block, right after the measured one (the same phase of the host)
                plain_times.append(_plain_step(step))
    finally:
        OP_WAITS.reset(waits)
    extra = {}
    if plain:
        walls = [r.wall_time for r in runs if r.wall_time is not None]  # None when nothing is timed
        extra["plain"] = {"steps": len(plain_times), "least": min(plain_times),
                          "median": statistics.median(plain_times), "measured_least": min(walls) if walls else None}
    if seconds is not None:
        took = _clock() - began
        capped = took < seconds
        extra["seconds"] = {"asked": seconds, "took": took, "steps": len(runs), "capped": capped}
        if capped:
            why = (f"repeat={repeat}" if repeat > SECONDS_MAX_STEPS else
                   f"the most it measures to fill the time, {SECONDS_MAX_STEPS} steps; a larger repeat measures more")
            _warn.warn(f"roofline.steady: seconds={seconds:g}: stopped at {len(runs)} measured steps after "
                       f"{took:.3g} s ({why})")
    return SteadyReport._from_runs(runs, warmup=warmup, ceilings=ceilings, step_time=step_time, extra=extra or None)


def _clock() -> float:
    """The wall clock ``steady(seconds=...)`` fills and ``steady(plain=True)`` times its steps with (a function,
    so a test can stand in for it)."""
    return _perf_counter()


def _plain_step(step) -> float:
    """Seconds ``step`` takes outside any measure block, the current CUDA device synchronised before and after (as
    a block's wall time is)."""
    import torch

    from roofline._capture._session import _sync_all

    cuda_possible = torch.cuda.is_available()
    _sync_all(cuda_possible)
    t0 = _clock()
    _check_result(step())
    _sync_all(cuda_possible)
    return _clock() - t0


def _check_step_time(step_time, who: str = "profile", timing="op") -> None:
    """TypeError / ValueError for a ``step_time`` that is not one of :data:`STEP_TIMES`, or ``"ops_min"`` without
    ``timing="op"`` (it is composed from each op's time)."""
    if not isinstance(step_time, str):
        raise TypeError(f"{who}: step_time must be one of {', '.join(map(repr, STEP_TIMES))}, got "
                        f"{type(step_time).__name__}")
    if step_time not in STEP_TIMES:
        raise ValueError(f"{who}: step_time must be one of {', '.join(map(repr, STEP_TIMES))}, got {step_time!r}")
    if step_time == "ops_min" and timing != "op":
        raise ValueError(f"{who}: step_time='ops_min' composes the step from each op call's time, which needs "
                         f"timing='op' (every op timed), got timing={timing!r}")


def _ops_min(runs: list, median_wall) -> tuple:
    """``(seconds, meta)`` of the step time ``"ops_min"`` over the aggregated ``runs`` (steps that ran the same op
    sequence, each op timed): the step composed of its least disturbed parts. The parts of step i are its op calls
    ``d[i, k]`` and the intervals around them ``g[i, k]`` (from the block's start to the first call, between calls
    k - 1 and k, from the last call to the block's end: Python, autograd and the instrumentation), each with the
    time its thread waited for a CPU inside it taken out where the block recorded it (``Report.op_waits``: blocks of
    ``steady`` / ``profile`` with this step time; Linux); the step is

        sum over k of min over i of d[i, k]  +  sum over k of min over i of g[i, k]

    Other work on the machine only ever adds to a part's time (a wait for a CPU, caches refilled after it, a
    hypervisor's pause), so each part's least time over the steps is its least disturbed one, and it is found far
    more often than a whole step without any disturbance: on a busy machine the composition holds still where the
    step's wall or CPU time moves. Never more than the least wall time (each step's parts add up to its wall time).
    An estimate of the undisturbed step, and a low one where the parts' least times cannot occur together (an op
    faster because the one before left its data in cache). An op's intra-op threads' own waits are not taken out
    (only its calling thread's): they stay in its time, and the least over the steps is what removes them.

    ``meta["halves"]`` (4 steps or more): the same composition from the first and from the last half of the
    steps (as many in each: with an odd count, the middle step is in neither). Where they differ, the machine's own speed moved during the measurement (a shared host's other tenants
    work in phases of seconds, slowing every part alike: nothing within the steps can take that out); measured over
    more time (``roofline.steady(seconds=...)``), the least times reach the machine's quicker phases and the halves
    agree.

    Where it does not apply, the median wall time stands and ``meta["missing"]`` says why: a step without a wall
    time or without op times, an op call without a time, or ops whose times overlap (several threads or device
    streams at once: their times do not add up to the step's)."""
    out = {"kind": "ops_min", "wall_median": median_wall}
    if not runs or any(r.wall_time is None for r in runs) or not all(r.timed for r in runs):
        out["missing"] = "the steps' ops were not all timed (timing='op'): the median wall time stands"
        return median_wall, out
    start = np.stack([r.records["t_start"] for r in runs])  # steps x op calls, seconds from the block's start
    end = np.stack([r.records["t_end"] for r in runs])
    if not (np.isfinite(start).all() and np.isfinite(end).all()) or (end < start).any():
        out["missing"] = "some op calls have no time: the median wall time stands"
        return median_wall, out
    if (start[:, 1:] < end[:, :-1] - 1e-9).any():
        out["missing"] = ("the ops' times overlap (ops ran on several threads or device streams at once), so "
                          "they do not add up to a step: the median wall time stands")
        return median_wall, out
    walls = np.array([r.wall_time for r in runs], dtype=np.float64)
    d, g = end - start, _intervals(start, end, walls)
    taken = _waits(runs, start.shape)
    if taken is not None:
        d, g = d - taken[0], g - taken[1]
        # per step, the mean: what was taken out (waits, and the reads' own cost)
        out["waits"] = {"ops": float(taken[0].sum()) / len(runs), "between": float(taken[1].sum()) / len(runs)}
    d, g = np.maximum(d, 0.0), np.maximum(g, 0.0)  # (a clock read a little early or late: no part below 0)
    least_ops, between = float(d.min(axis=0).sum()), float(g.min(axis=0).sum())
    in_ops = (end - start).sum(axis=1)
    out["ops"] = {"least": least_ops, "between_least": between, "median": float(np.median(in_ops)),
                  "values": [float(v) for v in in_ops]}
    if len(runs) >= 4:  # the same composition from each half of the steps: has the least time settled?
        h = len(runs) // 2  # as many steps in each (an odd count's middle step in neither): a least time over more
        k = len(runs) - h   # steps leans lower by chance alone
        out["halves"] = [float(d[:h].min(axis=0).sum() + g[:h].min(axis=0).sum()),
                         float(d[k:].min(axis=0).sum() + g[k:].min(axis=0).sum())]
    return least_ops + between, out


def _waits(runs: list, shape) -> tuple | None:
    """``(ops, intervals)``: seconds to take out of each op call's time and of each interval of :func:`_intervals`,
    per step, from the runs' ``op_waits`` (:meth:`roofline._capture._session.Session.op_waits_array`); None when any
    run has none, or no call's waits are known.

    An op call's part is its time plus the two reads of the waits around it (each between two clock reads) less the
    waits between those reads: its time on a CPU and its reads'. An interval holds the reads next to it (the block's
    own at its start and end, the ops' next to it) and loses the waits between them. Each read is so counted in two
    parts, and each part loses the quickest read of all the steps per read it holds: never more than any read took,
    so no part drops below its time on a CPU. Where a call's waits are unknown (another thread's op) nothing is taken
    out of it or of the waits around it."""
    got = [getattr(r, "op_waits", None) for r in runs]
    if any(w is None or len(w[0]) != shape[1] for w in got):
        return None
    w = np.stack([g[0] for g in got])  # steps x calls x (waited before, after, read before, read after)
    at_end = np.array([g[1] for g in got], dtype=np.float64)
    before, after, read0, read1 = w[..., 0], w[..., 1], w[..., 2], w[..., 3]
    known = np.isfinite(before) & np.isfinite(after)
    if not known.any():
        return None
    cost = max(float(np.concatenate([read0[known], read1[known]]).min()), 0.0)  # the quickest read
    ops = np.where(known, (after - before) - read0 - read1 + 2 * cost, 0.0)
    start = np.zeros((len(runs), 1))  # waited by the block's start: 0 by definition
    edges_before = np.concatenate([start, after], axis=1)  # steps x (calls + 1): the reading each interval opens on
    edges_after = np.concatenate([before, at_end[:, None]], axis=1)  # ... and the one it closes on
    waited = edges_after - edges_before
    reads = (np.concatenate([np.ones((len(runs), 1), bool), known], axis=1).astype(float)
             + np.concatenate([known, np.isfinite(at_end)[:, None]], axis=1))
    gaps = np.where(np.isfinite(waited), waited, 0.0) + reads * cost
    return ops, gaps


def _intervals(start, end, walls) -> np.ndarray:
    """Steps x (calls + 1): the time from the block's start to the first call, between consecutive calls, and from
    the last call to the block's end (``walls``)."""
    before = start[:, :1]
    between = start[:, 1:] - end[:, :-1]
    after = walls[:, None] - end[:, -1:]
    return np.concatenate([before, between, after], axis=1)


def _step_time(kind: str, runs: list, median_wall, threads: int | None = None, env=None):
    """``(seconds, meta)`` of the step time ``kind`` (not "median") over the aggregated ``runs``: the time the
    report divides by and what ``meta["steady"]["step_time"]`` says of it. ``threads`` (the intra-op threads the
    steps ran, default torch's now) decides, for ``"ops_min"``, the note on several threads under contention and,
    for the unwaited kinds, with ``env`` (default ``os.environ``), the spin note
    (:func:`_spin_note`)."""
    if kind == "ops_min":
        seconds, out = _ops_min(runs, median_wall)
        if threads is None:
            import torch

            threads = torch.get_num_threads()
        if "ops" in out and threads > 1 and any(r.meta.get("contention") for r in runs):
            out["threads"] = (f"the steps ran {threads} intra-op threads under contention: an op is undisturbed only "
                              "when all of them hold a CPU at once, which a busy machine seldom gives, and only the "
                              "calling thread's waits are taken out; for a step time comparable between runs use "
                              "torch.set_num_threads(1)")
        return seconds, out
    walls = [r.wall_time for r in runs if r.wall_time is not None]
    if not walls:
        return median_wall, {"kind": kind, "wall_median": median_wall}
    if kind == "min":
        return min(walls), {"kind": kind, "wall_median": median_wall}
    values, known, contended = [], 0, False
    for r in runs:
        if r.wall_time is None:
            continue
        # the unwaited time of the step's own window (meta["load"]["step"]: read right outside its clock reads, so
        # the window holds the step and the readings at its edges), at most the step's wall time. The window's
        # extra time is the readings' (microseconds) and whatever waits fell in them: the step's unwaited time lies
        # between the window's less that extra and the window's, and the window's is taken, so that no step is
        # ever put below its time on a CPU (the least of many steps would find such an error). Scaling the wall
        # time by the window's share instead would charge the step for a wait that fell in a reading. A report
        # without it (saved before 0.6) has only the block's load, whose interval holds the block's entry and exit
        # as well: its share is applied to the step's wall time
        load = r.meta.get("load") or {}
        contended = contended or bool(r.meta.get("contention"))
        step = load.get("step")
        if isinstance(step, dict):
            u, w = step.get("unwaited_s"), step.get("wall_s")
            if isinstance(u, (int, float)) and isinstance(w, (int, float)) and 0 < u <= w:
                known += 1
                values.append(min(u, r.wall_time))
                continue
        u, w = load.get("unwaited_s"), load.get("wall_s")
        if isinstance(u, (int, float)) and isinstance(w, (int, float)) and 0 < u <= w:
            known += 1
            values.append(r.wall_time * (u / w))
        else:
            values.append(r.wall_time)
    out = {"kind": kind, "wall_median": median_wall, "values": values}
    lo, mid, hi = min(values), _median(values), max(values)
    # how far apart the steps' unwaited times were: (max - min) / median, beside the figure the report divides by
    out["unwaited"] = {"min": lo, "median": mid, "max": hi, "spread": (hi - lo) / mid if mid else None}
    if known < len(runs):
        out["missing"] = ("no scheduler statistics for some steps: their wall time stands" if known else
                          "no scheduler statistics on this system: the wall time stands")
    if known and contended:
        if threads is None:
            import torch

            threads = torch.get_num_threads()
        note = _spin_note(threads, os.environ if env is None else env)
        if note:
            out["spin"] = note
    return (lo if kind == "unwaited_min" else mid), out


# environment settings under which an OpenMP runtime's waiting threads sleep at once instead of spinning
_PASSIVE = (("OMP_WAIT_POLICY", "passive"), ("GOMP_SPINCOUNT", "0"), ("KMP_BLOCKTIME", "0"))


def _spin_note(threads: int, env) -> str | None:
    """What an unwaited time of contended steps cannot take out, or None: with more than one intra-op thread
    (``threads``) and an OpenMP runtime left to spin-wait (none of ``OMP_WAIT_POLICY=PASSIVE``,
    ``GOMP_SPINCOUNT=0``, ``KMP_BLOCKTIME=0`` in ``env``), a thread that reaches a barrier while another waits for a
    CPU spins on its own CPU, and the scheduler counts the spinning as time on a CPU. A pure function."""
    if threads <= 1:
        return None
    if any(str(env.get(k, "")).strip().lower() == v for k, v in _PASSIVE):
        return None
    return (f"the step ran {threads} intra-op threads whose OpenMP runtime spin-waits (OMP_WAIT_POLICY is not "
            "PASSIVE): while a thread waits for a CPU the others spin at the barrier, and that spinning counts as "
            "time on a CPU, so the unwaited time overstates the step; for a step time comparable between runs "
            "set OMP_WAIT_POLICY=PASSIVE before Python starts, or torch.set_num_threads(1)")


def _step_time_words(t: dict) -> str:
    """What a step time other than the median wall time is, for the report's first line (``t``:
    ``meta["steady"]["step_time"]``)."""
    if t["kind"] == "min":
        return "the least wall time"
    if t["kind"] == "ops_min":
        o = t.get("ops")
        if not isinstance(o, dict) or not all(isinstance(o.get(k), (int, float))
                                              for k in ("least", "between_least", "median")):  # (a hand-edited file)
            why = t.get("missing", "no op times")
            return f"the median wall time (step_time='ops_min' could not be composed: {why})"
        waits = "; each part's waits for a CPU taken out" if t.get("waits") else ""
        halves = halves_text(t.get("halves"))
        return (f"LEAST OPS (each op call's least time over the steps, {o['least'] * 1e3:.1f} ms, plus the least time "
                f"between ops, {o['between_least'] * 1e3:.1f} ms{waits}; the steps' time in ops: median "
                f"{o['median'] * 1e3:.1f} ms{halves})" + ("; OVERSTATED: several intra-op threads under contention (one "
                                                  "thread avoids it)" if t.get("threads") else ""))
    words = ("UNWAITED (waits for a CPU held by other processes taken out" if t["kind"] == "unwaited" else
             "the least UNWAITED time (waits for a CPU held by other processes taken out")
    u = t.get("unwaited")
    if isinstance(u, dict) and len(t.get("values") or ()) > 1 and u.get("median"):
        words += (f"; unwaited min {u['min'] * 1e3:.1f}, median {u['median'] * 1e3:.1f}, max {u['max'] * 1e3:.1f} "
                  f"ms, spread {u['spread']:.0%}")
    if t.get("missing"):
        words += f"; {t['missing']}"
    words += ")"
    if t.get("spin"):
        words += ("; OVERSTATED: intra-op threads spin-waited under contention, which counts as time on a CPU "
                  "(OMP_WAIT_POLICY=PASSIVE or one thread avoids it)")
    return words


def _check_synchronous(step):
    """TypeError for a step whose call would only create a generator or coroutine (its body never running)."""
    fn = step if inspect.isfunction(step) or inspect.ismethod(step) or isinstance(step, functools.partial) \
        else getattr(type(step), "__call__", None)
    for test, what, made, hint in (
            (inspect.iscoroutinefunction, "a coroutine function (async def)", "a coroutine",
             ", e.g. lambda: asyncio.run(step())"),
            (inspect.isasyncgenfunction, "an asynchronous generator function", "an asynchronous generator", ""),
            (inspect.isgeneratorfunction, "a generator function", "a generator", ", e.g. lambda: list(step())")):
        if fn is not None and test(fn):
            raise TypeError(f"steady: step is {what}: calling it only creates {made}, which runs none of its body; "
                            f"pass a function that runs one step{hint}")


def _check_result(out):
    """TypeError for a step that returned a generator, coroutine or other awaitable (closed first, so that Python
    does not warn that a coroutine was never awaited): the step's work never ran."""
    if inspect.isgenerator(out) or inspect.isasyncgen(out) or inspect.isawaitable(out):
        if inspect.isgenerator(out) or inspect.iscoroutine(out):
            out.close()
        raise TypeError(f"steady: step() returned a {type(out).__name__}: the work it stands for has not run; pass a "
                        "function that runs one step, not one that returns a generator or coroutine")


def _op_sequence(r: Report) -> list[str]:
    names = r.op_names
    return [names[i] for i in r.records["op"].tolist()]


def _durations(r: Report) -> np.ndarray:
    return r.records["t_end"] - r.records["t_start"]


def _ranges(numbers) -> str:
    """``[3, 4, 5, 9]`` -> ``"3-5, 9"``."""
    out, start, prev = [], None, None
    for x in list(numbers) + [None]:
        if start is not None and (x is None or x != prev + 1):
            out.append(str(start) if start == prev else f"{start}-{prev}")
            start = None
        if start is None:
            start = x
        prev = x
    return ", ".join(out)


def _median(xs):
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    return statistics.median(xs) if xs else None


class SteadyReport(Report):
    """The report :func:`roofline.steady` returns: a :class:`roofline.Report` of the median step, plus

    * ``repeats``: the reports of every measured step, in order;
    * ``spread``: ``{"wall_time": {"min", "median", "max", "values"}, "ops": {op name: {"min", "median", "max"}}}``
      in seconds, over the aggregated steps: the wall time of each step and each op's total time per step (``ops``
      is empty unless ``timing="op"``);
    * ``meta["steady"]``: ``warmup``, ``repeat``, ``wall_times``, ``counts_agree`` (every repeat counted the same),
      ``first_step`` (True when ``warmup=0``: the report is then that of the first step, with its one-off work, and of
      the repeats that ran the same ops) and
      ``first_step_ops`` (op name -> extra calls of the first step over the last, when ``warmup=0`` and
      ``repeat >= 2``), ``steps`` (the 1-based steps aggregated: those that ran the most common op sequence, or
      with ``warmup=0`` the first step's) and ``other_steps`` (the steps left out, named in a warning).

    A cycle of :func:`roofline.profile` gives the same report, with ``steps`` (the loop's step numbers of the
    cycle's active steps) and ``cycle`` (0-based) attributes; its ``meta["steady"]`` says ``warmup`` (warm-up
    steps counted and discarded in the cycle) and adds ``step_numbers`` (the loop's number of each measured
    step; ``steps`` and ``other_steps`` stay positions 1, 2, ... among them), ``cycle``, ``schedule`` (the
    arguments of :func:`roofline.schedule`, or the text of another schedule), ``active`` (the schedule's active
    steps per cycle) and ``partial`` (True when the profiler stopped before the cycle's last active step);
    ``first_step`` is True when the cycle's first active step is the loop's step 0.

    The printed summary starts with a line saying what was run. Saved with :meth:`to_json`, it loads back as a
    SteadyReport that keeps ``meta["steady"]`` and ``spread`` (rebuilt from it: ``meta["steady"]["op_spread"]``
    holds ``spread["ops"]``), a profiler cycle's ``steps`` and ``cycle``; ``repeats`` is empty (not saved).
    """

    _NAME = "SteadyReport"
    repeats: list
    spread: dict

    @classmethod
    def _from_runs(cls, runs: list, *, warmup: int, ceilings, first_step: bool | None = None,
                   step_numbers: list | None = None, extra: dict | None = None, who: str = "roofline.steady",
                   step_time: str = "median") -> "SteadyReport":
        """The report of measured steps ``runs`` (one :class:`roofline.Report` each, in order): shared by
        :func:`steady` and :func:`roofline.profile`'s cycles. ``first_step`` (default: ``warmup == 0``): the
        first run is the program's first step, measured on purpose (its ops are the reference, no warning).
        ``step_numbers``: the loop's number of each run, for messages and ``meta["steady"]["step_numbers"]``
        (default: none, the runs are named 1, 2, ...). ``extra``: more keys for ``meta["steady"]``. ``who``: the caller
        the warnings name (they point at the user's line: roofline._util._warn). ``step_time``: as in
        :func:`profile`."""
        if first_step is None:
            first_step = warmup == 0
        names = [i + 1 for i in range(len(runs))] if step_numbers is None else list(step_numbers)
        walls = [r.wall_time for r in runs]
        seqs = [tuple(_op_sequence(r)) for r in runs]
        # the steps aggregated: when the first step is measured on purpose, those that ran its ops; else those
        # that ran the most common op sequence (ties: the one of the latest step), so an outlier step never
        # becomes the report
        if first_step:
            ref = seqs[0]
        else:
            counts = {}
            for q in seqs:
                counts[q] = counts.get(q, 0) + 1
            top = max(counts.values())
            ref = next(q for q in reversed(seqs) if counts[q] == top)
        same = [i for i, q in enumerate(seqs) if q == ref]
        others = [i for i in range(len(runs)) if i not in same]
        # the base step: the one with the median wall time among the aggregated steps
        timed_walls = [(walls[i], i) for i in same if walls[i] is not None]
        base = sorted(timed_walls)[(len(timed_walls) - 1) // 2][1] if timed_walls else same[-1]
        b = runs[base]
        records = b.records.copy()
        agree = not others and all(
            np.array_equal(runs[i].records[c], b.records[c]) for i in same for c in _COUNTS)
        if others and not first_step:
            _warn.warn(f"{who}: the measured steps did not all run the same ops; the report is the "
                       f"median of {len(same)} of {len(runs)} steps (those that ran the most common op "
                       f"sequence); step{'s' if len(others) != 1 else ''} "
                       f"{', '.join(str(names[i]) for i in others)} ran other ops and "
                       f"{'are' if len(others) != 1 else 'is'} left out")
        elif not agree and not first_step:
            _warn.warn(f"{who}: the measured steps ran the same ops with different counts (shapes "
                       "changed between steps); the report is the median step's counts")
        if len(same) > 1 and b.timed:
            d = np.nanmedian(np.stack([_durations(runs[i]) for i in same]), axis=0)
            records["t_end"] = records["t_start"] + d
        wall = _median([walls[i] for i in same])
        time, chosen = wall, None  # the step's time, what the report divides by
        if step_time != "median":
            time, chosen = _step_time(step_time, [runs[i] for i in same], wall)
            for note in ("spin", "threads"):
                if chosen.get(note):
                    _warn.warn(f"{who}: step_time={step_time!r}: {chosen[note]}")
        ops = {}
        if b.timed:
            per = {}
            for i in same:
                r = runs[i]
                d = np.nan_to_num(_durations(r), nan=0.0)
                sums = np.bincount(r.records["op"].astype(np.intp), weights=d, minlength=len(r.op_names))
                for j in np.unique(r.records["op"]).tolist():
                    per.setdefault(r.op_names[j], []).append(float(sums[j]))
            ops = {n: {"min": min(v), "median": statistics.median(v), "max": max(v)} for n, v in per.items()}
        finite = [walls[i] for i in same if walls[i] is not None]
        spread = {"wall_time": {"min": min(finite) if finite else None, "median": wall,
                                "max": max(finite) if finite else None, "values": [walls[i] for i in same]},
                  "ops": ops}
        steady = {"warmup": warmup, "repeat": len(runs), "wall_times": walls, "counts_agree": bool(agree),
                  "first_step": bool(first_step), "steps": [i + 1 for i in same],
                  "other_steps": [i + 1 for i in others]}
        if ops:  # saved with the report (to_json): a loaded report keeps its spread
            steady["op_spread"] = ops
        if step_numbers is not None:
            steady["step_numbers"] = names
        if chosen is not None:
            steady["step_time"] = chosen
        steady.update(extra or {})
        if first_step and len(runs) >= 2:
            first, last = runs[0].by_op(), runs[-1].by_op()
            more = {n: row["calls"] - last.get(n, {"calls": 0})["calls"] for n, row in first.items()}
            steady["first_step_ops"] = {n: c for n, c in more.items() if c > 0}
        meta = dict(b.meta, steady=steady)
        out = cls(records, b._ops, b.module_sets, time, meta, ceilings=ceilings, overhead=b.overhead,
                  signatures=b.signatures, accesses=b.accesses)
        out.repeats, out.spread = runs, spread
        return out

    def _loaded(self) -> None:
        """A SteadyReport read back by :func:`roofline.load`: ``spread`` rebuilt from ``meta["steady"]`` (the wall
        times of the aggregated steps, and ``op_spread``, each op's), and a profiler cycle's ``steps`` and ``cycle``;
        the per-step reports are not saved (each is a whole report), so ``repeats`` is empty."""
        s = self.meta.get("steady") or {}
        if "cycle" in s and "step_numbers" in s:
            self.steps, self.cycle = list(s["step_numbers"]), s["cycle"]
        walls, steps = list(s.get("wall_times") or []), list(s.get("steps") or [])
        values = [walls[i - 1] for i in steps if 0 < i <= len(walls)] if steps else walls
        finite = [w for w in values if w is not None]
        self.repeats = []
        self.spread = {"wall_time": {"min": min(finite) if finite else None, "median": _median(finite),
                                     "max": max(finite) if finite else None, "values": values},
                       "ops": {n: dict(v) for n, v in (s.get("op_spread") or {}).items()}}

    def steady_line(self) -> str:
        """One line saying what the report is: how many steps were warmed up and measured, and the spread."""
        s = self.meta.get("steady", {})
        n, k = s.get("repeat", 1), s.get("warmup", 0)
        w = self.spread["wall_time"] if hasattr(self, "spread") else {}
        numbers = s.get("step_numbers")  # a profiler cycle's: the loop's step numbers of the measured steps
        if "cycle" in s and numbers:
            line = (f"profiler cycle {s['cycle']}, loop step{'s' if len(numbers) != 1 else ''} "
                    f"{_ranges(numbers)}: {k} warm-up step{'s' if k != 1 else ''} counted and discarded, ")
        else:
            line = f"steady state: {k} warm-up step{'s' if k != 1 else ''} uncounted, "
        used = len(s.get("steps", ())) or n
        if used < n:
            line += f"median of {used} of {n} measured steps"
        else:
            line += f"median of {n} measured step{'s' if n != 1 else ''}" if n > 1 else "1 measured step"
        if w.get("median") is not None and n > 1:
            line += (f" (wall {w['median'] * 1e3:.1f} ms, min {w['min'] * 1e3:.1f}, max {w['max'] * 1e3:.1f})")
        t = s.get("step_time")
        if isinstance(t, dict) and t.get("kind") in STEP_TIMES[1:] and self.wall_time is not None:
            line += f"; step time {self.wall_time * 1e3:.1f} ms: " + _step_time_words(t)
        plain = plain_text(s)
        if plain:
            line += "; without roofline: " + plain
        if s.get("no_warmup"):
            line += f" ({s['no_warmup']})"
        if s.get("first_step"):
            line += ("; the FIRST step is measured (warm-up 0): it includes one-off work such as optimizer state "
                     "creation and lazy initialisation")
            extra = s.get("first_step_ops")
            if extra:
                line += " (first step only: " + ", ".join(f"{n} x{c}" for n, c in sorted(extra.items())) + ")"
        if s.get("other_steps"):
            o = s["other_steps"]
            if numbers and all(0 < i <= len(numbers) for i in o):
                o = [numbers[i - 1] for i in o]
            line += (f"; step{'s' if len(o) != 1 else ''} {', '.join(map(str, o))} ran other ops and "
                     f"{'are' if len(o) != 1 else 'is'} left out")
        elif not s.get("counts_agree", True) and not s.get("first_step"):
            line += "; the repeats did not count the same ops"
        if s.get("partial"):
            line += (f"; PARTIAL cycle: {n} of its {s.get('active', n)} active steps ran before the profiler "
                     "stopped")
        return line

    def summary(self, top: int = 10) -> str:
        """:meth:`steady_line`, then the report's summary (:meth:`roofline.Report.summary`)."""
        return self.steady_line() + "\n" + super().summary(top)
