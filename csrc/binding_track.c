/* The per-op and per-module hot paths of roofline.measure: `ModuleTracker` and `Dispatch`.
 *
 * ModuleTracker keeps the set of modules whose forward (or backward) is running, with the semantics of torch's
 * torch.utils.module_tracker.ModuleTracker (the tracker FlopCounterMode uses), so that module attribution matches
 * FlopCounterMode exactly. Its `pre` and `post` methods are installed as process-global module forward hooks; they
 * act only while the measure block's dispatch mode is on the calling thread's mode stack. Per module call they:
 *   - name the module (a dict lookup; the first time a module is seen, it and its children are named from that root
 *     with ModuleTracker's rule, `name_tree` below);
 *   - add (pre) or remove (post) the name from the set of current modules;
 *   - collect the tensors that require grad among the inputs (pre) or outputs (post), walking tuples, lists and
 *     dicts here and anything else with torch's pytree (`flatten`), and hook them with one GradGate: ModuleTracker's
 *     multi-grad hook (the module leaves, resp. re-enters, the set in backward once their gradients are computed).
 * Each distinct set of current modules is interned once into an id (a record's `module` field) and a sorted tuple
 * of names (`sets`).
 *
 * Dispatch is the body of the dispatch mode's __torch_dispatch__ for ops whose formula runs in C: an open-addressing
 * table maps the OpOverload (by identity) to its recorder op index and the callable that runs it; a call runs the
 * op, reads the module id and phase, and calls the recorder's `record`. No Python frame runs on that path. Any op
 * not in the table (first call, decomposed ops, Python formulas, higher-order operators, declined ops) goes to the
 * Python `slow` callable, which may add it to the table. */
#include "rl_module.h"

#include <stddef.h>
#include <stdint.h>
#ifndef _WIN32
#include <pthread.h>
#endif

#include "structmember.h"

#include "attribution.h"
#include "record.h"

/* ---- ModuleTracker ------------------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    PyObject *mode;        /* the dispatch mode that enables the forward hooks (None: always enabled) */
    PyObject *stack_len;   /* torch._C._len_torch_dispatch_stack */
    PyObject *stack_at;    /* torch._C._get_dispatch_stack_at */
    PyObject *flatten;     /* flatten(obj) -> list of pytree leaves */
    PyObject *grad_node;   /* grad_node(tensor) -> its gradient accumulator (a leaf's; grad_fn is read here) */
    PyObject *task_id;     /* torch._C._current_graph_task_id */
    PyObject *will_execute; /* torch._C._will_engine_execute_node */
    PyObject *on_reenter;  /* on_reenter(): a module re-enters in backward (the end-of-backward reset is queued) */
    PyObject *gate_type;   /* GradGate */
    PyObject *hooks;       /* list: the gradient hooks registered, (weakref to dict, id) or a RemovableHandle */
    PyObject *tensor_type; /* torch.Tensor */
    PyObject *param_type;  /* torch.nn.Parameter */
    PyObject *known;       /* dict: module -> name */
    PyObject *seen;        /* set: modules whose children are named */
    PyObject *parents;     /* set of current module names */
    PyObject *ids;         /* dict: sorted tuple of names -> int id */
    PyObject *sets;        /* list: id -> sorted tuple of names */
    PyObject *module_id;   /* int: id of the current set (valid when !dirty) */
    PyObject *steps[2];    /* dicts, [0] leaving and [1] entering a module: set id -> {name: the set id it becomes} */
    PyObject *s_global;    /* "Global" */
    PyObject *s_requires_grad;
    PyObject *s_modules;   /* "_modules" */
    PyObject *s_named_children;
    PyObject *s_grad_fn;
    PyObject *s_register_hook;
    PyObject *s_name; /* "__name__" */
    /* Tensor.register_hook's steps, taken here for plain tensors (all NULL: the method is called): */
    PyObject *hook_dict;    /* the type of a tensor's hook dict (collections.OrderedDict) */
    PyObject *handle_ids;   /* torch.utils.hooks.RemovableHandle: its `next_id` numbers every hook */
    PyObject *has_tf;       /* torch._C._has_torch_function_unary */
    PyObject *s_backward_hooks;
    PyObject *s_register_hook_dict;
    PyObject *s_next_id;
    /* Backward attribution (see `attribute`): all NULL when the tracker was made without `link`. */
    PyObject *seq_nr;       /* torch._C._autograd._get_sequence_nr: the next node's sequence number */
    PyObject *cur_node;     /* torch._C._current_autograd_node */
    PyObject *top_hooks;    /* torch._C._autograd._top_saved_tensors_default_hooks */
    PyObject *recompute_hooks; /* recompute_hooks(hooks) -> whether they are activation checkpointing's recompute */
    PyObject *grad_enabled; /* torch.is_grad_enabled */
    PyObject *note_region;  /* note_region(hooks, set id): a checkpointed function's module starts (NULL: none) */
    PyObject *region_of;    /* region_of(hooks) -> the set id the recomputed function was called in, or None */
    PyObject *s_sequence_nr; /* "_sequence_nr" */
    PyObject *last_node;    /* the node the last backward op ran in (attr caches what it resolved to) */
    PyObject *next_node;    /* the node the op being recorded runs in, when op_task asked it first (env_node's) */
    PyObject *fcm_log;      /* list: row, module id, ...: rows whose module differs from the tracker's set */
    PyObject *unlinked_log; /* list: rows of backward ops linked to no forward module */
    PyObject *fwd_sets;     /* dict: module name -> the module set id its forward last ran in (outside a backward) */
    rl_attribution attr;    /* the attribution state: node intervals, recompute stack (attribution.h) */
    int dirty;
    int enabled;
    int last_backward; /* the last op recorded ran in a backward */
    int reset_queued; /* on_reenter was called and the end-of-backward reset has not run yet */
    Py_ssize_t mode_at; /* where on a thread's mode stack the mode was last found (a guess, tried first) */
} Tracker;

#define RL_MAX_MODULE_SETS ((Py_ssize_t)UINT32_MAX) /* records["module"] is uint32; UINT32_MAX is RL_LINK_NONE */
#define RL_WALK_DEPTH 32                               /* deeper containers are flattened by pytree */

static PyTypeObject *tracker_type_of(PyObject *module);
static PyObject *gate_type_of(PyTypeObject *tracker_type);

/* The objects a Tracker holds (its traverse and clear walk them). */
#define TRACKER_OBJECTS(X)                                                                                         \
    X(mode) X(stack_len) X(stack_at) X(flatten) X(grad_node) X(task_id) X(will_execute) X(on_reenter) X(gate_type) \
    X(hooks) X(tensor_type) X(param_type) X(known) X(seen) X(parents) X(ids) X(sets) X(module_id) X(s_global)     \
    X(s_requires_grad) X(s_modules) X(s_named_children) X(s_grad_fn) X(s_register_hook) X(s_name) X(hook_dict)     \
    X(handle_ids) X(has_tf) X(s_backward_hooks) X(s_register_hook_dict) X(s_next_id) X(seq_nr) X(cur_node)        \
    X(top_hooks) X(recompute_hooks) X(grad_enabled) X(s_sequence_nr) X(last_node) X(next_node) X(fcm_log)         \
    X(unlinked_log) X(fwd_sets) X(note_region) X(region_of) X(steps[0]) X(steps[1])

RL_GC_MEMBERS(Tracker, TRACKER_OBJECTS, (self->enabled = 0, rl_attr_free(&self->attr)))

static PyObject *tracker_module_id(Tracker *self);
static int tracker_mark(Tracker *self);

static int Tracker_init(Tracker *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"mode",       "stack_len",  "stack_at",    "flatten",    "grad_node", "task_id",
                             "will_execute", "on_reenter", "tensor_type", "param_type", "known",     "seen",
                             "register",  "link",      NULL};
    PyObject *mode, *stack_len, *stack_at, *flatten, *grad_node, *task_id, *will_execute, *on_reenter, *tensor_type;
    PyObject *param_type, *known, *seen, *reg = Py_None, *link = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOOOOOOO!O!|$OO:ModuleTracker", kwlist, &mode, &stack_len,
                                     &stack_at, &flatten, &grad_node, &task_id, &will_execute, &on_reenter,
                                     &tensor_type, &param_type, &PyDict_Type, &known, &PySet_Type, &seen, &reg,
                                     &link)) {
        return -1;
    }
    /* link=(get_sequence_nr, current_autograd_node, top_saved_tensors_hooks, recompute_hooks, is_grad_enabled[,
     * note_region, region_of]) */
    if (link != Py_None) {
        Py_ssize_t n = PyTuple_Check(link) ? PyTuple_GET_SIZE(link) : 0;
        int ok = n == 5 || n == 7;
        for (Py_ssize_t i = 0; ok && i < n; i++) {
            ok = PyCallable_Check(PyTuple_GET_ITEM(link, i));
        }
        if (!ok) {
            PyErr_SetString(PyExc_TypeError, "ModuleTracker: link must be None or a tuple of 5 or 7 callables "
                                             "(get_sequence_nr, current_autograd_node, top_saved_tensors_hooks, "
                                             "recompute_hooks, is_grad_enabled[, note_region, region_of])");
            return -1;
        }
    }
    /* register=(hook dict type, RemovableHandle, has_torch_function_unary): hook plain tensors here */
    if (reg != Py_None && (!PyTuple_Check(reg) || PyTuple_GET_SIZE(reg) != 3 ||
                           !PyCallable_Check(PyTuple_GET_ITEM(reg, 0)) || !PyType_Check(PyTuple_GET_ITEM(reg, 1)) ||
                           !PyCallable_Check(PyTuple_GET_ITEM(reg, 2)))) {
        PyErr_SetString(PyExc_TypeError, "ModuleTracker: register must be None or a tuple (hook dict type, "
                                         "RemovableHandle class, has_torch_function_unary)");
        return -1;
    }
    PyObject *callables[] = {stack_len, stack_at, flatten, grad_node, task_id, will_execute, on_reenter};
    static const char *names[] = {"stack_len", "stack_at", "flatten", "grad_node", "task_id", "will_execute",
                                  "on_reenter"};
    if (rl_require_callables("ModuleTracker", callables, names, 7) < 0) {
        return -1;
    }
    if (!PyType_Check(tensor_type) || !PyType_Check(param_type)) {
        PyErr_SetString(PyExc_TypeError, "ModuleTracker: tensor_type and param_type must be types");
        return -1;
    }
    if (self->parents) {
        PyErr_SetString(PyExc_RuntimeError, "ModuleTracker: already initialised");
        return -1;
    }
    self->s_global = PyUnicode_InternFromString("Global");
    self->s_requires_grad = PyUnicode_InternFromString("requires_grad");
    self->s_modules = PyUnicode_InternFromString("_modules");
    self->s_named_children = PyUnicode_InternFromString("named_children");
    self->s_grad_fn = PyUnicode_InternFromString("grad_fn");
    self->s_register_hook = PyUnicode_InternFromString("register_hook");
    self->s_name = PyUnicode_InternFromString("__name__");
    self->s_backward_hooks = PyUnicode_InternFromString("_backward_hooks");
    self->s_register_hook_dict = PyUnicode_InternFromString("_register_hook_dict");
    self->s_next_id = PyUnicode_InternFromString("next_id");
    if (!self->s_backward_hooks || !self->s_register_hook_dict || !self->s_next_id) {
        return -1;
    }
    if (link != Py_None) {
        self->seq_nr = Py_NewRef(PyTuple_GET_ITEM(link, 0));
        self->cur_node = Py_NewRef(PyTuple_GET_ITEM(link, 1));
        self->top_hooks = Py_NewRef(PyTuple_GET_ITEM(link, 2));
        self->recompute_hooks = Py_NewRef(PyTuple_GET_ITEM(link, 3));
        self->grad_enabled = Py_NewRef(PyTuple_GET_ITEM(link, 4));
        if (PyTuple_GET_SIZE(link) == 7) {
            self->note_region = Py_NewRef(PyTuple_GET_ITEM(link, 5));
            self->region_of = Py_NewRef(PyTuple_GET_ITEM(link, 6));
        }
        self->s_sequence_nr = PyUnicode_InternFromString("_sequence_nr");
        self->fcm_log = PyList_New(0);
        self->unlinked_log = PyList_New(0);
        self->fwd_sets = PyDict_New();
        if (!self->s_sequence_nr || !self->fcm_log || !self->unlinked_log || !self->fwd_sets) {
            return -1;
        }
    }
    if (reg != Py_None) {
        self->hook_dict = Py_NewRef(PyTuple_GET_ITEM(reg, 0));
        self->handle_ids = Py_NewRef(PyTuple_GET_ITEM(reg, 1));
        self->has_tf = Py_NewRef(PyTuple_GET_ITEM(reg, 2));
    }
    self->gate_type = gate_type_of(Py_TYPE(self));
    self->hooks = PyList_New(0);
    self->parents = PySet_New(NULL);
    self->ids = PyDict_New();
    self->sets = PyList_New(0);
    self->steps[0] = PyDict_New();
    self->steps[1] = PyDict_New();
    if (!self->s_global || !self->s_requires_grad || !self->s_modules || !self->s_named_children || !self->s_grad_fn ||
        !self->s_register_hook || !self->s_name || !self->gate_type || !self->hooks || !self->parents || !self->ids ||
        !self->sets || !self->steps[0] || !self->steps[1] ||
        PySet_Add(self->parents, self->s_global) < 0) {
        return -1;
    }
