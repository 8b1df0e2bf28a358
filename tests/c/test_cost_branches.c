/* Branch-by-branch unit tests of the pure-C cost model (csrc/cost.c): every formula and every argument check, with
 * shapes chosen so that no two dimensions are equal (a swapped index changes the count). Each expected value is
 * written as the arithmetic that derives it. Built with sanitizers and -Werror by tests/test_cost_branches.py. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "cost.h"

/* A contiguous tensor: T(RL_DT_FLOAT32, 2, 3) is a (2, 3) float32 tensor. */
#define NDIMS(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define T(dt, ...) tensor((dt), NDIMS(__VA_ARGS__), (int64_t[]){__VA_ARGS__})

static rl_tensor scalar(int dtype) {
    rl_tensor t;
    memset(&t, 0, sizeof(t));
    t.dtype = dtype;
    return t; /* ndim 0: one element */
}

static rl_tensor absent_out(void) {
    rl_tensor t;
    memset(&t, 0, sizeof(t));
    t.ndim = -1;
    return t;
}

/* A call under construction: arguments are appended in order; the arrays live in the builder. */
typedef struct {
    rl_call c;
    rl_tensor t[24];
    int nt;
    int64_t ints[32];
    int ni;
    rl_tensor o[4];
} builder;

static void init(builder *b) {
    memset(b, 0, sizeof(*b));
    b->c.tensors = b->t;
    b->c.ints = b->ints;
    b->c.outs = b->o;
}

static rl_arg *next_arg(builder *b, int type) {
    rl_arg *a = &b->c.args[b->c.nargs++];
    a->type = type;
    return a;
}

static void a_tensor(builder *b, rl_tensor t) {
    rl_arg *a = next_arg(b, RL_ARG_TENSOR);
    a->first = b->nt;
    a->count = 1;
    b->t[b->nt++] = t;
}

static void a_list(builder *b, int n, const rl_tensor *ts) {
    rl_arg *a = next_arg(b, RL_ARG_TENSORLIST);
    a->first = b->nt;
    a->count = n;
    for (int i = 0; i < n; i++) {
        b->t[b->nt++] = ts[i];
    }
}

static void a_int(builder *b, int64_t v) { next_arg(b, RL_ARG_INT)->i = v; }
static void a_bool(builder *b, int v) { next_arg(b, RL_ARG_BOOL)->i = v; }
static void a_float(builder *b, double v) { next_arg(b, RL_ARG_FLOAT)->f = v; }
static void a_none(builder *b) { next_arg(b, RL_ARG_NONE); }

static void a_ints(builder *b, int type, int n, const int64_t *v) {
    rl_arg *a = next_arg(b, type);
    a->first = b->ni;
    a->count = n;
    for (int i = 0; i < n; i++) {
        b->ints[b->ni++] = v[i];
    }
}

static void out(builder *b, rl_tensor t) { b->o[b->c.nouts++] = t; }

/* Fill the unused slots after the last tensor, output and integer with values that would change every count if
 * they were read: a call never owns more than it says. */
static void poison(builder *b) {
    rl_tensor big = T(RL_DT_FLOAT64, 1000003);
    for (int i = b->nt; i < (int)(sizeof(b->t) / sizeof(b->t[0])); i++) {
        b->t[i] = big;
    }
    for (int i = b->c.nouts; i < (int)(sizeof(b->o) / sizeof(b->o[0])); i++) {
        b->o[i] = big;
    }
    for (int i = b->ni; i < (int)(sizeof(b->ints) / sizeof(b->ints[0])); i++) {
        b->ints[i] = 7;
    }
}

static int eval(const rl_op *op, builder *b, rl_cost *r) {
    poison(b);
    return rl_cost_eval(op, &b->c, r);
}

#define CHECK_COST(r, m, v, s, br, bw)                                                                               \
    do {                                                                                                             \
        CHECK_EQ((r).matrix, (m));                                                                                   \
        CHECK_EQ((r).vector, (v));                                                                                   \
        CHECK_EQ((r).special, (s));                                                                                  \
        CHECK_EQ((r).bytes_read, (br));                                                                              \
        CHECK_EQ((r).bytes_written, (bw));                                                                           \
    } while (0)

/* An op of `kind` with parameters set through rl_op_set, each of which must be accepted:
 * OP(RL_K_EWISE, RL_P_FLOPS, 3, RL_P_SPECIAL, 2). */
#define OP(...) make_op(NDIMS(__VA_ARGS__), (int64_t[]){__VA_ARGS__})

static rl_op make_op(int count, const int64_t *v) {
    rl_op op;
    memset(&op, 0, sizeof(op));
    op.kind = (int)v[0];
    int kind = op.kind, n = (count - 1) / 2;
    const int64_t *pv = v + 1;
    for (int i = 0; i < n; i++) {
        int st = rl_op_set(&op, (int)pv[2 * i], pv[2 * i + 1]);
        if (st != RL_OK) {
            fprintf(stderr, "rl_op_set(kind %d, parameter %lld, %lld) = %d\n", kind, (long long)pv[2 * i],
                    (long long)pv[2 * i + 1], st);
            failures++;
        }
    }
    return op;
}

/* ---- tables and element counts ------------------------------------------------------------------------------- */

static void test_dtype_table(void) {
    CHECK_EQ(rl_dtype_itemsize(RL_DT_UNKNOWN), 0);
    CHECK_EQ(rl_dtype_itemsize(RL_DT_FLOAT64), 8); /* the first entry after unknown */
    CHECK_EQ(rl_dtype_itemsize(RL_DT_BOOL), 1);    /* the last entry */
    CHECK_EQ(rl_dtype_itemsize(RL_DT_COUNT), 0);
    CHECK_EQ(rl_dtype_itemsize(-1), 0);
    CHECK_STR(rl_dtype_name(RL_DT_UNKNOWN), "unknown");
    CHECK_STR(rl_dtype_name(RL_DT_FLOAT64), "float64");
    CHECK_STR(rl_dtype_name(RL_DT_BOOL), "bool");
    CHECK_STR(rl_dtype_name(RL_DT_COUNT), "unknown");
    CHECK_STR(rl_dtype_name(-1), "unknown");
    CHECK_STR(rl_status_str(RL_OK), "ok");
    CHECK_STR(rl_status_str(RL_E_KIND), "unknown cost kind");
    CHECK_STR(rl_status_str(99), "unknown status");
}

static void test_numel_and_touched(void) {
    int ov = 0;
    rl_tensor t = T(RL_DT_FLOAT32, 2, 3, 5);
    CHECK_EQ(rl_numel(&t, &ov), 2 * 3 * 5);
    CHECK_EQ(rl_touched(&t, &ov), 2 * 3 * 5);
    t.stride[1] = 0; /* broadcast along the middle dimension: 2 * 5 distinct elements */
    CHECK_EQ(rl_numel(&t, &ov), 30);
    CHECK_EQ(rl_touched(&t, &ov), 2 * 5);
    t.stride[0] = 0;
    t.stride[2] = 0;
    CHECK_EQ(rl_touched(&t, &ov), 1); /* fully broadcast: one element */
    rl_tensor s = scalar(RL_DT_FLOAT32);
    CHECK_EQ(rl_numel(&s, &ov), 1);
    CHECK_EQ(rl_touched(&s, &ov), 1);
    rl_tensor a = absent_out();
    CHECK_EQ(rl_numel(&a, &ov), 0);
    CHECK_EQ(rl_touched(&a, &ov), 0);
    rl_tensor z = T(RL_DT_FLOAT32, 4, 0, 3);
    CHECK_EQ(rl_numel(&z, &ov), 0);
    CHECK_EQ(rl_touched(&z, &ov), 0);
    z.stride[1] = 0; /* a broadcast dimension of size 0: still nothing */
    CHECK_EQ(rl_touched(&z, &ov), 0);
    rl_tensor neg = T(RL_DT_FLOAT32, 4, -2);
    CHECK_EQ(rl_numel(&neg, &ov), 0);
    CHECK_EQ(rl_touched(&neg, &ov), 0);
    CHECK_EQ(ov, 0);
    rl_tensor big = T(RL_DT_FLOAT32, (int64_t)1 << 32, (int64_t)1 << 31);
    CHECK_EQ(rl_numel(&big, &ov), (uint64_t)1 << 63); /* fits */
    CHECK_EQ(ov, 0);
    big.size[1] = (int64_t)1 << 32;
    rl_numel(&big, &ov);
    CHECK_EQ(ov, 1); /* 2^64 does not */
    ov = 0;
    rl_touched(&big, &ov);
    CHECK_EQ(ov, 1);
}

/* ---- copies, fills, element-wise ---------------------------------------------------------------------------- */

static void test_copy_and_sum_overflow(void) {
    builder b;
    rl_cost r;
    rl_op op = {.kind = RL_K_COPY};
    init(&b);
    int64_t h = (int64_t)1 << 62;
    a_tensor(&b, T(RL_DT_UINT8, h));
    a_tensor(&b, T(RL_DT_UINT8, h));
    out(&b, T(RL_DT_UINT8, 2));
    CHECK_EQ(eval(&op, &b, &r), RL_OK); /* 2^62 + 2^62 bytes read: fits */
    CHECK_COST(r, 0, 0, 0, (uint64_t)1 << 63, 2);
    CHECK_EQ(r.dtype, RL_DT_UINT8);
    b.t[0] = T(RL_DT_UINT8, 2, h);
    b.t[1] = T(RL_DT_UINT8, 2, h); /* 2^63 bytes each: each fits, the sum does not */
    CHECK_EQ(eval(&op, &b, &r), RL_E_OVERFLOW);
}

/* No work per element: the element count is not taken, so tensors whose element counts sum past 2^64 but are not
 * read (noread) do not make the call overflow for counts that are all zero (a libFuzzer find). */
static void test_zero_per_element_work_does_not_overflow(void) {
    builder b;
    rl_cost r;
    int64_t big = ((int64_t)1 << 62) + 1;
    rl_tensor ts[4] = {T(RL_DT_FLOAT32, big), T(RL_DT_FLOAT32, big), T(RL_DT_FLOAT32, big), T(RL_DT_FLOAT32, big)};
    rl_op in = OP(RL_K_EWISE_IN);
    in.noread_mask = ~(uint64_t)0;
    init(&b);
    a_list(&b, 4, ts);
    out(&b, T(RL_DT_FLOAT32));
    CHECK_EQ(eval(&in, &b, &r), RL_OK);
    CHECK_COST(r, 0, 0, 0, 0, 4); /* the 0-dim float32 result written */
    in.param[RL_P_FLOPS] = 1; /* with work per element, 4 x (2^62 + 1) elements do not fit */
    CHECK_EQ(eval(&in, &b, &r), RL_E_OVERFLOW);
    rl_op ew = OP(RL_K_EWISE);
    ew.noread_mask = ~(uint64_t)0;
    init(&b);
    a_tensor(&b, T(RL_DT_UINT8, 4, big));
    out(&b, T(RL_DT_UINT8));
    CHECK_EQ(eval(&ew, &b, &r), RL_OK);
    CHECK_COST(r, 0, 0, 0, 0, 1);
}

