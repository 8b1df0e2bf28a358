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

Causal attention is counted as the fused kernels do it (``S(S+1)/2`` pairs per head); grouped-query attention
(``enable_gqa=True``, or K/V with fewer heads) as the query heads' work, with K and V read at their own size. Calls
on real tensors are left alone: the kernel that runs is the one counted.
"""

from __future__ import annotations

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


def _mode_class():
    import torch
    import torch.nn.functional as F
    from torch.overrides import TorchFunctionMode

    sdpa = F.scaled_dot_product_attention

    class AttentionBackend(TorchFunctionMode):
        """Counts ``F.scaled_dot_product_attention`` on meta/fake tensors with the kernel ``backend``."""

        def __init__(self, backend: str):
            super().__init__()
            self.backend = backend
            self.calls: dict[str, int] = {}  # kernel counted -> calls (a fallback is named with its reason)

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is not sdpa:
                return func(*args, **kwargs)
            q = args[0] if args else kwargs.get("query")
            if not isinstance(q, torch.Tensor) or not _is_placeholder(q):
                self.calls["as run (real tensors)"] = self.calls.get("as run (real tensors)", 0) + 1
                return func(*args, **kwargs)
            return self._count(*args, **kwargs)

        def _count(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                   enable_gqa=False):
            backend = self.backend
            label = backend
            if backend == "flash" and attn_mask is not None:
                backend, label = "efficient", "efficient (flash takes no attn_mask)"
            self.calls[label] = self.calls.get(label, 0) + 1
            aten = torch.ops.aten
            if backend == "math":
                return aten._scaled_dot_product_attention_math(query, key, value, attn_mask, dropout_p, is_causal,
                                                               None, scale=scale, enable_gqa=enable_gqa)[0]
            if query.dim() == 4 and key.size(-3) != query.size(-3) and not enable_gqa:
                raise RuntimeError(f"scaled_dot_product_attention: query has {query.size(-3)} heads and key "
                                   f"{key.size(-3)}: pass enable_gqa=True for grouped-query attention")
            if backend == "flash":
                return aten._scaled_dot_product_flash_attention(query, key, value, dropout_p, is_causal, False,
                                                                scale=scale)[0]
            need_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value))
            return aten._scaled_dot_product_efficient_attention(query, key, value, attn_mask, need_grad, dropout_p,
                                                                is_causal, scale=scale)[0]

    return AttentionBackend


_CLASS = None


def mode(backend: str):
    """A fresh :class:`AttentionBackend` mode for ``backend`` (one of :data:`BACKENDS`)."""
    global _CLASS
    if _CLASS is None:
        _CLASS = _mode_class()
    return _CLASS(check(backend))
