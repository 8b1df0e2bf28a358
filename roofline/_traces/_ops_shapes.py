"""The results of an op call, derived from its recorded inputs.

A Kineto trace records each op's inputs (shapes, dtypes, strides, scalar values) but not its results, while the cost
model counts the bytes a call writes from its results. :func:`results` derives them, per op family, from the shapes
and arguments, the way each op's shape function does in torch (``torch/_meta_registrations.py``, the ATen shape
code), and says when it cannot: a result whose size depends on the data (``nonzero``, ``masked_select``,
``bincount``) or on an argument the trace does not record (the index list of ``index``, a string) has no shape here.

Functions take the arguments laid out as the schema names them (``a``: name -> value, with TensorSpec for tensors)
and return the list of results (None for an undefined one), or raise :class:`NoShape` (with the reason) or
``ValueError`` (the inputs contradict the op).
"""

from __future__ import annotations

import math

from roofline._counting._cost import TensorSpec
from roofline._traces._ops_dtypes_shapes import (
    NoShape, _category, _dims_arg, _int_list, _like, _t, _tensor, _wrap, broadcast, reduced, result_type, scalar_type)


# ---- per op --------------------------------------------------------------------------------------------------------

_BOOL_RESULT = frozenset("eq ne lt le gt ge logical_and logical_or logical_xor logical_not isnan isinf isfinite "
                         "isposinf isneginf signbit".split())
# ops whose result is floating for integer inputs (true division, transcendental functions)
_FLOAT_RESULT = frozenset("div true_divide reciprocal sigmoid exp exp2 expm1 log log2 log10 log1p sqrt rsqrt sin cos "
                          "tan asin acos atan sinh cosh tanh asinh acosh atanh erf erfc erfinv lgamma digamma "
                          "atan2 logit xlogy float_power gelu silu elu softplus".split())


def ewise(packet, a, tensors, scalars):
    """An element-wise op: its tensor inputs broadcast; dtype by torch's promotion."""
    if not tensors:
        raise NoShape("no tensor argument")
    shape = broadcast([t.shape for t in tensors])
    if packet in _BOOL_RESULT:
        dt = "bool"
    elif packet in ("float_power",):
        dt = "float64"
    else:
        dt = result_type(tensors, scalars)
        if packet in _FLOAT_RESULT and _category(dt) < 2:
            dt = "float32"
        if packet in ("abs",) and _category(dt) == 3:
            dt = {"complex64": "float32", "complex128": "float64", "complex32": "float16"}[dt]
    return [TensorSpec(shape, dt)]


def _acc(dt):
    return "float32" if dt in ("float16", "bfloat16") else dt


def _reduction(a, dtype_default=None):
    x = _tensor(a, "self")
    dt = scalar_type(a.get("dtype"), None)
    if dt is None:
        dt = dtype_default(x.dtype) if dtype_default else x.dtype
    return _t(reduced(x.shape, a.get("dim"), bool(a.get("keepdim"))), dt)


def _sum_dtype(dt):
    return "int64" if _category(dt) < 2 else dt


def _softmax(a):
    x = _tensor(a, "self")
    return [_like(x, "float32" if a.get("half_to_float") else None)]


def _layer_norm(a):
    x = _tensor(a, "input")
    ns = a.get("normalized_shape")
    if not isinstance(ns, list) or len(ns) > len(x.shape) or tuple(x.shape[len(x.shape) - len(ns):]) != tuple(ns):
        raise ValueError(f"normalized_shape {ns!r} is not the trailing dimensions of input {x.shape}")
    axis = len(x.shape) - len(ns)
    stat = x.shape[:axis] + (1,) * len(ns)
    return [_like(x), _t(stat, _acc(x.dtype)), _t(stat, _acc(x.dtype))]


def _mask(a, name="output_mask", n=3):
    m = a.get(name)
    if not isinstance(m, list) or len(m) != n:
        raise NoShape(f"{name} not recorded as {n} bools")
    return [bool(v) for v in m]


def _layer_norm_backward(a):
    x = _tensor(a, "input")
    m = _mask(a)
    w, b = a.get("weight"), a.get("bias")
    return [_like(x) if m[0] else None, _like(w) if m[1] and isinstance(w, TensorSpec) else None,
            _like(b) if m[2] and isinstance(b, TensorSpec) else None]


def _bn_stats(x, training):
    c = x.shape[1] if len(x.shape) > 1 else 0
    return _t((c if training else 0,), _acc(x.dtype))


def _native_batch_norm(a):
    x = _tensor(a, "input")
    tr = bool(a.get("training", True))
    return [_like(x), _bn_stats(x, tr), _bn_stats(x, tr)]


def _batch_norm_with_update(a):
    x = _tensor(a, "input")
    return [_like(x), _bn_stats(x, True), _bn_stats(x, True), _t((0,), "uint8")]


def _bn_backward(a, name="output_mask"):
    x = _tensor(a, "input")
    m = _mask(a, name)
    w = a.get("weight")
    c = x.shape[1] if len(x.shape) > 1 else 0
    wd = w.dtype if isinstance(w, TensorSpec) else x.dtype
    return [_like(x) if m[0] else None, _t((c,), wd) if m[1] else None, _t((c,), wd) if m[2] else None]


def _group_norm(a):
    x = _tensor(a, "input")
    n, g = a.get("N"), a.get("group")
    return [_like(x), _t((n, g), _acc(x.dtype)), _t((n, g), _acc(x.dtype))]


