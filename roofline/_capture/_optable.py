"""A measure block's op table: each OpOverload resolved once per block (a recorder op index for the C path, or a
marker for the Python path: a formula, a decomposition, a declined metadata query, a collective, a higher-order
operator), with the rules of ``roofline._counting._resolve`` (which formula applies, the block's own first) and the
decomposition rule of FlopCounterMode; and the caches that let a later block skip the resolution of ops an earlier
one resolved (``_RESOLVED``, ``_PLAIN``). ``Session`` (roofline/_capture/_session.py) is an ``OpTable``."""

from __future__ import annotations

import torch

from roofline import _core
from roofline._capture import _collectives
from roofline._counting import _registry, _resolve
from roofline._datamodel._records import OpInfo
from roofline._util import _warn

_CIA = torch._C.DispatchKey.CompositeImplicitAutograd
try:
    from torch._subclasses.fake_tensor import FakeTensor as _FakeTensor
except ImportError:  # pragma: no cover
    class _FakeTensor:  # noqa: D101
        pass

# markers of ops that take the Python path without a recorder entry
_DECOMPOSE, _DECLINED = "decompose", "decline"


# Ops that only query metadata. FlopCounterMode declines them (they reach a mode only for tensor subclasses), and so
# do we, so that both see the same op stream.
_DECLINE_PACKETS = [getattr(torch.ops.aten, name, None) for name in (
    "sym_is_contiguous", "is_contiguous", "is_strides_like_format", "is_non_overlapping_and_dense", "size",
    "sym_size", "stride", "sym_stride", "storage_offset", "sym_storage_offset", "numel", "sym_numel", "dim",
)] + [torch.ops.prim.layout]
_DECLINE = frozenset(getattr(packet, ov) for packet in _DECLINE_PACKETS if packet is not None
                     for ov in packet.overloads())

# OpOverload -> (registrations it was resolved under, schema, resolution): what Session.resolve computes once per op
# and process, not once per block (compiling an entry against a schema costs ~0.1 ms). An entry is stale once a
# formula is registered or unregistered (roofline.register), so the registrations are part of what is kept.
_RESOLVED: dict = {}


# OpOverload -> (registrations, OpInfo fields, recorder entry, whether its composite kernel decides): the outcome of
# Session.resolve for an op counted by a C kind (or unknown), so its first call in a later block skips the resolution
# (the collectives check, the schema, the entry's spec). The CompositeImplicitAutograd check, which registrations can
# change, is made again where it decided; ops with Python formulas or resolution errors are not kept.
_PLAIN: dict = {}


def _resolved(func, user, scoped=None):
    """``(schema, _resolve.Resolved)`` of an OpOverload: the same resolution as ``roofline.cost()``. ``user``: the
    registrations now (``tuple(_resolve.USER.items())``), under which the entry is kept; ``scoped``: the block's
    formulas, when one of them is for ``func`` (the outcome is then the block's alone, and not kept)."""
    if scoped is None:
        hit = _RESOLVED.get(func)
        if hit is not None and hit[0] == user:
            return hit[1], hit[2]
    schema = _registry.Schema.from_torch(func._schema)
    res = _resolve.resolve(func._schema.name, func._overloadname, schema, scoped)
    if scoped is None:
        _RESOLVED[func] = (user, schema, res)
    return schema, res


def _packet_name(func) -> str:
    ns, name = func._schema.name.split("::", 1)
    return f"{ns}.{name}"


def _has_composite_kernel(func) -> bool:
    if _CIA in func.py_kernels:
        return True
    return torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), _CIA)


def _runner(func):
    """What runs an OpOverload: its C++ op, unless OpOverload.__call__ may divert the call (a Python dispatcher)."""
    op = getattr(func, "_op", None)
    if op is None or getattr(func, "_pyobj_dispatcher", None) is not None:
        return func
    return op


