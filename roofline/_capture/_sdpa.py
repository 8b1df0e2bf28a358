"""Which attention kernel is counted where no kernel runs: ``measure(..., attention="flash")``.

On the ``meta`` device (and under ``FakeTensorMode`` on a machine without the target's kernels)
``torch.nn.functional.scaled_dot_product_attention`` has no fused kernel to choose, so PyTorch runs the *math*
path: the whole ``S x S`` score matrix as ``bmm`` + softmax in the inputs' dtype, the causal mask applied
afterwards, and K/V repeated for grouped-query attention. A GPU runs a fused kernel that skips the masked half and
never writes the scores. :class:`AttentionBackend` is a ``TorchFunctionMode`` that sends each call on meta or fake
tensors to the kernel the user names, so the counts are those of the kernel the target runs:

* ``"flash"``: ``aten._scaled_dot_product_flash_attention`` (FlashAttention-2; forward 2 products per (query,
  key) pair, backward 5: it recomputes the scores). It takes no explicit mask: a call with ``attn_mask`` is
  counted on ``"efficient"``, as PyTorch's dispatcher would choose, and the report lists it.
* ``"efficient"``: ``aten._scaled_dot_product_efficient_attention`` (memory-efficient attention, takes a mask).
* ``"math"``: ``aten._scaled_dot_product_attention_math``, what meta runs anyway, made explicit.

The chosen kernel is counted where PyTorch's CUDA dispatcher could run it; else the one it would pick, and
``meta["attention"]["calls"]`` names the substitution with its reason: flash needs float16/bfloat16, a head
dimension of at most 256, no explicit mask and, when causal, as many queries as keys (else memory-efficient
attention); memory-efficient attention takes float16/bfloat16/float32 with equal query and key head dimensions,
both query and value head dimensions multiples of 8 elements for 16-bit inputs and of 4 for float32 (the alignment
PyTorch asks of a GPU of compute capability 8.0 or above); both fused kernels need as many query, key and value
heads, or, with ``enable_gqa=True``, key and value heads equal and dividing the query heads (else the math path).
3-D inputs ``(heads, seq, dim)`` are counted as batch 1, and ``attn_mask`` with ``is_causal=True`` raises, as
PyTorch does. Calls made inside other torch functions
(``F.multi_head_attention_forward`` of ``nn.MultiheadAttention``) are redirected too: see
:class:`AttentionBackend`.

Causal attention is counted as the fused kernels do it (``S(S+1)/2`` pairs per head); grouped-query attention
(``enable_gqa=True``, or K/V with fewer heads) as the query heads' work, with K and V read at their own size. Calls
on real tensors are left alone: the kernel that runs is the one counted.
"""

from __future__ import annotations

import threading

from roofline import _core
from roofline._util import _warn

BACKENDS = ("flash", "efficient", "math")


def check(attention) -> str | None:
    """``attention`` as given to ``measure``: None (count what runs) or one of :data:`BACKENDS`."""
    if attention is None:
        return None
    if not isinstance(attention, str):
        raise TypeError(f"attention must be one of {BACKENDS} or None, got {type(attention).__name__}")
    if attention not in BACKENDS:
        raise ValueError(f"attention must be one of {BACKENDS} or None, got {attention!r}")
    return attention


def _is_placeholder(t) -> bool:
    """A tensor whose data does not exist: on meta, or a FakeTensor."""
    if t.device.type == "meta":
        return True
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(t, FakeTensor)


_HALF = ("torch.float16", "torch.bfloat16")


def _heads(query, key, value, enable_gqa) -> str | None:
    """Why neither fused kernel takes these heads (PyTorch's ``check_batch_size_and_num_heads_dense``), or None."""
    hq, hk, hv = query.size(-3), key.size(-3), value.size(-3)
    if hq == hk == hv:
        return None
    if not enable_gqa:
        return f"fused kernels need as many query, key and value heads without enable_gqa, got {hq}, {hk}, {hv}"
    if hk != hv or hk == 0 or hq % hk:
        return f"grouped-query heads need key and value heads equal and dividing the query heads, got {hq}, {hk}, {hv}"
    return None


