/* Op cost model. See cost.h for the contract and docs/concepts.md for the conventions. Pure C11, no Python. */
#include "cost.h"

#include <string.h>

/* ---- dtypes ---------------------------------------------------------------------------------------------- */

static const struct {
    const char *name;
    unsigned itemsize;
} rl_dtypes[RL_DT_COUNT] = {
    [RL_DT_UNKNOWN] = {"unknown", 0},
    [RL_DT_FLOAT64] = {"float64", 8},
    [RL_DT_FLOAT32] = {"float32", 4},
    [RL_DT_FLOAT16] = {"float16", 2},
    [RL_DT_BFLOAT16] = {"bfloat16", 2},
    [RL_DT_FLOAT8_E4M3FN] = {"float8_e4m3fn", 1},
    [RL_DT_FLOAT8_E5M2] = {"float8_e5m2", 1},
    [RL_DT_FLOAT8_E4M3FNUZ] = {"float8_e4m3fnuz", 1},
    [RL_DT_FLOAT8_E5M2FNUZ] = {"float8_e5m2fnuz", 1},
    [RL_DT_COMPLEX128] = {"complex128", 16},
    [RL_DT_COMPLEX64] = {"complex64", 8},
    [RL_DT_COMPLEX32] = {"complex32", 4},
    [RL_DT_INT64] = {"int64", 8},
    [RL_DT_INT32] = {"int32", 4},
    [RL_DT_INT16] = {"int16", 2},
    [RL_DT_INT8] = {"int8", 1},
    [RL_DT_UINT8] = {"uint8", 1},
    [RL_DT_UINT16] = {"uint16", 2},
    [RL_DT_UINT32] = {"uint32", 4},
    [RL_DT_UINT64] = {"uint64", 8},
    [RL_DT_BOOL] = {"bool", 1},
};

unsigned rl_dtype_itemsize(int dt) { return (dt > 0 && dt < RL_DT_COUNT) ? rl_dtypes[dt].itemsize : 0; }

const char *rl_dtype_name(int dt) { return (dt > 0 && dt < RL_DT_COUNT) ? rl_dtypes[dt].name : "unknown"; }

const char *rl_status_str(int status) {
    switch (status) {
    case RL_OK:
        return "ok";
    case RL_E_OVERFLOW:
        return "count overflows 64 bits";
    case RL_E_ARGS:
        return "missing or mistyped argument";
    case RL_E_SHAPE:
        return "inconsistent shapes";
    case RL_E_KIND:
        return "unknown cost kind";
    case RL_E_DIMS:
        return "a tensor has a negative size or more than 16 dimensions";
    case RL_E_VALUE:
        return "an integer argument is out of range (kernel size or stride <= 0, negative padding)";
    case RL_E_DATA:
        return "the count depends on tensor values that cannot be read (meta or fake tensors)";
    default:
        return "unknown status";
    }
}

/* ---- the op-kind vocabulary (RL_PARAMS, RL_KINDS in cost.h) ------------------------------------------- */

static const struct {
    const char *name;
    int type;
    const char *argname;
} rl_params[RL_P_COUNT] = {
#define RL_PARAM_ROW_(id, name, type, argname) [RL_P_##id] = {name, type, argname},
    RL_PARAMS(RL_PARAM_ROW_)
#undef RL_PARAM_ROW_
};

typedef int (*formula_fn)(const rl_op *, const rl_call *, rl_cost *, int *);

#define RL_FORMULA_DECL_(id, name, params, formula) \
    static int formula(const rl_op *, const rl_call *, rl_cost *, int *);
RL_KINDS(RL_FORMULA_DECL_)
#undef RL_FORMULA_DECL_

static const struct {
    const char *name;
    uint64_t params;
    formula_fn formula;
} rl_kinds[RL_K_COUNT] = {
#define RL_KIND_ROW_(id, name, params, formula) [RL_K_##id] = {name, (params) | RL_P(TRAINING), formula},
    RL_KINDS(RL_KIND_ROW_)
#undef RL_KIND_ROW_
};

static int param_ok(int p) { return p >= 0 && p < RL_P_COUNT; }

static int is_position(int p) { return rl_params[p].type == RL_PT_ARG || rl_params[p].type == RL_PT_ARG_REQUIRED; }

const char *rl_param_name(int p) { return param_ok(p) ? rl_params[p].name : NULL; }

int rl_param_type(int p) { return param_ok(p) ? rl_params[p].type : -1; }

const char *rl_param_argname(int p) { return param_ok(p) ? rl_params[p].argname : NULL; }

void rl_param_range(int p, int64_t *lo, int64_t *hi) {
    *lo = 0;
    *hi = 0;
    if (param_ok(p)) {
        *lo = is_position(p) ? -1 : 0;
        *hi = is_position(p) ? RL_MAX_ARGS - 1 : rl_params[p].type == RL_PT_FLAG ? 1 : INT64_MAX;
    }
}

const char *rl_kind_name(int kind) { return (kind >= 0 && kind < RL_K_COUNT) ? rl_kinds[kind].name : NULL; }

uint64_t rl_kind_params(int kind) { return (kind >= 0 && kind < RL_K_COUNT) ? rl_kinds[kind].params : 0; }

int rl_op_set(rl_op *op, int p, int64_t value) {
    int64_t lo, hi;
    if (!param_ok(p) || !((rl_kind_params(op->kind) >> p) & 1u)) {
        return RL_E_KIND;
    }
    rl_param_range(p, &lo, &hi);
    if (value < lo || value > hi) {
        return RL_E_VALUE;
    }
    op->param[p] = is_position(p) ? value + 1 : value; /* positions plus one: a zeroed rl_op has none */
    return RL_OK;
}

int64_t rl_op_get(const rl_op *op, int p) {
    if (!param_ok(p)) {
        return 0;
    }
    if (is_position(p)) { /* stored plus one; anything outside 1..RL_MAX_ARGS is no argument */
        return (op->param[p] >= 1 && op->param[p] <= RL_MAX_ARGS) ? op->param[p] - 1 : -1;
    }
    return op->param[p];
}

