/* Coverage-guided fuzzer of the pure-C cost model (csrc/cost.c), for libFuzzer:
 *
 *     clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -Icsrc \
 *           tests/fuzz/fuzz_cost.c csrc/cost.c -o fuzz_cost
 *     ./fuzz_cost -runs=1000000 corpus/
 *
 * The input bytes decode into an op (kind, a list of parameter assignments, masks, flags) and an rl_call (a pool of
 * tensors, a pool of ints, up to RL_MAX_ARGS arguments referring to them, outputs). A parameter assignment is a
 * selector and a value: the selector picks one of the kind's parameters (RL_KINDS / RL_PARAMS in cost.h) or, for
 * selectors >= 0xe0, any parameter id, including ids the kind does not take and ids out of range; the value is an
 * arbitrary int64. Argument descriptors always respect the contract the Python binding guarantees (indices inside
 * the pools); tensors may have a negative size or dimension count or more than RL_MAX_DIMS dimensions, which the
 * model must refuse. Sizes, strides, integers and parameter values are otherwise arbitrary, huge ones included.
 *
 * Each decoded input is evaluated under every kind and two unknown kinds (the parameter assignments re-read against
 * each kind's parameter list, so one input exercises every formula) and checked against a second implementation of
 * the counting rules of docs/concepts.md, written here in 128-bit arithmetic without any helper of cost.c:
 *   - rl_op_set accepts exactly the kind's parameters (RL_E_KIND otherwise) within the range their type allows
 *     (RL_E_VALUE otherwise), leaves the op untouched when it refuses, and rl_op_get returns what was set;
 *   - the status is one of rl_status, RL_E_KIND exactly for an unknown kind; two evaluations agree; the call's
 *     arrays are not modified;
 *   - the status is the reference's: RL_E_DIMS exactly when a tensor of the call has a negative size or dimension
 *     count or more than RL_MAX_DIMS dimensions, RL_E_ARGS / RL_E_SHAPE / RL_E_VALUE exactly when the reference
 *     finds the formula's arguments missing, its shapes inconsistent or an integer argument out of range;
 *   - a count whose exact value is >= 2**64 never comes back with RL_OK (no silent wrap): RL_E_OVERFLOW;
 *   - with RL_OK every count (matrix, vector, special, bytes read, bytes written, FlopCounterMode's) and the dtype
 *     equal the reference's: matrix products 2*M*N*K, convolutions 2 * N * positions * kernel taps * C_out *
 *     C_in/groups, attention per unmasked (query, key) pair (counted row by row for short sequences), element-wise
 *     counts per element, and the compulsory-bytes rule (reads at the touched size, the in-place and out= writes,
 *     the outputs unless they alias the written arguments, BatchNorm's training flag);
 *   - a call of non-empty tensors torch could create (sizes >= 1, fewer than 2**63 elements) whose exact counts
 *     all fit in 64 bits evaluates with RL_OK (no false overflow), unless its integer arguments describe what no
 *     op has (a pooling window of 2**63 taps or more, a pool without arithmetic, an embedding dimension whose
 *     projection weight cannot exist).
 * A violation prints the decoded call and aborts, which libFuzzer reports as a crash with the input saved.
 *
 * Environment: ROOFLINE_FUZZ_ALLOW, a comma-separated list of check names to skip while a known defect is open
 * ("false-overflow"); ROOFLINE_FUZZ_PRINT=1 prints each decoded call and its cost under the decoded kind (to inspect
 * a seed or a crash input: ./fuzz_cost FILE). At exit the number of rl_cost_eval calls is printed ("cost-model
 * evaluations: N"), then, per kind, how many evaluations ended with each status ("kind mm: RL_OK=... RL_E_ARGS=..."). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"

#define MAX_TENSORS 24
#define MAX_INTS 64
#define MAX_OUTS 6
#define MAX_SETS 16

typedef unsigned __int128 u128;
#define U128_MAX (~(u128)0)
#define BIG ((u128)UINT64_MAX + 1) /* first value that does not fit a count */

/* ---- input reader: returns zeros once the bytes run out ------------------------------------------------------ */

typedef struct {
    const uint8_t *p;
    size_t n, i;
} reader;

static uint8_t rd_u8(reader *r) { return r->i < r->n ? r->p[r->i++] : 0; }

static uint64_t rd_le(reader *r, int nbytes) {
    uint64_t v = 0;
    for (int k = 0; k < nbytes; k++) {
        v |= (uint64_t)rd_u8(r) << (8 * k);
    }
    return v;
}

/* Values that sit on the edges of 32/64-bit arithmetic. */
static const int64_t EDGES[] = {
    INT64_MAX, INT64_MIN, (int64_t)1 << 31, (int64_t)1 << 32, ((int64_t)1 << 32) - 1, (int64_t)1 << 62,
    ((int64_t)1 << 62) + 1, 3037000499LL /* floor(sqrt(2**63)) */, 3037000500LL, 4294967296LL + 1,
    (int64_t)1 << 21, (int64_t)1 << 40, -1, -((int64_t)1 << 31), INT32_MAX, ((int64_t)1 << 63) / 3,
    2642245LL /* cube root of 2**64 */, 65536, 65537, 255, 256,
};
#define NEDGES ((int)(sizeof(EDGES) / sizeof(EDGES[0])))

/* Integer encoding (bench/fuzz_seeds.py writes the same): tag < 0x80: the value; 0x80..0xbf: -(tag - 0x80) - 1;
 * 0xc0 / 0xc1: 2 / 4 bytes little-endian unsigned; 0xc2: 8 bytes two's complement; >= 0xc3: an edge value. */
static int64_t rd_int(reader *r) {
    uint8_t t = rd_u8(r);
    if (t < 0x80) {
        return t;
    }
    if (t < 0xc0) {
        return -(int64_t)(t - 0x80) - 1;
    }
    switch (t) {
    case 0xc0:
        return (int64_t)rd_le(r, 2);
    case 0xc1:
        return (int64_t)rd_le(r, 4);
    case 0xc2: {
        uint64_t u = rd_le(r, 8);
        int64_t v;
        memcpy(&v, &u, sizeof(v));
        return v;
    }
    default:
        return EDGES[(t - 0xc3) % NEDGES];
    }
}

/* A size: an integer as above with negative values other than -1 folded onto the non-negative ones (-v - 1), so
 * that an invalid (negative) size is a deliberate -1; or (tag 0xfe, j, d) the size of dimension d of tensor j of the
 * pool decoded so far, which lets the fuzzer make shapes agree (inner dimensions of a product, attention heads) with
 * a 3-byte change. */
static int64_t rd_size(reader *r, const rl_tensor *pool, int npool) {
    if (r->i < r->n && r->p[r->i] == 0xfe && npool > 0) {
        r->i++;
        const rl_tensor *src = &pool[rd_u8(r) % npool];
        return src->size[rd_u8(r) % RL_MAX_DIMS];
    }
    int64_t v = rd_int(r);
    return v < -1 ? -(v + 1) : v;
}

/* Dimension count: byte % (RL_MAX_DIMS + 1) (outputs: % (RL_MAX_DIMS + 2) - 1, -1 being an absent output); the
 * bytes 0xfc..0xff give counts the model must refuse: RL_MAX_DIMS + 1, 64, -2 and INT32_MIN. */
