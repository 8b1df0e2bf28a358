"""``roofline.measure``: one block, one report. The block's entry and exit are C (``roofline._core.Block``) around
the steps below; the torch side (``roofline._capture._session``) is imported when a block is made, so that
``import roofline`` needs no torch."""

from __future__ import annotations

import os

import numpy as np

from roofline import _core
from roofline._hardware import _devices as devices
from roofline._analysis import _padding, _parameters
from roofline._datamodel import _tokens
from roofline._capture import _sdpa
from roofline._hardware._ceilings_model import YARDSTICKS, Ceilings
from roofline._hardware import _choose
from roofline._counting import _resolve
from roofline._datamodel._records import RECORD_DTYPE
from roofline.report import Report
from roofline._util._version import VERSION
from roofline._util import _warn


def measure(model=None, *, timing="model", ceilings="measured", attention=None, tokens=None, formulas=None):
    """Count every aten op that runs inside the block: FLOPs (matrix and vector) and compulsory bytes, per op call,
    with the module that ran it and the phase (forward, backward, optimizer).

    ``timing``: ``"model"`` (default) times the whole block, the device synchronised at entry and exit;
    ``"op"`` also times every op (CPU monotonic clock; on CUDA an event pair per op, resolved once at exit);
    ``None`` times nothing. ``ceilings``: what ops are judged against: ``"measured"`` (this machine's
    microbenchmarks, cached), ``"datasheet"``, a device name from :mod:`roofline.devices` (``"H100 SXM"``), or a
    :class:`roofline.Ceilings`. Ceilings are resolved on first use of the report.

    ``attention``: which kernel ``torch.nn.functional.scaled_dot_product_attention`` is counted as where no kernel
    runs (on the meta device or fake tensors): ``"flash"``, ``"efficient"`` or ``"math"``; None (default) counts
    what runs, which on meta is the math path (the full ``S x S`` scores, causal mask applied afterwards). Calls on
    real tensors are never redirected. The report records the choice in ``meta["attention"]`` (see
    docs/concepts.md and :mod:`roofline._capture._sdpa`).

    ``tokens``: which token positions of the step's batch are real, for the useful-work figures (FLOPs spent on
    padding, real tokens per second: :meth:`roofline.Report.useful_work`): an attention mask ``(B, S)`` (1 on real
    tokens), ``{"lengths": [...], "seq_len": S}``, or ``{"cu_seqlens": [...]}`` for a packed batch. Without it,
    the ``attention_mask`` (or ``cu_seq_lens_q``) keyword argument of the model's first call in the block is used,
    where the block can see it without touching compiled code (``model`` given, and not a module that compiled code
    may run inside; see docs/concepts.md); its values are read outside the block's count (a mask on a device once the
    block is left), and a meta or fake mask gives no layout (``meta["tokens_unknown"]`` says why). A layout whose
    token dims no call of the block has (a mask of another batch) is flagged (``meta["tokens"]["matched"]`` false)
    and a RuntimeWarning says so: its token figures are not the step's. A meta or fake ``tokens`` tensor, or counts
    out of range, are a ValueError naming ``tokens``.

    ``formulas``: cost formulas for this block only, ``{op: formula}`` (like ``FlopCounterMode``'s
    ``custom_mapping``): ``op`` as :func:`roofline.register` takes it (``torch.ops.mylib.op``, an overload such as
    ``torch.ops.aten.mm.default``, or a name ``"mylib::op"``), ``formula`` a callable as ``register``'s
    ``formula=`` (``formula(*args, out=..., **kwargs)`` returning a :class:`roofline.Cost` or a dict of counts). Inside
    the block they take precedence over formulas registered with :func:`roofline.register` and over the built-in ones
    (an overload's before its whole op's); other blocks, before and after, are not affected. A key that is no op or
    a value that is not callable is a TypeError here, a malformed name a ValueError.

    For the steady state of a step (warm-up steps uncounted, the median of several), see :func:`roofline.steady`.

    ``model`` (optional): a ``torch.nn.Module``, whose modules are then named from its root, e.g.
    ``"ResNet.layer1.0.conv1"`` (the naming ``FlopCounterMode`` uses), also when the step calls submodules without
    the root's forward (FlopCounterMode then names them from their own class: docs/concepts.md, "Module names");
    modules are attributed without it too.
    Works on CPU and CUDA tensors, on the meta device and under ``FakeTensorMode``, under ``no_grad``,
    ``inference_mode`` and autocast. An exception in the block propagates unchanged and leaves no dispatch mode or
    hook behind. So does an interrupt (Ctrl-C's KeyboardInterrupt, or what a signal handler raises) landing while the
    block is entered or left: whatever was installed is taken out before it propagates.

    A block counts the ops of the thread it was entered on while it is open (in asyncio, those of other tasks that
    run while this one awaits inside it, too); blocks in several threads at once count separately, each with its own
    ``attention`` choice. Blocks nest (an outer block counts an inner one's ops, not its bookkeeping), and on one
    thread they must be left in the reverse order they were entered: entering a block while a block of another
    asyncio task (or ``contextvars`` context) is open on the thread raises RuntimeError, and leaving a block while
    one entered after it is still open (two generators, each holding a block across a ``yield``) raises RuntimeError
    there and at that other block's exit; neither gives a report, and both leave torch as it was. A block entered in
    the middle of another block's entry or exit on its thread (by a signal handler, or a finaliser, that ran there)
    is refused without disturbing that block: it counts nothing, its report is empty and marked incomplete, and a
    RuntimeWarning says so. A signal handler's block nests in a block that is open.

    The arguments are checked when ``measure`` is called (TypeError or ValueError; KeyError, listing close
    matches, for an unknown device name). The object it returns is a context manager for one ``with`` block:
    entering it again raises RuntimeError (call ``measure`` again for another block), and so does ``__exit__`` of a
    block that is not open.

    Yields a :class:`roofline.Report`, which is empty inside the block and filled when the block exits: read it
    after the ``with`` statement. Needs torch (imported on first use).

    >>> with roofline.measure(model) as r:          # doctest: +SKIP
    ...     model(x).sum().backward()
    >>> print(r)                                      # doctest: +SKIP
    """
    if timing is not None and not isinstance(timing, str):
        raise TypeError(f"measure: timing must be 'model', 'op' or None, got {type(timing).__name__}")
    if timing not in ("model", "op", None):
        raise ValueError(f"measure: timing must be 'model', 'op' or None, got {timing!r}")
    try:  # 'measured', 'datasheet', 'theoretical', saved ceilings, a device name or a Ceilings: fail now, not after
        _choose.check_spec(ceilings)
    except TypeError as e:
        raise TypeError(f"measure: {e}") from None
    _sdpa.check(attention)
    layout = _tokens.token_layout(tokens) if tokens is not None else None
    scoped = _resolve.scoped_formulas(formulas)
    from roofline._capture import _session  # needs torch

    if model is not None and not isinstance(model, _session.torch.nn.Module):
        hint = " (a model's name is not enough: pass the model object)" if isinstance(model, str) else ""
        raise TypeError(f"measure: model must be a torch.nn.Module or None, got {type(model).__name__}{hint}")
    return Measure(model, timing, ceilings, attention, layout, scoped)


