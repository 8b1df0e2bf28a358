"""Compiled models under ``measure``: count what ``torch.compile`` runs, graph by graph and kernel by kernel.

A dispatch mode on the stack makes Dynamo skip every frame it would compile (the model then runs eagerly). A
measure block's mode therefore declares ``ignore_compile_internals()`` when the hooks below are in place, so that
Dynamo keeps compiling and running the compiled code, and the block counts each compiled graph itself:

* at compile time, ``torch._inductor.compile_fx._compile_fx_inner`` (called once per forward or backward graph
  Inductor compiles) is wrapped: the aten-level FX graph AOTAutograd hands to Inductor is read (each node's target,
  the fake tensors of ``node.meta["val"]`` for its arguments and result, its ``nn_module_stack``) before Inductor's
  own passes change it, and the kernels Inductor generates for it are recorded from its scheduler (the fused nodes
  of each kernel, the buffers they read and write);
* at run time, ``CompiledFxGraph.__call__`` is wrapped: while a measure block is active on the calling thread, the
  block's mode is taken off the stack for the call (the graph's extern calls are then not counted twice), and the
  graph's aten ops are recorded with the same C cost model as eager ops, with their module paths and phase.

A graph compiled before the block (none of the compile-time hooks saw it) is compiled again privately when it first
runs in a block (``roofline._compiled._recover``), the block's clock stopped meanwhile, and then counted like the
others. A graph the block cannot count (not recoverable, or a torch whose internals differ) is never run eagerly in
silence: the block warns, and the report is marked incomplete (``meta["incomplete"]``) and says why.

The work is split by job: ``_graph`` (the snapshot of a graph at compile time), ``_kernels`` (Inductor's kernels and
their buffers), ``_hooks`` (the hooks put into Inductor), ``_run`` (what is taken away and put back around a compiled
call), ``_collector`` (the per-block counting and the report's compiled part). This module holds the block's side:
:func:`prepare`, :func:`start`, :func:`stop`, :func:`summary`.
"""

from __future__ import annotations

import sys

import torch

from roofline._compiled._collector import Collector
from roofline._compiled._hooks import _ACTIVE, CompiledViewUnavailable, _collector_here, _state, install
from roofline._compiled._run import _hide_hooks
from roofline._util import _warn


def _dynamo_counters():
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return None
    return counters


def prepare() -> None:
    """Called before a measure block is entered, outside the block lock: installs the hooks when Inductor is already
    imported (as :meth:`Collector.ready` would when the block's mode is entered), so that the block's entry under the
    lock only checks them. What cannot be installed is reported where the block asks (``ready``)."""
    if not _state["installed"] and _state["error"] is None and "torch._inductor.compile_fx" in sys.modules:
        try:
            install()
        except CompiledViewUnavailable:
            pass


def start(session) -> "Collector":
    """Called when a measure block is entered, under the block lock, before its mode is pushed. The hooks are
    installed before that (:func:`prepare`, when Inductor is already imported) or when Dynamo first asks the mode;
    this gives the block's mode the
    ``ignore_compile_internals`` answer Dynamo asks for: True while the hooks are in place (Dynamo keeps compiling
    and running compiled code; the block counts the graphs), False otherwise (Dynamo then runs the frame eagerly,
    the block counts the eager ops, and a warning says why)."""
    coll = Collector(session)
    session.compiled = coll  # known to the block before anything global changes: the block's release stops it
    coll.entering = True
    mode = session.mode

    def ignore_compile_internals():
        ok, reason = coll.ready()
        if not ok and not coll.entering:
            coll.eager_fallback(reason)
        return ok

    mode.ignore_compile_internals = ignore_compile_internals  # an instance attribute: Dynamo asks the instance
    coll.frames_before = _break_count(_dynamo_counters())
    if not _ACTIVE:  # the first open block turns the caches off, the last one to stop puts them back
        _disable_caches(_CONFIG_SAVED)
    _ACTIVE.append(coll)
    _name_compiled_root(session)
    _hide_hooks_in_compiled(session, coll)
    return coll


