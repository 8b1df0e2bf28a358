/* Unit tests of the pure-C cost model (csrc/cost.c), built with sanitizers by tests/test_c_units.py.
 * Each expected value is derived by hand in the comment beside it. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "cost.h"

/* An op of `kind` with parameters (param, value) pairs ending at -1; every value must be accepted by rl_op_set. */
static rl_op make_op(int kind, ...) {
    rl_op op;
    memset(&op, 0, sizeof(op));
    op.kind = kind;
    va_list ap;
    va_start(ap, kind);
    for (int p = va_arg(ap, int); p >= 0; p = va_arg(ap, int)) {
        int64_t v = va_arg(ap, int64_t);
        if (rl_op_set(&op, p, v) != RL_OK) {
            fprintf(stderr, "make_op: kind %d refuses parameter %d = %lld\n", kind, p, (long long)v);
            failures++;
        }
    }
    va_end(ap);
    return op;
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
    rl_op op = {.kind = RL_K_MM, .flags = RL_OPF_FLOP_COUNTER};
    rl_cost r;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_OK);
    CHECK_EQ(r.matrix, 2ull * 128 * 64 * 256);               /* 2*M*N*K */
    CHECK_EQ(r.flop_counter, 2ull * 128 * 64 * 256);
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
    rl_op op = make_op(RL_K_EWISE, RL_P_FLOPS, (int64_t)1, -1);
    op.write_mask = 1;
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
    rl_op ew = make_op(RL_K_EWISE, RL_P_FLOPS, (int64_t)1, -1);
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
    rl_op op = make_op(RL_K_ATTN, RL_P_QUERY, (int64_t)0, RL_P_IS_CAUSAL, (int64_t)4, -1);
    op.flags = RL_OPF_FLOP_COUNTER;
    rl_cost r;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_OK);
    CHECK_EQ(r.matrix, 2ull * 72 * (4 + 4));       /* QK^T and PV over the unmasked pairs */
    CHECK_EQ(r.flop_counter, 2ull * 1 * 2 * 8 * 8 * (4 + 4)); /* FlopCounterMode: the full 8x8 score matrix */
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

/* Training BatchNorm, _native_batch_norm_legit(input, weight, bias, running_mean, running_var, training, momentum,
 * eps) -> (out, save_mean, save_invstd): x (2,4,3,3) fp32 = 72 elements, four per-channel vectors of 4. */
