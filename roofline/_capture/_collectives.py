"""Collectives and DTensor inside ``measure``: what the dispatch mode does with them.

* **Collectives** (``c10d::*`` ProcessGroup ops, ``_c10d_functional::*`` and the older ``c10d_functional::*``)
  are recorded as ops whose work is on the network: the record itself counts no FLOPs and no memory bytes; the
  call's message bytes, group size and bus bytes go into a side table (``Report.meta["collectives"]``), and the
  classification judges them against the interconnect bandwidth (bound ``"interconnect"``), never against DRAM.
  Bus bytes follow the nccl-tests convention: ``message bytes x factor(n)`` with ``2(n-1)/n`` for all-reduce,
  ``(n-1)/n`` for all-gather, reduce-scatter, all-to-all, gather and scatter, 1 for broadcast, reduce and
  point-to-point, 0 for barriers and waits. Message bytes are nccl-tests' ``size``: the tensor for all-reduce,
  broadcast, reduce and point-to-point, the whole gathered output for all-gather and gather, the whole input for
  reduce-scatter, all-to-all and scatter.
* **DTensor**: an op on DTensors is declined at the DTensor level (the mode returns NotImplemented), so DTensor's
  own dispatch runs with the mode still active and the ops it runs on the local shards, and the collectives of
  its redistributions, are what is counted. Its sharding propagation (ops on fake tensors at the global shape, run
  the first time an op meets a sharding) is not counted: the propagator's lock is wrapped for the block so that
  the roofline modes at the top of the mode stack are set aside while it runs. The same is done for
  ``AsyncCollectiveTensor`` (the result of a functional collective): its wait and the op on the plain tensor are
  counted.
* ``fsdp::*`` ops (FSDP2's copy-in / copy-out of the all-gather buffers and the reduce-scatter input) are copies:
  bytes read and written, no FLOPs.

Needs torch; ``torch.distributed`` is imported only when a collective or a DTensor is met.
"""

from __future__ import annotations

import sys
import threading

import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack as _mode_stack, _pop_mode, _push_mode

from roofline import _core
from roofline._capture._dtypes import TORCH_DTYPES
from roofline._hardware import _interconnect
from roofline._datamodel._collectives import bus_factor
from roofline._util import _warn

# ---- the collective table --------------------------------------------------------------------------------------
NAMESPACES = ("c10d", "_c10d_functional", "_c10d_functional_autograd", "c10d_functional")

# op name (without namespace) -> (collective, which bytes are the message: "in" (the tensors sent / reduced),
# "out" (the tensors received; for functional ops their result), "in_n" (input x group size), "out_n", "zero")
_TABLE = {}
for _names, _entry in (
    (("allreduce_", "allreduce_coalesced_", "all_reduce", "all_reduce_", "all_reduce_coalesced",
      "all_reduce_coalesced_"), ("all_reduce", "in")),
    (("allgather_", "_allgather_base_", "allgather_into_tensor_coalesced_", "allgather_coalesced_",
      "all_gather_into_tensor", "all_gather_into_tensor_out", "all_gather_into_tensor_coalesced"),
     ("all_gather", "out")),
    (("reduce_scatter_", "_reduce_scatter_base_", "reduce_scatter_tensor_coalesced_", "reduce_scatter_tensor",
      "reduce_scatter_tensor_out", "reduce_scatter_tensor_coalesced"), ("reduce_scatter", "in")),
    (("alltoall_", "alltoall_base_", "all_to_all_single"), ("all_to_all", "in")),
    (("broadcast_", "broadcast"), ("broadcast", "in")),
    (("reduce_",), ("reduce", "in")),
    (("gather_", "gather_into_tensor_"), ("gather", "in_n")),
    (("scatter_",), ("scatter", "out_n")),
    (("send", "isend"), ("send", "in")),
    (("recv_", "recv_any_source_", "irecv"), ("recv", "in")),
    (("batch_p2p_ops",), ("p2p", "in")),
    (("barrier", "monitored_barrier_"), ("barrier", "zero")),
    (("wait_tensor",), ("wait", "zero")),
):
    for _n in _names:
        _TABLE[_n] = _entry


