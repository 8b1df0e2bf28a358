/* Signatures and dataflow rows of op calls: see capture.h. */
#include "capture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Grow the array *buf (elements of `elem` bytes, capacity *cap) to hold at least `need` elements, doubling from
 * 256. 0 on success, -1 when out of memory or when the size would not fit a size_t (nothing changed then). */
static int grow_array(void **buf, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) {
        return 0;
    }
    size_t c = *cap ? *cap : 256;
    while (c < need) {
        if (c > SIZE_MAX / 2 / elem) {
            return -1;
        }
        c *= 2;
    }
    void *p = realloc(*buf, c * elem);
    if (!p) {
        return -1;
    }
    *buf = p;
    *cap = c;
    return 0;
}

/* ---- signatures ----------------------------------------------------------------------------------------- */

static const char *const short_names[RL_DT_COUNT] = {
    [RL_DT_UNKNOWN] = "?",
    [RL_DT_FLOAT64] = "f64",
    [RL_DT_FLOAT32] = "f32",
    [RL_DT_FLOAT16] = "f16",
    [RL_DT_BFLOAT16] = "bf16",
    [RL_DT_FLOAT8_E4M3FN] = "f8e4m3fn",
    [RL_DT_FLOAT8_E5M2] = "f8e5m2",
    [RL_DT_FLOAT8_E4M3FNUZ] = "f8e4m3fnuz",
    [RL_DT_FLOAT8_E5M2FNUZ] = "f8e5m2fnuz",
    [RL_DT_COMPLEX128] = "c128",
    [RL_DT_COMPLEX64] = "c64",
    [RL_DT_COMPLEX32] = "c32",
    [RL_DT_INT64] = "i64",
    [RL_DT_INT32] = "i32",
    [RL_DT_INT16] = "i16",
    [RL_DT_INT8] = "i8",
    [RL_DT_UINT8] = "u8",
    [RL_DT_UINT16] = "u16",
    [RL_DT_UINT32] = "u32",
    [RL_DT_UINT64] = "u64",
    [RL_DT_BOOL] = "b8",
};

const char *rl_dtype_short(int dt) {
    return (dt >= 0 && dt < RL_DT_COUNT && short_names[dt]) ? short_names[dt] : "?";
}

static size_t put(int64_t *key, size_t cap, size_t n, int64_t v) {
    if (n < cap) {
        key[n] = v;
    }
    return n + 1;
}

static size_t put_tensor(const rl_tensor *t, int64_t *key, size_t cap, size_t n) {
    int nd = t->ndim < 0 ? 0 : (t->ndim > RL_MAX_DIMS ? RL_MAX_DIMS : t->ndim);
    n = put(key, cap, n, t->dtype);
    n = put(key, cap, n, nd);
    for (int d = 0; d < nd; d++) {
        n = put(key, cap, n, t->size[d]);
    }
    return n;
}

size_t rl_sig_key(const rl_call *c, int64_t *key, size_t cap) {
    size_t n = 0;
    for (int i = 0; i < c->nargs; i++) {
        const rl_arg *a = &c->args[i];
        if (a->type == RL_ARG_TENSOR) {
            n = put_tensor(&c->tensors[a->first], key, cap, n);
        } else if (a->type == RL_ARG_TENSORLIST) {
            n = put(key, cap, n, RL_SIG_LIST);
            n = put(key, cap, n, a->count);
            for (int k = 0; k < a->count; k++) {
                n = put_tensor(&c->tensors[a->first + k], key, cap, n);
            }
        }
    }
    return n;
}

static uint64_t key_hash(const int64_t *key, size_t len) {
    uint64_t h = 0x9e3779b97f4a7c15u ^ (uint64_t)len;
    for (size_t i = 0; i < len; i++) {
        h ^= (uint64_t)key[i];
        h *= 0x100000001b3u;
        h ^= h >> 29;
    }
    return h;
}

static int grow_table(rl_sigtab *t) {
    size_t cap = t->cap ? t->cap * 2 : 64;
    rl_sig_slot *tab = calloc(cap, sizeof(*tab));
    if (!tab) {
        return -1;
    }
    for (size_t j = 0; j < t->cap; j++) {
        if (t->tab[j].used) {
            size_t i = t->tab[j].hash & (cap - 1);
            while (tab[i].used) {
                i = (i + 1) & (cap - 1);
            }
            tab[i] = t->tab[j];
        }
    }
    free(t->tab);
    t->tab = tab;
    t->cap = cap;
    return 0;
}

