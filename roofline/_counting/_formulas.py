"""Built-in Python formulas: ops whose count depends on tensor values or on many arguments.

``measure`` uses them; ``roofline.cost`` (shapes only) does not know these ops. Each formula takes the op's arguments
bound to their schema names (``b``) and its result (``out``) and returns a dict of counts (the keys of
``roofline.Cost`` plus ``flop_counter_flops`` and ``status``), or ``None`` to use the op's C formula for this call
(the attention ops use the C formula for dense batches and this module for variable-length ones).

The counts follow the conventions of docs/concepts.md (one FLOP per add or multiply, products ``2*M*N*K`` as matrix
FLOPs, transcendental functions in ``special_ops``, compulsory bytes: every tensor argument read once at its touched
size, every result written once). The per-op conventions (comparisons of a sort, the pointwise work of a recurrent
cell, the blocks of a FlexAttention mask) are in docs/concepts.md, "Formulas beyond FlopCounterMode".

A count that needs tensor values which cannot be read (meta or fake tensors: a sweep on the meta device) is recorded
with zero counts and status ``E_DATA`` (listed in ``Report.errors``), never guessed; arguments a formula cannot count
(it raises ValueError) give status ``E_ARGS`` inside ``measure``.

Needs no torch at import; the formulas only call methods of the tensors they are given.
"""

from __future__ import annotations

from roofline._counting._formulas_linalg import (
    _cdist, _cdist_backward, _eig, _euclidean_dist, _householder, _linalg, _lstsq, _lu_flops, _matrix_exp,
    _matrix_sqrth, _mvlgamma, _ormqr, _pdist, _pinv, _polar, _qr_flops, _solve, _svd, _svd_flops, _trace)
from roofline._counting._formulas_nn import (
    _affine_grid, _ctc, _cudnn_grid_sampler, _cudnn_rnn, _encoder_layer, _flex, _fused_cell, _grid_sampler,
    _multilabel_margin, _nms, _pack_padded, _rnn_layer, _roi_align, _varlen)
from roofline._counting._formulas_products import (
    _addmm_activation, _compute_linear_combination, _conv_tbc, _convolution_pointwise, _foreach_mm, _linear,
    _linear_backward, _linear_cross_entropy, _linear_pointwise, _mkl_linear, _mkldnn_linear_backward_input,
    _mkldnn_linear_backward_weights, _out_dtype, _quant_mm, _repack, _sampled_addmm, _scaled_grouped_mm,
    _slow_conv2d_backward, _sparse_coalesce, _sparse_copy, _sparse_dense_mm, _sparse_mm_reduce_backward,
    _sparse_reduce, _sparse_sparse, _transform_bias_rescale_qkv, _trilinear)
from roofline._counting._formulas_values import (
    _alias_or_copy, _allclose, _bucketize, _equal, _histogram, _isin, _searchsorted, _sort, _topk, _unique)


# ---- tables -------------------------------------------------------------------------------------------------------

