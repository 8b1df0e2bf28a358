"""``roofline.monitor``: the MFU of every step of a training loop for almost nothing. One step is counted inside a
:func:`roofline.measure` block (the op counts of a step); the following steps are only timed at the step boundary,
and each step's figures are the counted work over its own measured time, taken by
:func:`roofline._analysis._rollup.roofline_totals` (the formula of :meth:`roofline.Report.totals`).

What a step runs is assumed unchanged while its *signature* is: the shapes, dtypes and devices of the inputs the loop
passes to ``step(inputs=...)``, the model's parameters (shape, dtype, device, ``requires_grad``) and the train / eval
mode of its modules, and the number of graphs ``torch.compile`` has made. Counts are kept per signature; a periodic
recount (``recount_every``) compares what steps with the same signature ran (the calls of each op, the counts).
"""

from __future__ import annotations

import collections
import collections.abc
import itertools
import math
import sys
import time

from roofline._measure import measure
from roofline._loops._schedule import _check_count, _StepLoop
from roofline._loops._steady import _op_sequence
from roofline._analysis import _rollup
from roofline._datamodel._records import COUNTS
from roofline._util import _warn

_SUMMED = COUNTS
_MAX_DEPTH = 8  # nesting of the inputs read for the signature
_MAX_TOKENS = 2**63 - 1  # a step's tokens (an int64; its tokens/s a finite float)


class _Counts:
    """One counted step: its report, its classification, what it ran (to compare with a later count: the calls of
    each op and the summed counts; not the order of the calls, which independent backward branches may vary)."""

    __slots__ = ("report", "classes", "step", "ops", "totals")

    def __init__(self, report, step: int):
        self.report, self.step = report, step
        self.classes = report.classification()  # the ceilings each record is judged with (resolved once)
        self.ops = tuple(sorted(collections.Counter(_op_sequence(report)).items()))
        self.totals = tuple(getattr(report, k) for k in _SUMMED)

    def same_work(self, other: "_Counts") -> bool:
        return self.ops == other.ops and self.totals == other.totals


class _PerfClock:
    """Host clock: a step's time is the time between two ``step()`` calls (CPU work is synchronous)."""

    @staticmethod
    def mark():
        return time.perf_counter()

    @staticmethod
    def ready(mark) -> bool:
        return True

    @staticmethod
    def wait(mark):
        pass

    @staticmethod
    def seconds(start, end) -> float:
        return end - start


class _EventClock:
    """CUDA clock: an event recorded on the current stream at each step boundary, no synchronisation; a step's time
    is read once its end event has completed (``ready``), or at ``stop()`` (``wait``)."""

    def __init__(self, event_type, device=None):
        self._event, self._device = event_type, device

    def mark(self):
        e = self._event(enable_timing=True)
        e.record()
        return e

    @staticmethod
    def ready(mark) -> bool:
        return mark.query()

    @staticmethod
    def wait(mark):
        mark.synchronize()

    @staticmethod
    def seconds(start, end) -> float:
        return start.elapsed_time(end) / 1e3  # milliseconds


def _clock_for(model):
    """The CUDA event clock when the model's parameters are on a CUDA device (or, without a model, when CUDA is
    initialised), the host clock otherwise."""
    import torch

    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
    if model is not None:
        p = next(iter(model.parameters()), None)
        cuda = p is not None and p.device.type == "cuda"
    return _EventClock(torch.cuda.Event) if cuda else _PerfClock()


class History(collections.abc.Sequence):
    """``Monitor.history``: the latest ``maxlen`` per-step dicts, oldest first, as a read-only list would give
    them: ``len``, iteration, ``h[i]`` and ``h[-1]``, slices (``h[:4]``, a list), ``==`` with a list. Appending
    beyond ``maxlen`` drops the oldest (kept in a bounded deque)."""

    __slots__ = ("_items",)

    def __init__(self, maxlen: int):
        self._items = collections.deque(maxlen=maxlen)

    @property
    def maxlen(self) -> int:
        return self._items.maxlen

    def __len__(self):
        return len(self._items)

    def __iter__(self):
        return iter(self._items)

    def __reversed__(self):
        return reversed(self._items)

    def __getitem__(self, i):
        if isinstance(i, slice):  # a list, as a list's slice
            start, stop, step = i.indices(len(self._items))
            if step == 1:
                return list(itertools.islice(self._items, start, max(start, stop)))
            return list(self._items)[i]
        return self._items[i]  # an int (IndexError beyond the ends, TypeError for anything else, as list's)

    def __eq__(self, other):
        if isinstance(other, History):
            return list(self._items) == list(other._items)
        if isinstance(other, (list, tuple)):
            return list(self._items) == list(other)
        return NotImplemented

    __hash__ = None

    def __repr__(self):
        return f"History({list(self._items)!r}, maxlen={self.maxlen})"

    def _append(self, item):
        self._items.append(item)