static void test_batch_norm_training(void) {
    rl_tensor in[5] = {tensor(RL_DT_FLOAT32, 4, (int64_t[]){2, 4, 3, 3})};
    for (int i = 1; i < 5; i++) {
        in[i] = tensor(RL_DT_FLOAT32, 1, (int64_t[]){4});
    }
    rl_tensor outs[3] = {in[0], in[1], in[1]};
    rl_call c = {.nargs = 8, .tensors = in, .nouts = 3, .outs = outs};
    for (int i = 0; i < 5; i++) {
        set_tensor_arg(&c, i, i);
    }
    c.args[5].type = RL_ARG_BOOL;
    c.args[5].i = 1;
    c.args[6].type = RL_ARG_FLOAT;
    c.args[7].type = RL_ARG_FLOAT;
    rl_op op = make_op(RL_K_EWISE_IN, RL_P_FLOPS, (int64_t)8, RL_P_TRAINING, (int64_t)5, -1);
    op.write_mask = (1u << 3) | (1u << 4);
    op.flags = RL_OPF_FRESH_OUTS;
    rl_cost r;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_OK);
    CHECK_EQ(r.vector, 8 * 72);
    CHECK_EQ(r.bytes_read, (72 + 4 * 4) * 4);       /* input, weight, bias, running mean and var */
    CHECK_EQ(r.bytes_written, (72 + 4 + 4 + 4 + 4) * 4); /* out, save_mean, save_invstd + the two running stats */
    /* evaluation (training=False): the running statistics are read, not written */
    c.args[5].i = 0;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_OK);
    CHECK_EQ(r.bytes_read, (72 + 4 * 4) * 4);
    CHECK_EQ(r.bytes_written, (72 + 4 + 4) * 4);
    /* without the fresh-outputs flag the outputs would be taken for aliases of the running stats: the old count */
    c.args[5].i = 1;
    op.flags = 0;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_OK);
    CHECK_EQ(r.bytes_written, (4 + 4) * 4);
    /* out= overload: destinations out/save_mean/save_invstd at 8, 9, 10 are write-only (also in noread_mask); they
     * are written in evaluation too, and the returned aliases are not counted again */
    rl_tensor in2[8] = {in[0], in[1], in[2], in[3], in[4], in[0], in[1], in[1]};
    rl_call co = {.nargs = 11, .tensors = in2, .nouts = 3, .outs = outs};
    co.args[5] = c.args[5];
    co.args[6] = c.args[6];
    co.args[7] = c.args[7];
    for (int i = 0; i < 5; i++) {
        set_tensor_arg(&co, i, i);
    }
    for (int i = 0; i < 3; i++) {
        set_tensor_arg(&co, 8 + i, 5 + i);
    }
    rl_op opo = make_op(RL_K_EWISE_IN, RL_P_FLOPS, (int64_t)8, RL_P_TRAINING, (int64_t)5, -1);
    opo.write_mask = (1u << 3) | (1u << 4) | (7u << 8);
    opo.noread_mask = 7u << 8;
    co.args[5].i = 0;
    CHECK_EQ(rl_cost_eval(&opo, &co, &r), RL_OK);
    CHECK_EQ(r.bytes_read, (72 + 4 * 4) * 4);
    CHECK_EQ(r.bytes_written, (72 + 4 + 4) * 4);
    co.args[5].i = 1;
    CHECK_EQ(rl_cost_eval(&opo, &co, &r), RL_OK);
    CHECK_EQ(r.bytes_written, (72 + 4 + 4 + 4 + 4) * 4);
}

/* native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train,
 * eps, output_mask): running statistics (3, 4) are not read in training, read in evaluation. */
static void test_batch_norm_backward(void) {
    rl_tensor in[7] = {tensor(RL_DT_FLOAT32, 4, (int64_t[]){2, 4, 3, 3}), tensor(RL_DT_FLOAT32, 4, (int64_t[]){2, 4, 3, 3})};
    for (int i = 2; i < 7; i++) {
        in[i] = tensor(RL_DT_FLOAT32, 1, (int64_t[]){4});
    }
    rl_tensor outs[3] = {in[0], in[2], in[2]};
    rl_call c = {.nargs = 9, .tensors = in, .nouts = 3, .outs = outs};
    for (int i = 0; i < 7; i++) {
        set_tensor_arg(&c, i, i);
    }
    c.args[7].type = RL_ARG_BOOL;
    c.args[7].i = 1;
    c.args[8].type = RL_ARG_FLOAT;
    rl_op op = make_op(RL_K_EWISE_IN, RL_P_FLOPS, (int64_t)12, RL_P_TRAINING, (int64_t)7, -1);
    op.noread_mask = (1u << 3) | (1u << 4);
    rl_cost r;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_OK);
    CHECK_EQ(r.vector, 12 * 72);
    CHECK_EQ(r.bytes_read, (72 + 72 + 4 + 4 + 4) * 4); /* grad, input, weight, save_mean, save_invstd */
    CHECK_EQ(r.bytes_written, (72 + 4 + 4) * 4);     /* grad_input, grad_weight, grad_bias */
    c.args[7].i = 0;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_OK);
    CHECK_EQ(r.bytes_read, (72 + 72 + 4 * 5) * 4); /* + running mean and var */
}

