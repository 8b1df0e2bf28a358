"""Closed-form counts for decoder-only transformers, to set beside what ``roofline.measure`` counts.

Most of this is arithmetic on a model's shape (:class:`DecoderConfig`, or a transformers config converted by
:meth:`DecoderConfig.from_hf`); only :func:`param_count` and :func:`matmul_param_count` given an ``nn.Module`` look
at a model. A few helpers run one: :func:`prefill`, :func:`repeat_cache` and :func:`decode_step` drive a
transformers causal LM with a real KV cache, :func:`time_step` times a step without instrumentation, and
:func:`step_utilization` turns that time and a report's counts into MFU and MBU. torch is imported only when one of
those is called, never by importing this module.

Conventions (the same as roofline's; see docs/concepts.md):

* One FLOP is one add or one multiply; a multiply-add is 2 FLOPs, so ``(M, K) x (K, N)`` is ``2*M*N*K``.
* **Matmul parameters** are the weights of the matrix products a token goes through: the attention projections
  (q, k, v, o), the MLP matrices and the LM head. The embedding lookup is a gather, not a product, so the input
  embedding is *not* a matmul parameter; the LM head *is*, even when its weight is tied to the embedding.
  Biases and norm weights are not matmul parameters (their adds are vector FLOPs). Forward matmul FLOPs are then
  exactly ``2 x matmul parameters x tokens``, the figure roofline reports as ``r.matrix_flops`` apart from
  attention.
* **Attention** (the two products ``Q K^T`` and ``P V``): ``2 x 2 x layers x heads x pairs x head_dim`` per
  forward, with ``heads`` the *query* heads (grouped-query attention shares K/V heads, not the work) and ``pairs``
  the (query, key) pairs a sequence computes: ``S(S+1)/2`` with ``attention="causal"`` (a fused kernel skips the
  masked half), ``S^2`` with ``attention="full"``. Use ``"full"`` wherever attention runs on the *math* backend,
  which computes the whole ``S x S`` score matrix and applies the causal mask afterwards: on the meta device
  unless ``measure(..., attention="flash")`` (or ``"efficient"``) chooses a fused kernel to count
  (``scaled_dot_product_attention`` has none there), and for models that pass an explicit mask on every device. roofline counts the work the kernel does, so the helper must be told
  which kernel ran.
* **Training** is forward + backward: the backward pass of a product computes two products of the same size
  (input and weight gradients), so training = 3 x forward, ``6PT`` for the matmul parameters. Fused attention
  backward kernels (flash, memory-efficient, the CPU fused kernel) recompute the scores, five products per pair
  instead of four, i.e. 3.5 x forward for attention: pass ``recompute_attention=True`` to count that.

**Projections** (:func:`count_step`, :func:`predict_decode`) assume what a GPU training or serving stack runs,
``PROJECTION_DEFAULTS = {"dtype": "bfloat16", "attention": "flash"}``: bfloat16 with the flash attention kernel
(causal, ``S(S+1)/2`` pairs; grouped-query attention as the query heads' work). Both are arguments, and both say
what they assumed.
"""

from __future__ import annotations

import copy
import inspect
import statistics
import sys
import time
from dataclasses import dataclass

from roofline import _core
from roofline._hardware import _devices as devices
from roofline._loops._steady import _check_int, steady
from roofline._analysis import _rollup
from roofline._capture import _sdpa
from roofline._datamodel import _records
from roofline._datamodel._records import ITEMSIZE, canonical_dtype
from roofline._util import _ints
from roofline.render import _text

__all__ = [
    "DecoderConfig", "CrossCheck", "param_count", "matmul_param_count", "forward_flops", "training_flops",
    "attention_flops", "decode_step_bytes", "decode_step_flops", "kv_cache_bytes", "tokens_per_second",
    "cross_check", "predict_decode", "count_step", "prefill", "repeat_cache", "decode_step", "time_step",
    "step_utilization",
]

_ATTENTION = ("causal", "full")

#: What :func:`count_step` and :func:`predict_decode` assume unless told otherwise: the dtype of weights and
#: activations and the attention kernel of a GPU training step. The one home of these defaults: the command
#: line's count on meta (``python -m roofline profile --device meta``) reads them here too.
PROJECTION_DEFAULTS = {"dtype": "bfloat16", "attention": "flash"}