static void test_ewise(void) {
    builder b;
    rl_cost r;
    /* (2,3) fp32 + (2,3) fp16 -> (2,3) fp32, 3 FLOPs and 2 special ops per element */
    rl_op op = OP(RL_K_EWISE, RL_P_FLOPS, 3, RL_P_SPECIAL, 2);
    init(&b);
    a_tensor(&b, T(RL_DT_FLOAT16, 2, 3));
    a_tensor(&b, T(RL_DT_FLOAT32, 2, 3));
    out(&b, T(RL_DT_FLOAT32, 2, 3));
    b.c.args[2].type = RL_ARG_TENSOR; /* beyond nargs: never read */
    b.c.args[2].first = 0;
    b.c.args[2].count = 1;
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_COST(r, 0, 6 * 3, 6 * 2, 6 * 2 + 6 * 4, 6 * 4);
    CHECK_EQ(r.dtype, RL_DT_FLOAT32); /* the result's dtype, not the first input's */
    CHECK_EQ(r.flop_counter, 0);
    /* negative per-element costs count as 0 */
    rl_op neg = OP(RL_K_EWISE);
    CHECK_EQ(rl_op_set(&neg, RL_P_FLOPS, -3), RL_E_VALUE); /* refused; a negative value stored anyway counts as 0 */
    neg.param[RL_P_FLOPS] = -3;
    neg.param[RL_P_SPECIAL] = -1;
    CHECK_EQ(eval(&neg, &b, &r), RL_OK);
    CHECK_EQ(r.vector + r.special, 0);
    /* argument 0 not read */
    rl_op noread = OP(RL_K_EWISE, RL_P_FLOPS, 1);
    noread.noread_mask = 1;
    CHECK_EQ(eval(&noread, &b, &r), RL_OK);
    CHECK_EQ(r.bytes_read, 6 * 4);
    /* in place into argument 1: the result is argument 1, written once, outputs not counted again */
    rl_op inplace = OP(RL_K_EWISE, RL_P_FLOPS, 1);
    inplace.write_mask = 2;
    b.t[1] = T(RL_DT_FLOAT64, 7);
    b.t[0] = T(RL_DT_FLOAT16, 7);
    b.o[0] = T(RL_DT_FLOAT32, 5);
    CHECK_EQ(eval(&inplace, &b, &r), RL_OK);
    CHECK_COST(r, 0, 7, 0, 7 * 2 + 7 * 8, 7 * 8);
    CHECK_EQ(r.dtype, RL_DT_FLOAT64);
    /* in place into argument 0 (fp64 (7)), output fp32: the result is argument 0 */
    rl_op inplace0 = OP(RL_K_EWISE, RL_P_FLOPS, 1);
    inplace0.write_mask = 1;
    b.t[0] = T(RL_DT_FLOAT64, 7);
    b.t[1] = T(RL_DT_FLOAT16, 7);
    CHECK_EQ(eval(&inplace0, &b, &r), RL_OK);
    CHECK_COST(r, 0, 7, 0, 7 * 8 + 7 * 2, 7 * 8);
    CHECK_EQ(r.dtype, RL_DT_FLOAT64);
    /* a written position beyond the arguments passed: no argument is written in place; the result is the output */
    rl_op beyond = OP(RL_K_EWISE, RL_P_FLOPS, 1);
    beyond.write_mask = 2;
    b.c.nargs = 1;
    CHECK_EQ(eval(&beyond, &b, &r), RL_OK);
    CHECK_EQ(r.vector, 5);
    CHECK_EQ(r.dtype, RL_DT_FLOAT32);
    b.c.nargs = 2;
    /* in place into a tensor list (fp16 (4)), output fp32: the result is the list */
    builder wl;
    init(&wl);
    rl_tensor one[1] = {T(RL_DT_FLOAT16, 4)};
    a_list(&wl, 1, one);
    out(&wl, T(RL_DT_FLOAT32, 4));
    rl_op inplace_list = OP(RL_K_EWISE, RL_P_FLOPS, 1);
    inplace_list.write_mask = 1;
    CHECK_EQ(eval(&inplace_list, &wl, &r), RL_OK);
    CHECK_COST(r, 0, 4, 0, 4 * 2, 4 * 2);
    CHECK_EQ(r.dtype, RL_DT_FLOAT16);
    /* in place into an empty tensor list: the dtype comes from the output */
    init(&b);
    a_list(&b, 0, NULL);
    a_tensor(&b, T(RL_DT_FLOAT16, 3)); /* the empty list's `first` points at this tensor, which it does not hold */
    out(&b, T(RL_DT_BFLOAT16, 3));
    rl_op into_empty = OP(RL_K_EWISE, RL_P_FLOPS, 1);
    into_empty.write_mask = 1;
    CHECK_EQ(eval(&into_empty, &b, &r), RL_OK);
    CHECK_EQ(r.dtype, RL_DT_BFLOAT16);
    CHECK_EQ(r.vector, 0); /* the result (the empty list) has no elements */
    /* scalar output (ndim 0): one element; an absent first output is skipped */
    init(&b);
    a_tensor(&b, scalar(RL_DT_FLOAT64));
    out(&b, absent_out());
    out(&b, scalar(RL_DT_FLOAT16));
    rl_op ew = OP(RL_K_EWISE, RL_P_FLOPS, 5, RL_P_SPECIAL, 1);
    CHECK_EQ(eval(&ew, &b, &r), RL_OK);
    CHECK_COST(r, 0, 5, 1, 8, 2);
    CHECK_EQ(r.dtype, RL_DT_FLOAT16);
    /* no outputs, no in-place argument: nothing to count, the dtype is the first tensor's */
    b.c.nouts = 0;
    CHECK_EQ(eval(&ew, &b, &r), RL_OK);
    CHECK_COST(r, 0, 0, 0, 8, 0);
    CHECK_EQ(r.dtype, RL_DT_FLOAT64);
    /* nothing at all */
    init(&b);
    CHECK_EQ(eval(&ew, &b, &r), RL_OK);
    CHECK_EQ(r.dtype, RL_DT_UNKNOWN);
}

static void test_fill_zero_and_call_limits(void) {
    builder b;
    rl_cost r;
    rl_op fill = OP(RL_K_FILL, RL_P_SPECIAL, 1); /* a random draw per element */
    init(&b);
    a_int(&b, 5);
    out(&b, T(RL_DT_FLOAT32, 5, 7));
    CHECK_EQ(eval(&fill, &b, &r), RL_OK);
    CHECK_COST(r, 0, 0, 35, 0, 35 * 4);
    /* a view: nothing counted, the dtype is the first tensor argument's, else the first output's */
    rl_op zero = {.kind = RL_K_ZERO};
    CHECK_EQ(eval(&zero, &b, &r), RL_OK);
    CHECK_COST(r, 0, 0, 0, 0, 0);
    CHECK_EQ(r.dtype, RL_DT_FLOAT32);
    a_tensor(&b, T(RL_DT_INT16, 4));
    CHECK_EQ(eval(&zero, &b, &r), RL_OK);
    CHECK_EQ(r.dtype, RL_DT_INT16);
    b.c.nouts = 0;
    b.c.nargs = 1;
    CHECK_EQ(eval(&zero, &b, &r), RL_OK);
    CHECK_EQ(r.dtype, RL_DT_UNKNOWN);
    /* the first tensor comes after an int list and an empty tensor list whose `first` indices point at another
     * tensor (fp64) that no argument holds */
    builder l;
    init(&l);
    const int64_t two[2] = {2, 3};
    a_ints(&l, RL_ARG_INTLIST, 2, two);
    a_list(&l, 0, NULL);
    a_tensor(&l, T(RL_DT_INT16, 4));
    l.t[1] = T(RL_DT_FLOAT64, 4);
    l.nt = 2;
    l.c.args[0].first = 1;
    l.c.args[1].first = 1;
    CHECK_EQ(eval(&zero, &l, &r), RL_OK);
    CHECK_EQ(r.dtype, RL_DT_INT16);
    /* argument counts: 0 and RL_MAX_ARGS are fine, outside is an error */
    b.c.nargs = 0;
    CHECK_EQ(eval(&zero, &b, &r), RL_OK);
    b.c.nargs = RL_MAX_ARGS;
    CHECK_EQ(eval(&zero, &b, &r), RL_OK);
    b.c.nargs = RL_MAX_ARGS + 1;
    CHECK_EQ(eval(&zero, &b, &r), RL_E_ARGS);
    b.c.nargs = -1;
    CHECK_EQ(eval(&zero, &b, &r), RL_E_ARGS);
    b.c.nargs = 0;
    rl_op bad = {.kind = RL_K_COUNT};
    CHECK_EQ(eval(&bad, &b, &r), RL_E_KIND);
    bad.kind = -1;
    CHECK_EQ(eval(&bad, &b, &r), RL_E_KIND);
}

static void test_ewise_in_and_foreach(void) {
    builder b;
    rl_cost r;
    /* softmax-like: 4 FLOPs and 1 exp per element of the input (4,10) fp16, result fp32 */
    rl_op sm = OP(RL_K_EWISE_IN, RL_P_FLOPS, 4, RL_P_SPECIAL, 1);
    init(&b);
    a_int(&b, 1);
    a_tensor(&b, T(RL_DT_FLOAT16, 4, 10));
    a_tensor(&b, T(RL_DT_FLOAT32, 3));
    out(&b, T(RL_DT_FLOAT32, 4));
    CHECK_EQ(eval(&sm, &b, &r), RL_OK);
    CHECK_COST(r, 0, 40 * 4, 40, 40 * 2 + 3 * 4, 4 * 4); /* counts the first tensor argument (position 1) */
    CHECK_EQ(r.dtype, RL_DT_FLOAT16);                    /* the counted argument's dtype */
    /* the first tensor at position 0: its dtype, not the result's */
    builder z;
    init(&z);
    a_tensor(&z, T(RL_DT_BFLOAT16, 6));
    out(&z, T(RL_DT_FLOAT32, 1));
    CHECK_EQ(eval(&sm, &z, &r), RL_OK);
    CHECK_EQ(r.vector, 6 * 4);
    CHECK_EQ(r.dtype, RL_DT_BFLOAT16);
    /* counting the argument at position 2 (`of`) */
    rl_op of = OP(RL_K_EWISE_IN, RL_P_FLOPS, 1, RL_P_OF, 2);
    CHECK_EQ(eval(&of, &b, &r), RL_OK);
    CHECK_EQ(r.vector, 3);
    CHECK_EQ(r.dtype, RL_DT_FLOAT32);
    /* position 0 is an int, not a tensor: an argument error */
    CHECK_EQ(rl_op_set(&of, RL_P_OF, 0), RL_OK);
    CHECK_EQ(eval(&of, &b, &r), RL_E_ARGS);
    /* a tensor list: all its elements */
    init(&b);
    rl_tensor l[2] = {T(RL_DT_FLOAT32, 10), T(RL_DT_FLOAT32, 5)};
    a_list(&b, 2, l);
    a_float(&b, 1.0);
    a_tensor(&b, T(RL_DT_FLOAT64, 100)); /* after the list: not part of it */
    rl_op fe = OP(RL_K_FOREACH, RL_P_FLOPS, 1);
    fe.write_mask = 1;
    CHECK_EQ(eval(&fe, &b, &r), RL_OK);
    CHECK_COST(r, 0, 10 + 5, 0, 15 * 4 + 100 * 8, 15 * 4);
    CHECK_EQ(r.dtype, RL_DT_FLOAT32);
    rl_op norm = OP(RL_K_EWISE_IN, RL_P_FLOPS, 2);
    CHECK_EQ(eval(&norm, &b, &r), RL_OK);
    CHECK_EQ(r.vector, 2 * 15);
    CHECK_EQ(r.dtype, RL_DT_FLOAT32); /* the list's first element */
    /* an empty list counts nothing; its dtype is not taken */
    init(&b);
    a_list(&b, 0, NULL);
    a_tensor(&b, T(RL_DT_INT8, 6)); /* where the empty list's `first` points */
    out(&b, T(RL_DT_INT32, 6));
    CHECK_EQ(eval(&norm, &b, &r), RL_OK);
    CHECK_EQ(r.vector, 0);
    CHECK_EQ(r.dtype, RL_DT_INT32);
    /* no tensor at all */
    init(&b);
    a_int(&b, 3);
    CHECK_EQ(eval(&norm, &b, &r), RL_OK);
    CHECK_EQ(r.vector, 0);
}

/* ---- matrix products ------------------------------------------------------------------------------------------ */