/* A count parameter as uint64 (a negative value, which rl_op_set refuses, counts as 0). */
static uint64_t count_param(const rl_op *op, int p) { return op->param[p] > 0 ? (uint64_t)op->param[p] : 0; }

/* An argument-position parameter, -1 when absent. */
static int pos_param(const rl_op *op, int p) { return (int)rl_op_get(op, p); }

/* ---- checked arithmetic: every helper ORs an overflow into *ov and saturates ---------------------------- */

static uint64_t mul(uint64_t a, uint64_t b, int *ov) {
    uint64_t r;
    if (__builtin_mul_overflow(a, b, &r)) {
        *ov = 1;
        return UINT64_MAX;
    }
    return r;
}

static uint64_t add(uint64_t a, uint64_t b, int *ov) {
    uint64_t r;
    if (__builtin_add_overflow(a, b, &r)) {
        *ov = 1;
        return UINT64_MAX;
    }
    return r;
}

/* Non-negative int64 as uint64; negative sizes (never produced by torch) count as 0. */
static uint64_t u(int64_t v) { return v > 0 ? (uint64_t)v : 0; }

uint64_t rl_numel(const rl_tensor *t, int *ov) {
    uint64_t n = 1;
    if (t->ndim < 0) {
        return 0; /* absent output */
    }
    for (int d = 0; d < t->ndim; d++) {
        if (t->size[d] <= 0) {
            return 0;
        }
        n = mul(n, u(t->size[d]), ov);
    }
    return n;
}

uint64_t rl_touched(const rl_tensor *t, int *ov) {
    uint64_t n = 1;
    if (t->ndim < 0) {
        return 0;
    }
    for (int d = 0; d < t->ndim; d++) {
        if (t->size[d] <= 0) {
            return 0;
        }
        if (t->stride[d] != 0) {
            n = mul(n, u(t->size[d]), ov);
        }
    }
    return n;
}

static uint64_t nbytes(const rl_tensor *t, int *ov) { return mul(rl_numel(t, ov), rl_dtype_itemsize(t->dtype), ov); }

static uint64_t touched_bytes(const rl_tensor *t, int *ov) {
    return mul(rl_touched(t, ov), rl_dtype_itemsize(t->dtype), ov);
}

/* ---- argument access ---------------------------------------------------------------------------------- */

static const rl_arg *arg(const rl_call *c, int i) {
    static const rl_arg absent = {RL_ARG_ABSENT, 0, 0, 0, 0.0};
    return (i >= 0 && i < c->nargs) ? &c->args[i] : &absent;
}

/* The tensor passed as argument i, or NULL. */
static const rl_tensor *tensor_arg(const rl_call *c, int i) {
    const rl_arg *a = arg(c, i);
    return a->type == RL_ARG_TENSOR ? &c->tensors[a->first] : NULL;
}

/* Truth value of a bool/int argument; `dflt` when absent or None. */
static int bool_arg(const rl_call *c, int i, int dflt) {
    const rl_arg *a = arg(c, i);
    if (a->type == RL_ARG_BOOL || a->type == RL_ARG_INT) {
        return a->i != 0;
    }
    return dflt;
}

static int64_t int_arg(const rl_call *c, int i, int64_t dflt) {
    const rl_arg *a = arg(c, i);
    return (a->type == RL_ARG_INT || a->type == RL_ARG_BOOL) ? a->i : dflt;
}

/* Element i of a bool-list argument, `dflt` when absent. */
static int boollist_at(const rl_call *c, int argi, int i, int dflt) {
    const rl_arg *a = arg(c, argi);
    if ((a->type == RL_ARG_BOOLLIST || a->type == RL_ARG_INTLIST) && i < a->count) {
        return c->ints[a->first + i] != 0;
    }
    return dflt;
}

/* Sum of `measure` over the tensors of argument i (a tensor or a tensor list; 0 for anything else). */
static uint64_t arg_sum(const rl_call *c, int i, uint64_t (*measure)(const rl_tensor *, int *), int *ov) {
    const rl_arg *a = arg(c, i);
    uint64_t n = 0;
    if (a->type == RL_ARG_TENSOR || a->type == RL_ARG_TENSORLIST) {
        for (int k = 0; k < a->count; k++) {
            n = add(n, measure(&c->tensors[a->first + k], ov), ov);
        }
    }
    return n;
}

static uint64_t arg_numel(const rl_call *c, int i, int *ov) { return arg_sum(c, i, rl_numel, ov); }

static uint64_t arg_touched_bytes(const rl_call *c, int i, int *ov) { return arg_sum(c, i, touched_bytes, ov); }

static uint64_t arg_nbytes(const rl_call *c, int i, int *ov) { return arg_sum(c, i, nbytes, ov); }

static int is_set(uint64_t mask, int i) { return i < 64 && ((mask >> i) & 1u); }

/* The first tensor among the arguments (in order), or NULL. */
static const rl_tensor *first_tensor(const rl_call *c) {
    for (int i = 0; i < c->nargs; i++) {
        const rl_arg *a = &c->args[i];
        if ((a->type == RL_ARG_TENSOR || a->type == RL_ARG_TENSORLIST) && a->count > 0) {
            return &c->tensors[a->first];
        }
    }
    return NULL;
}

static const rl_tensor *first_out(const rl_call *c) {
    for (int i = 0; i < c->nouts; i++) {
        if (c->outs[i].ndim >= 0) {
            return &c->outs[i];
        }
    }
    return NULL;
}

/* Position of the first argument written in place, or -1 (also when the op's results are new tensors). */
static int first_written(const rl_op *op, const rl_call *c) {
    if (op->flags & RL_OPF_FRESH_OUTS) {
        return -1;
    }
    for (int i = 0; i < c->nargs && i < 64; i++) {
        if (is_set(op->write_mask, i)) {
            return i;
        }
    }
    return -1;
}