def _leaf_signature(x, tensor_type, depth=0):
    """Shapes, dtypes and devices of the tensors in ``x`` (nested tuples, lists and mappings); the values of ints,
    bools, strings and None; the type of anything else (floats included: a learning rate changes no shape). A
    nested tensor gives its layout and the shape of each of its tensors (strided layout, sizes held on the host) or
    their number and total shape (jagged layout: the lengths live with the data, maybe on the device)."""
    if isinstance(x, tensor_type):
        try:
            if x.is_nested:
                return _nested_signature(x)
            return ("T", tuple(x.shape), x.dtype, x.device)
        except Exception as e:  # noqa: BLE001 - a tensor subclass whose shape cannot be read: its type only
            _warn.warn(f"roofline.monitor: the shape of a {type(x).__qualname__} in inputs could not be read "
                       f"({type(e).__name__}: {str(e)[:200]}); only its type is in the step's signature")
            return ("T?", type(x).__qualname__)
    if x is None or isinstance(x, (bool, int, str)):
        return x
    if depth < _MAX_DEPTH:
        if isinstance(x, (tuple, list)):
            return (type(x).__name__, tuple(_leaf_signature(v, tensor_type, depth + 1) for v in x))
        if isinstance(x, collections.abc.Mapping):
            return ("M", tuple((k, _leaf_signature(v, tensor_type, depth + 1)) for k, v in x.items()))
    return type(x).__qualname__


def _nested_signature(x):
    import torch

    if x.layout == torch.strided:  # the sizes of its tensors: a host tensor of shape (n, dim) whatever the device
        sizes = x._nested_tensor_size()
        return ("NT", "strided", tuple(tuple(row) for row in sizes.tolist()), x.dtype, x.device)
    values = getattr(x, "_values", None)  # jagged: its tensors concatenated along the ragged dim (no op dispatched)
    offsets = getattr(x, "_offsets", None)
    return ("NT", str(x.layout), tuple(offsets.shape) if offsets is not None else None,
            tuple(values.shape) if values is not None else None, x.dtype, x.device)


def _compiled_graphs() -> int:
    """Graphs ``torch.compile`` has made in this process (0 before torch._dynamo is imported: not imported here)."""
    utils = sys.modules.get("torch._dynamo.utils")
    return utils.counters["stats"]["unique_graphs"] if utils is not None else 0


