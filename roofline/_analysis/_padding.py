"""Useful and padded work: how much of a step's FLOPs ran on padded (masked-out) token positions.

A padded batch of ``B`` sequences of length ``S`` runs every op over ``B x S`` positions, though only the real
tokens (``sum(lengths)``) are the work a training engineer wants done: the figure they optimise is real tokens per
second. Given which tokens are real (:func:`roofline._datamodel._tokens.token_layout`: an attention mask, sequence lengths, or the cumulative
lengths of a packed batch), each call is put in one of three groups from the shapes of its tensor arguments (the
report's call signatures):

* **per token**: an argument has the dims ``(B, S)`` next to each other, or a dim of ``B x S`` (the rows of a
  linear layer's input, the contraction of its weight gradient): the work grows with the number of positions, and
  ``padded / (B x S)`` of it ran on padding;
* **attention**: an attention kernel, a call over ``(.., S, S)`` scores (their softmax and masking, the ``P V``
  product), or the ``Q K^T`` product that makes them (``(.., S, d) @ (.., d, S)``): the work grows with the square of each sequence's length, and
  ``1 - sum(L_i^2) / (B x S^2)`` of it ran on padding (a causal kernel: ``sum(L_i (L_i + 1)) / (B S (S + 1))``);
* **other**: weights, the optimizer step (every call of it), reductions to a scalar: no padding.

A batch packed without padding (one row of concatenated sequences: varlen attention, ``cu_seqlens``) has no padded
position: its work is all useful. (A dense attention kernel over a packed row also computes scores across
sequences, which a varlen kernel skips: that is not counted as padding.) The groups come from shapes, so a dim of the model that happens to equal
``B x S`` or ``S`` would be taken for a token dim: :func:`useful_work` says so (``ambiguous``) when the calls that
are not per token have such a dim."""

from __future__ import annotations

import math
import re

import numpy as np

from roofline._datamodel._records import OPTIMIZER
from roofline._datamodel._tokens import token_layout  # noqa: F401 - the layout useful_work takes
from roofline._util import _warn

_SHAPE = re.compile(r"([a-z0-9_]+)\[([0-9, ]*)\]")
_FLOAT = re.compile(r"^(f|bf|c)\d")  # f16, bf16, f32, f8_e4m3fn, c64: the dtypes weights have
_ATTENTION = ("scaled_dot_product", "flash_attention", "efficient_attention", "cudnn_attention", "flex_attention")


def shapes(signature: str, floating: bool = False) -> list[tuple[int, ...]]:
    """The shapes of a call signature's tensors (``"f32[2,48,64], f32[64,64]"``), in order; a list's tensors
    too. ``floating``: only those of floating-point (or complex) tensors."""
    return [tuple(int(d) for d in dims.split(",") if d.strip()) for dt, dims in _SHAPE.findall(signature)
            if not floating or _FLOAT.match(dt)]


def _batch_then(shape, batch: int, seq: int) -> bool:
    """``batch`` and, after it, ``seq`` among the dims (``(B, heads, S, d)``, ``(B, S, heads, d)``)."""
    return batch in shape and seq in shape[shape.index(batch) + 1:]


def _adjacent(shape, a, b) -> bool:
    return any(shape[i] == a and shape[i + 1] == b for i in range(len(shape) - 1))


def classify(op_name: str, sig_shapes, batch: int, seq: int, optimizer: bool = False) -> str:
    """``"attention"``, ``"token"`` or ``"other"`` for one call (see the module docstring); an optimizer step's call
    (``optimizer``) runs over weights: "other"."""
    if optimizer:
        return "other"
    n = batch * seq
    if any(k in op_name for k in _ATTENTION):
        # over this batch's sequences (B, heads, S, d): attention; over other sequences (a vision tower's
        # patches, with S' != S) no padding
        return "attention" if any(_batch_then(s, batch, seq) for s in sig_shapes) else "other"
    if seq > 1:
        # (.., S, S) scores (their softmax, masking, the P V product), or the Q K^T product that makes them
        if any(len(s) >= 2 and s[-1] == seq and s[-2] == seq for s in sig_shapes):
            return "attention"
        if (("bmm" in op_name or "matmul" in op_name) and len(sig_shapes) >= 2 and len(sig_shapes[-2]) >= 2
                and len(sig_shapes[-1]) >= 2 and sig_shapes[-2][-2] == seq and sig_shapes[-1][-1] == seq):
            return "attention"
    for s in sig_shapes:
        if (batch > 1 and _adjacent(s, batch, seq)) or n in s or (batch == 1 and seq in s):
            return "token"
        if batch > 1 and _batch_then(s, batch, seq):  # (B, heads, S, d) and the like
            return "token"
    return "other"


