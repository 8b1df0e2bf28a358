/* Unit tests of csrc/capture.c (call signatures and dataflow rows), built with sanitizers by
 * tests/test_capture_c.py. Expected values are written out by hand beside each check. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "check.h"

static rl_arg targ(int first, int count, int type) {
    rl_arg a;
    memset(&a, 0, sizeof(a));
    a.type = type;
    a.first = first;
    a.count = count;
    return a;
}

static void test_signature_text(void) {
    /* addmm(bias f32[16], x f32[4,8], w f32[8,16], beta=1): "f32[16], f32[4,8], f32[8,16]" */
    const int64_t s16[] = {16}, s48[] = {4, 8}, s816[] = {8, 16}, s23[] = {2, 3};
    rl_tensor ts[] = {tensor(RL_DT_FLOAT32, 1, s16), tensor(RL_DT_FLOAT32, 2, s48), tensor(RL_DT_FLOAT32, 2, s816),
                      tensor(RL_DT_BFLOAT16, 2, s23), tensor(RL_DT_INT64, 0, NULL)};
    rl_call c;
    memset(&c, 0, sizeof(c));
    c.tensors = ts;
    c.nargs = 4;
    c.args[0] = targ(0, 1, RL_ARG_TENSOR);
    c.args[1] = targ(1, 1, RL_ARG_TENSOR);
    c.args[2] = targ(2, 1, RL_ARG_TENSOR);
    c.args[3] = targ(0, 0, RL_ARG_INT); /* not a tensor: not in the signature */
    int64_t key[64];
    size_t n = rl_sig_key(&c, key, 64);
    CHECK_EQ(n, 3 + 4 + 4); /* (dtype, ndim, sizes...) per tensor */
    char buf[128];
    CHECK_EQ(rl_sig_format(key, n, buf, sizeof(buf)), strlen("f32[16], f32[4,8], f32[8,16]"));
    CHECK_STR(buf, "f32[16], f32[4,8], f32[8,16]");
    /* a tensor list and a 0-dim tensor: "[bf16[2,3], i64[]]" then ", f32[16]" */
    c.nargs = 2;
    c.args[0] = targ(3, 2, RL_ARG_TENSORLIST);
    c.args[1] = targ(0, 1, RL_ARG_TENSOR);
    n = rl_sig_key(&c, key, 64);
    CHECK_EQ(n, 2 + 4 + 2 + 3);
    rl_sig_format(key, n, buf, sizeof(buf));
    CHECK_STR(buf, "[bf16[2,3], i64[]], f32[16]");
    /* truncated to the buffer, NUL-terminated, the full length returned */
    char small[6];
    CHECK_EQ(rl_sig_format(key, n, small, sizeof(small)), strlen("[bf16[2,3], i64[]], f32[16]"));
    CHECK_STR(small, "[bf16");
    /* a key longer than the buffer: the words that fit are written, the length needed returned */
    CHECK_EQ(rl_sig_key(&c, key, 3), n);
    /* no tensor argument: the empty signature */
    c.nargs = 0;
    CHECK_EQ(rl_sig_key(&c, key, 64), 0);
    CHECK_EQ(rl_sig_format(key, 0, buf, sizeof(buf)), 0);
    CHECK_STR(buf, "");
    CHECK_STR(rl_dtype_short(RL_DT_COUNT), "?");
    CHECK_STR(rl_dtype_short(-1), "?");
}

static void test_interning(void) {
    rl_sigtab t;
    memset(&t, 0, sizeof(t));
    uint32_t id = 99;
    CHECK_EQ(rl_sig_find(&t, NULL, 0, &id), 0); /* empty table */
    CHECK_EQ(rl_sig_add(&t, NULL, 0, &id), 0);
    CHECK_EQ(id, 0);
    /* 1000 keys of different lengths and contents: ids 1..1000 in order, all found again after the table grew */
    int64_t key[8];
    for (int i = 1; i <= 1000; i++) {
        for (int k = 0; k < 8; k++) {
            key[k] = i * 31 + k;
        }
        CHECK_EQ(rl_sig_find(&t, key, (size_t)(1 + i % 8), &id), 0);
        CHECK_EQ(rl_sig_add(&t, key, (size_t)(1 + i % 8), &id), 0);
        CHECK_EQ(id, i);
    }
    for (int i = 1000; i >= 1; i--) {
        for (int k = 0; k < 8; k++) {
            key[k] = i * 31 + k;
        }
        id = 0;
        CHECK_EQ(rl_sig_find(&t, key, (size_t)(1 + i % 8), &id), 1);
        CHECK_EQ(id, i);
        /* the same words, one shorter: another key */
        if (i % 8) {
            CHECK_EQ(rl_sig_find(&t, key, (size_t)(i % 8), &id) && id == (uint32_t)i, 0);
        }
    }
    CHECK_EQ(rl_sig_find(&t, NULL, 0, &id), 1);
    CHECK_EQ(id, 0);
    rl_sig_reset(&t);
    CHECK_EQ(rl_sig_find(&t, NULL, 0, &id), 0);
    rl_sig_free(&t);
}