/* Elements of the op's result: the first in-place argument if any, else the first output. */
static uint64_t result_numel(const rl_op *op, const rl_call *c, int *ov) {
    int w = first_written(op, c);
    if (w >= 0) {
        return arg_numel(c, w, ov);
    }
    const rl_tensor *o = first_out(c);
    return o ? rl_numel(o, ov) : 0;
}

static int result_dtype(const rl_op *op, const rl_call *c) {
    int w = first_written(op, c);
    const rl_arg *wa = arg(c, w);
    if (w >= 0 && (wa->type == RL_ARG_TENSOR || wa->type == RL_ARG_TENSORLIST) && wa->count > 0) {
        return c->tensors[wa->first].dtype;
    }
    const rl_tensor *o = first_out(c);
    if (o) {
        return o->dtype;
    }
    const rl_tensor *t = first_tensor(c);
    return t ? t->dtype : RL_DT_UNKNOWN;
}

static int input_dtype(const rl_call *c) {
    const rl_tensor *t = first_tensor(c);
    if (t) {
        return t->dtype;
    }
    const rl_tensor *o = first_out(c);
    return o ? o->dtype : RL_DT_UNKNOWN;
}

/* 0 when the op has a BatchNorm `training` flag (RL_P_TRAINING) and it is false, else 1. An absent flag
 * counts as training, the schemas' only mode without a default. */
static int training(const rl_op *op, const rl_call *c) {
    int ti = pos_param(op, RL_P_TRAINING);
    return ti < 0 ? 1 : bool_arg(c, ti, 1);
}

/* Compulsory bytes: every tensor argument not in noread_mask read once at its touched size; written: the arguments
 * written in place, and the outputs unless they are aliases of those arguments (RL_OPF_FRESH_OUTS). With a training
 * flag that is false, updated arguments are only read and noread_mask arguments are read: the running statistics are
 * used instead of updated. */
static void generic_bytes(const rl_op *op, const rl_call *c, rl_cost *r, int *ov) {
    int train = training(op, c);
    uint64_t noread = op->noread_mask;
    if (!train) {
        noread &= op->write_mask; /* write-only destinations (out=) are still not read */
    }
    for (int i = 0; i < c->nargs; i++) {
        if (!is_set(noread, i)) {
            r->bytes_read = add(r->bytes_read, arg_touched_bytes(c, i, ov), ov);
        }
    }
    for (int i = 0; i < c->nargs && i < 64; i++) {
        /* an updated argument (read and written) is written only in training; a write-only destination always */
        if (is_set(op->write_mask, i) && (train || is_set(op->noread_mask, i))) {
            r->bytes_written = add(r->bytes_written, arg_nbytes(c, i, ov), ov);
        }
    }
    if (!op->write_mask || (op->flags & RL_OPF_FRESH_OUTS)) {
        for (int i = 0; i < c->nouts; i++) {
            r->bytes_written = add(r->bytes_written, nbytes(&c->outs[i], ov), ov);
        }
    }
}

static uint64_t prod_from(const rl_tensor *t, int from, int *ov) {
    uint64_t n = 1;
    for (int d = from; d < t->ndim; d++) {
        n = mul(n, u(t->size[d]), ov);
    }
    return n;
}

/* ---- matrix products ---------------------------------------------------------------------------------- */

/* 2*M*N*K for a (M,K) x (K,N) product; RL_E_SHAPE if the shapes do not multiply. */
static int mm_flops(const rl_tensor *a, const rl_tensor *b, uint64_t *flops, int *ov) {
    if (!a || !b || a->ndim != 2 || b->ndim != 2) {
        return RL_E_ARGS;
    }
    if (a->size[1] != b->size[0]) {
        return RL_E_SHAPE;
    }
    *flops = mul(mul(mul(2, u(a->size[0]), ov), u(b->size[1]), ov), u(a->size[1]), ov);
    return RL_OK;
}

static int bmm_flops(const rl_tensor *a, const rl_tensor *b, uint64_t *flops, int *ov) {
    if (!a || !b || a->ndim != 3 || b->ndim != 3) {
        return RL_E_ARGS;
    }
    if (a->size[0] != b->size[0] || a->size[2] != b->size[1]) {
        return RL_E_SHAPE;
    }
    *flops = mul(mul(mul(mul(2, u(a->size[0]), ov), u(a->size[1]), ov), u(b->size[2]), ov), u(a->size[2]), ov);
    return RL_OK;
}

/* The matrix-product kinds differ only in where the operands are (addmm and baddbmm take the bias first), whether
 * they are batched, and whether one vector FLOP per output element follows the product (the bias add of addmm and
 * baddbmm, the dequantising scale of _scaled_mm). */
static int cost_mm(const rl_op *op, const rl_call *c, rl_cost *r, int *ov) {
    int k = op->kind, first = (k == RL_K_ADDMM || k == RL_K_BADDBMM) ? 1 : 0;
    int batched = k == RL_K_BMM || k == RL_K_BADDBMM, epilogue = k != RL_K_MM && k != RL_K_BMM;
    const rl_tensor *a = tensor_arg(c, first), *b = tensor_arg(c, first + 1);
    uint64_t f = 0;
    int st = batched ? bmm_flops(a, b, &f, ov) : mm_flops(a, b, &f, ov);
    r->matrix = f;
    r->flop_counter = (op->flags & RL_OPF_FLOP_COUNTER) ? f : 0;
    if (st == RL_OK && epilogue) { /* one per output element: M*N, or B*M*N batched */
        uint64_t rows = batched ? mul(u(a->size[0]), u(a->size[1]), ov) : u(a->size[0]);
        r->vector = mul(rows, u(b->size[batched ? 2 : 1]), ov);
    }
    generic_bytes(op, c, r, ov);
    r->dtype = !first ? input_dtype(c) : a ? a->dtype : RL_DT_UNKNOWN;
    return st;
}