def _kernel(backend, query, key, value, attn_mask, is_causal, enable_gqa=False) -> tuple[str, str]:
    """The kernel PyTorch's CUDA dispatcher would run for this call (4-D inputs) when ``backend`` is asked for, and
    the label the report gives it: ``(kernel, label)``. Flash needs float16/bfloat16, equal query, key and value
    head dimensions of at most 256, no explicit mask and, when causal, as many queries as keys; memory-efficient
    attention takes float32 and masks, equal query and key head dimensions, query and value head dimensions
    aligned (8 elements for 16-bit inputs, 4 for float32); both need the heads :func:`_heads` accepts; anything
    else runs the math path."""
    dt = str(query.dtype)
    heads = _heads(query, key, value, enable_gqa) if backend != "math" else None
    if heads is not None:
        return "math", f"math ({heads})"
    if backend == "flash":
        why = None
        d = (query.size(-1), key.size(-1), value.size(-1))
        if attn_mask is not None:
            why = "flash takes no attn_mask"
        elif dt not in _HALF:
            why = f"flash needs float16/bfloat16, inputs are {dt.replace('torch.', '')}"
        elif d[0] != d[1] or d[0] != d[2]:
            why = f"flash needs equal query, key and value head_dim, got {d[0]}, {d[1]}, {d[2]}"
        elif d[0] > 256:
            why = f"flash needs head_dim <= 256, got {d[0]}"
        elif is_causal and query.size(-2) != key.size(-2):
            why = f"flash is not causal with {query.size(-2)} queries and {key.size(-2)} keys"
        if why is None:
            return "flash", "flash"
        backend, reason = "efficient", why
    else:
        reason = None
    if backend == "efficient":
        align = 8 if dt in _HALF else 4  # PyTorch's minimum_gemm_alignment on compute capability 8.0 and above
        dq, dv = query.size(-1), value.size(-1)
        if (dt in _HALF + ("torch.float32",) and dq == key.size(-1) and dq > 0 and dv > 0 and not dq % align
                and not dv % align):
            return "efficient", "efficient" if reason is None else f"efficient ({reason})"
        why = (f"efficient needs float16/bfloat16/float32, equal query/key head_dim and query/value head_dim "
               f"multiples of {align}")
        return "math", f"math ({reason + '; ' if reason else ''}{why})"
    return "math", "math"


def _mode_class():
    import torch
    import torch.nn.functional as F
    from torch.overrides import TorchFunctionMode

    sdpa = torch._C._nn.scaled_dot_product_attention  # what F.scaled_dot_product_attention is when nothing swaps it

    class AttentionBackend(TorchFunctionMode):
        """Counts ``F.scaled_dot_product_attention`` on meta/fake tensors with the kernel ``backend``.

        Two hooks, one count per call: the mode sees calls through any binding of the function, and, because a
        ``TorchFunctionMode`` is switched off while it handles a call (so calls made *inside* another torch function,
        e.g. ``F.multi_head_attention_forward`` of ``nn.MultiheadAttention``, never reach it), the module global
        ``torch.nn.functional.scaled_dot_product_attention`` is replaced while any block with an ``attention``
        choice is open, in any thread, by one wrapper that sends each call to the innermost such block of the
        calling thread (:func:`_redirect`), or to the original function in a thread without one; the original is
        restored exactly when the last of them closes.

        ``__enter__`` and ``__exit__`` run under the block lock (``roofline._core.Block``) and take no lock of their
        own; ``__exit__`` is idempotent and undoes an ``__enter__`` stopped on any line (each step is recorded
        before it is made)."""

        def __init__(self, backend: str):
            super().__init__()
            self.backend = backend
            self.calls: dict[str, int] = {}  # kernel counted -> calls (a fallback is named with its reason)
            self._passing = 0  # >0 while the wrapper runs the original on real tensors (the mode must not count)
            self._thread_modes = None  # the list of the entering thread's modes it was added to

        def __enter__(self):
            _hold(self)
            self._thread_modes = _thread_modes()
            self._thread_modes.append(self)
            torch._C._push_on_torch_function_stack(self)
            return self

        def __exit__(self, exc_type, exc, tb):
            _remove_function_mode(self)
            modes = self._thread_modes
            if modes is not None and self in modes:
                modes.remove(self)
            _release(self)
            return False

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is not sdpa or self._passing:
                return func(*args, **kwargs)
            return self._call(func, args, kwargs, from_wrapper=False)

        def _call(self, func, args, kwargs, from_wrapper):
            q = args[0] if args else kwargs.get("query")
            if not isinstance(q, torch.Tensor) or not _is_placeholder(q):
                self.calls["as run (real tensors)"] = self.calls.get("as run (real tensors)", 0) + 1
                if not from_wrapper:
                    return func(*args, **kwargs)
                self._passing += 1
                try:
                    return func(*args, **kwargs)
                finally:
                    self._passing -= 1
            return self._count(*args, **kwargs)

        def _count(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                   enable_gqa=False):
            if attn_mask is not None and is_causal:
                raise RuntimeError("scaled_dot_product_attention: explicit attn_mask should not be set when "
                                   "is_causal=True (PyTorch refuses it too)")
            squeeze = query.dim() == 3 and key.dim() == 3 and value.dim() == 3
            if squeeze:  # (heads, seq, dim): batch 1, as PyTorch's fused kernels take it
                query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
            backend = self.backend
            if backend != "math" and not (query.dim() == key.dim() == value.dim() == 4):
                backend, label = "math", f"math (fused kernels take 4-D inputs, got {query.dim()}-D)"
            else:
                backend, label = _kernel(backend, query, key, value, attn_mask, is_causal, enable_gqa)
            self.calls[label] = self.calls.get(label, 0) + 1
            aten = torch.ops.aten
            if backend == "math":
                ranked = min(query.dim(), key.dim(), value.dim()) >= 3
                heads = [t.size(-3) for t in (query, key, value)] if ranked else []
                if heads and not enable_gqa and any(h not in (1, heads[0]) for h in heads[1:]):
                    # PyTorch refuses these too (their scores do not broadcast); say what would make them valid
                    raise RuntimeError(f"scaled_dot_product_attention: query has {heads[0]} heads, key {heads[1]} "
                                       f"and value {heads[2]}: pass enable_gqa=True for grouped-query attention")
                out = aten._scaled_dot_product_attention_math(query, key, value, attn_mask, dropout_p, is_causal,
                                                              None, scale=scale, enable_gqa=enable_gqa)[0]
                return out.squeeze(0) if squeeze else out
            hq = query.size(-3)  # heads _kernel accepted: equal, or grouped-query ones with enable_gqa
            if backend == "flash":
                out = aten._scaled_dot_product_flash_attention(query, key, value, dropout_p, is_causal, False,
                                                               scale=scale)[0]
            else:
                if key.size(-3) != hq and not _efficient_takes_gqa():
                    # this torch's memory-efficient kernel has no grouped-query support (its backward refuses
                    # fewer K/V heads): K/V are repeated to the query heads, and those copies are counted
                    key = key.repeat_interleave(hq // key.size(-3), dim=-3)
                    value = value.repeat_interleave(hq // value.size(-3), dim=-3)
                    self.calls[label] -= 1
                    if not self.calls[label]:
                        del self.calls[label]
                    label = f"{label} (K/V repeated: this torch's efficient kernel takes no grouped-query heads)"
                    self.calls[label] = self.calls.get(label, 0) + 1
                need_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value))
                out = aten._scaled_dot_product_efficient_attention(query, key, value, attn_mask, need_grad,
                                                                   dropout_p, is_causal, scale=scale)[0]
            return out.squeeze(0) if squeeze else out

    return AttentionBackend