@dataclass(frozen=True)
class DecoderConfig:
    """The shape of a decoder-only transformer.

    ``hidden``: model width; ``intermediate``: MLP width; ``layers``; ``heads``: query heads; ``kv_heads``: key/value
    heads (default ``heads``; fewer for grouped-query attention); ``vocab``; ``head_dim`` (default
    ``hidden // heads``); ``tied_embeddings``: the LM head reuses the input embedding matrix; ``mlp``: ``"gated"``
    (gate, up and down matrices, Llama's SwiGLU) or ``"plain"`` (up and down, GPT-2); ``norm``: ``"rms"`` (a weight
    per channel) or ``"layer"`` (weight and bias); ``attention_bias`` / ``mlp_bias``: the projections have biases;
    ``positions``: rows of a learned position embedding (0 for rotary embeddings).
    """

    hidden: int
    intermediate: int
    layers: int
    heads: int
    vocab: int
    kv_heads: int | None = None
    head_dim: int | None = None
    tied_embeddings: bool = False
    mlp: str = "gated"
    norm: str = "rms"
    attention_bias: bool = False
    mlp_bias: bool = False
    positions: int = 0

    def __post_init__(self):
        for name in ("hidden", "intermediate", "layers", "heads", "vocab"):
            v = getattr(self, name)
            object.__setattr__(self, name, _ints.count(v, name, "DecoderConfig", 1))
        if self.kv_heads is None:
            object.__setattr__(self, "kv_heads", self.heads)
        if self.head_dim is None:
            if self.hidden % self.heads:
                raise ValueError(f"hidden {self.hidden} is not a multiple of heads {self.heads}: give head_dim")
            object.__setattr__(self, "head_dim", self.hidden // self.heads)
        if self.kv_heads <= 0 or self.heads % self.kv_heads:
            raise ValueError(f"heads {self.heads} must be a positive multiple of kv_heads {self.kv_heads}")
        if self.mlp not in ("gated", "plain"):
            raise ValueError(f"mlp must be 'gated' or 'plain', got {self.mlp!r}")
        if self.norm not in ("rms", "layer"):
            raise ValueError(f"norm must be 'rms' or 'layer', got {self.norm!r}")
        if self.positions < 0:
            raise ValueError(f"positions must be >= 0, got {self.positions}")

    @classmethod
    def from_hf(cls, config) -> DecoderConfig:
        """From a transformers config: GPT-2 (``model_type == "gpt2"``: plain MLP, layer norm, biases, learned
        positions, tied embeddings) or a Llama-style one (Llama, Mistral, ...: read from ``hidden_size``,
        ``intermediate_size``, ``num_hidden_layers``, ``num_attention_heads``, ``num_key_value_heads``,
        ``head_dim``, ``vocab_size``, ``tie_word_embeddings``, ``attention_bias``, ``mlp_bias``). Mixture-of-experts
        configs are refused: their per-token work is not a function of these fields alone."""
        for moe in ("num_local_experts", "num_experts", "n_routed_experts"):
            if (getattr(config, moe, None) or 0) > 1:
                raise ValueError(f"{type(config).__name__} is a mixture-of-experts config ({moe}="
                                 f"{getattr(config, moe)}); DecoderConfig describes dense decoders only")
        if getattr(config, "model_type", None) == "gpt2":
            h = config.n_embd
            return cls(hidden=h, intermediate=config.n_inner or 4 * h, layers=config.n_layer, heads=config.n_head,
                       vocab=config.vocab_size, tied_embeddings=bool(getattr(config, "tie_word_embeddings", True)),
                       mlp="plain", norm="layer", attention_bias=True, mlp_bias=True, positions=config.n_positions)
        heads = config.num_attention_heads
        return cls(hidden=config.hidden_size, intermediate=config.intermediate_size,
                   layers=config.num_hidden_layers, heads=heads,
                   kv_heads=getattr(config, "num_key_value_heads", None) or heads,
                   head_dim=getattr(config, "head_dim", None) or None, vocab=config.vocab_size,
                   tied_embeddings=bool(getattr(config, "tie_word_embeddings", False)),
                   attention_bias=bool(getattr(config, "attention_bias", False)),
                   mlp_bias=bool(getattr(config, "mlp_bias", False)))

    @classmethod
    def of(cls, config) -> DecoderConfig:
        """Coerce a :class:`DecoderConfig`, a dict of its fields, or a transformers config."""
        if isinstance(config, cls):
            return config
        if isinstance(config, dict):
            return cls(**config)
        if hasattr(config, "to_dict") and (hasattr(config, "hidden_size") or hasattr(config, "n_embd")):
            return cls.from_hf(config)
        raise TypeError(f"expected a DecoderConfig, a dict of its fields or a transformers config, "
                        f"got {type(config).__name__}")

    # ---- parameter counts by part -------------------------------------------------------------------------------
    @property
    def q_dim(self) -> int:
        """Width of the query projection: ``heads x head_dim``."""
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Width of the key (and of the value) projection: ``kv_heads x head_dim``."""
        return self.kv_heads * self.head_dim

    @property
    def mlp_matrices(self) -> int:
        """Weight matrices in one MLP: 3 for ``"gated"`` (gate, up, down), 2 for ``"plain"`` (up, down)."""
        return 3 if self.mlp == "gated" else 2

    @property
    def layer_matmul_params(self) -> int:
        """Weights of one block's products: q, k, v, o and the MLP matrices."""
        h = self.hidden
        attn = h * self.q_dim + 2 * h * self.kv_dim + self.q_dim * h
        return attn + self.mlp_matrices * h * self.intermediate

    @property
    def layer_other_params(self) -> int:
        """Biases and norm weights of one block (two norms)."""
        n = 2 * self._norm_params
        if self.attention_bias:
            n += self.q_dim + 2 * self.kv_dim + self.hidden
        if self.mlp_bias:
            n += (self.mlp_matrices - 1) * self.intermediate + self.hidden
        return n

    @property
    def _norm_params(self) -> int:
        return self.hidden if self.norm == "rms" else 2 * self.hidden

    @property
    def lm_head_params(self) -> int:
        """Weights of the LM head: ``hidden x vocab`` (whether or not it is tied to the embedding)."""
        return self.hidden * self.vocab

    @property
    def embedding_params(self) -> int:
        """Input embedding tables: tokens and learned positions."""
        return (self.vocab + self.positions) * self.hidden


def _is_module(obj) -> bool:
    return callable(getattr(obj, "parameters", None)) and callable(getattr(obj, "modules", None))


def param_count(model_or_config, *, exclude_embeddings: bool = False) -> int:
    """All parameters (every weight, bias and norm weight, each shared tensor once).

    ``model_or_config``: an ``nn.Module`` (its ``parameters()`` are summed) or a config (:meth:`DecoderConfig.of`).
    ``exclude_embeddings=True`` leaves out the input embedding tables (token and learned position embeddings,
    ``nn.Embedding`` weights for a module), the usual "non-embedding parameters"; an untied LM head stays (it is
    a separate matrix), a tied one goes with the embedding it shares. For the parameters that cost FLOPs per
    token, see :func:`matmul_param_count`.
    """
    if _is_module(model_or_config):
        seen, total = set(), 0
        skip = set()
        if exclude_embeddings:
            import torch

            skip = {id(m.weight) for m in model_or_config.modules() if isinstance(m, torch.nn.Embedding)}
        for p in model_or_config.parameters():
            if id(p) not in seen and id(p) not in skip:
                seen.add(id(p))
                total += p.numel()
        return total
    c = DecoderConfig.of(model_or_config)
    total = (c.layers * (c.layer_matmul_params + c.layer_other_params) + c._norm_params + c.embedding_params
             + (0 if c.tied_embeddings else c.lm_head_params))
    return total - c.embedding_params if exclude_embeddings else total


def matmul_param_count(model_or_config) -> int:
    """Weights of the matrix products one token goes through: attention projections, MLP, and the LM head (counted
    even when tied to the embedding; the embedding lookup itself is a gather and not counted). Forward matmul
    FLOPs are ``2 x this x tokens``.

    For an ``nn.Module``: the weights of every ``nn.Linear`` and transformers ``Conv1D`` (GPT-2's projections),
    once per module that uses them (so a tied LM head counts). For a config: from the shape alone.
    """
    if _is_module(model_or_config):
        import torch

        total = 0
        for m in model_or_config.modules():
            if isinstance(m, torch.nn.Linear) or (type(m).__name__ == "Conv1D" and getattr(m, "weight", None)
                                                  is not None and m.weight.dim() == 2):
                total += m.weight.numel()
        return total
    c = DecoderConfig.of(model_or_config)
    return c.layers * c.layer_matmul_params + c.lm_head_params


def _pairs(seq_len: int, attention: str) -> int:
    if attention not in _ATTENTION:
        raise ValueError(f"attention must be one of {_ATTENTION}, got {attention!r}")
    # one head's (query, key) pairs over a sequence: the cost model's count (causal: query i sees keys 0..i)
    return _core.attention_pairs(seq_len, seq_len, 1 if attention == "causal" else 0)


def _sequences(tokens: int, seq_len: int | None) -> tuple[int, int]:
    tokens = _ints.count(tokens, "tokens", "attention_flops", 1)
    seq_len = tokens if seq_len is None else _ints.count(seq_len, "seq_len", "attention_flops", 1)
    if seq_len <= 0 or tokens % seq_len:
        raise ValueError(f"tokens {tokens} is not a whole number of sequences of length {seq_len}")
    return tokens // seq_len, seq_len


def attention_flops(config, tokens: int, *, seq_len: int | None = None, attention: str = "causal") -> int:
    """Forward FLOPs of ``Q K^T`` and ``P V`` for ``tokens`` tokens in sequences of ``seq_len`` (default: one
    sequence of ``tokens``): ``2 x 2 x layers x heads x pairs x head_dim`` per sequence, ``pairs`` = ``S(S+1)/2``
    (``attention="causal"``, fused kernels) or ``S^2`` (``"full"``, the math backend; see the module docstring)."""
    c = DecoderConfig.of(config)
    n_seq, s = _sequences(tokens, seq_len)
    return n_seq * 2 * 2 * c.layers * c.heads * _pairs(s, attention) * c.head_dim


def forward_flops(config, tokens: int, *, seq_len: int | None = None, attention: str = "causal") -> dict:
    """Forward matrix FLOPs: ``{"2PT": 2 x matmul params x tokens, "attention": ..., "total": sum}`` (exact ints).

    ``tokens`` is batch x sequence length; ``seq_len`` defaults to ``tokens`` (one sequence). ``attention``:
    ``"causal"`` or ``"full"``, which kernel ran (see the module docstring). ``total`` is what ``r.matrix_flops``
    reports for a dense decoder's forward pass.
    """
    c = DecoderConfig.of(config)
    p = 2 * matmul_param_count(c) * tokens
    a = attention_flops(c, tokens, seq_len=seq_len, attention=attention)
    return {"2PT": p, "attention": a, "total": p + a}


def training_flops(config, tokens: int, *, seq_len: int | None = None, attention: str = "causal",
                   recompute_attention: bool = False) -> dict:
    """Forward + backward matrix FLOPs: ``{"6PT": 6 x matmul params x tokens, "attention": ..., "total": sum}``.

    Training is 3 x forward (backward computes the input and the weight gradient, two products per forward
    product). The attention term is 3 x the forward one, or 3.5 x with ``recompute_attention=True``: fused attention
    backward kernels recompute the scores (five products per pair), which is what roofline counts when such a
    kernel ran. The optimizer step has no matrix FLOPs.
    """
    c = DecoderConfig.of(config)
    p = 6 * matmul_param_count(c) * tokens
    fwd = attention_flops(c, tokens, seq_len=seq_len, attention=attention)
    a = fwd * 7 // 2 if recompute_attention else 3 * fwd  # fwd is a multiple of 4: exact
    return {"6PT": p, "attention": a, "total": p + a}


def _itemsize(dtype_bytes) -> int:
    if isinstance(dtype_bytes, int) and not isinstance(dtype_bytes, bool):
        if dtype_bytes <= 0:
            raise ValueError(f"dtype_bytes must be positive, got {dtype_bytes}")
        return dtype_bytes

    return ITEMSIZE[canonical_dtype(dtype_bytes)]


def kv_cache_bytes(config, batch: int, context_len: int, dtype_bytes=2) -> int:
    """Bytes of the key/value cache holding ``context_len`` tokens for ``batch`` sequences:
    ``batch x layers x 2 x kv_heads x head_dim x context_len x dtype_bytes``. ``dtype_bytes``: an int or a dtype
    name ("bfloat16", "float32", a torch dtype)."""
    c = DecoderConfig.of(config)
    return batch * c.layers * 2 * c.kv_dim * context_len * _itemsize(dtype_bytes)


def decode_step_bytes(config, batch: int, context_len: int, dtype_bytes=2) -> dict:
    """Compulsory bytes of one decode step (one new token for each of ``batch`` sequences, ``context_len`` tokens
    already cached): ``{"weights", "kv_read", "kv_write", "total"}``.

    * ``weights``: every weight read once, shared by the whole batch: all parameters except the embedding tables,
      plus the LM head matrix (read in full even when tied), plus the ``batch`` embedding rows gathered;
    * ``kv_read``: the cache, :func:`kv_cache_bytes` ``(batch, context_len)``;
    * ``kv_write``: the new token's keys and values, :func:`kv_cache_bytes` ``(batch, 1)``.

    Activations (a few vectors of ``hidden`` per token) are left out. This is the traffic of an ideal step, the
    lower bound a decode kernel is judged against (MBU); an implementation that copies the cache (``torch.cat``)
    moves more.
    """
    c = DecoderConfig.of(config)
    size = _itemsize(dtype_bytes)
    params = param_count(c, exclude_embeddings=True) + (c.lm_head_params if c.tied_embeddings else 0)
    rows = batch * c.hidden * (2 if c.positions else 1)
    weights = (params + rows) * size
    kv_read = kv_cache_bytes(c, batch, context_len, size)
    kv_write = kv_cache_bytes(c, batch, 1, size)
    return {"weights": weights, "kv_read": kv_read, "kv_write": kv_write, "total": weights + kv_read + kv_write}


def decode_step_flops(config, batch: int, context_len: int) -> dict:
    """Matrix FLOPs of one decode step: ``{"2PT": 2 x matmul params x batch, "attention": ..., "total": sum}``;
    the new token attends to the ``context_len`` cached tokens and itself (``context_len + 1`` pairs per head).
    With :func:`decode_step_bytes`, ``total / bytes`` is the step's arithmetic intensity, about ``batch /
    dtype_bytes`` while weights dominate."""
    c = DecoderConfig.of(config)
    p = 2 * matmul_param_count(c) * batch
    a = batch * 2 * 2 * c.layers * c.heads * (context_len + 1) * c.head_dim
    return {"2PT": p, "attention": a, "total": p + a}


def tokens_per_second(step_time_s: float, batch: int) -> float:
    """Decode throughput: ``batch`` new tokens per step of ``step_time_s`` seconds."""
    if step_time_s <= 0:
        raise ValueError(f"step_time_s must be positive, got {step_time_s}")
    return batch / step_time_s


@dataclass(frozen=True)
class CrossCheck:
    """``measured`` vs ``expected``; ``rel_diff = (measured - expected) / expected``; ``ok`` when ``|rel_diff| <=
    tolerance``. True in a boolean context when ok."""

    measured: int
    expected: int
    rel_diff: float
    tolerance: float
    field: str = "matrix_flops"

    @property
    def ok(self) -> bool:
        """``|rel_diff| <= tolerance``."""
        return abs(self.rel_diff) <= self.tolerance

    def __bool__(self):
        return self.ok

    def __str__(self):
        return _text.cross_check(self)


def cross_check(report, expected_flops, rel: float = 0.02, *, field: str = "matrix_flops") -> CrossCheck:
    """Compare a measured count with a closed-form one.

    ``report``: a ``roofline.Report`` (its ``field``, by default ``matrix_flops``; any Report total such as
    ``total_flops`` or ``bytes`` works) or a number. ``expected_flops``: a number, or a dict from
    :func:`forward_flops` / :func:`training_flops` / :func:`decode_step_bytes` (its ``"total"``). ``rel``: the
    tolerance on the relative difference.
    """
    measured = getattr(report, field) if hasattr(report, field) else report
    expected = expected_flops["total"] if isinstance(expected_flops, dict) else expected_flops
    if not expected:
        raise ValueError("expected must be non-zero")
    return CrossCheck(measured=int(measured), expected=int(expected),
                      rel_diff=(measured - expected) / expected, tolerance=rel, field=field)


def predict_decode(config, batch: int, context_len: int, device="H100 SXM",
                   dtype: str = PROJECTION_DEFAULTS["dtype"]) -> dict:
    """The roofline of an ideal decode step on a datasheet device: a prediction, not a measurement.

    Matrix FLOPs from :func:`decode_step_flops`, compulsory bytes from :func:`decode_step_bytes` (weights read
    once per step, the KV cache read once, the new keys and values written), the peak of ``("matrix", dtype)`` and
    the DRAM bandwidth of ``device`` (a name from :mod:`roofline.devices` or a ``DeviceSpec``). The step takes at
    least ``max(flops / peak, bytes / bandwidth)``. Returns ``{"flops", "bytes", "intensity", "ridge",
    "step_time", "tokens_per_second", "bound", "assumed"}`` (``bound``: "memory" below the ridge, else "compute";
    ``assumed``: the dtype, device and attention kernel the prediction is for). ``dtype`` defaults to
    bfloat16 (``PROJECTION_DEFAULTS``); a dtype the device has no matrix peak for raises ValueError. Vector work
    (norms, activations) and the cache copy of an implementation that concatenates are left out: real steps are
    slower.
    """
    spec = devices.get(device) if isinstance(device, str) else device
    try:
        peak = spec.peak("matrix", dtype)
    except KeyError:
        peak = None
    if not peak:
        raise ValueError(f"{spec.name} has no matrix peak for {dtype}: choose another dtype")
    bw = spec.memory_bandwidth
    if not bw:
        raise ValueError(f"{spec.name} has no datasheet memory bandwidth")
    flops = decode_step_flops(config, batch, context_len)["total"]
    nbytes = decode_step_bytes(config, batch, context_len, dtype)["total"]
    step = max(flops / peak, nbytes / bw)
    intensity, ridge = flops / nbytes, peak / bw
    return {"flops": flops, "bytes": nbytes, "intensity": intensity, "ridge": ridge, "step_time": step,
            "tokens_per_second": tokens_per_second(step, batch),
            "bound": "memory" if intensity < ridge else "compute",
            "assumed": {"dtype": str(dtype), "device": spec.name,
                        "attention": "a fused decode kernel: the KV cache read once, no score matrix written "
                                     "(context_len + 1 pairs per query head)"}}


# ---- counting a step that does not fit: meta device, chosen kernel and dtype (torch imported on use) -------------

def _hf_config(config):
    """A transformers config for ``config``: a transformers config as it is, or a Llama-style one for a gated, RMS
    norm :class:`DecoderConfig` (or dict of its fields)."""
    if hasattr(config, "to_dict") and (hasattr(config, "hidden_size") or hasattr(config, "n_embd")):
        return config
    c = DecoderConfig.of(config)
    if c.mlp != "gated" or c.norm != "rms" or c.positions:
        raise ValueError("count_step builds a Llama-style model from a DecoderConfig (gated MLP, RMS norm, rotary "
                         "positions); pass a transformers config for other architectures")
    import transformers

    return transformers.LlamaConfig(hidden_size=c.hidden, intermediate_size=c.intermediate,
                                    num_hidden_layers=c.layers, num_attention_heads=c.heads,
                                    num_key_value_heads=c.kv_heads, head_dim=c.head_dim, vocab_size=c.vocab,
                                    tie_word_embeddings=c.tied_embeddings, attention_bias=c.attention_bias,
                                    mlp_bias=c.mlp_bias, max_position_embeddings=8192)


def count_step(config, batch: int = 1, seq_len: int = 2048, *, train: bool = True,
               attention: str | None = PROJECTION_DEFAULTS["attention"],
               dtype: str = PROJECTION_DEFAULTS["dtype"], optimizer: str | None = "adamw", ceilings="datasheet"):
    """Count one step of a transformers causal LM built from ``config`` on the meta device (nothing is allocated:
    a 70B model is counted in seconds) and return the :class:`roofline.Report`, ready for ``r.project(device)``.

    ``config``: a transformers config, or a :class:`DecoderConfig` (built as a Llama-style model). The model is
    built in ``dtype`` (default bfloat16) with the ``"sdpa"`` attention implementation, and
    ``scaled_dot_product_attention`` is counted as the kernel ``attention`` (default ``"flash"``; ``"efficient"``,
    ``"math"``, or None for what meta runs: the math path; see :func:`roofline.measure`). With ``train`` (default)
    the step is the language-model loss on ``batch x seq_len`` random tokens, its backward pass and, with
    ``optimizer="adamw"``, an AdamW step; one warm-up step runs uncounted first (:func:`roofline.steady`), so the
    optimizer's state creation is not in the count. Without ``train``: a forward pass under ``no_grad``.
    ``r.meta["attention"]`` and ``r.meta["dtype"]`` record what was assumed.
    """
    import torch




    batch = _check_int("batch", batch, 1, "count_step")
    seq_len = _check_int("seq_len", seq_len, 1, "count_step")
    if not isinstance(train, bool):
        raise TypeError(f"count_step: train must be True or False, got {type(train).__name__}")
    if not (optimizer is None or isinstance(optimizer, str)) or optimizer not in (None, "adamw"):
        raise ValueError(f"count_step: optimizer must be 'adamw' or None, got {optimizer!r}")
    try:
        _sdpa.check(attention)
    except (TypeError, ValueError) as e:
        raise type(e)(f"count_step: {e}") from None
    try:
        name = _records.canonical_dtype(dtype)
    except (TypeError, ValueError) as e:
        raise ValueError(f"count_step: dtype: {e}") from None
    tdtype = getattr(torch, name, None)
    if not isinstance(tdtype, torch.dtype) or not tdtype.is_floating_point:
        raise ValueError(f"count_step: dtype must be a floating-point dtype the model is built in, got {dtype!r}")
    if not isinstance(ceilings, str) and not hasattr(ceilings, "peaks"):
        raise TypeError(f"count_step: ceilings must be 'datasheet', 'measured', a device name or a Ceilings, "
                        f"got {type(ceilings).__name__}")
    import transformers

    cfg = _hf_config(config)
    cfg = copy.deepcopy(cfg)  # the caller's config is left as it was
    cfg._attn_implementation = "sdpa"
    old = torch.get_default_dtype()
    torch.set_default_dtype(tdtype)
    try:
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa")
            ids = torch.zeros(batch, seq_len, dtype=torch.long)
    finally:
        torch.set_default_dtype(old)
    model.train(train)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4) if train and optimizer else None

    def step():
        if train:
            model(ids, labels=ids).loss.backward()
            if opt is not None:
                opt.step()
                opt.zero_grad(set_to_none=True)
        else:
            with torch.no_grad():
                model(ids)

    r = steady(step, model, warmup=1 if opt is not None else 0, repeat=1, timing=None, ceilings=ceilings,
                attention=attention)
    if opt is None:  # no optimizer state to create: the first step is the steady one, and not labelled otherwise
        r.meta["steady"]["first_step"] = False
        r.meta["steady"]["no_warmup"] = ("no warm-up needed: without an optimizer step the first step creates no "
                                         "state")
    r.meta["dtype"] = str(tdtype).replace("torch.", "")
    return r


