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

/* ---- the op-kind vocabulary ------------------------------------------------------------------------------
 * The one definition of the cost kinds and of their named parameters. The binding exports it
 * (roofline._core.kind_table(), the K_* constants) and roofline/_counting/_registry.py builds on that, so a kind or a
 * parameter is added here and nowhere else.
 *
 * Parameter types: RL_PT_COUNT, a count the registry entry gives (0 .. INT64_MAX); RL_PT_FLAG, 0 or 1;
 * RL_PT_ARG / RL_PT_ARG_REQUIRED, the position of an argument (0 .. RL_MAX_ARGS-1; -1: the op has no such
 * argument), found in the op's schema by the name in the fourth column unless the registry entry names another
 * argument (no name: the entry must give one, else the parameter is absent). A required argument missing from the
 * schema is an error when the entry is compiled.
 *
 * X(ID, "name", type, "schema argument name" or NULL) */
#define RL_PARAMS(X)                                                                                                 \
    X(FLOPS, "flops", RL_PT_COUNT, NULL)     /* vector FLOPs per element (pool: per window tap) */                   \
    X(SPECIAL, "special", RL_PT_COUNT, NULL) /* special-function evaluations per element */                          \
    X(OF, "of", RL_PT_ARG, NULL)             /* the argument whose elements are counted (absent: the first tensor) */ \
    X(TRAINING, "training", RL_PT_ARG, NULL) /* BatchNorm's `training` flag, see generic_bytes in cost.c */          \
    X(TRANSPOSED, "transposed", RL_PT_ARG, "transposed")  /* bool: a transposed convolution */                    \
    X(ALWAYS_TRANSPOSED, "always_transposed", RL_PT_FLAG, NULL) /* the op is a transposed convolution */             \
    X(BIAS, "bias", RL_PT_ARG, "bias")                                                                               \
    X(GROUPS, "groups", RL_PT_ARG, "groups")           /* absent: 1 group */                                       \
    X(DEPTHWISE, "depthwise", RL_PT_FLAG, NULL)        /* no groups argument: one group per input channel */        \
    X(OUTPUT_MASK, "output_mask", RL_PT_ARG, "output_mask") /* bool list: which gradients are computed */          \
    X(QUERY, "query", RL_PT_ARG_REQUIRED, "query")     /* key and value follow it */                                \
    X(IS_CAUSAL, "is_causal", RL_PT_ARG, "is_causal")  /* bool: causal mask aligned top-left */                     \
    X(MASK_TYPE, "custom_mask_type", RL_PT_ARG, "custom_mask_type") /* int: 0 none, 1 top-left, 2 bottom-right */  \
    X(BSHD, "bshd", RL_PT_FLAG, NULL)                  /* (batch, seq, heads, dim) instead of (batch, heads, ...) */ \
    X(FLOP_COUNTER_BSHD, "flop_counter_bshd", RL_PT_FLAG, NULL) /* FlopCounterMode reads the shapes that way */     \
    X(EMBED_DIM, "embed_dim", RL_PT_ARG_REQUIRED, "embed_dim")                                                      \
    X(NUM_HEADS, "num_head", RL_PT_ARG_REQUIRED, "num_head")                                                        \
    X(SPATIAL, "spatial", RL_PT_COUNT, NULL)           /* number of spatial dimensions */                           \
    X(KERNEL_SIZE, "kernel_size", RL_PT_ARG_REQUIRED, "kernel_size")                                                \
    X(STRIDE, "stride", RL_PT_ARG, "stride")           /* an empty list means stride = kernel */                    \
    X(PADDING, "padding", RL_PT_ARG, "padding")                                                                      \
    X(TARGET, "target", RL_PT_ARG_REQUIRED, "target")  /* at position 1 (forward) the input is gathered */          \
    X(PER_TARGET, "per_target", RL_PT_COUNT, NULL)     /* vector FLOPs per target */                                \
    X(DIM, "dim", RL_PT_ARG_REQUIRED, "dim")           /* int list: the dimensions an FFT transforms */             \
    X(NORMALIZATION, "normalization", RL_PT_ARG, "normalization") /* int: 0 none, else a scale per output */

typedef enum { RL_PT_COUNT = 0, RL_PT_FLAG, RL_PT_ARG, RL_PT_ARG_REQUIRED } rl_ptype;

#define RL_PARAM_ENUM_(id, name, type, argname) RL_P_##id,
typedef enum { RL_PARAMS(RL_PARAM_ENUM_) RL_P_COUNT } rl_param;
#undef RL_PARAM_ENUM_

