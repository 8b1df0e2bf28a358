"""Torch's dispatch-mode stack and its process-wide flags, as the blocks keep them: the flags saved when a block's
mode is entered and put back when it leaves (the open blocks of all threads are one stack for them:
``_FLAG_HOLDERS``), the blocks open in the current context (``_OPEN``), torch's mode-stack context managers that an
exception cut off (closed before the block leaves), and ``_run_all`` (every release step runs)."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect

import torch
import torch.utils._python_dispatch as _python_dispatch


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