def _hide_hooks_in_compiled(session, coll):
    """The block's module hooks are process-global: Dynamo would trace them in every module call of a compiled
    forward (a graph break at each, and guards that differ from a bare run's). While a compiled module of the
    measured model runs, they are taken out of torch's global hook tables (the compiled graphs carry their module
    paths themselves) and put back after it."""
    model = session.model
    if model is None:
        return
    from torch._dynamo.eval_frame import OptimizedModule

    tracker = session.tracker

    def enter():
        if _collector_here() is not coll:
            return _noop
        return _hide_hooks(tracker)

    # the model's modules were named at entry: `known` holds them (a dict walk, not a module-tree walk per block);
    # the OptimizedModule check is made once per module type, and most modules have no compiled _call_impl
    if isinstance(model, OptimizedModule):
        compiled = [model]
    else:
        wrapped = {t for t in {type(m) for m in tracker.known} if issubclass(t, OptimizedModule)}
        compiled = [m for m in tracker.known if type(m) in wrapped or m.__dict__.get("_compiled_call_impl") is not None]
    for m in compiled:
        if isinstance(m, OptimizedModule):  # torch.compile(module)
            ctxs = [getattr(m, "dynamo_ctx", None)]
        else:  # module.compile(): the Dynamo context is in the closure of the compiled _call_impl
            fn = m.__dict__["_compiled_call_impl"]
            ctxs = [c.cell_contents for c in getattr(fn, "__closure__", None) or ()
                    if hasattr(c.cell_contents, "enter_exit_hooks")]
        for ctx in ctxs:
            hooks = getattr(ctx, "enter_exit_hooks", None)
            if isinstance(hooks, list):
                coll.ctx_hooks.append((hooks, enter))  # recorded first: stop() removes it wherever this stops
                hooks.append(enter)


def _noop():
    return None


_CONFIG_SAVED: list = []  # (module, key, value before the blocks) of the settings _disable_caches changed


def _disable_caches(saved):
    """Inside a block, graphs are compiled for real: a graph served whole from AOTAutograd's or Inductor's cache
    never reaches the hooks (its ops and kernels would be unknown). The generated code is the same. Each setting's
    value is appended to ``saved`` before it is changed (one entry per setting)."""
    for modname, key in (("torch._functorch.config", "enable_autograd_cache"),
                         ("torch._inductor.config", "fx_graph_cache")):
        mod = sys.modules.get(modname)
        if mod is None:
            try:
                mod = __import__(modname, fromlist=["_"])
            except ImportError:
                continue
        if hasattr(mod, key) and not any(m is mod and k == key for m, k, _ in saved):
            saved.append((mod, key, getattr(mod, key)))
            setattr(mod, key, False)


def _restore_config(saved):
    """Put back what :func:`_disable_caches` saved, emptying ``saved`` (an entry leaves once its value is back)."""
    while saved:
        mod, key, value = saved[-1]
        setattr(mod, key, value)
        saved.pop()


def _name_compiled_root(session):
    """``measure(torch.compile(model))``: name the modules from the model inside, as in eager."""
    model = session.model
    inner = getattr(model, "_orig_mod", None)
    if inner is None or not isinstance(inner, torch.nn.Module):
        return
    tr = session.tracker
    name = type(inner).__name__
    tr.known[model] = name
    tr.known[inner] = name
    tr.seen.add(model)
    tr.name(inner)


def _break_count(counters) -> int:
    if counters is None:
        return 0
    return int(sum(counters.get("graph_break", {}).values()))


def stop(session, coll) -> None:
    """Called when a measure block is left, under the block lock (roofline._core.Block): the collector and its
    Dynamo context hooks out, the compile settings back once no block is left, the graph-break count read. Cheap and
    idempotent; the block's summary is built afterwards, outside the lock (:func:`summary`)."""
    if coll is None:
        return
    try:
        _ACTIVE.remove(coll)
    except ValueError:
        pass
    if not _ACTIVE:
        _restore_config(_CONFIG_SAVED)
    for hooks, fn in coll.ctx_hooks:
        try:
            hooks.remove(fn)
        except ValueError:
            pass
    coll.ctx_hooks.clear()
    if coll.breaks is None:
        coll.breaks = _break_count(_dynamo_counters()) - (coll.frames_before or 0)


def summary(coll) -> dict | None:
    """The compiled view of a block that has been left (:func:`stop`): None when no compiled code ran in it (its
    report is an eager one). Warns about what it could not count (at the user's line: roofline._util._warn)."""
    if coll is None or (not coll.graphs and not coll.uncounted and coll.eager_reason is None):
        return None
    breaks = coll.breaks or 0
    try:
        out = coll.summary(breaks)
    except Exception as e:  # noqa: BLE001 - the counts are in the records; only the kernel view is lost
        _warn.warn(f"roofline: the compiled-kernel view could not be built ({type(e).__name__}: {e}); the "
                   "op counts are unaffected", RuntimeWarning)
        out = {"graphs": len(coll.graphs), "graph_calls": sum(coll.graph_calls.values()), "kernels": [],
               "uncounted_graph_calls": coll.uncounted, "eager_fallback": coll.eager_reason,
               "graph_breaks": breaks, "problems": [f"kernel view failed: {e}"], "incomplete": coll.incomplete()}
    if coll.problems:
        _warn.warn("roofline: " + "; ".join(dict.fromkeys(coll.problems)), RuntimeWarning)
    return out