# ---- running a transformers causal LM (torch imported on use) -----------------------------------------------------

def _cache_argument(model) -> str:
    """The keyword ``model.forward`` takes the KV cache under: ``cache`` (newer transformers) or
    ``past_key_values``."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _model_device(model):
    for p in model.parameters():
        return p.device
    import torch

    return torch.device("cpu")


def prefill(model, context_len: int, *, seed: int = 0):
    """Run one random prompt of ``context_len`` tokens through ``model`` (a transformers causal LM) and return its
    KV cache (the transformers cache object, e.g. ``DynamicCache``) for one sequence. Use :func:`repeat_cache` for a
    batch: the cost of a decode step depends on the cache's shape, not on what the prompt said."""
    import torch

    context_len = _ints.count(context_len, "context_len", "prefill", 1)
    dev = _model_device(model)
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, model.config.vocab_size, (1, context_len), generator=g).to(dev)
    with torch.no_grad():
        out = model(ids, use_cache=True)
    cache = getattr(out, "cache", None)
    if cache is None:  # transformers before the rename
        cache = getattr(out, "past_key_values", None)
    if cache is None:
        raise RuntimeError(f"{type(model).__name__} returned no KV cache")
    return cache


def repeat_cache(cache, batch: int):
    """A copy of a one-sequence ``cache`` holding ``batch`` sequences (the original is left as it is)."""
    batch = _ints.count(batch, "batch", "repeat_cache", 1)
    out = copy.deepcopy(cache)
    if batch > 1:
        out.batch_repeat_interleave(batch)
    return out


