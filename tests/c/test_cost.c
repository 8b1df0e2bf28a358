/* Unit tests of the pure-C cost model (csrc/cost.c), built with sanitizers by tests/test_c_units.py.
 * Each expected value is derived by hand in the comment beside it. */
#include <stdio.h>
#include <string.h>

#include "cost.h"

static int failures = 0;

#define CHECK_EQ(got, want)                                                                                          \
    do {                                                                                                             \
        unsigned long long g_ = (unsigned long long)(got), w_ = (unsigned long long)(want);                          \
        if (g_ != w_) {                                                                                              \
            fprintf(stderr, "%s:%d: %s = %llu, want %llu\n", __FILE__, __LINE__, #got, g_, w_);                      \
            failures++;                                                                                              \
        }                                                                                                            \
    } while (0)

static rl_tensor tensor(int dtype, int ndim, const int64_t *size) {
    rl_tensor t;
    memset(&t, 0, sizeof(t));
    t.ndim = ndim;
    t.dtype = dtype;
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        t.size[d] = size[d];
        t.stride[d] = s;
        s = (int64_t)((uint64_t)s * (uint64_t)(size[d] > 0 ? size[d] : 1)); /* strides unused where this wraps */
    }
    return t;
}

static void set_tensor_arg(rl_call *c, int i, int ti) {
    c->args[i].type = RL_ARG_TENSOR;
    c->args[i].first = ti;
    c->args[i].count = 1;
}

static void test_mm(void) {
    rl_tensor in[2] = {tensor(RL_DT_BFLOAT16, 2, (int64_t[]){128, 256}), tensor(RL_DT_BFLOAT16, 2, (int64_t[]){256, 64})};
    rl_tensor out = tensor(RL_DT_BFLOAT16, 2, (int64_t[]){128, 64});
    rl_call c = {.nargs = 2, .tensors = in, .nouts = 1, .outs = &out};
    set_tensor_arg(&c, 0, 0);
    set_tensor_arg(&c, 1, 1);
    rl_op op = {.kind = RL_K_MM, .flags = RL_OPF_FCM};
    rl_cost r;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_OK);
    CHECK_EQ(r.matrix, 2ull * 128 * 64 * 256);               /* 2*M*N*K */
    CHECK_EQ(r.compat, 2ull * 128 * 64 * 256);
    CHECK_EQ(r.bytes_read, (128ull * 256 + 256 * 64) * 2); /* bf16 inputs */
    CHECK_EQ(r.bytes_written, 128ull * 64 * 2);
    CHECK_EQ(r.dtype, RL_DT_BFLOAT16);
    /* inner dimensions that differ are a shape error */
    in[1].size[0] = 255;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_E_SHAPE);
}

static void test_broadcast_and_inplace(void) {
    /* (4,3,8) += (3,8) broadcast to (4,3,8) with a stride-0 leading dim: reads 96 + 24 floats, writes 96 */
    rl_tensor in[2] = {tensor(RL_DT_FLOAT32, 3, (int64_t[]){4, 3, 8}), tensor(RL_DT_FLOAT32, 3, (int64_t[]){4, 3, 8})};
    in[1].stride[0] = 0;
    rl_call c = {.nargs = 2, .tensors = in, .nouts = 1, .outs = &in[0]};
    set_tensor_arg(&c, 0, 0);
    set_tensor_arg(&c, 1, 1);
    rl_op op = {.kind = RL_K_EWISE, .p1 = 1, .write_mask = 1};
    rl_cost r;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_OK);
    CHECK_EQ(r.vector, 96);
    CHECK_EQ(r.bytes_read, (96 + 24) * 4);
    CHECK_EQ(r.bytes_written, 96 * 4); /* in place: self written once, the returned alias not again */
}

static void test_zero_size_and_views(void) {
    rl_tensor in = tensor(RL_DT_FLOAT32, 2, (int64_t[]){0, 5});
    rl_call c = {.nargs = 1, .tensors = &in, .nouts = 1, .outs = &in};
    set_tensor_arg(&c, 0, 0);
    rl_op ew = {.kind = RL_K_EWISE, .p1 = 1};
    rl_cost r;
    CHECK_EQ(rl_cost_eval(&ew, &c, &r), RL_OK);
    CHECK_EQ(r.vector + r.bytes_read + r.bytes_written, 0);
    rl_tensor big = tensor(RL_DT_FLOAT32, 2, (int64_t[]){1000, 1000});
    rl_call v = {.nargs = 1, .tensors = &big, .nouts = 1, .outs = &big};
    set_tensor_arg(&v, 0, 0);
    rl_op view = {.kind = RL_K_ZERO};
    CHECK_EQ(rl_cost_eval(&view, &v, &r), RL_OK);
    CHECK_EQ(r.bytes_read + r.bytes_written + r.vector + r.matrix, 0);
}

static void test_overflow(void) {
    /* (2^40 x 2^40) @ (2^40 x 2^40): 2 * 2^120 FLOPs does not fit in 64 bits */
    int64_t s = (int64_t)1 << 40;
    rl_tensor in[2] = {tensor(RL_DT_FLOAT32, 2, (int64_t[]){s, s}), tensor(RL_DT_FLOAT32, 2, (int64_t[]){s, s})};
    rl_call c = {.nargs = 2, .tensors = in, .nouts = 1, .outs = &in[0]};
    set_tensor_arg(&c, 0, 0);
    set_tensor_arg(&c, 1, 1);
    rl_op op = {.kind = RL_K_MM};
    rl_cost r;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_E_OVERFLOW);
}

static void test_causal_attention(void) {
    /* q,k,v (1, 2, 8, 4), is_causal at position 4: pairs = 8*9/2 = 36 per head, 72 in all */
    rl_tensor in[3];
    for (int i = 0; i < 3; i++) {
        in[i] = tensor(RL_DT_FLOAT16, 4, (int64_t[]){1, 2, 8, 4});
    }
    rl_tensor out = in[0];
    rl_call c = {.nargs = 5, .tensors = in, .nouts = 1, .outs = &out};
    for (int i = 0; i < 3; i++) {
        set_tensor_arg(&c, i, i);
    }
    c.args[3].type = RL_ARG_FLOAT;
    c.args[4].type = RL_ARG_BOOL;
    c.args[4].i = 1;
    rl_op op = {.kind = RL_K_ATTN, .p1 = 0 | (4 << RL_ATTN_CAUSAL_SHIFT) | RL_ATTN_FCM};
    rl_cost r;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_OK);
    CHECK_EQ(r.matrix, 2ull * 72 * (4 + 4));       /* QK^T and PV over the unmasked pairs */
    CHECK_EQ(r.compat, 2ull * 1 * 2 * 8 * 8 * (4 + 4)); /* FlopCounterMode: the full 8x8 score matrix */
    CHECK_EQ(r.special, 72);                       /* one exp per pair */
    /* grouped-query attention: 2 KV heads for 4 query heads is fine, 3 is not */
    in[0].size[1] = 4;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_OK);
    in[0].size[1] = 3;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_E_SHAPE);
}

static void test_missing_args(void) {
    rl_call c = {.nargs = 0};
    rl_op op = {.kind = RL_K_CONV};
    rl_cost r;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_E_ARGS);
    op.kind = RL_K_COUNT + 5;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_E_KIND);
    CHECK_EQ(rl_dtype_itemsize(RL_DT_COUNT + 1), 0);
}

int main(void) {
    test_mm();
    test_broadcast_and_inplace();
    test_zero_size_and_views();
    test_overflow();
    test_causal_attention();
    test_missing_args();
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("all C cost tests passed\n");
    return 0;
}