#define TRACKER_ARGS(X)                                                                                            \
    X(mode) X(stack_len) X(stack_at) X(flatten) X(grad_node) X(task_id) X(will_execute) X(on_reenter) X(tensor_type) \
    X(param_type) X(known) X(seen)
    TRACKER_ARGS(RL_TAKE_MEMBER)
#undef TRACKER_ARGS
    self->dirty = 1;
    self->enabled = 1;
    rl_attr_init(&self->attr);
    return tracker_mark(self); /* nodes from now on: {"Global"} until a module's forward starts */
}

static int check_ready(Tracker *self) {
    if (!self->parents) {
        PyErr_SetString(PyExc_RuntimeError, "ModuleTracker: not initialised or already closed");
        return -1;
    }
    return 0;
}

/* The id of the module set `names` (a tuple of names in sorted order), interned on first sight: a new reference, or
 * NULL with an exception. Steals `names`. */
static PyObject *intern_set(Tracker *self, PyObject *names) {
    PyObject *id = PyDict_GetItemWithError(self->ids, names);
    if (id) {
        Py_INCREF(id);
    } else if (!PyErr_Occurred()) {
        Py_ssize_t n = PyList_GET_SIZE(self->sets);
        if (n >= RL_MAX_MODULE_SETS) { /* the record's module field is 32-bit: never let an id wrap */
            PyErr_Format(PyExc_RuntimeError, "measure: more than %zd distinct sets of active modules",
                         RL_MAX_MODULE_SETS);
        } else if ((id = PyLong_FromSsize_t(n))) {
            if (PyList_Append(self->sets, names) < 0 || PyDict_SetItem(self->ids, names, id) < 0) {
                if (PyList_GET_SIZE(self->sets) > n) {
                    PyList_SetSlice(self->sets, n, n + 1, NULL);
                }
                Py_CLEAR(id);
            }
        }
    }
    Py_DECREF(names);
    return id;
}

/* The names of set `names` (a sorted tuple, borrowed) with `name` added (add = 1) or taken out, as a new sorted tuple
 * (a new reference; `names` itself, with a new reference, when it is unchanged), or NULL with an exception. */
static PyObject *set_with(PyObject *names, PyObject *name, int add) {
    Py_ssize_t n = PyTuple_GET_SIZE(names), at = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyTuple_GET_ITEM(names, i);
        int cmp = x == name ? 0 : PyUnicode_Compare(x, name);
        if (cmp == -1 && PyErr_Occurred()) {
            return NULL;
        }
        if (cmp == 0) {
            if (add) {
                return Py_NewRef(names);
            }
            at = i;
            break;
        }
        if (cmp > 0) {
            if (!add) {
                return Py_NewRef(names);
            }
            at = i;
            break;
        }
    }
    if (!add && at == n) {
        return Py_NewRef(names);
    }
    PyObject *out = PyTuple_New(add ? n + 1 : n - 1);
    if (!out) {
        return NULL;
    }
    for (Py_ssize_t i = 0, j = 0; i < n; i++) {
        if (i == at && add) {
            PyTuple_SET_ITEM(out, j++, Py_NewRef(name));
        }
        if (i != at || add) {
            PyTuple_SET_ITEM(out, j++, Py_NewRef(PyTuple_GET_ITEM(names, i)));
        }
    }
    if (add && at == n) {
        PyTuple_SET_ITEM(out, n, Py_NewRef(name));
    }
    return out;
}

/* The id of the current module set, interned on first sight. Borrowed reference, or NULL with an exception. */
static PyObject *tracker_module_id(Tracker *self) {
    if (!self->dirty) {
        return self->module_id;
    }
    PyObject *list = PySequence_List(self->parents);
    PyObject *names = list && PyList_Sort(list) == 0 ? PyList_AsTuple(list) : NULL;
    Py_XDECREF(list);
    PyObject *id = names ? intern_set(self, names) : NULL;
    if (!id) {
        return NULL;
    }
    Py_XSETREF(self->module_id, id);
    self->dirty = 0;
    return self->module_id;
}

/* Remember that `name` entering (entering = 1) or leaving set id `from` gives set id `to`. 0, or -1. */
static int step_put(Tracker *self, int entering, PyObject *from, PyObject *name, PyObject *to) {
    PyObject *by_name = PyDict_GetItemWithError(self->steps[entering], from); /* borrowed */
    if (by_name) {
        return PyDict_SetItem(by_name, name, to);
    }
    if (PyErr_Occurred() || !(by_name = PyDict_New())) {
        return -1;
    }
    int rc = PyDict_SetItem(by_name, name, to) < 0 ? -1 : PyDict_SetItem(self->steps[entering], from, by_name);
    Py_DECREF(by_name);
    return rc;
}

/* `name` enters (entering = 1) or leaves the running set. The set it becomes is a function of the set it was and of
 * the step, so the id each step gives from a known set is remembered (steps): a module call then costs dict look-ups
 * instead of building, hashing and interning a frozenset of names. Entering also remembers the way back (leaving
 * the module from the set it made returns to the set it entered from, when it was not in it already), so that even
 * a module called once per block leaves through a look-up. 0, or -1 with an exception. */
static int parents_step(Tracker *self, PyObject *name, int entering) {
    PyObject *from = self->dirty ? NULL : Py_NewRef(self->module_id);
    self->dirty = 1;
    int rc = entering ? PySet_Add(self->parents, name) : PySet_Discard(self->parents, name);
    if (rc < 0 || !from) {
        Py_XDECREF(from);
        return rc < 0 ? -1 : 0;
    }
    PyObject *by_name = PyDict_GetItemWithError(self->steps[entering], from); /* borrowed */
    PyObject *to = by_name ? PyDict_GetItemWithError(by_name, name) : NULL;
    if (to) {
        Py_XSETREF(self->module_id, Py_NewRef(to));
        self->dirty = 0;
        Py_DECREF(from);
        return 0;
    }
    rc = -1;
    PyObject *names = PyErr_Occurred() ? NULL : PyList_GetItem(self->sets, PyLong_AsSsize_t(from)); /* borrowed */
    PyObject *key = names && PyUnicode_Check(name) ? set_with(names, name, entering) : NULL;
    if (key && (to = intern_set(self, key))) { /* steals key */
        Py_XSETREF(self->module_id, to);
        self->dirty = 0;
        if (step_put(self, entering, from, name, to) == 0) {
            rc = entering && to != from ? step_put(self, 0, to, name, from) : 0;
        }
    } else if (names && !PyErr_Occurred()) { /* a name that is not a str: the set as a whole */
        rc = tracker_module_id(self) ? 0 : -1;
    }
    Py_DECREF(from);
    return rc;
}

/* The id of module set `mid` with `name` added (a new reference), or NULL with an exception. */
static PyObject *set_plus(Tracker *self, uint32_t mid, PyObject *name) {
    PyObject *names = PyList_GetItem(self->sets, (Py_ssize_t)mid); /* borrowed: a sorted tuple */
    PyObject *key = names ? set_with(names, name, 1) : NULL;
    return key ? intern_set(self, key) : NULL;
}

/* ---- backward attribution ------------------------------------------------------------------------------------
 * The rules are attribution.c's (pure C); what they observe is asked of torch here, through rl_attr_env's
 * callbacks. What the tracker's own set says (torch's ModuleTracker rule, which FlopCounterMode's structure keeps)
 * is logged for the rows where the two differ. */

typedef struct {
    Tracker *self;
    PyObject *name; /* the module whose forward starts or ends (rl_attr_module), else NULL */
} track_ctx;

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

static int as_mid(PyObject *id, uint32_t *out);

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
    int rc = v == Py_None ? 0 : as_mid(v, out) < 0 ? -1 : 1;
    Py_DECREF(v);
    return rc;
}