class Monitor(_StepLoop):
    """What :func:`roofline.monitor` returns: call :meth:`step` once at the end of each step of the loop, between
    :meth:`start` and :meth:`stop` (or inside a ``with`` block).

    Attributes: ``history`` (the per-step dicts, the latest ``history_size``: a :class:`History`, read as a list,
    slices included), :attr:`last_report` (the report of the latest counted step), :attr:`step_num`,
    :attr:`running`."""

    _who = "monitor"
    _callback_name = "on_step"
    start, stop, step_num, running = _StepLoop.start, _StepLoop.stop, _StepLoop.step_num, _StepLoop.running

    def __init__(self, model, on_step, warmup, recount_every, history_size, max_signatures, measure_kwargs):
        import torch

        self._init_loop()
        self._model, self._on_step, self._kwargs = model, on_step, measure_kwargs
        self._warmup, self._recount_every, self._max_signatures = warmup, recount_every, max_signatures
        self._tensor = torch.Tensor
        self.history = History(history_size)
        self._counts: dict = {}          # signature -> _Counts
        self._seen: dict = {}            # signature seen without counts -> the latest step that ended with it
        self._due: dict = {}             # such a signature -> the step where it is due to come back
        self._last_count = None          # the latest _Counts
        self._queue = collections.deque()  # steps timed, not yet handed to on_step (CUDA: end event pending)
        self._clock = self._start = None
        self._prev_sig = None
        self._modules = []

    @property
    def last_report(self):
        """The :class:`roofline.Report` of the latest counted step (None before the first count)."""
        return self._last_count.report if self._last_count is not None else None

    def _signature(self, inputs):
        out = [_leaf_signature(inputs, self._tensor), _compiled_graphs()]
        add = out.append
        for m in self._modules:  # the model's modules, listed at start() and at each count
            add(m.training)
            for p in m._parameters.values():
                if p is not None:
                    add((p.shape, p.dtype, p.device, p.requires_grad))
        return tuple(out)

    def _on_start(self):
        self._modules = list(self._model.modules()) if self._model is not None else []
        self._clock = _clock_for(self._model)
        self._start = self._clock.mark()
        if self._warmup == 0:
            self._open_block(self._model, **self._kwargs)

    def step(self, inputs=None, token_count=None, *, tokens=None) -> None:
        """End the step in progress (call it once at the end of each step of the loop) and hand its figures to
        ``on_step`` and ``history``.

        ``inputs`` (optional): what defines the step's shapes, e.g. the batch (a tensor, or tuples, lists and
        mappings of them; nested tensors too): its tensors' shapes, dtypes and devices are part of the step's
        signature. ``token_count`` (optional, an int from 0 to 2**63 - 1): how many tokens the step processed, for
        ``tokens_per_s``. (``tokens=`` is its name before 0.5, deprecated: ``tokens`` elsewhere is which positions
        are real, as :func:`roofline.measure` takes it.) RuntimeError outside :meth:`start` / :meth:`stop`, from
        another thread or from inside ``on_step``; ValueError for a bad ``token_count`` (raised before anything is
        done: the step is still in progress)."""
        if tokens is not None:
            _warn.warn("Monitor.step(tokens=n) is deprecated since 0.5 and will be removed in 0.7: use "
                          "token_count=n (tokens is which positions are real, as roofline.measure takes it)",
                          DeprecationWarning)
            if token_count is not None:
                raise TypeError("monitor.step: give token_count only (tokens= is its deprecated name)")
            token_count = tokens
        self._check_running("step")
        if token_count is not None:  # named as the caller named it
            token_count = _check_count("monitor.step", "token_count" if tokens is None else "tokens", token_count, 0,
                                       _MAX_TOKENS)
        tokens = token_count
        clock, n = self._clock, self._step_num
        end = clock.mark()
        report = self._close_block(None, None, None)
        if report is not None and self._model is not None:
            self._modules = list(self._model.modules())
        sig = self._signature(inputs)
        changed = self._prev_sig is not None and sig != self._prev_sig
        self._prev_sig = sig
        fresh = report is not None  # heavy work in this call: the next step's clock starts after it
        if report is not None:  # this step was counted: its own counts and its own (block) time
            new = _Counts(report, n)
            old = self._counts.get(sig)
            if old is not None and not new.same_work(old):
                changed = True
                given = ("" if n - 1 == old.step else
                         f"; step {n - 1} of that signature was given step {old.step}'s counts" if n - 2 == old.step
                         else f"; steps {old.step + 1} to {n - 1} of that signature were given step {old.step}'s "
                              "counts")
                _warn.warn(f"roofline.monitor: step {n} ran other ops than step {old.step}, counted with the same "
                           f"signature (input shapes, parameters, modes, compiled graphs){given}")
            self._remember(sig, new)
            entry = [n, self._start, end, new, True, changed, tokens, report.wall_time]  # clock if untimed
        else:
            entry = [n, self._start, end, self._counts.get(sig), False, changed, tokens, None]
        first_seen = entry[3] is None and self._wanted(sig, n)
        self._queue.append(entry)
        self._step_num = n + 1
        try:
            self._flush(wait=False)  # on_step runs here: outside any measure block of the monitor's
            if self._state == "running" and self._count_next(n + 1, first_seen):  # on_step may have stopped it
                self._open_block(self._model, **self._kwargs)  # that step's time will be its block's wall time
        except BaseException:
            fresh = True  # on_step raised, or the block did not open: the next step starts now
            raise
        finally:
            self._start = clock.mark() if fresh else end

    def _wanted(self, sig, n: int) -> bool:
        """Step ``n`` ended with signature ``sig`` and no counts for it. True the first time ``sig`` is seen so (the
        next step is counted: a change of shapes that lasts). When it was seen before at step ``m`` (shapes that
        come back, e.g. the smaller last batch of each epoch), the next step is likely another signature: the step
        ``n + (n - m)`` is counted instead, where ``sig`` comes back if its period holds."""
        seen = self._seen
        m = seen.pop(sig, None)
        seen[sig] = n
        while len(seen) > self._max_signatures:
            del seen[next(iter(seen))]  # the oldest
        if m is None:
            return True
        self._due[sig] = n + (n - m)
        return False

    def _count_next(self, nxt: int, first_seen: bool) -> bool:
        """Whether step ``nxt`` is counted: not before ``warmup``; the first step after it; the step after a step
        whose signature had no counts and was seen for the first time; a step where a signature seen without
        counts is due to come back (:meth:`_wanted`); and ``recount_every`` steps after the latest count."""
        if nxt < self._warmup or self._skip(nxt):
            return False
        last = self._last_count
        if last is None or first_seen:
            return True
        due = self._due
        if due:
            for sig in [s for s, k in due.items() if k < nxt or s not in self._seen]:
                del due[sig]  # passed (the step was not counted, or came with another signature) or since counted
            if nxt in due.values():
                return True
        return bool(self._recount_every) and nxt - last.step >= self._recount_every

    @staticmethod
    def _skip(nxt: int) -> bool:
        """Steps the monitor must not count (a trainer callback's: those its profiler measures)."""
        return False

    def _remember(self, sig, counts):
        self._seen.pop(sig, None)  # counted: wanted no more
        self._due.pop(sig, None)
        table = self._counts
        table.pop(sig, None)
        table[sig] = counts
        while len(table) > self._max_signatures:
            del table[next(iter(table))]  # the oldest
        self._last_count = counts

    def _flush(self, wait: bool):
        """Hand the timed steps whose time is known to ``on_step`` and ``history``, in order."""
        clock, queue = self._clock, self._queue
        while queue:
            n, start, end, counts, recounted, changed, tokens, seconds = queue[0]
            if seconds is None:
                if not clock.ready(end):
                    if not wait:
                        return
                    clock.wait(end)
                seconds = clock.seconds(start, end)
            queue.popleft()
            metrics = self._metrics(n, seconds, counts, recounted, changed, tokens)
            self.history._append(metrics)
            if self._on_step is not None:
                self._call_back(self._on_step, metrics)

    @staticmethod
    def _metrics(n, seconds, counts, recounted, changed, tokens) -> dict:
        out = {"step": n, "time_s": seconds, "flops": None, "bytes": None, "mfu": None, "hfu": None, "mbu": None,
               "achieved_flops": None, "achieved_bytes": None, "recounted": recounted,
               "counts_from": None, "changed": changed, "token_count": tokens, "tokens": tokens,
               "tokens_per_s": tokens / seconds if tokens is not None and seconds and seconds > 0 else None}
        if counts is not None:
            g = _rollup.roofline_totals(counts.report.records, counts.classes, seconds)
            out.update(flops=float(g["flops"]), bytes=float(g["bytes"]), counts_from=counts.step,
                       **{k: float(g.get(k, math.nan)) for k in ("mfu", "hfu", "mbu", "achieved_flops",
                                                                  "achieved_bytes")})
        return out

    def _on_stop(self):
        # the step in progress never ended with step(): its block (if any) was closed and nothing of it is kept;
        # the steps already ended get their figures now (on CUDA: once their end events have completed)
        self._flush(wait=True)

    def _on_abort(self):
        self._queue.clear()