static void rd_tensor(reader *r, rl_tensor *t, int is_out, const rl_tensor *pool, int npool) {
    memset(t, 0, sizeof(*t));
    uint8_t nd = rd_u8(r);
    static const int32_t bad[4] = {RL_MAX_DIMS + 1, 64, -2, INT32_MIN};
    if (nd >= 0xfc) {
        t->ndim = bad[nd - 0xfc];
    } else {
        t->ndim = is_out ? (int32_t)(nd % (RL_MAX_DIMS + 2)) - 1 : (int32_t)(nd % (RL_MAX_DIMS + 1));
    }
    t->dtype = (int32_t)(rd_u8(r) % (RL_DT_COUNT + 1)); /* RL_DT_COUNT itself: an out-of-range code */
    int n = t->ndim < RL_MAX_DIMS ? t->ndim : RL_MAX_DIMS;
    for (int d = 0; d < n; d++) {
        t->size[d] = rd_size(r, pool, npool);
        t->stride[d] = rd_int(r);
    }
}

typedef struct {
    uint8_t sel;
    int64_t value;
} assignment;

typedef struct {
    int kind; /* as decoded: 0 .. RL_K_COUNT (RL_K_COUNT: an unknown kind) */
    int nsets;
    assignment sets[MAX_SETS];
    uint64_t noread_mask, write_mask;
    uint32_t flags;
    rl_call call;
    rl_tensor tensors[MAX_TENSORS];
    int64_t ints[MAX_INTS];
    rl_tensor outs[MAX_OUTS];
    int ntensors, nints;
} decoded;

static void decode(const uint8_t *data, size_t size, decoded *d) {
    reader r = {data, size, 0};
    memset(d, 0, sizeof(*d));
    d->kind = rd_u8(&r) % (RL_K_COUNT + 1);
    d->nsets = rd_u8(&r) % (MAX_SETS + 1);
    for (int i = 0; i < d->nsets; i++) {
        d->sets[i].sel = rd_u8(&r);
        d->sets[i].value = rd_int(&r);
    }
    d->noread_mask = rd_le(&r, 8);
    d->write_mask = rd_le(&r, 8);
    d->flags = rd_u8(&r);
    d->ntensors = rd_u8(&r) % (MAX_TENSORS + 1);
    for (int i = 0; i < d->ntensors; i++) {
        rd_tensor(&r, &d->tensors[i], 0, d->tensors, i);
    }
    d->nints = rd_u8(&r) % (MAX_INTS + 1);
    for (int i = 0; i < d->nints; i++) {
        d->ints[i] = rd_int(&r);
    }
    rl_call *c = &d->call;
    c->nargs = (int32_t)(rd_u8(&r) % (RL_MAX_ARGS + 1));
    for (int i = 0; i < c->nargs; i++) {
        rl_arg *a = &c->args[i];
        a->type = (int32_t)(rd_u8(&r) % (RL_ARG_OTHER + 1));
        switch (a->type) {
        case RL_ARG_TENSOR:
            if (d->ntensors == 0) {
                a->type = RL_ARG_ABSENT;
                break;
            }
            a->first = rd_u8(&r) % d->ntensors;
            a->count = 1;
            break;
        case RL_ARG_TENSORLIST:
            a->first = d->ntensors ? rd_u8(&r) % d->ntensors : 0;
            a->count = rd_u8(&r) % (d->ntensors - a->first + 1);
            break;
        case RL_ARG_INTLIST:
        case RL_ARG_BOOLLIST:
            a->first = d->nints ? rd_u8(&r) % d->nints : 0;
            a->count = rd_u8(&r) % (d->nints - a->first + 1);
            break;
        case RL_ARG_INT:
            a->i = rd_int(&r);
            break;
        case RL_ARG_BOOL:
            a->i = rd_u8(&r) & 1;
            break;
        case RL_ARG_FLOAT: {
            uint64_t u = rd_le(&r, 8);
            memcpy(&a->f, &u, sizeof(a->f));
            break;
        }
        default:
            break;
        }
    }
    c->nouts = rd_u8(&r) % (MAX_OUTS + 1);
    for (int i = 0; i < c->nouts; i++) {
        rd_tensor(&r, &d->outs[i], 1, d->tensors, d->ntensors);
    }
    c->tensors = d->tensors;
    c->ints = d->ints;
    c->outs = d->outs;
}

/* ---- the op: parameters set through rl_op_set, mirrored in the reference's own record ------------------------ */

/* The reference's view of an op: kind, masks, flags and every parameter's value (argument positions as positions,
 * -1 when absent), kept apart from rl_op's storage. */
typedef struct {
    int kind;
    uint32_t flags;
    uint64_t noread, write;
    int64_t p[RL_P_COUNT];
} refop;

static int known_kind(int kind) { return kind >= 0 && kind < RL_K_COUNT; }

static int is_position_type(int type) { return type == RL_PT_ARG || type == RL_PT_ARG_REQUIRED; }

/* The parameter a selector picks for `kind`: below 0xe0 the (sel mod n)-th of the kind's n parameters in id order;
 * otherwise any id from -1 to RL_P_COUNT + 1 (refused unless it is one of the kind's). */
static int pick_param(int kind, uint8_t sel) {
    if (sel < 0xe0 && known_kind(kind)) {
        uint64_t set = rl_kind_params(kind);
        int n = __builtin_popcountll(set);
        if (n > 0) {
            int want = sel % n;
            for (int p = 0; p < 64; p++) {
                if (((set >> p) & 1u) && want-- == 0) {
                    return p;
                }
            }
        }
    }
    return (int)(sel % (RL_P_COUNT + 3)) - 1;
}

static void fail_op(const char *what, int kind, int param, int64_t value, int st) {
    fprintf(stderr, "\nfuzz_cost: invariant violated: %s\nkind=%d param=%d (%s) value=%lld status=%d\n", what, kind,
            param, rl_param_name(param) ? rl_param_name(param) : "?", (long long)value, st);
    abort();
}

/* Builds the rl_op of `kind` from the decoded assignments, checking rl_op_set / rl_op_get against the contract:
 * a parameter of the kind (every known kind takes `training`) within its type's range is accepted and read back;
 * anything else is refused (RL_E_KIND / RL_E_VALUE) and changes nothing. */
static void build_op(const decoded *d, int kind, rl_op *op, refop *ro) {
    memset(op, 0, sizeof(*op));
    memset(ro, 0, sizeof(*ro));
    op->kind = ro->kind = kind;
    op->flags = ro->flags = d->flags;
    op->noread_mask = ro->noread = d->noread_mask;
    op->write_mask = ro->write = d->write_mask;
    for (int p = 0; p < RL_P_COUNT; p++) {
        ro->p[p] = is_position_type(rl_param_type(p)) ? -1 : 0;
    }
    if (known_kind(kind) && !((rl_kind_params(kind) >> RL_P_TRAINING) & 1u)) {
        fail_op("a known kind does not take `training`", kind, RL_P_TRAINING, 0, 0);
    }
    for (int i = 0; i < d->nsets; i++) {
        int p = pick_param(kind, d->sets[i].sel);
        int64_t v = d->sets[i].value;
        int expect = RL_OK;
        if (p < 0 || p >= RL_P_COUNT || !known_kind(kind) || !((rl_kind_params(kind) >> p) & 1u)) {
            expect = RL_E_KIND;
        } else {
            int type = rl_param_type(p);
            int64_t lo = is_position_type(type) ? -1 : 0;
            int64_t hi = is_position_type(type) ? RL_MAX_ARGS - 1 : type == RL_PT_FLAG ? 1 : INT64_MAX;
            if (type < RL_PT_COUNT || type > RL_PT_ARG_REQUIRED) {
                fail_op("parameter type out of range", kind, p, v, 0);
            }
            expect = (v < lo || v > hi) ? RL_E_VALUE : RL_OK;
        }
        rl_op before = *op;
        int st = rl_op_set(op, p, v);
        if (st != expect) {
            fail_op(expect == RL_OK       ? "rl_op_set refused a valid parameter value"
                    : expect == RL_E_KIND ? "rl_op_set did not answer RL_E_KIND for a parameter the kind lacks"
                                          : "rl_op_set did not answer RL_E_VALUE for a value out of range",
                    kind, p, v, st);
        }
        if (st != RL_OK && memcmp(&before, op, sizeof(before)) != 0) {
            fail_op("rl_op_set changed the op while refusing", kind, p, v, st);
        }
        if (st == RL_OK) {
            ro->p[p] = v;
        }
    }
    for (int p = -1; p <= RL_P_COUNT; p++) {
        int64_t want = (p >= 0 && p < RL_P_COUNT) ? ro->p[p] : 0;
        if (rl_op_get(op, p) != want) {
            fail_op("rl_op_get differs from the value set", kind, p, rl_op_get(op, p), 0);
        }
    }
}

