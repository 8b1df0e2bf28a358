"""Which token positions of a batch are real: the layout :func:`roofline.measure`'s ``tokens`` argument and
:meth:`roofline.Report.useful_work` take (roofline/_analysis/_padding.py uses it)."""

from __future__ import annotations

import sys

import numpy as np

from roofline._datamodel import _document


def token_layout(tokens) -> dict:
    """``{"batch", "seq_len", "lengths", "packed"}`` from what says which tokens are real:

    * an attention mask, ``(B, S)``, 1 or True on real tokens (any array-like, a torch tensor included; left or
      right padding, or holes: each row's real count is its sum);
    * ``{"lengths": [...], "seq_len": S}``: the real length of each sequence in a batch padded to ``S``;
    * ``{"cu_seqlens": [0, l1, l1 + l2, ...]}``: a packed batch (no padding), its sequences' boundaries.

    ValueError naming what is wrong otherwise: the layout returned is one :data:`roofline._datamodel._document.TOKENS`
    accepts (the rule a saved report's ``meta["tokens"]`` is loaded under), so what a block is given is what its
    report can be saved and loaded with. A tensor's values are read without going through any dispatch mode (an open
    ``measure`` block does not count them); a meta or fake tensor holds none: ValueError."""
    layout = _layout(tokens)
    try:
        return _document.TOKENS(layout, "tokens")
    except _document.Invalid as e:
        raise ValueError(f"{e} (as a token layout: {_describe(layout)})") from None


def _describe(layout: dict) -> str:
    n = len(layout["lengths"])
    return f"batch {_document.show(layout['batch'])}, seq_len {_document.show(layout['seq_len'])}, {n} length(s)"


def _layout(tokens) -> dict:
    if isinstance(tokens, dict):
        extra = set(tokens) - {"lengths", "seq_len", "cu_seqlens"}
        if extra:
            raise ValueError(f"tokens: unknown keys {sorted(map(str, extra))}; give an attention mask, "
                             "{'lengths': [...], 'seq_len': S} or {'cu_seqlens': [...]}")
        if "cu_seqlens" in tokens:
            cu = _ints(tokens["cu_seqlens"], "tokens['cu_seqlens']")
            if len(cu) < 2 or cu[0] != 0 or any(b < a for a, b in zip(cu, cu[1:])):
                raise ValueError("tokens['cu_seqlens'] must start at 0 and not decrease, with at least one sequence, "
                                 f"got {cu[:8]}")
            if cu[-1] == 0:
                raise ValueError(f"tokens['cu_seqlens'] holds no token (its sequences are all empty), got {cu[:8]}")
            lengths = [b - a for a, b in zip(cu, cu[1:])]
            return {"batch": 1, "seq_len": cu[-1], "lengths": lengths, "packed": True}
        if "lengths" not in tokens or "seq_len" not in tokens:
            raise ValueError("tokens: give both 'lengths' and 'seq_len' (or 'cu_seqlens' for a packed batch)")
        lengths = _ints(tokens["lengths"], "tokens['lengths']")
        s = tokens["seq_len"]
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1:
            raise ValueError(f"tokens['seq_len'] must be an int >= 1, got {s!r}")
        if not lengths or any(n > s for n in lengths):
            raise ValueError(f"tokens['lengths'] must be a non-empty list of lengths <= seq_len {s}, got "
                             f"{lengths[:8]}")
        return {"batch": len(lengths), "seq_len": int(s), "lengths": lengths, "packed": False}
    if _is_tensor(tokens):
        tokens = tensor_values(tokens, "tokens")
    try:
        mask = np.asarray(tokens)
    except Exception as e:  # noqa: BLE001 - whatever the object is, the message names it
        raise ValueError(f"tokens must be an attention mask (B, S), {{'lengths', 'seq_len'}} or {{'cu_seqlens'}}, "
                         f"got {type(tokens).__name__}") from e
    if mask.ndim != 2 or mask.size == 0 or mask.dtype.kind not in "biuf":
        raise ValueError(f"tokens: an attention mask must be a non-empty 2-D array (batch, seq_len) of 0/1, got "
                         f"shape {mask.shape} of {mask.dtype}")
    if not np.isin(mask, (0, 1)).all():
        raise ValueError("tokens: an attention mask holds 0 (padding) and 1 (real tokens) only; an additive mask "
                         "(0 / -inf) or a 4-D mask is not a token mask")
    lengths = [int(n) for n in mask.astype(bool).sum(axis=1).tolist()]
    return {"batch": int(mask.shape[0]), "seq_len": int(mask.shape[1]), "lengths": lengths, "packed": False}


def _is_tensor(v) -> bool:
    torch = sys.modules.get("torch")  # a torch tensor implies torch is imported
    return torch is not None and isinstance(v, torch.Tensor)


def values_unknown(t) -> str | None:
    """Why the values of torch tensor ``t`` cannot be read (a meta tensor, a fake one, another tensor subclass
    without data of its own), else None. Reads only metadata: no op is dispatched."""
    import torch

    from torch._subclasses.fake_tensor import is_fake

    if is_fake(t):
        return "a fake tensor (FakeTensorMode)"
    if t.device.type == "meta":
        return "a meta tensor"
    if type(t) not in (torch.Tensor, torch.nn.Parameter):
        return f"a tensor subclass ({type(t).__name__})"
    if t.layout != torch.strided:
        return f"a {t.layout} tensor"
    return None


def tensor_values(t, name: str) -> np.ndarray:
    """The values of torch tensor ``t`` as a NumPy array, read with torch's Python dispatch key excluded: no
    dispatch mode (an open ``measure`` block's, FakeTensorMode) sees the copy, the detach or the device transfer.
    ValueError naming ``name`` where ``t`` holds no readable values (:func:`values_unknown`)."""
    import torch

    why = values_unknown(t)
    if why is not None:
        raise ValueError(f"{name} is {why}: it holds no values to count real tokens from; give "
                         "{'lengths': [...], 'seq_len': S} (or {'cu_seqlens': [...]}) instead")
    keys = torch._C.DispatchKeySet(torch._C.DispatchKey.Python) | torch._C.DispatchKeySet(
        torch._C.DispatchKey.PythonTLSSnapshot)
    with torch._C._ExcludeDispatchKeyGuard(keys), torch._C.DisableTorchFunction(), torch.no_grad():
        return t.detach().cpu().numpy()


def _ints(v, name: str) -> list:
    if _is_tensor(v):
        v = tensor_values(v, name).tolist()
    elif isinstance(v, np.ndarray):
        v = v.tolist()
    if not isinstance(v, (list, tuple)) or any(isinstance(x, bool) or not isinstance(x, (int, np.integer))
                                               or x < 0 for x in v):
        raise ValueError(f"{name} must be a list of ints >= 0, got {v!r:.80}")
    return [int(x) for x in v]
