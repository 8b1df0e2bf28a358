/* Dispatch is the body of the dispatch mode's __torch_dispatch__ for ops whose formula runs in C: an open-addressing
 * table maps the OpOverload (by identity) to its recorder op index and the callable that runs it; a call runs the
 * op, reads the module id and phase, and calls the recorder's `record`. No Python frame runs on that path. Any op
 * not in the table (first call, decomposed ops, Python formulas, higher-order operators, declined ops) goes to the
 * Python `slow` callable, which may add it to the table. */
#include "track.h"

#include "structmember.h"

#include "record.h"

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
    PyTypeObject *ttype = rl_tracker_type_of(PyType_GetModule(Py_TYPE(self)));
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
        a.mid = rl_tracker_module_id(tr);
        if (!a.mid) {
            goto done;
        }
        Py_INCREF(a.mid);
    } else {
        long v;
        int rc = op_task(self, tr, &v) < 0 ? -1 : rl_tracker_attribute(tr, v, &a);
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
    if (r && rl_attribution_log(tr, &a, row) < 0) {
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
PyType_Spec *const rl_dispatch_spec = &Dispatch_spec;
