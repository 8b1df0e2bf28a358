/* Unit tests of csrc/attribution.c: the phase and module set of each recorded op, driven through a scripted autograd
 * (a node counter, the node a backward op runs in, grad mode, checkpointing's hooks) instead of torch. Each case
 * writes out which set each op must be credited to. */
#include <stdint.h>
#include <stdio.h>

#include "attribution.h"
#include "check.h"
#include "record.h"

/* The scripted autograd: `seq` is the number the next node gets; an op "makes a node" by taking it. */
typedef struct {
    uint64_t seq;
    int grad;
    int node_present, checkpoint, recomputing;
    uint64_t node_seq;
    int node_id, last_node_id; /* the node identity the binding compares (changed when they differ) */
    uint32_t fwd_set;          /* what forward_set answers */
    int fail;                  /* make every callback fail */
    int calls_node;
} fake;

static int f_next_seq(void *ctx, uint64_t *seq) {
    fake *f = ctx;
    *seq = f->seq;
    return f->fail ? -1 : 0;
}
static int f_grad(void *ctx) { return ((fake *)ctx)->grad; }
static int f_node(void *ctx, int *changed, int *present, uint64_t *seq, int *checkpoint) {
    fake *f = ctx;
    f->calls_node++;
    *changed = f->node_id != f->last_node_id;
    f->last_node_id = f->node_id;
    *present = f->node_present;
    *seq = f->node_seq;
    *checkpoint = f->checkpoint;
    return f->fail ? -1 : 0;
}
static int f_recomputing(void *ctx) { return ((fake *)ctx)->recomputing; }
/* the set `mid` plus the entering module: 1000 + mid in this script */
static int f_plus(void *ctx, uint32_t mid, uint32_t *out) {
    (void)ctx;
    *out = 1000 + mid;
    return 0;
}
static int f_forward_set(void *ctx, uint32_t *out) {
    *out = ((fake *)ctx)->fwd_set;
    return 0;
}

static rl_attr_env env_of(fake *f) {
    rl_attr_env e = {f, f_next_seq, f_grad, f_node, f_recomputing, f_plus, f_forward_set};
    return e;
}

/* a backward op running in node `seq` (a new node identity each time `seq` changes) */
static void in_node(fake *f, uint64_t seq) {
    f->node_present = 1;
    f->node_seq = seq;
    f->node_id = (int)(seq + 1);
}

static rl_attr_out op(rl_attribution *a, fake *f, int backward, uint32_t running) {
    rl_attr_env e = env_of(f);
    rl_attr_out o = {-1, 0, -1};
    CHECK_EQ(rl_attr_op(a, &e, backward, running, &o), 0);
    return o;
}

/* Forward through Net (set 1) and Net.b (set 2), then the backward of each node. */
static void test_backward_credited_to_the_forward_that_made_the_node(void) {
    fake f = {.seq = 100, .grad = 1, .last_node_id = -1};
    rl_attr_env e = env_of(&f);
    rl_attribution a;
    rl_attr_init(&a);
    CHECK_EQ(rl_attr_mark(&a, &e, 0), 0);            /* the block opens: set 0 ("Global") from node 100 */
    CHECK_EQ(rl_attr_module(&a, &e, 0, 1, 1), 0);    /* Net's forward: set 1 */
    rl_attr_out o = op(&a, &f, 0, 1);                /* an op in Net: node 100 */
    CHECK_EQ(o.phase, RL_PHASE_FORWARD);
    CHECK_EQ(o.mid, 1);
    f.seq = 101;
    CHECK_EQ(rl_attr_module(&a, &e, 0, 1, 2), 0);    /* Net.b: set 2 */
    op(&a, &f, 0, 2);                                /* node 101 */
    f.seq = 102;
    CHECK_EQ(rl_attr_module(&a, &e, 0, 0, 1), 0);    /* Net.b ends */
    op(&a, &f, 0, 1);                                /* node 102 */
    f.seq = 103;
    CHECK_EQ(rl_attr_module(&a, &e, 0, 0, 0), 0);    /* Net ends */
    op(&a, &f, 0, 0);                                /* the loss: node 103, under "Global" */
    f.seq = 104;
    /* backward, the tracker's running set being 0 throughout */
    in_node(&f, 103);
    o = op(&a, &f, 1, 0);
    CHECK_EQ(o.phase, RL_PHASE_BACKWARD);
    CHECK_EQ(o.mid, 0);
    CHECK_EQ(o.unlinked, 0);
    in_node(&f, 102);
    CHECK_EQ(op(&a, &f, 1, 0).mid, 1);
    in_node(&f, 101);
    CHECK_EQ(op(&a, &f, 1, 0).mid, 2);
    int before = f.calls_node;
    CHECK_EQ(op(&a, &f, 1, 0).mid, 2); /* a second op in the same node: the cached answer */
    CHECK_EQ(f.calls_node, before + 1);
    in_node(&f, 100);
    CHECK_EQ(op(&a, &f, 1, 0).mid, 1);
    /* an accumulator (no sequence number): the running set, linked */
    in_node(&f, UINT64_MAX);
    o = op(&a, &f, 1, 7);
    CHECK_EQ(o.mid, 7);
    CHECK_EQ(o.unlinked, 0);
    /* a node made before the block: the running set, flagged */
    in_node(&f, 50);
    o = op(&a, &f, 1, 7);
    CHECK_EQ(o.mid, 7);
    CHECK_EQ(o.unlinked, 1);
    /* no node at all */
    f.node_present = 0;
    f.node_id = -5;
    o = op(&a, &f, 1, 7);
    CHECK_EQ(o.mid, 7);
    CHECK_EQ(o.unlinked, 1);
    rl_attr_free(&a);
}