/* convolution(x, w, bias, stride, padding, dilation, transposed, output_padding, groups): channel checks */
static void test_conv_channels(void) {
    rl_tensor in[3] = {tensor(RL_DT_FLOAT32, 4, (int64_t[]){1, 4, 8, 8}), tensor(RL_DT_FLOAT32, 4, (int64_t[]){6, 2, 3, 3}),
                       tensor(RL_DT_FLOAT32, 1, (int64_t[]){6})};
    rl_tensor out = tensor(RL_DT_FLOAT32, 4, (int64_t[]){1, 6, 6, 6});
    rl_call c = {.nargs = 9, .tensors = in, .nouts = 1, .outs = &out};
    for (int i = 0; i < 3; i++) {
        set_tensor_arg(&c, i, i);
    }
    for (int i = 3; i < 9; i++) {
        c.args[i].type = RL_ARG_NONE;
    }
    c.args[6].type = RL_ARG_BOOL;
    c.args[8].type = RL_ARG_INT;
    c.args[8].i = 2;
    rl_op op = make_op(RL_K_CONV, RL_P_TRANSPOSED, (int64_t)6, RL_P_BIAS, (int64_t)2, RL_P_GROUPS, (int64_t)8, -1);
    op.flags = RL_OPF_FLOP_COUNTER;
    rl_cost r;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_OK);
    CHECK_EQ(r.matrix, 2ull * 1 * 36 * 9 * 6 * 2); /* 2 * N * HoWo * KhKw * C_out * C_in/groups */
    CHECK_EQ(r.vector, 216);                       /* bias add per output element */
    c.args[8].i = 1; /* groups 1: the weight's 2 input channels do not match the 4 of x */
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_E_SHAPE);
    c.args[8].i = 0;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_E_SHAPE);
    c.args[8].i = 2;
    out.size[1] = 5; /* result channels must be the weight's 6 */
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_E_SHAPE);
    out.size[1] = 6;
    out.size[0] = 2; /* batch must match */
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_E_SHAPE);
    /* transposed: x (1,4,5,5), w (4,3,3,3), groups 2 -> 6 output channels, (1,6,7,7) */
    in[0] = tensor(RL_DT_FLOAT32, 4, (int64_t[]){1, 4, 5, 5});
    in[1] = tensor(RL_DT_FLOAT32, 4, (int64_t[]){4, 3, 3, 3});
    out = tensor(RL_DT_FLOAT32, 4, (int64_t[]){1, 6, 7, 7});
    c.args[6].i = 1;
    c.args[2].type = RL_ARG_NONE;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_OK);
    CHECK_EQ(r.matrix, 2ull * 1 * 25 * 9 * 4 * 3); /* FlopCounterMode's transposed count: x spatial */
    CHECK_EQ(r.vector, 0);
    out.size[1] = 3; /* w[1] * groups = 6 */
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_E_SHAPE);
    /* depthwise (no groups argument): x (1,3,8,8), w (6,1,3,3) -> (1,6,6,6) */
    rl_op dw = make_op(RL_K_CONV, RL_P_DEPTHWISE, (int64_t)1, -1);
    in[0] = tensor(RL_DT_FLOAT32, 4, (int64_t[]){1, 3, 8, 8});
    in[1] = tensor(RL_DT_FLOAT32, 4, (int64_t[]){6, 1, 3, 3});
    out = tensor(RL_DT_FLOAT32, 4, (int64_t[]){1, 6, 6, 6});
    rl_call cd = {.nargs = 2, .tensors = in, .nouts = 1, .outs = &out};
    set_tensor_arg(&cd, 0, 0);
    set_tensor_arg(&cd, 1, 1);
    CHECK_EQ(rl_cost_eval(&dw, &cd, &r), RL_OK);
    CHECK_EQ(r.matrix, 2ull * 36 * 9 * 6 * 1);
    in[1].size[1] = 2; /* 2 x 3 groups = 6 input channels, not 3 */
    CHECK_EQ(rl_cost_eval(&dw, &cd, &r), RL_E_SHAPE);
    /* no groups argument and not depthwise: groups 1, so w[1] must be all 3 input channels */
    rl_op plain = make_op(RL_K_CONV, -1);
    in[1].size[1] = 3;
    CHECK_EQ(rl_cost_eval(&plain, &cd, &r), RL_OK);
    in[1].size[1] = 1;
    CHECK_EQ(rl_cost_eval(&plain, &cd, &r), RL_E_SHAPE);
}

