/* Coverage-guided fuzzer of the pure-C cost model (csrc/cost.c), for libFuzzer:
 *
 *     clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -Icsrc \
 *           tests/fuzz/fuzz_cost.c csrc/cost.c -o fuzz_cost
 *     ./fuzz_cost -runs=1000000 corpus/
 *
 * The input bytes decode into an rl_op (kind, p1, p2, masks, flags) and an rl_call (a pool of tensors, a pool of
 * ints, up to RL_MAX_ARGS arguments referring to them, outputs). Every call respects the contract the Python binding
 * guarantees (argument indices inside the pools, 0 <= ndim <= RL_MAX_DIMS for inputs, -1 <= ndim for outputs);
 * sizes, strides, integers and parameters are otherwise arbitrary, including negative and huge values.
 *
 * Each decoded call is evaluated under its own kind and under every other kind (so one input exercises every
 * formula), and each evaluation is checked against a second implementation of the documented formulas, written
 * here with 128-bit saturating arithmetic:
 *   - the status is one of rl_status, RL_E_KIND exactly for an unknown kind; the evaluation is deterministic and
 *     leaves the call untouched;
 *   - a count whose exact value is >= 2**64 never comes back with RL_OK (no silent wrap);
 *   - with RL_OK, matrix products equal 2*M*N*K (B*2*M*N*K batched), convolution FLOPs equal
 *     2 * N * prod(spatial) * prod(kernel) * C_out * C_in/groups, attention pairs equal a brute-force count of the
 *     unmasked (query, key) pairs, element-wise counts equal elements x per-element cost, and the compulsory bytes of
 *     the generic rule equal the sum over the tensors;
 *   - for the element-wise, fill, copy and view kinds (no shape preconditions), a call of tensors torch could
 *     create (storage extent < 2**63) whose exact counts all fit in 64 bits evaluates with RL_OK (no false
 *     overflow).
 * A violation prints the decoded call and aborts, which libFuzzer reports as a crash with the input saved.
 *
 * Environment: ROOFLINE_FUZZ_ALLOW, a comma-separated list of check names to skip while a known defect is open
 * ("false-overflow"); ROOFLINE_FUZZ_PRINT=1 prints each decoded call and its cost (to inspect a seed or a crash
 * input: ./fuzz_cost FILE). At exit the number of rl_cost_eval calls is printed ("cost-model evaluations: N"). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"

#define MAX_TENSORS 24
#define MAX_INTS 64
#define MAX_OUTS 6

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
 * 0xc0 / 0xc1: 2 / 4 bytes little-endian unsigned; 0xc2: 8 bytes two's complement; >= 0xc3: an edge value
 * (0xfe in a size: see rd_size). */
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

/* A size: an integer as above, or (tag 0xfe, j, d) the size of dimension d of tensor j of the pool decoded so far,
 * which lets the fuzzer make shapes agree (inner dimensions of a product, attention heads) with a 3-byte change. */
static int64_t rd_size(reader *r, const rl_tensor *pool, int npool) {
    if (r->i < r->n && r->p[r->i] == 0xfe && npool > 0) {
        r->i++;
        const rl_tensor *src = &pool[rd_u8(r) % npool];
        return src->size[rd_u8(r) % RL_MAX_DIMS];
    }
    return rd_int(r);
}

static void rd_tensor(reader *r, rl_tensor *t, int is_out, const rl_tensor *pool, int npool) {
    memset(t, 0, sizeof(*t));
    uint8_t nd = rd_u8(r);
    t->ndim = is_out ? (int32_t)(nd % (RL_MAX_DIMS + 2)) - 1 : (int32_t)(nd % (RL_MAX_DIMS + 1));
    t->dtype = (int32_t)(rd_u8(r) % (RL_DT_COUNT + 1)); /* RL_DT_COUNT itself: an out-of-range code */
    for (int d = 0; d < t->ndim; d++) {
        t->size[d] = rd_size(r, pool, npool);
        t->stride[d] = rd_int(r);
    }
}

typedef struct {
    rl_op op;
    rl_call call;
    rl_tensor tensors[MAX_TENSORS];
    int64_t ints[MAX_INTS];
    rl_tensor outs[MAX_OUTS];
    int ntensors, nints;
} decoded;

