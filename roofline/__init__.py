"""roofline: FLOPs and bytes of every PyTorch op, the machine's ceilings, and where each op sits on the roofline.

``import roofline`` needs only NumPy; torch is imported when a torch feature is used.
"""

from __future__ import annotations

from roofline import _core  # noqa: F401  (the C extension; fails early if the build is broken)
from roofline._ceilings import CeilingNotAvailable, Ceiling, Ceilings, ceilings
from roofline._spec import Cost, TensorSpec, cost
from roofline.report import Report
from roofline._steady import SteadyReport, profile

__version__ = "0.1.0"

from roofline import devices  # noqa: E402  (datasheet table, standard library only)
__all__ = ["measure", "profile", "SteadyReport", "gather", "cost", "Cost", "TensorSpec", "Report", "register", "unregister",
           "load", "ceilings", "Ceilings", "Ceiling", "CeilingNotAvailable", "devices", "__version__"]


def measure(model=None, *, timing="model", ceilings="measured", attention=None):
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
    docs/concepts.md and :mod:`roofline._sdpa`).

    For the steady state of a step (warm-up steps uncounted, the median of several), see :func:`profile`.

    ``model`` (optional): a ``torch.nn.Module``, whose modules are then named from its root, e.g.
    ``"ResNet.layer1.0.conv1"`` (the naming ``FlopCounterMode`` uses); modules are attributed without it too.
    Works on CPU and CUDA tensors, on the meta device and under ``FakeTensorMode``, under ``no_grad``,
    ``inference_mode`` and autocast. An exception in the block propagates unchanged and leaves no dispatch mode or
    hook behind.

    The arguments are checked when ``measure`` is called (TypeError or ValueError; KeyError, listing close
    matches, for an unknown device name). The object it returns is a context manager for one ``with`` block:
    entering it again raises RuntimeError (call ``measure`` again for another block).

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
    if isinstance(ceilings, str):
        if ceilings not in ("measured", "datasheet"):
            devices.get(ceilings)  # a device name: fail now (KeyError listing close matches), not after the run
    elif not isinstance(ceilings, Ceilings):
        raise TypeError(f"measure: ceilings must be 'measured', 'datasheet', a device name or a Ceilings, "
                        f"got {type(ceilings).__name__}")
    from roofline import _sdpa

    _sdpa.check(attention)
    from roofline import _torch  # needs torch

    if model is not None and not isinstance(model, _torch.torch.nn.Module):
        hint = " (a model's name is not enough: pass the model object)" if isinstance(model, str) else ""
        raise TypeError(f"measure: model must be a torch.nn.Module or None, got {type(model).__name__}{hint}")
    return _Measure(model, timing, ceilings, attention)


class _Measure:
    """The context manager :func:`measure` returns: one block, one report."""

    __slots__ = ("_model", "_timing", "_ceilings", "_attention", "_mode", "_session", "_report", "_used")

    def __init__(self, model, timing, ceilings, attention=None):
        self._model, self._timing, self._ceilings = model, timing, ceilings
        self._attention, self._mode = attention, None
        self._session = self._report = None
        self._used = False

    def __enter__(self) -> Report:
        from roofline import _torch

        if self._used:
            raise RuntimeError("this roofline.measure(...) object has already been entered; it is single-use: "
                               "call roofline.measure(...) again for another block")
        self._used = True
        session = _torch.Session(self._model, timing=self._timing)
        if self._attention is not None:
            from roofline import _sdpa

            self._mode = _sdpa.mode(self._attention)
            self._mode.__enter__()
        report = Report._pending_block()  # before the clock starts: its load reading is not in the wall time
        try:
            session.enter()  # on failure it releases whatever it had installed
        except BaseException:
            self._pop_mode()
            raise
        self._session, self._report = session, report
        return self._report

    def __exit__(self, exc_type, exc, tb):
        session, report, self._session = self._session, self._report, None
        try:
            session.exit(exc_type, exc, tb)
        finally:
            mode = self._pop_mode()
        if exc_type is not None:
            return False  # propagate unchanged
        import numpy as np

        from roofline import _torch
        from roofline._records import RECORD_DTYPE

        timing, ceilings = self._timing, self._ceilings
        meta = {"timing": timing, "devices": sorted(session.devices), "version": __version__,
                "ceilings_source": (ceilings if ceilings in ("measured", "datasheet") else
                                    "datasheet" if isinstance(ceilings, str) else "best")}
        meta.update(_torch._collectives.meta(session))  # rank, world size, backend; collectives' network bytes
        if mode is not None:
            meta["attention"] = {"backend": mode.backend, "calls": dict(mode.calls)}
        if session.compiled_summary:  # torch.compile'd code ran in the block (roofline._compiled)
            meta["compiled"] = session.compiled_summary
        report._complete(np.frombuffer(session.recorder.records_bytes(), dtype=RECORD_DTYPE).copy(), session.ops,
                         session.module_sets, wall_time=session.wall_time, meta=meta, ceilings=ceilings,
                         overhead=_torch.instrumentation_overhead(timing) if timing is not None else None,
                         **dict(zip(("signatures", "accesses"), session.captured())))
        if mode is not None:
            from roofline import _sdpa

            _sdpa.warn_if_unredirected(meta["attention"], report.op_names)
        return False


    def _pop_mode(self):
        mode, self._mode = self._mode, None
        if mode is not None:
            mode.__exit__(None, None, None)
        return mode