# schema argument names of the tensors a collective sends / receives
_IN_ARGS = frozenset({"tensors", "input_tensor", "inputs", "input_tensors", "input_list", "input", "self", "shard",
                      "tensor"})
_OUT_ARGS = frozenset({"output_tensor", "outputs", "output_tensors", "output_lists", "output", "out"})


def _tensor_bytes(obj) -> int:
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, (list, tuple)):
        return sum(_tensor_bytes(o) for o in obj)
    return 0


def _first_tensor(obj):
    if isinstance(obj, torch.Tensor):
        return obj
    if isinstance(obj, (list, tuple)):
        for o in obj:
            t = _first_tensor(o)
            if t is not None:
                return t
    return None


def _group_size(func, bound: dict):
    """The group size of a call: from its ProcessGroup, ``group_size``, ``ranks`` or ``group_name`` argument;
    None when it cannot be told."""
    pg = bound.get("process_group")
    if pg is not None:
        try:  # a ScriptObject in the dispatcher: unbox it to the ProcessGroup
            from torch.distributed import ProcessGroup

            return int(ProcessGroup.unbox(pg).size())
        except Exception:  # noqa: BLE001 - try the other arguments
            try:
                return int(pg.size())
            except Exception:  # noqa: BLE001
                pass
    if isinstance(bound.get("group_size"), int):
        return bound["group_size"]
    if isinstance(bound.get("ranks"), (list, tuple)) and bound["ranks"]:
        return len(bound["ranks"])
    name = bound.get("group_name")
    if name is not None:
        try:
            from torch.distributed.distributed_c10d import _resolve_process_group

            return int(_resolve_process_group(name).size())
        except Exception:  # noqa: BLE001
            return None
    return None


def _bind(func, args, kwargs) -> dict:
    """The call's arguments by schema name, defaults included: the dispatcher leaves out the trailing arguments that
    equal their defaults, so ``dist.all_reduce(x, async_op=True)`` reaches the mode without ``async_op`` (c10d's
    schemas default it to True; the blocking calls pass False)."""
    schema = func._schema.arguments
    bound = {a.name: v for a, v in zip(schema, args)}
    bound.update(kwargs)
    for a in schema[len(args):]:
        if a.name not in bound and a.has_default_value():
            bound[a.name] = a.default_value
    return bound


class Collectives:
    """The side table of one ``measure`` block: one row per collective call."""

    __slots__ = ("record", "collective", "group_size", "message_bytes", "bus_bytes", "async_op", "uncertain")

    def __init__(self):
        for k in self.__slots__:
            setattr(self, k, [])

    def add(self, record, collective, n, message, bus, async_op, uncertain):
        self.record.append(record)
        self.collective.append(collective)
        self.group_size.append(n)
        self.message_bytes.append(message)
        self.bus_bytes.append(bus)
        self.async_op.append(async_op)
        self.uncertain.append(uncertain)

    def to_meta(self) -> dict:
        return {k: list(getattr(self, k)) for k in self.__slots__}


def resolve(session, func, OpInfo):
    """The slow-path marker for a collective or ``fsdp::`` op, or None for any other op."""
    ns, _, name = func._schema.name.partition("::")
    if ns == "fsdp":
        info = OpInfo(name=str(func), packet=f"{ns}.{name}", kind="copy", packet_obj=func._overloadpacket)
        idx = session.recorder.add_op(_core.K_ZERO, name=info.name)
        session.ops.append(info)
        session.op_index[func] = ("collective", idx, ("_copy", _FSDP_COPIES.get(name, _generic_copy)))
        return session.op_index[func]
    if ns not in NAMESPACES:
        return None
    entry = _TABLE.get(name)
    if entry is None:  # _wrap_tensor_autograd, check_for_nan, ...: no traffic, no work of their own
        entry = (None, "zero")
    info = OpInfo(name=str(func), packet=f"{ns}.{name}", kind="collective" if entry[0] else "zero",
                  packet_obj=func._overloadpacket)
    idx = session.recorder.add_op(_core.K_ZERO, name=info.name)
    session.ops.append(info)
    session.op_index[func] = ("collective", idx, entry)
    return session.op_index[func]


