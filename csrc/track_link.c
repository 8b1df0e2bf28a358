/* Backward attribution of the ModuleTracker: what attribution.c's rules observe, asked of torch. */
#include "track.h"

#include "record.h"

/* ---- backward attribution ------------------------------------------------------------------------------------
 * The rules are attribution.c's (pure C); what they observe is asked of torch here, through rl_attr_env's
 * callbacks. What the tracker's own set says (torch's ModuleTracker rule, which FlopCounterMode's structure keeps)
 * is logged for the rows where the two differ. */

/* The sequence number the next autograd node of this thread gets: 0 with *ok = 0 and an exception on failure. */
static uint64_t next_seq(Tracker *self, int *ok) {
    PyObject *v = PyObject_CallNoArgs(self->seq_nr);
    uint64_t n = v ? PyLong_AsUnsignedLongLong(v) : 0;
    Py_XDECREF(v);
    *ok = v && !(n == (uint64_t)-1 && PyErr_Occurred());
    return n;
}

static int env_next_seq(void *ctx, uint64_t *seq) {
    int ok;
    *seq = next_seq(((track_ctx *)ctx)->self, &ok);
    return ok ? 0 : -1;
}

static int env_grad_enabled(void *ctx) {
    PyObject *g = PyObject_CallNoArgs(((track_ctx *)ctx)->self->grad_enabled);
    int on = g ? PyObject_IsTrue(g) : -1;
    Py_XDECREF(g);
    return on;
}

/* The node a backward op runs in (torch._C._current_autograd_node), its sequence number read when it is not the
 * node of the last call; a reentrant checkpoint's node is torch.utils.checkpoint's CheckpointFunctionBackward. */
static int env_node(void *ctx, int *changed, int *present, uint64_t *seq, int *checkpoint) {
    Tracker *self = ((track_ctx *)ctx)->self;
    PyObject *node = self->next_node ? self->next_node : PyObject_CallNoArgs(self->cur_node);
    self->next_node = NULL;
    if (!node) {
        return -1;
    }
    *changed = node != self->last_node;
    if (*changed) {
        *present = node != Py_None;
        *seq = 0;
        if (*present) {
            PyObject *v = PyObject_CallMethodNoArgs(node, self->s_sequence_nr);
            *seq = v ? PyLong_AsUnsignedLongLong(v) : 0;
            Py_XDECREF(v);
            if (!v || (*seq == (uint64_t)-1 && PyErr_Occurred())) {
                Py_DECREF(node);
                return -1;
            }
        }
        Py_XSETREF(self->last_node, Py_NewRef(node));
    }
    *checkpoint = node != Py_None && strcmp(Py_TYPE(node)->tp_name, "CheckpointFunctionBackward") == 0;
    Py_DECREF(node);
    return 0;
}

/* Whether the saved-tensor hooks in force are activation checkpointing's recomputation (non-reentrant
 * torch.utils.checkpoint runs the forward again while unpacking a saved tensor). 1, 0, or -1. */
static int env_recomputing(void *ctx) {
    Tracker *self = ((track_ctx *)ctx)->self;
    PyObject *h = PyObject_CallOneArg(self->top_hooks, Py_False);
    if (!h) {
        return -1;
    }
    int r = 0;
    if (h != Py_None) {
        PyObject *v = PyObject_CallOneArg(self->recompute_hooks, h);
        r = v ? PyObject_IsTrue(v) : -1;
        Py_XDECREF(v);
    }
    Py_DECREF(h);
    return r;
}


/* The set a non-reentrant checkpoint's function was called in, for the recomputation in force (region_of): 1 with
 * *out, 0 where none was noted (or the tracker has no region_of), -1 with an exception. */
static int env_region(void *ctx, uint32_t *out) {
    Tracker *self = ((track_ctx *)ctx)->self;
    if (!self->region_of) {
        return 0;
    }
    PyObject *h = PyObject_CallOneArg(self->top_hooks, Py_False);
    PyObject *v = h && h != Py_None ? PyObject_CallOneArg(self->region_of, h) : Py_XNewRef(h);
    Py_XDECREF(h);
    if (!v) {
        return -1;
    }
    int rc = v == Py_None ? 0 : rl_as_mid(v, out) < 0 ? -1 : 1;
    Py_DECREF(v);
    return rc;
}

