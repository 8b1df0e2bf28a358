/* Op cost model: op kind + argument shapes/strides/dtypes -> FLOPs and compulsory bytes.
 *
 * Pure C11: no Python.h. Counting conventions (see docs/concepts.md):
 *   - one FLOP is one floating-point add or multiply; a fused multiply-add is 2; a matrix product is 2*M*N*K;
 *   - matrix FLOPs come from products (mm family, convolutions, attention); vector FLOPs from everything else;
 *     transcendental functions (exp, log, tanh, erf, sqrt, random draws, ...) are counted once each in a separate
 *     `special` counter, not in the vector FLOPs;
 *   - bytes are compulsory traffic: each tensor read once at the size it occupies (a broadcast operand at its
 *     un-expanded size), each result written once; views move nothing; gathers read what they gather.
 * All counts are uint64; any overflow is detected and reported as RL_E_OVERFLOW, never wrapped. */
#ifndef RL_COST_H
#define RL_COST_H

#include <stdint.h>

#define RL_MAX_DIMS 16
#define RL_MAX_ARGS 40

#include "rl_dtype.h"

/* Size in bytes of one element of `dt`, 0 for RL_DT_UNKNOWN. */
unsigned rl_dtype_itemsize(int dt);
/* Canonical (torch-style) name of `dt`, e.g. "bfloat16"; "unknown" for out-of-range values. Static storage. */
const char *rl_dtype_name(int dt);

/* A tensor as the cost model sees it. `stride` is in elements; a stride of 0 marks a broadcast dimension. */
typedef struct {
    int32_t ndim;
    int32_t dtype; /* rl_dtype */
    int64_t size[RL_MAX_DIMS];
    int64_t stride[RL_MAX_DIMS];
} rl_tensor;

typedef enum {
    RL_ARG_ABSENT = 0, /* not passed: the formula uses the schema default */
    RL_ARG_NONE,
    RL_ARG_TENSOR,     /* tensors[first] */
    RL_ARG_TENSORLIST, /* tensors[first .. first+count) (None entries are skipped) */
    RL_ARG_INT,        /* i */
    RL_ARG_FLOAT,      /* f */
    RL_ARG_BOOL,       /* i (0 or 1) */
    RL_ARG_INTLIST,    /* ints[first .. first+count) */
    RL_ARG_BOOLLIST,   /* ints[first .. first+count) */
    RL_ARG_OTHER       /* a value the cost model does not interpret (dtype, device, string, ...) */
} rl_argtype;

typedef struct {
    int32_t type; /* rl_argtype */
    int32_t first;
    int32_t count;
    int64_t i;
    double f;
} rl_arg;

/* One op call: positional arguments in schema order (keyword-only arguments appended in schema order by the
 * caller), the tensors they refer to, and the op's outputs flattened. The struct does not own the arrays. */
typedef struct {
    int32_t nargs;
    rl_arg args[RL_MAX_ARGS];
    const rl_tensor *tensors;
    const int64_t *ints;
    int32_t nouts;
    const rl_tensor *outs;
} rl_call;

/* Cost kinds. A registry (Python side, roofline/_registry.py) maps each op to a kind and its parameters. */
typedef enum {
    RL_K_ZERO = 0,   /* views, metadata, allocation without initialisation: 0 FLOPs, 0 bytes */
    RL_K_COPY,       /* data movement, no FLOPs (copy, cast, cat, pad, ...) */
    RL_K_FILL,       /* writes its result without reading inputs (zeros, ones, fill_, random draws) */
    RL_K_EWISE,      /* p1 vector FLOPs and p2 special ops per element of the result */
    RL_K_EWISE_IN,   /* p1 / p2 per element of the first tensor argument (norms, softmax, reductions) */
    RL_K_MM,         /* mm(a, b) */
    RL_K_ADDMM,      /* addmm(bias, a, b): matrix 2MNK + vector M*N for the bias add */
    RL_K_BMM,        /* bmm(a, b) */
    RL_K_BADDBMM,    /* baddbmm(self, a, b) */
    RL_K_SCALED_MM,  /* _scaled_mm(a, b, scale_a, scale_b, bias?, ...) */
    RL_K_CONV,       /* convolution(x, w, bias, stride, padding, dilation, transposed, output_padding, groups);
                        p1 = position of `transposed` (-1: never transposed, -2: always), p2 packs the positions of
                        `bias` and `groups`, see RL_CONV_* */
    RL_K_CONV_BWD,   /* convolution_backward(grad_out, x, w, bias_sizes, ..., transposed, ..., groups, mask) */
    RL_K_ATTN,       /* fused attention forward; p1 packs argument positions and flags, see RL_ATTN_* */
    RL_K_ATTN_BWD,   /* fused attention backward */
    RL_K_GATHER,     /* arg 0 is the source: reads the other tensor arguments and only the gathered elements
                        (= result size) of the source */
    RL_K_POOL,       /* p1 FLOPs per window tap; p2 packs the spatial dims and argument positions, see RL_POOL_*; the
                        window count is the smaller of numel(arg 0) and numel(result) (forward: result; backward:
                        grad). Kernel sizes and strides must be positive, paddings non-negative. */
    RL_K_NLL,        /* nll_loss: p1 = position of target, p2 = vector FLOPs per target; forward (target at 1)
                        reads target, weight and one element of input per target */
    RL_K_FOREACH,    /* _foreach_* and fused optimizers: p1/p2 per element of the first list */
    RL_K_MHA,        /* _native_multi_head_attention(q, k, v, embed_dim, num_head, qkv_w, qkv_b, proj_w, proj_b,
                        mask, need_weights, ...): in-projections, attention, out-projection */
    RL_K_COUNT
} rl_kind;