def _group_norm_backward(a):
    x = _tensor(a, "input")
    m = _mask(a)
    c = a.get("C")
    w = a.get("weight")
    wd = w.dtype if isinstance(w, TensorSpec) else x.dtype
    return [_like(x) if m[0] else None, _t((c,), wd) if m[1] else None, _t((c,), wd) if m[2] else None]


def _conv_backward(a):
    go, x, w = _tensor(a, "grad_output"), _tensor(a, "input"), _tensor(a, "weight")
    m = _mask(a)
    bs = a.get("bias_sizes")
    bias = _t(tuple(bs), go.dtype) if m[2] and isinstance(bs, list) else (
        _t((w.shape[0] if not a.get("transposed") else w.shape[1] * (a.get("groups") or 1),), go.dtype)
        if m[2] else None)
    return [_like(x) if m[0] else None, _like(w) if m[1] else None, bias]


def _pool_out(n, k, s, p, d, ceil):
    o = (n + 2 * p - d * (k - 1) - 1 + ((s - 1) if ceil else 0)) // s + 1
    if ceil and (o - 1) * s >= n + p:
        o -= 1
    if o <= 0:
        raise ValueError(f"the pooling window {k} (stride {s}, padding {p}) does not fit an input of {n}")
    return o


def _pool(a, spatial, with_indices, dilation=True):
    x = _tensor(a, "self")
    if len(x.shape) < spatial + 1:
        raise ValueError(f"input {x.shape} has fewer than {spatial} spatial dimensions")
    k = _int_list(a.get("kernel_size"), spatial, "kernel_size")
    st = a.get("stride")
    s = k if st in (None, []) else _int_list(st, spatial, "stride")
    p = _int_list(a.get("padding", 0) if a.get("padding") is not None else 0, spatial, "padding")
    d = _int_list(a.get("dilation", 1) if a.get("dilation") is not None else 1, spatial, "dilation") \
        if dilation else [1] * spatial
    ceil = bool(a.get("ceil_mode"))
    lead = x.shape[:len(x.shape) - spatial]
    sp = x.shape[len(x.shape) - spatial:]
    out = lead + tuple(_pool_out(sp[i], k[i], s[i], p[i], d[i], ceil) for i in range(spatial))
    res = [_t(out, x.dtype)]
    if with_indices:
        res.append(_t(out, "int64"))
    return res


def _adaptive(a, with_indices):
    x = _tensor(a, "self")
    os_ = a.get("output_size")
    if not isinstance(os_, list):
        raise NoShape("output_size not recorded")
    out = x.shape[:len(x.shape) - len(os_)] + tuple(os_)
    return [_t(out, x.dtype)] + ([_t(out, "int64")] if with_indices else [])


def _nll_forward(a):
    x = _tensor(a, "self")
    red = a.get("reduction")
    if red == 0:  # none: one loss per sample
        out = _t(x.shape[:1] if len(x.shape) > 1 else (), x.dtype)
    else:
        out = _t((), x.dtype)
    return [out, _t((), x.dtype)]


def _nll2d_forward(a):
    x = _tensor(a, "self")
    out = _t((x.shape[0],) + x.shape[2:], x.dtype) if a.get("reduction") == 0 else _t((), x.dtype)
    return [out, _t((), x.dtype)]


def _loss(a):
    x = _tensor(a, "self")
    if a.get("reduction") == 0:
        return [_like(x)]
    return [_t((), x.dtype)]


def _cat(a):
    ts = a.get("tensors")
    if not isinstance(ts, list) or not ts:
        raise ValueError("cat of no tensors")
    dim = a.get("dim", 0) or 0
    real = [t for t in ts if t.shape != (0,)]  # legacy: 1-d empty tensors are skipped
    if not real:
        return [_t((0,), result_type(ts, ()))]
    nd = len(real[0].shape)
    d = _wrap(dim, nd)
    shape = list(real[0].shape)
    for t in real[1:]:
        if len(t.shape) != nd or any(t.shape[i] != shape[i] for i in range(nd) if i != d):
            raise ValueError(f"cat: shapes {[x.shape for x in real]} differ outside dimension {d}")
    shape[d] = sum(t.shape[d] for t in real)
    return [_t(shape, result_type(real, ()))]


def _stack(a):
    ts = a.get("tensors")
    if not isinstance(ts, list) or not ts:
        raise ValueError("stack of no tensors")
    s0 = ts[0].shape
    if any(t.shape != s0 for t in ts):
        raise ValueError(f"stack: shapes {[t.shape for t in ts]} differ")
    d = _wrap(a.get("dim", 0) or 0, len(s0) + 1)
    return [_t(s0[:d] + (len(ts),) + s0[d:], result_type(ts, ()))]