def monitor(model=None, *, on_step=None, ceilings="measured", warmup: int = 1, recount_every: int | None = 500,
            history_size: int = 10000, max_signatures: int = 64, attention: str | None = None,
            formulas=None) -> Monitor:
    """Counted MFU, MBU and achieved FLOP/s and bytes/s of every step of your training loop, for almost nothing:
    call ``mon.step()`` (or ``mon.step(inputs=batch, token_count=n)``) once at the end of each step. A step is counted
    inside a :func:`roofline.measure` block now and then; every step is timed at the step boundary, and its
    figures are the counted work of a step with the same signature over its own measured time, against the
    ceilings' peaks (:meth:`roofline.Report.totals`' formula).

    Per step, ``on_step(metrics)`` gets (and ``mon.history`` keeps) a dict: ``step`` (0-based, as
    :func:`roofline.profile`'s), ``time_s``, ``flops`` and ``bytes`` (the counted work), ``mfu`` (the model's
    FLOPs, each counted once), ``hfu`` (every FLOP executed: above ``mfu`` by activation checkpointing's
    recomputation), ``mbu``, ``achieved_flops``, ``achieved_bytes`` (per second of ``time_s``), ``recounted`` (this step ran inside a
    measure block: its counts are its own and its time includes the counting, so its rates are lower),
    ``counts_from`` (the step whose counts were used), ``changed`` (its signature differs from the previous step's,
    or its recount found other ops than an earlier count of the same signature), ``token_count`` and ``tokens_per_s``
    (None unless ``step(token_count=...)``; ``tokens``, the same count under its name before 0.5, is deprecated
    and goes in 0.7). Where no step with the same signature has been counted, ``flops`` to
    ``achieved_bytes`` and ``counts_from`` are None: never a figure of other work.

    A step's time runs from the previous ``step()`` call (or ``start()``) to its own, so it includes the loop's own
    work (data loading) and the monitor's; after a counted step it starts once the counting's bookkeeping is done.
    On the CPU it is read from ``time.perf_counter``; when the model's parameters are on a CUDA device (without a
    model: when CUDA is initialised at ``start()``), from CUDA events recorded on the current stream at each
    ``step()``, without synchronising: a step's figures are handed over once its end event has completed (usually
    at a later ``step()``), and ``stop()`` waits for the last ones.

    Which steps are counted: step ``warmup`` (default 1: step 0, with its one-off work such as optimizer state
    creation, is timed only and has no figures); the step after a step whose signature had no counts and was new (a
    change of shapes that lasts); when a signature without counts comes back (seen at steps ``m`` and ``n``, e.g.
    the smaller last batch of each epoch), step ``n + (n - m)``, where it comes back if its period holds (the step
    after it, likely of another signature, is not counted); and a step ``recount_every`` steps after the latest
    count (None or 0: never). The signature of a step, read at its
    ``step()`` call, is: the shapes, dtypes and devices of the tensors in ``inputs`` (tuples, lists, mappings,
    8 levels deep) and the values of its ints, bools and strings; with ``model``, each module's train / eval mode
    and each of its parameters' shape, dtype, device and ``requires_grad`` (the modules as listed at ``start()``
    and at each count); and the number of graphs ``torch.compile`` has made in the process (a recompilation).
    Counts are kept for the latest ``max_signatures`` signatures, so shapes that come back (a smaller last batch
    per epoch) are not recounted: over epochs of batches ``[full, full, full, small]``, the first full batch of the
    second epoch is counted (after the first small batch, a new signature), the small batch of the third epoch too,
    and from then on every step has figures and none is counted but the periodic recounts. Not detected from the
    signature: a change of what the step runs with the same signature (another branch taken, another optimizer, autocast switched on inside the step, a data-dependent
    shape inside the model, inputs not passed to ``step()``); the periodic recount compares what the two counted
    steps ran (the calls of each op, and the FLOP and byte counts) and, if they differ, warns which steps were given
    the older counts. Without ``inputs``, the periodic recount is the only safety net for input shapes. A change is
    seen at the end of the step that ran it: that step has no figures (unless its signature was counted before)
    and the next step is counted; shapes that cycle (``A, B, C, A, B, C, ...``) are each counted once, the last
    where its period brings it back (here in the third cycle), and have figures from then on.

    ``ceilings``, ``attention`` and ``formulas`` (the block's own formulas, as ``measure(formulas=...)`` takes them)
    are passed to the measure blocks (``timing="model"``), and checked now with ``model``; ``warmup`` and ``max_signatures`` (ints, >= 0 and >= 1), ``recount_every`` (None or an int >= 0),
    ``history_size`` (int from 1 to ``sys.maxsize``) and ``on_step`` (None or callable) too. ``start`` /
    ``stop`` / ``with`` and their errors are :func:`roofline.profile`'s: ``step()`` outside them raises RuntimeError, and an exception in the
    loop leaves torch as it was (the step being counted is dropped, figures not yet handed over too). ``on_step``
    runs inside ``step()`` (or ``stop()``), outside the monitor's measure blocks: ``mon.stop()`` from it stops the
    monitor there (the figures of steps already ended still go to ``on_step``; no further step is counted), and
    ``mon.step()`` from it is refused with RuntimeError.

    >>> with roofline.monitor(model, on_step=lambda m: print(m["step"], m["mfu"])) as mon:   # doctest: +SKIP
    ...     for batch in loader:
    ...         train_step(batch)
    ...         mon.step(inputs=batch)
    """
    if on_step is not None and not callable(on_step):
        raise TypeError(f"monitor: on_step must be None or a callable taking the step's dict, got "
                        f"{type(on_step).__name__}")
    warmup = _check_count("monitor", "warmup", warmup, 0)
    recount_every = 0 if recount_every is None else _check_count("monitor", "recount_every", recount_every, 0)
    history_size = _check_count("monitor", "history_size", history_size, 1, sys.maxsize)
    max_signatures = _check_count("monitor", "max_signatures", max_signatures, 1)
    kwargs = {"timing": "model", "ceilings": ceilings, "attention": attention, "formulas": formulas}
    measure(model, **kwargs)  # checks the arguments now (and imports torch)
    return Monitor(model, on_step, warmup, recount_every, history_size, max_signatures, kwargs)