static void test_mm_family(void) {
    builder b;
    rl_cost r;
    /* mm (7,5) @ (5,3), no FlopCounterMode entry: flop_counter 0 */
    rl_op mm = {.kind = RL_K_MM};
    init(&b);
    a_tensor(&b, T(RL_DT_FLOAT32, 7, 5));
    a_tensor(&b, T(RL_DT_FLOAT32, 5, 3));
    out(&b, T(RL_DT_FLOAT32, 7, 3));
    CHECK_EQ(eval(&mm, &b, &r), RL_OK);
    CHECK_COST(r, 2 * 7 * 3 * 5, 0, 0, (35 + 15) * 4, 21 * 4);
    CHECK_EQ(r.flop_counter, 0);
    b.t[0] = T(RL_DT_FLOAT32, 7, 5, 1);
    CHECK_EQ(eval(&mm, &b, &r), RL_E_ARGS);
    b.t[0] = T(RL_DT_FLOAT32, 7, 5);
    b.c.nargs = 1; /* b missing */
    CHECK_EQ(eval(&mm, &b, &r), RL_E_ARGS);
    b.c.nargs = 2;
    b.c.args[0].type = RL_ARG_NONE; /* a missing */
    CHECK_EQ(eval(&mm, &b, &r), RL_E_ARGS);
    b.c.args[0].type = RL_ARG_TENSOR;
    b.t[0] = T(RL_DT_FLOAT32, 7, 5);
    b.t[1] = T(RL_DT_FLOAT32, 5);
    CHECK_EQ(eval(&mm, &b, &r), RL_E_ARGS);
    /* _scaled_mm(a, b, scale_a, scale_b): 2MNK + one dequantising multiply per output element */
    rl_op smm = {.kind = RL_K_SCALED_MM, .flags = RL_OPF_FLOP_COUNTER};
    init(&b);
    a_tensor(&b, T(RL_DT_FLOAT8_E4M3FN, 7, 5));
    a_tensor(&b, T(RL_DT_FLOAT8_E4M3FN, 5, 3));
    a_tensor(&b, scalar(RL_DT_FLOAT32));
    a_tensor(&b, scalar(RL_DT_FLOAT32));
    out(&b, T(RL_DT_BFLOAT16, 7, 3));
    CHECK_EQ(eval(&smm, &b, &r), RL_OK);
    CHECK_COST(r, 2 * 7 * 3 * 5, 7 * 3, 0, 35 + 15 + 4 + 4, 21 * 2);
    CHECK_EQ(r.flop_counter, 2 * 7 * 3 * 5);
    CHECK_EQ(r.dtype, RL_DT_FLOAT8_E4M3FN);
    smm.flags = 0;
    CHECK_EQ(eval(&smm, &b, &r), RL_OK);
    CHECK_EQ(r.flop_counter, 0);
    b.t[1].size[0] = 6;
    CHECK_EQ(eval(&smm, &b, &r), RL_E_SHAPE);
    init(&b);
    CHECK_EQ(eval(&smm, &b, &r), RL_E_ARGS);
    /* addmm(bias (3), a (7,5) bf16, b (5,3) fp16): 2MNK + M*N bias adds; the dtype of a */
    rl_op addmm = {.kind = RL_K_ADDMM, .flags = RL_OPF_FLOP_COUNTER};
    init(&b);
    a_tensor(&b, T(RL_DT_FLOAT32, 3));
    a_tensor(&b, T(RL_DT_BFLOAT16, 7, 5));
    a_tensor(&b, T(RL_DT_FLOAT16, 5, 3));
    out(&b, T(RL_DT_BFLOAT16, 7, 3));
    CHECK_EQ(eval(&addmm, &b, &r), RL_OK);
    CHECK_COST(r, 2 * 7 * 3 * 5, 7 * 3, 0, 3 * 4 + (35 + 15) * 2, 21 * 2);
    CHECK_EQ(r.flop_counter, 2 * 7 * 3 * 5);
    CHECK_EQ(r.dtype, RL_DT_BFLOAT16);
    addmm.flags = 0;
    CHECK_EQ(eval(&addmm, &b, &r), RL_OK);
    CHECK_EQ(r.flop_counter, 0);
    b.c.nargs = 1;
    CHECK_EQ(eval(&addmm, &b, &r), RL_E_ARGS); /* a and b missing: no dereference */
    /* bmm (4,7,5) @ (4,5,3) */
    rl_op bmm = {.kind = RL_K_BMM, .flags = RL_OPF_FLOP_COUNTER};
    init(&b);
    a_tensor(&b, T(RL_DT_FLOAT16, 4, 7, 5));
    a_tensor(&b, T(RL_DT_FLOAT16, 4, 5, 3));
    out(&b, T(RL_DT_FLOAT16, 4, 7, 3));
    CHECK_EQ(eval(&bmm, &b, &r), RL_OK);
    CHECK_COST(r, 2 * 4 * 7 * 3 * 5, 0, 0, (140 + 60) * 2, 84 * 2);
    CHECK_EQ(r.flop_counter, 2 * 4 * 7 * 3 * 5);
    CHECK_EQ(r.dtype, RL_DT_FLOAT16);
    bmm.flags = 0;
    CHECK_EQ(eval(&bmm, &b, &r), RL_OK);
    CHECK_EQ(r.flop_counter, 0);
    b.c.nargs = 1;
    CHECK_EQ(eval(&bmm, &b, &r), RL_E_ARGS);
    b.c.nargs = 2;
    b.c.args[0].type = RL_ARG_NONE;
    CHECK_EQ(eval(&bmm, &b, &r), RL_E_ARGS);
    b.c.args[0].type = RL_ARG_TENSOR;
    b.t[1].size[0] = 2; /* batch mismatch */
    CHECK_EQ(eval(&bmm, &b, &r), RL_E_SHAPE);
    b.t[1] = T(RL_DT_FLOAT16, 4, 6, 3); /* inner mismatch */
    CHECK_EQ(eval(&bmm, &b, &r), RL_E_SHAPE);
    b.t[1] = T(RL_DT_FLOAT16, 5, 3);
    CHECK_EQ(eval(&bmm, &b, &r), RL_E_ARGS);
    b.t[1] = T(RL_DT_FLOAT16, 4, 5, 3);
    b.t[0] = T(RL_DT_FLOAT16, 7, 5);
    CHECK_EQ(eval(&bmm, &b, &r), RL_E_ARGS);
    /* baddbmm(self (1,7,3) broadcast, a (4,7,5) fp64, b (4,5,3) fp32): 2BMNK + B*M*N adds; the dtype of a */
    rl_op baddbmm = {.kind = RL_K_BADDBMM};
    init(&b);
    a_tensor(&b, T(RL_DT_FLOAT32, 1, 7, 3));
    a_tensor(&b, T(RL_DT_FLOAT64, 4, 7, 5));
    a_tensor(&b, T(RL_DT_FLOAT32, 4, 5, 3));
    out(&b, T(RL_DT_FLOAT64, 4, 7, 3));
    CHECK_EQ(eval(&baddbmm, &b, &r), RL_OK);
    CHECK_COST(r, 2 * 4 * 7 * 3 * 5, 4 * 7 * 3, 0, 21 * 4 + 140 * 8 + 60 * 4, 84 * 8);
    CHECK_EQ(r.flop_counter, 0);
    CHECK_EQ(r.dtype, RL_DT_FLOAT64);
    b.t[2].size[1] = 6;
    CHECK_EQ(eval(&baddbmm, &b, &r), RL_E_SHAPE);
    b.c.nargs = 1;
    CHECK_EQ(eval(&baddbmm, &b, &r), RL_E_ARGS);
}

/* ---- convolution ---------------------------------------------------------------------------------------------- */

/* convolution(x (2,3,9,12), w (5,3,2,4), bias (5), stride, padding, dilation, transposed, output_padding, groups)
 * -> (2,5,8,9): 2 * N * HoWo * KhKw * Cout * Cin. With `tshapes` the shapes of a transposed convolution: w (3,5,2,4)
 * (C_in first) -> (2,5,10,15). `transposed` is the value of argument 6 only. */
static void conv_call(builder *b, int transposed, int with_bias, int tshapes) {
    init(b);
    a_tensor(b, T(RL_DT_FLOAT16, 2, 3, 9, 12));
    a_tensor(b, tshapes ? T(RL_DT_FLOAT32, 3, 5, 2, 4) : T(RL_DT_FLOAT32, 5, 3, 2, 4));
    if (with_bias) {
        a_tensor(b, T(RL_DT_FLOAT32, 5));
    } else {
        a_none(b);
    }
    int64_t ones[2] = {1, 1}, zeros[2] = {0, 0};
    a_ints(b, RL_ARG_INTLIST, 2, ones);
    a_ints(b, RL_ARG_INTLIST, 2, zeros);
    a_ints(b, RL_ARG_INTLIST, 2, ones);
    a_bool(b, transposed);
    a_ints(b, RL_ARG_INTLIST, 2, zeros);
    a_int(b, 1);
    out(b, tshapes ? T(RL_DT_FLOAT16, 2, 5, 10, 15) : T(RL_DT_FLOAT16, 2, 5, 8, 9));
}

static void test_conv(void) {
    builder b;
    rl_cost r;
    const uint64_t fwd = 2ull * 2 * (8 * 9) * (2 * 4) * 5 * 3;  /* spatial extent of the output */
    const uint64_t tr = 2ull * 2 * (9 * 12) * (2 * 4) * 5 * 3;  /* transposed: spatial extent of the input */
    const uint64_t rd = (2 * 3 * 9 * 12) * 2 + (5 * 3 * 2 * 4) * 4, wr = (2 * 5 * 8 * 9) * 2;
    const uint64_t wr_t = (2 * 5 * 10 * 15) * 2; /* the transposed convolution's larger output */
    rl_op conv = OP(RL_K_CONV, RL_P_TRANSPOSED, 6, RL_P_BIAS, 2);
    conv.flags = RL_OPF_FLOP_COUNTER;
    conv_call(&b, 0, 1, 0);
    CHECK_EQ(eval(&conv, &b, &r), RL_OK);
    CHECK_COST(r, fwd, 2 * 5 * 8 * 9, 0, rd + 5 * 4, wr); /* one bias add per output element */
    CHECK_EQ(r.flop_counter, fwd);
    CHECK_EQ(r.dtype, RL_DT_FLOAT16);
    conv_call(&b, 1, 0, 1);
    CHECK_EQ(eval(&conv, &b, &r), RL_OK);
    CHECK_COST(r, tr, 0, 0, rd, wr_t);
    CHECK_EQ(r.flop_counter, tr);
    /* transposed passed as an int */
    b.c.args[6].type = RL_ARG_INT;
    CHECK_EQ(eval(&conv, &b, &r), RL_OK);
    CHECK_EQ(r.matrix, tr);
    CHECK_EQ(r.flop_counter, tr);
    b.c.args[6].type = RL_ARG_BOOL;
    /* never transposed (no `transposed` parameter), whatever argument 6 says; FlopCounterMode still reads
     * argument 6 */
    conv_call(&b, 1, 0, 0);
    rl_op never = OP(RL_K_CONV, RL_P_BIAS, 2);
    never.flags = RL_OPF_FLOP_COUNTER;
    CHECK_EQ(eval(&never, &b, &r), RL_OK);
    CHECK_EQ(r.matrix, fwd);
    CHECK_EQ(r.flop_counter, tr);
    /* always transposed (ALWAYS_TRANSPOSED), whatever argument 6 says; not registered with FlopCounterMode:
     * flop_counter 0 */
    rl_op always = OP(RL_K_CONV, RL_P_ALWAYS_TRANSPOSED, 1, RL_P_BIAS, 2);
    conv_call(&b, 0, 0, 1);
    CHECK_EQ(eval(&always, &b, &r), RL_OK);
    CHECK_EQ(r.matrix, tr);
    CHECK_EQ(r.flop_counter, 0);
    /* only (x, w, bias) passed: not transposed, for FlopCounterMode too */
    conv_call(&b, 1, 0, 0);
    b.c.nargs = 3;
    CHECK_EQ(eval(&conv, &b, &r), RL_OK);
    CHECK_EQ(r.matrix, fwd);
    CHECK_EQ(r.flop_counter, fwd);
    /* x or w missing */
    b.c.args[1].type = RL_ARG_NONE;
    CHECK_EQ(eval(&conv, &b, &r), RL_E_ARGS);
    b.c.args[1].type = RL_ARG_TENSOR;
    b.c.args[0].type = RL_ARG_NONE;
    CHECK_EQ(eval(&conv, &b, &r), RL_E_ARGS);
    /* transposed flag at another position (3 here: an int list, so false) */
    rl_op at3 = OP(RL_K_CONV, RL_P_TRANSPOSED, 3, RL_P_BIAS, 2);
    conv_call(&b, 1, 0, 0);
    CHECK_EQ(eval(&at3, &b, &r), RL_OK);
    CHECK_EQ(r.matrix, fwd);
    /* bias found at the BIAS position: argument 7 is a tensor here */
    rl_op biaspos = OP(RL_K_CONV, RL_P_TRANSPOSED, 6, RL_P_BIAS, 7);
    conv_call(&b, 0, 0, 0);
    b.c.args[7].type = RL_ARG_TENSOR;
    b.c.args[7].first = 0;
    b.c.args[7].count = 1;
    CHECK_EQ(eval(&biaspos, &b, &r), RL_OK);
    CHECK_EQ(r.vector, 2 * 5 * 8 * 9);
    /* 1-D and 3-D convolutions */
    init(&b);
    a_tensor(&b, T(RL_DT_FLOAT32, 3, 2, 10));
    a_tensor(&b, T(RL_DT_FLOAT32, 4, 2, 3));
    out(&b, T(RL_DT_FLOAT32, 3, 4, 8));
    rl_op plain = OP(RL_K_CONV, RL_P_BIAS, 2);
    CHECK_EQ(eval(&plain, &b, &r), RL_OK);
    CHECK_EQ(r.matrix, 2ull * 3 * 8 * 3 * 4 * 2);
    CHECK_EQ(r.vector, 0);
    init(&b);
    a_tensor(&b, T(RL_DT_FLOAT32, 1, 2, 4, 5, 6));
    a_tensor(&b, T(RL_DT_FLOAT32, 3, 2, 2, 3, 4));
    out(&b, T(RL_DT_FLOAT32, 1, 3, 3, 3, 3));
    CHECK_EQ(eval(&plain, &b, &r), RL_OK);
    CHECK_EQ(r.matrix, 2ull * 1 * (3 * 3 * 3) * (2 * 3 * 4) * 3 * 2);
    /* argument errors: rank < 3, ranks that differ, no output */
    b.t[1] = T(RL_DT_FLOAT32, 3, 2, 2, 3);
    CHECK_EQ(eval(&plain, &b, &r), RL_E_ARGS);
    b.t[1] = T(RL_DT_FLOAT32, 3, 2, 2, 3, 4);
    b.o[0] = T(RL_DT_FLOAT32, 1, 3, 3, 3);
    CHECK_EQ(eval(&plain, &b, &r), RL_E_ARGS);
    b.o[0] = absent_out();
    CHECK_EQ(eval(&plain, &b, &r), RL_E_ARGS);
    init(&b);
    a_tensor(&b, T(RL_DT_FLOAT32, 4, 5));
    a_tensor(&b, T(RL_DT_FLOAT32, 4, 5));
    out(&b, T(RL_DT_FLOAT32, 4, 5));
    CHECK_EQ(eval(&plain, &b, &r), RL_E_ARGS);
    b.c.nargs = 1;
    CHECK_EQ(eval(&plain, &b, &r), RL_E_ARGS);
}

/* convolution_backward(grad_out, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding,
 * groups, output_mask). */
static void conv_bwd_call(builder *b, rl_tensor go, rl_tensor x, rl_tensor w, int transposed, int64_t groups,
                          int nmask, const int64_t *mask) {
    init(b);
    a_tensor(b, go);
    a_tensor(b, x);
    a_tensor(b, w);
    int64_t bias[1] = {w.size[transposed ? 1 : 0]}, ones[2] = {1, 1}, zeros[2] = {0, 0};
    a_ints(b, RL_ARG_INTLIST, 1, bias);
    a_ints(b, RL_ARG_INTLIST, 2, ones);
    a_ints(b, RL_ARG_INTLIST, 2, zeros);
    a_ints(b, RL_ARG_INTLIST, 2, ones);
    a_bool(b, transposed);
    a_ints(b, RL_ARG_INTLIST, 2, zeros);
    a_int(b, groups);
    a_ints(b, RL_ARG_BOOLLIST, nmask, mask);
    b->ints[b->ni++] = 0; /* after the mask list: not part of it */
    out(b, x);
    out(b, w);
    out(b, T(go.dtype, go.size[1]));
}

