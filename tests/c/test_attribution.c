/* Unit tests of csrc/attribution.c: the phase and module set of each recorded op, driven through a scripted autograd
 * (a node counter, the node a backward op runs in, grad mode, checkpointing's hooks) instead of torch. Each case
 * writes out which set each op must be credited to. */
#include <stdint.h>
#include <stdio.h>

#include "attribution.h"
#include "check.h"
#include "record.h"

/* The scripted autograd: `seq` is the number the next node gets; an op "makes a node" by taking it. Each callback can
 * be made to fail on its own (fail_*), and counts its calls (calls_*, failed ones included). A failing callback
 * writes nothing, and a working one writes only what attribution.h says is read: node() leaves *present and *seq
 * alone when the node did not change, and *seq alone when there is no node, so a value the rules read without
 * being told it shows up. */
typedef struct {
    uint64_t seq;
    int grad;
    int node_present, checkpoint, recomputing;
    uint64_t node_seq;
    int node_id, last_node_id; /* the node identity the binding compares (changed when they differ) */
    uint32_t fwd_set;          /* what forward_set answers */
    int region_known;          /* whether region answers (1: with region_set) */
    uint32_t region_set;
    int fail_next_seq, fail_grad, fail_node, fail_recomputing, fail_plus, fail_forward_set, fail_region;
    int calls_next_seq, calls_grad, calls_node, calls_recomputing, calls_plus, calls_forward_set, calls_region;
} fake;

static int f_next_seq(void *ctx, uint64_t *seq) {
    fake *f = ctx;
    f->calls_next_seq++;
    if (f->fail_next_seq) {
        return -1;
    }
    *seq = f->seq;
    return 0;
}
static int f_grad(void *ctx) {
    fake *f = ctx;
    f->calls_grad++;
    return f->fail_grad ? -1 : f->grad;
}
static int f_node(void *ctx, int *changed, int *present, uint64_t *seq, int *checkpoint) {
    fake *f = ctx;
    f->calls_node++;
    if (f->fail_node) {
        return -1; /* the node identity is not remembered either: the next call sees the change */
    }
    *changed = f->node_id != f->last_node_id;
    f->last_node_id = f->node_id;
    if (*changed) {
        *present = f->node_present;
        if (f->node_present) {
            *seq = f->node_seq;
        }
    }
    *checkpoint = f->checkpoint;
    return 0;
}
static int f_recomputing(void *ctx) {
    fake *f = ctx;
    f->calls_recomputing++;
    return f->fail_recomputing ? -1 : f->recomputing;
}
/* the set `mid` plus the entering module: 1000 + mid in this script */
static int f_plus(void *ctx, uint32_t mid, uint32_t *out) {
    fake *f = ctx;
    f->calls_plus++;
    if (f->fail_plus) {
        return -1;
    }
    *out = 1000 + mid;
    return 0;
}
static int f_forward_set(void *ctx, uint32_t *out) {
    fake *f = ctx;
    f->calls_forward_set++;
    if (f->fail_forward_set) {
        return -1;
    }
    *out = f->fwd_set;
    return 0;
}

static int f_region(void *ctx, uint32_t *out) {
    fake *f = ctx;
    f->calls_region++;
    if (f->fail_region) {
        return -1;
    }
    if (f->region_known) {
        *out = f->region_set;
    }
    return f->region_known;
}