static int as_mid(PyObject *id, uint32_t *out) {
    unsigned long v = PyLong_AsUnsignedLong(id);
    if (v == (unsigned long)-1 && PyErr_Occurred()) {
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

static int env_plus(void *ctx, uint32_t mid, uint32_t *out) {
    track_ctx *c = ctx;
    PyObject *id = set_plus(c->self, mid, c->name);
    int rc = id ? as_mid(id, out) : -1;
    Py_XDECREF(id);
    return rc;
}

static int env_forward_set(void *ctx, uint32_t *out) {
    track_ctx *c = ctx;
    PyObject *id = PyDict_GetItemWithError(c->self->fwd_sets, c->name);
    if (!id && (PyErr_Occurred() || !(id = tracker_module_id(c->self)))) {
        return -1;
    }
    return as_mid(id, out);
}

#define TRACK_ENV(ctx)                                                                                              \
    {(ctx), env_next_seq, env_grad_enabled, env_node, env_recomputing, env_plus, env_forward_set, env_region}

/* An rl_attr_* result as the binding's: 0, or -1 with an exception. */
static int attr_result(int rc) {
    if (rc == RL_ATTR_NOMEM) {
        PyErr_NoMemory();
    }
    return rc < 0 ? -1 : 0;
}

/* Nodes made from now on belong to the running set. A no-op for a tracker without `link`. 0, or -1. */
static int tracker_mark(Tracker *self) {
    if (!self->seq_nr) {
        return 0;
    }
    PyObject *id = tracker_module_id(self);
    uint32_t mid;
    if (!id || as_mid(id, &mid) < 0) {
        return -1;
    }
    track_ctx ctx = {self, NULL};
    rl_attr_env env = TRACK_ENV(&ctx);
    return attr_result(rl_attr_mark(&self->attr, &env, mid));
}

typedef struct {
    int phase;     /* RL_PHASE_* */
    PyObject *mid; /* new reference: the module id to record */
    PyObject *fcm; /* new reference: the tracker's own module id where it differs from mid, else NULL */
    int unlinked;  /* a backward op whose node no forward module created (credited as the tracker says) */
} attribution;

static void attribution_clear(attribution *a) {
    Py_CLEAR(a->mid);
    Py_CLEAR(a->fcm);
}

/* Where an op the block records now belongs, given the graph task id (-1: not in a backward). 0 with a->mid set
 * (and a->fcm where it differs from the tracker's set), or -1 with an exception (nothing to release). */
static int attribute(Tracker *self, long task, attribution *a) {
    a->fcm = NULL;
    a->unlinked = 0;
    a->phase = task == -1 ? RL_PHASE_FORWARD : RL_PHASE_BACKWARD;
    PyObject *tmid = tracker_module_id(self);
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
    if (as_mid(tmid, &t) < 0 || attr_result(rl_attr_op(&self->attr, &env, task != -1, t, &out)) < 0) {
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
static int attribution_log(Tracker *self, const attribution *a, Py_ssize_t row) {
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

/* Whether the tracker's mode is on this thread's dispatch mode stack. 1, 0, or -1 with an exception. */
static int active_here(Tracker *self) {
    if (!self->enabled) {
        return 0;
    }
    if (self->mode == Py_None) {
        return 1;
    }
    /* One call in the usual case: the stack entry where the mode was last found (an entry of this thread's
     * stack that is the mode means it is on it). Otherwise (another position, a shorter stack: IndexError or
     * RuntimeError from torch, cleared) the whole stack is searched. */
    PyObject *guess = PyLong_FromSsize_t(self->mode_at);
    if (!guess) {
        return -1;
    }
    PyObject *at = PyObject_CallOneArg(self->stack_at, guess);
    Py_DECREF(guess);
    if (at) {
        int same = at == self->mode;
        Py_DECREF(at);
        if (same) {
            return 1;
        }
    } else if (PyErr_ExceptionMatches(PyExc_IndexError) || PyErr_ExceptionMatches(PyExc_RuntimeError)) {
        PyErr_Clear();
    } else {
        return -1;
    }
    PyObject *n_obj = PyObject_CallNoArgs(self->stack_len);
    if (!n_obj) {
        return -1;
    }
    Py_ssize_t n = PyLong_AsSsize_t(n_obj);
    Py_DECREF(n_obj);
    if (n == -1 && PyErr_Occurred()) {
        return -1;
    }
    for (Py_ssize_t i = n - 1; i >= 0; i--) { /* the mode is usually on top */
        PyObject *idx = PyLong_FromSsize_t(i);
        if (!idx) {
            return -1;
        }
        PyObject *m = PyObject_CallOneArg(self->stack_at, idx);
        Py_DECREF(idx);
        if (!m) {
            return -1;
        }
        int same = m == self->mode;
        Py_DECREF(m);
        if (same) {
            self->mode_at = i;
            return 1;
        }
    }
    return 0;
}

/* Whether `named_children` of `mod`'s type is the one of its base-most class defining it (torch.nn.Module's): then
 * the children are `mod._modules`' non-None values, first name of each kept. 1, 0, or -1 with an exception. */
static int plain_named_children(Tracker *self, PyObject *mod) {
    PyTypeObject *tp = Py_TYPE(mod);
    PyObject *mro = tp->tp_mro;
    if (!mro || !PyTuple_Check(mro)) {
        return 0;
    }
    PyObject *resolved = PyObject_GetAttr((PyObject *)tp, self->s_named_children);
    if (!resolved) {
        PyErr_Clear(); /* no named_children at all: the generic path raises the error a call would */
        return 0;
    }
    int plain = 0;
    for (Py_ssize_t i = PyTuple_GET_SIZE(mro) - 1; i >= 0; i--) { /* from `object` up: the base-most definition */
        PyObject *d = ((PyTypeObject *)PyTuple_GET_ITEM(mro, i))->tp_dict; /* NULL for some static types */
        PyObject *f = d ? PyDict_GetItemWithError(d, self->s_named_children) : NULL;
        if (f || PyErr_Occurred()) {
            plain = f ? f == resolved : -1;
            break;
        }
    }
    Py_DECREF(resolved);
    return plain;
}

/* `list(mod.named_children())`: (name, child) pairs. New reference or NULL with an exception. */
static PyObject *named_children(Tracker *self, PyObject *mod) {
    int plain = plain_named_children(self, mod);
    if (plain < 0) {
        return NULL;
    }
    PyObject *mods = plain ? PyObject_GetAttr(mod, self->s_modules) : NULL;
    if (!mods || !PyDict_CheckExact(mods)) {
        if (plain && !mods) {
            return NULL;
        }
        Py_XDECREF(mods);
        PyObject *it = PyObject_CallMethodNoArgs(mod, self->s_named_children);
        if (!it) {
            return NULL;
        }
        PyObject *out = PySequence_List(it);
        Py_DECREF(it);
        return out;
    }
    PyObject *out = PyList_New(0), *memo = PySet_New(NULL);
    PyObject *items = PyDict_Items(mods); /* a copy: nothing below can change what is walked */
    Py_DECREF(mods);
    if (!out || !memo || !items) {
        goto fail;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
        PyObject *pair = PyList_GET_ITEM(items, i);
        PyObject *child = PyTuple_GET_ITEM(pair, 1);
        if (child == Py_None) {
            continue;
        }
        int dup = PySet_Contains(memo, child);
        if (dup < 0 || (!dup && (PySet_Add(memo, child) < 0 || PyList_Append(out, pair) < 0))) {
            goto fail;
        }
    }
    Py_DECREF(items);
    Py_DECREF(memo);
    return out;
fail:
    Py_XDECREF(items);
    Py_XDECREF(memo);
    Py_XDECREF(out);
    return NULL;
}

/* `prefix + "." + attr` for two str. New reference or NULL. */
static PyObject *join_name(PyObject *prefix, PyObject *attr) {
    Py_ssize_t a = PyUnicode_GET_LENGTH(prefix), b = PyUnicode_GET_LENGTH(attr);
    Py_UCS4 maxc = PyUnicode_MAX_CHAR_VALUE(prefix);
    if (PyUnicode_MAX_CHAR_VALUE(attr) > maxc) {
        maxc = PyUnicode_MAX_CHAR_VALUE(attr);
    }
    PyObject *out = PyUnicode_New(a + 1 + b, maxc);
    if (!out || PyUnicode_CopyCharacters(out, 0, prefix, 0, a) < 0 || PyUnicode_WriteChar(out, a, '.') < 0 ||
        PyUnicode_CopyCharacters(out, a + 1, attr, 0, b) < 0) {
        Py_XDECREF(out);
        return NULL;
    }
    return out;
}

/* ModuleTracker's naming rule (torch.utils.module_tracker): a module not named yet is named after its type; the first
 * time a module is walked (`seen`), each of its children (named_children order) is (re)named `<its name>.<attr>` and
 * walked in turn, depth first. New reference to `mod`'s name, or NULL with an exception (RecursionError on a module
 * tree deeper than the interpreter's recursion limit, as the rule written in Python would raise). */
static PyObject *name_tree(Tracker *self, PyObject *mod) {
    PyObject *name = PyDict_GetItemWithError(self->known, mod);
    if (name) {
        Py_INCREF(name);
    } else {
        if (PyErr_Occurred()) {
            return NULL;
        }
        name = PyObject_GetAttr((PyObject *)Py_TYPE(mod), self->s_name);
        if (!name || PyDict_SetItem(self->known, mod, name) < 0) {
            Py_XDECREF(name);
            return NULL;
        }
    }
    int seen = PySet_Contains(self->seen, mod);
    if (seen) {
        return seen < 0 ? (Py_DECREF(name), NULL) : name;
    }
    if (Py_EnterRecursiveCall(" while naming modules")) {
        Py_DECREF(name);
        return NULL;
    }
    PyObject *children = named_children(self, mod);
    int rc = children ? 0 : -1;
    for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(children); i++) {
        PyObject *pair = PyList_GET_ITEM(children, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "named_children() must yield (name, module) pairs");
            rc = -1;
            break;
        }
        PyObject *child = PyTuple_GET_ITEM(pair, 1);
        PyObject *attr = PyTuple_GET_ITEM(pair, 0);
        PyObject *full = PyUnicode_CheckExact(name) && PyUnicode_CheckExact(attr)
                             ? join_name(name, attr) /* the usual case: no format parsing */
                             : PyUnicode_FromFormat("%S.%S", name, attr);
        rc = full ? PyDict_SetItem(self->known, child, full) : -1;
        Py_XDECREF(full);
        PyObject *sub = rc == 0 ? name_tree(self, child) : NULL;
        rc = sub ? 0 : -1;
        Py_XDECREF(sub);
    }
    Py_XDECREF(children);
    Py_LeaveRecursiveCall();
    if (rc < 0 || PySet_Add(self->seen, mod) < 0) {
        Py_DECREF(name);
        return NULL;
    }
    return name;
}

/* The module's name: `known[mod]` once its children are named, else named by the rule. New reference or NULL. */
static PyObject *module_name(Tracker *self, PyObject *mod) {
    int seen = PySet_Contains(self->seen, mod);
    if (seen < 0) {
        return NULL;
    }
    if (seen) {
        PyObject *name = PyDict_GetItemWithError(self->known, mod);
        if (name) {
            return Py_NewRef(name);
        }
        if (PyErr_Occurred()) {
            return NULL;
        }
    }
    return name_tree(self, mod);
}

/* Add `t` to `out` if it is a torch.Tensor with requires_grad. 0, or -1 with an exception. */
static int take_if_grad(Tracker *self, PyObject *t, PyObject *out) {
    int is_tensor = PyObject_IsInstance(t, self->tensor_type);
    if (is_tensor <= 0) {
        return is_tensor;
    }
    PyObject *rg = PyObject_GetAttr(t, self->s_requires_grad);
    if (!rg) {
        return -1;
    }
    int truth = PyObject_IsTrue(rg);
    Py_DECREF(rg);
    if (truth <= 0) {
        return truth;
    }
    return PyList_Append(out, t);
}

/* Append to `out` every pytree leaf of `obj` that is a tensor requiring grad, in pytree order. Plain tuples,
 * lists and dicts are walked here (their pytree flattening is their items, resp. values); plain tensors and
 * scalars are leaves; anything else goes through `flatten`. */
static int collect_grad_tensors(Tracker *self, PyObject *obj, PyObject *out, int depth) {
    PyTypeObject *tp = Py_TYPE(obj);
    if (tp == (PyTypeObject *)self->tensor_type || tp == (PyTypeObject *)self->param_type) {
        return take_if_grad(self, obj, out);
    }
    if (obj == Py_None || tp == &PyLong_Type || tp == &PyFloat_Type || tp == &PyBool_Type || tp == &PyUnicode_Type) {
        return 0;
    }
    if (depth < RL_WALK_DEPTH) {
        if (tp == &PyTuple_Type) {
            for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(obj); i++) {
                if (collect_grad_tensors(self, PyTuple_GET_ITEM(obj, i), out, depth + 1) < 0) {
                    return -1;
                }
            }
            return 0;
        }
        if (tp == &PyList_Type) {
            for (Py_ssize_t i = 0; i < PyList_GET_SIZE(obj); i++) {
                PyObject *item = Py_NewRef(PyList_GET_ITEM(obj, i));
                int rc = collect_grad_tensors(self, item, out, depth + 1);
                Py_DECREF(item);
                if (rc < 0) {
                    return -1;
                }
                if (i >= PyList_GET_SIZE(obj)) {
                    break;
                }
            }
            return 0;
        }
        if (tp == &PyDict_Type) {
            PyObject *values = PyDict_Values(obj);
            if (!values) {
                return -1;
            }
            int rc = collect_grad_tensors(self, values, out, depth + 1);
            Py_DECREF(values);
            return rc;
        }
    }
    PyObject *leaves = PyObject_CallOneArg(self->flatten, obj);
    if (!leaves) {
        return -1;
    }
    PyObject *seq = PySequence_Fast(leaves, "ModuleTracker: flatten must return a sequence");
    Py_DECREF(leaves);
    if (!seq) {
        return -1;
    }
    int rc = 0;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq) && rc == 0; i++) {
        rc = take_if_grad(self, PySequence_Fast_GET_ITEM(seq, i), out);
    }
    Py_DECREF(seq);
    return rc;
}

/* ---- GradGate: the gradient hook of ModuleTracker (torch.autograd.graph.register_multi_grad_hook, "all" mode) ---- */

/* One module call's hook on its inputs (the module leaves the set once their gradients are computed) or its outputs
 * (it re-enters the set once theirs are). Each of those tensors gets an arm (Tensor.register_hook): a call counts per
 * backward (graph task) and keeps the gradient until the gate acts, on the call that completes the count of tensors
 * whose gradient node the engine will execute (computed on the first call of each backward):
 * register_multi_grad_hook's rule, without a Python frame per call. The gradients are kept as torch keeps them (a
 * leaf's gradient then has a second reference when it is accumulated, so AccumulateGrad copies it instead of taking
 * it): the ops of a backward are those FlopCounterMode sees. */
typedef struct {
    PyObject_HEAD
    PyObject *tracker;  /* the Tracker */
    PyObject *name;     /* the module's name */
    PyObject *grad_fns; /* tuple: each hooked tensor's grad_fn, or its gradient accumulator for a leaf */
    PyObject *leaves;   /* bytes: 1 where grad_fns holds a leaf's gradient accumulator */
    PyObject *count;    /* dict: graph task id -> calls so far */
    PyObject *buffer;   /* dict: graph task id -> list of the gradients received so far (None where none yet) */
    Py_ssize_t nb_calls; /* hooked tensors the engine executes in the latest backward to call the gate */
    int reenter;        /* 1: add the module (outputs' gradients); 0: discard it (inputs') */
} GradGate;

#define GATE_OBJECTS(X) X(tracker) X(name) X(grad_fns) X(leaves) X(count) X(buffer)

RL_GC_MEMBERS(GradGate, GATE_OBJECTS, (void)0)

static PyObject *Tracker_add(Tracker *self, PyObject *name);
static PyObject *Tracker_discard(Tracker *self, PyObject *name);

/* arm(grad), bound to (gate, index): the gradient of the gate's index-th tensor is computed. Returns None (the
 * gradient is not changed). */