/* Bit of parameter RL_P_<id> in a kind's parameter set. */
#define RL_P(id) (UINT64_C(1) << RL_P_##id)
#define RL_P_PER_ELEMENT (RL_P(FLOPS) | RL_P(SPECIAL))
#define RL_P_CONV_ARGS (RL_P(TRANSPOSED) | RL_P(GROUPS))
#define RL_P_ATTN_ARGS (RL_P(QUERY) | RL_P(IS_CAUSAL) | RL_P(MASK_TYPE) | RL_P(BSHD) | RL_P(FLOP_COUNTER_BSHD))

/* The cost kinds. Values are stored in records and saved reports: append, never renumber. Every kind also takes
 * RL_P_TRAINING. X(ID, "name", parameters, formula): the formula, a function of cost.c with the signature
 * int formula(const rl_op *, const rl_call *, rl_cost *, int *overflow), returns an rl_status.
 *   ZERO       views, metadata, allocation without initialisation: 0 FLOPs, 0 bytes
 *   COPY       data movement, no FLOPs (copy, cast, cat, pad, ...)
 *   FILL       writes its result without reading inputs (zeros, fill_, random draws): flops/special per element
 *   EWISE      flops vector FLOPs and special special ops per element of the result
 *   EWISE_IN   the same per element of the first tensor argument, or of `of` (norms, softmax, reductions)
 *   MM, ADDMM, BMM, BADDBMM, SCALED_MM   mm(a, b), addmm(bias, a, b), bmm, baddbmm(self, a, b), _scaled_mm(a, b, ...)
 *   CONV       convolution(x, w, bias, ...): true count and FlopCounterMode's
 *   CONV_BWD   convolution_backward(grad_out, x, w, ...)
 *   ATTN, ATTN_BWD   fused attention forward and backward (causal masks, layouts, grouped-query)
 *   GATHER     arg 0 is the source: reads the other arguments and the gathered elements (= result size) of it
 *   POOL       flops per window tap; windows = the smaller of numel(arg 0) and numel(result)
 *   NLL        nll_loss forward (target at 1: reads target, weight and one input element per target) and backward
 *   FOREACH    _foreach_* and fused optimizers: flops/special per element of the first list
 *   MHA        _native_multi_head_attention(q, k, v, embed_dim, num_head, ...): projections and attention
 *   GROUPED_MM _grouped_mm(a, b, offs, bias, ...): one product per group (mixture-of-experts layers)
 *   FFT        _fft_r2c / _fft_c2r / _fft_c2c(x, dim, normalization, ...): 5 N log2 N per complex transform */
#define RL_KINDS(X)                                                                                                  \
    X(ZERO, "zero", 0, cost_zero)                                                                                    \
    X(COPY, "copy", 0, cost_copy)                                                                                    \
    X(FILL, "fill", RL_P_PER_ELEMENT, cost_ewise)                                                                    \
    X(EWISE, "ewise", RL_P_PER_ELEMENT, cost_ewise)                                                                  \
    X(EWISE_IN, "ewise_in", RL_P_PER_ELEMENT | RL_P(OF), cost_ewise_in)                                              \
    X(MM, "mm", 0, cost_mm)                                                                                          \
    X(ADDMM, "addmm", 0, cost_mm)                                                                                    \
    X(BMM, "bmm", 0, cost_mm)                                                                                        \
    X(BADDBMM, "baddbmm", 0, cost_mm)                                                                                \
    X(SCALED_MM, "scaled_mm", 0, cost_mm)                                                                            \
    X(CONV, "conv", RL_P_CONV_ARGS | RL_P(ALWAYS_TRANSPOSED) | RL_P(BIAS) | RL_P(DEPTHWISE), cost_conv)               \
    X(CONV_BWD, "conv_bwd", RL_P_CONV_ARGS | RL_P(OUTPUT_MASK), cost_conv_bwd)                                       \
    X(ATTN, "attn", RL_P_ATTN_ARGS, cost_attn)                                                                       \
    X(ATTN_BWD, "attn_bwd", RL_P_ATTN_ARGS, cost_attn_bwd)                                                           \
    X(GATHER, "gather", 0, cost_gather)                                                                              \
    X(POOL, "pool", RL_P(FLOPS) | RL_P(SPATIAL) | RL_P(KERNEL_SIZE) | RL_P(STRIDE) | RL_P(PADDING), cost_pool)       \
    X(NLL, "nll", RL_P(TARGET) | RL_P(PER_TARGET), cost_nll)                                                         \
    X(FOREACH, "foreach", RL_P_PER_ELEMENT | RL_P(OF), cost_ewise_in)                                                \
    X(MHA, "mha", RL_P(EMBED_DIM) | RL_P(NUM_HEADS), cost_mha)                                                       \
    X(GROUPED_MM, "grouped_mm", RL_P(BIAS), cost_grouped_mm)                                                      \
    X(FFT, "fft", RL_P(DIM) | RL_P(NORMALIZATION), cost_fft)

