/* The attribution rules of attribution.h. */
#include "attribution.h"

#include <stdlib.h>

#include "record.h"

void rl_attr_init(rl_attribution *a) {
    *a = (rl_attribution){0};
    a->last_mid = RL_LINK_NONE;
    a->last_how = RL_NODE_NONE;
}

static int mark(rl_attribution *a, uint64_t seq, uint32_t mid) {
    return rl_link_mark(&a->links, seq, mid) < 0 ? RL_ATTR_NOMEM : 0;
}

int rl_attr_mark(rl_attribution *a, const rl_attr_env *e, uint32_t mid) {
    uint64_t seq;
    if (e->next_seq(e->ctx, &seq) < 0) {
        return RL_ATTR_ERR;
    }
    return mark(a, seq, mid);
}

/* Nodes from now on belong to set `mid`, marked at the next sequence number, or at the one before when `own` (the
 * node of the op being recorded was made just before it ran, unless none was made since the last mark). */
static int mark_at(rl_attribution *a, const rl_attr_env *e, uint32_t mid, int own) {
    uint64_t seq;
    if (e->next_seq(e->ctx, &seq) < 0) {
        return RL_ATTR_ERR;
    }
    const rl_links *l = &a->links;
    uint64_t at = own && seq && (!l->n || seq > l->seq[l->n - 1]) ? seq - 1 : seq;
    return mark(a, at, mid);
}

/* The node the running backward op runs in, resolved once per node: a->last_how, a->last_mid. */
static int resolve(rl_attribution *a, const rl_attr_env *e, int *checkpoint) {
    int changed = 0, present = 0;
    uint64_t seq = 0;
    *checkpoint = 0;
    if (e->node(e->ctx, &changed, &present, &seq, checkpoint) < 0) {
        return RL_ATTR_ERR;
    }
    if (changed) {
        int how = !present ? RL_NODE_NONE : seq == UINT64_MAX ? RL_NODE_ACCUMULATE : RL_NODE_FOUND;
        a->last_mid = how == RL_NODE_FOUND ? rl_link_find(&a->links, seq) : RL_LINK_NONE;
        a->last_how = how == RL_NODE_FOUND && a->last_mid == RL_LINK_NONE ? RL_NODE_NONE : how;
    }
    return 0;
}

static uint32_t stack_top(const rl_attribution *a) { return a->depth ? a->rstack[a->depth - 1] : RL_LINK_NONE; }

static int push(rl_attribution *a, uint32_t mid) {
    if (a->depth == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        uint32_t *s = realloc(a->rstack, cap * sizeof *s);
        if (!s) {
            return RL_ATTR_NOMEM;
        }
        a->rstack = s;
        a->cap = cap;
    }
    a->rstack[a->depth++] = mid;
    return 0;
}

int rl_attr_op(rl_attribution *a, const rl_attr_env *e, int backward, uint32_t running, rl_attr_out *out) {
    out->phase = backward ? RL_PHASE_BACKWARD : RL_PHASE_FORWARD;
    out->mid = running;
    out->unlinked = 0;
    if (!backward) {
        /* no module forward runs again outside a backward */
        a->depth = 0;
        if (rl_link_last(&a->links) == RL_LINK_NONE && !a->links.broken) {
            /* the first forward op after a backward: its own node (made just before it ran, if grad mode is on)
             * and the nodes after it belong to the running set */
            int on = e->grad_enabled(e->ctx);
            return on < 0 ? RL_ATTR_ERR : mark_at(a, e, running, on);
        }
        return 0;
    }
    int checkpoint = 0, rc = resolve(a, e, &checkpoint);
    if (rc < 0) {
        return rc;
    }
    /* recomputation: a reentrant checkpoint's node runs the forward again, or a non-reentrant one does while it
     * unpacks a saved tensor (its saved-tensor hooks are in force). Module forwards inside a backward are not the
     * test: a non-reentrant recomputation stops early, inside them, so their ends are never seen. */
    int recompute = checkpoint;
    if (!recompute && (recompute = e->recomputing(e->ctx)) < 0) {
        return RL_ATTR_ERR;
    }
    if (recompute) {
        out->phase = RL_PHASE_RECOMPUTE;
        if (a->depth) { /* module forwards run again: the set the innermost one ran in, in the forward */
            out->mid = stack_top(a);
            return 0;
        }
        /* a recomputation outside any module forward belongs to the set the checkpointed function was called in,
         * and so do the nodes it creates (a reentrant checkpoint's inner backward runs them): a non-reentrant
         * checkpoint says which, where a module ran inside the function (the node whose saved tensor is unpacked
         * may be that module's); else the node that runs it was made in that set (a reentrant checkpoint's node,
         * or any node of a function that calls no module) */
        uint32_t region = RL_LINK_NONE;
        int known = !checkpoint && e->region ? e->region(e->ctx, &region) : 0;
        if (known < 0) {
            return RL_ATTR_ERR;
        }
        if (known) {
            out->mid = region;
            return mark_at(a, e, region, 0);
        }
        if (a->last_how == RL_NODE_FOUND) {
            out->mid = a->last_mid;
        }
        return mark_at(a, e, a->last_how == RL_NODE_FOUND ? a->last_mid : RL_LINK_NONE, 0);
    }
    /* backward work: no module forward runs again now (a non-reentrant recomputation that stopped early, inside
     * module forwards whose ends never came, left them on the stack) */
    a->depth = 0;
    /* nodes it creates (a double backward's graph) are no forward module's */
    if (rl_link_last(&a->links) != RL_LINK_NONE && (rc = mark_at(a, e, RL_LINK_NONE, 0)) < 0) {
        return rc;
    }
    if (a->last_how == RL_NODE_FOUND) {
        out->mid = a->last_mid;
    } else if (a->last_how == RL_NODE_NONE) {
        out->unlinked = 1;
    }
    return 0;
}

int rl_attr_module(rl_attribution *a, const rl_attr_env *e, int backward, int entering, uint32_t running) {
    if (!backward) {
        a->depth = 0;
        return rl_attr_mark(a, e, running);
    }
    if (!entering) {
        if (a->depth) {
            a->depth--;
        }
        return mark_at(a, e, stack_top(a), 0);
    }
    /* the set it ran in during the forward: inside another module run again, that one's set and its name (a module
     * instance called from several places, one shared function module say, has one name); the outermost one inside
     * a reentrant checkpoint's node, the set the checkpoint was called in and its name; otherwise the set of its
     * last forward */
    uint32_t mid;
    int rc, checkpoint = 0;
    if (a->depth) {
        rc = e->plus(e->ctx, stack_top(a), &mid) < 0 ? RL_ATTR_ERR : 0;
    } else if ((rc = resolve(a, e, &checkpoint)) < 0) {
        return rc;
    } else if (checkpoint && a->last_how == RL_NODE_FOUND) {
        rc = e->plus(e->ctx, a->last_mid, &mid) < 0 ? RL_ATTR_ERR : 0;
    } else {
        rc = e->forward_set(e->ctx, &mid) < 0 ? RL_ATTR_ERR : 0;
    }
    if (rc < 0 || (rc = push(a, mid)) < 0) {
        return rc;
    }
    return mark_at(a, e, mid, 0);
}

void rl_attr_clear_stack(rl_attribution *a) { a->depth = 0; }

void rl_attr_free(rl_attribution *a) {
    rl_link_free(&a->links);
    free(a->rstack);
    a->rstack = NULL;
    a->depth = a->cap = 0;
}