/* ---- the reference: the counting rules in 128-bit saturating arithmetic -------------------------------------- */

static u128 smul(u128 a, u128 b) {
    if (a == 0 || b == 0) {
        return 0;
    }
    return a > U128_MAX / b ? U128_MAX : a * b;
}

static u128 sadd(u128 a, u128 b) { return a > U128_MAX - b ? U128_MAX : a + b; }

static unsigned itemsize(int dt) {
    static const unsigned sizes[RL_DT_COUNT] = {
        [RL_DT_FLOAT64] = 8, [RL_DT_FLOAT32] = 4, [RL_DT_FLOAT16] = 2, [RL_DT_BFLOAT16] = 2,
        [RL_DT_FLOAT8_E4M3FN] = 1, [RL_DT_FLOAT8_E5M2] = 1, [RL_DT_FLOAT8_E4M3FNUZ] = 1, [RL_DT_FLOAT8_E5M2FNUZ] = 1,
        [RL_DT_COMPLEX128] = 16, [RL_DT_COMPLEX64] = 8, [RL_DT_COMPLEX32] = 4, [RL_DT_INT64] = 8, [RL_DT_INT32] = 4,
        [RL_DT_INT16] = 2, [RL_DT_INT8] = 1, [RL_DT_UINT8] = 1, [RL_DT_UINT16] = 2, [RL_DT_UINT32] = 4,
        [RL_DT_UINT64] = 8, [RL_DT_BOOL] = 1,
    };
    return (dt > 0 && dt < RL_DT_COUNT) ? sizes[dt] : 0;
}

/* A tensor the model must refuse: a dimension count outside 0..RL_MAX_DIMS (-1 allowed for an absent output) or a
 * negative size. */
static int bad_tensor(const rl_tensor *t, int is_out) {
    if (t->ndim > RL_MAX_DIMS || t->ndim < (is_out ? -1 : 0)) {
        return 1;
    }
    for (int d = 0; d < t->ndim; d++) {
        if (t->size[d] < 0) {
            return 1;
        }
    }
    return 0;
}

static u128 sz(const rl_tensor *t, int d) { return (u128)(uint64_t)t->size[d]; } /* sizes are >= 0 once valid */

/* Elements (every dimension) or elements in memory (a stride-0 dimension once); 0 for an absent output or an empty
 * dimension. */
static u128 elems(const rl_tensor *t, int in_memory) {
    if (t->ndim < 0) {
        return 0;
    }
    u128 n = 1;
    int empty = 0;
    for (int d = 0; d < t->ndim; d++) {
        empty |= t->size[d] == 0;
        if (!in_memory || t->stride[d] != 0) {
            n = smul(n, sz(t, d));
        }
    }
    return empty ? 0 : n;
}

static u128 tbytes(const rl_tensor *t, int in_memory) { return smul(elems(t, in_memory), itemsize(t->dtype)); }

/* Product of the sizes from dimension `from` on (the spatial extent of an (N, C, ...) tensor). */
static u128 extent_from(const rl_tensor *t, int from) {
    u128 n = 1;
    for (int d = from; d < t->ndim; d++) {
        n = smul(n, sz(t, d));
    }
    return n;
}

static const rl_arg *A(const rl_call *c, int64_t i) {
    static const rl_arg absent = {RL_ARG_ABSENT, 0, 0, 0, 0.0};
    return (i >= 0 && i < c->nargs) ? &c->args[i] : &absent;
}

static int tensorish(const rl_arg *a) { return a->type == RL_ARG_TENSOR || a->type == RL_ARG_TENSORLIST; }

static const rl_tensor *T(const rl_call *c, int64_t i) {
    const rl_arg *a = A(c, i);
    return a->type == RL_ARG_TENSOR ? &c->tensors[a->first] : NULL;
}

static int truth(const rl_call *c, int64_t i, int dflt) {
    const rl_arg *a = A(c, i);
    return (a->type == RL_ARG_BOOL || a->type == RL_ARG_INT) ? a->i != 0 : dflt;
}

static int64_t intval(const rl_call *c, int64_t i, int64_t dflt) {
    const rl_arg *a = A(c, i);
    return (a->type == RL_ARG_BOOL || a->type == RL_ARG_INT) ? a->i : dflt;
}

static int bit(uint64_t mask, int i) { return i >= 0 && i < 64 && ((mask >> i) & 1u); }

/* Sum over the tensors of argument i (tensor or list): elements, or bytes (in memory or in full). */
static u128 arg_elems(const rl_call *c, int i) {
    const rl_arg *a = A(c, i);
    u128 s = 0;
    for (int k = 0; tensorish(a) && k < a->count; k++) {
        s = sadd(s, elems(&c->tensors[a->first + k], 0));
    }
    return s;
}

static u128 arg_bytes(const rl_call *c, int i, int in_memory) {
    const rl_arg *a = A(c, i);
    u128 s = 0;
    for (int k = 0; tensorish(a) && k < a->count; k++) {
        s = sadd(s, tbytes(&c->tensors[a->first + k], in_memory));
    }
    return s;
}

static u128 outs_bytes(const rl_call *c) {
    u128 s = 0;
    for (int i = 0; i < c->nouts; i++) {
        s = sadd(s, tbytes(&c->outs[i], 0));
    }
    return s;
}

static const rl_tensor *first_out(const rl_call *c) {
    for (int i = 0; i < c->nouts; i++) {
        if (c->outs[i].ndim >= 0) {
            return &c->outs[i];
        }
    }
    return NULL;
}

/* dtype of the first tensor among the arguments (a list counts when non-empty), else of the first output. */
static int input_dtype(const rl_call *c) {
    for (int i = 0; i < c->nargs; i++) {
        const rl_arg *a = &c->args[i];
        if (tensorish(a) && a->count > 0) {
            return c->tensors[a->first].dtype;
        }
    }
    const rl_tensor *o = first_out(c);
    return o ? o->dtype : RL_DT_UNKNOWN;
}

/* The argument that holds the op's result: the first one written in place, unless the op returns new tensors. */
static int result_arg(const refop *o, const rl_call *c) {
    if (o->flags & RL_OPF_FRESH_OUTS) {
        return -1;
    }
    for (int i = 0; i < c->nargs; i++) {
        if (bit(o->write, i)) {
            return i;
        }
    }
    return -1;
}

static int result_dtype(const refop *o, const rl_call *c) {
    int w = result_arg(o, c);
    if (w >= 0 && tensorish(A(c, w)) && A(c, w)->count > 0) {
        return c->tensors[A(c, w)->first].dtype;
    }
    const rl_tensor *out = first_out(c);
    return out ? out->dtype : input_dtype(c);
}