int rl_sig_find(const rl_sigtab *t, const int64_t *key, size_t len, uint32_t *id) {
    if (!t->cap) {
        return 0;
    }
    uint64_t h = key_hash(key, len);
    for (size_t i = h & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
        const rl_sig_slot *s = &t->tab[i];
        if (!s->used) {
            return 0;
        }
        if (s->hash == h && s->len == len && (!len || !memcmp(t->keys + s->off, key, len * sizeof(*key)))) {
            *id = s->id;
            return 1;
        }
    }
}

int rl_sig_add(rl_sigtab *t, const int64_t *key, size_t len, uint32_t *id) {
    uint64_t h = key_hash(key, len);
    if (t->n >= UINT32_MAX || ((t->n + 1) * 2 > t->cap && grow_table(t) < 0)) {
        return -1;
    }
    if (len > SIZE_MAX - t->nkeys ||
        grow_array((void **)&t->keys, &t->cap_keys, t->nkeys + len, sizeof(*t->keys)) < 0) {
        return -1;
    }
    if (len) {
        memcpy(t->keys + t->nkeys, key, len * sizeof(*key));
    }
    size_t i = h & (t->cap - 1);
    while (t->tab[i].used) {
        i = (i + 1) & (t->cap - 1);
    }
    t->tab[i] = (rl_sig_slot){h, t->nkeys, len, (uint32_t)t->n, 1};
    t->nkeys += len;
    *id = (uint32_t)t->n++;
    return 0;
}

/* Append printf-style text at buf + n (never beyond cap); returns the new length the full text needs. */
static size_t emit(char *buf, size_t cap, size_t n, const char *fmt, long long v, const char *s) {
    char tmp[48];
    int k = s ? snprintf(tmp, sizeof(tmp), fmt, s) : snprintf(tmp, sizeof(tmp), fmt, v);
    for (int j = 0; j < k; j++, n++) {
        if (n + 1 < cap) {
            buf[n] = tmp[j];
        }
    }
    return n;
}

static size_t format_tensor(const int64_t *key, size_t len, size_t *i, char *buf, size_t cap, size_t n) {
    if (*i + 2 > len) {
        *i = len;
        return n;
    }
    int64_t dt = key[(*i)++], nd = key[(*i)++];
    n = emit(buf, cap, n, "%s[", 0, rl_dtype_short((int)dt));
    for (int64_t d = 0; d < nd && *i < len; d++) {
        n = emit(buf, cap, n, d ? ",%lld" : "%lld", (long long)key[(*i)++], NULL);
    }
    return emit(buf, cap, n, "%s", 0, "]");
}

size_t rl_sig_format(const int64_t *key, size_t len, char *buf, size_t cap) {
    size_t n = 0, i = 0;
    for (int first = 1; i < len; first = 0) {
        if (!first) {
            n = emit(buf, cap, n, "%s", 0, ", ");
        }
        if (key[i] == RL_SIG_LIST && i + 1 < len) {
            int64_t count = key[i + 1];
            i += 2;
            n = emit(buf, cap, n, "%s", 0, "[");
            for (int64_t k = 0; k < count && i < len; k++) {
                if (k) {
                    n = emit(buf, cap, n, "%s", 0, ", ");
                }
                n = format_tensor(key, len, &i, buf, cap, n);
            }
            n = emit(buf, cap, n, "%s", 0, "]");
        } else {
            n = format_tensor(key, len, &i, buf, cap, n);
        }
    }
    if (cap) {
        buf[n < cap ? n : cap - 1] = '\0';
    }
    return n;
}

void rl_sig_reset(rl_sigtab *t) {
    if (t->tab) {
        memset(t->tab, 0, t->cap * sizeof(*t->tab));
    }
    t->n = 0;
    t->nkeys = 0;
}

void rl_sig_free(rl_sigtab *t) {
    free(t->tab);
    free(t->keys);
    memset(t, 0, sizeof(*t));
}