class OpTable:
    """The op resolution of a block (a mixin of ``Session``): ``op_index`` maps each OpOverload met to its recorder op
    index (an int: the C path) or a marker (the Python path); ``ops`` holds each recorder op's ``OpInfo``;
    ``formulas`` the block's own formulas (``measure(formulas=...)``, from ``_resolve.scoped_formulas``)."""

    def resolve(self, func, args=(), allow_decompose=True):
        if isinstance(func, torch._ops.HigherOrderOperator):
            formula = _resolve.hop_formula(func.name())  # built-in formula (FlexAttention), else unknown
            info = OpInfo(name=f"higher_order.{func.name()}", packet=f"higher_order.{func.name()}",
                          kind="unknown" if formula is None else "python")
            idx = self.recorder.add_op(_core.K_ZERO, name=info.name)
            self.ops.append(info)
            self.op_index[func] = ("hop", idx, None) if formula is None else ("formula", idx, formula)
            return self.op_index[func]
        self._note_devices(args)
        if func in _DECLINE:
            self.op_index[func] = _DECLINED
            return _DECLINED
        scoped = self._scoped(func)
        user = tuple(_resolve.USER.items())
        idx = self._plain(func, user, allow_decompose) if scoped is None else None
        if idx is not None:
            return idx
        marker = _collectives.resolve(self, func, OpInfo)  # collectives, fsdp copies
        if marker is not None:
            return marker
        schema, res = _resolved(func, user, scoped)
        if (allow_decompose and not res.registered and func is not torch.ops.prim.device.default
                and _has_composite_kernel(func)):
            # Same rule as FlopCounterMode: an op with a CompositeImplicitAutograd kernel is decomposed and its
            # parts are counted.
            self.op_index[func] = _DECOMPOSE
            return _DECOMPOSE
        # a built-in Python formula (roofline/_counting/_formulas.py) counts the calls it can, the entry the others
        builtin = None if res.registered else _resolve.builtin_formula(func._schema.name, schema.names)
        info = OpInfo(name=str(func), packet=_packet_name(func), kind=res.kind if builtin is None or res.spec else
                      "python", packet_obj=func._overloadpacket)
        if res.formula is not None:
            # a formula of the user's gives the counts; the argument layout and the arguments written in place are
            # for the dataflow rows (attach)
            written = 0
            for n in schema.written:
                i = schema.names.index(n) if n in schema.names else 64
                written |= (1 << i) if i < 64 else 0
            idx = self.recorder.add_op(_core.K_ZERO, name=info.name, kwnames=schema.kwnames or None,
                                       kwpos=len(schema.names) - schema.kwonly, write_mask=written)
            self.ops.append(info)
            self.op_index[func] = ("formula", idx, res.formula)
            return self.op_index[func]
        if res.error is not None:
            _warn.warn(f"roofline: {res.error}; the op is listed in unknown_ops")
        # unknown: compulsory bytes are still counted; FLOPs are not
        spec = dict(res.spec) if res.spec is not None else dict(kind=_core.K_COPY)
        spec["kwnames"] = schema.kwnames or None
        spec["kwpos"] = len(schema.names) - schema.kwonly
        spec["name"] = info.name  # error messages from the recorder name the op
        idx = self.recorder.add_op(**spec)
        self.ops.append(info)
        self.op_index[func] = idx if builtin is None else ("formula", idx, builtin)
        if builtin is None and res.error is None:
            # the recorder entry as add_op's positional arguments: a later block's add_op then parses no keywords
            entry = (spec["kind"], spec.get("p1"), spec.get("p2"), spec.get("noread_mask", 0),
                     spec.get("write_mask", 0), spec.get("flags", 0), spec["kwnames"], spec["kwpos"], spec["name"],
                     spec.get("params"))
            _PLAIN[func] = (user, dict(name=info.name, packet=info.packet, kind=info.kind, packet_obj=info.packet_obj),
                            entry, not res.registered and func is not torch.ops.prim.device.default)
        return self.op_index[func]

    def _scoped(self, func):
        """The block's formulas when one of them is for ``func`` (for its overload or its whole op), else None."""
        f = self.formulas
        if not f:
            return None
        name = func._schema.name
        return f if f"{name}.{func._overloadname}" in f or name in f else None

    def _note_devices(self, args):
        for a in args:  # once per op overload: note which devices ran ops
            if isinstance(a, torch.Tensor):
                self.devices.add("fake" if isinstance(a, _FakeTensor) else str(a.device))
                break

    def _plain(self, func, user, allow_decompose=True):
        """The op's index after adding it to this block's tables as an earlier block resolved it (``_PLAIN``), or None
        where none did under the registrations ``user``, or where it now has a composite kernel that decides."""
        hit = _PLAIN.get(func)
        if hit is None or hit[0] != user or (hit[3] and allow_decompose and _has_composite_kernel(func)):
            return None
        idx = self.recorder.add_op(*hit[2])
        self.ops.append(OpInfo(**hit[1]))
        self.op_index[func] = idx
        return idx

    def adopt(self, func, args):
        """``Dispatch``'s call for an op not in its table (the op's first call in this block, on plain tensors): an
        op an earlier block resolved to a C kind is added as :meth:`resolve` adds it, and this call is recorded on
        the C path; None leaves the call to ``_Mode.__torch_dispatch__``. The first call of each op in a block cost
        ~65 k instructions more than a later one on the Python path (its frames, Dynamo's disable wrapper around a
        mode's ``__torch_dispatch__``), ~3 M in a GPT-2 step."""
        if func in self.op_index or _collectives.suppressed():
            return None
        if self.formulas and self._scoped(func) is not None:  # the block's own formula: the Python path resolves it
            return None
        idx = self._plain(func, tuple(_resolve.USER.items()))
        if idx is not None:
            self._note_devices(args or ())
            self.dispatch.set_op(func, idx, _runner(func))
        return idx