/* _grouped_mm(a, b, offs, bias, out_dtype): one product per group, a group being a slice of one operand along offs
 * (the grouped GEMM of mixture-of-experts layers): a (total_M, K) x b (G, K, N) -> (total_M, N); a (G, M, K) x
 * b (G, K, N) -> (G, M, N); a (G, M, K) x b (K, total_N) -> (M, total_N); a (M, total_K) x b (total_K, N) ->
 * (G, M, N). The groups partition rows, columns or K, so the product is 2 * rows * K * columns with rows the
 * second-to-last dimension of a (times G when both are batched) and columns the last of b. Bias: one add per output
 * element. */
static int cost_grouped_mm(const rl_op *op, const rl_call *c, rl_cost *r, int *ov) {
    const rl_tensor *a = tensor_arg(c, 0), *b = tensor_arg(c, 1), *out = first_out(c);
    if (!a || !b || a->ndim < 2 || a->ndim > 3 || b->ndim < 2 || b->ndim > 3) {
        return RL_E_ARGS;
    }
    int batched = a->ndim == 3 && b->ndim == 3;
    int64_t k = a->size[a->ndim - 1];
    if (b->size[b->ndim - 2] != k || (batched && a->size[0] != b->size[0])) {
        return RL_E_SHAPE;
    }
    uint64_t rows = batched ? mul(u(a->size[0]), u(a->size[1]), ov) : u(a->size[a->ndim - 2]);
    r->matrix = mul(mul(mul(2, rows, ov), u(k), ov), u(b->size[b->ndim - 1]), ov);
    if (tensor_arg(c, pos_param(op, RL_P_BIAS)) && out) {
        r->vector = rl_numel(out, ov);
    }
    generic_bytes(op, c, r, ov);
    r->dtype = a->dtype;
    return RL_OK;
}

/* ---- convolution -------------------------------------------------------------------------------------- */

/* FlopCounterMode's conv_flop_count: 2 * batch * prod(conv spatial) * prod(filter spatial) * w[0] * w[1], with the
 * spatial extent taken from x when transposed, else from out. Exact for grouped convolution forward (w[1] is
 * C_in / groups). */
static uint64_t conv_count(const rl_tensor *x, const rl_tensor *w, const rl_tensor *out, int transposed, int *ov) {
    const rl_tensor *sp = transposed ? x : out;
    uint64_t n = mul(2, u(x->size[0]), ov);
    n = mul(n, prod_from(sp, 2, ov), ov);
    n = mul(n, prod_from(w, 2, ov), ov);
    n = mul(n, u(w->size[0]), ov);
    return mul(n, u(w->size[1]), ov);
}

/* Channel and batch consistency of a convolution: x (N, C_in, ...), weight (C_out, C_in/groups, ...) or, transposed,
 * (C_in, C_out/groups, ...), out (N, C_out, ...). */
static int conv_check(const rl_op *op, const rl_call *c, const rl_tensor *x, const rl_tensor *w,
                      const rl_tensor *out, int transposed) {
    int gi = pos_param(op, RL_P_GROUPS);
    int64_t g = gi >= 0 ? int_arg(c, gi, 1) : 1;
    if (gi < 0 && op->param[RL_P_DEPTHWISE]) {
        g = x->size[1]; /* depthwise: one group per input channel */
    }
    if (g < 1 || out->size[0] != x->size[0]) {
        return RL_E_SHAPE;
    }
    int64_t cin = x->size[1], cout = out->size[1];
    if (transposed) {
        /* weight (C_in, C_out/groups, ...) */
        if (w->size[0] != cin || cin % g != 0 || w->size[1] > INT64_MAX / g || w->size[1] * g != cout) {
            return RL_E_SHAPE;
        }
    } else if (w->size[1] > INT64_MAX / g || w->size[1] * g != cin || w->size[0] != cout || cout % g != 0) {
        return RL_E_SHAPE;
    }
    return RL_OK;
}

static int cost_conv(const rl_op *op, const rl_call *c, rl_cost *r, int *ov) {
    const rl_tensor *x = tensor_arg(c, 0), *w = tensor_arg(c, 1), *out = first_out(c);
    if (!x || !w || !out || x->ndim < 3 || w->ndim != x->ndim || out->ndim != x->ndim) {
        return RL_E_ARGS;
    }
    int transposed = op->param[RL_P_ALWAYS_TRANSPOSED] ? 1 : bool_arg(c, pos_param(op, RL_P_TRANSPOSED), 0);
    int st = conv_check(op, c, x, w, out, transposed);
    if (st != RL_OK) {
        return st;
    }
    /* FlopCounterMode reads positional argument 6 as `transposed` for every conv op it registers. */
    int fcm_transposed = bool_arg(c, 6, 0);
    r->matrix = conv_count(x, w, out, transposed, ov);
    if (op->flags & RL_OPF_FLOP_COUNTER) {
        r->flop_counter = conv_count(x, w, out, fcm_transposed, ov);
    }
    int bi = pos_param(op, RL_P_BIAS);
    if (bi >= 0 && tensor_arg(c, bi)) {
        r->vector = rl_numel(out, ov); /* bias add */
    }
    generic_bytes(op, c, r, ov);
    r->dtype = x->dtype;
    return RL_OK;
}

/* convolution_backward(grad_out, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding,
 * groups, output_mask) -> (grad_input, grad_weight, grad_bias). */