/* ---- dataflow ------------------------------------------------------------------------------------------- */

static uint64_t sat_mul(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

static uint64_t sat_add(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

/* Bytes of a tensor: its elements (touched: a dimension of stride 0 counted once), times its item size. */
static uint64_t tensor_bytes(const rl_tensor *t, int touched) {
    int ov = 0;
    uint64_t n = touched ? rl_touched(t, &ov) : rl_numel(t, &ov);
    return ov ? UINT64_MAX : sat_mul(n, rl_dtype_itemsize(t->dtype));
}

/* Add `nbytes` of `storage` in direction `write` to the rows of the call (rows first .. b->n). */
static int add_row(rl_accbuf *b, size_t first, uint64_t storage, uint64_t nbytes, int write, uint32_t rec) {
    if (!storage) {
        return 0;
    }
    for (size_t i = first; i < b->n; i++) {
        if (b->rows[i].storage == storage && b->rows[i].write == write) {
            b->rows[i].nbytes = sat_add(b->rows[i].nbytes, nbytes);
            return 0;
        }
    }
    if (grow_array((void **)&b->rows, &b->cap, b->n + 1, sizeof(*b->rows)) < 0) {
        return -1;
    }
    rl_access *r = &b->rows[b->n++];
    memset(r, 0, sizeof(*r));
    r->storage = storage;
    r->nbytes = nbytes;
    r->record = rec;
    r->write = (uint8_t)write;
    return 0;
}

static int mask_bit(uint64_t mask, int i) { return i < 64 && ((mask >> i) & 1u); }

int rl_call_accesses(const rl_op *op, const rl_call *call, const uint64_t *tstor, const uint64_t *ostor,
                     const rl_cost *cost, uint32_t rec, rl_accbuf *b) {
    size_t first = b->n;
    for (int pass = 0; pass < 2; pass++) { /* 0: reads, 1: writes */
        if (pass == 0 ? !cost->bytes_read : !cost->bytes_written) {
            continue;
        }
        uint64_t mask = pass == 0 ? ~op->noread_mask : op->write_mask;
        for (int i = 0; i < call->nargs; i++) {
            const rl_arg *a = &call->args[i];
            if ((a->type != RL_ARG_TENSOR && a->type != RL_ARG_TENSORLIST) || (i < 64 && !mask_bit(mask, i)) ||
                (i >= 64 && pass == 1)) {
                continue;
            }
            for (int k = 0; k < a->count; k++) {
                int t = a->first + k;
                if (add_row(b, first, tstor[t], tensor_bytes(&call->tensors[t], pass == 0), pass, rec) < 0) {
                    b->n = first;
                    return -1;
                }
            }
        }
        if (pass == 1 && (!op->write_mask || (op->flags & RL_OPF_FRESH_OUTS))) {
            for (int i = 0; i < call->nouts; i++) {
                if (call->outs[i].ndim >= 0 &&
                    add_row(b, first, ostor[i], tensor_bytes(&call->outs[i], 0), 1, rec) < 0) {
                    b->n = first;
                    return -1;
                }
            }
        }
    }
    return 0;
}

/* Index of the first row whose record is >= rec (rows sorted by record). */
static size_t first_row_at(const rl_accbuf *b, uint32_t rec) {
    size_t lo = 0, hi = b->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (b->rows[mid].record < rec) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

long long rl_acc_replay(rl_accbuf *b, uint32_t start, uint32_t stop, uint32_t base) {
    if (stop <= start) {
        return 0;
    }
    if ((uint64_t)base + (stop - start - 1) > UINT32_MAX) {
        return -1;
    }
    size_t lo = first_row_at(b, start), hi = first_row_at(b, stop), n = hi - lo;
    if (n == 0) {
        return 0;
    }
    if (grow_array((void **)&b->rows, &b->cap, b->n + n, sizeof(*b->rows)) < 0) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        rl_access r = b->rows[lo + i];
        r.record = base + (r.record - start);
        b->rows[b->n + i] = r;
    }
    b->n += n;
    return (long long)n;
}

void rl_acc_free(rl_accbuf *b) {
    free(b->rows);
    memset(b, 0, sizeof(*b));
}
