"""Which modules are running while a measure block is open: the block's module tracker (``_Tracker``, the per-call
work in C), the two process-global module forward hooks every open block shares (``_ModuleHooks``), and what the C
tracker needs of torch to register gradient hooks and to link backward ops to the module whose forward made them
(``_REGISTER``, ``_LINK``, the checkpoint regions)."""

from __future__ import annotations

import collections
import functools
import inspect
import weakref

import torch
from torch.utils._pytree import tree_flatten

from roofline import _core
from roofline._capture._modestack import _STACK


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
