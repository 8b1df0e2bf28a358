/* Where a recorded op belongs: its phase (forward, backward, recompute) and the module set credited with it. Pure C.
 *
 * The rules, each decided here from what the tracker can observe (rl_attr_env: the binding asks autograd):
 *  - a forward op belongs to the set of modules whose forward is running;
 *  - a backward op to the set whose forward created the autograd node it runs in (link.h), found by the node's
 *    sequence number; an accumulator (AccumulateGrad, no sequence number) to the running set; an op in a node no
 *    forward module created (before the block, inside a backward) to the running set, and it is flagged unlinked;
 *  - a forward op run inside a backward by activation checkpointing (a reentrant checkpoint's node, or a
 *    non-reentrant checkpoint's recomputation hooks in force) is recomputation: it belongs to the set the innermost
 *    module forward running again ran in during the forward (the recompute stack), else to the set the
 *    checkpointed function was called in (a non-reentrant checkpoint's, where known), else to the node's set (a
 *    reentrant checkpoint's node was made where the function was called);
 *  - nodes made inside a backward (a double backward's graph) belong to no forward module, and those a recomputation
 *    makes to the set recomputed.
 * The binding (track_link.c) supplies the observations as callbacks and keeps the Python objects (module names,
 * interned sets). */
#ifndef RL_ATTRIBUTION_H
#define RL_ATTRIBUTION_H

#include <stddef.h>
#include <stdint.h>

#include "link.h"

enum { RL_NODE_FOUND, RL_NODE_ACCUMULATE, RL_NODE_NONE }; /* how the node of a backward op resolved */

#define RL_ATTR_ERR (-1)   /* a callback failed (it reported its error) */
#define RL_ATTR_NOMEM (-2) /* out of memory here (nothing reported) */

/* What the tracker observes, asked when needed. Each returns 0 (predicates: 1 or 0), or -1 after reporting an
 * error. */
typedef struct {
    void *ctx;
    /* the sequence number the next autograd node of this thread gets */
    int (*next_seq)(void *ctx, uint64_t *seq);
    /* whether grad mode is on */
    int (*grad_enabled)(void *ctx);
    /* the node the running backward op runs in: *changed = 0 when it is the node of the previous call (then *seq and
     * *present are not read); else *present = 0 for no node, *seq its sequence number (UINT64_MAX: an
     * accumulator). *checkpoint: whether it is a reentrant checkpoint's node (its backward runs the forward again). */
    int (*node)(void *ctx, int *changed, int *present, uint64_t *seq, int *checkpoint);
    /* whether non-reentrant activation checkpointing's recomputation hooks are in force */
    int (*recomputing)(void *ctx);
    /* the set `mid` plus the module whose forward is starting */
    int (*plus)(void *ctx, uint32_t mid, uint32_t *out);
    /* the set the starting module's forward last ran in outside a backward (else the running set) */
    int (*forward_set)(void *ctx, uint32_t *out);
    /* the set the function a non-reentrant checkpoint recomputes now was called in, where known: 1 with *out, 0 where
     * unknown (NULL: never known) */
    int (*region)(void *ctx, uint32_t *out);
} rl_attr_env;

typedef struct {
    rl_links links;    /* which set created each autograd node */
    uint32_t *rstack;  /* the recompute stack: sets of the module forwards running again inside a backward */
    size_t depth, cap;
    uint32_t last_mid; /* the set of the node resolved last (RL_LINK_NONE), */
    int last_how;      /* and how it resolved (RL_NODE_*) */
} rl_attribution;

typedef struct {
    int phase;     /* RL_PHASE_FORWARD, _BACKWARD or _RECOMPUTE (record.h) */
    uint32_t mid;  /* the set credited */
    int unlinked;  /* a backward op whose node no forward module created (credited to the running set) */
} rl_attr_out;

/* A fresh state (all zero but the node cache). */
void rl_attr_init(rl_attribution *a);

/* Nodes made from now on belong to set `mid` (the running set changed outside a backward). 0 or RL_ATTR_*. */
int rl_attr_mark(rl_attribution *a, const rl_attr_env *e, uint32_t mid);

/* Where an op recorded now belongs; `backward`: a graph task is running on this thread; `running`: the tracker's
 * running set. 0 or RL_ATTR_*. */
int rl_attr_op(rl_attribution *a, const rl_attr_env *e, int backward, uint32_t running, rl_attr_out *out);

/* A module's forward starts (entering = 1) or ends; `running`: the running set after the change. 0 or RL_ATTR_*. */
int rl_attr_module(rl_attribution *a, const rl_attr_env *e, int backward, int entering, uint32_t running);

/* The recompute stack emptied (the end of a backward). */
void rl_attr_clear_stack(rl_attribution *a);

void rl_attr_free(rl_attribution *a);

#endif