def _pad(a):
    x = _tensor(a, "self")
    pad = a.get("pad")
    if not isinstance(pad, list) or len(pad) % 2 or len(pad) // 2 > len(x.shape):
        raise ValueError(f"pad {pad!r} does not fit input {x.shape}")
    shape = list(x.shape)
    for i in range(len(pad) // 2):
        j = len(shape) - 1 - i
        shape[j] += pad[2 * i] + pad[2 * i + 1]
        if shape[j] < 0:
            raise ValueError(f"pad {pad!r} leaves dimension {j} of {x.shape} negative")
    return [_t(shape, x.dtype)]


def _repeat(a):
    x = _tensor(a, "self")
    r = a.get("repeats")
    if not isinstance(r, list) or len(r) < len(x.shape):
        raise ValueError(f"repeats {r!r} has fewer entries than input {x.shape} has dimensions")
    s = (1,) * (len(r) - len(x.shape)) + x.shape
    return [_t(tuple(a_ * b for a_, b in zip(s, r)), x.dtype)]


def _size_arg(a, name="size"):
    s = a.get(name)
    if isinstance(s, int) and not isinstance(s, bool):
        s = [s]
    if not isinstance(s, list) or not all(isinstance(v, int) and v >= 0 for v in s):
        raise NoShape(f"{name} not recorded as a list of sizes")
    return tuple(s)


def _factory(a, default="float32", name="size"):
    return [_t(_size_arg(a, name), scalar_type(a.get("dtype"), default))]


def _full(a):
    v = a.get("fill_value")
    d = "bool" if isinstance(v, bool) else "int64" if isinstance(v, int) else "float32"
    return _factory(a, d)


def _like_factory(a):
    x = _tensor(a, "self")
    return [_like(x, scalar_type(a.get("dtype"), x.dtype))]


def _new_factory(a):
    x = _tensor(a, "self")
    return [_t(_size_arg(a), scalar_type(a.get("dtype"), x.dtype))]


def _arange(a):
    start, end, step = a.get("start", 0), a.get("end"), a.get("step", 1)
    if start is None:
        start = 0
    if step is None:
        step = 1
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (start, end, step)) or step == 0:
        raise NoShape("arange bounds not recorded as numbers")
    n = max(0, math.ceil((end - start) / step))
    is_int = all(isinstance(v, int) for v in (start, end, step))
    return [_t((n,), scalar_type(a.get("dtype"), "int64" if is_int else "float32"))]


def _to_copy(a):
    x = _tensor(a, "self")
    return [_like(x, scalar_type(a.get("dtype"), x.dtype))]


def _embedding(a):
    w, idx = _tensor(a, "weight"), _tensor(a, "indices")
    return [_t(idx.shape + w.shape[1:], w.dtype)]


def _index_select(a):
    x, idx = _tensor(a, "self"), _tensor(a, "index")
    d = _wrap(a.get("dim", 0), len(x.shape))
    s = list(x.shape)
    if s:
        s[d] = idx.numel
    return [_t(s, x.dtype)]


def _gather(a):
    x, idx = _tensor(a, "self"), _tensor(a, "index")
    return [_t(idx.shape, x.dtype)]


def _embedding_backward(a):
    go = _tensor(a, "grad_output")
    idx = _tensor(a, "indices")
    nw = a.get("num_weights")
    if not isinstance(nw, int):
        raise NoShape("num_weights not recorded")
    return [_t((nw,) + go.shape[len(idx.shape):], go.dtype)]


def _backward_sized(a, grad="grad_output", sizes="input_sizes"):
    g = _tensor(a, grad)
    return [_t(_size_arg(a, sizes), g.dtype)]


def _upsample(a, spatial):
    x = _tensor(a, "self" if "self" in a else "input")
    os_ = a.get("output_size")
    if isinstance(os_, list) and len(os_) == spatial:
        return [_t(x.shape[:len(x.shape) - spatial] + tuple(os_), x.dtype)]
    sf = a.get("scale_factors")
    if isinstance(sf, list) and len(sf) == spatial:
        sp = x.shape[len(x.shape) - spatial:]
        return [_t(x.shape[:len(x.shape) - spatial] + tuple(int(math.floor(n * f)) for n, f in zip(sp, sf)),
                   x.dtype)]
    raise NoShape("neither output_size nor scale_factors recorded")


def _upsample_backward(a):
    g = _tensor(a, "grad_output")
    return [_t(_size_arg(a, "input_size"), g.dtype)]


def _attn_cpu(a):
    q, v = _tensor(a, "query"), _tensor(a, "value")
    out = _t(q.shape[:-1] + (v.shape[-1],), q.dtype)
    return [out, _t(q.shape[:-1], "float32")]


def _attn_bwd_qkv(a):
    return [_like(_tensor(a, "query")), _like(_tensor(a, "key")), _like(_tensor(a, "value"))]