static rl_cost bytes(uint64_t r, uint64_t w) {
    rl_cost c;
    memset(&c, 0, sizeof(c));
    c.bytes_read = r;
    c.bytes_written = w;
    return c;
}

static void test_accesses(void) {
    const int64_t s35[] = {3, 5}, s5[] = {5};
    rl_tensor ts[] = {tensor(RL_DT_FLOAT32, 2, s35), tensor(RL_DT_FLOAT32, 2, s35), tensor(RL_DT_FLOAT16, 1, s5)};
    rl_tensor outs[] = {tensor(RL_DT_FLOAT32, 2, s35)};
    uint64_t tstor[] = {11, 22, 11}, ostor[] = {33};
    rl_call c;
    memset(&c, 0, sizeof(c));
    c.tensors = ts;
    c.outs = outs;
    c.nouts = 1;
    c.nargs = 2;
    c.args[0] = targ(0, 1, RL_ARG_TENSOR);
    c.args[1] = targ(1, 1, RL_ARG_TENSOR);
    rl_op op;
    memset(&op, 0, sizeof(op));
    op.kind = RL_K_EWISE;
    rl_accbuf b;
    memset(&b, 0, sizeof(b));
    rl_cost cost = bytes(120, 60);
    /* add(a, b) -> out: read 11 and 22 (15 * 4 bytes each), write 33 */
    CHECK_EQ(rl_call_accesses(&op, &c, tstor, ostor, &cost, 7, &b), 0);
    CHECK_EQ(b.n, 3);
    CHECK_EQ(b.rows[0].storage, 11);
    CHECK_EQ(b.rows[0].nbytes, 60);
    CHECK_EQ(b.rows[0].write, 0);
    CHECK_EQ(b.rows[0].record, 7);
    CHECK_EQ(b.rows[1].storage, 22);
    CHECK_EQ(b.rows[2].storage, 33);
    CHECK_EQ(b.rows[2].write, 1);
    CHECK_EQ(b.rows[2].nbytes, 60);
    /* add_(a, b): argument 0 written in place, the output (an alias) not counted: read 11, 22; write 11 */
    b.n = 0;
    op.write_mask = 1;
    CHECK_EQ(rl_call_accesses(&op, &c, tstor, ostor, &cost, 8, &b), 0);
    CHECK_EQ(b.n, 3);
    CHECK_EQ(b.rows[2].storage, 11);
    CHECK_EQ(b.rows[2].write, 1);
    /* out= destination (noread and write): argument 1 only written */
    b.n = 0;
    op.write_mask = 2;
    op.noread_mask = 2;
    CHECK_EQ(rl_call_accesses(&op, &c, tstor, ostor, &cost, 9, &b), 0);
    CHECK_EQ(b.n, 2);
    CHECK_EQ(b.rows[0].storage, 11);
    CHECK_EQ(b.rows[0].write, 0);
    CHECK_EQ(b.rows[1].storage, 22);
    CHECK_EQ(b.rows[1].write, 1);
    /* two views of storage 11 in one call (f32[3,5] and f16[5]): one read row of 60 + 10 bytes */
    b.n = 0;
    memset(&op, 0, sizeof(op));
    op.kind = RL_K_EWISE;
    c.args[1] = targ(2, 1, RL_ARG_TENSOR);
    CHECK_EQ(rl_call_accesses(&op, &c, tstor, ostor, &cost, 10, &b), 0);
    CHECK_EQ(b.n, 2);
    CHECK_EQ(b.rows[0].nbytes, 70);
    /* nothing read or written by the cost: no rows; an unknown storage (0): no row */
    b.n = 0;
    rl_cost none = bytes(0, 0);
    CHECK_EQ(rl_call_accesses(&op, &c, tstor, ostor, &none, 11, &b), 0);
    CHECK_EQ(b.n, 0);
    uint64_t unknown[] = {0, 0, 0};
    CHECK_EQ(rl_call_accesses(&op, &c, unknown, ostor, &cost, 12, &b), 0);
    CHECK_EQ(b.n, 1);
    CHECK_EQ(b.rows[0].storage, 33);
    /* a broadcast input (stride 0) is read at its touched size: f32[3,5] with stride (0, 1) is 5 * 4 bytes */
    b.n = 0;
    ts[0].stride[0] = 0;
    c.nargs = 1;
    CHECK_EQ(rl_call_accesses(&op, &c, tstor, ostor, &cost, 13, &b), 0);
    CHECK_EQ(b.rows[0].nbytes, 20);
    /* a size whose byte count does not fit 64 bits saturates */
    b.n = 0;
    const int64_t huge[] = {INT64_MAX, 4};
    ts[0] = tensor(RL_DT_FLOAT64, 2, huge);
    CHECK_EQ(rl_call_accesses(&op, &c, tstor, ostor, &cost, 14, &b), 0);
    CHECK_EQ(b.rows[0].nbytes, UINT64_MAX);
    rl_acc_free(&b);
}