static void test_conv_backward(void) {
    builder b;
    rl_cost r;
    rl_op op = OP(RL_K_CONV_BWD, RL_P_TRANSPOSED, 7, RL_P_GROUPS, 9, RL_P_OUTPUT_MASK, 10);
    op.flags = RL_OPF_FLOP_COUNTER;
    const int64_t all[3] = {1, 1, 1};
    /* x (2,3,6,7), w (4,3,2,3), grad_out (2,4,5,5), groups 1 */
    rl_tensor go = T(RL_DT_FLOAT32, 2, 4, 5, 5), x = T(RL_DT_FLOAT32, 2, 3, 6, 7), w = T(RL_DT_FLOAT32, 4, 3, 2, 3);
    const uint64_t gi = 2ull * 2 * (5 * 5) * (2 * 3) * 4 * 3; /* grad_input: 2 * N * HoWo * KhKw * Cout * Cin/g */
    const uint64_t gw = 2ull * (2 * 3) * (5 * 5) * 2 * 3 * 4; /* grad_weight: 2 * KhKw * HoWo * N * Cin * Cout */
    const uint64_t go_b = 200 * 4, x_b = 2 * 3 * 42 * 4, w_b = 72 * 4;
    conv_bwd_call(&b, go, x, w, 0, 1, 3, all);
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_COST(r, gi + gw, 2 * 4 * 25, 0, go_b + x_b + w_b, x_b + w_b + 4 * 4);
    CHECK_EQ(r.flop_counter, gi + gw);
    CHECK_EQ(r.dtype, RL_DT_FLOAT32);
    op.flags = 0;
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_EQ(r.flop_counter, 0);
    op.flags = RL_OPF_FLOP_COUNTER;
    /* only some gradients */
    const int64_t m100[3] = {1, 0, 0}, m010[3] = {0, 1, 0}, m001[3] = {0, 0, 1};
    conv_bwd_call(&b, go, x, w, 0, 1, 3, m100);
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_COST(r, gi, 0, 0, go_b + w_b, x_b + w_b + 4 * 4); /* grad_input reads the weight, not the input */
    CHECK_EQ(r.flop_counter, gi);
    conv_bwd_call(&b, go, x, w, 0, 1, 3, m010);
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_COST(r, gw, 0, 0, go_b + x_b, x_b + w_b + 4 * 4); /* grad_weight reads the input, not the weight */
    conv_bwd_call(&b, go, x, w, 0, 1, 3, m001);
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_COST(r, 0, 2 * 4 * 25, 0, go_b, x_b + w_b + 4 * 4);
    /* a two-element mask: the third gradient defaults to computed */
    conv_bwd_call(&b, go, x, w, 0, 1, 2, m100);
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_EQ(r.matrix, gi);
    CHECK_EQ(r.vector, 2 * 4 * 25);
    /* the mask as an int list */
    conv_bwd_call(&b, go, x, w, 0, 1, 3, m100);
    b.c.args[10].type = RL_ARG_INTLIST;
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_EQ(r.matrix, gi);
    CHECK_EQ(r.vector, 0);
    /* transposed passed as an int */
    conv_bwd_call(&b, go, x, w, 0, 1, 3, all);
    b.c.args[7].type = RL_ARG_INT;
    b.c.args[7].i = 0;
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_EQ(r.matrix, gi + gw);
    /* only (grad_out, input, weight): not transposed, one group, every gradient */
    b.c.nargs = 3;
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_EQ(r.matrix, gi + gw);
    CHECK_EQ(r.vector, 2 * 4 * 25);
    /* 1-D: x (2,3,9), w (4,3,2), grad_out (2,4,8) */
    conv_bwd_call(&b, T(RL_DT_FLOAT32, 2, 4, 8), T(RL_DT_FLOAT32, 2, 3, 9), T(RL_DT_FLOAT32, 4, 3, 2), 0, 1, 3, all);
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_EQ(r.matrix, 2ull * 2 * 8 * 2 * 4 * 3 + 2ull * 2 * 8 * 2 * 3 * 4);
    /* one of the three tensors missing */
    for (int t = 0; t < 3; t++) {
        conv_bwd_call(&b, go, x, w, 0, 1, 3, all);
        b.c.args[t].type = RL_ARG_NONE;
        CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    }
    /* no mask argument: every gradient */
    conv_bwd_call(&b, go, x, w, 0, 1, 3, all);
    b.c.nargs = 10;
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_EQ(r.matrix, gi + gw);
    /* groups 2: x (2,4,6,7), w (6,2,2,3), grad_out (2,6,5,5). FlopCounterMode multiplies all 4 input channels into
     * the weight gradient: `groups` times too many. */
    rl_tensor go2 = T(RL_DT_FLOAT32, 2, 6, 5, 5), x2 = T(RL_DT_FLOAT32, 2, 4, 6, 7), w2 = T(RL_DT_FLOAT32, 6, 2, 2, 3);
    const uint64_t gi2 = 2ull * 2 * 25 * 6 * 6 * 2, n2 = 2ull * 6 * 25 * 2;
    conv_bwd_call(&b, go2, x2, w2, 0, 2, 3, all);
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_EQ(r.matrix, gi2 + n2 * (4 / 2) * 6);
    CHECK_EQ(r.flop_counter, gi2 + n2 * 4 * 6);
    conv_bwd_call(&b, go2, x2, w2, 0, 3, 3, all); /* 4 channels do not split into 3 groups */
    CHECK_EQ(eval(&op, &b, &r), RL_E_SHAPE);
    conv_bwd_call(&b, go2, x2, w2, 0, 0, 3, all);
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    conv_bwd_call(&b, go2, x2, w2, 0, -2, 3, all);
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    /* groups and mask absent: 1 group (then w2's 2 input channels do not make x2's 4), every gradient */
    conv_bwd_call(&b, go2, x2, w2, 0, 2, 3, m100);
    b.c.nargs = 9;
    CHECK_EQ(eval(&op, &b, &r), RL_E_SHAPE);
    conv_bwd_call(&b, go, x, w, 0, 1, 3, m100);
    b.c.nargs = 9;
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_EQ(r.matrix, gi + gw);
    CHECK_EQ(r.vector, 2 * 4 * 25);
    /* transposed: forward x (2,3,5,5) -> out (2,4,6,7) with w (3,4,2,3); grad_out is the larger (2,4,6,7). The
     * kernel slides over x's extent; grad_weight pairs grad_out's 4 channels with x's 3. */
    rl_tensor got = T(RL_DT_FLOAT32, 2, 4, 6, 7), xt = T(RL_DT_FLOAT32, 2, 3, 5, 5), wt = T(RL_DT_FLOAT32, 3, 4, 2, 3);
    conv_bwd_call(&b, got, xt, wt, 1, 1, 3, all);
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    const uint64_t gti = 2ull * 2 * (5 * 5) * (2 * 3) * 3 * 4, gtw = 2ull * (2 * 3) * (5 * 5) * 2 * 4 * 3;
    CHECK_EQ(r.matrix, gti + gtw);
    CHECK_EQ(r.vector, 2 * 4 * 42);
    /* transposed with groups 2: x (2,4,5,5), w (4,3,2,3), grad_out (2,6,6,7); grad_out's 6 channels split in 2 */
    rl_tensor got2 = T(RL_DT_FLOAT32, 2, 6, 6, 7), xt2 = T(RL_DT_FLOAT32, 2, 4, 5, 5);
    rl_tensor wt2 = T(RL_DT_FLOAT32, 4, 3, 2, 3);
    conv_bwd_call(&b, got2, xt2, wt2, 1, 2, 3, m010);
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    const uint64_t nt2 = 2ull * 6 * 25 * 2;
    CHECK_EQ(r.matrix, nt2 * (6 / 2) * 4);
    CHECK_EQ(r.flop_counter, nt2 * 6 * 4);
    conv_bwd_call(&b, got2, xt2, wt2, 1, 4, 3, m010); /* 6 channels do not split into 4 groups */
    CHECK_EQ(eval(&op, &b, &r), RL_E_SHAPE);
    /* argument errors */
    conv_bwd_call(&b, T(RL_DT_FLOAT32, 2, 4), T(RL_DT_FLOAT32, 2, 3), T(RL_DT_FLOAT32, 4, 3), 0, 1, 3, all);
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    conv_bwd_call(&b, go, T(RL_DT_FLOAT32, 2, 3, 6), w, 0, 1, 3, all);
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    conv_bwd_call(&b, go, x, T(RL_DT_FLOAT32, 4, 3, 2), 0, 1, 3, all);
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    conv_bwd_call(&b, go, x, w, 0, 1, 3, all);
    b.c.nargs = 2;
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    b.c.nargs = 1;
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    b.c.nargs = 0;
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
}

/* ---- attention ------------------------------------------------------------------------------------------------- */

/* batch 2, 4 query heads over 2 KV heads, head dims dq 8 and dv 6. BHSD: (b, h, s, d); BSHD: (b, s, h, d). */
static void attn_call(builder *b, int backward, int bshd, int64_t sq, int64_t sk, int causal_type, int64_t causal) {
    init(b);
    if (backward) {
        a_tensor(b, bshd ? T(RL_DT_FLOAT16, 2, sq, 4, 6) : T(RL_DT_FLOAT16, 2, 4, sq, 6)); /* grad_out */
    }
    a_tensor(b, bshd ? T(RL_DT_FLOAT16, 2, sq, 4, 8) : T(RL_DT_FLOAT16, 2, 4, sq, 8));
    a_tensor(b, bshd ? T(RL_DT_FLOAT16, 2, sk, 2, 8) : T(RL_DT_FLOAT16, 2, 2, sk, 8));
    a_tensor(b, bshd ? T(RL_DT_FLOAT16, 2, sk, 2, 6) : T(RL_DT_FLOAT16, 2, 2, sk, 6));
    a_float(b, 0.0);
    if (causal_type == RL_ARG_BOOL) {
        a_bool(b, (int)causal);
    } else if (causal_type == RL_ARG_INT) {
        a_int(b, causal);
    } else {
        a_none(b);
    }
    out(b, bshd ? T(RL_DT_FLOAT16, 2, sq, 4, 6) : T(RL_DT_FLOAT16, 2, 4, sq, 6));
}

static void test_attention_pairs(void) {
    builder b;
    rl_cost r;
    /* Forward, BHSD, is_causal at position 4. Per (batch, head) pair counts, hand-enumerated:
     *   sq 3, sk 5: none 15; top-left rows see 1,2,3 keys = 6; bottom-right rows see 3,4,5 = 12
     *   sq 5, sk 3: none 15; top-left 1,2,3,3,3 = 12;          bottom-right 0,0,1,2,3 = 6
     *   sq 4, sk 4: none 16; top-left 1,2,3,4 = 10;            bottom-right 1,2,3,4 = 10 */
    static const struct {
        int64_t sq, sk, none, top_left, bottom_right;
    } cases[] = {{3, 5, 15, 6, 12}, {5, 3, 15, 12, 6}, {4, 4, 16, 10, 10}, {1, 6, 6, 1, 6}, {6, 1, 6, 6, 1}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int64_t sq = cases[i].sq, sk = cases[i].sk;
        const int64_t counts[3] = {cases[i].none, cases[i].top_left, cases[i].bottom_right};
        for (int mask = 0; mask < 3; mask++) {
            /* mask 0 and 1 through the boolean is_causal, 0 to 2 through a mask type */
            for (int viatype = 0; viatype < 2; viatype++) {
                if (!viatype && mask == 2) {
                    continue;
                }
                rl_op op = OP(RL_K_ATTN, RL_P_QUERY, 0, viatype ? RL_P_MASK_TYPE : RL_P_IS_CAUSAL, 4);
                attn_call(&b, 0, 0, sq, sk, viatype ? RL_ARG_INT : RL_ARG_BOOL, mask);
                CHECK_EQ(eval(&op, &b, &r), RL_OK);
                uint64_t pairs = 2ull * 4 * (uint64_t)counts[mask]; /* batch * query heads * pairs per head */
                CHECK_EQ(r.matrix, 2 * pairs * (8 + 6));         /* QK^T over dq, PV over dv */
                CHECK_EQ(r.vector, 4 * pairs + 2ull * 4 * (uint64_t)sq * 6); /* softmax + output normalisation */
                CHECK_EQ(r.special, pairs);
                CHECK_EQ(r.flop_counter, 0);
                if (r.matrix != 2 * pairs * (8 + 6)) {
                    fprintf(stderr, "  (sq %lld, sk %lld, mask %d, via %s)\n", (long long)sq, (long long)sk, mask,
                            viatype ? "mask type" : "is_causal");
                }
            }
        }
    }
}

