"""The PyTorch side: a dispatch mode that records the cost of every aten op into the C recorder.

Imported only when torch is used (``roofline.measure``, ``roofline.register`` on a torch op), never by
``import roofline``.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import operator
import time
import weakref
import os
import types

import torch
import torch.utils._python_dispatch as _python_dispatch
from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode_stack as _mode_stack
from torch.utils._pytree import tree_flatten

from roofline import _core
from roofline.capture import _collectives, _fcm_names
from roofline.counting import _formulas, _registry, _resolve

try:  # torch imports dynamo lazily on the first op under a dispatch mode (~1 s): not inside the first timed block
    import torch._dynamo  # noqa: F401
except Exception:  # pragma: no cover - optional in minimal torch builds
    pass
import collections

from roofline.capture._dtypes import TORCH_DTYPES
from roofline.compiled import _compiled
from roofline.counting._spec import Cost
from roofline.model import _tokens
from roofline.model._records import (BACKWARD, COUNTS, DTYPE_CODES, FORWARD, OPTIMIZER, OpInfo,
                                     accesses_from_raw)
from roofline.util import _warn

_CIA = torch._C.DispatchKey.CompositeImplicitAutograd
_graph_task_id = torch._C._current_graph_task_id
try:
    from torch._subclasses.fake_tensor import FakeTensor as _FakeTensor
except ImportError:  # pragma: no cover
    class _FakeTensor:  # noqa: D101
        pass

# Ops that only query metadata. FlopCounterMode declines them (they reach a mode only for tensor subclasses), and so
# do we, so that both see the same op stream.
_DECLINE_PACKETS = [getattr(torch.ops.aten, name, None) for name in (
    "sym_is_contiguous", "is_contiguous", "is_strides_like_format", "is_non_overlapping_and_dense", "size",
    "sym_size", "stride", "sym_stride", "storage_offset", "sym_storage_offset", "numel", "sym_numel", "dim",
)] + [torch.ops.prim.layout]
_DECLINE = frozenset(getattr(packet, ov) for packet in _DECLINE_PACKETS if packet is not None
                     for ov in packet.overloads())


# Dataflow capture: the id of a tensor's storage block is the address of its StorageImpl (views share it; meta
# tensors have one too, while their data_ptr() is 0). torch._C._storage_address reads it in one call; older torch
# builds without it go through the untyped storage. tests/test_recorder_capture.py pins both.
_storage_id = getattr(torch._C, "_storage_address", None) or (lambda t: t.untyped_storage()._cdata)
# Whether sessions capture call signatures and dataflow rows (Report.signatures / Report.accesses). Always on; the
# overhead benchmark switches it off to measure what the capture costs.
CAPTURE = True

# OpOverload -> (registrations it was resolved under, schema, resolution): what Session.resolve computes once per op
# and process, not once per block (compiling an entry against a schema costs ~0.1 ms). An entry is stale once a
# formula is registered or unregistered (roofline.register), so the registrations are part of what is kept.
_RESOLVED: dict = {}


# OpOverload -> (registrations, OpInfo fields, recorder entry, whether its composite kernel decides): the outcome of
# Session.resolve for an op counted by a C kind (or unknown), so its first call in a later block skips the resolution
# (the collectives check, the schema, the entry's spec). The CompositeImplicitAutograd check, which registrations can
# change, is made again where it decided; ops with Python formulas or resolution errors are not kept.
_PLAIN: dict = {}


def _resolved(func, user):
    """``(schema, _resolve.Resolved)`` of an OpOverload: the same resolution as ``roofline.cost()``. ``user``: the
    registrations now (``tuple(_resolve.USER.items())``), under which the entry is kept."""
    hit = _RESOLVED.get(func)
    if hit is not None and hit[0] == user:
        return hit[1], hit[2]
    schema = _registry.Schema.from_torch(func._schema)
    res = _resolve.resolve(func._schema.name, func._overloadname, schema)
    _RESOLVED[func] = (user, schema, res)
    return schema, res


def _packet_name(func) -> str:
    ns, name = func._schema.name.split("::", 1)
    return f"{ns}.{name}"


def _has_composite_kernel(func) -> bool:
    if _CIA in func.py_kernels:
        return True
    return torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), _CIA)


class _Tracker:
    """Which modules are running, with the semantics of torch's ModuleTracker (the tracker FlopCounterMode uses, so
    module attribution matches it exactly), the per-call work in C (``_core.ModuleTracker``).

    Two process-global module forward hooks (``_forward_pre_hook``, ``_forward_hook``: a Python frame that calls
    the C tracker of each open block) act while the block's dispatch mode is on the calling thread's mode stack:
    the pre-hook adds the module's name to the current set, the post-hook removes it. As in
    ModuleTracker, a module whose inputs require grad leaves the set again when their gradients have been computed,
    and one whose outputs require grad re-enters it when theirs are computed (``register_multi_grad_hook``'s rule,
    one ``_core.GradGate`` per module call registered with ``Tensor.register_hook`` on each of those tensors, as torch
    registers its hooks); the set is back to ``{"Global"}`` at the end of each backward. Modules are named from
    the first root they are seen under (ModuleTracker's rule, applied in C: ``name``)."""

    def __init__(self, mode, session=None):
        self.session = session  # the Session whose block this is (None: a tracker on its own)
        self.known: dict = {}  # module -> name; strong references, released at exit (close)
        self.seen: set = set()  # modules whose children are named
        self._handles: list = []
        regions = _Regions()
        self.c = _core.ModuleTracker(mode, torch._C._len_torch_dispatch_stack, torch._C._get_dispatch_stack_at,
                                     _leaves, functools.partial(_grad_accumulator, mode=mode),
                                     torch._C._current_graph_task_id,
                                     torch._C._will_engine_execute_node, self._queue_reset,
                                     torch.Tensor, torch.nn.Parameter, self.known, self.seen, register=_REGISTER,
                                     link=None if _LINK is None else _LINK + (regions.note, regions.of))
        self.name = self.c.name  # name(module): its name, naming the modules under it first when new

    @property
    def module_id(self) -> int:
        """Id of the current set of modules (an index into ``sets``)."""
        return self.c.module_id

    @property
    def parents(self) -> frozenset:
        return self.c.parents

    @property
    def sets(self) -> list:
        return self.c.sets

    def _queue_reset(self):
        """A module re-enters the set in a backward: the set goes back to ``{"Global"}`` when the backward ends
        (ModuleTracker's engine callback). The C tracker calls this once, until that reset has run."""
        torch.autograd.Variable._execution_engine.queue_callback(self.c.reset)

    def enter(self):
        _MODULE_HOOKS.enter(self)
        self._handles = list(_MODULE_HOOKS.handles)

    def exit(self):
        """Idempotent: a second call (after an interrupted first one) finishes what the first left."""
        _MODULE_HOOKS.exit(self)
        self._handles = []
        try:
            self.c.remove_hooks()  # gradient hooks on tensors that outlive the block
        finally:
            self.c.close()


class _ModuleHooks:
    """The open blocks' module hooks: one forward pre-hook and one forward hook for the whole process, under two
    handle ids reserved for them, put into torch's global hook tables while a block is open and taken out when the
    last one closes; each call is passed to every open block's tracker.

    Dynamo traces the global hooks of every module call it compiles (a compiled function that calls modules), and
    guards on those tables: the same functions under the same ids in every block keep its guards valid, so a compiled
    step is compiled once for all blocks (hooks registered anew per block recompiled it each block, until torch's
    recompile limit ran it eagerly). While Dynamo traces, the hooks do nothing (``is_compiling()`` is a constant to
    it): the function compiles whole, with ``fullgraph=True`` too; the graph's ops carry their modules themselves.

    ``enter`` and ``exit`` run under the block lock (``roofline._core.Block``: blocks of all threads enter and leave
    one at a time) and are idempotent: the hooks are in torch's tables exactly while some tracker is open, whatever
    line an interrupted call stopped at (the block calls ``exit`` again until it completes)."""

    def __init__(self):
        self.trackers: list = []
        self.handles: tuple = ()
        # the open trackers' C methods, rebuilt when a block opens or closes: a hook call reads one attribute
        self.pre: tuple = ()
        self.post: tuple = ()

    def _reserve(self):
        import torch.nn.modules.module as mm
        from torch.utils.hooks import RemovableHandle

        # ids from torch's own counter, so no other hook ever gets them
        # the forward hook is called with the call's keyword arguments too (the model's attention_mask: Session.see)
        self.handles = (RemovableHandle(mm._global_forward_pre_hooks),
                        RemovableHandle(mm._global_forward_hooks, extra_dict=mm._global_forward_hooks_with_kwargs))

    def enter(self, tracker):
        if not self.handles:
            self._reserve()
        if tracker not in self.trackers:
            self.trackers.append(tracker)
        self._sync()

    def exit(self, tracker):
        if tracker in self.trackers:
            self.trackers.remove(tracker)
        self._sync()

    def _sync(self):
        """The trackers' methods, and the two hooks in torch's tables if and only if a tracker is open."""
        import torch.nn.modules.module as mm

        self.pre = tuple(t.c.pre for t in self.trackers)
        self.post = tuple(t.c.post for t in self.trackers)
        # the blocks that look for the token layout in their model's keyword arguments (Session.see)
        self.watch = tuple(t.session for t in self.trackers if t.session is not None and t.session.watching())
        if self.trackers:
            mm._global_forward_pre_hooks[self.handles[0].id] = _forward_pre_hook
            # the keyword flag first: the hook is never in the table without it (an interrupt between the two lines
            # would otherwise leave torch calling it without the keyword arguments); removal takes the hook out first
            mm._global_forward_hooks_with_kwargs[self.handles[1].id] = True
            mm._global_forward_hooks[self.handles[1].id] = _forward_hook
        else:
            for h in self.handles:
                h.remove()


_MODULE_HOOKS = _ModuleHooks()
_is_compiling = getattr(torch.compiler, "is_compiling", None) or torch._dynamo.is_compiling


def _forward_pre_hook(mod, args):
    if not _is_compiling():
        for pre in _MODULE_HOOKS.pre:
            pre(mod, args)


def _forward_hook(mod, args, kwargs, out):
    if not _is_compiling():
        for post in _MODULE_HOOKS.post:
            post(mod, args, out)
        for s in _MODULE_HOOKS.watch:
            if mod is s.model:
                s.see(kwargs)


def _register_steps():
    """What the C tracker needs to take Tensor.register_hook's steps itself for plain tensors (see register_arm in
    csrc/binding_track.c): the hook dict's type, the class whose counter numbers hooks, the torch function check.
    None where torch lacks what they mirror (the counter, the check, the ``_register_hook_dict`` method that C++
    autograd nodes such as AccumulateGrad share): the tracker then calls the method. Pinned by
    tests/test_tracking.py."""
    from torch.utils.hooks import RemovableHandle

    has_tf = getattr(torch._C, "_has_torch_function_unary", None)
    if has_tf is None or not isinstance(getattr(RemovableHandle, "next_id", None), int) \
            or not hasattr(torch._C._functions.AccumulateGrad, "_register_hook_dict"):
        return None
    return (collections.OrderedDict, RemovableHandle, has_tf)


_REGISTER = _register_steps()


def _recompute_hooks(hooks) -> bool:
    """Whether the saved-tensor hooks in force inside a backward (``(pack, unpack)``) say that a forward runs again:
    torch.utils.checkpoint's recomputation hooks (non-reentrant and selective activation checkpointing:
    ``_recomputation_hook``), or a checkpoint's own packing hooks (``_checkpoint_hook``: a checkpointed forward that
    runs inside a backward is a nested checkpoint's, inside a recomputation). Other hooks pushed on top of them inside
    the recomputation (``save_on_cpu`` in a checkpointed function) hide it: only the top of torch's stack is
    readable (docs/concepts.md). Pinned by tests/test_attribution.py."""
    return getattr(hooks[0], "__qualname__", "").startswith(("_recomputation_hook.", "_checkpoint_hook."))


def _checkpoint_frame(hooks, kind: str):
    """The ``_CheckpointFrame`` of torch.utils.checkpoint (non-reentrant) that the saved-tensor hooks ``hooks``
    (``(pack, unpack)``, the top of torch's stack) belong to, when they are ``kind``'s (``"_checkpoint_hook"``: the
    checkpointed function's forward runs; ``"_recomputation_hook"``: its recomputation), else None. The pack hook
    closes over the frame (``frame``, or a weak reference ``target_frame_ref``); the recomputation's is wrapped by
    ``torch._dynamo.disable``."""
    pack = hooks[0] if hooks else None
    if not getattr(pack, "__qualname__", "").startswith(kind + "."):
        return None
    pack = inspect.unwrap(pack)
    code, cells = getattr(pack, "__code__", None), getattr(pack, "__closure__", None) or ()
    for name, cell in zip(code.co_freevars if code is not None else (), cells):
        try:
            if name == "frame":
                return cell.cell_contents
            if name == "target_frame_ref":
                return cell.cell_contents()
        except ValueError:  # an empty cell
            return None
    return None


class _Regions:
    """The module set each non-reentrant checkpoint's function was called in, for its recomputation: a plain
    function's ops outside any module (a DenseNet layer's ``cat``) are recomputed while the backward of a module
    inside it runs, and belong to the caller's set, not to that module's. Noted when the first module forward inside
    the checkpointed function starts (the set before it is the caller's); a function that calls no module needs no
    note (its nodes, the one that recomputes it included, were all made in the caller's set). Frames are held weakly:
    a checkpoint's saved inputs are not kept alive by the block."""

    __slots__ = ("sets",)

    def __init__(self):
        self.sets = weakref.WeakKeyDictionary()

    def note(self, hooks, mid):
        frame = _checkpoint_frame(hooks, "_checkpoint_hook")
        if frame is not None and frame not in self.sets:
            self.sets[frame] = mid

    def of(self, hooks):
        frame = _checkpoint_frame(hooks, "_recomputation_hook")
        return None if frame is None else self.sets.get(frame)


def _link_steps():
    """What the C tracker needs to credit each backward op to the module whose forward created its autograd node
    (csrc/link.h): the sequence counter, the node running now, the saved-tensor hooks in force (recomputation) and
    the grad mode. None where torch lacks one of them: backward ops are then credited as torch's ModuleTracker
    credits them, and the report says so (``meta["attribution"]``)."""
    ag = torch._C._autograd
    steps = (getattr(ag, "_get_sequence_nr", None), getattr(torch._C, "_current_autograd_node", None),
             getattr(ag, "_top_saved_tensors_default_hooks", None), _recompute_hooks, torch.is_grad_enabled)
    return None if any(s is None for s in steps) else steps


_LINK = _link_steps()


def _leaves(obj):
    return tree_flatten(obj)[0]


def _grad_accumulator(t, mode=None):
    """The node a leaf tensor's gradient is accumulated by (the tracker reads a non-leaf's ``grad_fn`` itself),
    reached as torch's ModuleTracker reaches it, through a view. That view is the bookkeeping of the block whose
    ``mode`` it is: it goes through that mode alone (as FlopCounterMode sees its tracker's view), every other mode
    off the stack meanwhile (in C: no interrupt can leave them off), so that an enclosing block, a nested one, or a
    mode of the caller's does not count it."""
    with torch.enable_grad():
        if mode is None:
            return _view_node(t)
        return _core.call_alone(mode, _view_node, t, _STACK[0], _STACK[2], _STACK[3])


def _view_node(t):
    return t.view_as(t).grad_fn.next_functions[0][0]


class _Mode(TorchDispatchMode):
    """Records one row per op call. A session binds ``Session.dispatch`` (C) as the instance's __torch_dispatch__:
    per call it finds the op in a table keyed by the OpOverload, runs it, and calls the recorder, with no Python
    frame. The method below is the path for ops not in that table (first calls, decomposed ops, Python formulas,
    higher-order operators)."""

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


def _runner(func):
    """What runs an OpOverload: its C++ op, unless OpOverload.__call__ may divert the call (a Python dispatcher)."""
    op = getattr(func, "_op", None)
    if op is None or getattr(func, "_pyobj_dispatcher", None) is not None:
        return func
    return op


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
            e0 = torch.cuda.Event(enable_timing=True)
            e1 = torch.cuda.Event(enable_timing=True)
            e0.record()
            out = func(*args, **kwargs) if kwargs else func(*args)
            e1.record()
            s.events.append((len(s.recorder), e0, e1))
            t0 = t1 = float("nan")
        else:
            t0 = _now()
            out = func(*args, **kwargs) if kwargs else func(*args)
            t1 = _now()
        mid, phase, note = s._where()
        s.recorder.record(idx, mid, phase, args, kwargs, out, t0 - s.t_base, t1 - s.t_base)
        s._noted(note)
        return out


_now = time.perf_counter
_COUNT_KEYS = COUNTS
_MAX_COUNT = (1 << 64) - 1  # the records hold unsigned 64-bit counts


def _formula_count(op: str, key: str, value) -> int:
    """One count returned by a user formula, checked: an int (a float would be truncated, a bool is a mistake),
    >= 0, and small enough for the record's 64-bit field (never stored modulo 2**64)."""
    try:
        if isinstance(value, bool):
            raise TypeError
        n = operator.index(value)
    except TypeError:
        raise TypeError(f"roofline formula for {op} returned {key}={value!r} ({type(value).__name__}); counts must "
                        "be ints") from None
    if n < 0:
        raise ValueError(f"roofline formula for {op} returned a negative count: {key}={n}")
    if n > _MAX_COUNT:
        raise OverflowError(f"roofline formula for {op} returned {key}={n}, which does not fit 64 bits")
    return n


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

# torch's record of whether a dispatch mode is active: module globals of torch.utils._python_dispatch that
# TorchDispatchMode.__enter__ sets, each with the per-mode deque its __exit__ restores it from (those this torch has).
# A block saves them before its mode is entered and puts them back itself (Session._leave_mode).
_MODE_FLAGS = tuple((name, queue) for name, queue in (
    ("_is_in_torch_dispatch_mode", "old_dispatch_mode_flags"),
    ("_is_in_non_infra_torch_dispatch_mode", "old_non_infra_dispatch_mode_flags"),
    ("_is_in_any_mode_without_ignore_compile_internals", "old_without_ignore_compile_internals_dispatch_mode_flags"),
) if hasattr(_python_dispatch, name))
_SET_COMPILE_FLAG = (getattr(_python_dispatch, "set_is_in_mode_without_ignore_compile_internals", None)
                     if any(n == "_is_in_any_mode_without_ignore_compile_internals" for n, _ in _MODE_FLAGS) else None)
# the dispatch mode stack's functions, as roofline._core.remove_mode takes them (all C: nothing can interrupt it)
_STACK = (torch._C._len_torch_dispatch_stack, torch._C._get_dispatch_stack_at,
          functools.partial(torch._C._pop_torch_dispatch_stack, None), torch._C._push_on_torch_dispatch_stack)

# The sessions whose mode is in (or going into) a dispatch mode stack, of every thread, in the order they were
# entered; changed only under the block lock (roofline._core.Block). torch's mode flags are process-wide while its
# mode stacks are per thread: for the flags, the open blocks of all threads are one stack (Session._leave_mode).
_FLAG_HOLDERS: list = []

# The blocks open in the current context (asyncio task, contextvars.Context), innermost last, as tokens
# (Session.token): a block entered where another context's block has its mode on this thread's stack is refused.
_OPEN: contextvars.ContextVar = contextvars.ContextVar("roofline_open_blocks", default=())

_INTERLEAVED = ("blocks on one thread must be left in the reverse order they were entered; blocks that interleave "
                "(asyncio tasks, or generators, each keeping a block open across a suspension) count each other's "
                "ops, so no report is made")


def _mode_flags(mode):
    """``(values, lengths)``: the values of :data:`_MODE_FLAGS` and the lengths of ``mode``'s deques, now."""
    return (tuple(getattr(_python_dispatch, name) for name, _ in _MODE_FLAGS),
            tuple(len(getattr(mode, queue, ())) for _, queue in _MODE_FLAGS))


def _set_mode_flags(values):
    for (name, _), value in zip(_MODE_FLAGS, values):
        setattr(_python_dispatch, name, value)
        if _SET_COMPILE_FLAG is not None and name == "_is_in_any_mode_without_ignore_compile_internals":
            _SET_COMPILE_FLAG(value)


def _mode_stash_codes() -> tuple:
    """The code of torch's context managers that take modes off a stack and put them back when they close."""
    import torch.overrides

    codes = []
    for mod, name in ((torch.overrides, "_pop_mode_temporarily"), (_python_dispatch, "_pop_mode_temporarily"),
                      (_python_dispatch, "_disable_current_modes")):
        fn = getattr(getattr(mod, name, None), "__wrapped__", None)
        if fn is not None and hasattr(fn, "__code__"):
            codes.append(fn.__code__)
    return tuple(codes)


_MODE_STASH_CODES = _mode_stash_codes()
_GENERATOR_CM_CODES = (contextlib._GeneratorContextManager.__enter__.__code__,
                       contextlib._GeneratorContextManager.__exit__.__code__)


def _settle_interrupted(exc):
    """Close torch's mode-stack context managers (``_pop_mode_temporarily``, ``_disable_current_modes``) that
    ``exc`` (with its context chain) cut off inside their own ``__enter__`` or ``__exit__``, between taking modes off
    and putting them back. Such a generator is suspended, and held only by the exception's traceback: left alone, it
    pushes its modes back when the traceback is freed, after the block has exited, and a block's mode would then stay
    on the stack for good. Closed now, it puts them back while the block can still take its own off. (An interrupt
    landing in torch code called from the block, e.g. ``Tensor.register_hook`` under the ``attention`` choice's
    function mode, does this.)"""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        tb = exc.__traceback__
        while tb is not None:
            frame = tb.tb_frame
            if frame.f_code in _GENERATOR_CM_CODES:
                gen = getattr(frame.f_locals.get("self"), "gen", None)
                if (getattr(gen, "gi_code", None) in _MODE_STASH_CODES
                        and inspect.getgeneratorstate(gen) == inspect.GEN_SUSPENDED):
                    gen.close()  # its finally: the modes back on the stack
            tb = tb.tb_next
        exc = exc.__context__


def _forget_flags(session):
    """Take ``session`` out of :data:`_FLAG_HOLDERS` (under the block lock)."""
    for i, s in enumerate(_FLAG_HOLDERS):
        if s is session:
            del _FLAG_HOLDERS[i]
            return


def _run_all(steps):
    """Call every step, even when one raises; then raise the first exception."""
    error = None
    for step in steps:
        try:
            step()
        except BaseException as e:  # noqa: BLE001 - re-raised below, once every step has run
            if error is None:
                error = e
    if error is not None:
        raise error


class Session:
    """State of one ``measure`` block: the recorder, op table, module sets, phase, hooks."""

    def __init__(self, model=None, timing="model", tokens=None):
        if timing not in ("model", "op", None):
            raise ValueError(f"measure: timing must be 'model', 'op' or None, got {timing!r}")
        self.model = model
        self.root_name = None  # the model's name (its class name), its modules' names are made from
        self.tokens = tokens  # the token layout (roofline.model._tokens.token_layout), given or seen
        self.tokens_unknown = None  # why the layout of the mask the model was called with is unknown
        self._seen = None  # (keyword, tensor, its version): a mask see() keeps until finish() reads it
        self.timing = timing
        self.events: list = []
        self.t_base = 0.0
        self.cuda_possible = False
        self.devices: set[str] = set()
        self.capture = CAPTURE
        self.recorder = (_core.Recorder(torch.Tensor, TORCH_DTYPES, storage=_storage_id, signatures=True)
                         if self.capture else _core.Recorder(torch.Tensor, TORCH_DTYPES))
        self.op_index: dict = {}      # OpOverload -> recorder op index (int) or a slow-path marker
        self.ops: list[OpInfo] = []   # by recorder op index
        self._opt_depth = 0
        self.mode = _TimedMode(self) if timing == "op" else _Mode(self)
        self.tracker = _Tracker(self.mode, self)
        # the per-op path in C; `phase` is OPTIMIZER inside optimizer.step, else None (forward/backward by autograd)
        self.dispatch = _core.Dispatch(self.tracker.c, self.recorder.record, _graph_task_id, _Mode.__torch_dispatch__,
                                       rows=self.recorder, adopt=self.adopt, **_reentry(self.mode))
        if timing != "op":  # bound to the mode, as the C++ dispatcher requires of a __torch_dispatch__
            self.mode.__torch_dispatch__ = types.MethodType(self.dispatch, self.mode)
        self._handles = []
        self.python_formulas: dict[int, object] = {}
        self.collectives = _collectives.Collectives()  # one row per collective call (network bytes, group size)
        self.wall_time = None
        self._t0 = self._t1 = None
        self._flags = None  # torch's mode flags before the mode was entered; None while it is not (see enter)
        self._left: list = []  # what leaving the mode found above it (roofline._core.remove_mode's log)
        self.token = None  # this block in _OPEN, once it is entered
        self.interleaved = None  # why the block gives no report, when it interleaved with another
        self.fix_records = None  # records -> records: Collector.fix of the block's compiled graphs, or None
        self.compiled = self.compiled_summary = None  # torch.compile'd code under the block (roofline.compiled._compiled)
        self._compiled_left = None  # its collector once stopped, until finish() summarises it

    # ---- per-op resolution (once per OpOverload) -------------------------------------------------------------
    def resolve(self, func, args=(), allow_decompose=True):
        if isinstance(func, torch._ops.HigherOrderOperator):
            hop_formula = _formulas.HOPS.get(func.name())  # built-in formula (FlexAttention), else unknown
            info = OpInfo(name=f"higher_order.{func.name()}", packet=f"higher_order.{func.name()}",
                          kind="unknown" if hop_formula is None else "python")
            idx = self.recorder.add_op(_core.K_ZERO, name=info.name)
            self.ops.append(info)
            self.op_index[func] = ("hop", idx, None) if hop_formula is None else ("builtin", idx, hop_formula, None)
            return self.op_index[func]
        self._note_devices(args)
        if func in _DECLINE:
            self.op_index[func] = _DECLINED
            return _DECLINED
        user = tuple(_resolve.USER.items())
        idx = self._plain(func, user, allow_decompose)
        if idx is not None:
            return idx
        marker = _collectives.resolve(self, func, OpInfo)  # collectives, fsdp copies
        if marker is not None:
            return marker
        schema, res = _resolved(func, user)
        if (allow_decompose and not res.registered and func is not torch.ops.prim.device.default
                and _has_composite_kernel(func)):
            # Same rule as FlopCounterMode: an op with a CompositeImplicitAutograd kernel is decomposed and its
            # parts are counted.
            self.op_index[func] = _DECOMPOSE
            return _DECOMPOSE
        builtin = None if res.registered else _formulas.OPS.get(func._schema.name)  # roofline/counting/_formulas.py
        info = OpInfo(name=str(func), packet=_packet_name(func), kind=res.kind if builtin is None or res.spec else
                      "python", packet_obj=func._overloadpacket)
        if res.formula is not None:
            # the formula gives the counts; the argument layout and the arguments written in place are for the
            # dataflow rows (attach)
            written = 0
            for n in schema.written:
                i = schema.names.index(n) if n in schema.names else 64
                written |= (1 << i) if i < 64 else 0
            idx = self.recorder.add_op(_core.K_ZERO, name=info.name, kwnames=schema.kwnames or None,
                                       kwpos=len(schema.names) - schema.kwonly, write_mask=written)
            self.python_formulas[idx] = res.formula
            self.ops.append(info)
            self.op_index[func] = ("python", idx, res.formula)
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
        self.op_index[func] = idx if builtin is None else ("builtin", idx, builtin, schema.names)
        if builtin is None and res.error is None:
            # the recorder entry as add_op's positional arguments: a later block's add_op then parses no keywords
            entry = (spec["kind"], spec.get("p1"), spec.get("p2"), spec.get("noread_mask", 0),
                     spec.get("write_mask", 0), spec.get("flags", 0), spec["kwnames"], spec["kwpos"], spec["name"],
                     spec.get("params"))
            _PLAIN[func] = (user, dict(name=info.name, packet=info.packet, kind=info.kind, packet_obj=info.packet_obj),
                            entry, not res.registered and func is not torch.ops.prim.device.default)
        return self.op_index[func]

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
        idx = self._plain(func, tuple(_resolve.USER.items()))
        if idx is not None:
            self._note_devices(args or ())
            self.dispatch.set_op(func, idx, _runner(func))
        return idx

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
        if marker[0] == "builtin":
            return self._run_builtin(marker, func, args, kwargs)
        _, idx, formula = marker
        t0 = _now()
        out = func(*args, **kwargs)
        t1 = _now()
        self._record_python(idx, formula, args, kwargs, out)
        if self.timing == "op":  # CPU clock; CUDA ops with a Python formula are timed on the host
            self.recorder.set_times(len(self.recorder) - 1, t0 - self.t_base, t1 - self.t_base)
        return out

    def _run_builtin(self, marker, func, args, kwargs):
        """An op with a built-in Python formula (roofline/counting/_formulas.py): counts from the formula, or from the op's C
        formula when the built-in one declines the call (returns None)."""
        t0 = _now()
        out = func(*args, **kwargs)
        t1 = _now()
        mid, phase, note = self._where()
        self.record_builtin(marker, mid, phase, args, kwargs, out)
        self._noted(note)
        if self.timing == "op":
            self.recorder.set_times(len(self.recorder) - 1, t0 - self.t_base, t1 - self.t_base)
        return out

    def record_builtin(self, marker, module_id, phase, args, kwargs, out):
        """One record of an op with a built-in Python formula (the marker :meth:`resolve` returned), in the module
        set ``module_id``: an eager call, or an op of a compiled graph with its fake values."""
        _, idx, formula, names = marker
        try:
            if names is None:  # a higher-order operator
                res = formula(args, kwargs, out)
            else:
                res = formula(_formulas.bind(names, args, kwargs), out)
        except (ValueError, IndexError):  # arguments the formula cannot count: an error record, never a guess
            res = {"status": _formulas.E_ARGS}
        except Exception:  # noqa: BLE001 - inputs a built-in formula did not foresee: an error record (r.errors), never
            # a failed training step; ROOFLINE_DEBUG=1 raises it for a bug report
            if os.environ.get("ROOFLINE_DEBUG"):
                raise
            res = {"status": _formulas.E_ARGS}
        if res is None:
            self.recorder.record(idx, module_id, phase, args, kwargs or None, out)
        else:
            name = self.ops[idx].name
            vals = tuple(_formula_count(name, k, res.get(k, 0)) for k in _COUNT_KEYS + ("flop_counter_flops",))
            t = next((a for a in args if isinstance(a, torch.Tensor)), out if isinstance(out, torch.Tensor) else None)
            dt = TORCH_DTYPES.get(t.dtype, 0) if t is not None else 0
            self.recorder.append(idx, module_id, phase, dt, *vals, int(res.get("status", 0)))
            if self.capture:
                self.recorder.attach(args, kwargs or {}, out)

    def _record_python(self, idx, formula, args, kwargs, out, where=None):
        """One record of an op with a user formula, in the module set and phase ``where`` (``(module id, phase)``:
        an op of a compiled graph), else where :meth:`_where` puts an eager call."""
        res = formula(*args, **{**kwargs, "out": out})  # an out= overload's own `out` is the result too
        name = self.ops[idx].name
        if isinstance(res, Cost):
            res = {k: getattr(res, k) for k in _COUNT_KEYS}
        elif isinstance(res, dict):
            unknown = set(res) - set(_COUNT_KEYS)
            if unknown:
                raise ValueError(f"roofline formula for {name} returned unknown keys {sorted(map(str, unknown))}")
        else:
            raise TypeError(f"roofline formula for {name} must return a dict or roofline.Cost, "
                            f"got {type(res).__name__}")
        vals = tuple(_formula_count(name, k, res.get(k, 0)) for k in _COUNT_KEYS)
        t = next((a for a in args if isinstance(a, torch.Tensor)), out if isinstance(out, torch.Tensor) else None)
        dt = TORCH_DTYPES.get(t.dtype, 0) if t is not None else 0
        mid, phase, note = self._where() if where is None else (*where, None)
        self.recorder.append(idx, mid, phase, dt, *vals, 0)
        self._noted(note)
        if self.capture:
            self.recorder.attach(args, kwargs, out)

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

    def _active_here(self) -> bool:
        """Whether this measure block is active on the calling thread (hooks are process-global; modes are not)."""
        return self.mode in _mode_stack()

    def _opt_pre(self, optimizer, args, kwargs):
        if self._active_here():
            self._opt_depth += 1  # nested steps (a wrapper optimizer calling its inner one) stay in the phase
            self.phase = OPTIMIZER
            # step(closure): the closure's forward and backward (LBFGS, Lightning's automatic optimization) are
            # not the optimizer's work: they run in their own phases. torch passes the optimizer as args[0].
            if len(args) > 1 and callable(args[1]):
                return (args[0], self._outside_optimizer(args[1]), *args[2:]), kwargs
            if callable(kwargs.get("closure")):
                return args, {**kwargs, "closure": self._outside_optimizer(kwargs["closure"])}
        return None

    def _outside_optimizer(self, closure):
        """``closure`` run with the phase set by autograd again (forward, backward), then the optimizer's."""
        @functools.wraps(closure)
        def run(*a, **k):
            saved = self.phase
            self.phase = None
            try:
                return closure(*a, **k)
            finally:
                self.phase = saved

        return run

    def _opt_post(self, optimizer, args, kwargs):
        if self._active_here() and self._opt_depth > 0:
            self._opt_depth -= 1
            if self._opt_depth == 0:
                self.phase = None

    # ---- enter / exit ---------------------------------------------------------------------------------------------
    # roofline.measure's block (roofline/_measure.py, a roofline._core.Block) calls these: prepare() and
    # closing() outside the block lock; enter() under it, and release() (until it completes) when enter raised;
    # release() under it at exit. Each global change enter() makes is recorded before it is made, and release()
    # undoes each from what is there, so an exception on any line of enter() or release() leaves nothing behind.
    def prepare(self):
        """Before the block is entered, outside the block lock: the compiled-code view's hooks installed when Inductor
        is imported (roofline.compiled._compiled.prepare); the device synchronised when the block is timed."""
        _compiled.prepare()  # Inductor's hooks, once per process: not under the block lock
        self.cuda_possible = torch.cuda.is_available()
        if self.timing is not None:
            _sync_all(self.cuda_possible)

    def enter(self):
        """Install the block: module and optimizer hooks, the compiled-code view, then the dispatch mode. RuntimeError
        (before anything is installed) when a block of another asyncio task or context is open on this thread."""
        self._check_stack()
        self.token = object()
        self.tracker.enter()
        if self.model is not None:
            self.root_name = self.tracker.name(self.model)  # name the model's modules from its root
        self._hook_optimizer()
        self.tracker.module_id  # noqa: B018 - interns {"Global"} as module set 0
        if self.timing == "op" and self.cuda_possible:
            self._base_event = torch.cuda.Event(enable_timing=True)
            self._base_event.record()
        _collectives.install(self)  # DTensor's sharding propagation is not counted

        _compiled.start(self)  # sets self.compiled first
        self._t0 = self.t_base = time.perf_counter()
        _FLAG_HOLDERS.append(self)  # recorded first: _leave_mode takes it out whatever follows
        self._flags = _mode_flags(self.mode)
        self.mode.__enter__()
        _OPEN.set(_OPEN.get() + (self.token,))
        self.compiled.entering = False

    def watching(self) -> bool:
        """Whether the block looks for the token layout in its model's keyword arguments (none was given)."""
        return self.tokens is None and self.model is not None

    def see(self, kwargs):
        """The model's call ended (the global forward hook, which torch gives the call's keyword arguments): its
        ``attention_mask`` (or a packed batch's ``cu_seq_lens_q``) is the token layout, on the first call that has
        one. No hook of the model's own is added (one would change the guards of compiled code that calls it).

        Nothing here is an op of the block: a CPU tensor's values are read at once with torch's Python dispatch key
        excluded (no mode, this block's included, sees the read); a tensor on another device is kept and read by
        :meth:`finish`, once the block is left and its time taken (a device copy inside the block would synchronise
        it), unless it was changed in place meanwhile. A meta or fake tensor holds no values: the layout is then
        unknown (``tokens_unknown`` says why)."""
        if self.tokens is not None or self._seen is not None or not kwargs or not self._active_here():
            return
        cu = kwargs.get("cu_seq_lens_q")
        mask = kwargs.get("attention_mask")
        if isinstance(cu, torch.Tensor) and cu.dim() == 1:
            self._seen = ("cu_seq_lens_q", cu, _version(cu))
        elif isinstance(mask, torch.Tensor) and mask.dim() == 2:
            self._seen = ("attention_mask", mask, _version(mask))
        else:
            return
        t = self._seen[1]
        if t.device.type == "cpu" or _tokens.values_unknown(t) is not None:
            self._read_seen()

    def _read_seen(self):
        """The token layout from the tensor :meth:`see` kept (``tokens``), or why there is none (``tokens_unknown``);
        a mask that is not a token mask (an additive or 4-D one) gives neither."""
        name, t, version = self._seen
        self._seen = None
        why = _tokens.values_unknown(t)
        if why is None and version != _version(t):
            why = "a tensor changed in place during the block, before it could be read"
        if why is not None:
            self.tokens_unknown = f"the model's {name} is {why}: which of its tokens are real is unknown"
            return
        try:
            values = _tokens.tensor_values(t, name)
            self.tokens = _tokens.token_layout({"cu_seqlens": values} if name == "cu_seq_lens_q" else values)
        except ValueError:  # not a token mask: no layout rather than a guessed one
            pass

    def _check_stack(self):
        mine = _OPEN.get()
        for m in _mode_stack():
            if isinstance(m, _Mode) and m.s.token is not None and m.s.token not in mine:
                raise RuntimeError(
                    "roofline.measure: a measure block of another asyncio task (or contextvars context) is open on "
                    "this thread; its ops and this block's would be counted by both. Blocks on one thread must nest "
                    "within one task: measure each task's work while no other task's block is open (or run the "
                    "tasks in threads)")

    def _hook_optimizer(self):
        from torch.optim import optimizer as optim
        from torch.utils.hooks import RemovableHandle

        for table, hook in ((optim._global_optimizer_pre_hooks, self._opt_pre),
                            (optim._global_optimizer_post_hooks, self._opt_post)):
            h = RemovableHandle(table)
            self._handles.append(h)  # recorded before the hook is in the table
            table[h.id] = hook

    def closing(self, exc_type, exc):
        """At exit, the mode still in place: the block's end time (after synchronising the device); when the block
        ends with an exception, torch's mode-stack context managers it cut off are completed first
        (:func:`_settle_interrupted`)."""
        if exc is not None:
            _settle_interrupted(exc)
        if exc_type is None and self.timing is not None and self._t1 is None and self._t0 is not None:
            _sync_all(self.cuda_possible)
            self._t1 = time.perf_counter()

    def release(self):
        """Take out everything :meth:`enter` installed, from whatever state it is in. Idempotent; every step runs
        even when one raises (the first exception is raised after)."""
        _run_all((self._leave_mode, self._leave_context, self._stop_compiled, self._unhook_optimizer,
                  self.tracker.exit, self._reset_phase, self._uninstall_collectives))

    def finish(self):
        """After :meth:`release` of a block that completed, outside the block lock: its wall time, per-op CUDA times
        and the compiled-code view (``compiled_summary``; its warnings are issued here)."""
        if self._compiled_left is not None:
            coll, self._compiled_left = self._compiled_left, None
            self.compiled_summary = _compiled.summary(coll)
            if coll.fix_calls:
                self.fix_records = coll.fix  # the compiled graphs' records as the step's eager ops count
        if self._t1 is not None:
            self.wall_time = self._t1 - self._t0
        if self.events:
            self._resolve_events()
        if self._seen is not None:  # a mask on a device: read now that the block is left and timed
            self._read_seen()

    def _leave_mode(self):
        """Take the mode off this thread's stack (roofline._core.remove_mode: one step, wherever it is) and put
        torch's mode flags back. The flags are process-wide, so the open blocks of all threads are one stack for them
        (:data:`_FLAG_HOLDERS`, in entry order): a block entered after this one, in any thread, inherits the flags
        this one saved (it puts them back when it leaves); only the last entered block still open writes them.
        When modes entered after it are still above it on this thread, they stay, in their order, and the lowest
        inherits the flags it saved; the block (and every block among them) is then marked ``interleaved``.
        Idempotent."""
        flags = self._flags
        if flags is None:
            _forget_flags(self)
            return
        _core.remove_mode(self.mode, *_STACK, self._left)
        values, lengths = flags
        above = self._left[0] if self._left else ()
        if above:
            names = ", ".join(type(m).__name__ for m in above)
            self.interleaved = (f"roofline.measure: this block was left while {len(above)} dispatch mode(s) entered "
                                f"after it were still open above it on this thread ({names}): {_INTERLEAVED}")
            for m in above:
                if isinstance(m, _Mode) and m.s.token is not None:
                    m.s.interleaved = ("roofline.measure: a block entered before this one was left while this one "
                                       f"was open on the same thread: {_INTERLEAVED}")
            low = above[0]  # its saved flags were this mode's; from now on they are those from before this mode
            for (_, queue), value in zip(_MODE_FLAGS, values):
                q = getattr(low, queue, None)
                if q:
                    q[-1] = value
        i = next((i for i, s in enumerate(_FLAG_HOLDERS) if s is self), None)
        if i is not None:  # else done by an earlier, interrupted call
            later = [s for s in _FLAG_HOLDERS[i + 1:] if s._flags is not None]
            foreign = above and not (isinstance(above[0], _Mode) and above[0].s._flags is not None)
            if later and not (foreign and later[0].mode in above):
                # the next block entered (a block of another thread, or this thread's lowest mode above it) stands
                # where this one stood; a mode above it that is not a block's has the flags in its deque (above)
                later[0]._flags = (values, later[0]._flags[1])
            elif not above:
                _set_mode_flags(values)
            _forget_flags(self)
        for (_, queue), n in zip(_MODE_FLAGS, lengths):
            q = getattr(self.mode, queue, None)
            while q is not None and len(q) > n:
                q.pop()
        self._flags = None

    def _leave_context(self):
        mine = _OPEN.get()
        if self.token is not None and self.token in mine:
            _OPEN.set(tuple(t for t in mine if t is not self.token))

    def _stop_compiled(self):
        if self.compiled is not None:
            _compiled.stop(self, self.compiled)
            self._compiled_left = self.compiled  # summarised by finish(), outside the block lock
            self.compiled = None

    def _unhook_optimizer(self):
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def _reset_phase(self):
        self.phase = None

    def _uninstall_collectives(self):
        _collectives.uninstall(self)

    def _resolve_events(self):
        """Turn the CUDA event pairs into op start/end times, in seconds from the block's start (the device was
        synchronised at entry, so the base event and the host clock start together)."""
        base = self._base_event
        for i, e0, e1 in self.events:
            self.recorder.set_times(i, base.elapsed_time(e0) / 1e3, base.elapsed_time(e1) / 1e3)
        self.events.clear()


def _version(t):
    """A tensor's version counter (bumped by every in-place change), or None where it has none (an inference
    tensor)."""
    try:
        return t._version
    except RuntimeError:
        return None


def attribution_meta(session) -> dict:
    """``meta["attribution"]`` of a finished block: how backward ops were credited to modules (``"autograd"``: to the
    module whose forward created each op's autograd node; ``"module_tracker"``: torch's ModuleTracker rule, where
    torch lacks what linking needs), the rows credited to another module set than ModuleTracker's (their
    ModuleTracker set, for FlopCounterMode's structure) and the backward rows that could not be linked."""
    fcm, unlinked = session.attribution()
    out = {"method": "autograd" if _LINK is not None and not session.tracker.c.links_broken else "module_tracker",
           "flop_counter_rows": fcm[0::2], "flop_counter_modules": fcm[1::2], "unlinked_rows": unlinked}
    if session.root_name is not None:  # FlopCounterMode's names where the root was not the first module entered
        names, note = _fcm_names.replay(session.model, session.root_name, session.module_sets)
        if names:
            out["flop_counter_names"] = names
        if note:
            out["names_note"] = note
    if session.tracker.c.links_broken:
        out["note"] = ("autograd's node numbers went backwards during the block (forward ops of several threads): "
                       "backward ops after that are credited as torch's ModuleTracker credits them")
    return out


class _SignatureTexts:
    """A block's call signatures, formatted on demand: calling it returns the recorder's texts (a list of str)."""

    __slots__ = ("_recorder",)

    def __init__(self, recorder):
        self._recorder = recorder

    def __call__(self) -> list:
        return self._recorder.signatures


def _sync_all(cuda_possible):
    """Wait for every CUDA device, where CUDA is in use. ``cuda_possible``: ``torch.cuda.is_available()``, read once
    per block (it does not change within a process; whether CUDA is initialised does)."""
    if cuda_possible and torch.cuda.is_initialized():
        torch.cuda.synchronize()


_OVERHEAD: dict = {}


def instrumentation_overhead(timing) -> dict:
    """Per-op cost of the instrumentation itself, measured once per process on a tiny CPU op: ``counting_per_op_s``
    (the dispatch mode, formula and record) and ``timing_per_op_s`` (the clock reads of ``timing="op"``). Reports
    show it beside the wall time, which includes it."""
    if "counting_per_op_s" not in _OVERHEAD:
        n = 200

        def loop():
            t0 = time.perf_counter()
            for _ in range(n):
                torch.add(a, b)
            return (time.perf_counter() - t0) / n

        from torch.utils._python_dispatch import _disable_current_modes

        with _disable_current_modes():  # outside any mode the caller has active (an enclosing measure, say)
            a, b = torch.ones(4, device="cpu"), torch.ones(4, device="cpu")
            bare = min(loop() for _ in range(3))
            s = Session(None, timing=None)
            s.mode.__enter__()
            try:
                counted = min(loop() for _ in range(3))
            finally:
                s.mode.__exit__(None, None, None)
        t0 = time.perf_counter()
        for _ in range(1000):
            _now()
            _now()
        _OVERHEAD["counting_per_op_s"] = max(counted - bare, 0.0)
        _OVERHEAD["timing_per_op_s"] = (time.perf_counter() - t0) / 1000
        if torch.cuda.is_available():  # the CUDA path creates and records two events per op instead
            t0 = time.perf_counter()
            for _ in range(200):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                e1.record()
            _OVERHEAD["cuda_timing_per_op_s"] = (time.perf_counter() - t0) / 200
    out = {"counting_per_op_s": _OVERHEAD["counting_per_op_s"]}
    if timing == "op":
        out["timing_per_op_s"] = _OVERHEAD["timing_per_op_s"]
        if "cuda_timing_per_op_s" in _OVERHEAD:
            out["cuda_timing_per_op_s"] = _OVERHEAD["cuda_timing_per_op_s"]
    return out