static void decode(const uint8_t *data, size_t size, decoded *d) {
    reader r = {data, size, 0};
    memset(d, 0, sizeof(*d));
    d->op.kind = (int32_t)(rd_u8(&r) % (RL_K_COUNT + 1)); /* RL_K_COUNT: an unknown kind */
    d->op.p1 = rd_int(&r);
    d->op.p2 = rd_int(&r);
    d->op.noread_mask = rd_le(&r, 8);
    d->op.write_mask = rd_le(&r, 8);
    d->op.flags = (uint32_t)rd_le(&r, 4);
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

/* ---- the reference: documented formulas in 128-bit saturating arithmetic ------------------------------------- */

static u128 smul(u128 a, u128 b) {
    if (a == 0 || b == 0) {
        return 0;
    }
    return a > U128_MAX / b ? U128_MAX : a * b;
}

static u128 sadd(u128 a, u128 b) { return a > U128_MAX - b ? U128_MAX : a + b; }

static u128 pos(int64_t v) { return v > 0 ? (u128)v : 0; } /* negative sizes count as 0 (cost.h) */

static unsigned itemsize(int dt) {
    static const unsigned sizes[RL_DT_COUNT] = {0, 8, 4, 2, 2, 1, 1, 1, 1, 16, 8, 4, 8, 4, 2, 1, 1, 2, 4, 8, 1};
    return (dt > 0 && dt < RL_DT_COUNT) ? sizes[dt] : 0;
}

/* Elements (all dims) or elements in memory (stride-0 dims once); 0 for an absent output or an empty dim. */
static u128 ref_numel(const rl_tensor *t, int touched) {
    if (t->ndim < 0) {
        return 0;
    }
    for (int d = 0; d < t->ndim; d++) {
        if (t->size[d] <= 0) {
            return 0;
        }
    }
    u128 n = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (!touched || t->stride[d] != 0) {
            n = smul(n, pos(t->size[d]));
        }
    }
    return n;
}

static u128 ref_bytes(const rl_tensor *t, int touched) { return smul(ref_numel(t, touched), itemsize(t->dtype)); }

static const rl_arg *ref_arg(const rl_call *c, int i) {
    static const rl_arg absent = {RL_ARG_ABSENT, 0, 0, 0, 0.0};
    return (i >= 0 && i < c->nargs) ? &c->args[i] : &absent;
}

static const rl_tensor *ref_tensor(const rl_call *c, int i) {
    const rl_arg *a = ref_arg(c, i);
    return a->type == RL_ARG_TENSOR ? &c->tensors[a->first] : NULL;
}

static int masked(uint64_t mask, int i) { return i < 64 && ((mask >> i) & 1u); }

static u128 arg_sum(const rl_call *c, int i, int bytes, int touched) {
    const rl_arg *a = ref_arg(c, i);
    u128 s = 0;
    if (a->type == RL_ARG_TENSOR || a->type == RL_ARG_TENSORLIST) {
        for (int k = 0; k < a->count; k++) {
            const rl_tensor *t = &c->tensors[a->first + k];
            s = sadd(s, bytes ? ref_bytes(t, touched) : ref_numel(t, 0));
        }
    }
    return s;
}

static int truth(const rl_call *c, int i, int dflt);

/* The generic compulsory-bytes rule (docs/concepts.md): unmasked tensor arguments read at their touched size;
 * written: the arguments written in place, and every output unless the outputs are aliases of those arguments
 * (RL_OPF_FRESH_OUTS marks fresh outputs beside in-place updates). An op with a training flag that is false only
 * reads its updated arguments (and reads its noread arguments that are not write-only destinations). */
static void ref_generic_bytes(const rl_op *op, const rl_call *c, u128 *rd, u128 *wr) {
    int ti = (int)((op->flags >> RL_OPF_TRAIN_SHIFT) & 0xffu) - 1;
    int train = ti < 0 ? 1 : truth(c, ti, 1);
    uint64_t noread = train ? op->noread_mask : (op->noread_mask & op->write_mask);
    *rd = 0;
    *wr = 0;
    for (int i = 0; i < c->nargs; i++) {
        if (!masked(noread, i)) {
            *rd = sadd(*rd, arg_sum(c, i, 1, 1));
        }
    }
    for (int i = 0; i < c->nargs; i++) {
        if (masked(op->write_mask, i) && (train || masked(op->noread_mask, i))) {
            *wr = sadd(*wr, arg_sum(c, i, 1, 0));
        }
    }
    if (!op->write_mask || (op->flags & RL_OPF_FRESH_OUTS)) {
        for (int i = 0; i < c->nouts; i++) {
            *wr = sadd(*wr, ref_bytes(&c->outs[i], 0));
        }
    }
}

