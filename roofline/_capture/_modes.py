"""The dispatch modes of a measure block: ``_Mode`` (its ``__torch_dispatch__`` is the path for ops the C dispatch
table does not hold yet: first calls, decomposed ops, Python formulas, higher-order operators) and ``_TimedMode``
(every op timed too), with what the C path needs to run an op and to re-enter the mode."""

from __future__ import annotations

import threading
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from roofline._capture import _collectives
from roofline._capture._optable import _DECOMPOSE, _runner
from roofline._hardware._contention import run_delay_ns

_now = time.perf_counter


class _Mode(TorchDispatchMode):
    """Records one row per op call. A session binds ``Session.dispatch`` (C) as the instance's __torch_dispatch__:
    per call it finds the op in a table keyed by the OpOverload, runs it, and calls the recorder, with no Python
    frame. The method below is the path for ops not in that table (first calls, decomposed ops, Python formulas,
    higher-order operators)."""

    # what roofline._capture._collectives's guard recognises as roofline's own mode on torch's stack (it cannot import
    # this module: this module imports it)
    roofline_mode = True

    # Higher-order operators (torch.cond, map, ...) reach the mode: they are listed in unknown_ops and run as usual,
    # the ops inside them uncounted.
    supports_higher_order_operators = True

    def __init__(self, session):
        super().__init__()
        self.s = session

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        s = self.s
        if types and _collectives.defer(types):  # DTensor: counted at its local shards
            return NotImplemented
        if _collectives.suppressed():  # DTensor's sharding propagation on fake tensors
            return func(*args, **(kwargs or {}))
        idx = s.op_index.get(func)
        if idx is None:
            idx = s.resolve(func, args)
        if idx.__class__ is int:
            s.dispatch.set_op(func, idx, _runner(func))  # later calls take the C path
            out = func(*args, **kwargs) if kwargs else func(*args)
            mid, phase, note = s._where()
            s.recorder.record(idx, mid, phase, args, kwargs, out)
            s._noted(note)
            return out
        if idx is _DECOMPOSE:
            s.dispatch.set_decomposed(func, func.decompose)  # later calls decompose in C, as slow_path does
        return s.slow_path(self, idx, func, types, args, kwargs or {})


def _reentry(mode) -> dict:
    """How the C path re-enters ``mode`` around a decomposition: torch's own stack calls (``push``, ``pop``), which are
    what ``TorchDispatchMode.__enter__`` and ``__exit__`` do for a mode without a dispatch key, minus their Python
    frames (~3 us per decomposed call). Their flag bookkeeping is skipped: inside the mode's ``__torch_dispatch__``
    the flags already say a mode is active (set when the block entered it). Where the mode's class overrides either
    method, has a dispatch key, or torch lacks the calls, ``{}``: the C path then calls ``__enter__``/``__exit__``.
    tests/test_tracking.py pins that the stack calls leave the stack as the methods do."""
    push = getattr(torch._C, "_push_on_torch_dispatch_stack", None)
    pop = getattr(torch._C, "_pop_torch_dispatch_stack", None)
    cls = type(mode)
    if (push is None or pop is None or cls.__enter__ is not TorchDispatchMode.__enter__
            or cls.__exit__ is not TorchDispatchMode.__exit__
            or getattr(mode, "_dispatch_key", None) is not None or getattr(mode, "_mode_key", None) is not None):
        return {}
    return {"push": push, "pop": pop}




class _TimedMode(_Mode):
    """_Mode that also times every op: CPU monotonic clock around the op; for ops on CUDA tensors, a CUDA event pair
    on the current stream, resolved once at exit (no synchronisation per op)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        s = self.s
        if types and _collectives.defer(types):
            return NotImplemented
        if _collectives.suppressed():
            return func(*args, **(kwargs or {}))
        idx = s.op_index.get(func)
        if idx is None:
            idx = s.resolve(func, args)
        if idx.__class__ is not int:
            return s.slow_path(self, idx, func, types, args, kwargs or {})
        cuda = s.cuda_possible and _on_cuda(args, kwargs)
        if cuda:
            if s._base_event is None:  # the block's first op on CUDA, CUDA unused when it began
                s.cuda_base()
            e0 = torch.cuda.Event(enable_timing=True)
            e1 = torch.cuda.Event(enable_timing=True)
            e0.record()
            out = func(*args, **kwargs) if kwargs else func(*args)
            e1.record()
            s.events.append((len(s.recorder), e0, e1))
            t0 = t1 = float("nan")
        elif s.op_waits is None:
            t0 = _now()
            out = func(*args, **kwargs) if kwargs else func(*args)
            t1 = _now()
        elif threading.get_ident() == s.thread:
            # step_time="ops_min": the thread's waits for a CPU read just before and after the op, each read between
            # two clock reads (the op's own times stay those of the op alone)
            a0 = _now()
            w0 = run_delay_ns()
            t0 = _now()
            out = func(*args, **kwargs) if kwargs else func(*args)
            t1 = _now()
            w1 = run_delay_ns()
            s.op_waits.append((len(s.recorder), w0, w1, t0 - a0, _now() - t1))
        else:  # another thread's op: its waits are not the block's thread's
            t0 = _now()
            out = func(*args, **kwargs) if kwargs else func(*args)
            t1 = _now()
        mid, phase, note = s._where()
        s.recorder.record(idx, mid, phase, args, kwargs, out, t0 - s.t_base, t1 - s.t_base)
        s._noted(note)
        return out


def _on_cuda(args, kwargs=None):
    if kwargs:
        dev = kwargs.get("device")
        if dev is not None:  # factory ops (arange, full, randn) have only a device argument
            return torch.device(dev).type == "cuda"
    for a in args:
        if isinstance(a, torch.Tensor):
            return a.is_cuda
        if isinstance(a, (list, tuple)) and a and isinstance(a[0], torch.Tensor):
            return a[0].is_cuda
    return False


_DECOMPOSE, _DECLINED = "decompose", "decline"