static rl_attr_env env_of(fake *f) {
    rl_attr_env e = {f, f_next_seq, f_grad, f_node, f_recomputing, f_plus, f_forward_set, f_region};
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

/* A non-reentrant checkpoint of a plain function that calls a module: the recomputation starts while the backward of
 * that module's node runs (its saved input is unpacked); the function's own ops belong to the set it was called in
 * (region), not to the module's; so do the nodes the recomputation makes. A reentrant checkpoint's node is not
 * asked (its node was made where the function was called). */
static void test_non_reentrant_recomputation_of_a_function(void) {
    fake f = {.seq = 500, .grad = 1, .last_node_id = -1, .fwd_set = 9, .region_set = 6};
    rl_attr_env e = env_of(&f);
    rl_attribution a;
    rl_attr_init(&a);
    rl_attr_mark(&a, &e, 6);
    op(&a, &f, 0, 6); /* the function's cat: node 500 under set 6 (the caller's) */
    f.seq = 501;
    rl_attr_mark(&a, &e, 7); /* the module inside the function: node 501 under set 7 */
    op(&a, &f, 0, 7);
    f.seq = 502;
    in_node(&f, 501); /* its backward unpacks its input: the recomputation runs */
    f.recomputing = 1;
    /* unknown region: the node's set, as before */
    rl_attr_out o = op(&a, &f, 1, 7);
    CHECK_EQ(o.phase, RL_PHASE_RECOMPUTE);
    CHECK_EQ(o.mid, 7);
    CHECK_EQ(f.calls_region, 1);
    /* known: the caller's set, and the nodes it makes from now on (503 on) too */
    f.region_known = 1;
    f.seq = 503;
    o = op(&a, &f, 1, 7);
    CHECK_EQ(o.phase, RL_PHASE_RECOMPUTE);
    CHECK_EQ(o.mid, 6);
    CHECK_EQ(rl_link_find(&a.links, 503), 6);
    CHECK_EQ(rl_link_find(&a.links, 501), 7); /* the forward's nodes keep their sets */
    /* a failing region callback is an error, with nothing changed */
    size_t n = a.links.n;
    f.fail_region = 1;
    CHECK_EQ(rl_attr_op(&a, &e, 1, 7, &o), RL_ATTR_ERR);
    CHECK_EQ(a.links.n, n);
    f.fail_region = 0;
    /* a reentrant checkpoint's node: region is not asked, the node's set is credited */
    int calls = f.calls_region;
    f.recomputing = 0;
    f.checkpoint = 1;
    in_node(&f, 500);
    o = op(&a, &f, 1, 7);
    CHECK_EQ(o.phase, RL_PHASE_RECOMPUTE);
    CHECK_EQ(o.mid, 6);
    CHECK_EQ(f.calls_region, calls);
    /* an env without the callback (NULL): the node's set */
    f.checkpoint = 0;
    f.recomputing = 1;
    in_node(&f, 501);
    e.region = NULL;
    CHECK_EQ(rl_attr_op(&a, &e, 1, 7, &o), 0);
    CHECK_EQ(o.mid, 7);
    CHECK_EQ(f.calls_region, calls);
    rl_attr_free(&a);
}

/* a backward op in node `seq`, the tracker's running set being `running` */
static rl_attr_out bwd(rl_attribution *a, fake *f, uint64_t seq, uint32_t running) {
    in_node(f, seq);
    return op(a, f, 1, running);
}

/* Every observation can fail (a Python exception in the binding): the entry point that asked returns RL_ATTR_ERR,
 * asks nothing further, and leaves the table and the recompute stack as they were, so the same call made again once
 * the callback works gives the ordinary answer. */
static void test_callback_failures(void) {
    fake f = {.seq = 10, .grad = 1, .last_node_id = -1, .fwd_set = 9};
    rl_attr_env e = env_of(&f);
    rl_attribution a;
    rl_attr_init(&a);
    rl_attr_out o;

    /* rl_attr_mark: the counter cannot be read; nothing is marked */
    f.fail_next_seq = 1;
    CHECK_EQ(rl_attr_mark(&a, &e, 3), RL_ATTR_ERR);
    CHECK_EQ(a.links.n, 0);
    f.fail_next_seq = 0;

    /* the first forward op (no mark yet, so it marks): grad mode cannot be read, and the counter is not asked */
    f.fail_grad = 1;
    CHECK_EQ(rl_attr_op(&a, &e, 0, 3, &o), RL_ATTR_ERR);
    CHECK_EQ(f.calls_next_seq, 1);
    CHECK_EQ(a.links.n, 0);
    f.fail_grad = 0;
    /* grad mode read, the counter fails */
    f.fail_next_seq = 1;
    CHECK_EQ(rl_attr_op(&a, &e, 0, 3, &o), RL_ATTR_ERR);
    CHECK_EQ(f.calls_next_seq, 2);
    CHECK_EQ(a.links.n, 0);
    f.fail_next_seq = 0;
    /* both working: the op's own node 9 (made just before it ran, the counter at 10) and those after are set 3 */
    CHECK_EQ(op(&a, &f, 0, 3).mid, 3);
    CHECK_EQ(a.links.n, 1);
    CHECK_EQ(a.links.seq[0], 9);
    CHECK_EQ(a.links.mid[0], 3);

    /* a backward op in node 9 (set 3), the counter at 10: its node cannot be read; the hooks are not asked */
    in_node(&f, 9);
    f.fail_node = 1;
    CHECK_EQ(rl_attr_op(&a, &e, 1, 0, &o), RL_ATTR_ERR);
    CHECK_EQ(f.calls_recomputing, 0);
    CHECK_EQ(a.links.n, 1);
    f.fail_node = 0;
    /* the node read, the checkpointing hooks cannot be */
    f.fail_recomputing = 1;
    CHECK_EQ(rl_attr_op(&a, &e, 1, 0, &o), RL_ATTR_ERR);
    CHECK_EQ(a.links.n, 1);
    f.fail_recomputing = 0;
    /* both read, marking "no module" from node 10 (for the nodes the backward makes) cannot read the counter */
    f.fail_next_seq = 1;
    CHECK_EQ(rl_attr_op(&a, &e, 1, 0, &o), RL_ATTR_ERR);
    CHECK_EQ(a.links.n, 1);
    f.fail_next_seq = 0;
    o = op(&a, &f, 1, 0);
    CHECK_EQ(o.phase, RL_PHASE_BACKWARD);
    CHECK_EQ(o.mid, 3);
    CHECK_EQ(o.unlinked, 0);
    CHECK_EQ(a.links.n, 2);
    CHECK_EQ(a.links.seq[1], 10);
    CHECK_EQ(a.links.mid[1], RL_LINK_NONE);

    /* the backward made nodes 10 and 11; node 9 turns out a reentrant checkpoint's node and runs the forward again,
     * outside any module: marking its set 3 from node 12 cannot read the counter */
    f.seq = 12;
    f.checkpoint = 1;
    f.fail_next_seq = 1;
    CHECK_EQ(rl_attr_op(&a, &e, 1, 0, &o), RL_ATTR_ERR);
    CHECK_EQ(a.links.n, 2);
    f.fail_next_seq = 0;
    o = op(&a, &f, 1, 0);
    CHECK_EQ(o.phase, RL_PHASE_RECOMPUTE);
    CHECK_EQ(o.mid, 3);
    CHECK_EQ(a.links.n, 3);
    CHECK_EQ(a.links.seq[2], 12);
    CHECK_EQ(a.links.mid[2], 3);

    /* a module's forward starts inside the checkpoint's node, the stack empty: the node cannot be read; neither
     * plus() nor forward_set() is asked, nothing is pushed */
    f.fail_node = 1;
    CHECK_EQ(rl_attr_module(&a, &e, 1, 1, 0), RL_ATTR_ERR);
    CHECK_EQ(a.depth, 0);
    CHECK_EQ(f.calls_plus, 0);
    CHECK_EQ(f.calls_forward_set, 0);
    CHECK_EQ(a.links.n, 3);
    f.fail_node = 0;
    /* the node read (a checkpoint's, set 3): set 3 plus the module cannot be made */
    f.fail_plus = 1;
    CHECK_EQ(rl_attr_module(&a, &e, 1, 1, 0), RL_ATTR_ERR);
    CHECK_EQ(a.depth, 0);
    CHECK_EQ(f.calls_forward_set, 0);
    CHECK_EQ(a.links.n, 3);
    CHECK_EQ(a.links.mid[2], 3);
    f.fail_plus = 0;
    CHECK_EQ(rl_attr_module(&a, &e, 1, 1, 0), 0); /* set 1003 from node 12 (it replaces set 3 there) */
    CHECK_EQ(a.depth, 1);
    CHECK_EQ(a.links.n, 3);
    CHECK_EQ(a.links.mid[2], 1003);
    /* a module inside that one: 1003 plus it cannot be made */
    f.fail_plus = 1;
    CHECK_EQ(rl_attr_module(&a, &e, 1, 1, 0), RL_ATTR_ERR);
    CHECK_EQ(a.depth, 1);
    CHECK_EQ(a.links.mid[2], 1003);
    f.fail_plus = 0;
    CHECK_EQ(op(&a, &f, 1, 0).mid, 1003); /* still inside the first one */
    /* the first one ends: marking the set around it ("no module") cannot read the counter */
    f.fail_next_seq = 1;
    CHECK_EQ(rl_attr_module(&a, &e, 1, 0, 0), RL_ATTR_ERR);
    CHECK_EQ(a.links.n, 3);
    CHECK_EQ(a.links.mid[2], 1003);
    f.fail_next_seq = 0;

    /* a non-reentrant recomputation (not a checkpoint's node), the stack empty: the set of the module's last forward
     * cannot be read */
    rl_attr_clear_stack(&a);
    f.checkpoint = 0;
    f.recomputing = 1;
    f.fail_forward_set = 1;
    CHECK_EQ(rl_attr_module(&a, &e, 1, 1, 0), RL_ATTR_ERR);
    CHECK_EQ(a.depth, 0);
    CHECK_EQ(a.links.mid[2], 1003);
    f.fail_forward_set = 0;
    CHECK_EQ(rl_attr_module(&a, &e, 1, 1, 0), 0);
    CHECK_EQ(a.depth, 1);
    o = op(&a, &f, 1, 0);
    CHECK_EQ(o.phase, RL_PHASE_RECOMPUTE);
    CHECK_EQ(o.mid, 9); /* the script's forward_set() */

    /* the forward again: a module's forward starts, the counter cannot be read; nothing is marked */
    f.recomputing = 0;
    size_t n = a.links.n;
    f.fail_next_seq = 1;
    CHECK_EQ(rl_attr_module(&a, &e, 0, 1, 5), RL_ATTR_ERR);
    CHECK_EQ(a.links.n, n);
    f.fail_next_seq = 0;
    rl_attr_free(&a);
}

/* The first forward op after a backward marks the running set from its own node, one below the counter, when grad
 * mode is on; but never below the last mark: a counter that has not moved since the backward's "no module" mark
 * means no node was made since, and the new mark replaces that one. */
static void test_first_forward_op_marks_its_own_node(void) {
    fake f = {.seq = 10, .grad = 1, .last_node_id = -1};
    rl_attr_env e = env_of(&f);
    rl_attribution a;
    rl_attr_init(&a);
    CHECK_EQ(rl_attr_mark(&a, &e, 3), 0); /* set 3 from node 10 */
    op(&a, &f, 0, 3);                     /* it makes node 10 */
    f.seq = 11;
    CHECK_EQ(bwd(&a, &f, 10, 0).mid, 3); /* node 10's backward: "no module" from node 11 */
    CHECK_EQ(a.links.n, 2);
    CHECK_EQ(a.links.seq[1], 11);
    /* the counter still at 11: no node since the mark; set 4 from node 11, in place of "no module" */
    CHECK_EQ(op(&a, &f, 0, 4).mid, 4);
    CHECK_EQ(a.links.broken, 0);
    CHECK_EQ(a.links.n, 2);
    CHECK_EQ(a.links.seq[1], 11);
    CHECK_EQ(a.links.mid[1], 4);
    CHECK_EQ(rl_link_find(&a.links, 10), 3);
    CHECK_EQ(rl_link_find(&a.links, 11), 4);

    /* node 11's backward: "no module" from 12; it makes nodes 12 and 13 (a double backward's graph); the next
     * forward op runs with the counter at 15: its own node is 14, the first of set 5 */
    f.seq = 12;
    CHECK_EQ(bwd(&a, &f, 11, 0).mid, 4);
    f.seq = 15;
    CHECK_EQ(op(&a, &f, 0, 5).mid, 5);
    CHECK_EQ(a.links.n, 4);
    CHECK_EQ(a.links.seq[3], 14);
    CHECK_EQ(rl_link_find(&a.links, 12), RL_LINK_NONE);
    CHECK_EQ(rl_link_find(&a.links, 13), RL_LINK_NONE);
    CHECK_EQ(rl_link_find(&a.links, 14), 5);
    CHECK_EQ(rl_link_find(&a.links, 15), 5);
    in_node(&f, 13); /* the double backward's last node, seen by a backward op: not linked */
    CHECK_EQ(op(&a, &f, 1, 0).unlinked, 1);
    rl_attr_free(&a);

    /* a thread whose counter is still 0 (no node made yet): the mark is at 0, not one below it */
    rl_attr_init(&a);
    f.seq = 0;
    CHECK_EQ(op(&a, &f, 0, 6).mid, 6);
    CHECK_EQ(a.links.n, 1);
    CHECK_EQ(a.links.seq[0], 0);
    CHECK_EQ(rl_link_find(&a.links, 0), 6);
    rl_attr_free(&a);
}

/* Inside a forward (the last mark a module set, as the module hooks leave it) a forward op asks autograd nothing;
 * so does one after a broken table (another thread's counter went backwards: nothing is linked any more), even
 * when the last mark is "no module", and the table stays as it was. */
static void test_forward_op_marks_only_after_a_backward(void) {
    fake f = {.seq = 10, .grad = 1, .last_node_id = -1};
    rl_attr_env e = env_of(&f);
    rl_attribution a;
    rl_attr_init(&a);
    CHECK_EQ(rl_attr_mark(&a, &e, 3), 0); /* set 3 from node 10 */
    CHECK_EQ(f.calls_next_seq, 1);
    f.seq = 12;
    rl_attr_out o = op(&a, &f, 0, 3);
    CHECK_EQ(o.phase, RL_PHASE_FORWARD);
    CHECK_EQ(o.mid, 3);
    CHECK_EQ(f.calls_next_seq, 1);
    CHECK_EQ(f.calls_grad, 0);
    CHECK_EQ(a.links.n, 1);
    /* a backward (node 11): "no module" from 12 */
    CHECK_EQ(bwd(&a, &f, 11, 3).mid, 3);
    CHECK_EQ(f.calls_next_seq, 2);
    CHECK_EQ(a.links.n, 2);
    /* a mark below the last one (the counter read 5) breaks the table */
    f.seq = 5;
    CHECK_EQ(rl_attr_mark(&a, &e, 7), 0);
    CHECK_EQ(f.calls_next_seq, 3);
    CHECK_EQ(a.links.broken, 1);
    CHECK_EQ(a.links.n, 2);
    o = op(&a, &f, 0, 7);
    CHECK_EQ(o.phase, RL_PHASE_FORWARD);
    CHECK_EQ(o.mid, 7);
    CHECK_EQ(f.calls_next_seq, 3);
    CHECK_EQ(f.calls_grad, 0);
    CHECK_EQ(a.links.broken, 1);
    CHECK_EQ(a.links.n, 2);
    CHECK_EQ(a.links.mid[1], RL_LINK_NONE);
    rl_attr_free(&a);
}

/* A backward op marks "no module" (for the nodes the backward makes) once, at the counter: further backward ops,
 * the last mark already "no module", do not read the counter, and the forward's last node keeps its set. */
static void test_backward_marks_no_module_once(void) {
    fake f = {.seq = 20, .grad = 1, .last_node_id = -1};
    rl_attr_env e = env_of(&f);
    rl_attribution a;
    rl_attr_init(&a);
    CHECK_EQ(rl_attr_mark(&a, &e, 2), 0); /* set 2 from node 20 */
    op(&a, &f, 0, 2);
    f.seq = 22; /* the forward made nodes 20 and 21 */
    CHECK_EQ(f.calls_next_seq, 1);
    CHECK_EQ(bwd(&a, &f, 21, 0).mid, 2);
    CHECK_EQ(f.calls_next_seq, 2);
    CHECK_EQ(a.links.n, 2);
    CHECK_EQ(a.links.seq[1], 22);
    CHECK_EQ(a.links.mid[1], RL_LINK_NONE);
    CHECK_EQ(bwd(&a, &f, 20, 0).mid, 2);
    CHECK_EQ(f.calls_next_seq, 2);
    f.seq = 23; /* the backward made node 22 */
    rl_attr_out o = bwd(&a, &f, 22, 0);
    CHECK_EQ(o.unlinked, 1);
    CHECK_EQ(o.mid, 0);
    CHECK_EQ(f.calls_next_seq, 2);
    o = bwd(&a, &f, 21, 0); /* node 21, the forward's last: still set 2 */
    CHECK_EQ(o.mid, 2);
    CHECK_EQ(o.unlinked, 0);
    CHECK_EQ(a.links.n, 2);
    rl_attr_free(&a);
}

/* A reentrant checkpoint's recomputation outside any module forward: the nodes it makes (from the counter, not one
 * below it) belong to the checkpoint node's set, so its inner backward finds them; the nodes the backward made
 * before it stay "no module". */
static void test_recomputation_outside_modules_marks_the_node_set(void) {
    fake f = {.seq = 200, .grad = 1, .last_node_id = -1};
    rl_attr_env e = env_of(&f);
    rl_attribution a;
    rl_attr_init(&a);
    CHECK_EQ(rl_attr_mark(&a, &e, 1), 0); /* set 1 from node 200 */
    op(&a, &f, 0, 1);                     /* the checkpoint's node 200 */
    f.seq = 201;
    CHECK_EQ(rl_attr_mark(&a, &e, 0), 0); /* the module ends: set 0 from node 201 */
    op(&a, &f, 0, 0);                     /* the loss: node 201 */
    f.seq = 202;
    CHECK_EQ(bwd(&a, &f, 201, 0).mid, 0); /* "no module" from 202 */
    f.seq = 204;                          /* the backward made nodes 202 and 203 */
    f.checkpoint = 1;
    rl_attr_out o = bwd(&a, &f, 200, 0);
    CHECK_EQ(o.phase, RL_PHASE_RECOMPUTE);
    CHECK_EQ(o.mid, 1);
    CHECK_EQ(a.links.n, 4);
    CHECK_EQ(a.links.seq[3], 204);
    CHECK_EQ(a.links.mid[3], 1);
    f.seq = 205; /* the recomputation made node 204 */
    f.checkpoint = 0;
    o = bwd(&a, &f, 204, 0); /* the inner backward */
    CHECK_EQ(o.phase, RL_PHASE_BACKWARD);
    CHECK_EQ(o.mid, 1);
    CHECK_EQ(o.unlinked, 0);
    CHECK_EQ(bwd(&a, &f, 203, 0).unlinked, 1);
    CHECK_EQ(bwd(&a, &f, 202, 0).unlinked, 1);
    rl_attr_free(&a);
}

/* A non-reentrant recomputation stops early inside module forwards whose ends never come. The stack they leave is
 * cleared by the next forward's module hook, by a forward op, and by rl_attr_clear_stack (the end of the backward):
 * a later recomputation outside any module gets the node's set, not the stale top. */
static void test_stale_recompute_stack_is_cleared(void) {
    fake f = {.seq = 300, .grad = 1, .last_node_id = -1, .fwd_set = 9};
    rl_attr_env e = env_of(&f);
    rl_attribution a;
    rl_attr_init(&a);
    CHECK_EQ(rl_attr_mark(&a, &e, 4), 0); /* set 4 from node 300 */
    op(&a, &f, 0, 4);                     /* node 300 */
    f.seq = 301;
    in_node(&f, 300);
    f.recomputing = 1;
    for (int round = 0; round < 3; round++) {
        /* two module forwards run again: the set of the outer one's last forward (9), then 9 plus the inner */
        CHECK_EQ(rl_attr_module(&a, &e, 1, 1, 0), 0);
        CHECK_EQ(rl_attr_module(&a, &e, 1, 1, 0), 0);
        CHECK_EQ(a.depth, 2);
        CHECK_EQ(op(&a, &f, 1, 0).mid, 1009);
        /* the recomputation stops there; what comes next clears the stack */
        if (round == 0) {
            CHECK_EQ(rl_attr_module(&a, &e, 0, 1, 5), 0); /* a module's forward starts, outside a backward */
        } else if (round == 1) {
            CHECK_EQ(op(&a, &f, 0, 5).phase, RL_PHASE_FORWARD);
        } else {
            rl_attr_clear_stack(&a);
        }
        CHECK_EQ(a.depth, 0);
        /* a recomputation in node 300 again, outside any module: node 300's set */
        rl_attr_out o = op(&a, &f, 1, 0);
        CHECK_EQ(o.phase, RL_PHASE_RECOMPUTE);
        CHECK_EQ(o.mid, 4);
    }
    rl_attr_free(&a);
}

/* 40 module forwards nested inside a reentrant checkpoint's node, deeper than the recompute stack's first
 * allocation: each op goes to the innermost one's set, each end back to the set around it, and the inner backward
 * finds each node's set. The set k deep is 1 + 1000 k (the script's plus() adds 1000 per module, from set 1). Then
 * rl_attr_free leaves an empty state, and freeing it again is harmless. */
static void test_deeply_nested_recomputation_and_free(void) {
    fake f = {.seq = 200, .grad = 1, .last_node_id = -1};
    rl_attr_env e = env_of(&f);
    rl_attribution a;
    rl_attr_init(&a);
    CHECK_EQ(rl_attr_mark(&a, &e, 1), 0); /* set 1 from node 200 */
    op(&a, &f, 0, 1);                     /* the checkpoint's node 200 */
    f.seq = 201;
    f.checkpoint = 1;
    in_node(&f, 200);
    for (uint32_t k = 1; k <= 40; k++) {
        CHECK_EQ(rl_attr_module(&a, &e, 1, 1, 0), 0); /* set 1 + 1000 k from node 200 + k */
        CHECK_EQ(a.depth, k);
        CHECK_EQ(a.cap >= a.depth, 1);
        rl_attr_out o = op(&a, &f, 1, 0);
        CHECK_EQ(o.phase, RL_PHASE_RECOMPUTE);
        CHECK_EQ(o.mid, 1 + 1000 * k);
        f.seq++; /* the op made node 200 + k */
    }
    for (uint32_t k = 40; k >= 1; k--) {
        CHECK_EQ(rl_attr_module(&a, &e, 1, 0, 0), 0); /* module k ends: back to k - 1's set */
        CHECK_EQ(a.depth, k - 1);
        if (k > 1) {
            CHECK_EQ(op(&a, &f, 1, 0).mid, 1 + 1000 * (k - 1));
        }
    }
    /* marks: node 200 (set 1), 201..240 (one per module), and 241 ("no module": the last end) */
    CHECK_EQ(a.links.n, 42);
    CHECK_EQ(a.links.seq[41], 241);
    CHECK_EQ(a.links.mid[41], RL_LINK_NONE);
    f.checkpoint = 0;
    for (uint32_t k = 40; k >= 1; k--) {
        rl_attr_out o = bwd(&a, &f, 200 + k, 0);
        CHECK_EQ(o.phase, RL_PHASE_BACKWARD);
        CHECK_EQ(o.mid, 1 + 1000 * k);
        CHECK_EQ(o.unlinked, 0);
    }
    for (int twice = 0; twice < 2; twice++) {
        rl_attr_free(&a);
        CHECK_EQ(a.rstack == NULL, 1);
        CHECK_EQ(a.depth, 0);
        CHECK_EQ(a.cap, 0);
        CHECK_EQ(a.links.n, 0);
        CHECK_EQ(a.links.seq == NULL, 1);
    }
}

int main(void) {
    test_backward_credited_to_the_forward_that_made_the_node();
    test_double_backward_and_the_next_forward();
    test_reentrant_recomputation();
    test_non_reentrant_recomputation();
    test_non_reentrant_recomputation_of_a_function();
    test_callback_failures();
    test_first_forward_op_marks_its_own_node();
    test_forward_op_marks_only_after_a_backward();
    test_backward_marks_no_module_once();
    test_recomputation_outside_modules_marks_the_node_set();
    test_stale_recompute_stack_is_cleared();
    test_deeply_nested_recomputation_and_free();
    if (failures) {
        fprintf(stderr, "%d C attribution test(s) failed\n", failures);
        return 1;
    }
    printf("all C attribution tests passed\n");
    return 0;
}