static u128 prod_dims(const rl_tensor *t, int from) {
    u128 n = 1;
    for (int d = from; d < t->ndim; d++) {
        n = smul(n, pos(t->size[d]));
    }
    return n;
}

static int truth(const rl_call *c, int i, int dflt) {
    const rl_arg *a = ref_arg(c, i);
    return (a->type == RL_ARG_BOOL || a->type == RL_ARG_INT) ? a->i != 0 : dflt;
}

/* Unmasked (query, key) pairs, counted one query row at a time (sq small) or by the closed form. */
static u128 ref_pairs(u128 sq, u128 sk, int mask) {
    if (mask == 0) {
        return smul(sq, sk);
    }
    if (sq <= 4096) {
        u128 n = 0;
        for (u128 i = 0; i < sq; i++) {
            /* top-left: row i sees keys 0..i; bottom-right: keys 0..i+sk-sq (none when that is negative) */
            u128 hi = mask == 1 ? i + 1 : (i + sk + 1 > sq ? i + sk + 1 - sq : 0);
            n = sadd(n, hi < sk ? hi : sk);
        }
        return n;
    }
    /* sums of arithmetic series, clipped at sk (only sizes up to 2**63: no 128-bit overflow) */
    if (mask == 1) {
        return sq <= sk ? sq * (sq + 1) / 2 : sk * (sk + 1) / 2 + (sq - sk) * sk;
    }
    return sq <= sk ? sq * (sk - sq + 1) + sq * (sq - 1) / 2 : sk * (sk + 1) / 2;
}

typedef struct {
    int have[6];     /* which counts the reference knows: matrix, vector, special, read, written, compat */
    u128 v[6];
} expect;

enum { E_MATRIX, E_VECTOR, E_SPECIAL, E_READ, E_WRITTEN, E_COMPAT };

static void want(expect *e, int which, u128 v) {
    e->have[which] = 1;
    e->v[which] = v;
}

/* Fill `e` with what the reference knows for op/call; returns 1 when the formula's preconditions hold (so the
 * counts are defined), 0 when the kind is one the reference does not model or the arguments do not fit. */