static int cost_conv_bwd(const rl_op *op, const rl_call *c, rl_cost *r, int *ov) {
    const rl_tensor *go = tensor_arg(c, 0), *x = tensor_arg(c, 1), *w = tensor_arg(c, 2);
    if (!go || !x || !w || go->ndim < 3 || x->ndim != go->ndim || w->ndim != go->ndim) {
        return RL_E_ARGS;
    }
    int transposed = bool_arg(c, pos_param(op, RL_P_TRANSPOSED), 0);
    int64_t g = int_arg(c, pos_param(op, RL_P_GROUPS), 1);
    if (g < 1) {
        return RL_E_ARGS;
    }
    uint64_t groups = (uint64_t)g;
    /* the forward's shapes: x (N, C_in, ...), grad_out (N, C_out, ...), weight (C_out, C_in/groups, ...) or,
     * transposed, (C_in, C_out/groups, ...) */
    int64_t wc = w->size[1] > INT64_MAX / g ? -1 : w->size[1] * g;
    if (go->size[0] != x->size[0] || (transposed ? (w->size[0] != x->size[1] || wc != go->size[1])
                                                 : (w->size[0] != go->size[1] || wc != x->size[1]))) {
        return RL_E_SHAPE;
    }
    int mi = pos_param(op, RL_P_OUTPUT_MASK);
    int m0 = boollist_at(c, mi, 0, 1), m1 = boollist_at(c, mi, 1, 1), m2 = boollist_at(c, mi, 2, 1);
    uint64_t fcm = 0, real = 0;
    /* FlopCounterMode's count is computed only when reported: it exceeds the true one by `groups` and may overflow
     * where the true count fits */
    int fc = (op->flags & RL_OPF_FLOP_COUNTER) != 0;
    if (m0) {
        /* grad_input = conv_transpose(grad_out, weight) (a conv for a transposed forward): exact with groups. */
        uint64_t n = mul(2, u(go->size[0]), ov);
        n = mul(n, prod_from(transposed ? x : go, 2, ov), ov);
        n = mul(mul(mul(n, prod_from(w, 2, ov), ov), u(w->size[0]), ov), u(w->size[1]), ov);
        fcm = fc ? add(fcm, n, ov) : 0;
        real = add(real, n, ov);
    }
    if (m1) {
        /* grad_weight: every (out channel, in channel of its group) pair, for every window position. FlopCounterMode
         * multiplies the full input and output channel counts, which over-counts by `groups`. */
        const rl_tensor *sp = transposed ? x : go;         /* spatial extent the kernel slides over */
        uint64_t cin_all = u(transposed ? go->size[1] : x->size[1]); /* channels split into groups */
        uint64_t cother = u(transposed ? x->size[1] : go->size[1]);
        uint64_t n = mul(mul(2, prod_from(w, 2, ov), ov), prod_from(sp, 2, ov), ov);
        n = mul(n, u(go->size[0]), ov);
        if (fc) {
            fcm = add(fcm, mul(mul(n, cin_all, ov), cother, ov), ov);
        }
        if (cin_all % groups != 0) {
            return RL_E_SHAPE;
        }
        real = add(real, mul(mul(n, cin_all / groups, ov), cother, ov), ov);
    }
    if (m2) {
        r->vector = rl_numel(go, ov); /* grad_bias = sum of grad_out over batch and space */
    }
    r->matrix = real;
    r->flop_counter = fcm;
    /* Compulsory reads: grad_out always; input only for grad_weight; weight only for grad_input. */
    r->bytes_read = touched_bytes(go, ov);
    if (m1) {
        r->bytes_read = add(r->bytes_read, touched_bytes(x, ov), ov);
    }
    if (m0) {
        r->bytes_read = add(r->bytes_read, touched_bytes(w, ov), ov);
    }
    for (int i = 0; i < c->nouts; i++) {
        r->bytes_written = add(r->bytes_written, nbytes(&c->outs[i], ov), ov);
    }
    r->dtype = go->dtype;
    return RL_OK;
}

/* ---- attention ---------------------------------------------------------------------------------------- */

typedef struct {
    uint64_t b, hq, hkv, sq, sk, dq, dv;
} attn_dims;

static int attn_read_dims(const rl_tensor *q, const rl_tensor *k, const rl_tensor *v, int bshd, attn_dims *d) {
    if (!q || !k || !v || q->ndim != 4 || k->ndim != 4 || v->ndim != 4) {
        return RL_E_ARGS;
    }
    int hi = bshd ? 2 : 1, si = bshd ? 1 : 2;
    d->b = u(q->size[0]);
    d->hq = u(q->size[hi]);
    d->sq = u(q->size[si]);
    d->dq = u(q->size[3]);
    d->hkv = u(k->size[hi]);
    d->sk = u(k->size[si]);
    d->dv = u(v->size[3]);
    if (u(k->size[0]) != d->b || u(v->size[0]) != d->b || u(k->size[3]) != d->dq || u(v->size[si]) != d->sk ||
        u(v->size[hi]) != d->hkv) {
        return RL_E_SHAPE;
    }
    if (d->hkv == 0 || d->hq % d->hkv != 0) {
        return RL_E_SHAPE;
    }
    return RL_OK;
}

/* Unmasked (query, key) pairs per batch and head. mask: 0 none, 1 causal aligned top-left (query i sees keys
 * 0..i, the `is_causal=True` convention of scaled_dot_product_attention), 2 causal aligned bottom-right (query i
 * sees keys 0..i+sk-sq). */
/* n (n + 1) / 2, halving the even factor first: the count fits 64 bits where the product n (n + 1) may not
 * (n is a tensor size, below 2^63). */
static uint64_t triangle(uint64_t n, int *ov) { return n % 2 ? mul(n, (n + 1) / 2, ov) : mul(n / 2, n + 1, ov); }

static uint64_t attn_pairs(uint64_t sq, uint64_t sk, int mask, int *ov) {
    if (mask == 0) {
        return mul(sq, sk, ov);
    }
    if (mask == 2) {
        if (sq <= sk) { /* every row sees sk-sq+1+i keys */
            return add(mul(sq, sk - sq + 1, ov), sq ? triangle(sq - 1, ov) : 0, ov);
        }
        return triangle(sk, ov); /* the first sq-sk rows see nothing */
    }
    if (sq <= sk) { /* row i sees i+1 keys */
        return triangle(sq, ov);
    }
    return add(triangle(sk, ov), mul(sq - sk, sk, ov), ov);
}

uint64_t rl_attention_pairs(uint64_t sq, uint64_t sk, int mask, int *overflow) {
    return attn_pairs(sq, sk, mask, overflow);
}