#define RL_KIND_ENUM_(id, name, params, formula) RL_K_##id,
typedef enum { RL_KINDS(RL_KIND_ENUM_) RL_K_COUNT } rl_kind;
#undef RL_KIND_ENUM_

/* Op-independent flags of a registry entry (rl_op.flags). */
#define RL_OPF_FLOP_COUNTER 1u /* FlopCounterMode registers this op: rl_cost.flop_counter holds its count */
/* The op returns new tensors although it also writes arguments in place (training BatchNorm returns its output and
 * saved statistics and updates the running statistics): the outputs are counted as written as well as the
 * arguments. Without this flag an op that writes arguments returns aliases of them, which are not counted again. */
#define RL_OPF_FRESH_OUTS 2u

/* A resolved op: kind, parameters, which arguments are not read (shape-only) and which are written in place. A
 * zeroed rl_op has every parameter at its default (counts and flags 0, arguments absent); set parameters with
 * rl_op_set. */
typedef struct {
    int32_t kind;
    uint32_t flags;       /* RL_OPF_* */
    uint64_t noread_mask; /* bit i: argument i is not read (only its shape is used) */
    uint64_t write_mask;  /* bit i: argument i is written in place; then the outputs are not counted again */
    int64_t param[RL_P_COUNT]; /* by rl_param; read through rl_op_get (argument positions are stored plus one) */
} rl_op;

/* Name, type and schema argument name (NULL if none) of a parameter; NULL name for an out-of-range id. */
const char *rl_param_name(int param);
int rl_param_type(int param); /* rl_ptype, -1 for an out-of-range id */
const char *rl_param_argname(int param);
/* Range of a parameter's values: counts 0..INT64_MAX, flags 0..1, argument positions -1..RL_MAX_ARGS-1. */
void rl_param_range(int param, int64_t *lo, int64_t *hi);
/* Name of a kind (NULL when out of range) and the set of parameters it takes (RL_P bits; RL_P(TRAINING) always). */
const char *rl_kind_name(int kind);
uint64_t rl_kind_params(int kind);

/* Unmasked (query, key) pairs of one head of one sequence of sq queries over sk keys. mask: 0 none, 1 causal aligned
 * top-left (query i sees keys 0..i), 2 causal aligned bottom-right (query i sees keys 0..i+sk-sq). *overflow is set
 * when the count does not fit 64 bits. The one definition: roofline's Python formulas and roofline.llm call it. */
uint64_t rl_attention_pairs(uint64_t sq, uint64_t sk, int mask, int *overflow);
/* Set parameter `param` of `op` (whose kind is set) to `value`: RL_OK, RL_E_KIND when the kind has no such
 * parameter, RL_E_VALUE when the value is out of its range. */
int rl_op_set(rl_op *op, int param, int64_t value);
/* A parameter's value (-1 for an absent argument); 0 for an unknown parameter. */
int64_t rl_op_get(const rl_op *op, int param);

/* The cost of one call. `flop_counter` is the matrix FLOP count exactly as torch.utils.flop_counter.FlopCounterMode
 * computes it (0 for ops it does not register); `matrix` is the true count (it differs for causal attention and
 * grouped convolution backward, see docs/concepts.md). */
typedef struct {
    uint64_t matrix;
    uint64_t vector;
    uint64_t special;
    uint64_t bytes_read;
    uint64_t bytes_written;
    uint64_t flop_counter;
    int32_t dtype; /* rl_dtype the op computes in */
} rl_cost;

typedef enum {
    RL_OK = 0,
    RL_E_OVERFLOW = 1, /* a count does not fit in 64 bits */
    RL_E_ARGS = 2,     /* an argument the formula needs is missing or of the wrong type */
    RL_E_SHAPE = 3,    /* shapes are inconsistent with the op (e.g. mm inner dimensions differ) */
    RL_E_KIND = 4,     /* unknown kind */
    RL_E_DIMS = 5,     /* a tensor has a negative size or an unsupported number of dimensions */
    RL_E_VALUE = 6,    /* an integer argument is out of range (a kernel size or stride <= 0, a negative padding) */
    RL_E_DATA = 7      /* the count depends on tensor values that cannot be read (meta or fake tensors); set by the
                        * built-in Python formulas of roofline/_counting/_formulas.py, never by rl_cost_eval */
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