static int reference(const rl_op *op, const rl_call *c, expect *e) {
    memset(e, 0, sizeof(*e));
    u128 rd, wr;
    ref_generic_bytes(op, c, &rd, &wr);
    int fcm = (op->flags & RL_OPF_FCM) != 0;
    switch (op->kind) {
    case RL_K_ZERO:
        for (int k = 0; k < 6; k++) {
            want(e, k, 0);
        }
        return 1;
    case RL_K_COPY:
        want(e, E_MATRIX, 0);
        want(e, E_VECTOR, 0);
        want(e, E_READ, rd);
        want(e, E_WRITTEN, wr);
        return 1;
    case RL_K_FILL:
    case RL_K_EWISE: {
        u128 n = 0;
        int w = -1;
        for (int i = 0; i < c->nargs && i < 64; i++) {
            if (masked(op->write_mask, i)) {
                w = i;
                break;
            }
        }
        if (w >= 0) {
            n = arg_sum(c, w, 0, 0);
        } else {
            for (int i = 0; i < c->nouts; i++) {
                if (c->outs[i].ndim >= 0) {
                    n = ref_numel(&c->outs[i], 0);
                    break;
                }
            }
        }
        want(e, E_MATRIX, 0);
        want(e, E_VECTOR, smul(n, pos(op->p1)));
        want(e, E_SPECIAL, smul(n, pos(op->p2)));
        want(e, E_READ, rd);
        want(e, E_WRITTEN, wr);
        return 1;
    }
    case RL_K_MM:
    case RL_K_SCALED_MM:
    case RL_K_ADDMM: {
        int o = op->kind == RL_K_ADDMM;
        const rl_tensor *a = ref_tensor(c, o), *b = ref_tensor(c, o + 1);
        if (!a || !b || a->ndim != 2 || b->ndim != 2 || a->size[1] != b->size[0]) {
            return 0;
        }
        u128 m = pos(a->size[0]), k = pos(a->size[1]), n = pos(b->size[1]);
        u128 f = smul(smul(smul(2, m), n), k);
        want(e, E_MATRIX, f);
        want(e, E_COMPAT, fcm ? f : 0);
        want(e, E_VECTOR, op->kind == RL_K_MM ? 0 : smul(m, n));
        want(e, E_READ, rd);
        want(e, E_WRITTEN, wr);
        return 1;
    }
    case RL_K_BMM:
    case RL_K_BADDBMM: {
        int o = op->kind == RL_K_BADDBMM;
        const rl_tensor *a = ref_tensor(c, o), *b = ref_tensor(c, o + 1);
        if (!a || !b || a->ndim != 3 || b->ndim != 3 || a->size[0] != b->size[0] || a->size[2] != b->size[1]) {
            return 0;
        }
        u128 bt = pos(a->size[0]), m = pos(a->size[1]), k = pos(a->size[2]), n = pos(b->size[2]);
        u128 f = smul(smul(smul(smul(2, bt), m), n), k);
        want(e, E_MATRIX, f);
        want(e, E_COMPAT, fcm ? f : 0);
        want(e, E_VECTOR, o ? smul(smul(bt, m), n) : 0);
        want(e, E_READ, rd);
        want(e, E_WRITTEN, wr);
        return 1;
    }
    case RL_K_CONV: {
        const rl_tensor *x = ref_tensor(c, 0), *w = ref_tensor(c, 1), *out = NULL;
        for (int i = 0; i < c->nouts && !out; i++) {
            out = c->outs[i].ndim >= 0 ? &c->outs[i] : NULL;
        }
        if (!x || !w || !out || x->ndim < 3 || w->ndim != x->ndim || out->ndim != x->ndim) {
            return 0;
        }
        int tr = op->p1 >= 0 ? truth(c, (int)op->p1, 0) : op->p1 == -2;
        /* 2 * N * (output positions; input positions when transposed) * kernel taps * w[0] * w[1] */
        u128 f = smul(smul(smul(smul(smul(2, pos(x->size[0])), prod_dims(tr ? x : out, 2)), prod_dims(w, 2)),
                           pos(w->size[0])),
                      pos(w->size[1]));
        want(e, E_MATRIX, f);
        want(e, E_READ, rd);
        want(e, E_WRITTEN, wr);
        int bias = (int)((op->p2 >> RL_CONV_BIAS_SHIFT) & 0xff) - 1; /* 1 + its position; 0: no bias argument */
        want(e, E_VECTOR, bias >= 0 && ref_tensor(c, bias) ? ref_numel(out, 0) : 0);
        return 1;
    }
    case RL_K_ATTN:
    case RL_K_ATTN_BWD: {
        int64_t p = op->p1;
        int qi = (int)(p & 0xff), ci = (int)((p >> 8) & 0xff), bshd = (p & RL_ATTN_BSHD) != 0;
        const rl_tensor *q = ref_tensor(c, qi), *k = ref_tensor(c, qi + 1), *v = ref_tensor(c, qi + 2);
        if (!q || !k || !v || q->ndim != 4 || k->ndim != 4 || v->ndim != 4) {
            return 0;
        }
        int hi = bshd ? 2 : 1, si = bshd ? 1 : 2;
        u128 b = pos(q->size[0]), hq = pos(q->size[hi]), sq = pos(q->size[si]), dq = pos(q->size[3]);
        u128 hkv = pos(k->size[hi]), sk = pos(k->size[si]), dv = pos(v->size[3]);
        if (pos(k->size[0]) != b || pos(v->size[0]) != b || pos(k->size[3]) != dq || pos(v->size[si]) != sk ||
            pos(v->size[hi]) != hkv || hkv == 0 || hq % hkv != 0) {
            return 0;
        }
        int mask = 0;
        if (ci != 0xff) {
            const rl_arg *a = ref_arg(c, ci);
            int64_t mv = (a->type == RL_ARG_INT || a->type == RL_ARG_BOOL) ? a->i : 0;
            if (p & RL_ATTN_MASKTYPE) {
                if (mv < 0 || mv > 2) {
                    return 0;
                }
                mask = (int)mv;
            } else {
                mask = mv != 0;
            }
        }
        int bwd = op->kind == RL_K_ATTN_BWD;
        u128 pairs = smul(smul(b, hq), ref_pairs(sq, sk, mask));
        /* forward: QK^T and PV (2*dq + 2*dv per pair); backward: 2*(3*dq + 2*dv) per pair */
        u128 per = bwd ? sadd(smul(3, dq), smul(2, dv)) : sadd(dq, dv);
        want(e, E_MATRIX, smul(smul(2, pairs), per));
        want(e, E_SPECIAL, pairs);
        want(e, E_VECTOR, bwd ? smul(4, pairs) : sadd(smul(4, pairs), smul(smul(smul(b, hq), sq), dv)));
        want(e, E_READ, rd);
        want(e, E_WRITTEN, wr);
        return 1;
    }
    default:
        return 0;
    }
}