static int attention(const rl_op *op, const rl_call *c, rl_cost *r, int *ov, int backward) {
    int qi = pos_param(op, RL_P_QUERY), ci = pos_param(op, RL_P_IS_CAUSAL), mi = pos_param(op, RL_P_MASK_TYPE);
    int bshd = op->param[RL_P_BSHD] != 0;
    const rl_tensor *q = tensor_arg(c, qi), *k = tensor_arg(c, qi + 1), *v = tensor_arg(c, qi + 2);
    attn_dims d;
    int st = attn_read_dims(q, k, v, bshd, &d);
    if (st != RL_OK) {
        return st;
    }
    int mask = 0;
    if (ci >= 0) {
        mask = bool_arg(c, ci, 0);
    } else if (mi >= 0) {
        int64_t m = int_arg(c, mi, 0);
        if (m < 0 || m > 2) {
            return RL_E_ARGS;
        }
        mask = (int)m;
    }
    uint64_t bh = mul(d.b, d.hq, ov);
    uint64_t pairs = mul(bh, attn_pairs(d.sq, d.sk, mask, ov), ov);
    /* Forward: S = Q K^T (2*dq per pair), O = P V (2*dv per pair). Backward: S recomputed (dq), dP = dO V^T (dv),
     * dV = P^T dO (dv), dQ = dS K (dq), dK = dS^T Q (dq). */
    uint64_t per_pair = backward ? add(mul(3, d.dq, ov), mul(2, d.dv, ov), ov) : add(d.dq, d.dv, ov);
    r->matrix = mul(mul(2, pairs, ov), per_pair, ov);
    /* Softmax on the score matrix: scale, running max, subtract, sum (4 vector FLOPs) and one exp per pair;
     * forward also normalises the output rows (one division per output element). */
    r->vector = mul(4, pairs, ov);
    r->special = pairs;
    if (!backward) {
        r->vector = add(r->vector, mul(mul(bh, d.sq, ov), d.dv, ov), ov);
    }
    if (op->flags & RL_OPF_FLOP_COUNTER) {
        /* FlopCounterMode: full (unmasked) score matrix, shapes read as (b, h, s, d) unless it transposes. */
        attn_dims f;
        int fb = op->param[RL_P_FLOP_COUNTER_BSHD] != 0;
        f.b = u(q->size[0]);
        f.hq = u(q->size[fb ? 2 : 1]);
        f.sq = u(q->size[fb ? 1 : 2]);
        f.dq = u(q->size[3]);
        f.sk = u(k->size[fb ? 1 : 2]);
        f.dv = u(v->size[3]);
        uint64_t fp = mul(mul(mul(f.b, f.hq, ov), f.sq, ov), f.sk, ov);
        uint64_t fpp = backward ? add(mul(3, f.dq, ov), mul(2, f.dv, ov), ov) : add(f.dq, f.dv, ov);
        r->flop_counter = mul(mul(2, fp, ov), fpp, ov);
    }
    generic_bytes(op, c, r, ov);
    r->dtype = q->dtype;
    return RL_OK;
}

static int cost_attn(const rl_op *op, const rl_call *c, rl_cost *r, int *ov) { return attention(op, c, r, ov, 0); }

static int cost_attn_bwd(const rl_op *op, const rl_call *c, rl_cost *r, int *ov) { return attention(op, c, r, ov, 1); }

/* ---- the rest ------------------------------------------------------------------------------------------- */

static int cost_gather(const rl_op *op, const rl_call *c, rl_cost *r, int *ov) {
    const rl_tensor *src = first_tensor(c);
    const rl_tensor *out = first_out(c);
    if (!src || !out) {
        return RL_E_ARGS;
    }
    for (int i = 1; i < c->nargs; i++) {
        if (!is_set(op->noread_mask, i)) {
            r->bytes_read = add(r->bytes_read, arg_touched_bytes(c, i, ov), ov);
        }
    }
    r->bytes_read = add(r->bytes_read, mul(rl_numel(out, ov), rl_dtype_itemsize(src->dtype), ov), ov);
    for (int i = 0; i < c->nouts; i++) {
        r->bytes_written = add(r->bytes_written, nbytes(&c->outs[i], ov), ov);
    }
    r->dtype = src->dtype;
    return RL_OK;
}

/* 0 when the int-list argument i (absent: accepted) has an entry below `lo`, else 1. */
static int intlist_at_least(const rl_call *c, int i, int64_t lo) {
    const rl_arg *a = arg(c, i);
    if (a->type == RL_ARG_INT) {
        return a->i >= lo;
    }
    if (a->type == RL_ARG_INTLIST) {
        for (int k = 0; k < a->count; k++) {
            if (c->ints[a->first + k] < lo) {
                return 0;
            }
        }
    }
    return 1;
}

static int cost_pool(const rl_op *op, const rl_call *c, rl_cost *r, int *ov) {
    uint64_t sp = count_param(op, RL_P_SPATIAL);
    int spatial = sp <= RL_MAX_DIMS ? (int)sp : 0, ki = pos_param(op, RL_P_KERNEL_SIZE);
    int si = pos_param(op, RL_P_STRIDE), pi = pos_param(op, RL_P_PADDING);
    const rl_arg *ks = arg(c, ki);
    const rl_tensor *out = first_out(c);
    if (ks->type != RL_ARG_INTLIST || ks->count < 1 || (ks->count != 1 && ks->count < spatial) || !out ||
        spatial < 1) {
        return RL_E_ARGS;
    }
    if (!intlist_at_least(c, ki, 1) || (si >= 0 && !intlist_at_least(c, si, 1)) ||
        (pi >= 0 && !intlist_at_least(c, pi, 0))) {
        return RL_E_VALUE;
    }
    uint64_t taps = 1;
    for (int s = 0; s < spatial; s++) {
        taps = mul(taps, u(c->ints[ks->first + (ks->count == 1 ? 0 : s)]), ov);
    }
    uint64_t in = arg_numel(c, 0, ov), o = rl_numel(out, ov);
    uint64_t windows = in < o ? in : o;
    r->vector = mul(mul(windows, taps, ov), count_param(op, RL_P_FLOPS), ov);
    generic_bytes(op, c, r, ov);
    r->dtype = result_dtype(op, c);
    return RL_OK;
}

