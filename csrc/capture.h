/* What the recorder captures per op call besides its counts: the call's signature (the dtypes and shapes of its
 * tensor arguments, interned into a small integer) and its dataflow (the storages it read and wrote, rl_access
 * rows). Pure C: no Python.h; the binding (cost_describe.c) turns allocation failures into MemoryError.
 *
 * Signature key: the tensor arguments in argument order, encoded as int64 words: a tensor is (dtype, ndim,
 * size[0..ndim)); a tensor list is (RL_SIG_LIST, count) followed by its tensors. The key of a call without tensor
 * arguments is empty. Its text (rl_sig_format) reads "f32[8,3,224,224], f32[64,3,7,7]"; a list "[f32[2], f32[3]]". */
#ifndef RL_CAPTURE_H
#define RL_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#include "cost.h"
#include "record.h"

#define RL_SIG_LIST (-1)

/* ---- signatures ----------------------------------------------------------------------------------------- */

typedef struct {
    uint64_t hash;
    size_t off, len; /* the key: keys[off .. off + len) */
    uint32_t id;
    uint32_t used;
} rl_sig_slot;

typedef struct {
    rl_sig_slot *tab; /* open addressing, capacity a power of two, at most half full */
    size_t cap, n;
    int64_t *keys; /* the interned keys, back to back */
    size_t nkeys, cap_keys;
} rl_sigtab;

/* Words of the signature key of `c` (its tensor arguments); writes at most `cap` of them into `key`. */
size_t rl_sig_key(const rl_call *c, int64_t *key, size_t cap);

/* Find key[0..len) in `t`: 1 and its id in *id, or 0 when it is not there. */
int rl_sig_find(const rl_sigtab *t, const int64_t *key, size_t len, uint32_t *id);

/* Add key[0..len) (not in `t`) with the next id (0, 1, ...), in *id. 0, or -1 when memory ran out or 2^32
 * signatures are interned (nothing changed). */
int rl_sig_add(rl_sigtab *t, const int64_t *key, size_t len, uint32_t *id);

/* Text of a signature key into buf (NUL-terminated, truncated to cap); returns the length the full text needs. */
size_t rl_sig_format(const int64_t *key, size_t len, char *buf, size_t cap);

void rl_sig_reset(rl_sigtab *t); /* forget every key (the memory is kept) */
void rl_sig_free(rl_sigtab *t);

/* Short name of a dtype for signatures: "f32", "bf16", "i64", "b8", ...; "?" when unknown. */
const char *rl_dtype_short(int dt);

/* ---- dataflow ------------------------------------------------------------------------------------------- */

typedef struct {
    rl_access *rows;
    size_t n, cap;
} rl_accbuf;

/* Append the rows of one call (record index `rec`) to `b`: reads, when the call's cost reads bytes, of every
 * tensor argument not in op->noread_mask (its touched bytes: a broadcast dimension once); writes, when the cost
 * writes bytes, of the arguments in op->write_mask and of the outputs unless they alias those arguments (the rule
 * of the cost model's compulsory bytes). tstor[i] / ostor[i] are the storage ids of call->tensors[i] /
 * call->outs[i] (0: unknown, no row). One row per (storage, direction): the bytes of several views of one storage
 * are added. Returns 0, or -1 when memory ran out (b is then as before the call). */
int rl_call_accesses(const rl_op *op, const rl_call *call, const uint64_t *tstor, const uint64_t *ostor,
                     const rl_cost *cost, uint32_t rec, rl_accbuf *b);

/* Append copies of the rows of records [start, stop) to `b`, each shifted to record `base + (record - start)`.
 * The rows are in record order (rl_call_accesses appends them so), which locates the range by bisection. Returns
 * the number of rows copied, or -1 when memory ran out or a shifted record index does not fit 32 bits (b is then
 * as before the call). */
long long rl_acc_replay(rl_accbuf *b, uint32_t start, uint32_t stop, uint32_t base);

void rl_acc_free(rl_accbuf *b);

#endif