# FSDP2's copies, (bytes read, bytes written) from the bound arguments and the result: what each one moves
_FSDP_COPIES = {
    # the rank's shards into its slice of the all-gather buffer (the buffer itself is only sliced)
    "all_gather_copy_in": lambda b, out: (_tensor_bytes(b.get("all_gather_inputs")),) * 2,
    # the gradients, padded and interleaved into the reduce-scatter input
    "chunk_cat": lambda b, out: (_tensor_bytes(b.get("tensors")), _tensor_bytes(b.get("out"))),
    # the gathered parameters out of the all-gather buffer
    "split_with_sizes_copy": lambda b, out: (_tensor_bytes(b.get("out")),) * 2,
    "copy_": lambda b, out: (_tensor_bytes(b.get("data")), _tensor_bytes(b.get("tensor"))),
}


def _generic_copy(bound, out):
    """Every tensor argument read, the result written (an op of the namespace this table does not know)."""
    return _tensor_bytes(list(bound.values())), _tensor_bytes(out if isinstance(out, (torch.Tensor, list, tuple))
                                                              else None)


def call(session, marker, func, args, kwargs, now, t_base):
    """Run a collective and record it: one record with no counts, one row of the side table."""
    _, idx, (collective, which) = marker
    t0 = now()
    out = func(*args, **kwargs)
    t1 = now()
    rec = session.recorder
    bound = _bind(func, args, kwargs)
    if collective == "_copy":  # an fsdp:: copy: memory bytes, no network
        read, written = which(bound, out)
        dt = session_dtype(_first_tensor(list(bound.values())))
        rec.append(idx, session.tracker.module_id, session._phase(), dt, 0, 0, 0, read, written, 0)
        if session.timing == "op":
            rec.set_times(len(rec) - 1, t0 - t_base, t1 - t_base)
        return out
    first = _first_tensor([bound.get(k) for k in _IN_ARGS])
    if first is None:
        first = _first_tensor(out)
    dt = session_dtype(first)
    rec.append(idx, session.tracker.module_id, session._phase(), dt, 0, 0, 0, 0, 0, 0)
    if session.timing == "op":
        rec.set_times(len(rec) - 1, t0 - t_base, t1 - t_base)
    if collective is None:
        return out
    n = _group_size(func, bound)
    uncertain = n is None
    if n is None:
        import torch.distributed as dist

        n = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
    ins = _tensor_bytes([v for k, v in bound.items() if k in _IN_ARGS])
    outs = _tensor_bytes([v for k, v in bound.items() if k in _OUT_ARGS])
    if which == "out" and outs == 0:  # functional ops return what they received
        outs = _tensor_bytes(out if isinstance(out, (torch.Tensor, list, tuple)) else None)
    message = {"in": ins, "out": outs, "in_n": ins * n, "out_n": outs * n, "zero": 0}[which]
    bus = int(round(message * bus_factor(collective, max(n, 1))))
    async_op = bool(bound.get("async_op", False)) or func._schema.name.startswith("_c10d_functional")
    session.collectives.add(len(rec) - 1, collective, n, message, bus, async_op and collective != "wait",
                            uncertain)
    return out


def session_dtype(t) -> int:
    return TORCH_DTYPES.get(t.dtype, 0) if t is not None else 0


# ---- DTensor ---------------------------------------------------------------------------------------------------
_DEFERRED = {("torch.distributed.tensor._api", "DTensor"), ("torch.distributed.tensor", "DTensor"),
             ("torch.distributed._tensor.api", "DTensor"), ("torch.distributed._tensor", "DTensor"),  # torch < 2.5
             ("torch.distributed._functional_collectives", "AsyncCollectiveTensor")}


def defer(types) -> bool:
    """Whether the mode declines the op so that the subclass dispatches it on plain tensors, with the mode still
    active (DTensor: the local shards; AsyncCollectiveTensor: its wait, then the op)."""
    for t in types:
        for c in t.__mro__:
            if (c.__module__, c.__name__) in _DEFERRED:
                if _unguarded[0]:  # the first DTensor op of a block on a torch without the propagation lock
                    _unguarded[0] = False

                    _warn.warn("roofline: this torch's DTensor sharding propagator has no _fake_mode_lock: the "
                               "fake-tensor ops it runs the first time an op meets a sharding may be counted (at "
                               "global shapes); measure a second step to leave them out")
                return True
    return False


