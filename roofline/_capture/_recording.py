"""How a measure block records what the C path does not: ops on the Python path (a formula computed in Python, a
higher-order operator, a decomposition, a collective), the module set and phase each record is credited to, and
what the block keeps at exit (the signatures and dataflow rows). ``Session`` (roofline/_capture/_session.py) is a
``Recording``."""

from __future__ import annotations

import time

import torch

from roofline._capture import _collectives
from roofline._capture._dtypes import TORCH_DTYPES
from roofline._capture._optable import _DECLINED, _DECOMPOSE
from roofline._datamodel._records import BACKWARD, FORWARD, accesses_from_raw

_graph_task_id = torch._C._current_graph_task_id
_now = time.perf_counter


class Recording:
    """The Python-path recording of a block (a mixin of ``Session``)."""

    def slow_path(self, mode, marker, func, types, args, kwargs):
        if marker is _DECLINED:
            return NotImplemented
        if marker[0] == "hop":  # counted as a call without a formula; its body runs below this mode, uncounted
            mid, phase, note = self._where()
            self.recorder.append(marker[1], mid, phase, 0, 0, 0, 0, 0, 0, 0)
            self._noted(note)
            return func(*args, **kwargs)
        if marker is _DECOMPOSE:
            with mode:
                r = func.decompose(*args, **kwargs)
            if r is not NotImplemented:
                return r
            # no decomposition after all: count it as an op of its own from now on
            self.resolve(func, args, allow_decompose=False)
            return mode.__torch_dispatch__(func, types, args, kwargs)
        if marker[0] == "collective":
            return _collectives.call(self, marker, func, args, kwargs, _now, self.t_base)
        # ("formula", op index, Formula): counted by a formula computed in Python
        t0 = _now()
        out = func(*args, **kwargs)
        t1 = _now()
        mid, phase, note = self._where()
        self.record_formula(marker, mid, phase, args, kwargs, out)
        self._noted(note)
        if self.timing == "op":  # CPU clock; CUDA ops with a Python formula are timed on the host
            self.recorder.set_times(len(self.recorder) - 1, t0 - self.t_base, t1 - self.t_base)
        return out

    def record_formula(self, marker, module_id, phase, args, kwargs, out):
        """One record of an op counted by a formula computed in Python (the marker :meth:`resolve` returned:
        ``("formula", op index, _resolve.Formula)``), in the module set ``module_id``: an eager call, or an op of a
        compiled graph with its fake values. A built-in formula that declines the call leaves it to the op's C
        formula."""
        _, idx, formula = marker
        vals = formula.counts(self.ops[idx].name, args, kwargs or {}, out)
        if vals is None:
            self.recorder.record(idx, module_id, phase, args, kwargs or None, out)
            return
        t = next((a for a in args if isinstance(a, torch.Tensor)), out if isinstance(out, torch.Tensor) else None)
        dt = TORCH_DTYPES.get(t.dtype, 0) if t is not None else 0
        self.recorder.append(idx, module_id, phase, dt, *vals)
        if self.capture:
            self.recorder.attach(args, kwargs or {}, out)

    # ---- modules and phases -------------------------------------------------------------------------------------
    def captured(self):
        """``(signatures, accesses)`` of the block: the signature table (a callable giving the texts, formatted
        when the report first reads them) and the dataflow rows (ACCESS_DTYPE); an empty table and no rows when
        capture is off. Called once, at exit: it frees the recorder's records."""
        rec = self.recorder
        accesses = accesses_from_raw(rec.accesses_bytes())
        if not self.capture:
            return [], accesses
        rec.clear(release=True)  # the records and rows are copied out; the signature table is what is kept
        # the signatures' texts are made when the report's `signatures` is first read, not inside the block
        return _SignatureTexts(rec), accesses

    @property
    def module_sets(self) -> list[tuple[str, ...]]:
        """One sorted tuple of module names per module id (``records["module"]``)."""
        return self.tracker.sets

    @property
    def phase(self):
        return self.dispatch.phase

    @phase.setter
    def phase(self, value):
        self.dispatch.phase = value

    def _phase(self):
        return self.phase if self.phase is not None else (BACKWARD if _graph_task_id() != -1 else FORWARD)

    def _where(self):
        """``(module id, phase, note)`` of an op recorded now: in the optimizer step the tracker's set; otherwise
        as the C path decides (``ModuleTracker.attribute``: a backward op is credited to the module whose forward
        created its autograd node; a forward op run again inside a backward is in the recompute phase). ``note`` is
        for :meth:`_noted` once the row is recorded."""
        if self.phase is not None:
            return self.tracker.module_id, self.phase, None
        mid, phase, fcm, unlinked = self.tracker.c.attribute()
        return mid, phase, (fcm, unlinked) if fcm is not None or unlinked else None

    def _noted(self, note):
        if note is not None:
            self.tracker.c.note(len(self.recorder) - 1, *note)

    def attribution(self) -> tuple[list, list]:
        """After the block: ``(fcm, unlinked)``: ``fcm`` the ``[row, module id, ...]`` pairs of rows credited to
        another module set than torch's ModuleTracker gives them (FlopCounterMode's structure), ``unlinked`` the
        rows of backward ops linked to no forward module."""
        return self.tracker.c.fcm_log, self.tracker.c.unlinked_log


class _SignatureTexts:
    """A block's call signatures, formatted on demand: calling it returns the recorder's texts (a list of str)."""

    __slots__ = ("_recorder",)

    def __init__(self, recorder):
        self._recorder = recorder

    def __call__(self) -> list:
        return self._recorder.signatures