static void test_attention_layouts_and_backward(void) {
    builder b;
    rl_cost r;
    /* FlopCounterMode's count: the full score matrix, 2 * b * hq * sq * sk * (dq + dv) forward */
    rl_op fwd = OP(RL_K_ATTN, RL_P_QUERY, 0, RL_P_IS_CAUSAL, 4);
    fwd.flags = RL_OPF_FLOP_COUNTER;
    attn_call(&b, 0, 0, 3, 5, RL_ARG_BOOL, 1);
    CHECK_EQ(eval(&fwd, &b, &r), RL_OK);
    CHECK_EQ(r.matrix, 2ull * (2 * 4 * 6) * (8 + 6));
    CHECK_EQ(r.flop_counter, 2ull * 2 * 4 * 3 * 5 * (8 + 6));
    CHECK_EQ(r.dtype, RL_DT_FLOAT16);
    /* bytes: q, k, v read once, the output written once */
    CHECK_EQ(r.bytes_read, (2 * 4 * 3 * 8 + 2 * 2 * 5 * 8 + 2 * 2 * 5 * 6) * 2);
    CHECK_EQ(r.bytes_written, 2 * 4 * 3 * 6 * 2);
    /* BSHD layout, FlopCounterMode reading it the same way: the same counts */
    rl_op bshd = OP(RL_K_ATTN, RL_P_QUERY, 0, RL_P_IS_CAUSAL, 4, RL_P_BSHD, 1, RL_P_FLOP_COUNTER_BSHD, 1);
    bshd.flags = RL_OPF_FLOP_COUNTER;
    attn_call(&b, 0, 1, 3, 5, RL_ARG_BOOL, 1);
    CHECK_EQ(eval(&bshd, &b, &r), RL_OK);
    CHECK_EQ(r.matrix, 2ull * (2 * 4 * 6) * (8 + 6));
    CHECK_EQ(r.vector, 4ull * (2 * 4 * 6) + 2 * 4 * 3 * 6);
    CHECK_EQ(r.flop_counter, 2ull * 2 * 4 * 3 * 5 * (8 + 6));
    /* BSHD tensors that FlopCounterMode reads as BHSD: q (2,3,4,8) gives h 3, s 4; k (2,5,2,8) gives s 2 */
    CHECK_EQ(rl_op_set(&bshd, RL_P_FLOP_COUNTER_BSHD, 0), RL_OK);
    CHECK_EQ(eval(&bshd, &b, &r), RL_OK);
    CHECK_EQ(r.matrix, 2ull * (2 * 4 * 6) * (8 + 6));
    CHECK_EQ(r.flop_counter, 2ull * 2 * 3 * 4 * 2 * (8 + 6));
    /* backward: grad_out at 0, query at 1, is_causal at 5; S recomputed (dq), dP (dv), dV (dv), dQ (dq), dK (dq) */
    rl_op bwd = OP(RL_K_ATTN_BWD, RL_P_QUERY, 1, RL_P_IS_CAUSAL, 5);
    bwd.flags = RL_OPF_FLOP_COUNTER;
    attn_call(&b, 1, 0, 5, 3, RL_ARG_BOOL, 1);
    CHECK_EQ(eval(&bwd, &b, &r), RL_OK);
    const uint64_t pairs = 2ull * 4 * 12; /* top-left, sq 5 > sk 3 */
    CHECK_EQ(r.matrix, 2 * pairs * (3 * 8 + 2 * 6));
    CHECK_EQ(r.vector, 4 * pairs); /* no output normalisation in the backward */
    CHECK_EQ(r.special, pairs);
    CHECK_EQ(r.flop_counter, 2ull * 2 * 4 * 5 * 3 * (3 * 8 + 2 * 6));
    CHECK_EQ(r.bytes_read, (2 * 4 * 5 * 6 + 2 * 4 * 5 * 8 + 2 * 2 * 3 * 8 + 2 * 2 * 3 * 6) * 2);
    /* backward in BSHD with a bottom-right mask type */
    rl_op bwd2 = OP(RL_K_ATTN_BWD, RL_P_QUERY, 1, RL_P_MASK_TYPE, 5, RL_P_BSHD, 1);
    attn_call(&b, 1, 1, 3, 5, RL_ARG_INT, 2);
    CHECK_EQ(eval(&bwd2, &b, &r), RL_OK);
    CHECK_EQ(r.matrix, 2ull * (2 * 4 * 12) * (3 * 8 + 2 * 6));
    CHECK_EQ(r.flop_counter, 0);
    /* no causal argument position: never masked, whatever follows */
    rl_op nomask = OP(RL_K_ATTN, RL_P_QUERY, 0);
    attn_call(&b, 0, 0, 3, 5, RL_ARG_BOOL, 1);
    CHECK_EQ(eval(&nomask, &b, &r), RL_OK);
    CHECK_EQ(r.special, 2ull * 4 * 15);
    /* the causal argument absent or None: not masked */
    rl_op typed = OP(RL_K_ATTN, RL_P_QUERY, 0, RL_P_MASK_TYPE, 4);
    attn_call(&b, 0, 0, 3, 5, RL_ARG_NONE, 0);
    CHECK_EQ(eval(&typed, &b, &r), RL_OK);
    CHECK_EQ(r.special, 2ull * 4 * 15);
    b.c.nargs = 4;
    CHECK_EQ(eval(&typed, &b, &r), RL_OK);
    CHECK_EQ(r.special, 2ull * 4 * 15);
    /* is_causal passed as an int; absent: not causal */
    rl_op boolpos = OP(RL_K_ATTN, RL_P_QUERY, 0, RL_P_IS_CAUSAL, 4);
    attn_call(&b, 0, 0, 3, 5, RL_ARG_INT, 1);
    CHECK_EQ(eval(&boolpos, &b, &r), RL_OK);
    CHECK_EQ(r.special, 2ull * 4 * 6);
    b.c.nargs = 4;
    CHECK_EQ(eval(&boolpos, &b, &r), RL_OK);
    CHECK_EQ(r.special, 2ull * 4 * 15);
    /* an is_causal position, even 0 (a tensor there: false), decides over a mask type */
    rl_op both = OP(RL_K_ATTN, RL_P_QUERY, 0, RL_P_IS_CAUSAL, 0, RL_P_MASK_TYPE, 4);
    attn_call(&b, 0, 0, 3, 5, RL_ARG_INT, 1);
    CHECK_EQ(eval(&both, &b, &r), RL_OK);
    CHECK_EQ(r.special, 2ull * 4 * 15);
    /* mask types outside 0..2 are argument errors */
    attn_call(&b, 0, 0, 3, 5, RL_ARG_INT, 3);
    CHECK_EQ(eval(&typed, &b, &r), RL_E_ARGS);
    attn_call(&b, 0, 0, 3, 5, RL_ARG_INT, -1);
    CHECK_EQ(eval(&typed, &b, &r), RL_E_ARGS);
    /* multi-query: one KV head for four query heads */
    attn_call(&b, 0, 0, 3, 5, RL_ARG_BOOL, 0);
    b.t[1].size[1] = 1;
    b.t[2].size[1] = 1;
    CHECK_EQ(eval(&fwd, &b, &r), RL_OK);
    CHECK_EQ(r.special, 2ull * 4 * 15);
}

static void test_attention_shape_errors(void) {
    builder b;
    rl_cost r;
    rl_op op = OP(RL_K_ATTN, RL_P_QUERY, 0, RL_P_IS_CAUSAL, 4);
    rl_op bshd = OP(RL_K_ATTN, RL_P_QUERY, 0, RL_P_IS_CAUSAL, 4, RL_P_BSHD, 1);
    /* BHSD: q (2,4,3,8), k (2,2,5,8), v (2,2,5,6); one field changed at a time */
    static const struct {
        int t, dim;
        int64_t value;
        int want;
    } bad[] = {
        {1, 0, 3, RL_E_SHAPE}, /* k batch */
        {2, 0, 3, RL_E_SHAPE}, /* v batch */
        {1, 3, 6, RL_E_SHAPE}, /* k head dim != q head dim */
        {2, 2, 4, RL_E_SHAPE}, /* v sequence != k sequence */
        {2, 1, 1, RL_E_SHAPE}, /* v heads != k heads */
        {0, 1, 3, RL_E_SHAPE}, /* 3 query heads over 2 */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        attn_call(&b, 0, 0, 3, 5, RL_ARG_BOOL, 0);
        b.t[bad[i].t].size[bad[i].dim] = bad[i].value;
        int st = eval(&op, &b, &r);
        CHECK_EQ(st, bad[i].want);
        if (st != bad[i].want) {
            fprintf(stderr, "  (case %zu)\n", i);
        }
    }
    /* 4 query heads over 3 KV heads (k and v agree) */
    attn_call(&b, 0, 0, 3, 5, RL_ARG_BOOL, 0);
    b.t[1].size[1] = 3;
    b.t[2].size[1] = 3;
    CHECK_EQ(eval(&op, &b, &r), RL_E_SHAPE);
    /* zero KV heads (k and v agree): an error, not a division by zero */
    attn_call(&b, 0, 0, 3, 5, RL_ARG_BOOL, 0);
    b.t[1].size[1] = 0;
    b.t[2].size[1] = 0;
    CHECK_EQ(eval(&op, &b, &r), RL_E_SHAPE);
    /* the same checks read the BSHD positions: heads at 2, sequence at 1 */
    attn_call(&b, 0, 1, 3, 5, RL_ARG_BOOL, 0);
    CHECK_EQ(eval(&bshd, &b, &r), RL_OK);
    b.t[2].size[1] = 4; /* v sequence */
    CHECK_EQ(eval(&bshd, &b, &r), RL_E_SHAPE);
    attn_call(&b, 0, 1, 3, 5, RL_ARG_BOOL, 0);
    b.t[2].size[2] = 1; /* v heads */
    CHECK_EQ(eval(&bshd, &b, &r), RL_E_SHAPE);
    attn_call(&b, 0, 1, 3, 5, RL_ARG_BOOL, 0);
    b.t[1].size[2] = 3; /* 4 query heads over 3 */
    b.t[2].size[2] = 3;
    CHECK_EQ(eval(&bshd, &b, &r), RL_E_SHAPE);
    /* rank 3 for any of q, k, v; a missing tensor */
    for (int t = 0; t < 3; t++) {
        attn_call(&b, 0, 0, 3, 5, RL_ARG_BOOL, 0);
        b.t[t].ndim = 3;
        CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    }
    for (int t = 0; t < 3; t++) {
        attn_call(&b, 0, 0, 3, 5, RL_ARG_BOOL, 0);
        b.c.args[t].type = RL_ARG_NONE;
        CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    }
    attn_call(&b, 0, 0, 3, 5, RL_ARG_BOOL, 0);
    b.c.nargs = 2;
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    b.c.nargs = 1;
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    b.c.nargs = 0;
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
}

static void test_attention_overflow(void) {
    builder b;
    rl_cost r;
    rl_op op = OP(RL_K_ATTN, RL_P_QUERY, 0, RL_P_MASK_TYPE, 4);
    int64_t s = (int64_t)1 << 33; /* sq = sk = 2^33: pairs 2^66 (none) or about 2^65 (causal) per head */
    for (int64_t mask = 0; mask < 3; mask++) {
        attn_call(&b, 0, 0, 3, 5, RL_ARG_INT, mask);
        b.t[0].size[2] = s;
        b.t[1].size[2] = s;
        b.t[2].size[2] = s;
        b.o[0].size[2] = s;
        CHECK_EQ(eval(&op, &b, &r), RL_E_OVERFLOW);
    }
}

/* ---- gathers, pooling, losses, fused multi-head attention ------------------------------------------------------ */

static void test_gather(void) {
    builder b;
    rl_cost r;
    /* index_select(src (100,8) fp16, dim, index (5) int64) -> (5,8) fp32 says the output; the gathered elements are
     * read at the source's itemsize */
    rl_op op = {.kind = RL_K_GATHER};
    init(&b);
    a_tensor(&b, T(RL_DT_FLOAT16, 100, 8));
    a_int(&b, 0);
    a_tensor(&b, T(RL_DT_INT64, 5));
    out(&b, T(RL_DT_FLOAT32, 5, 8));
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_COST(r, 0, 0, 0, 5 * 8 + 40 * 2, 40 * 4);
    CHECK_EQ(r.dtype, RL_DT_FLOAT16);
    op.noread_mask = 1u << 2; /* the index not read */
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_EQ(r.bytes_read, 40 * 2);
    /* an absent first output is skipped; two outputs both written */
    op.noread_mask = 0;
    b.o[0] = absent_out();
    out(&b, T(RL_DT_FLOAT16, 5, 8));
    out(&b, T(RL_DT_INT64, 3));
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_COST(r, 0, 0, 0, 5 * 8 + 40 * 2, 40 * 2 + 3 * 8);
    /* embedding(weight (50,4) fp32, indices (2,3) int64): the index right after the source */
    init(&b);
    a_tensor(&b, T(RL_DT_FLOAT32, 50, 4));
    a_tensor(&b, T(RL_DT_INT64, 2, 3));
    out(&b, T(RL_DT_FLOAT32, 2, 3, 4));
    op.noread_mask = 0;
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_COST(r, 0, 0, 0, 6 * 8 + 24 * 4, 24 * 4);
    /* no output or no tensor: argument errors */
    b.c.nouts = 0;
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    init(&b);
    a_int(&b, 0);
    out(&b, T(RL_DT_FLOAT32, 5));
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
}

/* pool(input, kernel_size, other int list) -> output; the kernel sizes are stored after the other list's values, so
 * that reading them from the wrong place gives other numbers */
static void pool_call(builder *b, rl_tensor in, rl_tensor o, int nk, const int64_t *k) {
    init(b);
    a_tensor(b, in);
    rl_arg *ks = next_arg(b, RL_ARG_INTLIST);
    ks->first = 2;
    ks->count = nk;
    rl_arg *other = next_arg(b, RL_ARG_INTLIST);
    other->first = 0;
    other->count = 2;
    b->ints[0] = 9;
    b->ints[1] = 9;
    for (int i = 0; i < nk; i++) {
        b->ints[2 + i] = k[i];
    }
    b->ni = 2 + nk;
    out(b, o);
}