def decode_step(model, cache, batch: int, *, keep_context: bool = True, seed: int = 0):
    """One decode step: one new token for each of ``batch`` sequences through ``model`` with its KV cache ``cache``
    (``use_cache=True``); returns the logits. The cache grows by one token; with ``keep_context`` (the default) that
    token is dropped again afterwards (``cache.crop(-1)``), so repeated steps see the same context length and can
    be timed against each other."""
    import torch

    dev = _model_device(model)
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, model.config.vocab_size, (batch, 1), generator=g).to(dev)
    with torch.no_grad():
        out = model(ids, use_cache=True, **{_cache_argument(model): cache})
    if keep_context:
        cache.crop(-1)
    return out.logits


def time_step(step, repeats: int = 5, warmup: int = 1, statistic: str = "median") -> float:
    """Wall time in seconds of ``step()`` (a callable) over ``repeats`` runs after ``warmup`` untimed ones, without
    any instrumentation: the ``"median"`` run (default) or the fastest (``"min"``, the better estimate on a machine
    shared with other work, whose interference only ever adds time). CUDA work is synchronised before and after each
    run when CUDA is initialised."""
    repeats = _ints.count(repeats, "repeats", "time_step", 1)
    warmup = _ints.count(warmup, "warmup", "time_step", 0)
    if statistic not in ("median", "min"):
        raise ValueError(f"statistic must be 'median' or 'min', got {statistic!r}")
    sync = _cuda_sync()
    for _ in range(warmup):
        step()
    times = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) if statistic == "median" else min(times)