int rl_as_mid(PyObject *id, uint32_t *out) {
    unsigned long v = PyLong_AsUnsignedLong(id);
    if (v == (unsigned long)-1 && PyErr_Occurred()) {
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

static int env_plus(void *ctx, uint32_t mid, uint32_t *out) {
    track_ctx *c = ctx;
    PyObject *id = rl_tracker_set_plus(c->self, mid, c->name);
    int rc = id ? rl_as_mid(id, out) : -1;
    Py_XDECREF(id);
    return rc;
}

static int env_forward_set(void *ctx, uint32_t *out) {
    track_ctx *c = ctx;
    PyObject *id = PyDict_GetItemWithError(c->self->fwd_sets, c->name);
    if (!id && (PyErr_Occurred() || !(id = rl_tracker_module_id(c->self)))) {
        return -1;
    }
    return rl_as_mid(id, out);
}

#define TRACK_ENV(ctx)                                                                                              \
    {(ctx), env_next_seq, env_grad_enabled, env_node, env_recomputing, env_plus, env_forward_set, env_region}

rl_attr_env rl_track_env(track_ctx *ctx) {
    rl_attr_env env = TRACK_ENV(ctx);
    return env;
}

/* An rl_attr_* result as the binding's: 0, or -1 with an exception. */
int rl_attr_result(int rc) {
    if (rc == RL_ATTR_NOMEM) {
        PyErr_NoMemory();
    }
    return rc < 0 ? -1 : 0;
}

/* Nodes made from now on belong to the running set. A no-op for a tracker without `link`. 0, or -1. */
int rl_tracker_mark(Tracker *self) {
    if (!self->seq_nr) {
        return 0;
    }
    PyObject *id = rl_tracker_module_id(self);
    uint32_t mid;
    if (!id || rl_as_mid(id, &mid) < 0) {
        return -1;
    }
    track_ctx ctx = {self, NULL};
    rl_attr_env env = TRACK_ENV(&ctx);
    return rl_attr_result(rl_attr_mark(&self->attr, &env, mid));
}



/* Where an op the block records now belongs, given the graph task id (-1: not in a backward). 0 with a->mid set
 * (and a->fcm where it differs from the tracker's set), or -1 with an exception (nothing to release). */
int rl_tracker_attribute(Tracker *self, long task, attribution *a) {
    a->fcm = NULL;
    a->unlinked = 0;
    a->phase = task == -1 ? RL_PHASE_FORWARD : RL_PHASE_BACKWARD;
    PyObject *tmid = rl_tracker_module_id(self);
    if (!tmid) {
        a->mid = NULL;
        return -1;
    }
    a->mid = Py_NewRef(tmid);
    if (!self->seq_nr) {
        return 0;
    }
    uint32_t t;
    rl_attr_out out;
    track_ctx ctx = {self, NULL};
    rl_attr_env env = TRACK_ENV(&ctx);
    if (rl_as_mid(tmid, &t) < 0 || rl_attr_result(rl_attr_op(&self->attr, &env, task != -1, t, &out)) < 0) {
        attribution_clear(a);
        return -1;
    }
    a->phase = out.phase;
    a->unlinked = out.unlinked;
    if (out.mid != t) {
        PyObject *id = PyLong_FromUnsignedLong(out.mid);
        if (!id) {
            attribution_clear(a);
            return -1;
        }
        a->fcm = a->mid;
        a->mid = id;
    }
    return 0;
}

/* After the op's row was recorded: its row in the logs (the tracker's own set where it differs; not linked). */
int rl_attribution_log(Tracker *self, const attribution *a, Py_ssize_t row) {
    if (!a->fcm && !a->unlinked) {
        return 0;
    }
    PyObject *r = PyLong_FromSsize_t(row);
    int rc = r ? 0 : -1;
    if (rc == 0 && a->fcm) {
        rc = PyList_Append(self->fcm_log, r) < 0 || PyList_Append(self->fcm_log, a->fcm) < 0 ? -1 : 0;
    }
    if (rc == 0 && a->unlinked) {
        rc = PyList_Append(self->unlinked_log, r);
    }
    Py_XDECREF(r);
    return rc;
}