static void test_pool(void) {
    builder b;
    rl_cost r;
    /* max_pool2d (1,2,9,8) kernel (3,2) -> (1,2,3,4): 24 windows x 6 taps, p1 = 1 FLOP per tap */
    rl_op op = OP(RL_K_POOL, RL_P_FLOPS, 1, RL_P_SPATIAL, 2, RL_P_KERNEL_SIZE, 1);
    const int64_t k32[2] = {3, 2};
    pool_call(&b, T(RL_DT_FLOAT32, 1, 2, 9, 8), T(RL_DT_FLOAT32, 1, 2, 3, 4), 2, k32);
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_COST(r, 0, 24 * (3 * 2) * 1, 0, 144 * 4, 24 * 4);
    CHECK_EQ(r.dtype, RL_DT_FLOAT32);
    /* 2 FLOPs per tap */
    op.param[RL_P_FLOPS] = 2;
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_EQ(r.vector, 24 * 6 * 2);
    op.param[RL_P_FLOPS] = 1;
    /* one kernel size for both dimensions: 3 x 3 */
    const int64_t k3[1] = {3};
    pool_call(&b, T(RL_DT_FLOAT32, 1, 2, 9, 8), T(RL_DT_FLOAT32, 1, 2, 3, 4), 1, k3);
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_EQ(r.vector, 24 * 9);
    /* backward: the gradient (arg 0) is the smaller tensor; one window per element of it */
    pool_call(&b, T(RL_DT_FLOAT32, 1, 2, 3, 4), T(RL_DT_FLOAT32, 1, 2, 9, 8), 2, k32);
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_EQ(r.vector, 24 * 6);
    /* 3-D: kernel (2,3,4), input (1,1,4,6,8) -> (1,1,2,2,2) */
    rl_op op3 = OP(RL_K_POOL, RL_P_FLOPS, 1, RL_P_SPATIAL, 3, RL_P_KERNEL_SIZE, 1);
    const int64_t k234[3] = {2, 3, 4};
    pool_call(&b, T(RL_DT_FLOAT16, 1, 1, 4, 6, 8), T(RL_DT_FLOAT16, 1, 1, 2, 2, 2), 3, k234);
    CHECK_EQ(eval(&op3, &b, &r), RL_OK);
    CHECK_EQ(r.vector, 8 * (2 * 3 * 4));
    /* kernel given as 2 sizes for 3 dimensions, or none, or not a list: argument errors */
    pool_call(&b, T(RL_DT_FLOAT16, 1, 1, 4, 6, 8), T(RL_DT_FLOAT16, 1, 1, 2, 2, 2), 2, k234);
    CHECK_EQ(eval(&op3, &b, &r), RL_E_ARGS);
    pool_call(&b, T(RL_DT_FLOAT16, 1, 1, 4, 6, 8), T(RL_DT_FLOAT16, 1, 1, 2, 2, 2), 0, k234);
    CHECK_EQ(eval(&op3, &b, &r), RL_E_ARGS);
    b.c.args[1].type = RL_ARG_BOOLLIST;
    b.c.args[1].count = 3;
    CHECK_EQ(eval(&op3, &b, &r), RL_E_ARGS);
    /* more sizes than dimensions: the first ones */
    const int64_t k2345[4] = {2, 3, 4, 5};
    pool_call(&b, T(RL_DT_FLOAT16, 1, 1, 4, 6, 8), T(RL_DT_FLOAT16, 1, 1, 2, 2, 2), 4, k2345);
    CHECK_EQ(eval(&op3, &b, &r), RL_OK);
    CHECK_EQ(r.vector, 8 * (2 * 3 * 4));
    /* no output; no spatial dimension */
    pool_call(&b, T(RL_DT_FLOAT32, 1, 2, 9, 8), absent_out(), 2, k32);
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    rl_op op0 = OP(RL_K_POOL, RL_P_FLOPS, 1, RL_P_SPATIAL, 0, RL_P_KERNEL_SIZE, 1);
    pool_call(&b, T(RL_DT_FLOAT32, 1, 2, 9, 8), T(RL_DT_FLOAT32, 1, 2, 3, 4), 1, k3);
    CHECK_EQ(eval(&op0, &b, &r), RL_E_ARGS);
    /* one spatial dimension: kernel 3 over (2,4,10) -> (2,4,8) */
    rl_op op1 = OP(RL_K_POOL, RL_P_FLOPS, 1, RL_P_SPATIAL, 1, RL_P_KERNEL_SIZE, 1);
    pool_call(&b, T(RL_DT_FLOAT32, 2, 4, 10), T(RL_DT_FLOAT32, 2, 4, 8), 1, k3);
    CHECK_EQ(eval(&op1, &b, &r), RL_OK);
    CHECK_EQ(r.vector, 64 * 3);
    /* kernel-size position 2 (avg_pool2d_backward(grad, self, kernel_size, ...)), self not read */
    rl_op bwd = OP(RL_K_POOL, RL_P_FLOPS, 1, RL_P_SPATIAL, 2, RL_P_KERNEL_SIZE, 2);
    bwd.noread_mask = 2;
    init(&b);
    a_tensor(&b, T(RL_DT_FLOAT32, 1, 2, 3, 4));
    a_tensor(&b, T(RL_DT_FLOAT32, 1, 2, 9, 8));
    a_ints(&b, RL_ARG_INTLIST, 2, k32);
    out(&b, T(RL_DT_FLOAT32, 1, 2, 9, 8));
    CHECK_EQ(eval(&bwd, &b, &r), RL_OK);
    CHECK_COST(r, 0, 24 * 6, 0, 24 * 4, 144 * 4);
}

static void test_nll(void) {
    builder b;
    rl_cost r;
    /* nll_loss_forward(self (4,10) fp32, target (4) int64, weight (10) fp32, reduction, ignore_index)
     * -> (output, total_weight): one FLOP per target; reads the targets, one log-prob per target and the weight */
    rl_op fwd = OP(RL_K_NLL, RL_P_TARGET, 1, RL_P_PER_TARGET, 1);
    init(&b);
    a_tensor(&b, T(RL_DT_FLOAT32, 4, 10));
    a_tensor(&b, T(RL_DT_INT64, 4));
    a_tensor(&b, T(RL_DT_FLOAT32, 10));
    a_int(&b, 1);
    a_int(&b, -100);
    out(&b, scalar(RL_DT_FLOAT32));
    out(&b, scalar(RL_DT_FLOAT32));
    CHECK_EQ(eval(&fwd, &b, &r), RL_OK);
    CHECK_COST(r, 0, 4 * 1, 0, 4 * 8 + 4 * 4 + 10 * 4, 4 + 4);
    CHECK_EQ(r.dtype, RL_DT_FLOAT32);
    b.c.args[2].type = RL_ARG_NONE; /* no weight */
    CHECK_EQ(eval(&fwd, &b, &r), RL_OK);
    CHECK_EQ(r.bytes_read, 4 * 8 + 4 * 4);
    b.t[0].dtype = RL_DT_FLOAT64; /* the gathered log-probs at self's itemsize */
    CHECK_EQ(eval(&fwd, &b, &r), RL_OK);
    CHECK_EQ(r.bytes_read, 4 * 8 + 4 * 8);
    CHECK_EQ(r.dtype, RL_DT_FLOAT64);
    /* nll_loss_backward(grad_output (), self (4,10) not read, target (4), weight (10), ...) -> grad_input (4,10) */
    rl_op bwd = OP(RL_K_NLL, RL_P_TARGET, 2, RL_P_PER_TARGET, 2);
    bwd.noread_mask = 2;
    init(&b);
    a_tensor(&b, scalar(RL_DT_FLOAT32));
    a_tensor(&b, T(RL_DT_FLOAT32, 4, 10));
    a_tensor(&b, T(RL_DT_INT64, 4));
    a_tensor(&b, T(RL_DT_FLOAT32, 10));
    out(&b, T(RL_DT_BFLOAT16, 4, 10));
    CHECK_EQ(eval(&bwd, &b, &r), RL_OK);
    CHECK_COST(r, 0, 4 * 2, 0, 4 + 4 * 8 + 10 * 4, 40 * 2);
    CHECK_EQ(r.dtype, RL_DT_BFLOAT16);
    /* the target or self missing */
    b.c.nargs = 2;
    CHECK_EQ(eval(&bwd, &b, &r), RL_E_ARGS);
    init(&b);
    a_none(&b);
    a_tensor(&b, T(RL_DT_INT64, 4));
    out(&b, scalar(RL_DT_FLOAT32));
    CHECK_EQ(eval(&fwd, &b, &r), RL_E_ARGS);
}

static void mha_call(builder *b, int64_t e, int64_t h) {
    init(b);
    a_tensor(b, T(RL_DT_FLOAT32, 2, 3, 8));     /* q (B 2, Sq 3, E 8) */
    a_tensor(b, T(RL_DT_FLOAT32, 2, 5, 8));     /* k (B 2, Sk 5, E 8) */
    a_tensor(b, T(RL_DT_FLOAT32, 2, 5, 8));     /* v */
    a_int(b, e);
    a_int(b, h);
    a_tensor(b, T(RL_DT_FLOAT32, 3 * 8, 8));    /* qkv weight */
    a_tensor(b, T(RL_DT_FLOAT32, 3 * 8));       /* qkv bias */
    a_tensor(b, T(RL_DT_FLOAT32, 8, 8));        /* out weight */
    a_tensor(b, T(RL_DT_FLOAT32, 8));           /* out bias */
    out(b, T(RL_DT_FLOAT32, 2, 3, 8));
}

static void test_mha(void) {
    builder b;
    rl_cost r;
    rl_op op = OP(RL_K_MHA, RL_P_EMBED_DIM, 3, RL_P_NUM_HEADS, 4);
    mha_call(&b, 8, 2);
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    /* projections: Q and out over Sq 3, K and V over Sk 5: 2*B*(2*3 + 2*5)*E*E; QK^T and PV: 2 * pairs * 2 * E/H
     * with pairs = B*H*Sq*Sk = 2*2*3*5 = 60 */
    CHECK_EQ(r.matrix, 2ull * 2 * (2 * 3 + 2 * 5) * 8 * 8 + 2ull * 60 * 2 * (8 / 2));
    CHECK_EQ(r.vector, 2ull * (2 * 3 + 2 * 5) * 8 + 4 * 60); /* bias adds + softmax */
    CHECK_EQ(r.special, 60);
    CHECK_EQ(r.bytes_read, (48 + 80 + 80 + 192 + 24 + 64 + 8) * 4);
    CHECK_EQ(r.bytes_written, 48 * 4);
    CHECK_EQ(r.dtype, RL_DT_FLOAT32);
    mha_call(&b, 8, 4); /* 4 heads of 2: the same products, different split */
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_EQ(r.special, 2ull * 4 * 3 * 5);
    CHECK_EQ(r.matrix, 2ull * 2 * 16 * 64 + 2ull * 120 * 2 * 2);
    /* one head of width 1: q (2,3,1), k (2,5,1); pairs 2*1*3*5 = 30 */
    mha_call(&b, 8, 2);
    b.t[0] = T(RL_DT_FLOAT32, 2, 3, 1);
    b.t[1] = T(RL_DT_FLOAT32, 2, 5, 1);
    b.c.args[3].i = 1;
    b.c.args[4].i = 1;
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_EQ(r.matrix, 2ull * 2 * 16 * 1 * 1 + 2ull * 30 * 2 * 1);
    CHECK_EQ(r.vector, 2ull * 16 * 1 + 4 * 30);
    /* argument and shape errors */
    mha_call(&b, 8, 3); /* 8 does not split into 3 heads */
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    mha_call(&b, 0, 2);
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    mha_call(&b, 8, 0);
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    mha_call(&b, -8, 2);
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    mha_call(&b, 8, -2);
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    mha_call(&b, 4, 2); /* embed_dim 4 but q and k have 8 */
    CHECK_EQ(eval(&op, &b, &r), RL_E_SHAPE);
    mha_call(&b, 8, 2);
    b.t[1].size[2] = 4; /* k embedding */
    CHECK_EQ(eval(&op, &b, &r), RL_E_SHAPE);
    mha_call(&b, 8, 2);
    b.t[1].size[0] = 3; /* k batch */
    CHECK_EQ(eval(&op, &b, &r), RL_E_SHAPE);
    mha_call(&b, 8, 2);
    b.t[0] = T(RL_DT_FLOAT32, 2, 3, 8, 1);
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    mha_call(&b, 8, 2);
    b.t[1] = T(RL_DT_FLOAT32, 2, 5);
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    mha_call(&b, 8, 2);
    b.c.nargs = 1;
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    b.c.nargs = 0;
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
}

/* ---- the kind/parameter vocabulary, call validation, the training flag ---------------------------------------- */