def load(path) -> Report:
    """Read a report written by :meth:`Report.to_json` (a path, or the JSON text itself).

    The document is checked against its schema version before anything is built (see :meth:`Report.from_dict`):
    malformed JSON, nesting deeper than a report's, or any field of the wrong type or out of range raises
    ValueError naming it."""
    import os

    from roofline import _safejson

    if isinstance(path, os.PathLike) or (isinstance(path, str) and not path.lstrip().startswith(("{", "["))):
        with open(path, "rb") as f:
            text = f.read()
    elif isinstance(path, (str, bytes, bytearray)):
        text = path
    else:
        raise TypeError(f"load: expected a path or the JSON text of a report, got {type(path).__name__}")
    return Report.from_dict(_safejson.loads(text, "not a roofline report"))


def register(op, formula=None, *, kind=None, flops=0, special=0):
    from roofline import _resolve

    return _resolve.register(op, formula, kind=kind, flops=flops, special=special)


def gather(report, dst=0, timeout=120.0, group=None):
    """Every rank's report on rank ``dst``: see :func:`roofline.distributed.gather`."""
    from roofline import distributed

    return distributed.gather(report, dst=dst, timeout=timeout, group=group)


def unregister(op):
    """Remove a formula added with :func:`register` (``op`` as given there); KeyError if there is none."""
    from roofline import _resolve

    return _resolve.unregister(op)


register.__doc__ = """Add a cost formula for an op that has none (your custom ops), or override a built-in one.

``op``: an ``OpOverloadPacket`` / ``OpOverload`` (``torch.ops.mylib.op``) or a name (``"mylib::op"``,
``"mylib::op.overload"``; a bare name such as ``"gelu"`` means ``"aten::gelu"``). Pass exactly one of:

* ``formula``: a callable ``formula(*args, out=..., **kwargs)`` called once per op call, in Python, with the op's
  arguments and its result, returning a :class:`roofline.Cost` or a dict with any of ``matrix_flops``,
  ``vector_flops``, ``special_ops``, ``bytes_read``, ``bytes_written`` (missing keys count 0; negative counts and
  unknown keys raise);
* ``kind``: the name of a built-in formula evaluated in C (``"ewise"`` with ``flops`` / ``special`` per element of
  the result, ``"ewise_in"`` per element of the first tensor argument, ``"foreach"`` per element of the first
  tensor list, ``"zero"``, ``"copy"``, ``"mm"``, ``"bmm"``, ...; see ``roofline._registry.KINDS``.
  The attention, pooling and NLL kinds need argument positions this form cannot give).

Every argument is checked at the call, and an error names the op: ``flops`` and ``special`` must be ints (a
float such as 2.7 is refused, not truncated) from 0 to 2**63 - 1, and only the per-element kinds (``"fill"``,
``"ewise"``, ``"ewise_in"``, ``"foreach"``) take them. A formula's counts must be ints from 0 to 2**64 - 1
(TypeError, ValueError or OverflowError inside the block otherwise). Registering an op twice raises ValueError:
call :func:`unregister` first to replace a formula. Register before
entering ``measure``: a block resolves an op's formula the first time it meets the op. A ``kind`` formula needs no
torch (``roofline.cost`` evaluates it too); a ``formula`` callable needs torch (ImportError without it). Returns None.

``roofline.register(torch.ops.mylib.op, lambda x, out=None: {"vector_flops": x.numel()})`` or
``roofline.register("mylib::op", kind="ewise", flops=2)``."""