def _cuda_sync():
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda.synchronize
    return lambda: None


def step_utilization(report, seconds: float) -> dict:
    """MFU and MBU of a step whose work ``report`` counted and which took ``seconds`` (e.g. :func:`time_step`'s
    median of uninstrumented runs: the counting itself costs a few microseconds per op, which matters for a small
    model's short ops).

    ``report.totals()`` with ``seconds`` in place of the report's wall time (one definition,
    ``roofline._analysis._rollup.roofline_totals``): MFU is the time every op's FLOPs would take at the peak of its
    own unit and dtype, summed, over ``seconds``; MBU is the compulsory DRAM bytes over ``seconds x`` DRAM
    bandwidth, collectives' bus bytes left out (they cross the interconnect: ``network_bytes``, present when the
    step ran collectives). Returns ``{"time", "flops", "bytes", "intensity", "achieved_flops", "achieved_bytes",
    "mfu", "mbu"}``; needs a report with ceilings.
    """
    if not seconds or seconds <= 0:
        raise ValueError(f"seconds must be positive, got {seconds!r}")
    if report.ceilings is None:
        raise ValueError("the report has no ceilings (counted on meta?): use report.project('<device>')")
    g = _rollup.roofline_totals(report.records, report.classification(), float(seconds))  # report.totals()'s rule
    out = {k: g[k] for k in ("time", "flops", "bytes", "intensity", "achieved_flops", "achieved_bytes", "mfu", "mbu")}
    if "network_bytes" in g:
        out["network_bytes"] = g["network_bytes"]
    return out