static void test_vocabulary(void) {
    CHECK_STR(rl_status_str(RL_E_OVERFLOW), "count overflows 64 bits");
    CHECK_STR(rl_status_str(RL_E_ARGS), "missing or mistyped argument");
    CHECK_STR(rl_status_str(RL_E_SHAPE), "inconsistent shapes");
    CHECK_STR(rl_status_str(RL_E_DIMS), "a tensor has a negative size or more than 16 dimensions");
    CHECK_STR(rl_status_str(RL_E_VALUE),
              "an integer argument is out of range (kernel size or stride <= 0, negative padding)");
    CHECK_STR(rl_param_name(RL_P_FLOPS), "flops"); /* the first */
    CHECK_STR(rl_param_name(RL_P_PER_TARGET), "per_target"); /* the last */
    CHECK_EQ(rl_param_name(-1) == NULL, 1);
    CHECK_EQ(rl_param_name(RL_P_COUNT) == NULL, 1);
    CHECK_EQ(rl_param_type(RL_P_FLOPS), RL_PT_COUNT);
    CHECK_EQ(rl_param_type(RL_P_QUERY), RL_PT_ARG_REQUIRED);
    CHECK_EQ(rl_param_type(-1), -1);
    CHECK_EQ(rl_param_type(RL_P_COUNT), -1);
    CHECK_STR(rl_param_argname(RL_P_TRANSPOSED), "transposed");
    CHECK_EQ(rl_param_argname(RL_P_FLOPS) == NULL, 1);
    CHECK_EQ(rl_param_argname(-1) == NULL, 1);
    CHECK_EQ(rl_param_argname(RL_P_COUNT) == NULL, 1);
    int64_t lo = 5, hi = 5;
    rl_param_range(RL_P_FLOPS, &lo, &hi);
    CHECK_EQ(lo, 0);
    CHECK_EQ(hi, INT64_MAX);
    rl_param_range(RL_P_DEPTHWISE, &lo, &hi);
    CHECK_EQ(lo, 0);
    CHECK_EQ(hi, 1);
    rl_param_range(RL_P_BIAS, &lo, &hi);
    CHECK_EQ(lo, (uint64_t)-1);
    CHECK_EQ(hi, RL_MAX_ARGS - 1);
    rl_param_range(RL_P_QUERY, &lo, &hi); /* a required position has the same range */
    CHECK_EQ(lo, (uint64_t)-1);
    CHECK_EQ(hi, RL_MAX_ARGS - 1);
    rl_param_range(-1, &lo, &hi);
    CHECK_EQ(lo, 0);
    CHECK_EQ(hi, 0);
    lo = hi = 5;
    rl_param_range(RL_P_COUNT, &lo, &hi);
    CHECK_EQ(lo, 0);
    CHECK_EQ(hi, 0);
    CHECK_STR(rl_kind_name(RL_K_ZERO), "zero");
    CHECK_STR(rl_kind_name(RL_K_GROUPED_MM), "grouped_mm");
    CHECK_EQ(rl_kind_name(-1) == NULL, 1);
    CHECK_EQ(rl_kind_params(RL_K_ZERO), RL_P(TRAINING));
    CHECK_EQ(rl_kind_params(RL_K_POOL),
             RL_P(FLOPS) | RL_P(SPATIAL) | RL_P(KERNEL_SIZE) | RL_P(STRIDE) | RL_P(PADDING) | RL_P(TRAINING));
    CHECK_EQ(rl_kind_params(RL_K_GROUPED_MM), RL_P(BIAS) | RL_P(TRAINING));
    CHECK_EQ(rl_kind_params(-1), 0);
    CHECK_EQ(rl_kind_params(RL_K_COUNT), 0);
    rl_op op;
    memset(&op, 0, sizeof(op));
    op.kind = RL_K_POOL;
    CHECK_EQ(rl_op_set(&op, -1, 0), RL_E_KIND);
    CHECK_EQ(rl_op_set(&op, RL_P_GROUPS, 1), RL_E_KIND);  /* not a pool parameter */
    CHECK_EQ(rl_op_set(&op, RL_P_SPATIAL, 3), RL_OK);
    CHECK_EQ(op.param[RL_P_SPATIAL], 3);                 /* a count is stored as given */
    CHECK_EQ(rl_op_set(&op, RL_P_STRIDE, RL_MAX_ARGS - 1), RL_OK);
    CHECK_EQ(op.param[RL_P_STRIDE], RL_MAX_ARGS);        /* a position plus one */
    CHECK_EQ(rl_op_get(&op, RL_P_STRIDE), RL_MAX_ARGS - 1);
    CHECK_EQ(rl_op_get(&op, RL_P_SPATIAL), 3);
    op.param[RL_P_STRIDE] = RL_MAX_ARGS + 1;              /* out of the stored range: absent */
    CHECK_EQ(rl_op_get(&op, RL_P_STRIDE), (uint64_t)-1);
    op.param[RL_P_STRIDE] = 1;
    CHECK_EQ(rl_op_get(&op, RL_P_STRIDE), 0);
    CHECK_EQ(rl_op_get(&op, RL_P_PADDING), (uint64_t)-1); /* zeroed: absent */
    CHECK_EQ(rl_op_get(&op, -1), 0);
    CHECK_EQ(rl_op_get(&op, RL_P_COUNT), 0);
    op.kind = -1;
    CHECK_EQ(rl_op_set(&op, RL_P_FLOPS, 1), RL_E_KIND);   /* no kind: no parameter */
    op.kind = RL_K_COUNT;
    CHECK_EQ(rl_op_set(&op, RL_P_TRAINING, 1), RL_E_KIND);
}

static void test_call_validation(void) {
    builder b;
    rl_cost r;
    rl_op op = OP(RL_K_COPY);
    init(&b);
    a_tensor(&b, T(RL_DT_FLOAT32, 3));
    const int64_t two[2] = {2, 2};
    a_ints(&b, RL_ARG_INTLIST, 2, two);
    out(&b, T(RL_DT_FLOAT32, 3));
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_COST(r, 0, 0, 0, 12, 12);
    b.c.nouts = -1;
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    b.c.nouts = 1;
    b.c.outs = NULL;
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    b.c.nouts = 0;
    CHECK_EQ(eval(&op, &b, &r), RL_OK); /* no outputs: no array needed */
    CHECK_EQ(r.bytes_written, 0);
    b.c.nouts = 1;
    b.c.outs = b.o;
    for (int a = 0; a < 2; a++) { /* a tensor and an int list: negative first or count */
        b.c.args[a].first = -1;
        CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
        b.c.args[a].first = 0;
        b.c.args[a].count = -1;
        CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
        b.c.args[a].count = a ? 2 : 1;
    }
    b.c.args[1].type = RL_ARG_BOOLLIST;
    b.c.args[1].first = -1;
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    b.c.args[1].first = 0;
    b.c.ints = NULL;
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    b.c.args[1].type = RL_ARG_INTLIST;
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    b.c.args[1].count = 1; /* one entry needs the array too */
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    b.c.args[1].count = 0; /* an empty list needs no array */
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    b.c.args[1].type = RL_ARG_INT; /* first and count of a scalar are not looked at */
    b.c.args[1].first = -5;
    b.c.args[1].count = -5;
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    b.c.tensors = NULL;
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    b.c.tensors = b.t;
    b.c.args[0].type = RL_ARG_TENSORLIST;
    b.c.args[0].first = -1;
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    b.c.args[0].first = 0;
    b.c.args[0].count = 0;
    b.c.tensors = NULL;
    CHECK_EQ(eval(&op, &b, &r), RL_OK); /* an empty list */
    b.c.tensors = b.t;
    b.c.args[0].type = RL_ARG_TENSOR;
    b.c.args[0].count = 1;
    /* dimensions: 0..16 for arguments, -1 (absent) .. 16 for outputs; sizes >= 0 */
    b.t[0] = T(RL_DT_FLOAT32, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1);
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    b.t[0].ndim = RL_MAX_DIMS + 1;
    CHECK_EQ(eval(&op, &b, &r), RL_E_DIMS);
    b.t[0] = scalar(RL_DT_FLOAT32);
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    b.t[0].ndim = -1;
    CHECK_EQ(eval(&op, &b, &r), RL_E_DIMS);
    b.t[0] = T(RL_DT_FLOAT32, 3, 0);
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    b.t[0].size[1] = -1;
    CHECK_EQ(eval(&op, &b, &r), RL_E_DIMS);
    b.t[0] = T(RL_DT_FLOAT32, -1, 3);
    CHECK_EQ(eval(&op, &b, &r), RL_E_DIMS);
    b.t[0] = T(RL_DT_FLOAT32, 3);
    b.o[0] = absent_out();
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    b.o[0].ndim = -2;
    CHECK_EQ(eval(&op, &b, &r), RL_E_DIMS);
    b.o[0] = T(RL_DT_FLOAT32, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1);
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    b.o[0].ndim = RL_MAX_DIMS + 1;
    CHECK_EQ(eval(&op, &b, &r), RL_E_DIMS);
    b.o[0] = T(RL_DT_FLOAT32, 3, -2);
    CHECK_EQ(eval(&op, &b, &r), RL_E_DIMS);
    /* the second tensor of a list is checked too, and the second output */
    init(&b);
    rl_tensor l[2] = {T(RL_DT_FLOAT32, 2), T(RL_DT_FLOAT32, 2)};
    l[1].size[0] = -2;
    a_list(&b, 2, l);
    CHECK_EQ(eval(&op, &b, &r), RL_E_DIMS);
    init(&b);
    out(&b, T(RL_DT_FLOAT32, 2));
    out(&b, T(RL_DT_FLOAT32, -2));
    CHECK_EQ(eval(&op, &b, &r), RL_E_DIMS);
}

/* Updated arguments and the BatchNorm training flag: t0 (4) updated in place, t1 (6) read, t2 (5) not read,
 * training at 3, output (6). */
static void test_training_flag(void) {
    builder b;
    rl_cost r;
    rl_op op = OP(RL_K_EWISE, RL_P_FLOPS, 1, RL_P_TRAINING, 3);
    op.write_mask = 1;
    op.noread_mask = 4;
    init(&b);
    a_tensor(&b, T(RL_DT_FLOAT32, 4));
    a_tensor(&b, T(RL_DT_FLOAT32, 6));
    a_tensor(&b, T(RL_DT_FLOAT32, 5));
    a_bool(&b, 1);
    out(&b, T(RL_DT_FLOAT16, 6));
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_COST(r, 0, 4, 0, (4 + 6) * 4, 4 * 4); /* the result is t0; the output is its alias */
    b.c.args[3].i = 0; /* evaluation: every argument read (t2 too), nothing updated */
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_COST(r, 0, 4, 0, (4 + 6 + 5) * 4, 0);
    b.c.args[3].type = RL_ARG_INT; /* an int flag */
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_EQ(r.bytes_written, 0);
    b.c.args[3].i = 2;
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_EQ(r.bytes_written, 4 * 4);
    b.c.nargs = 3; /* the flag absent: training */
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_COST(r, 0, 4, 0, (4 + 6) * 4, 4 * 4);
    b.c.nargs = 4;
    b.c.args[3].type = RL_ARG_NONE; /* None: training */
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_EQ(r.bytes_written, 4 * 4);
    b.c.args[3].type = RL_ARG_BOOL;
    b.c.args[3].i = 0;
    rl_op plain = op; /* no training parameter: always training */
    plain.param[RL_P_TRAINING] = 0;
    CHECK_EQ(eval(&plain, &b, &r), RL_OK);
    CHECK_COST(r, 0, 4, 0, (4 + 6) * 4, 4 * 4);
    /* fresh outputs: the result is the output (6 elements), written besides the updated argument */
    op.flags = RL_OPF_FRESH_OUTS;
    b.c.args[3].i = 1;
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_COST(r, 0, 6, 0, (4 + 6) * 4, 4 * 4 + 6 * 2);
    CHECK_EQ(r.dtype, RL_DT_FLOAT16);
    b.c.args[3].i = 0;
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_COST(r, 0, 6, 0, (4 + 6 + 5) * 4, 6 * 2);
    /* a write-only destination (t2 in both masks) is written and not read, in evaluation too */
    op.flags = 0;
    op.write_mask = 1 | 4;
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_COST(r, 0, 4, 0, (4 + 6) * 4, 5 * 4);
    b.c.args[3].i = 1;
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_COST(r, 0, 4, 0, (4 + 6) * 4, (4 + 5) * 4);
}

/* ---- grouped GEMM ----------------------------------------------------------------------------------------- */