_unguarded = [False]  # set by install() on a torch whose propagator cannot be wrapped: warn at the first DTensor op


class _ThreadState(threading.local):
    depth = 0  # a class default: reading it on a thread that never set it raises nothing (getattr's default did)


_state = _ThreadState()


def suppressed() -> bool:
    """True while DTensor's sharding propagation runs on this thread (its fake-tensor ops are not counted)."""
    return _state.depth > 0


class _PropagationGuard:
    """Wraps ``ShardingPropagator._fake_mode_lock`` (a context manager held around the fake-tensor run of an op
    during sharding propagation): while it is held, the roofline modes at the top of the mode stack are popped,
    so the propagation's ops never reach them."""

    def __init__(self, inner):
        self.inner = inner

    def __enter__(self):
        r = self.inner.__enter__()
        popped = []
        stack = _mode_stack()
        while stack and getattr(type(stack[-1]), "roofline_mode", False) is True:  # roofline._capture._modes._Mode
            popped.append(_pop_mode())
            stack = _mode_stack()
        _state.depth += 1
        saved = getattr(_state, "popped", None)
        if saved is None:
            saved = _state.popped = []
        saved.append(popped)
        return r

    def __exit__(self, *exc):
        _state.depth -= 1
        for m in reversed(_state.popped.pop()):
            _push_mode(m)
        return self.inner.__exit__(*exc)


_holders: set = set()  # the blocks holding the guard
_wrapped: list = [None, None]  # the class whose lock is wrapped, and its own lock


def install(holder=None):
    """Wrap DTensor's propagation lock (when torch.distributed.tensor is loaded) for ``holder`` (a block), until
    :func:`uninstall` is called for it; the lock stays wrapped while any holder is left. Both run under the block lock
    (``roofline._core.Block``: one block enters or leaves at a time) and take no lock of their own; ``holder`` is
    recorded before the lock is wrapped, so :func:`uninstall` undoes an install stopped on any line. Returns None."""
    mod = (sys.modules.get("torch.distributed.tensor._sharding_prop")
           or sys.modules.get("torch.distributed._tensor.sharding_prop"))
    if mod is None:
        return None
    cls = getattr(mod, "ShardingPropagator", None)
    if cls is None or "_fake_mode_lock" not in cls.__dict__:
        _unguarded[0] = True  # warned about only if the block meets a DTensor (see defer)
        return None
    _unguarded[0] = False
    _holders.add(holder)
    current = cls.__dict__["_fake_mode_lock"]
    if not isinstance(current, _PropagationGuard):
        _wrapped[:] = [cls, current]
        cls._fake_mode_lock = _PropagationGuard(current)
    return None


def uninstall(holder=None):
    """``holder`` no longer needs the guard: the lock is unwrapped when no holder is left. Idempotent."""
    _holders.discard(holder)
    if _holders or _wrapped[0] is None:
        return
    cls, lock = _wrapped
    if isinstance(cls.__dict__.get("_fake_mode_lock"), _PropagationGuard):
        cls._fake_mode_lock = lock
    _wrapped[:] = [None, None]


# ---- rank metadata ------------------------------------------------------------------------------------------------
def process_group_meta() -> dict | None:
    """``{"rank", "world_size", "backend"}`` of the default process group, or None outside one."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    try:
        backend = str(dist.get_backend())
    except Exception:  # noqa: BLE001
        backend = "unknown"
    return {"rank": dist.get_rank(), "world_size": dist.get_world_size(), "backend": backend}


def meta(session) -> dict:
    """What a block adds to its report's meta: ``distributed`` (rank, world size, backend, and the interconnect
    measured by :func:`roofline.distributed.measure_interconnect` in this process) and ``collectives``."""
    out = {}
    pg = process_group_meta()
    if pg is not None:
        link = _interconnect.measured_link(pg)
        if link is not None:
            pg["interconnect"] = link
        out["distributed"] = pg
    if session.collectives.record:
        out["collectives"] = session.collectives.to_meta()
    return out