/* max_pool2d(self, kernel_size, stride, padding, ...): (1,1,4,4), 2x2 windows, stride 2 -> 4 windows x 4 taps */
static void test_pool_arguments(void) {
    rl_tensor in = tensor(RL_DT_FLOAT32, 4, (int64_t[]){1, 1, 4, 4});
    rl_tensor out = tensor(RL_DT_FLOAT32, 4, (int64_t[]){1, 1, 2, 2});
    int64_t ints[6] = {2, 2, 2, 2, 0, 0};
    rl_call c = {.nargs = 4, .tensors = &in, .ints = ints, .nouts = 1, .outs = &out};
    set_tensor_arg(&c, 0, 0);
    for (int i = 1; i < 4; i++) {
        c.args[i].type = RL_ARG_INTLIST;
        c.args[i].first = 2 * (i - 1);
        c.args[i].count = 2;
    }
    rl_op op = make_op(RL_K_POOL, RL_P_FLOPS, (int64_t)1, RL_P_SPATIAL, (int64_t)2, RL_P_KERNEL_SIZE, (int64_t)1,
                       RL_P_STRIDE, (int64_t)2, RL_P_PADDING, (int64_t)3, -1);
    rl_cost r;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_OK);
    CHECK_EQ(r.vector, 4 * 4);
    ints[1] = -2; /* negative kernel */
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_E_VALUE);
    ints[1] = 0;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_E_VALUE);
    ints[1] = 2;
    ints[3] = 0; /* zero stride */
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_E_VALUE);
    ints[3] = 2;
    ints[5] = -1; /* negative padding */
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_E_VALUE);
    ints[5] = 0;
    c.args[2].count = 0; /* empty stride: the kernel size, accepted */
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_OK);
}

static void test_invalid_tensors(void) {
    rl_tensor in = tensor(RL_DT_FLOAT32, 2, (int64_t[]){3, 4});
    rl_tensor out = in;
    rl_call c = {.nargs = 1, .tensors = &in, .nouts = 1, .outs = &out};
    set_tensor_arg(&c, 0, 0);
    rl_op op = make_op(RL_K_EWISE, RL_P_FLOPS, (int64_t)1, -1);
    rl_cost r;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_OK);
    CHECK_EQ(r.vector, 12);
    in.size[1] = -4; /* a negative size was counted as 0 elements before */
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_E_DIMS);
    in.size[1] = 4;
    in.ndim = RL_MAX_DIMS + 1;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_E_DIMS);
    in.ndim = 2;
    out.size[0] = -1;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_E_DIMS);
    out.size[0] = 3;
    out.ndim = -2; /* -1 is an absent output; below is malformed */
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_E_DIMS);
    out.ndim = 2;
    c.args[0].count = -1;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_E_ARGS);
    CHECK_EQ(rl_cost_eval(&op, &(rl_call){.nargs = 1, .args = {{RL_ARG_TENSOR, 0, 1, 0, 0.0}}}, &r), RL_E_ARGS);
}

/* convolution_backward(grad_out, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding,
 * groups, output_mask): x (1,4,8,8), w (6,2,3,3), groups 2, grad_out (1,6,6,6) */