/* Elements of the result: the in-place argument's (all its tensors), else the first output's. */
static u128 result_elems(const refop *o, const rl_call *c) {
    int w = result_arg(o, c);
    if (w >= 0) {
        return arg_elems(c, w);
    }
    const rl_tensor *out = first_out(c);
    return out ? elems(out, 0) : 0;
}

/* The compulsory-bytes rule (docs/concepts.md). Training (the op's `training` argument; true when the op has none
 * or the argument is absent): every argument not marked not-read is read at its in-memory size; the arguments
 * marked written are written in full; the outputs are written unless the op writes arguments and its outputs are
 * those arguments (no RL_OPF_FRESH_OUTS). Evaluation (`training` false): the arguments marked not-read are read
 * after all, except write-only destinations (marked both not-read and written), and only those destinations are
 * written among the arguments; the updated ones are merely read. */
static void bytes_rule(const refop *o, const rl_call *c, u128 *rd, u128 *wr) {
    int train = o->p[RL_P_TRAINING] < 0 ? 1 : truth(c, o->p[RL_P_TRAINING], 1);
    *rd = 0;
    *wr = 0;
    for (int i = 0; i < c->nargs; i++) {
        int destination = bit(o->noread, i) && bit(o->write, i);
        int skipped = train ? bit(o->noread, i) : destination;
        if (!skipped) {
            *rd = sadd(*rd, arg_bytes(c, i, 1));
        }
        if (bit(o->write, i) && (train || destination)) {
            *wr = sadd(*wr, arg_bytes(c, i, 0));
        }
    }
    if (o->write == 0 || (o->flags & RL_OPF_FRESH_OUTS)) {
        *wr = sadd(*wr, outs_bytes(c));
    }
}

enum { E_MATRIX, E_VECTOR, E_SPECIAL, E_READ, E_WRITTEN, E_FC, E_N };
static const char *const COUNT_NAMES[E_N] = {"matrix", "vector", "special", "bytes_read", "bytes_written",
                                              "flop_counter"};

typedef struct {
    int status;   /* what rl_cost_eval must answer (RL_OK: the counts below are exact, and may not fit 64 bits) */
    u128 v[E_N];  /* exact counts (saturated at 2**128 - 1) */
    int dtype;
    int absurd;   /* the call's integer arguments describe no op torch could run: a false overflow is tolerated */
    u128 slack[E_N]; /* how far a count may be from v: 0 (exact) but for counts defined through a logarithm */
} expect;

static void generic(const refop *o, const rl_call *c, expect *e) { bytes_rule(o, c, &e->v[E_READ], &e->v[E_WRITTEN]); }

static int flop_counter(const refop *o) { return (o->flags & RL_OPF_FLOP_COUNTER) != 0; }

/* ---- the kinds ---------------------------------------------------------------------------------------------- */

/* mm (M,K)x(K,N); bmm (B,M,K)x(B,K,N); addmm / baddbmm take the bias first; one vector FLOP per output element
 * for the bias add (addmm, baddbmm) and the dequantising scale (_scaled_mm). */
static int ref_products(const refop *o, const rl_call *c, expect *e) {
    int k = o->kind, at = (k == RL_K_ADDMM || k == RL_K_BADDBMM);
    int batched = (k == RL_K_BMM || k == RL_K_BADDBMM), nd = batched ? 3 : 2;
    const rl_tensor *a = T(c, at), *b = T(c, at + 1);
    if (!a || !b || a->ndim != nd || b->ndim != nd) {
        return RL_E_ARGS;
    }
    u128 B = batched ? sz(a, 0) : 1, M = sz(a, nd - 2), K = sz(a, nd - 1), N = sz(b, nd - 1);
    if ((batched && a->size[0] != b->size[0]) || b->size[nd - 2] != a->size[nd - 1]) {
        return RL_E_SHAPE;
    }
    u128 f = smul(smul(smul(smul(B, M), N), K), 2);
    e->v[E_MATRIX] = f;
    e->v[E_FC] = flop_counter(o) ? f : 0;
    e->v[E_VECTOR] = (k == RL_K_MM || k == RL_K_BMM) ? 0 : smul(smul(B, M), N);
    generic(o, c, e);
    e->dtype = at ? a->dtype : input_dtype(c);
    return RL_OK;
}

/* _grouped_mm: the four layouts of a (A) and b (B) and the product each is. */
static int ref_grouped_mm(const refop *o, const rl_call *c, expect *e) {
    const rl_tensor *a = T(c, 0), *b = T(c, 1), *out = first_out(c);
    if (!a || !b || a->ndim < 2 || a->ndim > 3 || b->ndim < 2 || b->ndim > 3) {
        return RL_E_ARGS;
    }
    u128 rows, K, cols;
    if (a->ndim == 2 && b->ndim == 3) {        /* (total_M, K) x (G, K, N): rows split into groups */
        rows = sz(a, 0), K = sz(a, 1), cols = sz(b, 2);
        if (b->size[1] != a->size[1]) {
            return RL_E_SHAPE;
        }
    } else if (a->ndim == 3 && b->ndim == 3) { /* (G, M, K) x (G, K, N): a batched product */
        rows = smul(sz(a, 0), sz(a, 1)), K = sz(a, 2), cols = sz(b, 2);
        if (b->size[1] != a->size[2] || a->size[0] != b->size[0]) {
            return RL_E_SHAPE;
        }
    } else if (a->ndim == 3) {                 /* (G, M, K) x (K, total_N): columns split into groups */
        rows = sz(a, 1), K = sz(a, 2), cols = sz(b, 1);
        if (b->size[0] != a->size[2]) {
            return RL_E_SHAPE;
        }
    } else {                                   /* (M, total_K) x (total_K, N): K split into groups */
        rows = sz(a, 0), K = sz(a, 1), cols = sz(b, 1);
        if (b->size[0] != a->size[1]) {
            return RL_E_SHAPE;
        }
    }
    e->v[E_MATRIX] = smul(smul(smul(2, rows), cols), K);
    e->v[E_VECTOR] = (T(c, o->p[RL_P_BIAS]) && out) ? elems(out, 0) : 0;
    generic(o, c, e);
    e->dtype = a->dtype;
    return RL_OK;
}

/* 2 * N * (output positions, or input positions when transposed) * kernel taps * w[0] * w[1]. */
static u128 conv_products(const rl_tensor *x, const rl_tensor *w, const rl_tensor *out, int transposed) {
    u128 n = smul(2, sz(x, 0));
    n = smul(n, extent_from(transposed ? x : out, 2));
    n = smul(n, extent_from(w, 2));
    return smul(smul(n, sz(w, 0)), sz(w, 1));
}

static int ref_conv(const refop *o, const rl_call *c, expect *e) {
    const rl_tensor *x = T(c, 0), *w = T(c, 1), *out = first_out(c);
    if (!x || !w || !out || x->ndim < 3 || w->ndim != x->ndim || out->ndim != x->ndim) {
        return RL_E_ARGS;
    }
    int transposed = o->p[RL_P_ALWAYS_TRANSPOSED] ? 1 : truth(c, o->p[RL_P_TRANSPOSED], 0);
    int64_t g = 1;
    if (o->p[RL_P_GROUPS] >= 0) {
        g = intval(c, o->p[RL_P_GROUPS], 1);
    } else if (o->p[RL_P_DEPTHWISE]) {
        g = x->size[1];
    }
    if (g < 1 || out->size[0] != x->size[0]) {
        return RL_E_SHAPE;
    }
    u128 G = (u128)g, cin = sz(x, 1), cout = sz(out, 1);
    if (transposed) { /* weight (C_in, C_out / groups, ...) */
        if (sz(w, 0) != cin || cin % G != 0 || sz(w, 1) * G != cout) {
            return RL_E_SHAPE;
        }
    } else if (sz(w, 0) != cout || cout % G != 0 || sz(w, 1) * G != cin) { /* weight (C_out, C_in / groups, ...) */
        return RL_E_SHAPE;
    }
    e->v[E_MATRIX] = conv_products(x, w, out, transposed);
    /* FlopCounterMode reads positional argument 6 as `transposed` */
    e->v[E_FC] = flop_counter(o) ? conv_products(x, w, out, truth(c, 6, 0)) : 0;
    e->v[E_VECTOR] = T(c, o->p[RL_P_BIAS]) ? elems(out, 0) : 0;
    generic(o, c, e);
    e->dtype = x->dtype;
    return RL_OK;
}