/* Rows of records 1 and 3 (record 2 has none) replayed at base 10: copies shifted to 10..12, in order; the
 * originals untouched; an empty or row-less range copies nothing; a base whose last index passes 2^32 - 1 fails
 * and leaves the buffer as it was. */
static void test_replay(void) {
    rl_accbuf b;
    memset(&b, 0, sizeof(b));
    const uint32_t recs[] = {0, 1, 1, 3, 4};
    for (size_t i = 0; i < 5; i++) { /* grows past the first allocation on the way */
        CHECK_EQ(rl_acc_replay(&b, 0, 0, 0), 0);
        if (b.n == b.cap) {
            size_t cap = b.cap ? 2 * b.cap : 4;
            b.rows = realloc(b.rows, cap * sizeof(*b.rows));
            b.cap = cap;
        }
        memset(&b.rows[b.n], 0, sizeof(b.rows[0]));
        b.rows[b.n].record = recs[i];
        b.rows[b.n].storage = 100 + i;
        b.rows[b.n].nbytes = 8 * (i + 1);
        b.rows[b.n].write = (uint8_t)(i & 1);
        b.n++;
    }
    CHECK_EQ(rl_acc_replay(&b, 1, 4, 10), 3);
    CHECK_EQ(b.n, 8);
    CHECK_EQ(b.rows[5].record, 10);
    CHECK_EQ(b.rows[5].storage, 101);
    CHECK_EQ(b.rows[5].write, 1);
    CHECK_EQ(b.rows[6].record, 10);
    CHECK_EQ(b.rows[6].storage, 102);
    CHECK_EQ(b.rows[6].nbytes, 24);
    CHECK_EQ(b.rows[7].record, 12);
    CHECK_EQ(b.rows[7].storage, 103);
    CHECK_EQ(b.rows[3].record, 3);
    CHECK_EQ(rl_acc_replay(&b, 2, 3, 20), 0); /* record 2 has no rows */
    CHECK_EQ(rl_acc_replay(&b, 3, 3, 20), 0);
    CHECK_EQ(b.n, 8);
    /* many rows at once: the buffer grows by more than one doubling */
    for (uint32_t k = 0; k < 6; k++) {
        CHECK_EQ(rl_acc_replay(&b, 0, 5, 20 + 10 * k), 5);
    }
    CHECK_EQ(b.n, 38);
    CHECK_EQ(b.rows[37].record, 74);
    CHECK_EQ(b.rows[37].storage, 104);
    /* the last index must fit 32 bits */
    CHECK_EQ(rl_acc_replay(&b, 0, 2, UINT32_MAX), -1);
    CHECK_EQ(b.n, 38);
    CHECK_EQ(rl_acc_replay(&b, 0, 2, UINT32_MAX - 1), 3);
    CHECK_EQ(b.rows[38].record, UINT32_MAX - 1);
    CHECK_EQ(b.rows[40].record, UINT32_MAX);
    rl_acc_free(&b);
}

int main(void) {
    test_replay();
    test_signature_text();
    test_interning();
    test_accesses();
    if (failures) {
        fprintf(stderr, "%d C capture test(s) failed\n", failures);
        return 1;
    }
    printf("all C capture tests passed\n");
    return 0;
}