static void test_conv_backward_channels(void) {
    rl_tensor in[3] = {tensor(RL_DT_FLOAT32, 4, (int64_t[]){1, 6, 6, 6}), tensor(RL_DT_FLOAT32, 4, (int64_t[]){1, 4, 8, 8}),
                       tensor(RL_DT_FLOAT32, 4, (int64_t[]){6, 2, 3, 3})};
    rl_tensor outs[3] = {in[1], in[2], tensor(RL_DT_FLOAT32, 1, (int64_t[]){6})};
    int64_t mask[3] = {1, 1, 0};
    rl_call c = {.nargs = 11, .tensors = in, .ints = mask, .nouts = 3, .outs = outs};
    for (int i = 0; i < 3; i++) {
        set_tensor_arg(&c, i, i);
    }
    for (int i = 3; i < 11; i++) {
        c.args[i].type = RL_ARG_NONE;
    }
    c.args[7].type = RL_ARG_BOOL;
    c.args[9].type = RL_ARG_INT;
    c.args[9].i = 2;
    c.args[10].type = RL_ARG_BOOLLIST;
    c.args[10].count = 3;
    outs[2].ndim = -1; /* grad_bias not computed */
    rl_op op = make_op(RL_K_CONV_BWD, RL_P_TRANSPOSED, (int64_t)7, RL_P_GROUPS, (int64_t)9, RL_P_OUTPUT_MASK,
                       (int64_t)10, -1);
    op.flags = RL_OPF_FLOP_COUNTER;
    rl_cost r;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_OK);
    /* grad_input 2 * N * HoWo * KhKw * C_out * C_in/g = 2*36*9*6*2; grad_weight the same pairs: 2*9*36*1*2*6 */
    CHECK_EQ(r.matrix, 2ull * 36 * 9 * 6 * 2 + 2ull * 9 * 36 * 1 * 2 * 6);
    CHECK_EQ(r.flop_counter, 2ull * 36 * 9 * 6 * 2 + 2ull * 9 * 36 * 1 * 4 * 6); /* FlopCounterMode: all 4 C_in */
    c.args[9].i = 1; /* groups 1: weight has 2 input channels for x's 4 */
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_E_SHAPE);
    c.args[9].i = 2;
    in[0].size[1] = 5; /* grad_out channels must be the weight's 6 */
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_E_SHAPE);
    in[0].size[1] = 6;
    in[0].size[0] = 2; /* batch */
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_E_SHAPE);
}

/* FlopCounterMode's count of a grouped convolution backward is `groups` times the true one, so it may overflow where
 * the true count does not: an op that does not report it (no RL_OPF_FLOP_COUNTER) must not fail on it. Depthwise 1-d
 * convolution, G = 2**32 channels and groups, length 1, kernel 1, batch 1; only grad_weight computed:
 *   true:            2 * N * L_out * K * (C_in / G) * C_out = 2 * 1 * 1 * 1 * 1 * 2**32 = 2**33
 *   FlopCounterMode: 2 * N * L_out * K * C_in * C_out       = 2 * 2**32 * 2**32       = 2**65 (overflows) */
static void test_conv_backward_unreported_count(void) {
    const int64_t g = (int64_t)1 << 32;
    rl_tensor in[3] = {tensor(RL_DT_FLOAT32, 3, (int64_t[]){1, g, 1}), tensor(RL_DT_FLOAT32, 3, (int64_t[]){1, g, 1}),
                       tensor(RL_DT_FLOAT32, 3, (int64_t[]){g, 1, 1})};
    rl_tensor outs[3] = {in[1], in[2], in[2]};
    outs[0].ndim = -1; /* grad_input and grad_bias not computed */
    outs[2].ndim = -1;
    int64_t mask[3] = {0, 1, 0};
    rl_call c = {.nargs = 5, .tensors = in, .ints = mask, .nouts = 3, .outs = outs};
    for (int i = 0; i < 3; i++) {
        set_tensor_arg(&c, i, i);
    }
    c.args[3].type = RL_ARG_INT;
    c.args[3].i = g;
    c.args[4].type = RL_ARG_BOOLLIST;
    c.args[4].count = 3;
    rl_op op = make_op(RL_K_CONV_BWD, RL_P_GROUPS, (int64_t)3, RL_P_OUTPUT_MASK, (int64_t)4, -1);
    rl_cost r;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_OK);
    CHECK_EQ(r.matrix, 1ull << 33);
    CHECK_EQ(r.flop_counter, 0);
    CHECK_EQ(r.vector, 0);
    CHECK_EQ(r.bytes_read, 2 * (4ull << 32)); /* grad_out and input, 2**32 floats each; the weight is not read */
    CHECK_EQ(r.bytes_written, 4ull << 32);    /* grad_weight */
    op.flags = RL_OPF_FLOP_COUNTER;            /* reported: 2**65 does not fit */
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_E_OVERFLOW);
}