# aten ops (qualified name, any overload) -> formula(bound arguments, result).
OPS = {
    "aten::sort": _sort, "aten::argsort": _sort, "aten::kthvalue": _sort, "aten::mode": _sort,
    "aten::msort": lambda b, out: _sort(b, out, 0),
    "aten::median": lambda b, out: _sort(b, out, None), "aten::nanmedian": lambda b, out: _sort(b, out, None),
    "aten::_unique2": lambda b, out: _sort(b, out, None), "aten::unique_dim": _sort,
    "aten::unique_consecutive": lambda b, out: _sort(b, out, None),
    "aten::topk": _topk,
    "aten::searchsorted": _searchsorted,
    "aten::bucketize": _bucketize,
    "aten::isin": _isin,
    "aten::mkldnn_rnn_layer": _rnn_layer,
    "aten::mkldnn_rnn_layer_backward": lambda b, out: _rnn_layer(b, out, backward=True),
    "aten::_cudnn_rnn": _cudnn_rnn,
    "aten::_cudnn_rnn_backward": lambda b, out: _cudnn_rnn(b, out, backward=True),
    "aten::_thnn_fused_lstm_cell": lambda b, out: _fused_cell(b, out, 4),
    "aten::_thnn_fused_gru_cell": lambda b, out: _fused_cell(b, out, 3),
    "aten::_thnn_fused_lstm_cell_backward_impl": lambda b, out: _fused_cell(b, out, 4, backward=True),
    "aten::_thnn_fused_gru_cell_backward": lambda b, out: _fused_cell(b, out, 3, backward=True),
    "aten::_transformer_encoder_layer_fwd": _encoder_layer,
    "aten::_flash_attention_forward": lambda b, out: _varlen(b, out, flash=True, backward=False),
    "aten::_flash_attention_backward": lambda b, out: _varlen(b, out, flash=True, backward=True),
    "aten::_efficient_attention_forward": lambda b, out: _varlen(b, out, flash=False, backward=False),
    "aten::_efficient_attention_backward": lambda b, out: _varlen(b, out, flash=False, backward=True),
    "aten::_scaled_grouped_mm": _scaled_grouped_mm, "aten::_scaled_grouped_mm_v2": _scaled_grouped_mm,
    "aten::_weight_int8pack_mm": lambda b, out: _quant_mm(b, out, output_terms=1),
    "aten::_weight_int4pack_mm": lambda b, out: _quant_mm(b, out, weight_terms=2),
    "aten::_weight_int4pack_mm_for_cpu": lambda b, out: _quant_mm(b, out, weight_terms=2),
    "aten::_weight_int4pack_mm_with_scales_and_zeros": lambda b, out: _quant_mm(b, out, weight_terms=2),
    "aten::_dyn_quant_matmul_4bit": lambda b, out: _quant_mm(b, out, x_name="inp", block=b["block_size"]),
    "aten::_convert_weight_to_int4pack": _repack,
    "mkl::_mkl_linear": _mkl_linear,
    "mkldnn::_linear_pointwise": _linear_pointwise,  # any overload (schema name): .binary has ``other``
    "mkldnn::_convolution_pointwise": _convolution_pointwise,
    "mkldnn::_convolution_pointwise_": _convolution_pointwise,
    "aten::_convert_weight_to_int4pack_for_cpu": _repack,
    "aten::_dyn_quant_pack_4bit_weight": _repack,
    "aten::_linalg_det": lambda b, out: _linalg(b["A"], _lu_flops, b, out),
    "aten::_linalg_slogdet": lambda b, out: _linalg(b["A"], lambda m, n: _lu_flops(m, n) + 2 * n, b, out),
    "aten::linalg_lu_factor_ex": lambda b, out: _linalg(b["A"], _lu_flops, b, out),
    "aten::linalg_lu": lambda b, out: _linalg(b["A"], _lu_flops, b, out),
    "aten::linalg_cholesky_ex": lambda b, out: _linalg(b["self"], lambda m, n: n ** 3 // 3, b, out),
    "aten::linalg_ldl_factor_ex": lambda b, out: _linalg(b["self"], lambda m, n: n ** 3 // 3, b, out),
    "aten::geqrf": lambda b, out: _linalg(b["self"], _qr_flops, b, out),
    "aten::linalg_qr": lambda b, out: _linalg(
        b["A"], lambda m, n: _qr_flops(m, n) * (1 if b.get("mode", "reduced") == "r" else 2), b, out),
    "aten::linalg_inv_ex": lambda b, out: _linalg(b["A"], lambda m, n: 2 * n ** 3, b, out),
    "aten::cholesky_inverse": lambda b, out: _linalg(b["self"], lambda m, n: 2 * n ** 3 // 3, b, out),
    "aten::_linalg_solve_ex": lambda b, out: _solve(b, out, "A", "B", lambda n: 2 * n ** 3 // 3, 2, "left"),
    "aten::linalg_lu_solve": lambda b, out: _solve(b, out, "LU", "B", lambda n: 0, 2, "left"),
    "aten::linalg_ldl_solve": lambda b, out: _solve(b, out, "LD", "B", lambda n: 0, 2),
    "aten::cholesky_solve": lambda b, out: _solve(b, out, "input2", "self", lambda n: 0, 2),
    "aten::_cholesky_solve_helper": lambda b, out: _solve(b, out, "A", "self", lambda n: 0, 2),
    "aten::linalg_solve_triangular": lambda b, out: _solve(b, out, "self", "B", lambda n: 0, 1, "left"),
    "aten::triangular_solve": lambda b, out: _solve(b, out, "A", "self", lambda n: 0, 1),
    "aten::_linalg_eigh": lambda b, out: _eig(b, out, True, bool(b.get("compute_v", True))),
    "aten::linalg_eig": lambda b, out: _eig(b, out, False, True),
    "aten::linalg_eigvals": lambda b, out: _eig(b, out, False, False),
    "aten::_linalg_eigvals": lambda b, out: _eig(b, out, False, False),
    "aten::_linalg_svd": _svd,
    "prims::svd": lambda b, out: _linalg(b["A"], lambda m, n: _svd_flops(m, n, True, bool(b.get("full_matrices"))),
                                         b, out),
    "aten::linalg_lstsq": _lstsq,
    "aten::linalg_householder_product": _householder,
    "aten::ormqr": _ormqr,
    "aten::linalg_matrix_exp": _matrix_exp,
    "aten::linalg_pinv": _pinv,
    "aten::linalg_polar": _polar,
    "aten::linalg_matrix_sqrth": _matrix_sqrth,
    "aten::trace": _trace,
    "aten::mvlgamma": _mvlgamma,
    "aten::_cdist_forward": _cdist,
    "aten::_cdist_backward": _cdist_backward,
    "aten::_pdist_forward": _pdist,
    "aten::_pdist_backward": lambda b, out: _pdist(b, out, backward=True),
    "aten::_euclidean_dist": _euclidean_dist,
    "aten::affine_grid_generator": _affine_grid,
    "aten::grid_sampler_2d": lambda b, out: _grid_sampler(b, out, 2),
    "aten::_grid_sampler_2d_cpu_fallback": lambda b, out: _grid_sampler(b, out, 2),
    "aten::grid_sampler_3d": lambda b, out: _grid_sampler(b, out, 3),
    "aten::grid_sampler_2d_backward": lambda b, out: _grid_sampler(b, out, 2, backward=True),
    "aten::_grid_sampler_2d_cpu_fallback_backward": lambda b, out: _grid_sampler(b, out, 2, backward=True),
    "aten::grid_sampler_3d_backward": lambda b, out: _grid_sampler(b, out, 3, backward=True),
    "aten::cudnn_grid_sampler": _cudnn_grid_sampler,
    "aten::cudnn_grid_sampler_backward": lambda b, out: _cudnn_grid_sampler(b, out, backward=True),
    "aten::_ctc_loss": _ctc,
    "aten::_ctc_loss_backward": lambda b, out: _ctc(b, out, backward=True),
    "aten::multilabel_margin_loss_forward": _multilabel_margin,
    "aten::multilabel_margin_loss_backward": lambda b, out: _multilabel_margin(b, out, backward=True),
    "aten::_pack_padded_sequence": _pack_padded,
    "aten::_addmm_activation": _addmm_activation,
    "aten::linear": _linear,
    "aten::linear_backward": _linear_backward,
    "aten::mkldnn_linear": lambda b, out: _linear(dict(b, input=b["self"]), out),
    "aten::mkldnn_linear_backward": _linear_backward,
    "aten::_sparse_addmm": _sparse_dense_mm,
    "aten::hspmm": lambda b, out: _sparse_dense_mm(b, out, bias=False),
    "aten::sspaddmm": _sparse_dense_mm,
    "aten::_sparse_mm_reduce_impl": lambda b, out: _sparse_dense_mm(b, out, "self", "other", bias=False),
    "aten::sparse_sampled_addmm": _sampled_addmm,
    "aten::_sparse_sparse_matmul": _sparse_sparse,
    "aten::_sparse_sum": _sparse_reduce,
    "aten::_sparse_csr_sum": _sparse_reduce,
    "aten::_sparse_csr_prod": _sparse_reduce,
    "aten::_sparse_sum_backward": lambda b, out: _sparse_reduce(dict(b, self=b["grad"]), out),
    "aten::_sparse_softmax": lambda b, out: _sparse_reduce(b, out, 4, 1),
    "aten::_sparse_log_softmax": lambda b, out: _sparse_reduce(b, out, 4, 1),
    "aten::_sparse_softmax_backward_data": lambda b, out: _sparse_reduce(dict(b, self=b["output"]), out, 4),
    "aten::_sparse_log_softmax_backward_data": lambda b, out: _sparse_reduce(dict(b, self=b["output"]), out, 3, 1),
    "aten::_coalesce": _sparse_coalesce,
    "aten::_to_sparse": _sparse_copy, "aten::_to_sparse_csr": _sparse_copy, "aten::_to_sparse_csc": _sparse_copy,
    "aten::_to_sparse_bsr": _sparse_copy, "aten::_to_sparse_bsc": _sparse_copy,
    "aten::_sparse_coo_tensor_with_dims_and_tensors": _sparse_copy,
    "aten::_sparse_coo_tensor_with_dims": _sparse_copy,
    "aten::_sparse_compressed_tensor_with_dims": _sparse_copy,
    "aten::sparse_compressed_tensor": _sparse_copy, "aten::sparse_coo_tensor": _sparse_copy,
    "aten::_coalesced": _sparse_copy, "aten::sparse_mask": _sparse_copy, "aten::_sparse_mask_projection": _sparse_copy,
    "aten::copy_sparse_to_sparse": _sparse_copy, "aten::_convert_indices_from_coo_to_csr": _sparse_copy,
    "aten::_convert_indices_from_csr_to_coo": _sparse_copy,
    "aten::_to_dense": _sparse_copy, "aten::to_dense": _sparse_copy,
    # nested-tensor conversions: the C recorder cannot describe a nested tensor, these formulas can (its components)
    "aten::_nested_tensor_from_mask": _sparse_copy, "aten::to_padded_tensor": _sparse_copy,
    "aten::_nested_from_padded": _sparse_copy, "aten::_nested_from_padded_and_nested_example": _sparse_copy,
    "aten::_nested_from_padded_tensor": _sparse_copy, "aten::_jagged_to_padded_dense_forward": _sparse_copy,
    "aten::_padded_dense_to_jagged_forward": _sparse_copy, "aten::_nested_tensor_from_tensor_list": _sparse_copy,
    "aten::_nested_view_from_buffer_copy": _sparse_copy, "aten::_nested_view_from_jagged_copy": _sparse_copy,
    "aten::_nested_get_values_copy": _sparse_copy,
    "aten::_compute_linear_combination": _compute_linear_combination,
    "aten::equal": _equal,
    "aten::allclose": _allclose,
    "aten::resolve_conj": _alias_or_copy, "aten::resolve_neg": _alias_or_copy,
    "aten::histogram": _histogram,
    "aten::_unique": _unique,
    "aten::unique_dim_consecutive": _sort,
    "aten::_trilinear": _trilinear,
    "aten::conv_tbc": _conv_tbc,
    "aten::_slow_conv2d_backward": _slow_conv2d_backward,
    "aten::mkldnn_linear_backward_input": _mkldnn_linear_backward_input,
    "aten::mkldnn_linear_backward_weights": _mkldnn_linear_backward_weights,
    "aten::_foreach_mm": _foreach_mm,
    "aten::_transform_bias_rescale_qkv": _transform_bias_rescale_qkv,
    "aten::_spdiags": _sparse_copy,
    "aten::mvlgamma_": _mvlgamma,
    "aten::_coalesced_": _sparse_copy,
    "aten::copy_sparse_to_sparse_": _sparse_copy,
    "aten::_sparse_mm_reduce_impl_backward": _sparse_mm_reduce_backward,
    "torch_nn::_linear_cross_entropy_batch_chunked": _linear_cross_entropy,
    "torch_nn::_linear_cross_entropy_batch_chunked_no_reduction": lambda b, out: _linear_cross_entropy(b, out, False),
    "torchvision::nms": _nms,
    "torchvision::roi_align": _roi_align,
    "torchvision::_roi_align_backward": lambda b, out: _roi_align(b, out, backward=True),
}

# Higher-order operators (by name) -> formula(args, kwargs, result).
HOPS = {
    "flex_attention": lambda args, kwargs, out: _flex(args, kwargs, out),
    "flex_attention_backward": lambda args, kwargs, out: _flex(args, kwargs, out, backward=True),
    "out_dtype": _out_dtype,
}


def bind(schema_names, args, kwargs) -> dict:
    """The call's arguments by schema name (positional in schema order, then keywords)."""
    b = dict(zip(schema_names, args))
    b.update(kwargs)
    return b