/* A tensor torch could create: non-negative sizes whose storage extent (the product of the sizes, a 0 taken as 1)
 * fits in int64. Only calls made of such tensors must evaluate without a false overflow. */
static int plausible(const rl_tensor *t) {
    u128 n = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (t->size[d] < 0) {
            return 0;
        }
        n = smul(n, t->size[d] > 0 ? (u128)t->size[d] : 1);
    }
    return n <= (u128)INT64_MAX;
}

static int all_plausible(const rl_call *c) {
    for (int i = 0; i < c->nargs; i++) {
        const rl_arg *a = &c->args[i];
        if (a->type == RL_ARG_TENSOR || a->type == RL_ARG_TENSORLIST) {
            for (int k = 0; k < a->count; k++) {
                if (!plausible(&c->tensors[a->first + k])) {
                    return 0;
                }
            }
        }
    }
    for (int i = 0; i < c->nouts; i++) {
        if (!plausible(&c->outs[i])) {
            return 0;
        }
    }
    return 1;
}

/* ---- the checks ------------------------------------------------------------------------------------------------ */

static unsigned long long n_evals = 0;
static int allow_false_overflow = 0;
static int print_each = 0;

static void print_call(const rl_op *op, const rl_call *c) {
    fprintf(stderr, "op: kind=%d p1=%lld p2=%lld noread=%#llx write=%#llx flags=%#x\n", op->kind, (long long)op->p1,
            (long long)op->p2, (unsigned long long)op->noread_mask, (unsigned long long)op->write_mask, op->flags);
    for (int i = 0; i < c->nargs; i++) {
        const rl_arg *a = &c->args[i];
        fprintf(stderr, "  arg %d: type=%d first=%d count=%d i=%lld\n", i, a->type, a->first, a->count,
                (long long)a->i);
        if (a->type == RL_ARG_TENSOR || a->type == RL_ARG_TENSORLIST) {
            for (int k = 0; k < a->count; k++) {
                const rl_tensor *t = &c->tensors[a->first + k];
                fprintf(stderr, "    tensor dtype=%d size=(", t->dtype);
                for (int d = 0; d < t->ndim; d++) {
                    fprintf(stderr, "%lld%s", (long long)t->size[d], d + 1 < t->ndim ? ", " : "");
                }
                fprintf(stderr, ") stride=(");
                for (int d = 0; d < t->ndim; d++) {
                    fprintf(stderr, "%lld%s", (long long)t->stride[d], d + 1 < t->ndim ? ", " : "");
                }
                fprintf(stderr, ")\n");
            }
        } else if (a->type == RL_ARG_INTLIST || a->type == RL_ARG_BOOLLIST) {
            fprintf(stderr, "    ints:");
            for (int k = 0; k < a->count; k++) {
                fprintf(stderr, " %lld", (long long)c->ints[a->first + k]);
            }
            fprintf(stderr, "\n");
        }
    }
    for (int i = 0; i < c->nouts; i++) {
        const rl_tensor *t = &c->outs[i];
        fprintf(stderr, "  out %d: ndim=%d dtype=%d size=(", i, t->ndim, t->dtype);
        for (int d = 0; d < t->ndim; d++) {
            fprintf(stderr, "%lld%s", (long long)t->size[d], d + 1 < t->ndim ? ", " : "");
        }
        fprintf(stderr, ")\n");
    }
}