static void test_grouped_mm_layouts(void) {
    builder b;
    rl_cost r;
    rl_op op = OP(RL_K_GROUPED_MM, RL_P_BIAS, 3);
    /* a (10,4) x b (3,4,6), offs (3) int32, bias (3,6): 2 * 10 rows * K 4 * 6 columns, one bias add per output */
    init(&b);
    a_tensor(&b, T(RL_DT_BFLOAT16, 10, 4));
    a_tensor(&b, T(RL_DT_BFLOAT16, 3, 4, 6));
    a_tensor(&b, T(RL_DT_INT32, 3));
    a_tensor(&b, T(RL_DT_BFLOAT16, 3, 6));
    out(&b, T(RL_DT_BFLOAT16, 10, 6));
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_COST(r, 2 * 10 * 4 * 6, 10 * 6, 0, (40 + 72 + 18) * 2 + 3 * 4, 60 * 2);
    CHECK_EQ(r.flop_counter, 0);
    CHECK_EQ(r.dtype, RL_DT_BFLOAT16);
    b.c.args[3].type = RL_ARG_NONE; /* no bias */
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_COST(r, 2 * 10 * 4 * 6, 0, 0, (40 + 72) * 2 + 3 * 4, 60 * 2);
    b.c.args[3].type = RL_ARG_TENSOR;
    rl_op nobias = OP(RL_K_GROUPED_MM); /* a bias tensor at 3 but no bias parameter */
    CHECK_EQ(eval(&nobias, &b, &r), RL_OK);
    CHECK_EQ(r.vector, 0);
    b.c.nouts = 0; /* a bias but no output to count it on */
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_EQ(r.vector, 0);
    CHECK_EQ(r.matrix, 2 * 10 * 4 * 6);
    b.c.nouts = 1;
    b.t[1] = T(RL_DT_BFLOAT16, 3, 5, 6); /* K 4 against 5 */
    CHECK_EQ(eval(&op, &b, &r), RL_E_SHAPE);
    /* both batched: a (3,5,7) x b (3,7,11) -> (3,5,11): 2 * 3*5 rows * 7 * 11 */
    init(&b);
    a_tensor(&b, T(RL_DT_FLOAT16, 3, 5, 7));
    a_tensor(&b, T(RL_DT_FLOAT16, 3, 7, 11));
    out(&b, T(RL_DT_FLOAT32, 3, 5, 11));
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_COST(r, 2 * 3 * 5 * 7 * 11, 0, 0, (105 + 231) * 2, 165 * 4);
    CHECK_EQ(r.dtype, RL_DT_FLOAT16);
    b.t[1].size[0] = 2; /* group counts differ */
    CHECK_EQ(eval(&op, &b, &r), RL_E_SHAPE);
    /* a (3,5,7) x b (7,22): the groups split the 22 columns; 5 rows */
    b.t[1] = T(RL_DT_FLOAT16, 7, 22);
    b.o[0] = T(RL_DT_FLOAT16, 5, 22);
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_EQ(r.matrix, 2 * 5 * 7 * 22);
    /* a (5,21) x b (21,6) -> (3,5,6): the groups split K = 21 */
    b.t[0] = T(RL_DT_FLOAT16, 5, 21);
    b.t[1] = T(RL_DT_FLOAT16, 21, 6);
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_EQ(r.matrix, 2 * 5 * 21 * 6);
    b.t[1] = T(RL_DT_FLOAT16, 20, 6);
    CHECK_EQ(eval(&op, &b, &r), RL_E_SHAPE);
    /* ranks 2..3 only; both operands needed */
    b.t[1] = T(RL_DT_FLOAT16, 21, 6);
    b.t[0] = T(RL_DT_FLOAT16, 21);
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    b.t[0] = T(RL_DT_FLOAT16, 1, 2, 5, 21);
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    b.t[0] = T(RL_DT_FLOAT16, 5, 21);
    b.t[1] = T(RL_DT_FLOAT16, 21);
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    b.t[1] = T(RL_DT_FLOAT16, 1, 3, 21, 6);
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    b.t[1] = T(RL_DT_FLOAT16, 21, 6);
    b.c.args[0].type = RL_ARG_NONE;
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
    b.c.args[0].type = RL_ARG_TENSOR;
    b.c.nargs = 1;
    CHECK_EQ(eval(&op, &b, &r), RL_E_ARGS);
}

/* ---- convolution groups and channels ----------------------------------------------------------------------- */

static void conv_g_call(builder *b, rl_tensor x, rl_tensor w, rl_tensor o, int64_t groups) {
    conv_call(b, 0, 0, 0);
    b->t[0] = x;
    b->t[1] = w;
    b->o[0] = o;
    b->c.args[8].i = groups;
}

static void test_conv_groups(void) {
    builder b;
    rl_cost r;
    rl_op op = OP(RL_K_CONV, RL_P_TRANSPOSED, 6, RL_P_GROUPS, 8, RL_P_BIAS, 2);
    rl_tensor x = T(RL_DT_FLOAT32, 2, 4, 9, 12), w = T(RL_DT_FLOAT32, 6, 2, 2, 4), o = T(RL_DT_FLOAT32, 2, 6, 8, 9);
    /* 2 groups: weight (6, 4/2, 2, 4): 2 * N 2 * 72 positions * 8 taps * 6 out * 2 in per group */
    conv_g_call(&b, x, w, o, 2);
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_EQ(r.matrix, 2ull * 2 * 72 * 8 * 6 * 2);
    conv_g_call(&b, x, w, o, 1); /* 1 group needs 4 input channels in the weight */
    CHECK_EQ(eval(&op, &b, &r), RL_E_SHAPE);
    conv_g_call(&b, x, w, o, 3);
    CHECK_EQ(eval(&op, &b, &r), RL_E_SHAPE);
    conv_g_call(&b, x, w, o, 0);
    CHECK_EQ(eval(&op, &b, &r), RL_E_SHAPE);
    conv_g_call(&b, x, w, o, -2);
    CHECK_EQ(eval(&op, &b, &r), RL_E_SHAPE);
    conv_g_call(&b, x, w, T(RL_DT_FLOAT32, 3, 6, 8, 9), 2); /* batch 3 out of batch 2 */
    CHECK_EQ(eval(&op, &b, &r), RL_E_SHAPE);
    conv_g_call(&b, x, w, T(RL_DT_FLOAT32, 2, 5, 8, 9), 2); /* 5 outputs from a weight of 6 */
    CHECK_EQ(eval(&op, &b, &r), RL_E_SHAPE);
    /* 5 output channels do not split into 2 groups */
    conv_g_call(&b, x, T(RL_DT_FLOAT32, 5, 2, 2, 4), T(RL_DT_FLOAT32, 2, 5, 8, 9), 2);
    CHECK_EQ(eval(&op, &b, &r), RL_E_SHAPE);
    /* a weight channel count that would overflow when multiplied by the groups */
    rl_tensor huge = w;
    huge.size[1] = INT64_MAX / 2 + 1;
    conv_g_call(&b, x, huge, o, 2);
    CHECK_EQ(eval(&op, &b, &r), RL_E_SHAPE);
    /* the groups argument absent: 1 group */
    conv_g_call(&b, x, T(RL_DT_FLOAT32, 6, 4, 2, 4), o, 2);
    b.c.nargs = 8;
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_EQ(r.matrix, 2ull * 2 * 72 * 8 * 6 * 4);
    /* depthwise (no groups argument): one group per input channel, weight (8, 1, 2, 4) */
    rl_op dw = OP(RL_K_CONV, RL_P_DEPTHWISE, 1);
    conv_g_call(&b, x, T(RL_DT_FLOAT32, 8, 1, 2, 4), T(RL_DT_FLOAT32, 2, 8, 8, 9), 5);
    CHECK_EQ(eval(&dw, &b, &r), RL_OK);
    CHECK_EQ(r.matrix, 2ull * 2 * 72 * 8 * 8 * 1);
    rl_op dwg = OP(RL_K_CONV, RL_P_DEPTHWISE, 1, RL_P_GROUPS, 8); /* a groups argument wins: 5 */
    CHECK_EQ(eval(&dwg, &b, &r), RL_E_SHAPE);
    /* transposed with 2 groups: x (2,4,9,12), weight (4, 6/2, 2, 4) -> (2,6,10,15); the kernel over x's extent */
    rl_tensor wt = T(RL_DT_FLOAT32, 4, 3, 2, 4), ot = T(RL_DT_FLOAT32, 2, 6, 10, 15);
    conv_g_call(&b, x, wt, ot, 2);
    b.c.args[6].i = 1;
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_EQ(r.matrix, 2ull * 2 * (9 * 12) * 8 * 4 * 3);
    b.o[0] = T(RL_DT_FLOAT32, 2, 5, 10, 15); /* 3 * 2 != 5 */
    CHECK_EQ(eval(&op, &b, &r), RL_E_SHAPE);
    b.o[0] = ot;
    b.t[1] = T(RL_DT_FLOAT32, 5, 3, 2, 4); /* weight's first dimension is C_in = 4 */
    CHECK_EQ(eval(&op, &b, &r), RL_E_SHAPE);
    b.t[1] = huge;
    b.t[1].size[0] = 4;
    CHECK_EQ(eval(&op, &b, &r), RL_E_SHAPE);
    /* the channel guard's boundary: a weight of INT64_MAX channels times 1 group is still compared (no refusal),
     * and the counts then overflow */
    rl_op one = OP(RL_K_CONV, RL_P_GROUPS, 8);
    conv_g_call(&b, T(RL_DT_FLOAT32, 1, INT64_MAX, 1), T(RL_DT_FLOAT32, 1, INT64_MAX, 1), T(RL_DT_FLOAT32, 1, 1, 1), 1);
    CHECK_EQ(eval(&one, &b, &r), RL_E_OVERFLOW);
    conv_g_call(&b, T(RL_DT_FLOAT32, 1, 1, 1), T(RL_DT_FLOAT32, 1, INT64_MAX, 1), T(RL_DT_FLOAT32, 1, INT64_MAX, 1), 1);
    b.c.args[6].i = 1;
    CHECK_EQ(eval(&op, &b, &r), RL_E_OVERFLOW);
    /* a bias parameter naming position 0 reads the tensor there */
    rl_op bias0 = OP(RL_K_CONV, RL_P_BIAS, 0);
    conv_g_call(&b, x, T(RL_DT_FLOAT32, 6, 4, 2, 4), o, 1);
    CHECK_EQ(eval(&bias0, &b, &r), RL_OK);
    CHECK_EQ(r.vector, 2 * 6 * 8 * 9);
    /* 3 input channels do not split into 2 groups */
    conv_g_call(&b, T(RL_DT_FLOAT32, 2, 3, 9, 12), T(RL_DT_FLOAT32, 3, 3, 2, 4), ot, 2);
    b.c.args[6].i = 1;
    CHECK_EQ(eval(&op, &b, &r), RL_E_SHAPE);
}

/* ---- pooling argument ranges ---------------------------------------------------------------------------------- */

static void test_pool_ranges(void) {
    builder b;
    rl_cost r;
    /* max_pool2d(input, kernel_size, stride, padding): kernel (3,2) over (1,2,9,8) -> (1,2,3,4) */
    rl_op op = OP(RL_K_POOL, RL_P_FLOPS, 1, RL_P_SPATIAL, 2, RL_P_KERNEL_SIZE, 1, RL_P_STRIDE, 2, RL_P_PADDING, 3);
    const int64_t k32[2] = {3, 2}, s11[2] = {1, 1}, p00[2] = {0, 0};
    init(&b);
    a_tensor(&b, T(RL_DT_FLOAT32, 1, 2, 9, 8));
    a_ints(&b, RL_ARG_INTLIST, 2, k32);
    a_ints(&b, RL_ARG_INTLIST, 2, s11);
    a_ints(&b, RL_ARG_INTLIST, 2, p00);
    out(&b, T(RL_DT_FLOAT32, 1, 2, 3, 4));
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    CHECK_EQ(r.vector, 24 * 6);
    static const struct {
        int arg, idx;
        int64_t v;
        int want;
    } cases[] = {{1, 1, 0, RL_E_VALUE}, {1, 0, -1, RL_E_VALUE}, {1, 1, 1, RL_OK}, {2, 1, 0, RL_E_VALUE},
                 {2, 0, -3, RL_E_VALUE}, {2, 1, 1, RL_OK}, {3, 1, -1, RL_E_VALUE}, {3, 0, 0, RL_OK},
                 {3, 1, 1, RL_OK}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int64_t saved = b.ints[b.c.args[cases[i].arg].first + cases[i].idx];
        b.ints[b.c.args[cases[i].arg].first + cases[i].idx] = cases[i].v;
        int st = eval(&op, &b, &r);
        CHECK_EQ(st, cases[i].want);
        if (st != cases[i].want) {
            fprintf(stderr, "  (case %zu)\n", i);
        }
        b.ints[b.c.args[cases[i].arg].first + cases[i].idx] = saved;
    }
    /* an entry beyond a list's count is not looked at */
    b.ints[6] = -9;
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    /* stride and padding as single ints; an empty stride list */
    b.c.args[2].type = RL_ARG_INT;
    b.c.args[2].i = 0;
    CHECK_EQ(eval(&op, &b, &r), RL_E_VALUE);
    b.c.args[2].i = 1;
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    b.c.args[3].type = RL_ARG_INT;
    b.c.args[3].i = -1;
    CHECK_EQ(eval(&op, &b, &r), RL_E_VALUE);
    b.c.args[3].i = 0;
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    b.c.args[2].type = RL_ARG_INTLIST;
    b.c.args[2].count = 0;
    CHECK_EQ(eval(&op, &b, &r), RL_OK);
    /* without stride and padding parameters their arguments are not checked */
    rl_op bare = OP(RL_K_POOL, RL_P_FLOPS, 1, RL_P_SPATIAL, 2, RL_P_KERNEL_SIZE, 1);
    b.c.args[2].type = RL_ARG_INT;
    b.c.args[2].i = 0;
    b.c.args[3].i = -4;
    CHECK_EQ(eval(&bare, &b, &r), RL_OK);
    CHECK_EQ(r.vector, 24 * 6);
    /* a spatial count beyond RL_MAX_DIMS reads as none */
    rl_op wide = bare;
    wide.param[RL_P_SPATIAL] = RL_MAX_DIMS + 1;
    CHECK_EQ(eval(&wide, &b, &r), RL_E_ARGS);
    wide.param[RL_P_SPATIAL] = -1;
    CHECK_EQ(eval(&wide, &b, &r), RL_E_ARGS);
}

int main(void) {
    test_dtype_table();
    test_numel_and_touched();
    test_copy_and_sum_overflow();
    test_zero_per_element_work_does_not_overflow();
    test_ewise();
    test_fill_zero_and_call_limits();
    test_ewise_in_and_foreach();
    test_mm_family();
    test_conv();
    test_conv_backward();
    test_attention_pairs();
    test_attention_layouts_and_backward();
    test_attention_shape_errors();
    test_attention_overflow();
    test_gather();
    test_pool();
    test_nll();
    test_mha();
    test_vocabulary();
    test_call_validation();
    test_training_flag();
    test_grouped_mm_layouts();
    test_conv_groups();
    test_pool_ranges();
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("all C cost branch tests passed\n");
    return 0;
}