/* Packing of p1 for RL_K_ATTN / RL_K_ATTN_BWD (computed once per op from its schema). */
#define RL_ATTN_Q_SHIFT 0       /* bits 0-7: position of `query` */
#define RL_ATTN_CAUSAL_SHIFT 8  /* bits 8-15: position of `is_causal` / `custom_mask_type`, 0xff if none */
#define RL_ATTN_BSHD (1 << 16)  /* tensors laid out (batch, seq, heads, dim) instead of (batch, heads, seq, dim) */
#define RL_ATTN_MASKTYPE (1 << 17) /* the causal argument is a mask type (0 none, 1 top-left, 2 bottom-right) */
#define RL_ATTN_FCM (1 << 18)   /* FlopCounterMode registers this op (its count is kept in `compat`) */
#define RL_ATTN_FCM_BSHD (1 << 19) /* FlopCounterMode reads the shapes as (batch, seq, heads, dim) */
#define RL_ATTN_GRAD_SHIFT 20   /* bits 20-27: position of `grad_out` (backward) */

/* Packing of p2 for RL_K_CONV. Positions are stored plus one, 0 meaning the op has no such argument. */
#define RL_CONV_BIAS_SHIFT 0    /* bits 0-7: 1 + position of `bias` (0: the op takes no bias) */
#define RL_CONV_GROUPS_SHIFT 8  /* bits 8-15: 1 + position of `groups` (0: no groups argument, groups = 1) */
#define RL_CONV_DEPTHWISE (1 << 16) /* no groups argument: groups = input channels (depthwise convolution) */

/* Packing of p2 for RL_K_POOL. Positions are stored plus one, 0 meaning the op has no such argument. */
#define RL_POOL_SPATIAL_SHIFT 0 /* bits 0-7: number of spatial dimensions */
#define RL_POOL_KERNEL_SHIFT 8  /* bits 8-15: position of `kernel_size` (not plus one: it is required) */
#define RL_POOL_STRIDE_SHIFT 16 /* bits 16-23: 1 + position of `stride` (an empty list means stride = kernel) */
#define RL_POOL_PADDING_SHIFT 24 /* bits 24-31: 1 + position of `padding` */

/* Op-independent flags of a registry entry, also in rl_op. */
#define RL_OPF_FCM 1u /* FlopCounterMode registers this op: compat holds its count */
/* The op returns new tensors although it also writes arguments in place (training BatchNorm returns its output and
 * saved statistics and updates the running statistics): the outputs are counted as written as well as the
 * arguments. Without this flag an op that writes arguments returns aliases of them, which are not counted again. */
#define RL_OPF_FRESH_OUTS 2u
#define RL_OPF_OF_SHIFT 8 /* bits 8-15: 1 + position of the argument RL_K_EWISE_IN counts (0: the first tensor) */
/* bits 16-23: 1 + position of BatchNorm's `training` flag (0: none). When that argument is false, the arguments
 * updated in place (read and written, i.e. in write_mask but not in noread_mask) are only read, and the arguments
 * of noread_mask are read: the running statistics are used instead of updated. */
#define RL_OPF_TRAIN_SHIFT 16

/* A resolved op: kind, parameters, which arguments are not read (shape-only) and which are written in place. */
typedef struct {
    int32_t kind;
    int64_t p1;
    int64_t p2;
    uint64_t noread_mask; /* bit i: argument i is not read (only its shape is used) */
    uint64_t write_mask;  /* bit i: argument i is written in place; then the outputs are not counted again */
    uint32_t flags;       /* RL_OPF_* */
} rl_op;

/* The cost of one call. `compat` is the matrix FLOP count exactly as torch.utils.flop_counter.FlopCounterMode
 * computes it (0 for ops it does not register); `matrix` is the true count (it differs for causal attention and
 * grouped convolution backward, see docs/concepts.md). */
typedef struct {
    uint64_t matrix;
    uint64_t vector;
    uint64_t special;
    uint64_t bytes_read;
    uint64_t bytes_written;
    uint64_t compat;
    int32_t dtype; /* rl_dtype the op computes in */
} rl_cost;

typedef enum {
    RL_OK = 0,
    RL_E_OVERFLOW = 1, /* a count does not fit in 64 bits */
    RL_E_ARGS = 2,     /* an argument the formula needs is missing or of the wrong type */
    RL_E_SHAPE = 3,    /* shapes are inconsistent with the op (e.g. mm inner dimensions differ) */
    RL_E_KIND = 4,     /* unknown kind */
    RL_E_DIMS = 5,     /* a tensor has a negative size or an unsupported number of dimensions */
    RL_E_VALUE = 6     /* an integer argument is out of range (a kernel size or stride <= 0, a negative padding) */
} rl_status;

/* Human-readable text of a status. Static storage. */
const char *rl_status_str(int status);

/* Evaluate the cost of `call` under `op`. Writes *out (zeroed first) and returns RL_OK, or an rl_status on error
 * (then *out holds partial values that must not be used). Never reads beyond call->nargs / the arrays it
 * references; pure function, thread-safe. */
int rl_cost_eval(const rl_op *op, const rl_call *call, rl_cost *out);

/* Number of elements of t (product of sizes; 0 if any size is 0). Sets *overflow on overflow. */
uint64_t rl_numel(const rl_tensor *t, int *overflow);
/* Elements of t that exist in memory: sizes of broadcast (stride 0) dimensions count once. */
uint64_t rl_touched(const rl_tensor *t, int *overflow);

#endif
