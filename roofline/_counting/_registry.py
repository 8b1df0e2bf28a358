"""The op table: which cost formula (kind) and per-element costs each operator uses.

This module is pure data plus name resolution; it needs no torch, so the analytic ``roofline.cost`` works without
torch. The formulas themselves, the kinds and their named parameters live in ``csrc/cost.c`` / ``csrc/cost.h``
(read here through ``roofline._core.kind_table()``); the counting conventions are documented in
``docs/concepts.md``.

Per-element costs (``flops`` = vector FLOPs, ``special`` = transcendental evaluations) are conventions, chosen to be
the arithmetic a straightforward kernel performs:

* arithmetic (add, sub, mul, div, neg, abs, min/max, comparisons): 1 FLOP per element; selections and copies
  (where, masked_fill, cat, clone, casts): 0;
* exp, log, sqrt, rsqrt, tanh, erf, sin, cos, pow and random draws: 1 special op each, not in the FLOP count;
* composites count their parts, e.g. sigmoid = exp + add + div (2 FLOPs + 1 special), silu = sigmoid + mul,
  softmax = max, subtract, sum, divide (4 FLOPs) + exp, layer norm = mean (1) + variance (3) + normalise (2) +
  affine (2);
* reductions: 1 FLOP per input element.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from roofline import _core
from roofline._counting._zero import ZERO as _ZERO_DECISIONS
from roofline._counting._schemas import DEFAULT_OVERLOAD, SCHEMAS
from roofline._util import _output


@dataclass(frozen=True)
class Param:
    """A named parameter of a cost kind (``RL_PARAMS`` in ``csrc/cost.h``). ``type``: ``"count"`` (0 .. 2**63-1),
    ``"flag"`` (0 or 1), ``"arg"`` / ``"arg_required"`` (an argument position, found in the op's schema by
    ``argname`` unless the registry entry names another argument). ``lo`` .. ``hi``: the values the C side accepts
    (-1 is an absent argument)."""

    name: str
    type: str
    argname: str | None
    lo: int
    hi: int

    @property
    def is_position(self) -> bool:
        return self.type in ("arg", "arg_required")


@dataclass(frozen=True)
class Kind:
    """A cost kind (``RL_KINDS`` in ``csrc/cost.h``): its code (stored in records), name and parameters."""

    code: int
    name: str
    params: tuple[Param, ...]

    @property
    def param_names(self) -> frozenset:
        return frozenset(p.name for p in self.params)

    @property
    def needs_schema(self) -> bool:
        """Whether its parameters are argument positions found in a known schema (then ``register(kind=...)``
        cannot give them)."""
        return any(p.argname is not None or p.type == "arg_required" for p in self.params)


# The kinds, from the C extension: the single definition is RL_KINDS / RL_PARAMS in csrc/cost.h.
KINDS: dict[str, Kind] = {name: Kind(code, name, tuple(Param(*p) for p in params))
                          for code, name, params in _core.kind_table()}
KIND_NAMES = {k.code: name for name, k in KINDS.items()}  # code -> name
KINDS_BY_NAME = {name: k.code for name, k in KINDS.items()}  # name -> code
globals().update({name.upper(): name for name in KINDS})  # _registry.EWISE == "ewise", and so on

# Ops torch.utils.flop_counter.FlopCounterMode registers (by packet name): their count is kept as
# `flop_counter_flops`.
FLOP_COUNTER_OPS = frozenset({
    "mm", "addmm", "bmm", "baddbmm", "_scaled_mm",
    "convolution", "_convolution", "cudnn_convolution", "convolution_overrideable", "_slow_conv2d_forward",
    "convolution_backward",
    "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_efficient_attention_backward", "_scaled_dot_product_flash_attention_backward",
    "_scaled_dot_product_cudnn_attention_backward",
    "_flash_attention_forward", "_efficient_attention_forward",
    "_flash_attention_backward", "_efficient_attention_backward",
})


@dataclass(frozen=True)
class Entry:
    """How one operator is counted.

    ``kind``: the formula (a name of :data:`KINDS`). ``flops`` / ``special``: per-element costs (the kinds with
    those parameters). ``noread``: positions (or names) of arguments whose data is not read (only their shape is
    used). ``writes``: names of arguments written in place, when the schema's alias annotations over-state it (fused
    optimizers mark gradients as mutable). ``params``: the kind's other parameters by name (an argument parameter
    given as the name of the schema argument it stands for), and ``stats``: arguments BatchNorm updates in place.
    """

    kind: str
    flops: int = 0
    special: int = 0
    noread: tuple = ()
    writes: tuple[str, ...] | None = None
    params: dict = field(default_factory=dict)


def _e(kind, flops=0, special=0, noread=(), writes=None, **params):
    allowed = KINDS[kind].param_names
    unknown = set(params) - (allowed - {"flops", "special"}) - {"stats"}
    if unknown or (flops and "flops" not in allowed) or (special and "special" not in allowed):
        raise RuntimeError(f"kind {kind!r} takes parameters {sorted(allowed)}, got {sorted(params)}, "
                           f"flops={flops}, special={special}")
    return Entry(kind, flops, special, tuple(noread), writes, params)


ALL_ARGS = ("*",)  # noread marker: no argument is read

# Formulas added with roofline.register(): qualified name ("aten::foo", "mylib::op", optionally ".overload") -> an
# Entry (a built-in kind) or a Python callable. Consulted before TABLE.
USER: dict[str, object] = {}

TABLE: dict[str, Entry] = {}


def _put(names, entry):
    for n in names.split():
        if n in TABLE:
            raise RuntimeError(f"duplicate cost formula for {n}")
        TABLE[n] = entry


# ---- views, metadata, allocation, bookkeeping: nothing moves -------------------------------------------------
_put("view _unsafe_view _reshape_alias reshape t transpose permute expand expand_as select slice split "
     "split_with_sizes unbind chunk squeeze unsqueeze alias detach as_strided diagonal unfold narrow view_as "
     "view_as_real view_as_complex _conj _neg_view lift_fresh movedim numpy_T mT mH adjoint unsafe_split "
     "unsafe_chunk tensor_split hsplit vsplit _nested_view_from_buffer "
     "empty empty_like empty_strided new_empty new_empty_strided resize_ set_ "
     "profiler::_record_function_enter profiler::_record_function_enter_new profiler::_record_function_exit "
     "sym_size sym_stride sym_numel sym_storage_offset is_same_size _has_compatible_shallow_copy_type "
     "record_stream _assert_async _assert_scalar _functional_assert_async sym_constrain_range_for_size "
     "_version prim::device prim::layout", _e("zero"))

# ---- data movement: compulsory bytes, no FLOPs ----------------------------------------------------------------
_put("clone _to_copy cat stack hstack vstack constant_pad_nd pad reflection_pad1d reflection_pad2d "
     "replication_pad1d replication_pad2d _local_scalar_dense tril triu flip roll repeat repeat_interleave "
     "expand_copy permute_copy view_copy t_copy transpose_copy unsqueeze_copy squeeze_copy slice_copy "
     "select_copy alias_copy detach_copy unbind_copy split_copy narrow_copy as_strided_copy lift_fresh_copy "
     "_unsafe_index index_fill masked_fill where masked_select nonzero index_copy index_put "
     "masked_scatter diag_embed _to_dense to_dense _pin_memory contiguous _copy_from _copy_from_and_resize "
     "slice_scatter select_scatter diagonal_scatter as_strided_scatter rot90 tile "
     "slice_backward select_backward diagonal_backward unfold_backward as_strided_backward "
     "_unsafe_view_copy col2im im2col", _e("copy"))
_put("copy", _e("copy", noread=(0,)))

# ---- results written without reading inputs -------------------------------------------------------------------
_put("zeros ones full zeros_like ones_like full_like new_zeros new_ones new_full scalar_tensor fill zero "
     "arange linspace logspace eye tensor _efficientzerotensor", _e("fill", noread=ALL_ARGS))
_put("randn rand randint randn_like rand_like randint_like normal uniform bernoulli exponential "
     "geometric cauchy log_normal random randperm multinomial", _e("fill", special=1, noread=ALL_ARGS))

# ---- element-wise, per element of the result ------------------------------------------------------------------
_put("add sub rsub mul div true_divide floor_divide remainder fmod maximum minimum fmax fmin neg abs "
     "reciprocal sign sgn clamp_min clamp_max relu relu6 threshold threshold_backward eq ne lt le gt ge "
     "logical_and logical_or logical_xor logical_not bitwise_and bitwise_or bitwise_xor bitwise_not "
     "ceil floor round trunc frac square heaviside copysign isnan isinf isfinite nan_to_num "
     "leaky_relu hardtanh_backward leaky_relu_backward",
     _e("ewise", 1))
_put("clamp hardtanh hardsigmoid hardsigmoid_backward", _e("ewise", 2))
_put("addcmul addcdiv lerp hardswish hardswish_backward tanh_backward sigmoid_backward",
     _e("ewise", 3))
_put("exp exp2 expm1 log log2 log10 log1p sqrt rsqrt sin cos tan asin acos atan sinh cosh tanh asinh acosh "
     "atanh erf erfc erfinv pow float_power xlogy lgamma digamma atan2 logit",
     _e("ewise", 0, 1))
_put("sigmoid", _e("ewise", 2, 1))
_put("silu elu celu selu mish", _e("ewise", 3, 1))
_put("silu_backward elu_backward mish_backward", _e("ewise", 5, 1))
_put("gelu", _e("ewise", 4, 1))
_put("gelu_backward", _e("ewise", 6, 2))
_put("softplus", _e("ewise", 1, 2))
# log_sigmoid(x) = min(x, 0) - log1p(exp(-|x|)): abs, negate, min, subtract + exp, log1p; backward 4 per element
_put("log_sigmoid_forward", _e("ewise", 4, 2))
_put("log_sigmoid_backward", _e("ewise", 4))
_put("softplus_backward", _e("ewise", 3, 1))
_put("native_dropout", _e("ewise", 2, 1))
_put("native_dropout_backward", _e("ewise", 2))
_put("_masked_scale", _e("ewise", 2))
_put("_adaptive_avg_pool2d_backward _adaptive_avg_pool3d_backward adaptive_max_pool2d_backward",
     _e("ewise", 1, noread=(1,)))

# ---- per element of the first tensor argument: normalisation, softmax, reductions, losses ---------------------
_put("native_layer_norm native_group_norm batch_norm_stats", _e("ewise_in", 8))
# BatchNorm. Training reads the input, weight, bias and running statistics and writes the output, the saved mean and
# inverse std and the running statistics (updated in place, so read and written); in evaluation the running statistics
# are only read. `stats`: arguments updated in place in training even where the schema does not mark them (the
# legacy native_batch_norm, cudnn, miopen); `training`: the bool argument that selects the mode.
_BN_STATS = ("running_mean", "running_var")
_put("_native_batch_norm_legit native_batch_norm", _e("ewise_in", 8, stats=_BN_STATS, training="training"))
_put("cudnn_batch_norm miopen_batch_norm", _e("ewise_in", 8, stats=_BN_STATS, training="training"))
_put("_batch_norm_with_update", _e("ewise_in", 8, stats=_BN_STATS))  # always training
_put("_native_batch_norm_legit_no_training _batch_norm_no_update _native_batch_norm_legit_functional "
     "_batch_norm_with_update_functional", _e("ewise_in", 8))  # evaluation, or new statistics returned
# Backward: in training the saved statistics are used and the running ones are not read; in evaluation the running
# statistics are read.
_put("native_batch_norm_backward", _e("ewise_in", 12, noread=_BN_STATS, training="train"))
_put("batch_norm_backward", _e("ewise_in", 12, noread=_BN_STATS, training="update"))
_put("cudnn_batch_norm_backward miopen_batch_norm_backward", _e("ewise_in", 12, noread=_BN_STATS))
_put("native_layer_norm_backward native_group_norm_backward", _e("ewise_in", 12))
_put("_fused_rms_norm", _e("ewise_in", 4))
# weight normalisation w = g * v / ||v|| per slice: the norm (square, add) and the scale (divide, multiply) per element
# of v; backward 6 per element of grad_w
_put("_weight_norm_interface", _e("ewise_in", 4))
_put("_weight_norm_interface_backward", _e("ewise_in", 6))
_put("_fused_rms_norm_backward", _e("ewise_in", 7))
_put("_softmax _safe_softmax _log_softmax", _e("ewise_in", 4, 1))
_put("_softmax_backward_data", _e("ewise_in", 4))
_put("_log_softmax_backward_data", _e("ewise_in", 3, 1))
_put("sum mean amax amin max min prod argmax argmin any all cumsum cumprod nansum count_nonzero aminmax "
     "embedding_dense_backward embedding_backward _embedding_bag_backward", _e("ewise_in", 1))
# _is_all_true / _is_any_true: all() / any() of a bool tensor for a data-dependent check (vision-language models check
# that the image tokens match the image features with one): a reduction, one comparison per element read; the input
# read once, one bool written
_put("_is_all_true _is_any_true", _e("ewise_in", 1))
_put("linalg_vector_norm norm", _e("ewise_in", 2))
_put("var std var_mean std_mean", _e("ewise_in", 3))
_put("logsumexp", _e("ewise_in", 3, 1))
_put("mse_loss l1_loss smooth_l1_loss huber_loss", _e("ewise_in", 3))
# backward: per element of the input (`self`), not of grad_output (a scalar under mean or sum reduction)
_put("mse_loss_backward smooth_l1_loss_backward huber_loss_backward", _e("ewise_in", 3, of="self"))
_put("binary_cross_entropy_with_logits binary_cross_entropy", _e("ewise_in", 5, 2))
_put("max_pool2d_with_indices_backward max_pool3d_with_indices_backward max_unpool2d",
     _e("ewise_in", 1, noread=(1,)))
_put("_adaptive_avg_pool2d _adaptive_avg_pool3d adaptive_max_pool2d", _e("ewise_in", 1))

# ---- matrix products --------------------------------------------------------------------------------------------
_put("mm _int_mm", _e("mm"))
_put("addmm", _e("addmm"))
_put("bmm", _e("bmm"))
_put("baddbmm addbmm", _e("baddbmm"))
# matrix-vector and vector-vector products: one multiply-add per element of the matrix (or vector) they stream;
# they run on the vector units at the memory's pace, so they are vector FLOPs
_put("mv", _e("ewise_in", 2))
_put("dot vdot inner", _e("ewise_in", 2))
_put("addmv", _e("ewise_in", 2, of="mat"))
_put("addr", _e("ewise", 2))
_put("_scaled_mm", _e("scaled_mm"))
# its successor (scales as lists, with their recipes): the same product and per-element scale, self and mat2 first
_put("_scaled_mm_v2", _e("scaled_mm"))
_put("_grouped_mm", _e("grouped_mm"))  # mixture-of-experts: one product per group of rows, columns or K
_put("_fft_r2c _fft_c2r _fft_c2c", _e("fft"))  # 5 N log2 N per complex transform (half with a real side)
_put("convolution _convolution convolution_overrideable", _e("conv"))
_put("cudnn_convolution _slow_conv2d_forward mkldnn_convolution slow_conv_dilated2d slow_conv3d_forward", _e("conv"))
_put("_conv_depthwise2d", _e("conv", depthwise=True))  # no groups argument: one group per input channel
_put("cudnn_convolution_transpose slow_conv_transpose2d slow_conv_transpose3d", _e("conv", always_transposed=1))
_put("convolution_backward", _e("conv_bwd"))

# ---- attention: argument positions come from the schema; layout and FlopCounterMode's reading of it here ------
_put("_scaled_dot_product_flash_attention _scaled_dot_product_efficient_attention "
     "_scaled_dot_product_cudnn_attention _scaled_dot_product_flash_attention_for_cpu "
     "_scaled_dot_product_fused_attention_overrideable", _e("attn"))
_put("_flash_attention_forward", _e("attn", bshd=1, flop_counter_bshd=1))
_put("_efficient_attention_forward", _e("attn", bshd=1))
_put("_scaled_dot_product_flash_attention_backward _scaled_dot_product_efficient_attention_backward "
     "_scaled_dot_product_cudnn_attention_backward _scaled_dot_product_flash_attention_for_cpu_backward "
     "_scaled_dot_product_fused_attention_overrideable_backward", _e("attn_bwd"))
_put("_flash_attention_backward", _e("attn_bwd", bshd=1, flop_counter_bshd=1))
_put("_efficient_attention_backward", _e("attn_bwd", bshd=1))

_put("_native_multi_head_attention", _e("mha"))

# ---- gathers, pooling, losses -----------------------------------------------------------------------------------
_put("embedding index_select gather index take take_along_dim _embedding_bag embedding_bag", _e("gather"))
# masked_scatter_backward(grad_output, mask, sizes), the gradient of masked_scatter's source (a vision-language model's
# merge of image features into the text embeddings): grad_output gathered at the mask's true positions into a result of
# `sizes`, zero-filled past them. No arithmetic; reads the mask (at its stored size: broadcast along the hidden
# dimension, one bool per token) and one element of grad_output per element of the result, writes the result. Exact
# when the mask selects as many elements as the source has (the model checks that the counts match); where it selects
# fewer, the zero-filled tail is counted as read too (the count of true elements is a value, not a shape).
_put("masked_scatter_backward", _e("gather"))
# Scatters as mixture-of-experts dispatch and combine use them: the work is per element scattered (of `src` /
# `source`), not per element of the destination, which is mostly untouched.
_put("scatter", _e("copy"))  # scatter.src / scatter.value: a copy into the destination
_put("scatter.reduce scatter_add scatter_reduce", _e("ewise_in", 1, of="src"))  # one add/multiply/max per element
_put("index_add index_reduce", _e("ewise_in", 1, of="source"))
_put("scatter.value_reduce _index_put_impl", _e("ewise", 1))
# Histograms: histc finds the bin of each element (subtract the low edge, scale) and adds one: 3 FLOPs per element;
# bincount adds one (or a weight) per element.
_put("histc", _e("ewise_in", 3))
_put("bincount", _e("ewise_in", 1))
_put("max_pool1d", _e("pool", 1, spatial=1))
_put("max_pool2d_with_indices max_pool2d", _e("pool", 1, spatial=2))
_put("max_pool3d_with_indices", _e("pool", 1, spatial=3))
# Inductor's graphs (torch.compile): its low-memory max pool (2-D pools; the window offsets as int8 instead of
# int64 indices) and the conversion of the offsets to indices for the backward; a constraint on a result's strides
# (a copy when the strides differ; counted as one)
_put("prims::_low_memory_max_pool_with_offsets", _e("pool", 1, spatial=2))
_put("prims::_low_memory_max_pool_offsets_to_indices", _e("ewise"))
_put("prims::inductor_force_stride_order", _e("copy"))
_put("avg_pool2d", _e("pool", 1, spatial=2))
_put("avg_pool3d", _e("pool", 1, spatial=3))
_put("avg_pool2d_backward", _e("pool", 1, noread=(1,), spatial=2))
_put("avg_pool3d_backward", _e("pool", 1, noread=(1,), spatial=3))
_put("nll_loss_forward nll_loss2d_forward", _e("nll", target=1, per_target=1))  # forward: `target` at 1
_put("nll_loss_backward nll_loss2d_backward", _e("nll", noread=(1,), target=2, per_target=2))

# ---- resampling: per element of the result (forward) or of grad_output (backward) --------------------------------
# nearest: a gather, no FLOPs. Linear interpolation: one lerp a + w*(b - a) (3 FLOPs) per output element and
# dimension pair: linear 1 lerp (3), bilinear 3 lerps (9), trilinear 7 lerps (21); bicubic: 5 four-tap cubic
# interpolations (4 multiplies + 3 adds each: 35). Backward: each grad_output element is weighted into every tap
# (a multiply and an add per tap: linear 2 taps 4, bilinear 4 taps 8, trilinear 8 taps 16, bicubic 16 taps 32);
# nearest adds it into one input element (1).
_put("upsample_nearest1d upsample_nearest2d upsample_nearest3d _upsample_nearest_exact1d _upsample_nearest_exact2d "
     "_upsample_nearest_exact3d", _e("copy"))
_put("upsample_linear1d", _e("ewise", 3))
_put("upsample_bilinear2d _upsample_bilinear2d_aa", _e("ewise", 9))
_put("upsample_trilinear3d", _e("ewise", 21))
_put("upsample_bicubic2d _upsample_bicubic2d_aa", _e("ewise", 35))
_put("upsample_nearest1d_backward upsample_nearest2d_backward upsample_nearest3d_backward "
     "_upsample_nearest_exact1d_backward _upsample_nearest_exact2d_backward _upsample_nearest_exact3d_backward",
     _e("ewise_in", 1))
_put("upsample_linear1d_backward", _e("ewise_in", 4))
_put("upsample_bilinear2d_backward _upsample_bilinear2d_aa_backward", _e("ewise_in", 8))
_put("upsample_trilinear3d_backward", _e("ewise_in", 16))
_put("upsample_bicubic2d_backward _upsample_bicubic2d_aa_backward", _e("ewise_in", 32))

# ---- optimizers: per element of the parameter list ---------------------------------------------------------------
_put("_foreach_add _foreach_sub _foreach_mul _foreach_div _foreach_neg _foreach_abs _foreach_maximum "
     "_foreach_minimum _foreach_clamp_min _foreach_clamp_max _foreach_reciprocal _foreach_sign "
     "_foreach_sum", _e("foreach", 1))
_put("_foreach_addcmul _foreach_addcdiv _foreach_lerp", _e("foreach", 3))
_put("_foreach_sqrt _foreach_exp _foreach_log _foreach_pow _foreach_rsqrt", _e("foreach", 0, 1))
_put("_foreach_norm", _e("foreach", 2))
_put("_foreach_copy", _e("foreach", 0, noread=(0,)))
_put("_foreach_zero", _e("foreach", 0, noread=ALL_ARGS))
_put("_fused_adam _fused_adamw", _e("foreach", 13, 1, writes=("self", "exp_avgs", "exp_avg_sqs", "max_exp_avg_sqs")))
_put("_fused_sgd", _e("foreach", 3, writes=("self", "momentum_buffer_list")))
_put("_fused_adagrad", _e("foreach", 6, 1, writes=("self", "state_sums")))
_put("_amp_foreach_non_finite_check_and_unscale", _e("foreach", 2))
_put("_amp_update_scale", _e("ewise", 4))


# ---- more element-wise ops ----------------------------------------------------------------------------------------
# Shifts, sign tests and angle conversions: one operation per element.
_put("bitwise_left_shift bitwise_right_shift __lshift__ __rshift__ __ilshift__ __irshift__ signbit isneginf isposinf "
     "deg2rad rad2deg nextafter frexp", _e("ewise", 1))
_put("_add_relu", _e("ewise", 2))  # add, then max with 0
_put("complex conj_physical _conj_physical _conj_copy _neg_view_copy", _e("copy"))  # real and imaginary parts moved
# polar(abs, angle) = abs * (cos, sin): 2 multiplies + cos, sin
_put("polar", _e("ewise", 2, 2))
_put("hypot", _e("ewise", 3, 1))  # x*x + y*y, sqrt
_put("ldexp", _e("ewise", 1, 1))  # self * 2**other: exp2 + multiply
_put("sinc", _e("ewise", 2, 1))  # sin(pi x) / (pi x): multiply, divide + sin
_put("angle", _e("ewise", 0, 1))  # atan2(imag, real); of a real tensor a comparison
# log(exp(a) + exp(b)) = max + log1p(exp(-|a - b|)): max, subtract, add + exp, log1p (base 2 the same)
_put("logaddexp logaddexp2", _e("ewise", 3, 2))
_put("logit_backward", _e("ewise", 3))  # grad / (x * (1 - x))
_put("hardshrink", _e("ewise", 2))  # |x| > lambda ? x : 0
_put("softshrink", _e("ewise", 3))  # compare, then x -/+ lambda
_put("hardshrink_backward softshrink_backward", _e("ewise", 2))
# Special functions: one special-function evaluation per element (the convention of exp, erf, lgamma: its series or
# rational approximation is not counted in FLOPs); the extra arithmetic around it where there is some.
_put("i0 special_i0e special_i1 special_i1e special_airy_ai special_bessel_j0 special_bessel_j1 special_bessel_y0 "
     "special_bessel_y1 special_modified_bessel_i0 special_modified_bessel_i1 special_modified_bessel_k0 "
     "special_modified_bessel_k1 special_scaled_modified_bessel_k0 special_scaled_modified_bessel_k1 "
     "special_spherical_bessel_j0 special_erfcx special_log_ndtr special_ndtri special_zeta igamma igammac polygamma "
     "gcd lcm special_chebyshev_polynomial_t special_chebyshev_polynomial_u special_chebyshev_polynomial_v "
     "special_chebyshev_polynomial_w special_shifted_chebyshev_polynomial_t special_shifted_chebyshev_polynomial_u "
     "special_shifted_chebyshev_polynomial_v special_shifted_chebyshev_polynomial_w special_hermite_polynomial_h "
     "special_hermite_polynomial_he special_laguerre_polynomial_l special_legendre_polynomial_p",
     _e("ewise", 0, 1))
_put("special_entr", _e("ewise", 2, 1))  # -x * log(x): multiply, negate + log
_put("special_xlog1py", _e("ewise", 1, 1))  # x * log1p(y)
# Gated linear unit: a * sigmoid(b) per element of the result (sigmoid 2 + 1 exp, multiply 1); its backward per element
# of grad_output: the sigmoid again (2 + 1 exp), grad * sig, grad * a * sig * (1 - sig) (4 more)
_put("glu", _e("ewise", 3, 1))
_put("glu_backward", _e("ewise_in", 6, 1))
_put("glu_jvp", _e("ewise", 6, 1))  # forward-mode: the value's sigmoid and the tangent's two terms
_put("glu_backward_jvp", _e("ewise_in", 10, 1))
_put("_prelu_kernel", _e("ewise", 2))  # x > 0 ? x : w * x
_put("_prelu_kernel_backward", _e("ewise_in", 4))  # per grad element: select, multiply, and the weight's sum
_put("rrelu_with_noise", _e("ewise", 2, 1))  # a uniform draw per element, compare, multiply
_put("rrelu_with_noise_backward", _e("ewise", 1))
_put("linalg_cross", _e("ewise", 3))  # each component a*b - c*d

# ---- more reductions, norms and losses (per element of the first tensor) -------------------------------------------
_put("_aminmax", _e("ewise_in", 2))
_put("cummax cummin _cummax_helper _cummin_helper", _e("ewise_in", 1))  # one comparison per element
_put("logcumsumexp _logcumsumexp", _e("ewise_in", 3, 2))  # a running logaddexp
_put("native_norm", _e("ewise_in", 2))
_put("linalg__powsum", _e("ewise_in", 2, 1))  # sum |x|**p: abs, add + pow
_put("dist", _e("ewise_in", 3, 1))  # |x - y|**p summed: subtract, abs, add + pow
_put("renorm", _e("ewise_in", 3, 1))  # per slice its norm (square, add), then a scale per element + the root
_put("softmax log_softmax", _e("ewise_in", 4, 1))  # the out= variants (the functional ones decompose)
_put("_masked_softmax", _e("ewise_in", 5, 1))  # softmax plus the mask's select
_put("_masked_softmax_backward", _e("ewise_in", 4))
_put("binary_cross_entropy_backward", _e("ewise_in", 5, of="self"))  # grad * (x - y) / (x * (1 - x)), clamped
_put("soft_margin_loss", _e("ewise_in", 4, 2))  # log(1 + exp(-y x)) summed
_put("soft_margin_loss_backward", _e("ewise_in", 5, 1, of="self"))
_put("multi_margin_loss", _e("ewise_in", 4))  # per input element: margin - x[y] + x[i], clamp, (square), add
_put("multi_margin_loss_backward", _e("ewise_in", 4, of="self"))
_put("segment_reduce", _e("ewise_in", 1))  # one add / max / min / multiply per data element
_put("_segment_reduce_backward", _e("ewise_in", 2, of="data"))  # per data element: the gradient's select or scale
# Synchronised BatchNorm's parts (per element of the input): the statistics (mean, variance: 4), the element-wise
# normalisation (4), the backward's two sums (4) and its element-wise part (6). The per-channel gathers: 3 per element.
_put("batch_norm_update_stats", _e("ewise_in", 4))
_put("batch_norm_elemt", _e("ewise_in", 4))
_put("batch_norm_backward_reduce", _e("ewise_in", 4))
_put("batch_norm_backward_elemt", _e("ewise_in", 6))
_put("batch_norm_gather_stats batch_norm_gather_stats_with_counts", _e("ewise_in", 3, of="mean"))

# ---- more pooling, padding and resampling ---------------------------------------------------------------------------
_put("avg_pool1d", _e("pool", 1, spatial=1))
_put("max_pool2d_backward", _e("pool", 1, spatial=2))  # per grad_output element: the window's comparisons again
_put("fractional_max_pool2d", _e("pool", 1, spatial=2))
_put("fractional_max_pool3d", _e("pool", 1, spatial=3))
_put("fractional_max_pool2d_backward fractional_max_pool3d_backward", _e("ewise_in", 1, noread=(1,)))
_put("adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d adaptive_max_pool3d", _e("ewise_in", 1))
_put("adaptive_avg_pool3d_backward adaptive_max_pool3d_backward", _e("ewise", 1, noread=(1,)))
_put("max_unpool3d", _e("ewise_in", 1, noread=(1,)))
# padding backward: every grad_output element added into grad_input (`self` gives only the shape)
_put("reflection_pad1d_backward reflection_pad2d_backward reflection_pad3d_backward replication_pad1d_backward "
     "replication_pad2d_backward replication_pad3d_backward", _e("ewise_in", 1, noread=(1,)))
_put("reflection_pad3d replication_pad3d pixel_shuffle pixel_unshuffle channel_shuffle _chunk_cat _stack block_diag "
     "_reshape_copy _reshape_alias_copy diagonal_copy unfold_copy split_with_sizes_copy values_copy indices_copy "
     "_indices_copy _values_copy ccol_indices_copy col_indices_copy crow_indices_copy row_indices_copy "
     "view_as_complex_copy view_as_real_copy _fw_primal_copy _make_dual_copy _nested_get_values_copy "
     "_nested_view_from_buffer_copy _nested_view_from_jagged_copy _sparse_broadcast_to_copy "
     "_test_autograd_multiple_dispatch_view_copy _lazy_clone lift put _unsafe_index_put nonzero_static "
     "_unsafe_masked_index _unsafe_masked_index_put_accumulate lu_unpack int_repr q_per_channel_scales "
     "q_per_channel_zero_points _make_per_tensor_quantized_tensor _make_per_channel_quantized_tensor "
     "mkldnn_reorder_conv2d_weight mkldnn_reorder_conv3d_weight to_mkldnn _mkldnn_reshape _mkldnn_transpose "
     "to_padded_tensor _jagged_to_padded_dense_forward _padded_dense_to_jagged_forward _nested_from_padded "
     "_nested_from_padded_and_nested_example _nested_from_padded_tensor _nested_tensor_from_tensor_list "
     "_nested_tensor_from_mask unsafe_split_with_sizes",
     _e("copy"))
_put("fft_fftfreq fft_rfftfreq range bartlett_window blackman_window hamming_window hann_window kaiser_window "
     "tril_indices triu_indices _new_zeros_with_same_feature_meta", _e("fill", noread=ALL_ARGS))
_put("empty_permuted empty_quantized _empty_affine_quantized _empty_per_channel_affine_quantized resize resize_as "
     "_resize_output sparse_resize sparse_resize_and_clear resize_as_sparse set _cudnn_init_dropout_state",
     _e("zero"))
# Random draws with tensor parameters: one draw per element of the result, the parameters read
_put("poisson binomial _standard_gamma _sample_dirichlet normal_functional _fused_dropout _philox_normal "
     "_philox_uniform", _e("ewise", 0, 1))
_put("_standard_gamma_grad _dirichlet_grad", _e("ewise", 0, 1))
_put("_philox_key_split _philox_key_fold_in _fill_mem_eff_dropout_mask", _e("fill", 0, 1, noread=ALL_ARGS))

# ---- quantization: per element --------------------------------------------------------------------------------------
# quantize: x / scale + zero_point, round, clamp (5); dequantize: (q - zero_point) * scale (2); fake quantization both
# (7); the learnable variants' backward: the gradients of x, scale and zero point (10); the moving-average observer
# adds min and max per element (2)
_put("quantize_per_tensor quantize_per_channel", _e("ewise", 5))
_put("quantize_per_tensor_dynamic", _e("ewise", 7))
_put("dequantize", _e("ewise", 2))
_put("fake_quantize_per_tensor_affine_cachemask fake_quantize_per_channel_affine_cachemask "
     "_fake_quantize_per_tensor_affine_cachemask_tensor_qparams _fake_quantize_learnable_per_tensor_affine "
     "_fake_quantize_learnable_per_channel_affine", _e("ewise", 7))
_put("_fake_quantize_learnable_per_tensor_affine_backward _fake_quantize_learnable_per_channel_affine_backward",
     _e("ewise_in", 10, of="self"))
_put("_fused_moving_avg_obs_fq_helper _fused_moving_avg_obs_fq_helper_functional", _e("ewise_in", 9))
_put("quantized_max_pool1d", _e("pool", 1, spatial=1))
_put("quantized_max_pool2d mkldnn_max_pool2d", _e("pool", 1, spatial=2))
_put("quantized_max_pool3d mkldnn_max_pool3d", _e("pool", 1, spatial=3))
_put("mkldnn_max_pool2d_backward mkldnn_max_pool3d_backward mkldnn_adaptive_avg_pool2d_backward",
     _e("ewise_in", 1, noread=(1,)))
_put("mkldnn_adaptive_avg_pool2d", _e("ewise_in", 1))
_put("quantized_batch_norm", _e("ewise_in", 8))
_put("embedding_renorm", _e("ewise_in", 3, 1))  # each row's norm and scale (the rows it touches: an upper bound)
_put("_embedding_bag_forward_only", _e("gather"))
_put("_embedding_bag_dense_backward _embedding_bag_per_sample_weights_backward", _e("ewise_in", 1))
_put("_foreach_max _foreach_round _foreach_floor _foreach_ceil _foreach_trunc _foreach_frac", _e("foreach", 1))
_put("_foreach_clone", _e("foreach", 0))
_put("_foreach_powsum", _e("foreach", 2, 1))
_put("_foreach_acos _foreach_asin _foreach_atan _foreach_cos _foreach_cosh _foreach_sin _foreach_sinh _foreach_tan "
     "_foreach_tanh _foreach_erf _foreach_erfc _foreach_expm1 _foreach_lgamma _foreach_log10 _foreach_log1p "
     "_foreach_log2", _e("foreach", 0, 1))
_put("_foreach_sigmoid", _e("foreach", 2, 1))

# ---- prims: the primitives of torch._refs and of Inductor's graphs, counted as the aten ops they stand for --------
_PRIMS_AS_ATEN = (
    "abs acos acosh asin asinh atan atan2 atanh bitwise_and bitwise_not bitwise_or bitwise_xor ceil cos cosh digamma "
    "div eq erf erfc exp exp2 expm1 floor fmax fmin fmod ge gt isfinite le lgamma log log10 log1p log2 lt maximum "
    "minimum mul ne neg pow reciprocal remainder round rsqrt sign signbit sin sinh sqrt sub tan tanh trunc add gcd "
    "hypot igamma igammac nextafter frexp amax amin prod sum var where clone cat")
for _name in _PRIMS_AS_ATEN.split():
    TABLE["prims::" + _name] = TABLE[_name]
_put("prims::fma", _e("ewise", 2))
_put("prims::shift_left prims::shift_right_arithmetic prims::inductor_cvt_e8m0_rceil", _e("ewise", 1))
_put("prims::cbrt prims::erf_inv prims::erfcx prims::ndtri prims::zeta prims::bessel_i0 prims::bessel_i0e "
     "prims::bessel_i1 prims::bessel_i1e prims::bessel_j0 prims::bessel_j1 prims::spherical_bessel_j0",
     _e("ewise", 0, 1))
_put("prims::xor_sum", _e("ewise_in", 1))
_put("prims::prepare_softmax_online", _e("ewise_in", 3, 1))  # running max and sum of exp
_put("prims::convert_element_type prims::copy_strided prims::copy_to prims::rev prims::collapse prims::reshape "
     "prims::device_put prims::as_strided_scatter prims::_unsafe_index_put", _e("copy"))
_put("prims::as_strided prims::broadcast_in_dim prims::collapse_view prims::conj prims::imag prims::real "
     "prims::split_dim prims::squeeze prims::transpose prims::view_of prims::view_of_dtype prims::empty "
     "prims::empty_strided prims::empty_permuted prims::resize prims::_make_token prims::_sink_tokens "
     "prims::inductor_rand_eager_offset prims::inductor_rand_eager_offsets", _e("zero"))
_put("prims::iota prims::full prims::full_like prims::scalar_tensor prims::fill prims::inductor_seeds "
     "prims::inductor_seed prims::inductor_lookup_seed", _e("fill", noread=ALL_ARGS))
_put("prims::normal prims::uniform prims::inductor_random prims::inductor_randint",
     _e("fill", special=1, noread=ALL_ARGS))
_put("prims::fft_r2c prims::fft_c2r prims::fft_c2c", _e("fft"))

# ---- backend convolutions (CUDA, ROCm), counted as the convolution they compute --------------------------------------
# the fused ReLU (and the add of add_relu) after it are 1 FLOP per output element that these entries leave out
_put("cudnn_convolution_relu cudnn_convolution_add_relu miopen_convolution miopen_convolution_relu "
     "miopen_convolution_add_relu miopen_depthwise_convolution _nnpack_spatial_convolution slow_conv_dilated3d",
     _e("conv"))
_put("conv_depthwise3d", _e("conv", depthwise=True))
_put("miopen_convolution_transpose", _e("conv", always_transposed=1))
_put("convolution_backward_overrideable", _e("conv_bwd"))
_put("cudnn_affine_grid_generator", _e("ewise", 6))
_put("cudnn_affine_grid_generator_backward", _e("ewise_in", 6))
_put("rrelu_with_noise_functional", _e("ewise", 2, 1))
_put("_upsample_lanczos2d_aa", _e("ewise", 35))  # as the antialiased bicubic: 4 x 4 taps per output element
_put("_upsample_lanczos2d_aa_backward", _e("ewise_in", 32))
_put("hash_tensor", _e("ewise_in", 1))
_put("_histogramdd_bin_edges", _e("ewise_in", 2))  # the range from the input's min and max
_put("_histogramdd_from_bin_cts _histogramdd_from_bin_tensors", _e("ewise_in", 4))
_put("_linalg_check_errors _validate_compressed_sparse_indices _nested_tensor_from_mask_left_aligned prims::item prims::conj_physical "
     "prims::_unsafe_index_put_ from_file", _e("copy"))
_put("_make_dep_token _functional_assert_scalar _functional_sym_constrain_range "
     "_functional_sym_constrain_range_for_size shallow_copy_data", _e("zero"))

def functional_name(name: str) -> str:
    """The functional op an in-place variant resolves to: ``"add_"`` -> ``"add"``, ``"mylib::op_"`` -> ``"mylib::op"``
    (dunder names such as ``__iand__`` are not in-place variants). The one place this rule is written."""
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name


_ZERO = Entry("zero")


def lookup(qualified: str, overload: str = "") -> Entry | None:
    """Entry for an operator name: ``"aten::add"`` / ``"add"`` (with optional ``overload``), in-place (``add_``) and
    ``out=`` variants resolving to the functional op's entry; an overload the audit table
    (``roofline._counting._decisions``) classes as a view or a metadata query: the ``zero`` entry. ``None`` when no
    formula is known."""
    entry = table_lookup(qualified, overload)
    if entry is None:
        ns, _, name = qualified.rpartition("::")
        if f"{ns or 'aten'}::{name}.{overload or 'default'}" in _ZERO_DECISIONS:
            return _ZERO
    return entry


def table_lookup(qualified: str, overload: str = "") -> Entry | None:
    """:func:`lookup` in :data:`TABLE` alone (the formulas written here, without the audit table's classes)."""
    ns, _, name = qualified.rpartition("::")
    ns = ns or "aten"
    candidates = []
    if ns == "aten":
        if overload:
            candidates.append(f"{name}.{overload}")
        candidates.append(name)
        if functional_name(name) != name:
            candidates.append(functional_name(name))
    else:
        key = f"{ns}::{name}"
        if overload:
            candidates.append(f"{key}.{overload}")
        candidates.append(key)
    for c in candidates:
        e = TABLE.get(c)
        if e is not None:
            return e
    return None


@dataclass(frozen=True)
class Schema:
    """What the cost model needs of an operator overload's schema: argument names (positional, then keyword-only, in
    schema order), how many are keyword-only, which are written (alias-annotated ``!``) and whether any result is
    an alias of an argument."""

    names: tuple[str, ...]
    kwonly: int
    written: tuple[str, ...]
    returns_alias: bool

    @property
    def kwnames(self) -> tuple[str, ...]:
        """The keyword-only arguments' names, in schema order."""
        return self.names[len(self.names) - self.kwonly:]

    @property
    def outs(self) -> tuple[str, ...]:
        """``out=`` destinations: the written keyword-only arguments."""
        kw = self.kwnames
        return tuple(w for w in self.written if w in kw)

    @classmethod
    def from_torch(cls, sch) -> Schema:
        """From a ``torch._C.FunctionSchema`` (``op._schema``)."""
        args = sch.arguments
        return cls(tuple(a.name for a in args), sum(1 for a in args if a.kwarg_only),
                   tuple(a.name for a in args if a.alias_info is not None and a.alias_info.is_write),
                   any(r.alias_info is not None for r in sch.returns))


def schema(qualified: str, overload: str = "") -> Schema | None:
    """The schema of ``aten::name`` (``profiler::name``, ...) overload ``overload`` ("" or "default": the default
    overload, else the first one) from the table in ``roofline._counting._schemas``, which holds every overload of the ops this
    table has formulas for (and of their in-place variants). ``None`` for ops it does not hold. Needs no torch."""
    ns, _, name = qualified.rpartition("::")
    key = name if (ns or "aten") == "aten" else f"{ns}::{name}"
    ov = overload if overload and overload != "default" else DEFAULT_OVERLOAD.get(key, "default")
    row = SCHEMAS.get(f"{key}.{ov}")
    if row is None:
        return None
    names, kwonly, written, returns_alias = row
    return Schema(tuple(names.split()), kwonly, tuple(written.split()), bool(returns_alias))


def schemas_from_torch() -> tuple[dict, dict]:
    """(SCHEMAS, DEFAULT_OVERLOAD) as ``roofline._counting._schemas`` stores them, read from the installed torch: every overload
    of every op in TABLE and of its in-place variant (``name_``)."""
    import torch

    try:  # Inductor's own prims (prims::_low_memory_max_pool_with_offsets, ...) exist once its module is imported
        import torch._inductor.inductor_prims  # noqa: F401
    except Exception:  # noqa: BLE001 - a torch without them: their rows are simply absent
        pass
    rows, default = {}, {}
    for key in sorted(TABLE):
        ns, _, name = key.rpartition("::")
        ns = ns or "aten"
        for packet_name in (name, name + "_"):  # the op and its in-place variant (see functional_name)
            packet = getattr(getattr(torch.ops, ns), packet_name, None)
            if packet is None or not hasattr(packet, "overloads"):
                continue
            k = packet_name if ns == "aten" else f"{ns}::{packet_name}"
            overloads = list(packet.overloads())
            if overloads and "default" not in overloads:
                default[k] = overloads[0]
            for ov in overloads:
                sch = Schema.from_torch(getattr(packet, ov)._schema)
                rows[f"{k}.{ov}"] = (" ".join(sch.names), sch.kwonly, " ".join(sch.written), int(sch.returns_alias))
    return rows, default


def write_schema_table(path=None) -> str:
    """Regenerate ``roofline/_counting/_schemas.py`` from the installed torch:
    ``python -c "from roofline._counting import _registry; _registry.write_schema_table()"``."""
    import torch

    rows, default = schemas_from_torch()
    path = path or os.path.join(os.path.dirname(os.path.abspath(__file__)), "_schemas.py")
    lines = ['"""Operator schemas for the cost model, so that roofline.cost() answers the same with and without torch.',
             f'Generated from torch {torch.__version__.split("+")[0]} by roofline._counting._registry.write_schema_table(); do not '
             'edit. tests/test_counts_fixed.py checks it against the installed torch.',
             "",
             "SCHEMAS: overload (``name.overload``) -> (argument names, number of keyword-only arguments, written",
             "argument names, 1 if a result aliases an argument). DEFAULT_OVERLOAD: the overload a bare name means",
             'where there is no ``default``."""', "",
             f"TORCH_VERSION = {torch.__version__.split('+')[0]!r}", "", "SCHEMAS = {"]
    lines += [f"    {k!r}: {v!r}," for k, v in sorted(rows.items())]
    lines += ["}", "", "DEFAULT_OVERLOAD = {"]
    lines += [f"    {k!r}: {v!r}," for k, v in sorted(default.items())]
    lines += ["}", ""]

    _output.write(path, "\n".join(lines), where="write_schema_table")
    return path


ALL_BITS = (1 << 64) - 1


class FormulaError(ValueError):
    """An op's formula cannot be compiled for its schema (e.g. a named argument is missing)."""


def results_are_new(argnames, written, outs) -> bool:
    """Whether an op that writes arguments also returns new tensors, from its argument names alone: it does unless it
    writes out= destinations (and returns them) or writes its first argument (an in-place op returning ``self``).
    ``returns_alias`` of every schema in ``roofline._counting._schemas`` agrees (checked by the tests)."""
    return not outs and not (argnames and argnames[0] in written)


def compile_entry(entry: Entry, packet: str, argnames, written=(), outs=None) -> dict:
    """Turn an :class:`Entry` into the keyword arguments of ``Recorder.add_op`` for an op whose arguments (positional
    then keyword-only, in schema order) are ``argnames`` and whose schema marks ``written`` as mutated. ``outs``:
    the ``out=`` destinations (mutated keyword-only arguments); without a schema, names starting with "out"."""
    argnames = list(argnames)
    if outs is None:
        outs = [w for w in written if w.startswith("out")]

    def pos(name, required=True):
        if isinstance(name, int):
            return name
        if name in argnames:
            return argnames.index(name)
        if required:
            raise FormulaError(f"{packet}: its formula needs an argument named {name!r}; the schema has {argnames}")
        return -1

    prm = entry.params
    noread = 0
    if entry.noread == ALL_ARGS:
        noread = ALL_BITS
    else:
        for n in entry.noread:
            i = pos(n)
            if 0 <= i < 64:
                noread |= 1 << i
    write = 0
    updated = [w for w in written if w not in outs]  # arguments the schema says are updated in place
    if entry.writes is not None:  # the schema over-states it (fused optimizers mark gradients as mutable)
        updated = [w for w in entry.writes if w in updated]
    updated += [n for n in prm.get("stats", ()) if n in argnames and n not in updated]
    for n in updated:
        i = pos(n, required=False)
        if 0 <= i < 64:
            write |= 1 << i
    for n in outs:  # out= variants: the destination is written, never read
        i = pos(n, required=False)
        if 0 <= i < 64:
            write |= 1 << i
            noread |= 1 << i
    flags = _core.OPF_FLOP_COUNTER if packet in FLOP_COUNTER_OPS else 0
    if write and results_are_new(argnames, written, outs):
        flags |= _core.OPF_FRESH_OUTS
    params = {}
    for p in KINDS[entry.kind].params:
        if p.is_position:  # the schema argument the entry names, else the parameter's own
            name = prm.get(p.name, p.argname)
            v = -1 if name is None else pos(name, required=p.type == "arg_required")
        else:
            v = int({"flops": entry.flops, "special": entry.special}.get(p.name, prm.get(p.name, 0)))
        if not p.lo <= v <= p.hi:
            raise FormulaError(f"{packet}: parameter {p.name}={v} of kind {entry.kind!r} is outside {p.lo}..{p.hi}")
        if v != (-1 if p.is_position else 0):
            params[p.name] = v
    return dict(kind=KINDS_BY_NAME[entry.kind], params=params, noread_mask=noread, write_mask=write, flags=flags)