_CLASS = None

# The redirection's process-wide state; changed only under the block lock (roofline._core.Block).
_HOLDERS: list = []  # the open AttentionBackend modes, of every thread
_ORIGINAL: list = []  # [F.scaled_dot_product_attention as it was before the first of them] while the wrapper is in
_LOCAL = threading.local()  # .modes: the calling thread's open modes, innermost last


def _thread_modes() -> list:
    modes = getattr(_LOCAL, "modes", None)
    if modes is None:
        modes = _LOCAL.modes = []
    return modes


def _redirect(*args, **kwargs):
    """``torch.nn.functional.scaled_dot_product_attention`` while a block with an ``attention`` choice is open in
    any thread: the call goes to the innermost such block of this thread, else to the original function."""
    modes = getattr(_LOCAL, "modes", None)
    original = _redirect.__wrapped__  # what it replaced (kept after it is taken out, for references to it)
    if modes:
        return modes[-1]._call(original, args, kwargs, from_wrapper=True)
    return original(*args, **kwargs)


def _hold(mode):
    """``mode`` needs the wrapper: installed by the first holder (the module global saved first). The wrapper never
    wraps itself: when the module global is the wrapper already (a patch made while a block was open, undone after
    the last one closed, put it back), the wrapper's own ``__wrapped__`` is what it stands for."""
    import torch.nn.functional as F

    if not any(m is mode for m in _HOLDERS):
        _HOLDERS.append(mode)
    if not _ORIGINAL:
        current = F.__dict__.get("scaled_dot_product_attention")
        if current is _redirect:  # put back by someone who replaced it while a block was open: what it wraps
            current = _redirect.__dict__.get("__wrapped__")
            if current is None or current is _redirect:
                import torch

                current = torch._C._nn.scaled_dot_product_attention
        _redirect.__wrapped__ = current
        _redirect.__doc__ = getattr(current, "__doc__", None)
        _ORIGINAL[:] = [current]  # recorded before the wrapper goes in: _release undoes a hold stopped anywhere
        F.scaled_dot_product_attention = _redirect