static int mask_entry(const rl_call *c, int64_t argi, int i) {
    const rl_arg *a = A(c, argi);
    if ((a->type == RL_ARG_BOOLLIST || a->type == RL_ARG_INTLIST) && i < a->count) {
        return c->ints[a->first + i] != 0;
    }
    return 1;
}

/* convolution_backward(grad_out, input, weight, ...): grad_input (a convolution of grad_out with the weight),
 * grad_weight (every out channel against the in channels of its group, per window position; FlopCounterMode takes
 * every in channel), grad_bias (one add per grad_out element). Reads grad_out, plus the input for grad_weight and
 * the weight for grad_input; writes the outputs. */
static int ref_conv_bwd(const refop *o, const rl_call *c, expect *e) {
    const rl_tensor *go = T(c, 0), *x = T(c, 1), *w = T(c, 2);
    if (!go || !x || !w || go->ndim < 3 || x->ndim != go->ndim || w->ndim != go->ndim) {
        return RL_E_ARGS;
    }
    int transposed = truth(c, o->p[RL_P_TRANSPOSED], 0);
    int64_t g = intval(c, o->p[RL_P_GROUPS], 1);
    if (g < 1) {
        return RL_E_ARGS;
    }
    u128 G = (u128)g;
    /* forward: x (N, C_in, ...) -> grad_out (N, C_out, ...); weight (C_out, C_in/G, ...), transposed (C_in, C_out/G) */
    u128 cin = transposed ? sz(go, 1) : sz(x, 1);   /* the channels the weight's dimension 1 is a group of */
    u128 cw0 = transposed ? sz(x, 1) : sz(go, 1);   /* the weight's dimension 0 */
    if (go->size[0] != x->size[0] || sz(w, 0) != cw0 || sz(w, 1) * G != cin) {
        return RL_E_SHAPE;
    }
    int gi = mask_entry(c, o->p[RL_P_OUTPUT_MASK], 0), gw = mask_entry(c, o->p[RL_P_OUTPUT_MASK], 1);
    int gb = mask_entry(c, o->p[RL_P_OUTPUT_MASK], 2);
    u128 taps = extent_from(w, 2), n = sz(go, 0);
    const rl_tensor *big = transposed ? x : go; /* the larger spatial extent, over which the kernel slides */
    u128 real = 0, fc = 0;
    if (gi) {
        u128 f = smul(smul(smul(smul(smul(2, n), extent_from(big, 2)), taps), sz(w, 0)), sz(w, 1));
        real = sadd(real, f);
        fc = sadd(fc, f);
    }
    if (gw) {
        u128 per = smul(smul(smul(2, n), extent_from(big, 2)), taps);
        real = sadd(real, smul(smul(per, cin / G), cw0));
        fc = sadd(fc, smul(smul(per, cin), cw0));
    }
    e->v[E_MATRIX] = real;
    e->v[E_FC] = flop_counter(o) ? fc : 0;
    e->v[E_VECTOR] = gb ? elems(go, 0) : 0;
    e->v[E_READ] = sadd(sadd(tbytes(go, 1), gw ? tbytes(x, 1) : 0), gi ? tbytes(w, 1) : 0);
    e->v[E_WRITTEN] = outs_bytes(c);
    e->dtype = go->dtype;
    return RL_OK;
}

/* Unmasked (query, key) pairs of one head. mask 0: all; 1: query i sees keys 0..i; 2: query i sees keys
 * 0..i+sk-sq. Short sequences are counted row by row, long ones by the sums of the series. */
static u128 ref_pairs(u128 sq, u128 sk, int mask) {
    if (mask == 0) {
        return smul(sq, sk);
    }
    if (sq <= 2048) {
        u128 n = 0;
        for (u128 i = 0; i < sq; i++) {
            u128 seen = mask == 1 ? i + 1 : (i + sk + 1 > sq ? i + sk + 1 - sq : 0);
            n += seen < sk ? seen : sk;
        }
        return n;
    }
    /* sizes are below 2**63 here: none of these products reaches 2**128 */
    if (mask == 1) {
        return sq <= sk ? sq * (sq + 1) / 2 : sk * (sk + 1) / 2 + (sq - sk) * sk;
    }
    return sq <= sk ? sq * (sk - sq + 1) + sq * (sq - 1) / 2 : sk * (sk + 1) / 2;
}

static int ref_attention(const refop *o, const rl_call *c, expect *e) {
    int64_t qi = o->p[RL_P_QUERY];
    int bwd = o->kind == RL_K_ATTN_BWD;
    const rl_tensor *q = T(c, qi), *k = qi >= 0 ? T(c, qi + 1) : NULL, *v = qi >= 0 ? T(c, qi + 2) : NULL;
    if (!q || !k || !v || q->ndim != 4 || k->ndim != 4 || v->ndim != 4) {
        return RL_E_ARGS;
    }
    int H = o->p[RL_P_BSHD] ? 2 : 1, S = 3 - H; /* (b, h, s, d), or (b, s, h, d) */
    u128 b = sz(q, 0), hq = sz(q, H), sq = sz(q, S), dq = sz(q, 3), hkv = sz(k, H), sk = sz(k, S), dv = sz(v, 3);
    if (sz(k, 0) != b || sz(v, 0) != b || sz(k, 3) != dq || sz(v, S) != sk || sz(v, H) != hkv || hkv == 0 ||
        hq % hkv != 0) {
        return RL_E_SHAPE;
    }
    int mask = 0;
    if (o->p[RL_P_IS_CAUSAL] >= 0) {
        mask = truth(c, o->p[RL_P_IS_CAUSAL], 0);
    } else if (o->p[RL_P_MASK_TYPE] >= 0) {
        int64_t m = intval(c, o->p[RL_P_MASK_TYPE], 0);
        if (m < 0 || m > 2) {
            return RL_E_ARGS;
        }
        mask = (int)m;
    }
    u128 pairs = smul(smul(b, hq), ref_pairs(sq, sk, mask));
    /* per pair: forward Q K^T (dq) and P V (dv); backward S again (dq), dO V^T (dv), P^T dO (dv), dS K (dq),
     * dS^T Q (dq); 2 FLOPs per multiply-add */
    u128 per = bwd ? sadd(smul(3, dq), smul(2, dv)) : sadd(dq, dv);
    e->v[E_MATRIX] = smul(smul(2, pairs), per);
    e->v[E_SPECIAL] = pairs;
    e->v[E_VECTOR] = smul(4, pairs);
    if (!bwd) {
        e->v[E_VECTOR] = sadd(e->v[E_VECTOR], smul(smul(smul(b, hq), sq), dv));
    }
    if (flop_counter(o)) { /* the whole score matrix, the shapes read as FlopCounterMode reads them */
        int FH = o->p[RL_P_FLOP_COUNTER_BSHD] ? 2 : 1, FS = 3 - FH;
        u128 full = smul(smul(smul(b, sz(q, FH)), sz(q, FS)), sz(k, FS));
        e->v[E_FC] = smul(smul(2, full), per);
    }
    generic(o, c, e);
    e->dtype = q->dtype;
    return RL_OK;
}

