"""What is taken away around compiled code that runs inside a measure block, and put back after it: the block's
dispatch mode (the graph's own aten calls are not counted twice), the block's module hooks (Dynamo would trace them),
and, for ``timing="op"``, the generated kernels of the graph's module, wrapped by host-clock timers for one call."""

from __future__ import annotations

import time


def _remove_mode(mode):
    """Take ``mode`` off the dispatch-mode stack (with the modes above it, which are pushed back at once).
    Returns what :func:`_restore_mode` needs; None when the mode is not on the stack."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack, _pop_mode, _push_mode

    stack = _get_current_dispatch_mode_stack()
    if mode not in stack:
        return None
    above = []
    while True:
        m = _pop_mode()
        if m is mode:
            break
        above.append(m)
    for m in reversed(above):
        _push_mode(m)
    return above


def _restore_mode(mode, above):
    from torch.utils._python_dispatch import _pop_mode, _push_mode

    if above is None:
        return
    popped = [_pop_mode() for _ in above]
    _push_mode(mode)
    for m in reversed(popped):
        _push_mode(m)


def _timed_call(compiled, orig, inputs, kernels):
    """Run a compiled graph with each generated kernel timed on the host clock: the kernel functions in the
    generated module's globals are wrapped for the call and put back after it."""
    g = _module_globals(compiled)
    times: dict = {}
    if g is None:
        return orig(compiled, inputs), times
    saved = {}
    now = time.perf_counter

    def note(ki, t0, t1):
        prev = times.get(ki)
        times[ki] = (t0, t1) if prev is None else (prev[0], prev[1] + (t1 - t0))

    # extern kernels by the dotted name the generated code calls them by ("extern_kernels.mm", or a fallback op
    # "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default"): the global the name starts from is
    # replaced, for the call, by a stand-in that times calls of exactly those names
    externs: dict = {}
    for ki, k in enumerate(kernels):
        if k.get("extern") and isinstance(k.get("python_kernel_name"), str):
            externs.setdefault(k["python_kernel_name"], []).append(ki)
    counter: dict = {}
    for root in {n.split(".", 1)[0] for n in externs}:
        obj = g.get(root)
        if obj is not None:
            saved[root] = obj
            g[root] = _TimedPath(obj, root, externs, note, counter)
    # generated kernels by name: the n-th call of a name is its n-th call site (``instance``)
    generated: dict = {}
    for ki, k in enumerate(kernels):
        if not k.get("extern"):
            generated.setdefault(k.get("name", ""), []).append(ki)
    for name, slots in generated.items():
        fn = g.get(name)
        if fn is None:
            continue

        def timed(*a, _fn=fn, _slots=slots, _name=name, **kw):
            i = counter.get(_name, 0)
            counter[_name] = i + 1
            t0 = now()
            r = _fn(*a, **kw)
            note(_slots[min(i, len(_slots) - 1)], t0, now())
            return r

        saved[name] = fn
        g[name] = timed
    try:
        out = orig(compiled, inputs)
    finally:
        g.update(saved)
    return out, times


class _TimedPath:
    """Stands for a global of a generated module (``extern_kernels``, ``torch``) during a timed call: attribute
    chains leading to an extern kernel's dotted name are followed, the kernel itself is timed (the n-th call of a
    name is the n-th extern kernel of that name Inductor generated code for), anything else is the real object."""

    __slots__ = ("_obj", "_path", "_slots", "_note", "_counter")

    def __init__(self, obj, path, slots, note, counter):
        self._obj, self._path, self._slots, self._note, self._counter = obj, path, slots, note, counter

    def __getattr__(self, attr):
        v = getattr(self._obj, attr)
        path = f"{self._path}.{attr}"
        slots = self._slots.get(path)
        if slots and callable(v):
            counter, note = self._counter, self._note

            def timed(*a, **kw):
                i = counter.get(path, 0)
                counter[path] = i + 1
                t0 = time.perf_counter()
                r = v(*a, **kw)
                if i < len(slots):
                    note(slots[i], t0, time.perf_counter())
                return r

            return timed
        prefix = path + "."
        if any(k.startswith(prefix) for k in self._slots):
            return _TimedPath(v, path, self._slots, self._note, self._counter)
        return v


def _module_globals(compiled):
    fn = getattr(compiled, "current_callable", None)
    for _ in range(4):
        g = getattr(fn, "__globals__", None)
        if g is not None and "call" in g and g.get("call") is not None:
            return g
        fn = getattr(fn, "__wrapped__", None) or getattr(fn, "func", None)
        if fn is None:
            break
    return None


def _hide_hooks(tracker):
    """Take the block's module hooks out of torch's global hook tables; returns what puts them back."""
    saved = []
    for h in tracker._handles:
        d = h.hooks_dict_ref()
        if d is not None and h.id in d:
            saved.append((d, h.id, d.pop(h.id)))

    def restore():
        for d, k, fn in saved:
            d[k] = fn

    return restore
