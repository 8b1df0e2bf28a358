"""Formulas of products the C kinds do not cover: quantized (weight-only and dynamic int8/int4) and oneDNN/MKL
products of frozen CPU graphs, linear layers and their backward, sparse products and reductions, and the
remaining fused or legacy product kernels (trilinear, conv_tbc, slow_conv2d backward, chunked linear cross entropy).
"""

from __future__ import annotations

import math

from roofline._counting._formula_base import _clog2, _counts, _numel, _read, _touched_bytes, _written


# ---- quantized products (weight-only and dynamic int8/int4 linear kernels) -------------------------------------

def _quant_mm(b, out, x_name="self", weight_terms=0, output_terms=0, block=None):
    """A product of activations ``x`` (M x K, any leading dims folded into M) with a quantized N x K weight, the
    result M x N: ``2 M N K`` matrix FLOPs in the activations' dtype, whatever the weight's storage (int8, packed
    int4). ``weight_terms`` pointwise FLOPs per weight element (dequantising it: scale and zero point),
    ``output_terms`` per output element (a per-channel scale), and with ``block`` (a group size along K) a rescale
    of each block's partial sum (a multiply and an add per output element and block). Bytes: every argument at its
    stored size (the packed weight at its real width), the result written once."""
    x = b[x_name]
    if len(x.shape) < 1 or len(out.shape) < 1:
        raise ValueError("quantized product: activations and result need a last dimension")
    k = int(x.shape[-1])
    m = math.prod(int(d) for d in x.shape[:-1])  # rows even when K is 0 (the result is M x N zeros)
    n = int(out.shape[-1])
    vector = weight_terms * n * k + output_terms * m * n
    if block is not None:
        if int(block) <= 0:
            raise ValueError(f"quantized product: block size must be positive, got {block}")
        vector += 2 * m * n * (-(-k // int(block)))  # ceil(K / block) partial sums per output element
        vector += 4 * m * k  # the activations quantised per row: min, max, scale, round per element
    return _counts(matrix=2 * m * n * k, vector=vector, read=_read(b), written=_written(out))


def _scaled_grouped_mm(b, out):
    """The float8 grouped product of mixture-of-experts layers (``_scaled_grouped_mm`` and its ``_v2``): the layouts
    of ``_grouped_mm`` -- a (total_M, K) x b (G, K, N), a (G, M, K) x b (G, K, N), a (G, M, K) x b (K, total_N),
    a (M, total_K) x b (total_K, N) -- whose groups partition rows, columns or K, so the product is ``2 rows K cols``
    with rows a's second-to-last dimension (times G when both are batched) and cols b's last; then, as
    ``_scaled_mm``'s epilogue is counted, one vector FLOP per output element for the dequantising scale, and one
    more where a bias is added. Bytes: every argument (the scale lists included) once, the result written."""
    a, w = b["self"], b["mat2"]
    sa, sw = [int(d) for d in a.shape], [int(d) for d in w.shape]
    if not (2 <= len(sa) <= 3 and 2 <= len(sw) <= 3):
        raise ValueError(f"scaled grouped product: operands must have 2 or 3 dims, got {len(sa)} and {len(sw)}")
    batched = len(sa) == 3 and len(sw) == 3
    k = sa[-1]
    if sw[-2] != k or (batched and sa[0] != sw[0]):
        raise ValueError(f"scaled grouped product: shapes {tuple(sa)} and {tuple(sw)} do not multiply")
    rows = sa[0] * sa[1] if batched else sa[-2]
    elements = _numel(out)
    vector = elements * (2 if b.get("bias") is not None else 1)
    return _counts(matrix=2 * rows * k * sw[-1], vector=vector, read=_read(b), written=_written(out))


def _repack(b, out):
    """A weight repacked into a kernel's layout (int4 packing): no arithmetic, the weight read and written once."""
    return _counts(read=_read(b), written=_written(out))


def _out_dtype(args, kwargs, out):
    """The ``out_dtype`` higher-order op: an aten product computed into a wider result dtype (int8 x int8 -> int32,
    as torchao's int8 kernels call it off the CPU and on meta / fake tensors). ``aten.mm``: ``2 M N K`` matrix FLOPs,
    the int8 operands read at 1 byte, the int32 result written; other wrapped ops are refused (an error record)."""
    op = args[0] if args else kwargs.get("op")
    operands = args[2:]
    name = str(getattr(op, "__name__", op))
    if name not in ("mm.default", "aten.mm.default") or len(operands) != 2:
        raise ValueError(f"out_dtype: no formula for wrapped op {op}")
    a, b = operands
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise ValueError("out_dtype(mm): operands must be matrices")
    m, k, n = int(a.shape[0]), int(a.shape[1]), int(b.shape[1])
    return _counts(matrix=2 * m * n * k, read=_touched_bytes(a) + _touched_bytes(b), written=_written(out))


# ---- oneDNN / MKL ops of frozen CPU graphs -------------------------------------------------------------------------
# With ``torch._inductor.config.freezing``, Inductor replaces linear layers and convolutions (with the element-wise
# op after them, and a folded batch norm) by these. Their weights are constants reordered to the library's layout:
# what is read is the weight's logical size (a packed copy holds the same values). The fused element-wise post-ops
# are counted as the eager ops they replace; one without a formula here is not guessed (ValueError: E_ARGS).
_POST_UNARY = {"none": (0, 0), "relu": (1, 0), "gelu": (4, 1), "sigmoid": (2, 1), "tanh": (0, 1),
               "swish": (3, 1), "silu": (3, 1), "hardtanh": (2, 0), "hardsigmoid": (2, 0)}
_POST_BINARY = {"add": 1, "sub": 1, "mul": 1, "div": 1}


def _post_ops(elements, unary=None, binary=None):
    u = "none" if unary is None else str(unary)
    if u not in _POST_UNARY:
        raise ValueError(f"fused post-op {u!r} has no formula")
    flops, special = _POST_UNARY[u]
    if binary is not None:
        if str(binary) not in _POST_BINARY:
            raise ValueError(f"fused binary post-op {binary!r} has no formula")
        flops += _POST_BINARY[str(binary)]
    return flops * elements, special * elements


def _tensor_bytes(t) -> int:
    try:
        return _touched_bytes(t)
    except (RuntimeError, NotImplementedError):  # a layout without strides: its elements
        return _numel(t) * t.element_size()


def _onednn_product(b, out, weight, k, unary=None, binary=None, other=None):
    """matrix FLOPs 2 * (output elements) * k, a bias add per output element, the fused post-ops; reads the input,
    the weight (its logical size), the bias and a binary post-op's other operand; writes the result."""
    x = b["X"]
    n_out = _numel(out)
    matrix = 2 * n_out * k
    vector = n_out if b.get("B") is not None else 0
    pf, ps = _post_ops(n_out, unary, binary)
    read = _tensor_bytes(x) + _tensor_bytes(weight) + (_tensor_bytes(b["B"]) if b.get("B") is not None else 0)
    if other is not None:
        read += _tensor_bytes(other)
    return _counts(matrix=matrix, vector=vector + pf, special=ps, read=read, written=_written(out))


def _mkl_linear(b, out):
    """mkl::_mkl_linear(X, MKL_W, ORI_W, B, batch_size): X [..., K] times the weight (ORI_W, the original)."""
    k = int(b["X"].shape[-1])
    return _onednn_product(b, out, b["ORI_W"], k)


def _linear_pointwise(b, out):
    """mkldnn::_linear_pointwise: X [..., K] times W [N, K], then ``attr`` (the .binary overload: ``attr`` with
    ``other``)."""
    x, w = b["X"], b["W"]
    k = int(x.shape[-1])
    if len(w.shape) != 2 or int(w.shape[-1]) != k:
        raise ValueError(f"linear weight {tuple(w.shape)} does not fit input {tuple(x.shape)}")
    if "other" in b:
        return _onednn_product(b, out, w, k, binary=b["attr"], other=b["other"])
    return _onednn_product(b, out, w, k, unary=b["attr"])


def _convolution_pointwise(b, out):
    """mkldnn::_convolution_pointwise (and its in-place .binary): a convolution with weight [C_out, C_in / groups,
    *kernel] (2 FLOPs per output element and weight element of its group), then its post-ops."""
    x, w = b["X"], b["W"]
    groups = int(b.get("groups") or 1)
    if len(w.shape) != len(x.shape) or int(x.shape[1]) != int(w.shape[1]) * groups:
        raise ValueError(f"convolution weight {tuple(w.shape)} does not fit input {tuple(x.shape)}, groups {groups}")
    k = _numel(w) // max(int(w.shape[0]), 1)
    if "other" in b:
        return _onednn_product(b, out, w, k, unary=b.get("unary_attr"), binary=b["binary_attr"], other=b["other"])
    return _onednn_product(b, out, w, k, unary=b["attr"])


# ---- products the C kinds do not cover ---------------------------------------------------------------------------------

_ACT = {False: (1, 0), True: (4, 1)}  # ReLU: 1; GELU: 4 + 1 special


def _addmm_activation(b, out):
    """addmm followed by ReLU (or GELU): 2 M N K matrix FLOPs, the bias add and the activation per result element."""
    m1, m2 = b["mat1"], b["mat2"]
    m, k, n = int(m1.shape[0]), int(m1.shape[1]), int(m2.shape[1])
    f, sp = _ACT[bool(b.get("use_gelu"))]
    return _counts(matrix=2 * m * n * k, vector=(1 + f) * m * n, special=sp * m * n, read=_read(b),
                   written=_written(out))


def _linear(b, out):
    """linear (its out= variant; the functional one decomposes): 2 M N K with the bias add."""
    x, w = b["input"], b["weight"]
    k, n = int(x.shape[-1]), int(w.shape[0])
    m = _numel(x) // max(k, 1) if k else math.prod(int(d) for d in x.shape[:-1])
    bias = b.get("bias") is not None
    return _counts(matrix=2 * m * n * k, vector=m * n if bias else 0, read=_read(b), written=_written(out))


def _linear_backward(b, out, x_name="self"):
    """Gradients of a linear layer: the input's (2 M N K) and the weight's (2 M N K) products, the bias's sum (M N),
    each where ``output_mask`` asks for it."""
    x, g = b[x_name], b["grad_output"]
    k, n = int(x.shape[-1]), int(g.shape[-1])
    m = _numel(g) // max(n, 1) if n else 0
    mask = list(b.get("output_mask", (True, True, True)))
    return _counts(matrix=2 * m * n * k * (int(bool(mask[0])) + int(bool(mask[1]))),
                   vector=m * n if mask[2] else 0, read=_read(b), written=_written(out))


def _nnz(t) -> int:
    layout = str(t.layout)
    if layout == "torch.sparse_coo":
        return int(t._nnz())
    if "sparse" in layout:
        return int(t.values().numel())  # blocks' elements for BSR / BSC
    return _numel(t)


def _sparse_dense_mm(b, out, a_name="mat1", d_name="mat2", bias=True):
    """A sparse (M x K, nnz stored values) times dense (K x N) product: 2 nnz N matrix FLOPs (one multiply-add per
    stored value and output column), the scaled bias add per result element (beta * self + alpha * product: 3) when
    ``bias``. Bytes: the stored values and indices, the dense operand, the result."""
    a, d = b[a_name], b[d_name]
    n = int(d.shape[-1]) if len(d.shape) > 1 else 1
    res = out[0] if isinstance(out, (list, tuple)) else out
    vector = 3 * _numel(res) if bias else 0
    return _counts(matrix=2 * _nnz(a) * n, vector=vector, read=_read(b), written=_written(out))


def _sampled_addmm(b, out):
    """sparse_sampled_addmm(self sparse CSR, mat1 M x K, mat2 K x N): the product only at self's nnz positions: 2 K per
    position, and beta * self + alpha * product (3) per position."""
    s, m1 = b["self"], b["mat1"]
    k = int(m1.shape[-1])
    nnz = _nnz(s)
    return _counts(matrix=2 * nnz * k, vector=3 * nnz, read=_read(b), written=_written(out))


def _sparse_sparse(b, out):
    """_sparse_sparse_matmul (sparse A times sparse B): a multiply-add per pair of stored values that meet: for each
    stored a_ik, the stored values of row k of B, estimated as nnz(A) * nnz(B) / K (rows of B evenly filled). An
    estimate (the real count needs the index values)."""
    a, bb = b["self"], b["other"]
    k = int(bb.shape[0]) or 1
    return _counts(matrix=2 * (_nnz(a) * _nnz(bb) // k), read=_read(b), written=_written(out))


def _sparse_reduce(b, out, flops=1, special=0):
    """A reduction or softmax over a sparse tensor's stored values: ``flops`` per stored value."""
    nnz = _nnz(b["self"])
    return _counts(vector=flops * nnz, special=special * nnz, read=_read(b), written=_written(out))


def _sparse_copy(b, out):
    """Sparse and nested plumbing (conversions, coalescing, construction from indices and values, padding a nested
    tensor): no arithmetic, the stored values and indices (a nested tensor's components) read and the result
    written."""
    return _counts(read=_read(b), written=_written(out))


def _sparse_coalesce(b, out):
    """coalesce: sort the nnz indices (nnz ceil(log2 nnz) comparisons) and add duplicates (1 per value)."""
    nnz = _nnz(b["self"])
    return _counts(vector=nnz * _clog2(nnz) + nnz, read=_read(b), written=_written(out))


def _compute_linear_combination(b, out):
    """result[i] = sum_j coefficients[i, j] * input[j]: 2 FLOPs per coefficient and element of a slice of input."""
    x, c = b["input"], b["coefficients"]
    per_slice = _numel(x) // max(int(x.shape[0]), 1) if len(x.shape) else 1
    return _counts(vector=2 * _numel(c) * per_slice, read=_read(b), written=_written(out))


def _trilinear(b, out):
    """_trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim) (nn.Bilinear's kernel): the three operands broadcast
    to one shape and multiplied, summed over ``sumdim``. Torch computes it as two batched products; their leading
    term is one multiply-add per point of the broadcast shape (2 FLOPs), counted as matrix FLOPs. An estimate (the
    second, smaller product is left out)."""
    shapes = [list(b[k].shape) for k in ("i1", "i2", "i3")]
    nd = max(len(x) for x in shapes)
    full = 1
    for d in range(nd):
        full *= max(int(x[d]) if d < len(x) else 1 for x in shapes)
    return _counts(matrix=2 * full, read=_read(b), written=_written(out))


def _conv_tbc(b, out):
    """conv_tbc(self (T, B, C_in), weight (K, C_in, C_out), bias): a 1-d convolution over time: 2 C_in K FLOPs per
    output element, and the bias add."""
    w = b["weight"]
    k, cin = int(w.shape[0]), int(w.shape[1])
    n = _numel(out)
    return _counts(matrix=2 * n * cin * k, vector=n, read=_read(b), written=_written(out))


def _slow_conv2d_backward(b, out):
    """_slow_conv2d_backward: the input's and the weight's gradients, 2 FLOPs per grad_output element and weight
    element of its output channel each, and the bias's sum, where ``output_mask`` asks for them (out= overloads: all
    three)."""
    g, w = b["grad_output"], b["weight"]
    per = _numel(w) // max(int(w.shape[0]), 1)
    n = _numel(g)
    mask = list(b.get("output_mask", (True, True, True)))
    return _counts(matrix=2 * n * per * (int(bool(mask[0])) + int(bool(mask[1]))), vector=n if mask[2] else 0,
                   read=_read(b), written=_written(out))


def _mkldnn_linear_backward_input(b, out):
    g, w = b["grad_output"], b["weight"]
    n, k = int(w.shape[0]), int(w.shape[1])
    m = _numel(g) // max(n, 1)
    return _counts(matrix=2 * m * n * k, read=_read(b), written=_written(out))


def _mkldnn_linear_backward_weights(b, out):
    g, x = b["grad_output"], b["input"]
    k = int(x.shape[-1])
    n = int(g.shape[-1])
    m = _numel(g) // max(n, 1)
    return _counts(matrix=2 * m * n * k, vector=m * n if b.get("bias_defined") else 0, read=_read(b),
                   written=_written(out))


def _foreach_mm(b, out):
    """_foreach_mm(self, mat2): a matrix product per pair, 2 M N K each."""
    flops = 0
    for a, c in zip(b["self"], b["mat2"]):
        flops += 2 * int(a.shape[-2]) * int(a.shape[-1]) * int(c.shape[-1]) * (_numel(a) // max(
            int(a.shape[-2]) * int(a.shape[-1]), 1) if int(a.shape[-2]) * int(a.shape[-1]) else 1)
    return _counts(matrix=flops, read=_read(b), written=_written(out))


def _transform_bias_rescale_qkv(b, out):
    """The bias added to every element of the packed q, k, v (1) and q scaled by 1/sqrt(head dim) (1 per element of
    its third)."""
    n = _numel(b["qkv"])
    return _counts(vector=n + n // 3, read=_read(b), written=_written(out))


def _sparse_mm_reduce_backward(b, out):
    """_sparse_mm_reduce_impl_backward(self sparse M x K, grad_out M x N, weight K x N, ...): the sparse operand's
    gradient, a dot of length N per stored value (2 nnz N), and the dense operand's, self^T grad_out (2 nnz N), each
    where ``output_mask`` asks for it."""
    nnz = _nnz(b["self"])
    n = int(b["grad_out"].shape[-1])
    mask = list(b.get("output_mask", (True, True)))
    return _counts(matrix=2 * nnz * n * (int(bool(mask[0])) + int(bool(mask[1]))), read=_read(b),
                   written=_written(out))


def _linear_cross_entropy(b, out, reduced=True):
    """torch_nn::_linear_cross_entropy_batch_chunked (F.linear_cross_entropy's fused, chunked kernel: the logits are
    never materialised): N rows of D features, V classes. The logits 2 N V D (matrix FLOPs), the bias add (N V), the
    log-sum-exp per logit (max, subtract, add: 3 + 1 exp) and, with label smoothing, their sum (1 per logit). The
    reduced variant computes the gradients in the forward where asked (compute_*_grad): the input's and the weight's
    products (2 N V D each), the softmax gradient (2 per logit: the divide and the target's subtraction) and the
    bias's sum (N V). Bytes: the arguments and the results, nothing in between (the chunked kernel's point). The
    per-row loss terms are left out (N against N V): an estimate."""
    x, w = b["input"], b["linear_weight"]
    d, v = int(x.shape[-1]), int(w.shape[0])
    n = _numel(x) // max(d, 1)
    logits = n * v
    matrix = 2 * logits * d
    vector = 3 * logits + (logits if b.get("linear_bias") is not None else 0)
    if reduced and float(b.get("label_smoothing") or 0.0):
        vector += logits
    if reduced:
        gi, gw, gb = (bool(b.get(k)) for k in ("compute_input_grad", "compute_linear_weight_grad",
                                                 "compute_linear_bias_grad"))
        if gi or gw or gb:
            vector += 2 * logits
        matrix += 2 * logits * d * (int(gi) + int(gw))
        vector += logits if gb else 0
    return _counts(matrix=matrix, vector=vector, special=logits, read=_read(b), written=_written(out))