/* Argument 0 is the source: the other arguments are read, and of the source only the gathered elements (as many as
 * the result has); the outputs are written. */
static int ref_gather(const refop *o, const rl_call *c, expect *e) {
    const rl_tensor *src = NULL, *out = first_out(c);
    for (int i = 0; i < c->nargs && !src; i++) {
        if (tensorish(&c->args[i]) && c->args[i].count > 0) {
            src = &c->tensors[c->args[i].first];
        }
    }
    if (!src || !out) {
        return RL_E_ARGS;
    }
    u128 rd = smul(elems(out, 0), itemsize(src->dtype));
    for (int i = 1; i < c->nargs; i++) {
        rd = bit(o->noread, i) ? rd : sadd(rd, arg_bytes(c, i, 1));
    }
    e->v[E_READ] = rd;
    e->v[E_WRITTEN] = outs_bytes(c);
    e->dtype = src->dtype;
    return RL_OK;
}

/* Whether every value of int-list (or int) argument i is >= lo; an absent or other argument passes. */
static int all_at_least(const rl_call *c, int64_t i, int64_t lo) {
    const rl_arg *a = A(c, i);
    if (a->type == RL_ARG_INT) {
        return a->i >= lo;
    }
    for (int k = 0; a->type == RL_ARG_INTLIST && k < a->count; k++) {
        if (c->ints[a->first + k] < lo) {
            return 0;
        }
    }
    return 1;
}

/* `flops` per window tap; a window per element of the smaller of the input (argument 0) and the result; the kernel
 * size one entry (every dimension) or one per spatial dimension. */
static int ref_pool(const refop *o, const rl_call *c, expect *e) {
    int64_t spatial = o->p[RL_P_SPATIAL];
    const rl_arg *ks = A(c, o->p[RL_P_KERNEL_SIZE]);
    const rl_tensor *out = first_out(c);
    if (spatial < 1 || spatial > RL_MAX_DIMS || !out || ks->type != RL_ARG_INTLIST || ks->count < 1 ||
        (ks->count > 1 && ks->count < spatial)) {
        return RL_E_ARGS;
    }
    if (!all_at_least(c, o->p[RL_P_KERNEL_SIZE], 1) || !all_at_least(c, o->p[RL_P_STRIDE], 1) ||
        !all_at_least(c, o->p[RL_P_PADDING], 0)) {
        return RL_E_VALUE;
    }
    u128 taps = 1;
    for (int s = 0; s < spatial; s++) {
        taps = smul(taps, (u128)(uint64_t)c->ints[ks->first + (ks->count == 1 ? 0 : s)]);
    }
    u128 in = arg_elems(c, 0), res = elems(out, 0);
    e->v[E_VECTOR] = smul(smul(in < res ? in : res, taps), (u128)o->p[RL_P_FLOPS]);
    /* a window no tensor has, or a pool that does no arithmetic (no registered op: windows x taps may overflow
     * before the 0) */
    e->absurd = taps > (u128)INT64_MAX || o->p[RL_P_FLOPS] == 0;
    generic(o, c, e);
    e->dtype = result_dtype(o, c);
    return RL_OK;
}

/* per_target vector FLOPs per target element. Forward (target at 1): reads the target, one input element per
 * target and the arguments after the target; writes the outputs. Backward: the generic rule. */
static int ref_nll(const refop *o, const rl_call *c, expect *e) {
    const rl_tensor *target = T(c, o->p[RL_P_TARGET]), *self = T(c, 0);
    if (!target || !self) {
        return RL_E_ARGS;
    }
    u128 n = elems(target, 0);
    e->v[E_VECTOR] = smul(n, (u128)o->p[RL_P_PER_TARGET]);
    if (o->p[RL_P_TARGET] == 1) {
        u128 rd = sadd(tbytes(target, 1), smul(n, itemsize(self->dtype)));
        for (int i = 2; i < c->nargs; i++) {
            rd = sadd(rd, arg_bytes(c, i, 1));
        }
        e->v[E_READ] = rd;
        e->v[E_WRITTEN] = outs_bytes(c);
        e->dtype = self->dtype;
    } else {
        generic(o, c, e);
        e->dtype = result_dtype(o, c);
    }
    return RL_OK;
}

/* _native_multi_head_attention(q (B, Sq, E), k (B, Sk, E), v, embed_dim, num_head, ...): the Q, K, V and output
 * projections (E x E each, over Sq, Sk, Sk and Sq rows) and attention over H heads of E/H; vector: a bias add per
 * projected element and the softmax (4 per score, 1 exp). */
static int ref_mha(const refop *o, const rl_call *c, expect *e) {
    const rl_tensor *q = T(c, 0), *k = T(c, 1);
    int64_t E = intval(c, o->p[RL_P_EMBED_DIM], -1), H = intval(c, o->p[RL_P_NUM_HEADS], -1);
    if (!q || !k || q->ndim != 3 || k->ndim != 3 || E <= 0 || H <= 0 || E % H != 0) {
        return RL_E_ARGS;
    }
    if (q->size[2] != E || k->size[2] != E || k->size[0] != q->size[0]) {
        return RL_E_SHAPE;
    }
    u128 b = sz(q, 0), sq = sz(q, 1), sk = sz(k, 1), e_ = (u128)E, h = (u128)H;
    u128 rows = smul(b, sadd(smul(2, sq), smul(2, sk)));     /* projected rows: q and output, k and v */
    u128 scores = smul(smul(smul(b, h), sq), sk);
    e->v[E_MATRIX] = sadd(smul(smul(2, rows), smul(e_, e_)), smul(smul(4, scores), e_ / h));
    e->v[E_VECTOR] = sadd(smul(rows, e_), smul(4, scores));
    e->v[E_SPECIAL] = scores;
    e->absurd = smul(3, smul(e_, e_)) > (u128)INT64_MAX; /* the (3E, E) projection weight cannot exist */
    generic(o, c, e);
    e->dtype = q->dtype;
    return RL_OK;
}

/* Per element of argument `of` (a tensor or list; absent: the first tensor or list argument): ewise_in, foreach. */
static int ref_per_input(const refop *o, const rl_call *c, expect *e) {
    int64_t of = o->p[RL_P_OF];
    if (of >= 0 && !tensorish(A(c, of))) {
        return RL_E_ARGS;
    }
    for (int i = 0; of < 0 && i < c->nargs; i++) {
        of = tensorish(&c->args[i]) ? i : -1;
    }
    u128 n = of >= 0 ? arg_elems(c, (int)of) : 0;
    e->v[E_VECTOR] = smul(n, (u128)o->p[RL_P_FLOPS]);
    e->v[E_SPECIAL] = smul(n, (u128)o->p[RL_P_SPECIAL]);
    generic(o, c, e);
    if (o->kind == RL_K_FOREACH) {
        e->dtype = input_dtype(c);
    } else if (of >= 0 && A(c, of)->count > 0) {
        e->dtype = c->tensors[A(c, of)->first].dtype;
    } else {
        e->dtype = result_dtype(o, c);
    }
    return RL_OK;
}

/* log2 of a positive integer by another route than the model's: ln of the mantissa m in [1, 2) from the series
 * ln m = 2 (z + z^3/3 + z^5/5 + ...), z = (m - 1) / (m + 1) <= 1/3, in long double, over ln 2. */