_REFUSED = ("roofline.measure: this block was entered while another measure block on this thread was being "
            "entered or left (by a signal handler, a finaliser or a callback that ran in the middle of that block's "
            "entry or exit), where blocks cannot nest: nothing in it was counted (its report is empty and "
            "incomplete); the other block is not affected. A block nests in a signal handler that runs while "
            "another block is open, not while it is being entered or left")


class Measure(_core.Block):
    """The context manager :func:`roofline.measure` returns: one block, one report (``with roofline.measure(model)
    as r:``: ``r``, a :class:`roofline.Report`, is filled in when the block is left). Single use.

    Its ``__enter__`` and ``__exit__`` are :class:`roofline._core.Block`'s, in C: they call the steps below, so that
    an interrupt (Ctrl-C, a signal handler's exception) landing anywhere in entering or leaving the block leaves no
    dispatch mode, hook or global behind: whatever ``_enter`` installed is undone by ``_abort``, and ``_unwind``
    runs to completion (repeated if interrupted) before the interrupt propagates."""

    __slots__ = ("_model", "_timing", "_ceilings", "_attention", "_mode", "_session", "_report", "_tokens",
                 "_formulas")

    def __init__(self, model, timing, ceilings, attention=None, tokens=None, formulas=None):
        self._model, self._timing, self._ceilings, self._tokens = model, timing, ceilings, tokens
        self._formulas = formulas or {}
        self._attention, self._mode = attention, None
        self._session = self._report = None

    def _misuse(self, what):
        if what == "__enter__":
            raise RuntimeError("this roofline.measure(...) object has already been entered; it is single-use: "
                               "call roofline.measure(...) again for another block")
        raise RuntimeError("roofline.measure(...).__exit__ called on a block that is not open: it was never "
                           "entered, its entry failed, or it has already exited (use it in a with statement)")

    def _refused(self):  # entered in the middle of another block's entry or exit on this thread: nothing installed
        self._report = Report._pending_block()
        return self._report

    def _finish_refused(self, exc_type, exc, tb):
        report, self._report = self._report, None
        report._complete(np.zeros(0, dtype=RECORD_DTYPE), [], [], wall_time=None,
                         meta={"timing": None, "version": VERSION, "incomplete": [_REFUSED]}, ceilings=self._ceilings,
                         overhead=None)
        _warn.warn(_REFUSED, RuntimeWarning)
        return False

    def _prepare(self):  # nothing global yet: the session, the pending report, the device synchronised
        from roofline._capture import _session  # needs torch

        self._session = _session.Session(self._model, timing=self._timing, tokens=self._tokens, formulas=self._formulas)
        if self._attention is not None:
            self._mode = _sdpa.mode(self._attention)
        self._report = Report._pending_block()  # before the clock starts: its load reading is not in the wall time
        self._session.prepare()

    def _enter(self):  # under the block lock; on an exception, _abort undoes what was done
        if self._mode is not None:
            self._mode.__enter__()
        self._session.enter()
        return self._report

    def _abort(self):  # idempotent
        self._release()

    def _closing(self, exc_type, exc, tb):
        self._session.closing(exc_type, exc)

    def _unwind(self):  # idempotent
        self._release()

    def _release(self):
        session, mode = self._session, self._mode
        try:
            session.release()
        finally:
            if mode is not None:
                mode.__exit__(None, None, None)

    def _finish(self, exc_type, exc, tb):
        session, report, mode = self._session, self._report, self._mode
        self._session = self._mode = None
        if session.interleaved is not None:
            raise RuntimeError(session.interleaved)
        if exc_type is not None:
            return False  # propagate unchanged
        from roofline._capture import _session  # needs torch

        session.finish()
        timing, ceilings = self._timing, self._ceilings
        meta = {"timing": timing, "devices": sorted(session.devices), "version": VERSION,
                "ceilings_source": (ceilings if ceilings in YARDSTICKS else
                                    "measured" if isinstance(ceilings, str) and os.path.isfile(ceilings) else
                                    "datasheet" if isinstance(ceilings, str) else "best")}
        meta.update(_session._collectives.meta(session))  # rank, world size, backend; collectives' network bytes
        if mode is not None:
            meta["attention"] = {"backend": mode.backend, "calls": dict(mode.calls)}
        if session.compiled_summary:  # torch.compile'd code ran in the block (roofline._compiled._view)
            meta["compiled"] = session.compiled_summary
            incomplete = session.compiled_summary.pop("incomplete", None)  # why graph calls went uncounted
            if incomplete:
                meta["incomplete"] = incomplete
        meta["attribution"] = _session.attribution_meta(session)
        if session.tokens is not None:
            meta["tokens"] = dict(session.tokens)
        elif session.tokens_unknown is not None:
            meta["tokens_unknown"] = session.tokens_unknown
        if session.model is not None:
            meta["parameters"] = _parameters.count(session.model)
        records = np.frombuffer(session.recorder.records_bytes(), dtype=RECORD_DTYPE).copy()
        if session.fix_records is not None:  # compiled graphs' decomposed and recomputed ops (roofline._compiled)
            records = session.fix_records(records)
        report._complete(records, session.ops,
                         session.module_sets, wall_time=session.wall_time, meta=meta, ceilings=ceilings,
                         overhead=_session.instrumentation_overhead(timing) if timing is not None else None,
                         **dict(zip(("signatures", "accesses"), session.captured())))
        if session.fix_records is None:  # (records rewritten from compiled graphs: no longer one per op run)
            report.op_waits = session.op_waits_array(len(records))
        step = session.step_load()
        if step is not None and isinstance(report.meta.get("load"), dict):
            report.meta["load"]["step"] = step  # the timed window's own waits (the block's load spans more)
        if mode is not None:
            _sdpa.warn_if_unredirected(meta["attention"], report.op_names)
        if session.tokens is not None and len(report.records):
            # a layout whose token dims no call has does not describe this step: flagged, and said once, here
            layout = report.meta["tokens"]
            if not _padding.layout_matches(report.records, report.op_names, report.signatures, layout):
                layout["matched"] = False
                _warn.warn(_padding.unmatched_message(layout), RuntimeWarning)
        return False