def useful_work(records, op_names: list, signatures: list, layout: dict, causal: bool = False,
                wall_time=None) -> dict:
    """The padding figures of a report's records under ``layout`` (:func:`token_layout`): ``real_tokens``,
    ``positions`` (B x S), ``executed_flops`` (every FLOP), ``padding_flops`` (those on padded positions),
    ``useful_flops``, ``padding_share`` (of the executed FLOPs), ``by_kind`` (``token``, ``attention``, ``other``:
    calls, flops, padding_flops), ``by_op`` (per op: flops, padding_flops), ``ambiguous`` (the token dims, S or
    B x S, that are also dims of calls that run per weight, not per token: where non-empty, a weight-shaped
    argument may have been taken for a token one and the split is uncertain), ``real_tokens_per_s`` (when ``wall_time`` is given) and the layout itself.

    ``matched``: whether any call has the layout's token dims (a call per token or over attention scores). A layout
    that matches no call (a mask of another batch, or of another model's step) does not describe these calls: its
    token counts are not the step's. It is then False, and a RuntimeWarning says so, unless the layout already
    carries ``matched`` (a block's layout, checked and warned about when the block exited)."""
    if not len(signatures) or (len(records) and not np.any(records["sig"])):
        raise ValueError("useful_work: the report has no call signatures (saved before they were captured, or "
                         "measured with capture off): the token dims of its calls are unknown")
    b, s, lengths = layout["batch"], layout["seq_len"], layout["lengths"]
    positions = b * s
    real = int(sum(lengths))
    token_share = (positions - real) / positions if positions else 0.0
    if layout["packed"]:
        attn_share = 0.0  # no padded position (scores across packed sequences are not padding: a varlen kernel
        # skips them; a dense kernel over the packed row computes them, which this does not count as padding)
    elif causal:
        denom = b * s * (s + 1)
        attn_share = 1.0 - sum(n * (n + 1) for n in lengths) / denom if denom else 0.0
    else:
        attn_share = 1.0 - sum(n * n for n in lengths) / (b * s * s) if s else 0.0
    flops = (records["matrix_flops"] + records["vector_flops"]).astype(np.float64)
    kinds = {k: {"calls": 0, "flops": 0.0, "padding_flops": 0.0} for k in ("token", "attention", "other")}
    by_op: dict = {}
    other_dims: set = set()  # dims of the calls that are not per token (weights, optimizer state)
    cache: dict = {}
    for i in range(len(records)):
        op, sig = int(records["op"][i]), int(records["sig"][i])
        kind = cache.get((op, sig, int(records["phase"][i]) == OPTIMIZER))
        if kind is None:
            text = signatures[sig] if sig < len(signatures) else ""  # past the table: no shapes known
            optimizer = int(records["phase"][i]) == OPTIMIZER
            kind = cache[(op, sig, optimizer)] = classify(op_names[op], shapes(text), b, s, optimizer)
            if kind == "other":  # weight-shaped arguments (floating, 1-D or 2-D): a token dim among them is ambiguous
                other_dims.update(x for t in shapes(text, floating=True) if len(t) <= 2 for x in t)
        f = float(flops[i])
        pad = f * (token_share if kind == "token" else attn_share if kind == "attention" else 0.0)
        k = kinds[kind]
        k["calls"] += 1
        k["flops"] += f
        k["padding_flops"] += pad
        o = by_op.setdefault(op_names[op], {"flops": 0.0, "padding_flops": 0.0})
        o["flops"] += f
        o["padding_flops"] += pad
    executed = float(flops.sum())
    padding = sum(k["padding_flops"] for k in kinds.values())
    out = {"real_tokens": real, "positions": positions, "padded_positions": positions - real,
           "executed_flops": executed, "padding_flops": padding, "useful_flops": executed - padding,
           "padding_share": padding / executed if executed else 0.0, "by_kind": kinds, "by_op": by_op,
           "ambiguous": sorted(d for d in {s, positions} if d > 1 and d in other_dims), "layout": dict(layout),
           "causal": bool(causal)}
    out["real_tokens_per_s"] = real / wall_time if wall_time and wall_time > 0 else math.nan
    out["matched"] = bool(kinds["token"]["calls"] or kinds["attention"]["calls"])
    if not out["matched"] and "matched" not in layout:
        _warn.warn(unmatched_message(layout), RuntimeWarning)
    return out


def unmatched_message(layout: dict) -> str:
    """What a warning says of a token layout that matches no call."""
    b, s = layout["batch"], layout["seq_len"]
    what = f"a packed batch of {s} tokens" if layout["packed"] else f"a batch of {b} x {s} positions"
    return (f"roofline: the token layout ({what}) matches no call of the step: no tensor has its token dims "
            f"({b}, {s}) or {b * s}; it does not describe these calls (a mask of another batch?), so its real "
            "tokens, padding share and tokens/s are not the step's")


def layout_matches(records, op_names: list, signatures: list, layout: dict) -> bool:
    """Whether any call of ``records`` has the token dims of ``layout`` (see :func:`useful_work`'s ``matched``).
    True where the calls' shapes are unknown (no signatures): nothing says it does not."""
    if not len(signatures) or not len(records) or not np.any(records["sig"]):
        return True
    b, s = layout["batch"], layout["seq_len"]
    opt = records["phase"] == OPTIMIZER
    for op, sig in set(zip(records["op"][~opt].tolist(), records["sig"][~opt].tolist())):
        text = signatures[sig] if sig < len(signatures) else ""
        if classify(op_names[op], shapes(text), b, s) != "other":
            return True
    return False