/* Nodes made inside a backward (a double backward's graph) are no forward module's; the first forward op after
 * the backward marks its own node (made just before it ran) for the running set. */
static void test_double_backward_and_the_next_forward(void) {
    fake f = {.seq = 10, .grad = 1, .last_node_id = -1};
    rl_attr_env e = env_of(&f);
    rl_attribution a;
    rl_attr_init(&a);
    rl_attr_mark(&a, &e, 3);      /* set 3 from node 10 */
    op(&a, &f, 0, 3);             /* node 10 */
    f.seq = 11;
    in_node(&f, 10);
    CHECK_EQ(op(&a, &f, 1, 3).mid, 3); /* backward of node 10: marks "no module" from node 11 */
    f.seq = 13;                   /* it made nodes 11 and 12 (create_graph) */
    in_node(&f, 12);
    rl_attr_out o = op(&a, &f, 1, 3);
    CHECK_EQ(o.unlinked, 1);      /* a double backward's node */
    /* the next forward op: it made node 13 just before it ran, which belongs to the running set 4 */
    f.seq = 14;
    o = op(&a, &f, 0, 4);
    CHECK_EQ(o.mid, 4);
    in_node(&f, 13);
    CHECK_EQ(op(&a, &f, 1, 0).mid, 4);
    /* with grad mode off the op made no node: the mark is at the next number */
    f.seq = 20;
    in_node(&f, 19);
    op(&a, &f, 1, 0); /* a backward op: "no module" from 20 */
    f.grad = 0;
    op(&a, &f, 0, 5); /* forward, no grad: set 5 from node 20 */
    f.grad = 1;
    op(&a, &f, 0, 5); /* with grad mode on, the next op makes node 20 */
    f.seq = 21;
    in_node(&f, 20);
    CHECK_EQ(op(&a, &f, 1, 0).mid, 5);
    in_node(&f, 19);
    CHECK_EQ(op(&a, &f, 1, 0).unlinked, 1);
    rl_attr_free(&a);
}