static void fail(const char *what, const rl_op *op, const rl_call *c, int st, const rl_cost *r) {
    fprintf(stderr, "\nfuzz_cost: invariant violated: %s\nstatus=%d matrix=%llu vector=%llu special=%llu "
                    "read=%llu written=%llu compat=%llu\n",
            what, st, (unsigned long long)r->matrix, (unsigned long long)r->vector, (unsigned long long)r->special,
            (unsigned long long)r->bytes_read, (unsigned long long)r->bytes_written, (unsigned long long)r->compat);
    print_call(op, c);
    abort();
}

static void check_one(const rl_op *op, const rl_call *c) {
    static const char *names[6] = {"matrix", "vector", "special", "bytes_read", "bytes_written", "compat"};
    rl_call before;
    memcpy(&before, c, sizeof(before));
    rl_cost r1, r2;
    int st = rl_cost_eval(op, c, &r1);
    int st2 = rl_cost_eval(op, c, &r2);
    n_evals += 2;
    if (memcmp(&before, c, sizeof(before)) != 0) {
        fail("rl_cost_eval modified its call", op, c, st, &r1);
    }
    if (st != st2 || (st == RL_OK && memcmp(&r1, &r2, sizeof(r1)) != 0)) {
        fail("two evaluations of one call differ", op, c, st, &r1);
    }
    if (st < RL_OK || st > RL_E_VALUE) {
        fail("status is not an rl_status", op, c, st, &r1);
    }
    if ((st == RL_E_KIND) != (op->kind < 0 || op->kind >= RL_K_COUNT)) {
        fail("RL_E_KIND returned for a known kind, or not for an unknown one", op, c, st, &r1);
    }
    expect e;
    if (!reference(op, c, &e)) {
        return;
    }
    const uint64_t got[6] = {r1.matrix, r1.vector, r1.special, r1.bytes_read, r1.bytes_written, r1.compat};
    int fits = 1;
    for (int k = 0; k < 6; k++) {
        if (!e.have[k]) {
            continue;
        }
        if (e.v[k] >= BIG) {
            fits = 0;
            if (st == RL_OK) {
                static char msg[96];
                snprintf(msg, sizeof(msg), "%s does not fit in 64 bits but the status is RL_OK (wrapped)", names[k]);
                fail(msg, op, c, st, &r1);
            }
        } else if (st == RL_OK && (u128)got[k] != e.v[k]) {
            static char msg[160];
            snprintf(msg, sizeof(msg), "%s = %llu, the formula gives %llu", names[k], (unsigned long long)got[k],
                     (unsigned long long)e.v[k]);
            fail(msg, op, c, st, &r1);
        }
    }
    /* The element-wise and copy kinds have no shape preconditions: counts that fit must come back. */
    if (fits && st != RL_OK && !allow_false_overflow && all_plausible(c) &&
        (op->kind == RL_K_COPY || op->kind == RL_K_FILL || op->kind == RL_K_EWISE || op->kind == RL_K_ZERO)) {
        fail("every count fits in 64 bits but the evaluation failed (false overflow)", op, c, st, &r1);
    }
}

static void report_evals(void) { fprintf(stderr, "cost-model evaluations: %llu\n", n_evals); }

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
    static decoded d; /* large: keep it off the stack */
    decode(data, size, &d);
    if (print_each) {
        rl_cost r;
        int st = rl_cost_eval(&d.op, &d.call, &r);
        fprintf(stderr, "status=%d matrix=%llu vector=%llu special=%llu read=%llu written=%llu compat=%llu dtype=%d\n",
                st, (unsigned long long)r.matrix, (unsigned long long)r.vector, (unsigned long long)r.special,
                (unsigned long long)r.bytes_read, (unsigned long long)r.bytes_written, (unsigned long long)r.compat,
                r.dtype);
        print_call(&d.op, &d.call);
    }
    check_one(&d.op, &d.call);
    /* The same call under every kind (and one unknown kind): each formula meets every argument layout. */
    rl_op op = d.op;
    for (int k = -1; k <= RL_K_COUNT; k++) {
        if (k == d.op.kind) {
            continue;
        }
        op.kind = k;
        check_one(&op, &d.call);
    }
    return 0;
}