/* The parameter vocabulary: a zeroed op has every argument absent; rl_op_set checks the kind and the range. */
static void test_op_params(void) {
    rl_op op;
    memset(&op, 0, sizeof(op));
    op.kind = RL_K_CONV;
    CHECK_EQ(rl_op_get(&op, RL_P_BIAS), (uint64_t)-1);     /* absent */
    CHECK_EQ(rl_op_get(&op, RL_P_DEPTHWISE), 0);
    CHECK_EQ(rl_op_set(&op, RL_P_BIAS, 0), RL_OK);
    CHECK_EQ(rl_op_get(&op, RL_P_BIAS), 0);
    CHECK_EQ(rl_op_set(&op, RL_P_BIAS, -1), RL_OK);         /* back to absent */
    CHECK_EQ(rl_op_get(&op, RL_P_BIAS), (uint64_t)-1);
    CHECK_EQ(rl_op_set(&op, RL_P_BIAS, RL_MAX_ARGS), RL_E_VALUE); /* positions 0..RL_MAX_ARGS-1 */
    CHECK_EQ(rl_op_set(&op, RL_P_BIAS, -2), RL_E_VALUE);
    CHECK_EQ(rl_op_set(&op, RL_P_DEPTHWISE, 2), RL_E_VALUE); /* a flag is 0 or 1 */
    CHECK_EQ(rl_op_set(&op, RL_P_QUERY, 1), RL_E_KIND);     /* an attention parameter */
    CHECK_EQ(rl_op_set(&op, RL_P_COUNT, 1), RL_E_KIND);
    CHECK_EQ(rl_op_set(&op, RL_P_TRAINING, 3), RL_OK);      /* every kind takes `training` */
    op.kind = RL_K_EWISE;
    CHECK_EQ(rl_op_set(&op, RL_P_FLOPS, -1), RL_E_VALUE);   /* counts are non-negative */
    CHECK_EQ(rl_op_set(&op, RL_P_FLOPS, INT64_MAX), RL_OK);
    CHECK_EQ(strcmp(rl_kind_name(RL_K_ATTN_BWD), "attn_bwd"), 0);
    CHECK_EQ(strcmp(rl_param_name(RL_P_MASK_TYPE), "custom_mask_type"), 0);
    CHECK_EQ(rl_kind_name(RL_K_COUNT) == NULL, 1);
    op.param[RL_P_OF] = INT64_MIN; /* a corrupt stored position reads as absent, without overflow */
    CHECK_EQ(rl_op_get(&op, RL_P_OF), (uint64_t)-1);
}

/* _grouped_mm, the four layouts (G = 3 groups, bf16): forward a (48,16) x b (3,16,32) -> (48,32); grad_a (48,32) x
 * (3,32,16) -> (48,16); grad_b (16,48) x (48,32) -> (3,16,32), the groups splitting K = 48; batched (3,16,16) x
 * (3,16,32). */
