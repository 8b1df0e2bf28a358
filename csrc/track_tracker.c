/* The per-module hot path of roofline.measure: `ModuleTracker`.
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
 * of names (`sets`). */
#include "track.h"

#include "structmember.h"

#include "record.h"

/* ---- ModuleTracker ------------------------------------------------------------------------------------------ */

/* The objects a Tracker holds (its traverse and clear walk them). */
#define TRACKER_OBJECTS(X)                                                                                         \
    X(mode) X(stack_len) X(stack_at) X(flatten) X(grad_node) X(task_id) X(will_execute) X(on_reenter) X(gate_type) \
    X(hooks) X(tensor_type) X(param_type) X(known) X(seen) X(parents) X(ids) X(sets) X(module_id) X(s_global)     \
    X(s_requires_grad) X(s_modules) X(s_named_children) X(s_grad_fn) X(s_register_hook) X(s_name) X(hook_dict)     \
    X(handle_ids) X(has_tf) X(s_backward_hooks) X(s_register_hook_dict) X(s_next_id) X(seq_nr) X(cur_node)        \
    X(top_hooks) X(recompute_hooks) X(grad_enabled) X(s_sequence_nr) X(last_node) X(next_node) X(fcm_log)         \
    X(unlinked_log) X(fwd_sets) X(note_region) X(region_of) X(steps[0]) X(steps[1])

RL_GC_MEMBERS(Tracker, TRACKER_OBJECTS, (self->enabled = 0, rl_attr_free(&self->attr)))

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
    self->gate_type = rl_gate_type_of(Py_TYPE(self));
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
    return rl_tracker_mark(self); /* nodes from now on: {"Global"} until a module's forward starts */
}

int rl_tracker_check_ready(Tracker *self) {
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
PyObject *rl_tracker_module_id(Tracker *self) {
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
        rc = rl_tracker_module_id(self) ? 0 : -1;
    }
    Py_DECREF(from);
    return rc;
}

/* The id of module set `mid` with `name` added (a new reference), or NULL with an exception. */
PyObject *rl_tracker_set_plus(Tracker *self, uint32_t mid, PyObject *name) {
    PyObject *names = PyList_GetItem(self->sets, (Py_ssize_t)mid); /* borrowed: a sorted tuple */
    PyObject *key = names ? set_with(names, name, 1) : NULL;
    return key ? intern_set(self, key) : NULL;
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
        PyObject *arm = bound ? PyCFunction_New(&rl_gate_arm_def, bound) : NULL;
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
        PyObject *id = rl_tracker_module_id(self);
        if (!id || rl_as_mid(id, &running) < 0 || (entering && PyDict_SetItem(self->fwd_sets, name, id) < 0)) {
            return -1;
        }
    }
    track_ctx ctx = {self, name};
    rl_attr_env env = rl_track_env(&ctx);
    return rl_attr_result(rl_attr_module(&self->attr, &env, task != -1, entering, running));
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
    PyObject *id = tid && !(task == -1 && PyErr_Occurred()) && task == -1 ? rl_tracker_module_id(self) : NULL;
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
    if (rl_tracker_check_ready(self) < 0) {
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
    if (rl_tracker_check_ready(self) < 0) {
        return NULL;
    }
    return module_name(self, mod);
}

PyObject *rl_tracker_add(Tracker *self, PyObject *name) {
    if (rl_tracker_check_ready(self) < 0) {
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
PyObject *rl_tracker_discard(Tracker *self, PyObject *name) {
    if (rl_tracker_check_ready(self) < 0) {
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
    if (rl_tracker_check_ready(self) < 0) {
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
    if (rl_tracker_check_ready(self) < 0) {
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
    if (rl_tracker_check_ready(self) < 0) {
        return NULL;
    }
    PyObject *id = rl_tracker_module_id(self);
    return id ? Py_NewRef(id) : NULL;
}

static PyObject *Tracker_get_parents(Tracker *self, void *Py_UNUSED(c)) {
    if (rl_tracker_check_ready(self) < 0) {
        return NULL;
    }
    return PyFrozenSet_New(self->parents);
}

static PyObject *Tracker_get_sets(Tracker *self, void *Py_UNUSED(c)) {
    if (rl_tracker_check_ready(self) < 0) {
        return NULL;
    }
    return Py_NewRef(self->sets);
}

static PyObject *Tracker_get_enabled(Tracker *self, void *Py_UNUSED(c)) { return PyBool_FromLong(self->enabled); }

/* attribute() -> (module id, phase, the tracker's own module id where it differs or None, not linked): where an op
 * recorded now belongs (the C dispatch path does the same per op; this is for the Python paths). */
static PyObject *Tracker_attribute(Tracker *self, PyObject *Py_UNUSED(ignored)) {
    if (rl_tracker_check_ready(self) < 0) {
        return NULL;
    }
    PyObject *tid = PyObject_CallNoArgs(self->task_id);
    long task = tid ? PyLong_AsLong(tid) : -1;
    Py_XDECREF(tid);
    if (!tid || (task == -1 && PyErr_Occurred())) {
        return NULL;
    }
    attribution a;
    if (rl_tracker_attribute(self, task, &a) < 0) {
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
    if (rl_tracker_check_ready(self) < 0) {
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
    if (rl_attribution_log(self, &a, row) < 0) {
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
    {"add", (PyCFunction)rl_tracker_add, METH_O, "add(name): a module (re-)enters the current set (backward)."},
    {"discard", (PyCFunction)rl_tracker_discard, METH_O,
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
PyType_Spec *const rl_tracker_spec = &Tracker_spec;