static PyObject *gate_arm(PyObject *bound, PyObject *grad) {
    GradGate *self = (GradGate *)PyTuple_GET_ITEM(bound, 0);
    Py_ssize_t idx = PyLong_AsSsize_t(PyTuple_GET_ITEM(bound, 1));
    if (idx < 0) {
        return NULL;
    }
    if (!self->tracker || !self->buffer) {
        PyErr_SetString(PyExc_RuntimeError, "GradGate: cleared");
        return NULL;
    }
    Tracker *tr = (Tracker *)self->tracker;
    if (check_ready(tr) < 0) {
        return NULL;
    }
    PyObject *id = PyObject_CallNoArgs(tr->task_id);
    if (!id) {
        return NULL;
    }
    long v = PyLong_AsLong(id);
    if (v == -1) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_AssertionError, "expected this hook to be called inside a backward call");
        }
        Py_DECREF(id);
        return NULL;
    }
    PyObject *c = PyDict_GetItemWithError(self->count, id);
    Py_ssize_t curr = c ? PyLong_AsSsize_t(c) : 0;
    PyObject *next = (c || !PyErr_Occurred()) && curr >= 0 ? PyLong_FromSsize_t(curr + 1) : NULL;
    int rc = next ? PyDict_SetItem(self->count, id, next) : -1;
    Py_XDECREF(next);
    PyObject *buf = rc == 0 ? PyDict_GetItemWithError(self->buffer, id) : NULL;
    if (rc == 0 && !buf) {
        Py_ssize_t n = PyTuple_GET_SIZE(self->grad_fns);
        PyObject *fresh = PyErr_Occurred() ? NULL : PyList_New(n);
        for (Py_ssize_t i = 0; fresh && i < n; i++) {
            PyList_SET_ITEM(fresh, i, Py_NewRef(Py_None));
        }
        rc = fresh ? PyDict_SetItem(self->buffer, id, fresh) : -1;
        buf = fresh;
        Py_XDECREF(fresh); /* the dict holds it */
    }
    if (rc == 0 && curr == 0) { /* the first call of this backward: how many of the nodes will run */
        Py_ssize_t nb = 0;
        const char *leaf = PyBytes_AS_STRING(self->leaves);
        for (Py_ssize_t i = 0; rc == 0 && i < PyTuple_GET_SIZE(self->grad_fns); i++) {
            PyObject *r = PyObject_CallOneArg(tr->will_execute, PyTuple_GET_ITEM(self->grad_fns, i));
            int t = r ? PyObject_IsTrue(r) : -1;
            Py_XDECREF(r);
            if (t < 0 && leaf[i] && PyErr_ExceptionMatches(PyExc_RuntimeError)) {
                /* torch refuses to answer for a leaf's accumulator inside torch.autograd.grad(), and only when the
                 * leaf is one of the inputs whose gradient the call returns (it captures the gradient instead of
                 * running the accumulator): its tensor hooks run on the captured gradient, so this arm is called */
                PyErr_Clear();
                t = 1;
            }
            rc = t < 0 ? -1 : 0;
            nb += t > 0;
        }
        if (rc == 0) {
            self->nb_calls = nb;
        }
    }
    if (rc == 0 && idx < PyList_GET_SIZE(buf)) {
        rc = PyList_SetItem(buf, idx, Py_NewRef(grad));
    }
    if (rc == 0 && curr == self->nb_calls - 1) {
        PyObject *r = NULL;
        if (self->reenter) {
            PyObject *q = tr->reset_queued ? Py_NewRef(Py_None) : PyObject_CallNoArgs(tr->on_reenter);
            if (q) {
                tr->reset_queued = 1;
            }
            Py_XDECREF(q);
            r = q ? Tracker_add(tr, self->name) : NULL;
        } else {
            r = Tracker_discard(tr, self->name);
        }
        Py_XDECREF(r);
        rc = r && PyDict_DelItem(self->count, id) == 0 && PyDict_DelItem(self->buffer, id) == 0 ? 0 : -1;
    }
    Py_DECREF(id);
    if (rc < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef gate_arm_def = {"gate_arm", (PyCFunction)gate_arm, METH_O,
                                   "A tensor's gradient hook: its gradient is computed."};

static PyType_Slot GradGate_slots[] = {
    {Py_tp_doc, "A module call's gradient hooks (made by ModuleTracker); its arms are registered on the tensors."},
    RL_GC_SLOTS(GradGate),
    {0, NULL},
};

RL_GC_TYPE_SPEC(GradGate, "roofline._core.GradGate", 0);

/* t.register_hook(arm): Tensor.register_hook's steps for a plain tensor (torch.Tensor or Parameter) with no
 * __torch_function__ to consult, without its Python frames (~10 us per call, two thirds of them the function-level
 * import it runs: each raises and formats two AttributeErrors inside CPython): the tensor's hook dict (created and
 * registered with its grad_fn on first use, as the method does), numbered from RemovableHandle's own counter so
 * it never shares an id with another hook. Returns the handle: (weak reference to the dict, id), removed by
 * remove_hooks; anything else (a subclass, an active torch function mode, no `register`) calls the method and
 * returns its RemovableHandle. tests/test_tracking.py pins the steps against the method's. */
static PyObject *register_arm(Tracker *self, PyObject *t, PyObject *arm) {
    PyTypeObject *tp = Py_TYPE(t);
    int plain = self->hook_dict && (tp == (PyTypeObject *)self->tensor_type || tp == (PyTypeObject *)self->param_type);
    if (plain) {
        PyObject *tf = PyObject_CallOneArg(self->has_tf, t);
        if (!tf) {
            return NULL;
        }
        int truth = PyObject_IsTrue(tf);
        Py_DECREF(tf);
        if (truth < 0) {
            return NULL;
        }
        plain = !truth;
    }
    if (!plain) {
        return PyObject_CallMethodOneArg(t, self->s_register_hook, arm);
    }
    PyObject *d = PyObject_GetAttr(t, self->s_backward_hooks);
    if (!d) {
        return NULL;
    }
    if (d == Py_None) {
        Py_DECREF(d);
        d = PyObject_CallNoArgs(self->hook_dict);
        if (!d || PyObject_SetAttr(t, self->s_backward_hooks, d) < 0) {
            Py_XDECREF(d);
            return NULL;
        }
        PyObject *gf = PyObject_GetAttr(t, self->s_grad_fn);
        PyObject *r = gf && gf != Py_None ? PyObject_CallMethodOneArg(gf, self->s_register_hook_dict, t)
                                          : Py_XNewRef(gf);
        Py_XDECREF(gf);
        if (!r) {
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(r);
    }
    PyObject *ref = PyWeakref_NewRef(d, NULL); /* as RemovableHandle keeps it: the dict dies with its tensor */
    PyObject *id = ref ? PyObject_GetAttr(self->handle_ids, self->s_next_id) : NULL;
    PyObject *one = id ? PyLong_FromLong(1) : NULL;
    PyObject *next = one ? PyNumber_Add(id, one) : NULL;
    Py_XDECREF(one);
    PyObject *handle = next && PyObject_SetAttr(self->handle_ids, self->s_next_id, next) == 0
                           ? PyTuple_Pack(2, ref, id) : NULL;
    if (handle && PyObject_SetItem(d, id, arm) < 0) {
        Py_CLEAR(handle);
    }
    Py_XDECREF(next);
    Py_XDECREF(id);
    Py_XDECREF(ref);
    Py_DECREF(d);
    return handle;
}

/* Hook the grad-requiring tensors among `obj`'s leaves with one gate, if there are any: the module leaves the set
 * (reenter = 0, its inputs) or re-enters it (1, its outputs) once their gradients are computed. */
static int grad_hooks(Tracker *self, PyObject *name, PyObject *obj, int reenter) {
    PyObject *tensors = PyList_New(0);
    if (!tensors) {
        return -1;
    }
    int rc = collect_grad_tensors(self, obj, tensors, 0);
    Py_ssize_t n = PyList_GET_SIZE(tensors);
    if (rc < 0 || n == 0) {
        Py_DECREF(tensors);
        return rc;
    }
    PyObject *grad_fns = PyTuple_New(n);
    GradGate *gate = grad_fns ? PyObject_GC_New(GradGate, (PyTypeObject *)self->gate_type) : NULL;
    if (!gate) {
        Py_XDECREF(grad_fns);
        Py_DECREF(tensors);
        return -1;
    }
    gate->tracker = Py_NewRef((PyObject *)self);
    gate->name = Py_NewRef(name);
    gate->grad_fns = grad_fns;
    gate->leaves = PyBytes_FromStringAndSize(NULL, n);
    gate->count = PyDict_New();
    gate->buffer = PyDict_New();
    gate->nb_calls = 0;
    gate->reenter = reenter;
    PyObject_GC_Track((PyObject *)gate);
    rc = gate->count && gate->buffer && gate->leaves ? 0 : -1;
    if (rc == 0) {
        memset(PyBytes_AS_STRING(gate->leaves), 0, (size_t)n);
    }
    for (Py_ssize_t i = 0; rc == 0 && i < n; i++) { /* each tensor's node: grad_fn, or a leaf's accumulator */
        PyObject *t = PyList_GET_ITEM(tensors, i);
        PyObject *node = PyObject_GetAttr(t, self->s_grad_fn);
        if (node == Py_None) {
            PyBytes_AS_STRING(gate->leaves)[i] = 1;
            Py_DECREF(node);
            node = PyObject_CallOneArg(self->grad_node, t);
        }
        rc = node ? 0 : -1;
        if (node) {
            PyTuple_SET_ITEM(grad_fns, i, node);
        }
    }
    for (Py_ssize_t i = 0; rc == 0 && i < n; i++) { /* then the arms, in order (as the multi-grad hook does) */
        PyObject *bound = Py_BuildValue("(On)", (PyObject *)gate, i);
        PyObject *arm = bound ? PyCFunction_New(&gate_arm_def, bound) : NULL;
        Py_XDECREF(bound);
        PyObject *h = arm ? register_arm(self, PyList_GET_ITEM(tensors, i), arm) : NULL;
        Py_XDECREF(arm);
        rc = h ? PyList_Append(self->hooks, h) : -1;
        Py_XDECREF(h);
    }
    Py_DECREF((PyObject *)gate);
    Py_DECREF(tensors);
    return rc;
}

/* A module's forward started (entering) or ended: nodes from now on belong to the new set. A module forward inside
 * a backward runs again (activation checkpointing recomputes it): its nodes belong to the set it ran in during the
 * forward (the tracker's set inside a backward also holds modules active in backward), and once the outermost one
 * ends, to no forward module. 0, or -1 with an exception. */
static int hook_mark(Tracker *self, PyObject *name, int entering) {
    if (!self->seq_nr) {
        return 0;
    }
    PyObject *tid = PyObject_CallNoArgs(self->task_id);
    long task = tid ? PyLong_AsLong(tid) : -1;
    Py_XDECREF(tid);
    if (!tid || (task == -1 && PyErr_Occurred())) {
        return -1;
    }
    uint32_t running = RL_LINK_NONE;
    if (task == -1) { /* the set a module's forward runs in, for its recomputation (env_forward_set) */
        PyObject *id = tracker_module_id(self);
        if (!id || as_mid(id, &running) < 0 || (entering && PyDict_SetItem(self->fwd_sets, name, id) < 0)) {
            return -1;
        }
    }
    track_ctx ctx = {self, name};
    rl_attr_env env = TRACK_ENV(&ctx);
    return attr_result(rl_attr_module(&self->attr, &env, task != -1, entering, running));
}

/* A module's forward starts, outside a backward, inside a non-reentrant checkpoint's function (its saved-tensor
 * hooks on top): the set running before it is the one the function was called in (note_region keeps the first
 * such note of each checkpoint call). One call of top_hooks where no checkpoint is in force. 0, or -1. */
static int note_region(Tracker *self) {
    if (!self->note_region) {
        return 0;
    }
    PyObject *h = PyObject_CallOneArg(self->top_hooks, Py_False);
    if (!h || h == Py_None) {
        Py_XDECREF(h);
        return h ? 0 : -1;
    }
    PyObject *tid = PyObject_CallNoArgs(self->task_id);
    long task = tid ? PyLong_AsLong(tid) : -1;
    Py_XDECREF(tid);
    PyObject *id = tid && !(task == -1 && PyErr_Occurred()) && task == -1 ? tracker_module_id(self) : NULL;
    PyObject *r = id ? PyObject_CallFunctionObjArgs(self->note_region, h, id, NULL) : NULL;
    Py_DECREF(h);
    if (!r) {
        return PyErr_Occurred() ? -1 : 0;
    }
    Py_DECREF(r);
    return 0;
}

/* The global forward hooks: pre(module, input) (entering = 1) adds the module to the running set, post(module, input,
 * output) (entering = 0) removes it; both hook the gradients of the tensors they see for backward attribution. */
static PyObject *tracker_hook(Tracker *self, PyObject *const *argv, Py_ssize_t argc, int entering) {
    Py_ssize_t want = entering ? 2 : 3;
    if (argc != want) {
        PyErr_SetString(PyExc_TypeError,
                        entering ? "ModuleTracker.pre(module, input)" : "ModuleTracker.post(module, input, output)");
        return NULL;
    }
    if (check_ready(self) < 0) {
        return NULL;
    }
    int active = active_here(self);
    if (active <= 0) {
        return active < 0 ? NULL : Py_NewRef(Py_None);
    }
    PyObject *name = module_name(self, argv[0]);
    if (!name) {
        return NULL;
    }
    if (entering && note_region(self) < 0) {
        Py_DECREF(name);
        return NULL;
    }
    if (parents_step(self, name, entering) < 0 || grad_hooks(self, name, argv[want - 1], !entering) < 0 ||
        hook_mark(self, name, entering) < 0) {
        Py_DECREF(name);
        return NULL;
    }
    Py_DECREF(name);
    Py_RETURN_NONE;
}

static PyObject *Tracker_pre(Tracker *self, PyObject *const *argv, Py_ssize_t argc) {
    return tracker_hook(self, argv, argc, 1);
}

static PyObject *Tracker_post(Tracker *self, PyObject *const *argv, Py_ssize_t argc) {
    return tracker_hook(self, argv, argc, 0);
}

/* name(module) -> its name, naming it and the modules under it first if needed. */
static PyObject *Tracker_name(Tracker *self, PyObject *mod) {
    if (check_ready(self) < 0) {
        return NULL;
    }
    return module_name(self, mod);
}

static PyObject *Tracker_add(Tracker *self, PyObject *name) {
    if (check_ready(self) < 0) {
        return NULL;
    }
    if (!PyUnicode_Check(name)) {
        return PyErr_Format(PyExc_TypeError, "ModuleTracker.add: name must be a str, got %.100s",
                            Py_TYPE(name)->tp_name);
    }
    self->dirty = 1;
    if (PySet_Add(self->parents, name) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* discard(name) -> whether the name was in the set. */
static PyObject *Tracker_discard(Tracker *self, PyObject *name) {
    if (check_ready(self) < 0) {
        return NULL;
    }
    self->dirty = 1;
    int r = PySet_Discard(self->parents, name);
    if (r < 0) {
        return NULL;
    }
    return PyBool_FromLong(r);
}

static PyObject *Tracker_reset(Tracker *self, PyObject *Py_UNUSED(ignored)) {
    if (check_ready(self) < 0) {
        return NULL;
    }
    self->dirty = 1;
    self->reset_queued = 0;
    rl_attr_clear_stack(&self->attr);
    if (PySet_Clear(self->parents) < 0 || PySet_Add(self->parents, self->s_global) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* close(): the hooks stop acting; the module names and modules are released (the interned sets stay). */
static PyObject *Tracker_close(Tracker *self, PyObject *Py_UNUSED(ignored)) {
    self->enabled = 0;
    if (self->known) {
        PyDict_Clear(self->known);
    }
    if (self->seen && PySet_Clear(self->seen) < 0) {
        return NULL;
    }
    Py_CLEAR(self->mode);
    self->mode = Py_NewRef(Py_None);
    Py_RETURN_NONE;
}

/* remove_hooks(): take out every gradient hook registered so far (those on tensors that outlive the block), as
 * RemovableHandle.remove does: a hook already gone, or whose tensor is gone, is skipped. All are removed even
 * if one fails; the first error is raised. */
static PyObject *Tracker_remove_hooks(Tracker *self, PyObject *Py_UNUSED(ignored)) {
    if (check_ready(self) < 0) {
        return NULL;
    }
    PyObject *hooks = self->hooks;
    self->hooks = PyList_New(0); /* a hook registered while these are removed is kept for the next call */
    if (!self->hooks) {
        self->hooks = hooks;
        return NULL;
    }
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *first = NULL; /* the first error */
#else
    PyObject *et = NULL, *ev = NULL, *etb = NULL;
#endif
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(hooks); i++) {
        PyObject *h = PyList_GET_ITEM(hooks, i);
        int rc = 0;
        if (PyTuple_CheckExact(h) && PyTuple_GET_SIZE(h) == 2) {
            PyObject *d = NULL; /* the dict, or NULL once it is gone */
#if PY_VERSION_HEX >= 0x030D0000
            rc = PyWeakref_GetRef(PyTuple_GET_ITEM(h, 0), &d);
#else
            d = PyWeakref_GetObject(PyTuple_GET_ITEM(h, 0)); /* borrowed; None once the dict is gone */
            rc = d ? 0 : -1;
            d = d == Py_None ? NULL : Py_XNewRef(d);
#endif
            if (rc >= 0 && d) {
                rc = PySequence_Contains(d, PyTuple_GET_ITEM(h, 1));
                rc = rc > 0 ? PyObject_DelItem(d, PyTuple_GET_ITEM(h, 1)) : rc;
            }
            Py_XDECREF(d);
        } else {
            PyObject *r = PyObject_CallMethod(h, "remove", NULL);
            rc = r ? 0 : -1;
            Py_XDECREF(r);
        }
        if (rc < 0) {
#if PY_VERSION_HEX >= 0x030C0000
            if (!first) {
                first = PyErr_GetRaisedException();
            }
#else
            if (!et) {
                PyErr_Fetch(&et, &ev, &etb);
            }
#endif
            PyErr_Clear();
        }
    }
    Py_DECREF(hooks);
#if PY_VERSION_HEX >= 0x030C0000
    if (first) {
        PyErr_SetRaisedException(first);
        return NULL;
    }
#else
    if (et) {
        PyErr_Restore(et, ev, etb);
        return NULL;
    }
#endif
    Py_RETURN_NONE;
}

static PyObject *Tracker_get_module_id(Tracker *self, void *Py_UNUSED(c)) {
    if (check_ready(self) < 0) {
        return NULL;
    }
    PyObject *id = tracker_module_id(self);
    return id ? Py_NewRef(id) : NULL;
}

static PyObject *Tracker_get_parents(Tracker *self, void *Py_UNUSED(c)) {
    if (check_ready(self) < 0) {
        return NULL;
    }
    return PyFrozenSet_New(self->parents);
}

static PyObject *Tracker_get_sets(Tracker *self, void *Py_UNUSED(c)) {
    if (check_ready(self) < 0) {
        return NULL;
    }
    return Py_NewRef(self->sets);
}

static PyObject *Tracker_get_enabled(Tracker *self, void *Py_UNUSED(c)) { return PyBool_FromLong(self->enabled); }

/* attribute() -> (module id, phase, the tracker's own module id where it differs or None, not linked): where an op
 * recorded now belongs (the C dispatch path does the same per op; this is for the Python paths). */
static PyObject *Tracker_attribute(Tracker *self, PyObject *Py_UNUSED(ignored)) {
    if (check_ready(self) < 0) {
        return NULL;
    }
    PyObject *tid = PyObject_CallNoArgs(self->task_id);
    long task = tid ? PyLong_AsLong(tid) : -1;
    Py_XDECREF(tid);
    if (!tid || (task == -1 && PyErr_Occurred())) {
        return NULL;
    }
    attribution a;
    if (attribute(self, task, &a) < 0) {
        return NULL;
    }
    PyObject *r = Py_BuildValue("(OiOO)", a.mid, a.phase, a.fcm ? a.fcm : Py_None, a.unlinked ? Py_True : Py_False);
    attribution_clear(&a);
    return r;
}

/* note(row, fcm, unlinked): log a recorded row as attribute() described it (the Python paths). */
static PyObject *Tracker_note(Tracker *self, PyObject *args) {
    Py_ssize_t row;
    PyObject *fcm;
    int unlinked;
    if (!PyArg_ParseTuple(args, "nOp:ModuleTracker.note", &row, &fcm, &unlinked)) {
        return NULL;
    }
    if (check_ready(self) < 0) {
        return NULL;
    }
    if (!self->seq_nr) {
        Py_RETURN_NONE;
    }
    if (row < 0 || (fcm != Py_None && !PyLong_Check(fcm))) {
        PyErr_SetString(PyExc_ValueError, "ModuleTracker.note: row must be >= 0 and fcm an int or None");
        return NULL;
    }
    attribution a = {RL_PHASE_BACKWARD, NULL, fcm == Py_None ? NULL : fcm, unlinked};
    if (attribution_log(self, &a, row) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *Tracker_get_fcm_log(Tracker *self, void *Py_UNUSED(c)) {
    return self->fcm_log ? PyList_GetSlice(self->fcm_log, 0, PyList_GET_SIZE(self->fcm_log)) : PyList_New(0);
}

static PyObject *Tracker_get_unlinked_log(Tracker *self, void *Py_UNUSED(c)) {
    return self->unlinked_log ? PyList_GetSlice(self->unlinked_log, 0, PyList_GET_SIZE(self->unlinked_log))
                              : PyList_New(0);
}

static PyObject *Tracker_get_links_broken(Tracker *self, void *Py_UNUSED(c)) {
    return PyBool_FromLong(self->attr.links.broken);
}

static PyMethodDef Tracker_methods[] = {
    {"pre", (PyCFunction)(void (*)(void))Tracker_pre, METH_FASTCALL,
     "pre(module, input): global forward pre-hook: the module enters the current set."},
    {"post", (PyCFunction)(void (*)(void))Tracker_post, METH_FASTCALL,
     "post(module, input, output): global forward hook: the module leaves the current set."},
    {"name", (PyCFunction)Tracker_name, METH_O,
     "name(module) -> str: the module's name under ModuleTracker's rule (named from the first root it is seen under)."},
    {"add", (PyCFunction)Tracker_add, METH_O, "add(name): a module (re-)enters the current set (backward)."},
    {"discard", (PyCFunction)Tracker_discard, METH_O,
     "discard(name) -> bool: a module leaves the current set; whether it was in it."},
    {"reset", (PyCFunction)Tracker_reset, METH_NOARGS, "The current set becomes {'Global'} (end of a backward)."},
    {"remove_hooks", (PyCFunction)Tracker_remove_hooks, METH_NOARGS,
     "Remove the gradient hooks registered so far (those on tensors that outlive the block)."},
    {"close", (PyCFunction)Tracker_close, METH_NOARGS, "Stop acting; release the modules named so far."},
    {"attribute", (PyCFunction)Tracker_attribute, METH_NOARGS,
     "attribute() -> (module id, phase, tracker's module id where it differs or None, not linked): where an op "
     "recorded now belongs."},
    {"note", (PyCFunction)Tracker_note, METH_VARARGS,
     "note(row, fcm, unlinked): log a recorded row as attribute() described it."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Tracker_getset[] = {
    {"module_id", (getter)Tracker_get_module_id, NULL, "Id of the current module set (interned on first use).", NULL},
    {"parents", (getter)Tracker_get_parents, NULL, "The current module names (a frozenset copy).", NULL},
    {"sets", (getter)Tracker_get_sets, NULL, "The interned module sets: a list of sorted tuples, by id.", NULL},
    {"enabled", (getter)Tracker_get_enabled, NULL, "Whether the hooks act (False after close()).", NULL},
    {"fcm_log", (getter)Tracker_get_fcm_log, NULL,
     "[row, module id, ...]: rows credited to another module set than the tracker's (FlopCounterMode's) one.", NULL},
    {"unlinked_log", (getter)Tracker_get_unlinked_log, NULL,
     "Rows of backward ops whose node no forward module created (credited as the tracker's set says).", NULL},
    {"links_broken", (getter)Tracker_get_links_broken, NULL,
     "Whether autograd's sequence numbers went backwards (nodes of another thread): nothing is linked since.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot Tracker_slots[] = {
    {Py_tp_doc, "ModuleTracker(mode, stack_len, stack_at, flatten, grad_node, task_id, will_execute, on_reenter, "
                "tensor_type, param_type, known, seen): the set of running modules, torch ModuleTracker semantics."},
    {Py_tp_init, Tracker_init},
    {Py_tp_new, PyType_GenericNew},
    RL_GC_SLOTS(Tracker),
    {Py_tp_methods, Tracker_methods},
    {Py_tp_getset, Tracker_getset},
    {0, NULL},
};

RL_GC_TYPE_SPEC(Tracker, "roofline._core.ModuleTracker", 0);

/* ---- Dispatch ----------------------------------------------------------------------------------------------- */

typedef struct {
    PyObject *func;   /* the OpOverload (key, by identity; strong reference so the address is never reused) */
    PyObject *callee; /* what runs the op: func._op, or func itself; func.decompose for a decomposed op */
    PyObject *idx;    /* recorder op index (int); None for an op counted through its decomposition */
    int slow;         /* adopt declined the op: its calls take the slow path without asking again (callee, idx NULL) */
} op_slot;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    Tracker *tracker;
    PyObject *record;   /* the recorder's bound `record` */
    PyObject *task_id;  /* torch._C._current_graph_task_id */
    PyObject *slow;     /* slow(mode, func, types, args=(), kwargs=None) for ops not in the table */
    PyObject *phase;    /* None, or the phase every record gets (the optimizer step) */
    PyObject *push;     /* None, or push(mode): re-enters the mode around a decomposition (else mode.__enter__) */
    PyObject *pop;      /* None, or pop(None): leaves it again (else mode.__exit__) */
    PyObject *rows;     /* the recorder (its len() is the next row) or None: the rows logged by attribution */
    PyObject *adopt;    /* None, or adopt(func, args) -> op index or None, for an op not in the table (see adopt_op) */
    op_slot *tab;       /* open addressing, capacity a power of two, at most half full */
    Py_ssize_t cap, n, n_slow; /* slots in use; of them, the slow marks adopt_op left */
    rl_state *state;    /* the module's (interned __enter__ / __exit__) */
} Dispatch;

/* The objects a Dispatch holds besides its op table (its traverse and clear walk them). */
#define DISPATCH_OBJECTS(X) \
    X(tracker) X(record) X(task_id) X(slow) X(phase) X(push) X(pop) X(rows) X(adopt)

static int Dispatch_traverse(Dispatch *self, visitproc visit, void *arg) {
    Py_VISIT(Py_TYPE(self));
    DISPATCH_OBJECTS(RL_VISIT_MEMBER)
    for (Py_ssize_t i = 0; i < self->cap; i++) {
        Py_VISIT(self->tab[i].func);
        Py_VISIT(self->tab[i].callee);
        Py_VISIT(self->tab[i].idx);
    }
    return 0;
}

static void clear_table(Dispatch *self) {
    op_slot *tab = self->tab;
    Py_ssize_t cap = self->cap;
    self->tab = NULL;
    self->cap = self->n = self->n_slow = 0;
    for (Py_ssize_t i = 0; i < cap; i++) {
        Py_XDECREF(tab[i].func);
        Py_XDECREF(tab[i].callee);
        Py_XDECREF(tab[i].idx);
    }
    PyMem_Free(tab);
}

static int Dispatch_clear(Dispatch *self) {
    DISPATCH_OBJECTS(RL_CLEAR_MEMBER)
    clear_table(self);
    return 0;
}

static void Dispatch_dealloc(Dispatch *self) { rl_gc_dealloc((PyObject *)self); }

static inline size_t ptr_hash(const void *p) {
    uintptr_t x = (uintptr_t)p;
    x ^= x >> 17;
    x *= (uintptr_t)0xed5ad4bbU;
    x ^= x >> 11;
    return (size_t)x;
}

static op_slot *slot_for(Dispatch *self, PyObject *func);

static op_slot *find_slot(Dispatch *self, PyObject *func) {
    if (!self->cap) {
        return NULL;
    }
    size_t mask = (size_t)self->cap - 1;
    for (size_t i = ptr_hash(func) & mask;; i = (i + 1) & mask) {
        op_slot *s = &self->tab[i];
        if (s->func == func) {
            return s;
        }
        if (!s->func) {
            return NULL;
        }
    }
}

static int grow_table(Dispatch *self) {
    Py_ssize_t cap = self->cap ? self->cap * 2 : 64;
    op_slot *tab = PyMem_Calloc((size_t)cap, sizeof(op_slot));
    if (!tab) {
        PyErr_NoMemory();
        return -1;
    }
    size_t mask = (size_t)cap - 1;
    for (Py_ssize_t j = 0; j < self->cap; j++) {
        op_slot *s = &self->tab[j];
        if (!s->func) {
            continue;
        }
        size_t i = ptr_hash(s->func) & mask;
        while (tab[i].func) {
            i = (i + 1) & mask;
        }
        tab[i] = *s;
    }
    PyMem_Free(self->tab);
    self->tab = tab;
    self->cap = cap;
    return 0;
}

static int Dispatch_init(Dispatch *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"tracker", "record", "task_id", "slow", "push", "pop", "rows", "adopt", NULL};
    PyObject *tracker, *record, *task_id, *slow, *push = Py_None, *pop = Py_None;
    PyObject *rows = Py_None, *adopt = Py_None;
    PyTypeObject *ttype = tracker_type_of(PyType_GetModule(Py_TYPE(self)));
    if (!ttype) {
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!OOO|$OOOO:Dispatch", kwlist, ttype, &tracker, &record,
                                     &task_id, &slow, &push, &pop, &rows, &adopt)) {
        return -1;
    }
    if (((Tracker *)tracker)->seq_nr && rows == Py_None) {
        PyErr_SetString(PyExc_TypeError, "Dispatch: a tracker that links backward ops needs rows= (the recorder)");
        return -1;
    }
    if ((push == Py_None) != (pop == Py_None)) {
        PyErr_SetString(PyExc_TypeError, "Dispatch: push and pop are given together or not at all");
        return -1;
    }
    PyObject *callables[] = {record, task_id, slow, push, pop};
    static const char *names[] = {"record", "task_id", "slow", "push", "pop"};
    if (rl_require_callables("Dispatch", callables, names, push != Py_None ? 5 : 3) < 0) {
        return -1;
    }
    if (adopt != Py_None && !PyCallable_Check(adopt)) {
        PyErr_Format(PyExc_TypeError, "Dispatch: adopt must be None or callable, got %.100s", Py_TYPE(adopt)->tp_name);
        return -1;
    }
    if (self->tracker) {
        PyErr_SetString(PyExc_RuntimeError, "Dispatch: already initialised");
        return -1;
    }
    self->state = rl_state_of_type(Py_TYPE(self));
    if (!self->state) {
        return -1;
    }
    self->tracker = (Tracker *)Py_NewRef(tracker);
    self->phase = Py_NewRef(Py_None);
#define DISPATCH_ARGS(X) X(record) X(task_id) X(slow) X(push) X(pop) X(rows) X(adopt)
    DISPATCH_ARGS(RL_TAKE_MEMBER)
#undef DISPATCH_ARGS
    return 0;
}

/* Re-entering the mode around a decomposition: mode.__enter__() / mode.__exit__(et, ev, tb), or, where the
 * session passed them, push(mode) / pop(None): torch's own stack calls, which are what TorchDispatchMode.__enter__
 * and __exit__ make for a mode without a dispatch key (pop's None: no mode key), without their Python frames. The
 * session passes them only for a mode that does not override those methods; a test pins what they do. */
static PyObject *enter_mode(Dispatch *self, PyObject **margs) {
    if (self->push != Py_None) {
        return PyObject_CallOneArg(self->push, margs[0]);
    }
    return PyObject_VectorcallMethod(self->state->s_enter, margs, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

static PyObject *exit_mode(Dispatch *self, PyObject **margs) {
    if (self->pop != Py_None) {
        return PyObject_CallOneArg(self->pop, Py_None);
    }
    return PyObject_VectorcallMethod(self->state->s_exit, margs, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* `with mode: return decompose(*args, **kwargs)`: an op counted through its decomposition (FlopCounterMode's rule
 * for ops with a CompositeImplicitAutograd kernel), its parts reaching the mode again. As the with statement does,
 * __exit__ runs whether the call raised or not and is given the exception; the call's exception propagates unless
 * __exit__ raises one of its own, which then propagates with the call's as its __context__ (a dispatch mode's
 * __exit__ never suppresses an exception). */
static PyObject *run_decomposed(Dispatch *self, PyObject *mode, PyObject *decompose, PyObject *args,
                                PyObject *kwargs) {
    PyObject *margs[4] = {mode, Py_None, Py_None, Py_None};
    PyObject *r = enter_mode(self, margs);
    if (!r) {
        return NULL;
    }
    Py_DECREF(r);
    PyObject *out = PyObject_Call(decompose, args, kwargs);
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc = out ? NULL : PyErr_GetRaisedException();
    PyObject *tb = exc ? PyException_GetTraceback(exc) : NULL;
    if (exc) {
        margs[1] = (PyObject *)Py_TYPE(exc);
        margs[2] = exc;
        margs[3] = tb ? tb : Py_None;
    }
    r = exit_mode(self, margs);
    Py_XDECREF(tb);
    if (!r) {
        Py_XDECREF(out);
        if (exc) {
            PyObject *nexc = PyErr_GetRaisedException();
            if (nexc != exc) {
                PyException_SetContext(nexc, exc); /* steals exc */
            } else {
                Py_DECREF(exc);
            }
            PyErr_SetRaisedException(nexc);
        }
        return NULL;
    }
    Py_DECREF(r);
    if (exc) {
        PyErr_SetRaisedException(exc);
    }
#else
    PyObject *et = NULL, *ev = NULL, *tb = NULL;
    if (!out) {
        PyErr_Fetch(&et, &ev, &tb);
        PyErr_NormalizeException(&et, &ev, &tb);
        if (tb && ev) {
            PyException_SetTraceback(ev, tb);
        }
        margs[1] = et ? et : Py_None;
        margs[2] = ev ? ev : Py_None;
        margs[3] = tb ? tb : Py_None;
    }
    r = exit_mode(self, margs);
    if (!r) {
        Py_XDECREF(out);
        if (ev) {
            PyObject *nt, *nv, *ntb;
            PyErr_Fetch(&nt, &nv, &ntb);
            PyErr_NormalizeException(&nt, &nv, &ntb);
            if (nv && nv != ev) {
                if (ntb) {
                    PyException_SetTraceback(nv, ntb);
                }
                PyException_SetContext(nv, ev); /* steals ev */
                ev = NULL;
            }
            PyErr_Restore(nt, nv, ntb);
        }
        Py_XDECREF(et);
        Py_XDECREF(ev);
        Py_XDECREF(tb);
        return NULL;
    }
    Py_DECREF(r);
    if (!out) {
        PyErr_Restore(et, ev, tb);
    }
#endif
    return out;
}

/* A call of an op the table lacks (its first in this block): adopt(func, args) adds an op that an earlier block
 * resolved to a C kind to the table and the session's op list, so that this call too takes the C path instead of
 * the Python one (whose frames cost several times a recorded call); None leaves it to the slow path, and the op is
 * marked so that adopt is not asked again (the slow path's set_op or set_decomposed replaces the mark). The op's
 * slot, or NULL (with an exception set when adopt raised or the mark could not be made). */
static op_slot *adopt_op(Dispatch *self, PyObject *func, PyObject *args) {
    if (self->adopt == Py_None) {
        return NULL;
    }
    PyObject *a[2] = {func, args ? args : Py_None};
    PyObject *r = PyObject_Vectorcall(self->adopt, a, 2, NULL);
    if (!r) {
        return NULL;
    }
    int took = r != Py_None;
    Py_DECREF(r);
    op_slot *s = find_slot(self, func);
    if (took || s) { /* adopted, or put in the table meanwhile */
        return s && !s->slow ? s : NULL;
    }
    if ((s = slot_for(self, func))) {
        s->slow = 1;
        self->n_slow++;
    }
    return NULL;
}

/* The graph task id of the op being recorded (-1: no backward runs). After a backward op the node it runs in is
 * asked first (env_node takes it): a node runs only in a backward, and then the task need not be asked. 0 or -1. */
static int op_task(Dispatch *self, Tracker *tr, long *task) {
    if (tr->seq_nr && tr->last_backward) {
        PyObject *node = PyObject_CallNoArgs(tr->cur_node);
        if (!node) {
            return -1;
        }
        Py_XSETREF(tr->next_node, node);
        if (node != Py_None) {
            *task = 0; /* in a backward: any id but -1 */
            return 0;
        }
    }
    PyObject *tid = PyObject_CallNoArgs(self->task_id);
    if (!tid) {
        return -1;
    }
    *task = PyLong_AsLong(tid);
    Py_DECREF(tid);
    if (*task == -1 && PyErr_Occurred()) {
        return -1;
    }
    tr->last_backward = *task != -1;
    return 0;
}

/* __call__(mode, func, types, args=(), kwargs=None): bound to the mode, it is the mode's __torch_dispatch__. */
static PyObject *Dispatch_call(Dispatch *self, PyObject *const *argv, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (!self->tracker) {
        PyErr_SetString(PyExc_RuntimeError, "Dispatch: not initialised");
        return NULL;
    }
    if (kwnames || nargs < 3 || nargs > 5) {
        goto slow;
    }
    /* tensor subclasses among the arguments (DTensor, FakeTensor, ...): the Python path decides how they count.
     * torch.Tensor itself is no subclass: torch lists it in some calls made from C++ (the detach inside the CPU
     * scaled_dot_product_attention, for one), which the Python path counts as it counts calls without types. */
    if (!PyTuple_Check(argv[2])) {
        goto slow;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(argv[2]); i++) {
        if (PyTuple_GET_ITEM(argv[2], i) != self->tracker->tensor_type) {
            goto slow;
        }
    }
    PyObject *args = nargs > 3 ? argv[3] : NULL;
    PyObject *kwargs = nargs > 4 ? argv[4] : Py_None;
    if ((args && !PyTuple_CheckExact(args)) || (kwargs != Py_None && !PyDict_CheckExact(kwargs))) {
        goto slow;
    }
    op_slot *s = find_slot(self, argv[1]);
    if (s && s->slow) {
        goto slow;
    }
    if (!s && !(s = adopt_op(self, argv[1], args))) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        goto slow;
    }
    PyObject *empty = NULL;
    if (!args) {
        args = empty = PyTuple_New(0);
        if (!empty) {
            return NULL;
        }
    }
    /* own references: the table may grow, or the op be re-registered, while the op runs */
    PyObject *op_idx = Py_NewRef(s->idx);
    PyObject *callee = Py_NewRef(s->callee);
    PyObject *kw = (kwargs != Py_None && PyDict_GET_SIZE(kwargs)) ? kwargs : NULL;
    if (op_idx == Py_None) { /* counted through its decomposition: its parts are recorded, not the op */
        PyObject *out = run_decomposed(self, argv[0], callee, args, kw);
        Py_DECREF(callee);
        Py_DECREF(op_idx);
        if (out == Py_NotImplemented) { /* no decomposition after all: the slow path decides how to count it */
            Py_DECREF(out);
            Py_XDECREF(empty);
            goto slow;
        }
        Py_XDECREF(empty);
        return out;
    }
    PyObject *out = PyObject_Call(callee, args, kw);
    Py_DECREF(callee);
    PyObject *phase = NULL, *r = NULL;
    if (!out) {
        goto done;
    }
    Tracker *tr = self->tracker;
    attribution a = {RL_PHASE_FORWARD, NULL, NULL, 0};
    if (!tr->parents) {
        PyErr_SetString(PyExc_RuntimeError, "Dispatch: the module tracker is closed");
        goto done;
    }
    if (self->phase != Py_None) {
        phase = Py_NewRef(self->phase);
        a.mid = tracker_module_id(tr);
        if (!a.mid) {
            goto done;
        }
        Py_INCREF(a.mid);
    } else {
        long v;
        int rc = op_task(self, tr, &v) < 0 ? -1 : attribute(tr, v, &a);
        Py_CLEAR(tr->next_node);
        if (rc < 0) {
            goto done;
        }
        phase = PyLong_FromLong(a.phase);
        if (!phase) {
            attribution_clear(&a);
            goto done;
        }
    }
    Py_ssize_t row = (a.fcm || a.unlinked) ? PyObject_Length(self->rows) : 0;
    if (row < 0) {
        attribution_clear(&a);
        goto done;
    }
    PyObject *rargs[6] = {op_idx, a.mid, phase, args, kwargs, out};
    r = PyObject_Vectorcall(self->record, rargs, 6, NULL);
    if (r && attribution_log(tr, &a, row) < 0) {
        Py_CLEAR(r);
    }
    attribution_clear(&a);
done:
    Py_XDECREF(phase);
    Py_DECREF(op_idx);
    Py_XDECREF(empty);
    if (!r) {
        Py_XDECREF(out);
        return NULL;
    }
    Py_DECREF(r);
    return out;
slow:
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "Dispatch: call it bound to the mode: (mode, func, types, args, kwargs)");
        return NULL;
    }
    return PyObject_Vectorcall(self->slow, argv, (size_t)nargs, kwnames); /* slow(mode, func, types, ...) */
}

/* `func`'s slot, made (empty) where it has none; NULL with MemoryError. */
static op_slot *slot_for(Dispatch *self, PyObject *func) {
    op_slot *s = find_slot(self, func);
    if (s) {
        return s;
    }
    if ((self->n + 1) * 2 > self->cap && grow_table(self) < 0) {
        return NULL;
    }
    size_t mask = (size_t)self->cap - 1;
    size_t i = ptr_hash(func) & mask;
    while (self->tab[i].func) {
        i = (i + 1) & mask;
    }
    s = &self->tab[i];
    s->func = Py_NewRef(func);
    self->n++;
    return s;
}

/* Put `func` in the table: its calls run `callee` and are recorded as op `idx`, or (idx None) run
 * `callee` = func.decompose inside the mode. */
static PyObject *put_op(Dispatch *self, const char *what, PyObject *func, PyObject *idx, PyObject *callee) {
    if (!PyCallable_Check(callee)) {
        return PyErr_Format(PyExc_TypeError, "Dispatch.%s: callee must be callable, got %.100s", what,
                            Py_TYPE(callee)->tp_name);
    }
    op_slot *s = slot_for(self, func);
    if (!s) {
        return NULL;
    }
    if (s->slow) {
        s->slow = 0;
        self->n_slow--;
    }
    Py_XSETREF(s->callee, Py_NewRef(callee));
    Py_XSETREF(s->idx, Py_NewRef(idx));
    Py_RETURN_NONE;
}

/* set_op(func, idx, callee): calls of `func` take the fast path from now on. */
static PyObject *Dispatch_set_op(Dispatch *self, PyObject *args) {
    PyObject *func, *idx, *callee;
    if (!PyArg_ParseTuple(args, "OO!O:set_op", &func, &PyLong_Type, &idx, &callee)) {
        return NULL;
    }
    if (PyLong_AsSsize_t(idx) < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "Dispatch.set_op: idx must be >= 0");
        }
        return NULL;
    }
    return put_op(self, "set_op", func, idx, callee);
}

/* set_decomposed(func, decompose): calls of `func` run `decompose` (func.decompose) inside the mode, in C, from
 * now on; a call it answers NotImplemented takes the slow path. */
static PyObject *Dispatch_set_decomposed(Dispatch *self, PyObject *args) {
    PyObject *func, *decompose;
    if (!PyArg_ParseTuple(args, "OO:set_decomposed", &func, &decompose)) {
        return NULL;
    }
    return put_op(self, "set_decomposed", func, Py_None, decompose);
}

static PyObject *Dispatch_clear_ops(Dispatch *self, PyObject *Py_UNUSED(ignored)) {
    clear_table(self);
    Py_RETURN_NONE;
}

static PyObject *Dispatch_get_phase(Dispatch *self, void *Py_UNUSED(c)) {
    return Py_NewRef(self->phase ? self->phase : Py_None);
}

static int Dispatch_set_phase(Dispatch *self, PyObject *value, void *Py_UNUSED(c)) {
    if (!value || (value != Py_None && !PyLong_CheckExact(value))) {
        PyErr_SetString(PyExc_TypeError, "Dispatch.phase must be None or an int");
        return -1;
    }
    Py_XSETREF(self->phase, Py_NewRef(value));
    return 0;
}

static PyObject *Dispatch_len(Dispatch *self, void *Py_UNUSED(c)) {
    return PyLong_FromSsize_t(self->n - self->n_slow);
}

static PyMethodDef Dispatch_methods[] = {
    {"set_op", (PyCFunction)Dispatch_set_op, METH_VARARGS,
     "set_op(func, idx, callee): calls of func run callee and are recorded as recorder op idx, in C."},
    {"set_decomposed", (PyCFunction)Dispatch_set_decomposed, METH_VARARGS,
     "set_decomposed(func, decompose): calls of func run decompose(*args, **kwargs) with the mode re-entered (its "
     "parts are recorded), in C; NotImplemented from it sends the call to the slow path."},
    {"clear_ops", (PyCFunction)Dispatch_clear_ops, METH_NOARGS, "Forget every op (all calls take the slow path)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Dispatch_getset[] = {
    {"phase", (getter)Dispatch_get_phase, (setter)Dispatch_set_phase,
     "None (forward/backward from autograd's graph task) or the phase of every record.", NULL},
    {"n_ops", (getter)Dispatch_len, NULL, "Number of ops on the fast path.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyObject *Dispatch_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    Dispatch *self = (Dispatch *)PyType_GenericNew(type, args, kwds);
    if (self) {
        self->vectorcall = (vectorcallfunc)Dispatch_call;
    }
    return (PyObject *)self;
}

static PyMemberDef Dispatch_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Dispatch, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot Dispatch_slots[] = {
    {Py_tp_doc, "Dispatch(tracker, record, task_id, slow, forward, backward, *, push=None, pop=None): the per-op "
                "path of the dispatch mode; call it bound to the mode: (mode, func, types, args=(), kwargs=None). "
                "push(mode) and pop(None), given together, re-enter the mode around a decomposition instead of its "
                "__enter__ and __exit__."},
    {Py_tp_init, Dispatch_init},
    {Py_tp_new, Dispatch_new},
    {Py_tp_call, PyVectorcall_Call},
    RL_GC_SLOTS(Dispatch),
    {Py_tp_methods, Dispatch_methods},
    {Py_tp_getset, Dispatch_getset},
    {Py_tp_members, Dispatch_members},
    {0, NULL},
};

RL_GC_TYPE_SPEC(Dispatch, "roofline._core.Dispatch", Py_TPFLAGS_HAVE_VECTORCALL);

/* ---- Block ------------------------------------------------------------------------------------------------ */

/* A measure block is entered and left by Python steps (the subclass's methods below), but its __enter__ and
 * __exit__ are these C functions, so that an asynchronous exception (KeyboardInterrupt from Ctrl-C, SystemExit or
 * any exception a signal handler raises, PyThreadState_SetAsyncExc) can never leave it half entered or half left:
 * CPython raises such an exception only while Python bytecode runs, and between the steps, and between the last
 * step and the return to the with statement, only C runs here.
 *
 * The steps (methods of the subclass):
 *   _prepare()          outside the lock, before anything global is installed (argument state, the clock's sync);
 *   _enter()            under the lock: installs everything, returns what the with statement binds;
 *   _abort()            under the lock, when _enter raised: undoes whatever _enter had done, wherever it stopped;
 *   _closing(et, ev, tb) outside the lock, at exit, the block's modes still in place;
 *   _unwind()           under the lock: removes everything the block installed;
 *   _finish(et, ev, tb) outside the lock, everything removed: builds the result; its return value is __exit__'s;
 *   _misuse(what)       raises the error for __enter__ of a block already entered, __exit__ of one not open;
 *   _refused()          instead of all the above, for a block entered while this thread is inside a step under the
 *                       lock (a signal handler, a finaliser or a callback run in the middle of another block's entry
 *                       or exit): it installs nothing, returns what the with statement binds, and
 *   _finish_refused(et, ev, tb) is its __exit__'s result. The other block's step goes on undisturbed: nothing of its
 *                       half-made state is read or changed, and nothing is raised into it.
 * _abort, _closing and _unwind must be idempotent and finish from any partial state (each undo looks at what is
 * there): an exception raised inside one (an interrupt can land on any line of it) is kept and the step called
 * again, up to BLOCK_TRIES times in all; once the step has completed, the first exception is raised (after _unwind,
 * instead of calling _finish; after _abort, chained to the one that stopped the entry). A step that never completes raises its
 * last exception. Every sub-step of a step runs even when an earlier one raises, so an error of the code itself
 * costs the repeats, not the release.
 *
 * The lock is one process-wide recursive lock: blocks of different threads enter and leave one at a time, so the
 * steps update process-global state (torch's global hook tables, the reference counts of what blocks share)
 * without locks of their own (a Python lock could be left held by an exception landing at its release). A thread
 * waiting for it releases the GIL. The per-op path never takes it. While the interpreter is finalizing, a block
 * waits for it a bounded time, then goes on without it (block_acquire). */

enum { BLOCK_NEW, BLOCK_ENTERING, BLOCK_OPEN, BLOCK_LEAVING, BLOCK_LEFT, BLOCK_FAILED, BLOCK_REFUSED };
#define BLOCK_TRIES 16

typedef struct {
    PyObject_HEAD
    int phase;
} Block;

static PyThread_type_lock block_lock; /* created once, by the first exec of the module */
static unsigned long block_owner;      /* the thread holding it (valid while block_depth > 0) */
static int block_depth;                /* its recursion depth; read and written with the GIL held */
/* 1 while the step under the lock is one of a block whose class sets _nests true (a step loop, whose _enter opens
 * the measure block of its first step): a block entered then nests; 0 inside any other block's step under the lock,
 * where an entry is refused (see _refused). Saved and restored around each step. */
static int block_nests;

static int block_abandoned;            /* a finalizing thread gave up waiting for it: later ones do not wait */

/* Whether the interpreter is shutting down: daemon threads are then frozen when they next take the GIL, and one
 * holding the lock never releases it. */
static int block_finalizing(void) {
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing();
#else
    return _Py_IsFinalizing();
#endif
}

/* Take the lock (recursively). 1 when this thread holds it, 0 when it goes on without it: while the interpreter is
 * finalizing, a lock held by another thread (a daemon thread, frozen) is waited for BLOCK_FINAL_WAIT_US at most, and
 * not at all once such a wait has timed out; with nothing else left running, the steps are safe without it. Pass the
 * result to block_release. */
#define BLOCK_FINAL_WAIT_US 1000000
static int block_acquire(void) {
    unsigned long me = PyThread_get_thread_ident();
    if (block_depth > 0 && block_owner == me) {
        block_depth++;
        return 1;
    }
    if (!PyThread_acquire_lock(block_lock, NOWAIT_LOCK)) {
        PyLockStatus got;
        if (block_finalizing()) {
            if (block_abandoned) {
                return 0;
            }
            Py_BEGIN_ALLOW_THREADS
            got = PyThread_acquire_lock_timed(block_lock, BLOCK_FINAL_WAIT_US, 0);
            Py_END_ALLOW_THREADS
            if (got != PY_LOCK_ACQUIRED) {
                block_abandoned = 1;
                return 0;
            }
        } else {
            Py_BEGIN_ALLOW_THREADS
            PyThread_acquire_lock(block_lock, WAIT_LOCK);
            Py_END_ALLOW_THREADS
        }
    }
    block_owner = me;
    block_depth = 1;
    return 1;
}

static void block_release(int held) {
    if (held && block_depth > 0 && --block_depth == 0) {
        block_owner = 0;
        PyThread_release_lock(block_lock);
    }
}

#ifndef _WIN32
/* In a child process (a DataLoader worker forked while another thread was entering or leaving a block), only the
 * forking thread exists: a lock held by another thread would never be released. The child starts with a free one
 * (the old one is left allocated: it may be held). */
static void block_after_fork_child(void) {
    PyThread_type_lock fresh = PyThread_allocate_lock();
    if (fresh) {
        block_lock = fresh;
    }
    block_owner = 0;
    block_depth = 0;
}
#endif

/* The exception being raised, as one object (its traceback attached), taken out of the thread state; NULL if none. */
static PyObject *take_exception(void) {
#if PY_VERSION_HEX >= 0x030C0000
    return PyErr_GetRaisedException();
#else
    PyObject *et = NULL, *ev = NULL, *tb = NULL;
    PyErr_Fetch(&et, &ev, &tb);
    if (!et) {
        return NULL;
    }
    PyErr_NormalizeException(&et, &ev, &tb);
    if (tb && ev) {
        PyException_SetTraceback(ev, tb);
    }
    Py_XDECREF(et);
    Py_XDECREF(tb);
    return ev;
#endif
}

/* Raise `exc` (stolen). */
static void raise_exception(PyObject *exc) {
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(exc);
#else
    PyErr_Restore(Py_NewRef((PyObject *)Py_TYPE(exc)), exc, PyException_GetTraceback(exc));
#endif
}

/* `later` (stolen) with `earlier` (stolen) as its __context__ (either may be NULL): the exception to raise. */
static PyObject *chain_exceptions(PyObject *earlier, PyObject *later) {
    if (!later) {
        return earlier;
    }
    if (earlier && earlier != later) {
        PyException_SetContext(later, earlier); /* steals earlier */
    } else {
        Py_XDECREF(earlier);
    }
    return later;
}

/* self.<name>(*args) (args a tuple, or NULL for none) until it returns normally (at most BLOCK_TRIES calls). The
 * first exception it raised is kept in *pending (a new reference; later ones are dropped). 0 once it has returned,
 * or -1 with its last exception set (*pending, if set, is then its __context__ and NULL). */
static int call_until_done(PyObject *self, const char *name, PyObject *args, PyObject **pending) {
    for (int i = 0;; i++) {
        PyObject *r = NULL, *method = PyObject_GetAttrString(self, name);
        if (method) {
            r = args ? PyObject_Call(method, args, NULL) : PyObject_CallNoArgs(method);
            Py_DECREF(method);
        }
        if (r) {
            Py_DECREF(r);
            return 0;
        }
        PyObject *exc = take_exception();
        if (!exc) {
            PyErr_SetString(PyExc_SystemError, "a block step failed without an exception");
            exc = take_exception();
        }
        if (i + 1 >= BLOCK_TRIES) {
            raise_exception(chain_exceptions(*pending, exc));
            *pending = NULL;
            return -1;
        }
        if (*pending) {
            Py_DECREF(exc);
        } else {
            *pending = exc;
        }
    }
}

static PyObject *block_misuse(Block *self, const char *what) {
    PyObject *r = PyObject_CallMethod((PyObject *)self, "_misuse", "s", what);
    if (r) {
        Py_DECREF(r);
        PyErr_Format(PyExc_RuntimeError, "%s.%s: the block is not in a state for it", Py_TYPE(self)->tp_name, what);
    }
    return NULL;
}

static PyObject *Block_enter(Block *self, PyObject *Py_UNUSED(ignored)) {
    if (self->phase != BLOCK_NEW) {
        return block_misuse(self, "__enter__");
    }
    if (block_depth > 0 && block_owner == PyThread_get_thread_ident() && !block_nests) {
        /* this thread is inside another block's step under the lock: this code runs in the middle of it */
        PyObject *r = PyObject_CallMethod((PyObject *)self, "_refused", NULL);
        self->phase = r ? BLOCK_REFUSED : BLOCK_FAILED;
        return r;
    }
    self->phase = BLOCK_ENTERING;
    PyObject *r = PyObject_CallMethod((PyObject *)self, "_prepare", NULL);
    if (!r) {
        self->phase = BLOCK_FAILED;
        return NULL;
    }
    Py_DECREF(r);
    int held = block_acquire();
    int nests_saved = block_nests;
    PyObject *nests = PyObject_GetAttrString((PyObject *)Py_TYPE(self), "_nests");
    block_nests = nests ? PyObject_IsTrue(nests) == 1 : 0;
    Py_XDECREF(nests);
    PyErr_Clear();
    r = PyObject_CallMethod((PyObject *)self, "_enter", NULL);
    if (r) {
        block_nests = nests_saved;
        self->phase = BLOCK_OPEN;
        block_release(held);
        return r;
    }
    PyObject *exc = take_exception(), *pending = NULL;
    if (!exc) {
        PyErr_SetString(PyExc_SystemError, "_enter failed without an exception");
        exc = take_exception();
    }
    int rc = call_until_done((PyObject *)self, "_abort", NULL, &pending);
    block_nests = nests_saved;
    self->phase = BLOCK_FAILED;
    block_release(held);
    /* the exception that stopped the entry, with what interrupted the undo as its successor */
    exc = chain_exceptions(exc, pending);
    raise_exception(rc < 0 ? chain_exceptions(exc, take_exception()) : exc);
    return NULL;
}

static PyObject *Block_exit(Block *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "__exit__ takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    if (self->phase == BLOCK_REFUSED) {
        self->phase = BLOCK_LEFT;
        return PyObject_CallMethod((PyObject *)self, "_finish_refused", "OOO", args[0], args[1], args[2]);
    }
    if (self->phase != BLOCK_OPEN) {
        return block_misuse(self, "__exit__");
    }
    self->phase = BLOCK_LEAVING;
    PyObject *raised = NULL; /* what __exit__ raises instead of finishing: the last error, earlier ones chained */
    /* _closing is idempotent too, and repeated like the undo steps: an interrupt landing in it before it has closed
     * what the block's exception cut off would leave a mode to be pushed back after the block has exited */
    PyObject *closing_args = PyTuple_Pack(3, args[0], args[1], args[2]);
    if (!closing_args || call_until_done((PyObject *)self, "_closing", closing_args, &raised) < 0) {
        raised = chain_exceptions(raised, take_exception());
    }
    Py_XDECREF(closing_args);
    PyObject *pending = NULL;
    int held = block_acquire();
    int rc = call_until_done((PyObject *)self, "_unwind", NULL, &pending);
    self->phase = BLOCK_LEFT;
    block_release(held);
    raised = chain_exceptions(raised, pending);
    if (rc < 0) {
        raised = chain_exceptions(raised, take_exception());
    }
    if (raised) {
        raise_exception(raised);
        return NULL;
    }
    return PyObject_CallMethod((PyObject *)self, "_finish", "OOO", args[0], args[1], args[2]);
}

static PyMethodDef Block_methods[] = {
    {"__enter__", (PyCFunction)Block_enter, METH_NOARGS,
     "Run _prepare(), then _enter() under the block lock; if _enter raises, _abort() (repeated while it raises) "
     "before the exception propagates."},
    {"__exit__", (PyCFunction)(void (*)(void))Block_exit, METH_FASTCALL,
     "Run _closing(exc_type, exc, tb), then _unwind() under the block lock (repeated while it raises), then return "
     "_finish(exc_type, exc, tb); an exception raised on the way is raised once everything is unwound, instead of "
     "_finish."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot Block_slots[] = {
    {Py_tp_doc, "Block(): base of a context manager entered and left by Python steps that no asynchronous "
                "exception can cut in half (see csrc/binding_track.c). Each instance is entered once."},
    {Py_tp_methods, Block_methods},
    {0, NULL},
};

static PyType_Spec Block_spec = {
    .name = "roofline._core.Block",
    .basicsize = sizeof(Block),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .slots = Block_slots,
};

/* remove_mode(mode, length, at, pop, push, log): take `mode` off one of this thread's mode stacks in one step no
 * asynchronous exception can cut (no Python frame runs, given C callables): length() its size, at(i) its entry i
 * (0 at the bottom), pop() takes the top entry off, push(m) puts m on top (torch's functions for the dispatch or the
 * function mode stack; _pop_torch_dispatch_stack bound to None). The modes above it are popped and pushed back in
 * their order. When the mode was on the stack, the tuple of the modes that were
 * above it (bottom first; () when it was on top) is appended to the list `log` before returning. True when the mode
 * was removed, False when it was not on the stack. */
static PyObject *remove_mode(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6 || !PyList_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError, "remove_mode(mode, length, at, pop, push, log): log must be a list");
        return NULL;
    }
    PyObject *mode = args[0], *at = args[2], *pop = args[3], *push = args[4];
    PyObject *n_obj = PyObject_CallNoArgs(args[1]);
    Py_ssize_t n = n_obj ? PyLong_AsSsize_t(n_obj) : -1;
    Py_XDECREF(n_obj);
    if (n == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t i = n - 1;
    for (; i >= 0; i--) { /* the mode is usually on top */
        PyObject *idx = PyLong_FromSsize_t(i);
        PyObject *m = idx ? PyObject_CallOneArg(at, idx) : NULL;
        Py_XDECREF(idx);
        if (!m) {
            return NULL;
        }
        Py_DECREF(m); /* the stack keeps it alive */
        if (m == mode) {
            break;
        }
    }
    if (i < 0) {
        Py_RETURN_FALSE;
    }
    Py_ssize_t k = n - 1 - i; /* modes above it */
    PyObject *above = PyTuple_New(k);
    if (!above) {
        return NULL;
    }
    Py_ssize_t popped = 0; /* above[k - popped:] are off the stack */
    PyObject *m = NULL;
    while (popped <= k) {
        m = PyObject_CallNoArgs(pop);
        if (!m) {
            break;
        }
        if (popped == k) {
            break; /* the mode itself */
        }
        PyTuple_SET_ITEM(above, k - 1 - popped, m);
        popped++;
        m = NULL;
    }
    int ok = m == mode;
    if (m && !ok) {
        PyErr_SetString(PyExc_RuntimeError, "remove_mode: the dispatch mode stack changed while it was read");
        PyObject *exc = take_exception();
        PyObject *r = PyObject_CallOneArg(push, m); /* put back what was popped in its place */
        Py_XDECREF(r);
        PyErr_Clear();
        raise_exception(exc);
    }
    Py_XDECREF(m);
    PyObject *exc = ok ? NULL : take_exception();
    for (Py_ssize_t j = k - popped; j < k; j++) { /* the modes above it, back in their order */
        PyObject *r = PyObject_CallOneArg(push, PyTuple_GET_ITEM(above, j));
        if (!r) {
            exc = chain_exceptions(exc, take_exception());
        }
        Py_XDECREF(r);
    }
    if (ok && PyList_Append(args[5], above) < 0) {
        exc = chain_exceptions(exc, take_exception());
    }
    Py_DECREF(above);
    if (exc) {
        raise_exception(exc);
        return NULL;
    }
    if (!ok) { /* pop failed with nothing set: cannot happen, but never return NULL without an exception */
        PyErr_SetString(PyExc_RuntimeError, "remove_mode: torch's pop failed");
        return NULL;
    }
    Py_RETURN_TRUE;
}

/* call_alone(mode, fn, arg, length, pop, push): fn(arg) with `mode` alone on this thread's dispatch mode stack
 * (length, pop, push: as for remove_mode). Every mode is popped, `mode` pushed, fn called, and whatever is then on
 * the stack popped and the saved modes pushed back in their order, whatever fn raises. The stack changes are C
 * calls only, so an asynchronous exception can land in fn alone, never between them. Returns fn(arg). */
static PyObject *call_alone(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "call_alone(mode, fn, arg, length, pop, push)");
        return NULL;
    }
    PyObject *mode = args[0], *fn = args[1], *length = args[3], *pop = args[4], *push = args[5];
    PyObject *n_obj = PyObject_CallNoArgs(length);
    Py_ssize_t n = n_obj ? PyLong_AsSsize_t(n_obj) : -1;
    Py_XDECREF(n_obj);
    if (n == -1 && PyErr_Occurred()) {
        return NULL;
    }
    PyObject *saved = PyTuple_New(n); /* bottom first */
    if (!saved) {
        return NULL;
    }
    Py_ssize_t popped = 0;
    PyObject *out = NULL, *exc = NULL;
    for (; popped < n; popped++) {
        PyObject *m = PyObject_CallNoArgs(pop);
        if (!m) {
            break;
        }
        PyTuple_SET_ITEM(saved, n - 1 - popped, m);
    }
    int pushed = 0;
    if (popped == n) {
        PyObject *r = PyObject_CallOneArg(push, mode);
        pushed = r != NULL;
        Py_XDECREF(r);
        if (pushed) {
            out = PyObject_CallOneArg(fn, args[2]);
        }
    }
    exc = out ? NULL : take_exception();
    for (;;) { /* take off what is there now: the mode (and anything fn left) */
        PyObject *k_obj = PyObject_CallNoArgs(length);
        Py_ssize_t k = k_obj ? PyLong_AsSsize_t(k_obj) : -1;
        Py_XDECREF(k_obj);
        if (k <= 0 || popped < n) { /* a failed pop above: the stack holds the modes not yet popped */
            if (k < 0) {
                exc = chain_exceptions(exc, take_exception());
            }
            break;
        }
        PyObject *m = PyObject_CallNoArgs(pop);
        if (!m) {
            exc = chain_exceptions(exc, take_exception());
            break;
        }
        Py_DECREF(m);
    }
    for (Py_ssize_t j = n - popped; j < n; j++) {
        PyObject *r = PyObject_CallOneArg(push, PyTuple_GET_ITEM(saved, j));
        if (!r) {
            exc = chain_exceptions(exc, take_exception());
        }
        Py_XDECREF(r);
    }
    Py_DECREF(saved);
    if (exc) {
        Py_XDECREF(out);
        raise_exception(exc);
        return NULL;
    }
    return out;
}

/* ---- module ------------------------------------------------------------------------------------------------- */

static PyTypeObject *tracker_type_of(PyObject *module) {
    if (!module) {
        return NULL;
    }
    PyObject *tp = PyObject_GetAttrString(module, "ModuleTracker");
    if (!tp) {
        return NULL;
    }
    if (!PyType_Check(tp)) {
        Py_DECREF(tp);
        PyErr_SetString(PyExc_TypeError, "roofline._core.ModuleTracker is not a type");
        return NULL;
    }
    Py_DECREF(tp); /* the module keeps it alive */
    return (PyTypeObject *)tp;
}

/* The GradGate type of the module that made `tracker_type` (a new reference), or NULL with an exception. */
static PyObject *gate_type_of(PyTypeObject *tracker_type) {
    PyObject *module = rl_module_of_type(tracker_type);
    return module ? PyObject_GetAttrString(module, "GradGate") : NULL;
}

PyMethodDef rl_track_methods[] = {
    {"remove_mode", (PyCFunction)(void (*)(void))remove_mode, METH_FASTCALL,
     "remove_mode(mode, length, at, pop, push, log): take mode off one of this thread's mode stacks in one step (the "
     "modes above it are pushed back); appends the tuple of those modes to log. True if it was on the stack."},
    {"call_alone", (PyCFunction)(void (*)(void))call_alone, METH_FASTCALL,
     "call_alone(mode, fn, arg, length, pop, push): fn(arg) with mode alone on this thread's dispatch mode stack; the "
     "stack is put back whatever fn raises."},
    {NULL, NULL, 0, NULL},
};

int rl_track_exec(PyObject *module) {
    if (!block_lock) {
        if (!(block_lock = PyThread_allocate_lock())) {
            PyErr_NoMemory();
            return -1;
        }
#ifndef _WIN32
        if (pthread_atfork(NULL, NULL, block_after_fork_child) != 0) {
            PyErr_SetString(PyExc_RuntimeError, "roofline._core: pthread_atfork failed");
            return -1;
        }
#endif
    }
    PyType_Spec *specs[] = {&GradGate_spec, &Tracker_spec, &Dispatch_spec, &Block_spec};
    const char *names[] = {"GradGate", "ModuleTracker", "Dispatch", "Block"};
    for (int i = 0; i < 4; i++) {
        PyObject *tp = PyType_FromModuleAndSpec(module, specs[i], NULL);
        if (!tp) {
            return -1;
        }
        int rc = PyModule_AddObjectRef(module, names[i], tp);
        Py_DECREF(tp);
        if (rc < 0) {
            return -1;
        }
    }
    return 0;
}