static void test_grouped_mm(void) {
    rl_tensor in[3] = {tensor(RL_DT_BFLOAT16, 2, (int64_t[]){48, 16}), tensor(RL_DT_BFLOAT16, 3, (int64_t[]){3, 16, 32}),
                       tensor(RL_DT_INT32, 1, (int64_t[]){3})};
    rl_tensor out = tensor(RL_DT_BFLOAT16, 2, (int64_t[]){48, 32});
    rl_call c = {.nargs = 3, .tensors = in, .nouts = 1, .outs = &out};
    for (int i = 0; i < 3; i++) {
        set_tensor_arg(&c, i, i);
    }
    rl_op op = make_op(RL_K_GROUPED_MM, RL_P_BIAS, (int64_t)3, -1);
    rl_cost r;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_OK);
    CHECK_EQ(r.matrix, 2ull * 48 * 16 * 32);                    /* each of the 48 rows meets one 16x32 expert */
    CHECK_EQ(r.vector, 0);                                      /* no bias argument passed */
    CHECK_EQ(r.bytes_read, 48 * 16 * 2 + 3 * 16 * 32 * 2 + 3 * 4); /* a, b, offs */
    CHECK_EQ(r.bytes_written, 48 * 32 * 2);
    CHECK_EQ(r.flop_counter, 0);                                /* FlopCounterMode has no formula for it */
    CHECK_EQ(r.dtype, RL_DT_BFLOAT16);
    /* grad_b: (16, 48) x (48, 32) -> (3, 16, 32): K = 48 split into the groups, 2 * 16 * 48 * 32 in all */
    in[0] = tensor(RL_DT_BFLOAT16, 2, (int64_t[]){16, 48});
    in[1] = tensor(RL_DT_BFLOAT16, 2, (int64_t[]){48, 32});
    out = tensor(RL_DT_BFLOAT16, 3, (int64_t[]){3, 16, 32});
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_OK);
    CHECK_EQ(r.matrix, 2ull * 16 * 48 * 32);
    /* (G, M, K) x (K, total_N): (3, 16, 16) x (16, 96) -> (16, 96): 2 * 16 * 16 * 96 */
    in[0] = tensor(RL_DT_BFLOAT16, 3, (int64_t[]){3, 16, 16});
    in[1] = tensor(RL_DT_BFLOAT16, 2, (int64_t[]){16, 96});
    out = tensor(RL_DT_BFLOAT16, 2, (int64_t[]){16, 96});
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_OK);
    CHECK_EQ(r.matrix, 2ull * 16 * 16 * 96);
    /* batched: (3, 16, 16) x (3, 16, 32) -> (3, 16, 32), with a bias (3, 32): 2 * 3 * 16 * 16 * 32, 3*16*32 adds */
    in[1] = tensor(RL_DT_BFLOAT16, 3, (int64_t[]){3, 16, 32});
    in[2] = tensor(RL_DT_BFLOAT16, 2, (int64_t[]){3, 32});
    out = tensor(RL_DT_BFLOAT16, 3, (int64_t[]){3, 16, 32});
    rl_call cb = {.nargs = 4, .tensors = in, .nouts = 1, .outs = &out};
    set_tensor_arg(&cb, 0, 0);
    set_tensor_arg(&cb, 1, 1);
    cb.args[2].type = RL_ARG_NONE; /* offs */
    set_tensor_arg(&cb, 3, 2);
    CHECK_EQ(rl_cost_eval(&op, &cb, &r), RL_OK);
    CHECK_EQ(r.matrix, 2ull * 3 * 16 * 16 * 32);
    CHECK_EQ(r.vector, 3 * 16 * 32);
    in[1].size[0] = 2; /* 2 groups of b for 3 of a */
    CHECK_EQ(rl_cost_eval(&op, &cb, &r), RL_E_SHAPE);
    in[1].size[0] = 3;
    in[1].size[1] = 8; /* K differs */
    CHECK_EQ(rl_cost_eval(&op, &cb, &r), RL_E_SHAPE);
    in[1].ndim = 4;
    CHECK_EQ(rl_cost_eval(&op, &cb, &r), RL_E_ARGS);
}

