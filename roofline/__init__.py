"""roofline: FLOPs and bytes of every PyTorch op, the machine's ceilings, and where each op sits on the roofline.

``import roofline`` needs only NumPy; torch is imported when a torch feature is used.

Every type a public function returns is importable from here (or from the public module that returns it:
``roofline.devices``, ``roofline.llm``, ``roofline.distributed``, ``roofline.report``). The subpackages are private
(``roofline._capture``, ...): only the names below, those public modules and ``roofline.integrations`` are the API.
Deprecated since 0.5, removed in 0.7: ``roofline.profiler`` (now :func:`profile`) and ``roofline.profile(step,
model, warmup=, repeat=)`` (now :func:`steady`).
"""

from roofline import _core  # noqa: F401  (the C extension; fails early if the build is broken)
from roofline._hardware import _devices as devices
from roofline import distributed
from roofline._measure import Measure, measure
from roofline._loops._monitor import Monitor, monitor
from roofline._loops._schedule import Profiler, ProfilerAction, Schedule, profile, profiler, schedule
from roofline._loops._steady import SteadyReport, steady
from roofline._counting import _resolve
from roofline._counting._cost import Cost, TensorSpec, cost
from roofline._hardware._ceilings import Ceiling, CeilingNotAvailable, Ceilings, PeakChoice, ceilings
from roofline.render import _ceilings_table  # noqa: F401  (installs the text view of Ceilings: table, str)
from roofline.report import Report, load
from roofline._util._version import VERSION as __version__

__all__ = ["measure", "Measure", "steady", "SteadyReport", "profile", "Profiler", "schedule", "Schedule",
           "ProfilerAction", "monitor", "Monitor", "gather", "cost", "Cost", "TensorSpec", "Report", "register",
           "unregister", "load", "load_trace", "ceilings", "Ceilings", "Ceiling", "CeilingNotAvailable", "PeakChoice",
           "devices", "__version__"]
# deprecated (0.5), not in __all__: profiler


def __getattr__(name):
    # the trace reader (roofline._traces: some 30 ms of imports) loads on first use of roofline.load_trace
    if name == "load_trace":
        from roofline._traces import _ranks  # noqa: F401  (installs the reader of rank directories into load_trace)
        from roofline._traces._load import load_trace

        globals()["load_trace"] = load_trace
        return load_trace
    raise AttributeError(f"module 'roofline' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | {"load_trace"})


def register(op, formula=None, *, kind=None, flops=0, special=0):
    return _resolve.register(op, formula, kind=kind, flops=flops, special=special)


def gather(report, dst=0, timeout=120.0, group=None):
    """Every rank's report on rank ``dst``: see :func:`roofline.distributed.gather`."""
    return distributed.gather(report, dst=dst, timeout=timeout, group=group)


def unregister(op):
    """Remove a formula added with :func:`register` (``op`` as given there); KeyError if there is none."""
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
  tensor list, ``"zero"``, ``"copy"``, ``"mm"``, ``"bmm"``, ...; see ``roofline._counting._registry.KINDS``.
  The attention, pooling and NLL kinds need argument positions this form cannot give).

Every argument is checked at the call, and an error names the op: ``flops`` and ``special`` must be ints (a
float such as 2.7 is refused, not truncated) from 0 to 2**63 - 1, and only the per-element kinds (``"fill"``,
``"ewise"``, ``"ewise_in"``, ``"foreach"``) take them. A formula's counts must be ints from 0 to 2**64 - 1
(TypeError, ValueError or OverflowError inside the block otherwise). Registering an op twice raises ValueError:
call :func:`unregister` first to replace a formula. Register before
entering ``measure``: a block resolves an op's formula the first time it meets the op. A ``kind`` formula needs no
torch (``roofline.cost`` evaluates it too); a ``formula`` callable needs torch (ImportError without it). Returns None.

``roofline.register(torch.ops.mylib.op, lambda x, out=None: {"vector_flops": x.numel()})`` or
``roofline.register("mylib::op", kind="ewise", flops=2)``.

A formula for one block only (like ``FlopCounterMode``'s ``custom_mapping``): ``roofline.measure(model,
formulas={torch.ops.mylib.op: formula})``, with the same keys and the same ``formula`` callables as here. Inside
that block it takes precedence over a registered formula and a built-in one; the registration (and every other
block) is untouched. Its keys and values are checked when ``measure`` is called (TypeError)."""