static int cost_nll(const rl_op *op, const rl_call *c, rl_cost *r, int *ov) {
    int ti = pos_param(op, RL_P_TARGET);
    const rl_tensor *target = tensor_arg(c, ti), *self = tensor_arg(c, 0);
    if (!target || !self) {
        return RL_E_ARGS;
    }
    uint64_t n = rl_numel(target, ov);
    r->vector = mul(n, count_param(op, RL_P_PER_TARGET), ov);
    if (ti == 1) { /* forward: the input is gathered at the targets */
        r->bytes_read = add(touched_bytes(target, ov), mul(n, rl_dtype_itemsize(self->dtype), ov), ov);
        for (int i = 2; i < c->nargs; i++) {
            r->bytes_read = add(r->bytes_read, arg_touched_bytes(c, i, ov), ov);
        }
        for (int i = 0; i < c->nouts; i++) {
            r->bytes_written = add(r->bytes_written, nbytes(&c->outs[i], ov), ov);
        }
        r->dtype = self->dtype;
    } else {
        generic_bytes(op, c, r, ov);
        r->dtype = result_dtype(op, c);
    }
    return RL_OK;
}

/* _native_multi_head_attention (the fused inference path of nn.MultiheadAttention): q (B, Sq, E), k and v (B, Sk, E),
 * H heads of E/H. Products: Q, K, V projections (2*B*S*E*E each), QK^T and PV (2*B*H*Sq*Sk*(E/H) each), the output
 * projection (2*B*Sq*E*E). Vector: the four bias adds and the softmax (4 per score + 1 exp). */
static int cost_mha(const rl_op *op, const rl_call *c, rl_cost *r, int *ov) {
    const rl_tensor *q = tensor_arg(c, 0), *k = tensor_arg(c, 1);
    int64_t e = int_arg(c, pos_param(op, RL_P_EMBED_DIM), -1), h = int_arg(c, pos_param(op, RL_P_NUM_HEADS), -1);
    if (!q || !k || q->ndim != 3 || k->ndim != 3 || e <= 0 || h <= 0 || e % h != 0) {
        return RL_E_ARGS;
    }
    uint64_t b = u(q->size[0]), sq = u(q->size[1]), sk = u(k->size[1]), E = u(e), H = u(h);
    if (u(q->size[2]) != E || u(k->size[2]) != E || u(k->size[0]) != b) {
        return RL_E_SHAPE;
    }
    uint64_t proj = add(mul(sq, 2, ov), mul(sk, 2, ov), ov);                 /* Q and out over Sq, K and V over Sk */
    uint64_t m = mul(mul(mul(2, b, ov), proj, ov), mul(E, E, ov), ov);
    uint64_t pairs = mul(mul(mul(b, H, ov), sq, ov), sk, ov);
    m = add(m, mul(mul(2, pairs, ov), mul(2, E / H, ov), ov), ov);
    r->matrix = m;
    r->vector = add(mul(mul(b, proj, ov), E, ov), mul(4, pairs, ov), ov);
    r->special = pairs;
    generic_bytes(op, c, r, ov);
    r->dtype = q->dtype;
    return RL_OK;
}

/* Every tensor the call refers to has 0..RL_MAX_DIMS dimensions and non-negative sizes (an absent output has
 * ndim -1); argument descriptors are well-formed. */
static int valid_tensor(const rl_tensor *t, int absent_ok) {
    if (t->ndim < (absent_ok ? -1 : 0) || t->ndim > RL_MAX_DIMS) {
        return 0;
    }
    for (int d = 0; d < t->ndim; d++) {
        if (t->size[d] < 0) {
            return 0;
        }
    }
    return 1;
}

static int validate_call(const rl_call *c) {
    if (c->nargs < 0 || c->nargs > RL_MAX_ARGS || c->nouts < 0 || (c->nouts > 0 && !c->outs)) {
        return RL_E_ARGS;
    }
    for (int i = 0; i < c->nargs; i++) {
        const rl_arg *a = &c->args[i];
        if (a->type == RL_ARG_TENSOR || a->type == RL_ARG_TENSORLIST || a->type == RL_ARG_INTLIST ||
            a->type == RL_ARG_BOOLLIST) {
            if (a->first < 0 || a->count < 0) {
                return RL_E_ARGS;
            }
        }
        if (a->type == RL_ARG_TENSOR || a->type == RL_ARG_TENSORLIST) {
            if (a->count > 0 && !c->tensors) {
                return RL_E_ARGS;
            }
            for (int k = 0; k < a->count; k++) {
                if (!valid_tensor(&c->tensors[a->first + k], 0)) {
                    return RL_E_DIMS;
                }
            }
        } else if ((a->type == RL_ARG_INTLIST || a->type == RL_ARG_BOOLLIST) && a->count > 0 && !c->ints) {
            return RL_E_ARGS;
        }
    }
    for (int i = 0; i < c->nouts; i++) {
        if (!valid_tensor(&c->outs[i], 1)) {
            return RL_E_DIMS;
        }
    }
    return RL_OK;
}

/* ---- the kinds without a section of their own -------------------------------------------------------------- */

static int cost_zero(const rl_op *op, const rl_call *c, rl_cost *r, int *ov) {
    (void)op;
    (void)ov;
    r->dtype = input_dtype(c);
    return RL_OK;
}

static int cost_copy(const rl_op *op, const rl_call *c, rl_cost *r, int *ov) {
    generic_bytes(op, c, r, ov);
    r->dtype = result_dtype(op, c);
    return RL_OK;
}

/* FILL and EWISE: flops / special per element of the result. */
static int cost_ewise(const rl_op *op, const rl_call *c, rl_cost *r, int *ov) {
    uint64_t flops = count_param(op, RL_P_FLOPS), special = count_param(op, RL_P_SPECIAL);
    /* no work per element: no element count, so a count that would overflow is not refused for nothing */
    uint64_t n = (flops || special) ? result_numel(op, c, ov) : 0;
    r->vector = mul(n, flops, ov);
    r->special = mul(n, special, ov);
    return cost_copy(op, c, r, ov);
}