/* FFT (5 N log2 N real FLOPs per complex transform of N points, half that with a real side): rfft of (4, 64)
 * float32 over dim 1 is 4 signals x 2.5 x 64 x log2 64 = 3840 FLOPs, reading 4*64*4 bytes and writing the (4, 33)
 * complex64 half spectrum, 4*33*8 bytes. */
static void test_fft(void) {
    int64_t dims[2] = {1, 0};
    rl_tensor in = tensor(RL_DT_FLOAT32, 2, (int64_t[]){4, 64});
    rl_tensor out = tensor(RL_DT_COMPLEX64, 2, (int64_t[]){4, 33});
    rl_call c = {.nargs = 3, .tensors = &in, .ints = dims, .nouts = 1, .outs = &out};
    set_tensor_arg(&c, 0, 0);
    c.args[1] = (rl_arg){RL_ARG_INTLIST, 0, 1, 0, 0.0}; /* dim = [1] */
    c.args[2] = (rl_arg){RL_ARG_INT, 0, 0, 0, 0.0};     /* normalization: none */
    rl_op op = make_op(RL_K_FFT, RL_P_DIM, (int64_t)1, RL_P_NORMALIZATION, (int64_t)2, -1);
    rl_cost r;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_OK);
    CHECK_EQ(r.vector, 3840);
    CHECK_EQ(r.matrix, 0);
    CHECK_EQ(r.bytes_read, 4 * 64 * 4);
    CHECK_EQ(r.bytes_written, 4 * 33 * 8);
    CHECK_EQ(r.dtype, RL_DT_FLOAT32);
    /* c2r back, scaled by 1/n: the full side is now the real output (4, 64); 3840 + one multiply per output */
    in = tensor(RL_DT_COMPLEX64, 2, (int64_t[]){4, 33});
    out = tensor(RL_DT_FLOAT32, 2, (int64_t[]){4, 64});
    c.args[2].i = 2;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_OK);
    CHECK_EQ(r.vector, 3840 + 256);
    /* c2c of (8, 16) complex128 over dims [0, -1]: one signal of N = 128 points, 5 x 128 x 7 = 4480, plus 2
     * multiplies per complex output (128 of them) when normalized */
    dims[0] = 0;
    dims[1] = -1;
    in = tensor(RL_DT_COMPLEX128, 2, (int64_t[]){8, 16});
    out = in;
    c.args[1].count = 2;
    c.args[2].i = 0;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_OK);
    CHECK_EQ(r.vector, 4480);
    CHECK_EQ(r.dtype, RL_DT_FLOAT64);
    CHECK_EQ(r.bytes_read, 8 * 16 * 16);
    c.args[2].i = 1;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_OK);
    CHECK_EQ(r.vector, 4480 + 2 * 128);
    /* a dimension named twice, one out of range: shape errors; both sides real: not a transform */
    dims[1] = 0;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_E_SHAPE);
    dims[1] = 2;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_E_SHAPE);
    dims[1] = 1;
    in = tensor(RL_DT_FLOAT32, 2, (int64_t[]){8, 16});
    out = in;
    CHECK_EQ(rl_cost_eval(&op, &c, &r), RL_E_ARGS);
}

int main(void) {
    test_op_params();
    test_fft();
    test_grouped_mm();
    test_mm();
    test_broadcast_and_inplace();
    test_zero_size_and_views();
    test_overflow();
    test_causal_attention();
    test_missing_args();
    test_batch_norm_training();
    test_batch_norm_backward();
    test_conv_channels();
    test_pool_arguments();
    test_invalid_tensors();
    test_conv_backward_channels();
    test_conv_backward_unreported_count();
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("all C cost tests passed\n");
    return 0;
}