def _attn_efficient(a):
    q, v = _tensor(a, "query"), _tensor(a, "value")
    out = _t(q.shape[:-1] + (v.shape[-1],), q.dtype)
    b, h, lq = q.shape[0], q.shape[1], q.shape[2]
    lse = _t((b, h, (lq + 31) // 32 * 32 if a.get("compute_log_sumexp") else 0), "float32")
    return [out, lse, _t((), "int64"), _t((), "int64")]


def _attn_efficient_bwd(a):
    m = a.get("grad_input_mask")
    m = [bool(x) for x in m] if isinstance(m, list) and len(m) == 4 else [True, True, True, False]
    bias = a.get("attn_bias")
    return [_like(_tensor(a, "query")) if m[0] else None, _like(_tensor(a, "key")) if m[1] else None,
            _like(_tensor(a, "value")) if m[2] else None,
            _like(bias) if m[3] and isinstance(bias, TensorSpec) else None]


def _max_dim(a):
    x = _tensor(a, "self")
    s = reduced(x.shape, a.get("dim"), bool(a.get("keepdim")))
    return [_t(s, x.dtype), _t(s, "int64")]


def _var_mean(a):
    x = _tensor(a, "self")
    s = reduced(x.shape, a.get("dim"), bool(a.get("keepdim")))
    real = {"complex64": "float32", "complex128": "float64"}.get(x.dtype, x.dtype)
    return [_t(s, real), _t(s, x.dtype)]


def _foreach_like(a):
    xs = a.get("self")
    if not isinstance(xs, list):
        raise ValueError("a _foreach_ op's first argument must be a tensor list")
    return [_like(t) for t in xs]


def _foreach_norm(a):
    xs = a.get("self")
    if not isinstance(xs, list):
        raise ValueError("_foreach_norm's first argument must be a tensor list")
    return [_t((), scalar_type(a.get("dtype"), t.dtype)) for t in xs]


def _fused_rms_norm(a):
    x = _tensor(a, "input")
    ns = a.get("normalized_shape")
    if not isinstance(ns, list):
        raise NoShape("normalized_shape not recorded")
    axis = len(x.shape) - len(ns)
    return [_like(x), _t(x.shape[:axis] + (1,) * len(ns), _acc(x.dtype))]


def _where(a, tensors, scalars):
    if "self" not in a:
        raise NoShape("where(condition) returns the indices of true elements: data-dependent")
    shapes = [t.shape for t in tensors]
    vals = [t for t in tensors if t is not a.get("condition")]
    return [_t(broadcast(shapes), result_type(vals, [s for s in scalars if s is not None]))]


def _same_as_self(a):
    x = a.get("self", a.get("input"))
    if not isinstance(x, TensorSpec):
        raise NoShape("no self tensor")
    return [_like(x)]


def _dropout(a):
    x = _tensor(a, "input")
    return [_like(x), _like(x, "bool")]


def _mv(a):
    m = _tensor(a, "self")
    return [_t(m.shape[:1], m.dtype)]


def _addmv(a):
    m = _tensor(a, "mat")
    return [_t(m.shape[:1], m.dtype)]


def _addr(a):
    v1, v2, s = _tensor(a, "vec1"), _tensor(a, "vec2"), _tensor(a, "self")
    return [_t(broadcast([s.shape, (v1.shape[0], v2.shape[0])]), v1.dtype)]


def _scalar0(a):
    x = _tensor(a, "self")
    return [_t((), x.dtype)]


def _flash_cuda(a):
    """(output, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, rng seed, offset, debug mask): the cumulative lengths
    undefined and the maxima ints (no tensors); the seed two 8-byte words, the offset one; the debug mask empty unless
    asked for, then padded to 128 or 256 key positions (torch's meta function)."""
    q, k, v = _tensor(a, "query"), _tensor(a, "key"), _tensor(a, "value")
    if len(q.shape) != 4 or len(k.shape) != 4:
        raise ValueError(f"query {q.shape} and key {k.shape} must be (batch, heads, length, head_dim)")
    b, h, lq, d = q.shape
    out = _t(q.shape[:-1] + (v.shape[-1],), q.dtype)
    if a.get("return_debug_mask"):
        lk = k.shape[2]
        mk = 128 if lk <= 128 else 256 if lk <= 256 else -(-lq // (128 if d > 64 else 256))
        debug = _t((b, h, lq, mk), q.dtype)
    else:
        debug = _t((0,), q.dtype)
    return [out, _t((b, h, lq), "float32"), None, None, _t((2,), "uint64"), _t((), "uint64"), debug]


def _cudnn_attn(a):
    """(output, logsumexp (B, H, S_Q, 1) float32, two undefined, two ints, seed, offset, an undefined debug mask), as
    torch's meta function makes them."""
    q, v = _tensor(a, "query"), _tensor(a, "value")
    if len(q.shape) != 4:
        raise ValueError(f"query {q.shape} must be (batch, heads, length, head_dim)")
    b, h, lq = q.shape[:3]
    return [_t((b, h, lq, v.shape[-1]), q.dtype), _t((b, h, lq, 1), "float32"), None, None, _t((), "int64"),
            _t((), "int64"), None]


def _flash_cuda_bwd(a):
    return _attn_bwd_qkv(a)


def _cumulative(a):
    x = _tensor(a, "self")
    return [_like(x, scalar_type(a.get("dtype"), _sum_dtype(x.dtype)))]


def _norm(a):
    x = _tensor(a, "self")
    real = {"complex64": "float32", "complex128": "float64"}.get(x.dtype, x.dtype)
    return [_t(reduced(x.shape, a.get("dim"), bool(a.get("keepdim"))), scalar_type(a.get("dtype"), real))]


def _aminmax(a):
    x = _tensor(a, "self")
    s = reduced(x.shape, a.get("dim"), bool(a.get("keepdim")))
    return [_t(s, x.dtype), _t(s, x.dtype)]


def _sort(a):
    x = _tensor(a, "self")
    return [_like(x), _like(x, "int64")]


def _topk(a):
    x = _tensor(a, "self")
    k = a.get("k")
    if not isinstance(k, int) or isinstance(k, bool):
        raise NoShape("topk's k not recorded")
    s = list(x.shape)
    if s:
        s[_wrap(a.get("dim", -1) if a.get("dim") is not None else -1, len(s))] = k
    return [_t(s, x.dtype), _t(s, "int64")]


def _select_dim(a):
    """kthvalue, mode, median.dim: one value and its index per slice along ``dim``."""
    x = _tensor(a, "self")
    dim = a.get("dim", -1)
    s = reduced(x.shape, -1 if dim is None else dim, bool(a.get("keepdim")))
    return [_t(s, x.dtype), _t(s, "int64")]


def _search(a, values="self"):
    v = a.get(values)
    shape = v.shape if isinstance(v, TensorSpec) else ()
    return [_t(shape, "int32" if a.get("out_int32") else "int64")]


def _view_size(a):
    """view_copy / expand_copy: the size argument, -1 inferred from the input's elements (view) or kept (expand)."""
    x = _tensor(a, "self")
    size = list(_size_arg_signed(a))
    if "implicit" in a:  # expand: -1 keeps the input's size there
        lead = len(size) - len(x.shape)
        size = [x.shape[i - lead] if v == -1 and i >= lead else v for i, v in enumerate(size)]
    elif size.count(-1) == 1:
        known = 1
        for v in size:
            known *= v if v != -1 else 1
        size[size.index(-1)] = x.numel // known if known else 0
    if any(v < 0 for v in size):
        raise ValueError(f"size {a.get('size')!r} does not fit input {x.shape}")
    return [_t(size, x.dtype)]


def _size_arg_signed(a, name="size"):
    s = a.get(name)
    if not isinstance(s, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in s):
        raise NoShape(f"{name} not recorded as a list of sizes")
    return s


def _permute(a):
    x = _tensor(a, "self")
    dims = a.get("dims")
    if not isinstance(dims, list) or sorted(_wrap(d, len(x.shape)) for d in dims) != list(range(len(x.shape))):
        raise ValueError(f"dims {dims!r} is not a permutation of {len(x.shape)} dimensions")
    return [_t([x.shape[_wrap(d, len(x.shape))] for d in dims], x.dtype)]


def _transpose(a):
    x = _tensor(a, "self")
    s = list(x.shape)
    if len(s) > 1:
        i, j = _wrap(a.get("dim0", 0), len(s)), _wrap(a.get("dim1", 1), len(s))
        s[i], s[j] = s[j], s[i]
    return [_t(s, x.dtype)]


def _squeeze(a):
    x = _tensor(a, "self")
    dim = a.get("dim")
    dims = set(range(len(x.shape))) if dim is None else set(_dims_arg(dim, len(x.shape)))
    return [_t([v for i, v in enumerate(x.shape) if not (i in dims and v == 1)], x.dtype)]


def _unsqueeze(a):
    x = _tensor(a, "self")
    d = _wrap(a.get("dim", 0), len(x.shape) + 1)
    return [_t(x.shape[:d] + (1,) + x.shape[d:], x.dtype)]


def _narrow(a):
    x = _tensor(a, "self")
    s = list(x.shape)
    length = a.get("length")
    if not isinstance(length, int) or not s:
        raise NoShape("narrow's length not recorded")
    s[_wrap(a.get("dim", 0), len(s))] = length
    return [_t(s, x.dtype)]


def _pad_n(a):
    return _pad({"self": _tensor(a, "self"), "pad": a.get("padding")})


def _steps(a):
    n = a.get("steps")
    if not isinstance(n, int) or n < 0:
        raise NoShape("steps not recorded")
    return [_t((n,), scalar_type(a.get("dtype"), "float32"))]


def _eye(a):
    n, m = a.get("n"), a.get("m", a.get("n"))
    if not isinstance(n, int) or not isinstance(m, int):
        raise NoShape("eye's size not recorded")
    return [_t((n, m), scalar_type(a.get("dtype"), "float32"))]


def _rot90(a):
    x = _tensor(a, "self")
    k, dims = a.get("k", 1), a.get("dims", [0, 1])
    if not isinstance(k, int) or not isinstance(dims, list) or len(dims) != 2:
        raise NoShape("rot90's k or dims not recorded")
    if k % 2 == 0:
        return [_like(x)]
    return _transpose({"self": x, "dim0": dims[0], "dim1": dims[1]})


def _diag_embed(a):
    x = _tensor(a, "self")
    off, d1, d2 = a.get("offset", 0) or 0, a.get("dim1", -2), a.get("dim2", -1)
    n = (x.shape[-1] if x.shape else 1) + abs(off)
    nd = len(x.shape) + 1
    d1, d2 = _wrap(d1, nd), _wrap(d2, nd)
    rest = list(x.shape[:-1])
    out = []
    for i in range(nd):
        out.append(n if i in (d1, d2) else rest.pop(0))
    return [_t(out, x.dtype)]


_REAL = {"complex64": "float32", "complex128": "float64", "complex32": "float16"}
_COMPLEX = {"float32": "complex64", "float64": "complex128", "float16": "complex32"}


def _fft(a, packet):
    x = _tensor(a, "self")
    dim = a.get("dim")
    if not isinstance(dim, list) or not dim:
        raise NoShape("the transform's dims not recorded")
    last = _wrap(dim[-1], len(x.shape))
    s = list(x.shape)
    if packet == "_fft_r2c":
        if a.get("onesided", True):
            s[last] = s[last] // 2 + 1
        return [_t(s, _COMPLEX.get(x.dtype, "complex64"))]
    if packet == "_fft_c2r":
        n = a.get("last_dim_size")
        if not isinstance(n, int):
            raise NoShape("last_dim_size not recorded")
        s[last] = n
        return [_t(s, _REAL.get(x.dtype, "float32"))]
    return [_like(x)]


def _scaled_mm(a):
    x, w = _tensor(a, "self"), _tensor(a, "mat2")
    return [_t((x.shape[0], w.shape[1]), scalar_type(a.get("out_dtype"), x.dtype))]


def _scaled_grouped_mm(a):
    """The result of a grouped float8 product: (total_M, N) for a 2-d a and a 3-d b, (G, M, N) for both 3-d,
    (M, total_N) for a 3-d a and a 2-d b, (G, M, N) for both 2-d (the groups split K; G from ``offs``); bfloat16
    unless ``out_dtype`` says otherwise (torch's meta kernel)."""
    x, w = _tensor(a, "self"), _tensor(a, "mat2")
    dtype = scalar_type(a.get("out_dtype"), "bfloat16")
    if len(x.shape) == 2 and len(w.shape) == 3:
        return [_t((x.shape[0], w.shape[2]), dtype)]
    if len(x.shape) == 3 and len(w.shape) == 3:
        return [_t((x.shape[0], x.shape[1], w.shape[2]), dtype)]
    if len(x.shape) == 3 and len(w.shape) == 2:
        return [_t((x.shape[1], w.shape[1]), dtype)]
    offs = a.get("offs")
    if len(x.shape) == 2 and len(w.shape) == 2 and isinstance(offs, TensorSpec) and len(offs.shape) == 1:
        return [_t((offs.shape[0], x.shape[0], w.shape[1]), dtype)]
    raise NoShape(f"a grouped product of a {len(x.shape)}-d and a {len(w.shape)}-d operand (with these offsets) "
                  "has no result shape")


def _normal(a):
    mean, std = a.get("mean"), a.get("std")
    ts = [t for t in (mean, std) if isinstance(t, TensorSpec)]
    if ts:
        return [_t(broadcast([t.shape for t in ts]), ts[0].dtype)]
    return _factory(a)


def _unpool(a):
    x = _tensor(a, "self")
    os_ = a.get("output_size")
    if not isinstance(os_, list):
        raise NoShape("output_size not recorded")
    return [_t(x.shape[:len(x.shape) - len(os_)] + tuple(os_), x.dtype)]


def _multinomial(a):
    x = _tensor(a, "self")
    n = a.get("num_samples")
    if not isinstance(n, int):
        raise NoShape("num_samples not recorded")
    return [_t(x.shape[:-1] + (n,), "int64")]


def _unbind(a):
    x = _tensor(a, "self")
    d = _wrap(a.get("dim", 0) or 0, len(x.shape))
    return [_t(x.shape[:d] + x.shape[d + 1:], x.dtype) for _ in range(x.shape[d] if x.shape else 0)]


def _im2col(a):
    x = _tensor(a, "self")
    k = _int_list(a.get("kernel_size"), 2, "kernel_size")
    d = _int_list(a.get("dilation"), 2, "dilation")
    p = _int_list(a.get("padding"), 2, "padding")
    st = _int_list(a.get("stride"), 2, "stride")
    sp = x.shape[-2:]
    blocks = 1
    for i in range(2):
        blocks *= _pool_out(sp[i], k[i], st[i], p[i], d[i], False)
    c = x.shape[-3] * k[0] * k[1]
    return [_t(x.shape[:-3] + (c, blocks), x.dtype)]


# packet (functional name) -> rule(a) or rule(a, tensors, scalars) when marked with "ts"
RULES = {
    "_scaled_grouped_mm": _scaled_grouped_mm, "_scaled_grouped_mm_v2": _scaled_grouped_mm,
    "_softmax": _softmax, "_log_softmax": _softmax, "_safe_softmax": lambda a: [_like(_tensor(a, "self"),
                                                                                      scalar_type(a.get("dtype")))],
    "_softmax_backward_data": lambda a: [_like(_tensor(a, "grad_output"), scalar_type(a.get("input_dtype")))],
    "_log_softmax_backward_data": lambda a: [_like(_tensor(a, "grad_output"), scalar_type(a.get("input_dtype")))],
    "native_layer_norm": _layer_norm, "native_layer_norm_backward": _layer_norm_backward,
    "native_group_norm": _group_norm, "native_group_norm_backward": _group_norm_backward,
    "_native_batch_norm_legit": _native_batch_norm, "native_batch_norm": _native_batch_norm,
    "_native_batch_norm_legit_no_training": lambda a: [_like(_tensor(a, "input")),
                                                       _bn_stats(_tensor(a, "input"), False),
                                                       _bn_stats(_tensor(a, "input"), False)],
    "_batch_norm_with_update": _batch_norm_with_update,
    "_batch_norm_no_update": lambda a: [_like(_tensor(a, "input")), _bn_stats(_tensor(a, "input"), False),
                                        _bn_stats(_tensor(a, "input"), False), _t((0,), "uint8")],
    "native_batch_norm_backward": _bn_backward, "batch_norm_backward": lambda a: _bn_backward(a),
    "cudnn_batch_norm": _batch_norm_with_update,
    "cudnn_batch_norm_backward": lambda a: _bn_backward(a, "output_mask") if "output_mask" in a else
    [_like(_tensor(a, "input")), _like(_tensor(a, "weight")), _like(_tensor(a, "weight"))],
    "_fused_rms_norm": _fused_rms_norm,
    "convolution_backward": _conv_backward,
    "max_pool2d_with_indices": lambda a: _pool(a, 2, True), "max_pool3d_with_indices": lambda a: _pool(a, 3, True),
    "max_pool2d": lambda a: _pool(a, 2, False), "max_pool1d": lambda a: _pool(a, 1, False),
    "avg_pool2d": lambda a: _pool(a, 2, False, dilation=False), "avg_pool3d": lambda a: _pool(a, 3, False, False),
    "avg_pool2d_backward": _same_as_self, "avg_pool3d_backward": _same_as_self,
    "max_pool2d_with_indices_backward": _same_as_self, "max_pool3d_with_indices_backward": _same_as_self,
    "_adaptive_avg_pool2d": lambda a: _adaptive(a, False), "_adaptive_avg_pool3d": lambda a: _adaptive(a, False),
    "adaptive_max_pool2d": lambda a: _adaptive(a, True),
    "_adaptive_avg_pool2d_backward": _same_as_self, "_adaptive_avg_pool3d_backward": _same_as_self,
    "adaptive_max_pool2d_backward": _same_as_self,
    "nll_loss_forward": _nll_forward, "nll_loss2d_forward": _nll2d_forward,
    "nll_loss_backward": _same_as_self, "nll_loss2d_backward": _same_as_self,
    "mse_loss": _loss, "l1_loss": _loss, "smooth_l1_loss": _loss, "huber_loss": _loss,
    "binary_cross_entropy": _loss, "binary_cross_entropy_with_logits": _loss,
    "mse_loss_backward": _same_as_self, "smooth_l1_loss_backward": _same_as_self,
    "huber_loss_backward": _same_as_self,
    "sum": lambda a: [_reduction(a, _sum_dtype)], "nansum": lambda a: [_reduction(a, _sum_dtype)],
    "prod": lambda a: [_reduction(a, _sum_dtype)],
    "mean": lambda a: [_reduction(a)], "amax": lambda a: [_reduction(a)], "amin": lambda a: [_reduction(a)],
    "logsumexp": lambda a: [_reduction(a)],
    "any": lambda a: [_reduction(a, lambda d: "uint8" if d == "uint8" else "bool")],
    "all": lambda a: [_reduction(a, lambda d: "uint8" if d == "uint8" else "bool")],
    "_is_all_true": lambda a: [_t((), "bool")], "_is_any_true": lambda a: [_t((), "bool")],
    "argmax": lambda a: [_reduction(a, lambda d: "int64")], "argmin": lambda a: [_reduction(a, lambda d: "int64")],
    "count_nonzero": lambda a: [_reduction(a, lambda d: "int64")],
    "max": lambda a: _max_dim(a) if "dim" in a else [_scalar0(a)[0]],
    "min": lambda a: _max_dim(a) if "dim" in a else [_scalar0(a)[0]],
    "aminmax": _aminmax,
    "var": lambda a: [_norm(a)[0]], "std": lambda a: [_norm(a)[0]],
    "var_mean": _var_mean, "std_mean": _var_mean,
    "linalg_vector_norm": _norm, "norm": _norm,
    "cumsum": _cumulative, "cumprod": _cumulative,
    "embedding_dense_backward": _embedding_backward, "embedding_backward": _embedding_backward,
    "addbmm": lambda a: [_t(broadcast([_tensor(a, "self").shape, (_tensor(a, "batch1").shape[1],
                                                                   _tensor(a, "batch2").shape[2])]),
                            _tensor(a, "batch1").dtype)],
    "mv": _mv, "addmv": _addmv, "dot": _scalar0, "vdot": _scalar0, "addr": _addr,
    "embedding": _embedding, "index_select": _index_select, "gather": _gather,
    "take": lambda a: [_t(_tensor(a, "index").shape, _tensor(a, "self").dtype)],
    "take_along_dim": lambda a: [_t(broadcast([_tensor(a, "self").shape, _tensor(a, "indices").shape]),
                                    _tensor(a, "self").dtype)],
    "cat": _cat, "stack": _stack, "constant_pad_nd": _pad, "repeat": _repeat,
    "_to_copy": _to_copy, "clone": _same_as_self, "copy": _same_as_self, "contiguous": _same_as_self,
    "tril": _same_as_self, "triu": _same_as_self, "flip": _same_as_self, "roll": _same_as_self,
    "index_fill": _same_as_self, "masked_fill": _same_as_self, "index_copy": _same_as_self,
    "index_put": _same_as_self, "masked_scatter": _same_as_self, "scatter": _same_as_self,
    "scatter_add": _same_as_self, "scatter_reduce": _same_as_self, "index_add": _same_as_self,
    "index_reduce": _same_as_self, "_index_put_impl": _same_as_self,
    "_local_scalar_dense": lambda a: [],
    "slice_backward": _backward_sized, "select_backward": _backward_sized,
    "diagonal_backward": _backward_sized, "unfold_backward": lambda a: _backward_sized(a, "grad_in", "input_sizes"),
    "zeros": _factory, "ones": _factory, "empty": _factory, "randn": _factory, "rand": _factory,
    "full": _full, "new_zeros": _new_factory, "new_ones": _new_factory, "new_empty": _new_factory,
    "new_full": _new_factory,
    "zeros_like": _like_factory, "ones_like": _like_factory, "full_like": _like_factory, "empty_like": _like_factory,
    "randn_like": _like_factory, "rand_like": _like_factory, "randint_like": _like_factory,
    "fill": _same_as_self, "zero": _same_as_self, "bernoulli": _same_as_self, "normal": _normal,
    "max_unpool2d": _unpool, "multinomial": _multinomial, "unbind_copy": _unbind, "im2col": _im2col,
    "uniform": _same_as_self, "exponential": _same_as_self, "random": _same_as_self,
    "scalar_tensor": lambda a: [_t((), scalar_type(a.get("dtype"), "float32"))],
    "arange": _arange,
    "native_dropout": _dropout, "native_dropout_backward": lambda a: [_like(_tensor(a, "grad_output"))],
    "_masked_scale": _same_as_self,
    "upsample_nearest1d": lambda a: _upsample(a, 1), "upsample_nearest2d": lambda a: _upsample(a, 2),
    "upsample_nearest3d": lambda a: _upsample(a, 3), "_upsample_nearest_exact1d": lambda a: _upsample(a, 1),
    "_upsample_nearest_exact2d": lambda a: _upsample(a, 2), "_upsample_nearest_exact3d": lambda a: _upsample(a, 3),
    "upsample_linear1d": lambda a: _upsample(a, 1), "upsample_bilinear2d": lambda a: _upsample(a, 2),
    "_upsample_bilinear2d_aa": lambda a: _upsample(a, 2), "upsample_trilinear3d": lambda a: _upsample(a, 3),
    "upsample_bicubic2d": lambda a: _upsample(a, 2), "_upsample_bicubic2d_aa": lambda a: _upsample(a, 2),
    "upsample_nearest1d_backward": _upsample_backward, "upsample_nearest2d_backward": _upsample_backward,
    "upsample_nearest3d_backward": _upsample_backward, "upsample_linear1d_backward": _upsample_backward,
    "upsample_bilinear2d_backward": _upsample_backward, "upsample_trilinear3d_backward": _upsample_backward,
    "upsample_bicubic2d_backward": _upsample_backward, "_upsample_bilinear2d_aa_backward": _upsample_backward,
    "_upsample_bicubic2d_aa_backward": _upsample_backward,
    "_upsample_nearest_exact1d_backward": _upsample_backward,
    "_upsample_nearest_exact2d_backward": _upsample_backward,
    "_upsample_nearest_exact3d_backward": _upsample_backward,
    "_scaled_dot_product_flash_attention_for_cpu": _attn_cpu,
    "_scaled_dot_product_flash_attention_for_cpu_backward": _attn_bwd_qkv,
    "_scaled_dot_product_efficient_attention": _attn_efficient,
    "_scaled_dot_product_efficient_attention_backward": _attn_efficient_bwd,
    "_scaled_dot_product_flash_attention": _flash_cuda,
    "_scaled_dot_product_flash_attention_backward": _flash_cuda_bwd,
    "_scaled_dot_product_cudnn_attention_backward": _attn_bwd_qkv,
    "_scaled_dot_product_cudnn_attention": _cudnn_attn,
    "_foreach_norm": _foreach_norm,
    "sort": _sort, "argsort": lambda a: [_like(_tensor(a, "self"), "int64")], "msort": _same_as_self,
    "topk": _topk, "kthvalue": _select_dim, "mode": _select_dim,
    "median": lambda a: _select_dim(a) if "dim" in a else _scalar0(a),
    "nanmedian": lambda a: _select_dim(a) if "dim" in a else _scalar0(a),
    "searchsorted": _search, "bucketize": _search,
    "isin": lambda a: [_t(a["elements"].shape if isinstance(a.get("elements"), TensorSpec) else (), "bool")],
    "view_copy": _view_size, "expand_copy": _view_size, "permute_copy": _permute, "t_copy": _transpose,
    "transpose_copy": _transpose, "alias_copy": _same_as_self, "detach_copy": _same_as_self,
    "lift_fresh_copy": _same_as_self, "squeeze_copy": _squeeze, "unsqueeze_copy": _unsqueeze,
    "narrow_copy": _narrow, "as_strided_copy": lambda a: [_t(_size_arg(a), _tensor(a, "self").dtype)],
    "select_scatter": _same_as_self, "slice_scatter": _same_as_self, "diagonal_scatter": _same_as_self,
    "as_strided_scatter": _same_as_self,
    "reflection_pad1d": _pad_n, "reflection_pad2d": _pad_n, "replication_pad1d": _pad_n,
    "replication_pad2d": _pad_n,
    "linspace": _steps, "logspace": _steps, "eye": _eye, "rot90": _rot90, "diag_embed": _diag_embed,
    "randint": lambda a: _factory(a, "int64"),
    "_fft_r2c": lambda a: _fft(a, "_fft_r2c"), "_fft_c2r": lambda a: _fft(a, "_fft_c2r"),
    "_fft_c2c": lambda a: _fft(a, "_fft_c2c"),
    "_scaled_mm": _scaled_mm,
    # (output, buffer): the buffer is the input's size on CPU, empty on CUDA (stated in assumed by the caller)
    "log_sigmoid_forward": lambda a: [_like(_tensor(a, "self")), _like(_tensor(a, "self"))],
    "histc": lambda a: [_t((a.get("bins") if isinstance(a.get("bins"), int) else 100,), _tensor(a, "self").dtype)],
}
# element-wise by broadcasting, with torch's type promotion
_TS = {"where": _where}


# results whose size depends on the values of the data, not on shapes
_DATA_DEPENDENT = frozenset("nonzero masked_select unique _unique _unique2 unique_consecutive unique_dim bincount "
                            "repeat_interleave".split())
# ops taking a list of optional tensors, which the profiler records as "" (its shapes are not in the trace)
_INDEX_LISTS = frozenset("index _unsafe_index index_put _index_put_impl _unsafe_index_put".split())


def results(packet: str, kind: str, a: dict, tensors: list, scalars: list):
    """The results of a functional call of ``packet`` (its cost kind ``kind``) with arguments ``a``; ``tensors``:
    its tensor arguments in order (tensor lists flattened), ``scalars``: its Python-number arguments."""
    if packet in _DATA_DEPENDENT:
        raise NoShape(f"the size of {packet}'s result depends on the values of its input, which a trace does not "
                      "record")
    if packet in _INDEX_LISTS and a.get("indices") is None and packet in ("index", "_unsafe_index"):
        raise NoShape(f"the trace does not record {packet}'s indices (a list of optional tensors), which give the "
                      "result's shape")
    if packet in _TS:
        return _TS[packet](a, tensors, scalars)
    rule = RULES.get(packet, False)
    if rule is None:
        raise NoShape(f"the result shape of {packet} is not derived from its recorded inputs")
    if rule is not False:
        return rule(a)
    if packet.startswith("_foreach_"):
        return _foreach_like(a)
    if kind == "ewise":
        return ewise(packet, a, tensors, scalars)
    if kind in ("mm", "addmm", "bmm", "baddbmm", "conv", "attn", "scaled_mm", "grouped_mm", "zero", "mha"):
        return None  # the cost model infers these itself (or, for views, counts nothing)
    raise NoShape(f"the result shape of {packet} is not derived from its recorded inputs")