/* FFT: the conventional count of a fast Fourier transform, 5 N log2 N real FLOPs per complex transform of N points
 * and half that when one side is real (r2c, c2r), for every signal the transform covers: N is the product of the
 * transformed dimensions' sizes on the full side (the real tensor of a real transform; the half spectrum is
 * smaller), signals = numel / N. A normalized transform (normalization != 0) adds one multiply per real component
 * of the result. Counted as vector FLOPs in the real dtype of the complex side (complex64 work is float32 work). */
/* log2 of a positive integer without libm (the cost model links against libc only): the integer part from the
 * highest set bit, the fraction bit by bit from repeated squaring of the mantissa in [1, 2). Exact for powers of
 * two, within a few ulps otherwise. */
static double log2_u64(uint64_t v) {
    int e = 0;
    while (e < 63 && (v >> (e + 1)) != 0) {
        e++;
    }
    double m = (double)v / (double)(UINT64_C(1) << e), frac = 0.0, bit = 0.5;
    for (int i = 0; i < 53 && m != 1.0; i++, bit *= 0.5) {
        m *= m;
        if (m >= 2.0) {
            m *= 0.5;
            frac += bit;
        }
    }
    return (double)e + frac;
}

static int is_complex(int dt) { return dt == RL_DT_COMPLEX64 || dt == RL_DT_COMPLEX128 || dt == RL_DT_COMPLEX32; }

static int cost_fft(const rl_op *op, const rl_call *c, rl_cost *r, int *ov) {
    const rl_tensor *in = first_tensor(c), *out = first_out(c);
    const rl_arg *dims = arg(c, pos_param(op, RL_P_DIM));
    if (!in || !out || (dims->type != RL_ARG_INTLIST && dims->type != RL_ARG_INT)) {
        return RL_E_ARGS;
    }
    int cin = is_complex(in->dtype), cout = is_complex(out->dtype);
    const rl_tensor *full = !cin ? in : (!cout ? out : in);
    int nd = dims->type == RL_ARG_INT ? 1 : dims->count;
    if ((!cin && !cout) || nd < 1 || full->ndim < 1 || full->ndim > RL_MAX_DIMS) {
        return RL_E_ARGS;
    }
    uint64_t n = 1;
    uint32_t seen = 0;
    double log2n = 0.0;
    for (int k = 0; k < nd; k++) {
        int64_t d = dims->type == RL_ARG_INT ? dims->i : c->ints[dims->first + k];
        d = d < 0 ? d + full->ndim : d;
        if (d < 0 || d >= full->ndim || (seen >> d) & 1u) {
            return RL_E_SHAPE;
        }
        seen |= 1u << d;
        int64_t len = full->size[d];
        n = mul(n, len > 0 ? (uint64_t)len : 0, ov);
        log2n += len > 1 ? log2_u64((uint64_t)len) : 0.0;
    }
    uint64_t numel = rl_numel(full, ov);
    if (n > 0 && numel > 0) {
        double f = (double)(numel / n) * (double)n * log2n * (cin && cout ? 5.0 : 2.5);
        if (f >= 18446744073709551616.0) { /* 2^64 */
            *ov = 1;
        } else {
            r->vector = (uint64_t)(f + 0.5);
        }
    }
    if (int_arg(c, pos_param(op, RL_P_NORMALIZATION), 0) != 0) {
        r->vector = add(r->vector, mul(rl_numel(out, ov), cout ? 2 : 1, ov), ov);
    }
    generic_bytes(op, c, r, ov);
    int complex_side = cin ? in->dtype : out->dtype;
    r->dtype = complex_side == RL_DT_COMPLEX128 ? RL_DT_FLOAT64
                                                : (complex_side == RL_DT_COMPLEX64 ? RL_DT_FLOAT32 : RL_DT_FLOAT16);
    return RL_OK;
}

/* EWISE_IN and FOREACH: flops / special per element of argument `of`, else of the first tensor (list) argument. */
static int cost_ewise_in(const rl_op *op, const rl_call *c, rl_cost *r, int *ov) {
    int first = pos_param(op, RL_P_OF);
    if (first >= 0 && !(arg(c, first)->type == RL_ARG_TENSOR || arg(c, first)->type == RL_ARG_TENSORLIST)) {
        return RL_E_ARGS;
    }
    for (int i = 0; i < c->nargs && first < 0; i++) {
        if (c->args[i].type == RL_ARG_TENSOR || c->args[i].type == RL_ARG_TENSORLIST) {
            first = i;
        }
    }
    uint64_t flops = count_param(op, RL_P_FLOPS), special = count_param(op, RL_P_SPECIAL);
    uint64_t n = first >= 0 && (flops || special) ? arg_numel(c, first, ov) : 0; /* as in cost_ewise */
    r->vector = mul(n, flops, ov);
    r->special = mul(n, special, ov);
    generic_bytes(op, c, r, ov);
    r->dtype = op->kind == RL_K_FOREACH ? input_dtype(c) : result_dtype(op, c);
    if (op->kind == RL_K_EWISE_IN && first >= 0 && arg(c, first)->count > 0) {
        r->dtype = c->tensors[arg(c, first)->first].dtype;
    }
    return RL_OK;
}

int rl_cost_eval(const rl_op *op, const rl_call *c, rl_cost *r) {
    int ov = 0;
    memset(r, 0, sizeof(*r));
    if (op->kind < 0 || op->kind >= RL_K_COUNT) {
        return RL_E_KIND; /* the op is checked before its call */
    }
    int st = validate_call(c);
    if (st != RL_OK) {
        return st;
    }
    st = rl_kinds[op->kind].formula(op, c, r, &ov);
    if (st != RL_OK) {
        return st;
    }
    return ov ? RL_E_OVERFLOW : RL_OK;
}