static long double ref_log2(uint64_t v) {
    int e = 63;
    while (!((v >> e) & 1u)) {
        e--;
    }
    long double m = (long double)v / (long double)(UINT64_C(1) << e), z = (m - 1) / (m + 1), z2 = z * z, term = z;
    long double ln = 0;
    for (int k = 0; k < 40; k++, term *= z2) {
        ln += term / (2 * k + 1);
    }
    return e + 2 * ln / 0.693147180559945309417232121458176568L;
}

static int is_cplx(int dt) { return dt == RL_DT_COMPLEX64 || dt == RL_DT_COMPLEX128 || dt == RL_DT_COMPLEX32; }

/* FFT: 5 N log2 N per complex transform (2.5 with a real side) over numel / N signals, N the transformed sizes'
 * product on the full side; + 1 multiply per real output component when normalization != 0. */
static int ref_fft(const refop *o, const rl_call *c, expect *e) {
    const rl_tensor *in = NULL, *out = first_out(c);
    for (int i = 0; i < c->nargs && !in; i++) {
        if (tensorish(&c->args[i]) && c->args[i].count > 0) {
            in = &c->tensors[c->args[i].first];
        }
    }
    const rl_arg *dims = A(c, o->p[RL_P_DIM]);
    if (!in || !out || (dims->type != RL_ARG_INTLIST && dims->type != RL_ARG_INT)) {
        return RL_E_ARGS;
    }
    int cin = is_cplx(in->dtype), cout = is_cplx(out->dtype);
    const rl_tensor *full = cin && !cout ? out : in;
    int nd = dims->type == RL_ARG_INT ? 1 : dims->count;
    if ((!cin && !cout) || nd < 1 || full->ndim < 1) {
        return RL_E_ARGS;
    }
    int used[RL_MAX_DIMS] = {0};
    u128 n = 1;
    long double lg = 0;
    for (int k = 0; k < nd; k++) {
        int64_t d = dims->type == RL_ARG_INT ? dims->i : c->ints[dims->first + k];
        if (d < 0) {
            d += full->ndim;
        }
        if (d < 0 || d >= full->ndim || used[d]) {
            return RL_E_SHAPE;
        }
        used[d] = 1;
        n = smul(n, sz(full, (int)d));
        lg += full->size[d] > 1 ? ref_log2((uint64_t)full->size[d]) : 0;
    }
    u128 numel = elems(full, 0);
    if (n > 0 && numel > 0) {
        long double f = (long double)numel * lg * (cin && cout ? 5 : 2.5L);
        e->v[E_VECTOR] = f >= 1e30L ? U128_MAX : (u128)(f + 0.5L);
        e->slack[E_VECTOR] = (u128)(f * 1e-12L) + 1;
    }
    if (intval(c, o->p[RL_P_NORMALIZATION], 0) != 0) {
        e->v[E_VECTOR] = sadd(e->v[E_VECTOR], smul(elems(out, 0), cout ? 2 : 1));
    }
    generic(o, c, e);
    int side = cin ? in->dtype : out->dtype;
    e->dtype = side == RL_DT_COMPLEX128 ? RL_DT_FLOAT64 : (side == RL_DT_COMPLEX64 ? RL_DT_FLOAT32 : RL_DT_FLOAT16);
    return RL_OK;
}

/* Fills `e` for a known kind; e->status: what the evaluation must answer. */
static void reference(const refop *o, const rl_call *c, expect *e) {
    memset(e, 0, sizeof(*e));
    for (int i = 0; i < c->nargs; i++) {
        const rl_arg *a = &c->args[i];
        for (int k = 0; tensorish(a) && k < a->count; k++) {
            if (bad_tensor(&c->tensors[a->first + k], 0)) {
                e->status = RL_E_DIMS;
                return;
            }
        }
    }
    for (int i = 0; i < c->nouts; i++) {
        if (bad_tensor(&c->outs[i], 1)) {
            e->status = RL_E_DIMS;
            return;
        }
    }
    switch (o->kind) {
    case RL_K_ZERO:
        e->dtype = input_dtype(c);
        e->status = RL_OK;
        break;
    case RL_K_COPY:
    case RL_K_FILL:
    case RL_K_EWISE: {
        u128 n = o->kind == RL_K_COPY ? 0 : result_elems(o, c);
        e->v[E_VECTOR] = smul(n, (u128)o->p[RL_P_FLOPS]);
        e->v[E_SPECIAL] = smul(n, (u128)o->p[RL_P_SPECIAL]);
        generic(o, c, e);
        e->dtype = result_dtype(o, c);
        e->status = RL_OK;
        break;
    }
    case RL_K_EWISE_IN:
    case RL_K_FOREACH:
        e->status = ref_per_input(o, c, e);
        break;
    case RL_K_MM:
    case RL_K_ADDMM:
    case RL_K_BMM:
    case RL_K_BADDBMM:
    case RL_K_SCALED_MM:
        e->status = ref_products(o, c, e);
        break;
    case RL_K_GROUPED_MM:
        e->status = ref_grouped_mm(o, c, e);
        break;
    case RL_K_CONV:
        e->status = ref_conv(o, c, e);
        break;
    case RL_K_CONV_BWD:
        e->status = ref_conv_bwd(o, c, e);
        break;
    case RL_K_ATTN:
    case RL_K_ATTN_BWD:
        e->status = ref_attention(o, c, e);
        break;
    case RL_K_GATHER:
        e->status = ref_gather(o, c, e);
        break;
    case RL_K_POOL:
        e->status = ref_pool(o, c, e);
        break;
    case RL_K_NLL:
        e->status = ref_nll(o, c, e);
        break;
    case RL_K_MHA:
        e->status = ref_mha(o, c, e);
        break;
    case RL_K_FFT:
        e->status = ref_fft(o, c, e);
        break;
    default:
        fprintf(stderr, "fuzz_cost: kind %d (%s) has no reference formula: add one\n", o->kind,
                rl_kind_name(o->kind));
        abort();
    }
}

/* A non-empty tensor torch could create: sizes >= 1 whose product fits in int64. Only calls made of such tensors
 * must evaluate without a false overflow. (With an empty tensor the model may refuse a call whose counts are 0: a
 * product of the other sizes overflows before the zero factor comes in. That refusal is loud, and tolerated.) */
static int plausible(const rl_tensor *t) {
    u128 n = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (t->size[d] < 1) {
            return 0;
        }
        n = smul(n, (u128)t->size[d]);
    }
    return n <= (u128)INT64_MAX;
}

static int all_plausible(const rl_call *c) {
    for (int i = 0; i < c->nargs; i++) {
        const rl_arg *a = &c->args[i];
        for (int k = 0; tensorish(a) && k < a->count; k++) {
            if (!plausible(&c->tensors[a->first + k])) {
                return 0;
            }
        }
    }
    for (int i = 0; i < c->nouts; i++) {
        if (c->outs[i].ndim >= 0 && !plausible(&c->outs[i])) {
            return 0;
        }
    }
    return 1;
}

/* ---- the checks ------------------------------------------------------------------------------------------------ */

static unsigned long long n_evals = 0;
static unsigned long long by_status[RL_K_COUNT][RL_E_VALUE + 1]; /* evaluations of each known kind by status */
static int allow_false_overflow = 0;
static int print_each = 0;

static void print_tensor(const rl_tensor *t) {
    int n = t->ndim < 0 ? 0 : t->ndim > RL_MAX_DIMS ? RL_MAX_DIMS : t->ndim;
    fprintf(stderr, "ndim=%d dtype=%d size=(", t->ndim, t->dtype);
    for (int d = 0; d < n; d++) {
        fprintf(stderr, "%lld%s", (long long)t->size[d], d + 1 < n ? ", " : "");
    }
    fprintf(stderr, ") stride=(");
    for (int d = 0; d < n; d++) {
        fprintf(stderr, "%lld%s", (long long)t->stride[d], d + 1 < n ? ", " : "");
    }
    fprintf(stderr, ")\n");
}