/* A reentrant checkpoint: its node (made under set 1) runs the forward again inside the backward. */
static void test_reentrant_recomputation(void) {
    fake f = {.seq = 200, .grad = 1, .last_node_id = -1};
    rl_attr_env e = env_of(&f);
    rl_attribution a;
    rl_attr_init(&a);
    rl_attr_mark(&a, &e, 1);
    op(&a, &f, 0, 1); /* the checkpoint's node: 200, under set 1 */
    f.seq = 201;
    in_node(&f, 200);
    f.checkpoint = 1;
    rl_attr_out o = op(&a, &f, 1, 0); /* an op of the recomputation outside any module */
    CHECK_EQ(o.phase, RL_PHASE_RECOMPUTE);
    CHECK_EQ(o.mid, 1);
    /* a module's forward runs again inside the checkpoint's node: set 1 plus its name (1001) */
    CHECK_EQ(rl_attr_module(&a, &e, 1, 1, 0), 0);
    CHECK_EQ(a.depth, 1);
    o = op(&a, &f, 1, 0);
    CHECK_EQ(o.phase, RL_PHASE_RECOMPUTE);
    CHECK_EQ(o.mid, 1001);
    f.seq = 202; /* it made node 201 */
    CHECK_EQ(rl_attr_module(&a, &e, 1, 1, 0), 0); /* a module inside that one: 1000 + 1001 */
    CHECK_EQ(op(&a, &f, 1, 0).mid, 2001);
    f.seq = 203; /* node 202 */
    CHECK_EQ(rl_attr_module(&a, &e, 1, 0, 0), 0); /* the inner one ends: back to 1001 */
    CHECK_EQ(op(&a, &f, 1, 0).mid, 1001);
    CHECK_EQ(rl_attr_module(&a, &e, 1, 0, 0), 0); /* the outer one ends: nodes from 203 are no module's */
    CHECK_EQ(a.depth, 0);
    /* the inner backward of the recomputed graph: nodes 201 (made under 1001) and 202 (under 2001) */
    f.checkpoint = 0;
    in_node(&f, 202);
    o = op(&a, &f, 1, 0);
    CHECK_EQ(o.phase, RL_PHASE_BACKWARD);
    CHECK_EQ(o.mid, 2001);
    in_node(&f, 201);
    CHECK_EQ(op(&a, &f, 1, 0).mid, 1001);
    rl_attr_free(&a);
}

/* A non-reentrant checkpoint: its hooks are in force while it runs the forward again (in any node). */
static void test_non_reentrant_recomputation(void) {
    fake f = {.seq = 300, .grad = 1, .last_node_id = -1, .fwd_set = 9};
    rl_attr_env e = env_of(&f);
    rl_attribution a;
    rl_attr_init(&a);
    rl_attr_mark(&a, &e, 4);
    op(&a, &f, 0, 4); /* node 300 under set 4 */
    f.seq = 301;
    in_node(&f, 300);
    f.recomputing = 1;
    CHECK_EQ(op(&a, &f, 1, 0).mid, 4); /* outside any module: the node's set */
    /* a module forward runs again: the set of its last forward (9 in this script) */
    CHECK_EQ(rl_attr_module(&a, &e, 1, 1, 0), 0);
    rl_attr_out o = op(&a, &f, 1, 0);
    CHECK_EQ(o.phase, RL_PHASE_RECOMPUTE);
    CHECK_EQ(o.mid, 9);
    /* the recomputation stops early, inside that module (its end never comes); the backward goes on */
    f.recomputing = 0;
    o = op(&a, &f, 1, 0);
    CHECK_EQ(o.phase, RL_PHASE_BACKWARD);
    CHECK_EQ(o.mid, 4);
    CHECK_EQ(a.depth, 0); /* the module left on the recompute stack is gone */
    rl_attr_free(&a);
}

static void test_errors(void) {
    fake f = {.seq = 1, .grad = 1, .last_node_id = -1};
    rl_attr_env e = env_of(&f);
    rl_attribution a;
    rl_attr_init(&a);
    f.fail = 1;
    CHECK_EQ(rl_attr_mark(&a, &e, 0), RL_ATTR_ERR);
    rl_attr_out o;
    in_node(&f, 1);
    CHECK_EQ(rl_attr_op(&a, &e, 1, 0, &o), RL_ATTR_ERR);
    CHECK_EQ(rl_attr_module(&a, &e, 0, 1, 0), RL_ATTR_ERR);
    rl_attr_free(&a);
    rl_attr_free(&a); /* freeing twice is harmless */
}

int main(void) {
    test_backward_credited_to_the_forward_that_made_the_node();
    test_double_backward_and_the_next_forward();
    test_reentrant_recomputation();
    test_non_reentrant_recomputation();
    test_errors();
    if (failures) {
        fprintf(stderr, "%d C attribution test(s) failed\n", failures);
        return 1;
    }
    printf("all C attribution tests passed\n");
    return 0;
}