def _release(mode):
    """``mode`` no longer needs the wrapper: the original is put back when no mode is left. Idempotent."""
    import torch.nn.functional as F

    for i, m in enumerate(_HOLDERS):
        if m is mode:
            del _HOLDERS[i]
            break
    if _HOLDERS or not _ORIGINAL:
        return
    if F.__dict__.get("scaled_dot_product_attention") is _redirect:  # else someone replaced it since: theirs stays
        F.scaled_dot_product_attention = _ORIGINAL[0]
    del _ORIGINAL[:]


def _remove_function_mode(mode):
    """Take ``mode`` off this thread's torch function mode stack if it is there, in one step (the modes above it are
    pushed back in their order)."""
    import torch


    _core.remove_mode(mode, torch._C._len_torch_function_stack, torch._C._get_function_stack_at,
                      torch._C._pop_torch_function_stack, torch._C._push_on_torch_function_stack, [])


_GQA = []


def _efficient_takes_gqa() -> bool:
    """Whether this torch's memory-efficient attention runs forward and backward with fewer K/V heads than query
    heads (probed once, on meta tensors: no memory, no compute)."""
    if not _GQA:
        import torch

        from torch.utils._python_dispatch import _disable_current_modes

        try:
            with _disable_current_modes():  # never recorded by an enclosing measure block, the inputs' making neither
                q = torch.empty(1, 4, 8, 16, device="meta", requires_grad=True)
                kv = torch.empty(1, 2, 8, 16, device="meta", requires_grad=True)
                out = torch.ops.aten._scaled_dot_product_efficient_attention(q, kv, kv, None, True, 0.0, False)[0]
                torch.autograd.grad(out.sum(), (q, kv))
            _GQA.append(True)
        except (RuntimeError, ValueError):
            _GQA.append(False)
    return _GQA[0]


def mode(backend: str):
    """A fresh :class:`AttentionBackend` mode for ``backend`` (one of :data:`BACKENDS`). Called before the block is
    entered (``Measure._prepare``, outside the block lock): the memory-efficient kernel's grouped-query support is
    probed here, before any op of the block can be recorded."""
    global _CLASS
    if _CLASS is None:
        _CLASS = _mode_class()
    backend = check(backend)
    if backend != "math":
        _efficient_takes_gqa()
    return _CLASS(backend)


AS_RUN = "as run (real tensors)"


def redirected(calls: dict) -> int:
    """How many calls the mode counted on a kernel of its choosing (calls on real tensors are not)."""
    return sum(int(n) for k, n in calls.items() if k != AS_RUN)


def has_math_attention(op_names) -> bool:
    """Whether the ops include attention computed as products and a softmax (PyTorch's math path, or by hand)."""
    names = set(op_names)
    return (any(n.startswith(("aten.bmm", "aten.baddbmm")) for n in names)
            and any("softmax" in n for n in names))


def label(chosen: dict, op_names) -> str:
    """What ``measure(..., attention=...)`` did, for a report: the backend, how many calls it redirected, the
    fallbacks with their reasons; and, when no call was redirected, what the counted attention really is."""
    backend, calls = chosen["backend"], dict(chosen.get("calls") or {})
    n = redirected(calls)
    as_run = calls.get(AS_RUN, 0)
    tail = f"; also {AS_RUN} x{as_run}" if as_run else ""
    if n == 0:
        if has_math_attention(op_names):
            return (f"math (bmm + softmax: the full score matrix; {backend} was chosen but no "
                    f"scaled_dot_product_attention call was redirected){tail}")
        return f"none ({backend} chosen; no scaled_dot_product_attention call on meta/fake tensors){tail}"
    s = f"{backend} (chosen at count time; {n} scaled_dot_product_attention call{'s' if n != 1 else ''} redirected"
    other = [k for k in calls if k not in (backend, AS_RUN)]
    if other:
        s += ": " + ", ".join(f"{k} x{calls[k]}" for k in [backend] + other if k in calls)
    return s + ")" + tail


def warn_if_unredirected(chosen: dict, op_names) -> None:
    """Warn when a backend was chosen, no call was redirected, and the block computed attention as bmm + softmax:
    the counts are the math path's, not the chosen kernel's."""
    if redirected(chosen.get("calls") or {}) == 0 and has_math_attention(op_names):
        _warn.warn(f"attention={chosen['backend']!r}: no scaled_dot_product_attention call was redirected, but "
                   f"the block computed attention as bmm + softmax (the full score matrix): those counts are the "
                   f"math path's (attention written by hand, or need_weights=True in nn.MultiheadAttention)")
