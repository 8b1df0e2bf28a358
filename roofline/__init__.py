"""roofline: FLOPs and bytes of every PyTorch op, the machine's ceilings, and where each op sits on the roofline.

``import roofline`` needs only NumPy; torch is imported when a torch feature is used.
"""

from __future__ import annotations

import contextlib

from roofline import _core  # noqa: F401  (the C extension; fails early if the build is broken)
from roofline._ceilings import CeilingNotAvailable, Ceiling, Ceilings, ceilings
from roofline._spec import Cost, TensorSpec, cost
from roofline.report import Report

__version__ = "0.1.0"

from roofline import devices  # noqa: E402  (datasheet table, standard library only)
__all__ = ["measure", "cost", "Cost", "TensorSpec", "Report", "register", "unregister", "load", "ceilings",
           "Ceilings", "Ceiling", "CeilingNotAvailable", "devices", "__version__"]


@contextlib.contextmanager
def measure(model=None, *, timing="model", ceilings="measured"):
    """Count every aten op that runs inside the block: FLOPs (matrix and vector) and compulsory bytes, per op call,
    with the module that ran it and the phase (forward, backward, optimizer).

    ``timing``: ``"model"`` (default) times the whole block, the device synchronised at entry and exit;
    ``"op"`` also times every op (CPU monotonic clock; on CUDA an event pair per op, resolved once at exit);
    ``None`` times nothing. ``ceilings``: what ops are judged against: ``"measured"`` (this machine's
    microbenchmarks, cached), ``"datasheet"``, a device name from :mod:`roofline.devices` (``"H100 SXM"``), or a
    :class:`roofline.Ceilings`. Ceilings are resolved on first use of the report.

    ``model`` (optional) names the modules from its root, e.g. ``"ResNet.layer1.0.conv1"`` (the naming
    ``FlopCounterMode`` uses). Works on CPU and CUDA tensors, on the meta device and under ``FakeTensorMode``, under
    ``no_grad``, ``inference_mode`` and autocast. An exception in the block propagates unchanged and leaves no
    dispatch mode or hook behind.

    Yields a :class:`roofline.Report`, which is empty inside the block and filled when the block exits: read it
    after the ``with`` statement. Needs torch (imported on first use).

    >>> with roofline.measure(model) as r:          # doctest: +SKIP
    ...     model(x).sum().backward()
    >>> print(r)                                      # doctest: +SKIP
    """
    from roofline import _torch

    if isinstance(ceilings, str) and ceilings not in ("measured", "datasheet"):
        devices.get(ceilings)  # a device name: fail now (KeyError listing close matches), not after the run
    elif not isinstance(ceilings, (str, Ceilings)):
        raise TypeError(f"measure: ceilings must be 'measured', 'datasheet', a device name or a Ceilings, "
                        f"got {type(ceilings).__name__}")
    session = _torch.Session(model, timing=timing)
    report = Report([], [], [])
    session.enter()
    try:
        yield report
    except BaseException as e:
        session.exit(type(e), e, e.__traceback__)
        raise
    else:
        session.exit(None, None, None)
    import numpy as np

    from roofline._records import RECORD_DTYPE

    meta = {"timing": timing, "devices": sorted(session.devices), "version": __version__,
            "ceilings_source": (ceilings if ceilings in ("measured", "datasheet") else
                                "datasheet" if isinstance(ceilings, str) else "best")}
    report.__init__(np.frombuffer(session.recorder.records_bytes(), dtype=RECORD_DTYPE).copy(), session.ops,
                    session.module_sets, wall_time=session.wall_time, meta=meta, ceilings=ceilings,
                    overhead=_torch.instrumentation_overhead(timing) if timing is not None else None)


def load(path) -> Report:
    """Read a report written by :meth:`Report.to_json` (a path, or the JSON text itself)."""
    import json
    import os

    text = path
    if isinstance(path, os.PathLike) or (isinstance(path, str) and not path.lstrip().startswith(("{", "["))):
        with open(path) as f:
            text = f.read()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"not a roofline report: invalid JSON ({e})") from None
    return Report.from_dict(data)


def register(op, formula=None, *, kind=None, flops=0, special=0):
    from roofline import _torch

    return _torch.register(op, formula, kind=kind, flops=flops, special=special)


def unregister(op):
    """Remove a formula added with :func:`register` (``op`` as given there); KeyError if there is none."""
    from roofline import _torch

    return _torch.unregister(op)


register.__doc__ = """Add a cost formula for an op that has none (your custom ops), or override a built-in one.

``op``: an ``OpOverloadPacket`` / ``OpOverload`` (``torch.ops.mylib.op``) or a name (``"mylib::op"``,
``"mylib::op.overload"``; a bare name such as ``"gelu"`` means ``"aten::gelu"``). Pass exactly one of:

* ``formula``: a callable ``formula(*args, out=..., **kwargs)`` called once per op call, in Python, with the op's
  arguments and its result, returning a :class:`roofline.Cost` or a dict with any of ``matrix_flops``,
  ``vector_flops``, ``special_ops``, ``bytes_read``, ``bytes_written`` (missing keys count 0; negative counts and
  unknown keys raise);
* ``kind``: the name of a built-in formula evaluated in C (``"ewise"`` with ``flops`` / ``special`` per element of
  the result, ``"ewise_in"`` per element of the first tensor argument, ``"foreach"`` per element of the first
  tensor list, ``"zero"``, ``"copy"``, ``"mm"``, ``"bmm"``, ...; see ``roofline._registry.KIND_NAMES``.
  The attention, pooling and NLL kinds need argument positions this form cannot give).

Registering an op twice raises ValueError: call :func:`unregister` first to replace a formula. Register before
entering ``measure``: a block resolves an op's formula the first time it meets the op. Needs torch. Returns None.

``roofline.register(torch.ops.mylib.op, lambda x, out=None: {"vector_flops": x.numel()})`` or
``roofline.register("mylib::op", kind="ewise", flops=2)``."""