static void print_call(const refop *o, const rl_call *c) {
    fprintf(stderr, "op: kind=%d (%s) noread=%#llx write=%#llx flags=%#x\n", o->kind,
            rl_kind_name(o->kind) ? rl_kind_name(o->kind) : "unknown", (unsigned long long)o->noread,
            (unsigned long long)o->write, o->flags);
    for (int p = 0; p < RL_P_COUNT; p++) {
        if (known_kind(o->kind) && ((rl_kind_params(o->kind) >> p) & 1u)) {
            fprintf(stderr, "  %s=%lld\n", rl_param_name(p), (long long)o->p[p]);
        }
    }
    for (int i = 0; i < c->nargs; i++) {
        const rl_arg *a = &c->args[i];
        fprintf(stderr, "  arg %d: type=%d first=%d count=%d i=%lld\n", i, a->type, a->first, a->count,
                (long long)a->i);
        for (int k = 0; tensorish(a) && k < a->count; k++) {
            fprintf(stderr, "    tensor ");
            print_tensor(&c->tensors[a->first + k]);
        }
        if (a->type == RL_ARG_INTLIST || a->type == RL_ARG_BOOLLIST) {
            fprintf(stderr, "    ints:");
            for (int k = 0; k < a->count; k++) {
                fprintf(stderr, " %lld", (long long)c->ints[a->first + k]);
            }
            fprintf(stderr, "\n");
        }
    }
    for (int i = 0; i < c->nouts; i++) {
        fprintf(stderr, "  out %d: ", i);
        print_tensor(&c->outs[i]);
    }
}

static void print_cost(int st, const rl_cost *r) {
    fprintf(stderr, "status=%d matrix=%llu vector=%llu special=%llu read=%llu written=%llu flop_counter=%llu "
                    "dtype=%d\n",
            st, (unsigned long long)r->matrix, (unsigned long long)r->vector, (unsigned long long)r->special,
            (unsigned long long)r->bytes_read, (unsigned long long)r->bytes_written,
            (unsigned long long)r->flop_counter, r->dtype);
}

static void fail(const char *what, const refop *o, const rl_call *c, int st, const rl_cost *r) {
    fprintf(stderr, "\nfuzz_cost: invariant violated: %s\n", what);
    print_cost(st, r);
    print_call(o, c);
    abort();
}

static const char *status_name(int st) {
    static const char *const names[] = {"RL_OK",   "RL_E_OVERFLOW", "RL_E_ARGS", "RL_E_SHAPE",
                                        "RL_E_KIND", "RL_E_DIMS",   "RL_E_VALUE"};
    return st >= 0 && st <= RL_E_VALUE ? names[st] : "?";
}

static void check_one(const decoded *d, int kind) {
    rl_op op;
    refop ro;
    build_op(d, kind, &op, &ro);
    const rl_call *c = &d->call;
    rl_cost r1, r2;
    int st = rl_cost_eval(&op, c, &r1);
    int st2 = rl_cost_eval(&op, c, &r2);
    n_evals += 2;
    if (st != st2 || (st == RL_OK && memcmp(&r1, &r2, sizeof(r1)) != 0)) {
        fail("two evaluations of one call differ", &ro, c, st, &r1);
    }
    if (st < RL_OK || st > RL_E_VALUE) {
        fail("status is not an rl_status", &ro, c, st, &r1);
    }
    if ((st == RL_E_KIND) != !known_kind(kind)) {
        fail("RL_E_KIND returned for a known kind, or not for an unknown one", &ro, c, st, &r1);
    }
    if (!known_kind(kind)) {
        return;
    }
    by_status[kind][st]++;
    expect e;
    reference(&ro, c, &e);
    char msg[200];
    if (e.status != RL_OK) { /* a refusal the reference also sees, and the same one */
        if (st != e.status) {
            snprintf(msg, sizeof(msg), "status %s, the reference answers %s", status_name(st), status_name(e.status));
            fail(msg, &ro, c, st, &r1);
        }
        return;
    }
    const uint64_t got[E_N] = {r1.matrix, r1.vector, r1.special, r1.bytes_read, r1.bytes_written, r1.flop_counter};
    int fits = 1;
    for (int k = 0; k < E_N; k++) {
        fits &= e.v[k] < BIG;
    }
    if (!fits) { /* no silent wrap: some exact count needs more than 64 bits */
        if (st != RL_E_OVERFLOW) {
            int k = 0;
            while (e.v[k] < BIG) {
                k++;
            }
            snprintf(msg, sizeof(msg), "%s does not fit in 64 bits but the status is %s", COUNT_NAMES[k],
                     status_name(st));
            fail(msg, &ro, c, st, &r1);
        }
        return;
    }
    if (st == RL_E_OVERFLOW) { /* every count fits: a false overflow, tolerated only for calls no tensor can make */
        if (!allow_false_overflow && !e.absurd && all_plausible(c)) {
            fail("every count fits in 64 bits but the evaluation answered RL_E_OVERFLOW (false overflow)", &ro, c, st,
                 &r1);
        }
        return;
    }
    if (st != RL_OK) {
        snprintf(msg, sizeof(msg), "status %s for a call the reference evaluates", status_name(st));
        fail(msg, &ro, c, st, &r1);
    }
    for (int k = 0; k < E_N; k++) {
        u128 diff = (u128)got[k] > e.v[k] ? (u128)got[k] - e.v[k] : e.v[k] - (u128)got[k];
        if (diff > e.slack[k]) {
            snprintf(msg, sizeof(msg), "%s = %llu, the formula gives %llu", COUNT_NAMES[k],
                     (unsigned long long)got[k], (unsigned long long)e.v[k]);
            fail(msg, &ro, c, st, &r1);
        }
    }
    if (r1.dtype != e.dtype) {
        snprintf(msg, sizeof(msg), "dtype = %d, the reference gives %d", r1.dtype, e.dtype);
        fail(msg, &ro, c, st, &r1);
    }
}

static void report_evals(void) {
    fprintf(stderr, "cost-model evaluations: %llu\n", n_evals);
    for (int k = 0; k < RL_K_COUNT; k++) {
        fprintf(stderr, "kind %s:", rl_kind_name(k));
        for (int st = 0; st <= RL_E_VALUE; st++) {
            fprintf(stderr, " %s=%llu", status_name(st), by_status[k][st]);
        }
        fprintf(stderr, "\n");
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *allow = getenv("ROOFLINE_FUZZ_ALLOW");
    allow_false_overflow = allow && strstr(allow, "false-overflow") != NULL;
    print_each = getenv("ROOFLINE_FUZZ_PRINT") != NULL;
    atexit(report_evals);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static decoded d, snapshot; /* large: keep them off the stack */
    decode(data, size, &d);
    memcpy(&snapshot, &d, sizeof(d));
    if (print_each) {
        rl_op op;
        refop ro;
        rl_cost r;
        build_op(&d, d.kind, &op, &ro);
        print_cost(rl_cost_eval(&op, &d.call, &r), &r);
        print_call(&ro, &d.call);
    }
    /* The call under every kind and two unknown ones: each formula meets every argument layout. */
    for (int k = -1; k <= RL_K_COUNT; k++) {
        check_one(&d, k);
    }
    if (memcmp(&snapshot, &d, sizeof(d)) != 0) {
        fprintf(stderr, "\nfuzz_cost: invariant violated: rl_cost_eval modified its call\n");
        abort();
    }
    return 0;
}
