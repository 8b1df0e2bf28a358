/* Python binding of the cost model: the `Recorder` type.
 *
 * A Recorder turns one op call (its positional arguments, keyword arguments and outputs, as Python objects) into an
 * rl_call, evaluates rl_cost_eval and appends an rl_record to a growable C array. It is the per-op hot path of
 * roofline.measure, so it does no string work: ops are registered once (add_op) and referred to by index.
 *
 * A Recorder is configured with the tensor type it recognises (torch.Tensor, or roofline.TensorSpec for analytic
 * use without torch) and a dict mapping that type's `dtype` objects to rl_dtype codes. A tensor is described by
 * its `shape` (a tuple of ints), `stride()` (a tuple of ints, in elements) and `dtype`. */
#include "cost_binding.h"

#include <limits.h>
#include <math.h>
#include <string.h>

/* RuntimeError unless the recorder is idle. 0, or -1 with the exception set. */
static int check_idle(Recorder *self, const char *method) {
    if (self->busy) {
        PyErr_Format(PyExc_RuntimeError,
                     "Recorder.%s: the recorder is in the middle of record() (re-entered from Python code run while "
                     "describing a tensor: a shape, stride() or dtype property, a finalizer or another thread); a "
                     "Recorder is not re-entrant",
                     method);
        return -1;
    }
    return 0;
}

/* The common head of a vectorcall method: the recorder idle (check_idle) and between lo and hi positional
 * arguments (TypeError with `usage` otherwise). 0 or -1 with the exception set. */
static int check_method(Recorder *self, const char *method, const char *usage, Py_ssize_t argc, Py_ssize_t lo,
                        Py_ssize_t hi) {
    if (check_idle(self, method) < 0) {
        return -1;
    }
    if (argc < lo || argc > hi) {
        PyErr_SetString(PyExc_TypeError, usage);
        return -1;
    }
    return 0;
}



/* Parse an int argument of a Recorder method into [0, max]. `what` names it and `label` (may be NULL) the op in the
 * errors: TypeError for a non-int (a bool included: a count is never True), ValueError for a negative value,
 * OverflowError above `max`. Nothing is wrapped or truncated. 0, or -1 with the exception set. */
static int parse_uint_int(PyObject *o, unsigned long long max, PyObject *label, const char *method,
                          const char *what, unsigned long long *out);

static int parse_uint(PyObject *o, unsigned long long max, PyObject *label, const char *method, const char *what,
                      unsigned long long *out) {
    if (PyLong_Check(o) || PyBool_Check(o) || !Py_TYPE(o)->tp_as_number || !Py_TYPE(o)->tp_as_number->nb_index) {
        return parse_uint_int(o, max, label, method, what, out);
    }
    /* an integer type of another library (numpy.int64): its value, through __index__ */
    PyObject *v = PyNumber_Index(o);
    if (!v) {
        return -1;
    }
    int rc = parse_uint_int(v, max, label, method, what, out);
    Py_DECREF(v);
    return rc;
}

static int parse_uint_int(PyObject *o, unsigned long long max, PyObject *label, const char *method,
                          const char *what, unsigned long long *out) {
    PyObject *exc;
    char why[128];
    if (!PyLong_Check(o) || PyBool_Check(o)) {
        exc = PyExc_TypeError;
        snprintf(why, sizeof(why), "must be an int, not %.60s", Py_TYPE(o)->tp_name);
    } else {
        int sign = 0;
        long long x = PyLong_AsLongLongAndOverflow(o, &sign);
        if (x == -1 && PyErr_Occurred()) {
            return -1;
        }
        if (sign < 0 || (sign == 0 && x < 0)) {
            exc = PyExc_ValueError;
            if (sign < 0) {
                snprintf(why, sizeof(why), "must not be negative, got an int below -2**63");
            } else {
                snprintf(why, sizeof(why), "must not be negative, got %lld", x);
            }
        } else {
            unsigned long long v = (unsigned long long)x;
            if (sign > 0) {
                v = PyLong_AsUnsignedLongLong(o);
                if (v == (unsigned long long)-1 && PyErr_Occurred()) {
                    if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
                        return -1;
                    }
                    PyErr_Clear();
                    exc = PyExc_OverflowError;
                    snprintf(why, sizeof(why), "does not fit in 64 bits (2**64 or more; at most %llu)", max);
                    goto fail;
                }
            }
            if (v <= max) {
                *out = v;
                return 0;
            }
            exc = PyExc_OverflowError;
            snprintf(why, sizeof(why), "must be at most %llu, got %llu", max, v);
        }
    }
fail:
    if (label) {
        PyErr_Format(exc, "Recorder.%s: %.200U: %s %s", method, label, what, why);
    } else {
        PyErr_Format(exc, "Recorder.%s: %s %s", method, what, why);
    }
    return -1;
}

/* Parse the `phase` argument of record()/append(). */
static int parse_phase(PyObject *o, PyObject *label, const char *method, unsigned *out) {
    unsigned long long v = 0;
    if (parse_uint(o, RL_PHASE_LAST, label, method, "phase (0 forward, 1 backward, 2 optimizer, 3 recompute)", &v) <
        0) {
        return -1;
    }
    *out = (unsigned)v;
    return 0;
}

/* ---- Recorder methods ----------------------------------------------------------------------------------- */

static int Recorder_init(Recorder *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"tensor_type", "dtype_map", "storage", "signatures", NULL};
    PyObject *tt, *dm, *storage = Py_None;
    int signatures = 0;
    if (check_idle(self, "__init__") < 0) {
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO!|Op:Recorder", kwlist, &tt, &PyDict_Type, &dm, &storage,
                                     &signatures)) {
        return -1;
    }
    if (!PyType_Check(tt)) {
        PyErr_SetString(PyExc_TypeError, "Recorder: tensor_type must be a type");
        return -1;
    }
    if (storage != Py_None && !PyCallable_Check(storage)) {
        PyErr_Format(PyExc_TypeError, "Recorder: storage must be a callable (tensor -> int) or None, got %.100s",
                     Py_TYPE(storage)->tp_name);
        return -1;
    }
    Py_CLEAR(self->sigs);
    rl_sig_reset(&self->sigtab);
    if (signatures) {
        self->sigs = PyList_New(0);
        if (!self->sigs || rl_intern_signature(self, NULL, 0, &(uint32_t){0}) < 0) { /* id 0: no tensor argument */
            return -1;
        }
    }
    self->signatures = signatures;
    Py_XSETREF(self->storage_fn, storage != Py_None ? Py_NewRef(storage) : NULL);
    PyObject *copy = PyDict_Copy(dm); /* private: no one mutates it while a lookup runs */
    if (!copy) {
        return -1;
    }
    Py_XSETREF(self->tensor_type, Py_NewRef(tt));
    Py_XSETREF(self->dtype_map, copy);
    self->state = rl_state_of_type(Py_TYPE(self));
    if (!self->state) {
        return -1;
    }
    Py_CLEAR(self->d_shape);
    Py_CLEAR(self->d_stride);
    Py_CLEAR(self->d_dtype);
    memset(self->plain, 0, sizeof(self->plain));
    PyObject *ds = rl_type_descr((PyTypeObject *)tt, self->state->s_shape, &PyGetSetDescr_Type);
    PyObject *dst = rl_type_descr((PyTypeObject *)tt, self->state->s_stride, &PyMethodDescr_Type);
    PyObject *dd = rl_type_descr((PyTypeObject *)tt, self->state->s_dtype, &PyGetSetDescr_Type);
    if (ds && dst && dd) { /* else every tensor is read with attribute lookups */
        self->d_shape = ds;
        self->d_stride = dst;
        self->d_dtype = dd;
    } else {
        Py_XDECREF(ds);
        Py_XDECREF(dst);
        Py_XDECREF(dd);
    }
    return 0;
}

/* Visit (visit != NULL) or clear (visit == NULL) the objects a Recorder holds. */
static int Recorder_walk(Recorder *self, visitproc visit, void *arg) {
#define RL_WALK(obj)                                                                                               \
    if (visit != NULL) {                                                                                           \
        Py_VISIT(obj);                                                                                             \
    } else {                                                                                                       \
        Py_CLEAR(obj);                                                                                             \
    }
    RL_WALK(self->tensor_type)
    RL_WALK(self->d_shape)
    RL_WALK(self->d_stride)
    RL_WALK(self->d_dtype)
    RL_WALK(self->dtype_map)
    RL_WALK(self->storage_fn)
    RL_WALK(self->sigs)
    RL_WALK(self->undescribed)
    for (Py_ssize_t i = 0; i < self->nops; i++) {
        RL_WALK(self->ops[i].kwnames)
        RL_WALK(self->ops[i].name)
    }
#undef RL_WALK
    return 0;
}

static int Recorder_traverse(Recorder *self, visitproc visit, void *arg) {
    Py_VISIT(Py_TYPE(self));
    return Recorder_walk(self, visit, arg);
}

static int Recorder_clear(Recorder *self) { return Recorder_walk(self, NULL, NULL); }

/* Free the records, the dataflow rows and the per-call scratch (each array NULL with capacity 0: they grow again
 * from nothing). */
static void free_buffers(Recorder *self) {
#define RL_RELEASE(p, cap)                                                                                         \
    PyMem_Free(self->p);                                                                                           \
    self->p = NULL;                                                                                                \
    self->cap = 0;
    RL_RELEASE(recs, cap_recs)
    RL_RELEASE(tensors, cap_tensors)
    RL_RELEASE(ints, cap_ints)
    RL_RELEASE(outs, cap_outs)
    RL_RELEASE(tstor, cap_tstor)
    RL_RELEASE(ostor, cap_ostor)
    RL_RELEASE(tobj, cap_tobj)
    RL_RELEASE(keybuf, cap_keybuf)
#undef RL_RELEASE
    rl_acc_free(&self->acc);
}

static void Recorder_dealloc(Recorder *self) {
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    Recorder_clear(self);
    PyMem_Free(self->ops);
    free_buffers(self);
    rl_sig_free(&self->sigtab);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

/* Set parameter `p` of `op` from the Python value `o`: an int (through __index__; a bool only for a flag) in the
 * parameter's range. 0, or -1 with TypeError / ValueError / OverflowError naming the kind and the parameter. */
static int set_param(rl_op *op, int p, PyObject *o) {
    const char *kname = rl_kind_name(op->kind), *pname = rl_param_name(p);
    int64_t lo, hi;
    rl_param_range(p, &lo, &hi);
    if ((PyBool_Check(o) && rl_param_type(p) != RL_PT_FLAG) || !PyIndex_Check(o)) {
        PyErr_Format(PyExc_TypeError, "add_op: parameter %s of kind %s must be an int, not %.60s", pname, kname,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    PyObject *v = PyNumber_Index(o);
    if (!v) {
        return -1;
    }
    int sign = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &sign);
    Py_DECREF(v);
    if (x == -1 && PyErr_Occurred()) {
        return -1;
    }
    int st = sign != 0 ? RL_E_OVERFLOW : rl_op_set(op, p, x);
    if (st == RL_E_KIND) {
        PyErr_Format(PyExc_ValueError, "add_op: kind %s has no parameter %s (see kind_table())", kname, pname);
    } else if (st != RL_OK) {
        PyErr_Format(st == RL_E_OVERFLOW ? PyExc_OverflowError : PyExc_ValueError,
                     "add_op: parameter %s of kind %s must be in %lld..%lld, got %S", pname, kname, (long long)lo,
                     (long long)hi, o);
    }
    return st == RL_OK ? 0 : -1;
}

/* The parameters of add_op: p1 / p2 (shorthand for flops / special) and the dict `params` {name: value}. */
static int set_params(rl_op *op, PyObject *p1, PyObject *p2, PyObject *params) {
    uint64_t given = 0;
    p1 = p1 == Py_None ? NULL : p1; /* None: not given (the positional form of add_op passes every argument) */
    p2 = p2 == Py_None ? NULL : p2;
    if ((p1 && set_param(op, RL_P_FLOPS, p1) < 0) || (p2 && set_param(op, RL_P_SPECIAL, p2) < 0)) {
        return -1;
    }
    given = (p1 ? RL_P(FLOPS) : 0) | (p2 ? RL_P(SPECIAL) : 0);
    if (!params || params == Py_None) {
        return 0;
    }
    if (!PyDict_Check(params)) {
        PyErr_Format(PyExc_TypeError, "add_op: params must be a dict {name: int} or None, got %.100s",
                     Py_TYPE(params)->tp_name);
        return -1;
    }
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(params, &pos, &key, &value)) {
        const char *k = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
        if (!k) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "add_op: params keys must be parameter names (str), got %.100R", key);
            return -1;
        }
        int p = 0;
        while (p < RL_P_COUNT && strcmp(rl_param_name(p), k) != 0) {
            p++;
        }
        if (p == RL_P_COUNT) {
            PyErr_Format(PyExc_ValueError, "add_op: %.100R is not a cost-kind parameter (see kind_table())", key);
            return -1;
        }
        if (given & (UINT64_C(1) << p)) {
            PyErr_Format(PyExc_ValueError, "add_op: parameter %s given twice (positionally and in params)", k);
            return -1;
        }
        if (set_param(op, p, value) < 0) {
            return -1;
        }
    }
    return 0;
}

static PyObject *Recorder_add_op(Recorder *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"kind",  "p1",      "p2",    "noread_mask", "write_mask", "flags",
                             "kwnames", "kwpos", "name", "params",      NULL};
    int kind;
    unsigned long long noread = 0, write = 0, flags = 0;
    PyObject *p1 = NULL, *p2 = NULL, *noread_o = NULL, *write_o = NULL, *flags_o = NULL, *params = NULL;
    PyObject *kwnames = Py_None, *name = Py_None;
    Py_ssize_t kwpos = -1;
    if (check_idle(self, "add_op") < 0) {
        return NULL;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "i|OOOOOOnOO:add_op", kwlist, &kind, &p1, &p2, &noread_o, &write_o,
                                     &flags_o, &kwnames, &kwpos, &name, &params)) {
        return NULL;
    }
    if (kind < 0 || kind >= RL_K_COUNT) {
        return rl_err_value("add_op: kind %d is not a cost kind (0..%d)", kind, RL_K_COUNT - 1);
    }
    rl_op op;
    memset(&op, 0, sizeof(op));
    op.kind = kind;
    if (set_params(&op, p1, p2, params) < 0) {
        return NULL;
    }
    if ((noread_o && parse_uint(noread_o, UINT64_MAX, NULL, "add_op", "noread_mask", &noread) < 0) ||
        (write_o && parse_uint(write_o, UINT64_MAX, NULL, "add_op", "write_mask", &write) < 0) ||
        (flags_o && parse_uint(flags_o, UINT32_MAX, NULL, "add_op", "flags", &flags) < 0)) {
        return NULL;
    }
    if (kwnames != Py_None) {
        if (!PyTuple_Check(kwnames)) {
            PyErr_SetString(PyExc_TypeError, "add_op: kwnames must be a tuple of str or None");
            return NULL;
        }
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++) {
            if (!PyUnicode_Check(PyTuple_GET_ITEM(kwnames, i))) {
                PyErr_SetString(PyExc_TypeError, "add_op: kwnames must be a tuple of str or None");
                return NULL;
            }
        }
    }
    if (kwpos < -1) {
        return rl_err_value("add_op: kwpos must be -1 or a schema position >= 0, got %zd", kwpos);
    }
    if (name != Py_None && !PyUnicode_Check(name)) {
        PyErr_Format(PyExc_TypeError, "add_op: name must be a str or None, got %.100s", Py_TYPE(name)->tp_name);
        return NULL;
    }
    if (grow((void **)&self->ops, &self->cap_ops, self->nops + 1, sizeof(op_entry)) < 0) {
        return NULL;
    }
    op_entry *e = &self->ops[self->nops];
    op.noread_mask = noread;
    op.write_mask = write;
    op.flags = (uint32_t)flags;
    e->op = op;
    e->kwnames = (kwnames != Py_None && PyTuple_GET_SIZE(kwnames) > 0) ? Py_NewRef(kwnames) : NULL;
    e->kwpos = kwpos;
    e->name = name != Py_None ? Py_NewRef(name) : NULL;
    return PyLong_FromSsize_t(self->nops++);
}

/* Fill an rl_call from (args, kwargs, out) for op `e` (a copy owned by the caller). Returns 0 or -1 with an
 * exception set. */
static int build_call(Recorder *self, const op_entry *e, Py_ssize_t opi, PyObject *args, PyObject *kwargs,
                      PyObject *out, rl_call *call, int *bad) {
    builder b = {self, e, opi, 0, 0, 0, "argument", 0, -1};
    Py_ssize_t npos = PyTuple_GET_SIZE(args);
    Py_ssize_t nkw = e->kwnames ? PyTuple_GET_SIZE(e->kwnames) : 0;
    /* Dispatch drops trailing positional arguments equal to their defaults: keyword-only arguments still go to
     * their schema positions, with the dropped positionals absent in between. */
    Py_ssize_t kw0 = (nkw && e->kwpos > npos) ? e->kwpos : npos;
    if (kw0 > RL_MAX_ARGS) {
        kw0 = RL_MAX_ARGS;
    }
    if (npos > kw0) {
        npos = kw0;
        *bad = 1;
    }
    if (kw0 + nkw > RL_MAX_ARGS) {
        nkw = RL_MAX_ARGS - kw0;
        *bad = 1;
    }
    call->nargs = (int32_t)(kw0 + nkw);
    /* `args` is a tuple the caller keeps alive: its items live as long as the call */
    for (Py_ssize_t i = 0; i < npos; i++) {
        b.pos = i;
        if (rl_convert_arg(&b, PyTuple_GET_ITEM(args, i), &call->args[i]) < 0) {
            return -1;
        }
    }
    for (Py_ssize_t i = npos; i < kw0; i++) {
        memset(&call->args[i], 0, sizeof(rl_arg));
        call->args[i].type = RL_ARG_ABSENT;
    }
    for (Py_ssize_t k = 0; k < nkw; k++) {
        rl_arg *a = &call->args[kw0 + k];
        PyObject *v = NULL;
        if (kwargs != Py_None) {
            /* the dict may change while Python code runs: hold the value */
            v = PyDict_GetItemWithError(kwargs, PyTuple_GET_ITEM(e->kwnames, k));
            if (!v && PyErr_Occurred()) {
                return -1;
            }
            Py_XINCREF(v);
        }
        b.pos = kw0 + k;
        if (!v) {
            memset(a, 0, sizeof(*a));
            a->type = RL_ARG_ABSENT;
            continue;
        }
        int rc = rl_convert_arg(&b, v, a);
        Py_DECREF(v);
        if (rc < 0) {
            return -1;
        }
    }
    Py_ssize_t nouts = rl_flatten_outs(&b, out);
    if (nouts < 0) {
        return -1;
    }
    call->tensors = self->tensors;
    call->ints = self->ints;
    call->outs = self->outs;
    call->nouts = (int32_t)nouts;
    *bad |= b.bad;
    return 0;
}

/* Append one record with the counts of `c` (its dtype included). 0, or -1 with MemoryError set. The arguments
 * are range-checked by the callers. */
static int push_record(Recorder *self, Py_ssize_t opi, int32_t kind, uint32_t module, unsigned phase,
                       unsigned status, const rl_cost *c, double t0, double t1) {
    if (grow((void **)&self->recs, &self->cap_recs, self->nrecs + 1, sizeof(rl_record)) < 0) {
        return -1;
    }
    rl_record *rec = &self->recs[self->nrecs++];
    memset(rec, 0, sizeof(*rec));
    rec->matrix_flops = c->matrix;
    rec->vector_flops = c->vector;
    rec->special_ops = c->special;
    rec->bytes_read = c->bytes_read;
    rec->bytes_written = c->bytes_written;
    rec->flop_counter_flops = c->flop_counter;
    rec->t_start = t0;
    rec->t_end = t1;
    rec->op = (uint32_t)opi;
    rec->module = module;
    rec->phase = (uint8_t)phase;
    rec->dtype = (uint8_t)c->dtype;
    rec->status = (uint8_t)status;
    rec->kind = (uint8_t)kind;
    rec->seq = self->seq++;
    return 0;
}

/* The (args, kwargs) of a call handed to record()/attach(): a tuple, and a dict or None. 0, or -1 with TypeError. */
static int check_call(const char *method, PyObject *args, PyObject *kwargs) {
    if (!PyTuple_Check(args)) {
        PyErr_Format(PyExc_TypeError, "%s: args must be a tuple", method);
        return -1;
    }
    if (kwargs != Py_None && !PyDict_Check(kwargs)) {
        PyErr_Format(PyExc_TypeError, "%s: kwargs must be a dict or None, got %.100s", method,
                     Py_TYPE(kwargs)->tp_name);
        return -1;
    }
    return 0;
}

/* The op index argument of record()/append(): an int naming an op registered with add_op. */
static int parse_op(Recorder *self, PyObject *o, const char *method, Py_ssize_t *opi) {
    if (!PyLong_Check(o) || PyBool_Check(o)) {
        PyErr_Format(PyExc_TypeError, "Recorder.%s: op must be an int index from add_op, got %.100s", method,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    int sign = 0;
    long long x = PyLong_AsLongLongAndOverflow(o, &sign);
    if (x == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (sign != 0 || x < 0 || x >= self->nops || x > UINT32_MAX) {
        if (sign != 0) {
            x = sign < 0 ? LLONG_MIN : LLONG_MAX;
        }
        PyErr_Format(PyExc_ValueError, "Recorder.%s: op index %lld was not registered with add_op (0..%zd)",
                     method, x, self->nops - 1);
        return -1;
    }
    *opi = (Py_ssize_t)x;
    return 0;
}

/* The arguments record() and append() begin with: the recorder idle, argc in [lo, hi] (else TypeError showing
 * `usage`), the op index, the module and the phase. *label (when label is not NULL): a new reference to the op's
 * name, for the caller's own messages. 0, or -1 with an exception set. */
static int parse_head(Recorder *self, const char *method, const char *usage, PyObject *const *argv, Py_ssize_t argc,
                      Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t *opi, unsigned long long *module, unsigned *phase,
                      PyObject **label) {
    if (check_method(self, method, usage, argc, lo, hi) < 0) {
        return -1;
    }
    if (parse_op(self, argv[0], method, opi) < 0) {
        return -1;
    }
    PyObject *name = op_label(&self->ops[*opi], *opi);
    if (!name) {
        return -1;
    }
    if (parse_uint(argv[1], UINT32_MAX, name, method, "module", module) < 0 ||
        parse_phase(argv[2], name, method, phase) < 0) {
        Py_DECREF(name);
        return -1;
    }
    if (label) {
        *label = name;
    } else {
        Py_DECREF(name);
    }
    return 0;
}

static int known_status(unsigned long long st);

/* The counts of a call whose arguments could not be described, from the recorder's `undescribed` callable: 1 with
 * *c and *st set from its tuple (matrix, vector, special, bytes_read, bytes_written, flop_counter, status), 0 when it
 * returned None (the call keeps RL_E_DESCRIBE), -1 with an exception (it raised, or returned something else). The
 * recorder stays busy meanwhile: the callable must not use it. */
static int ask_undescribed(Recorder *self, Py_ssize_t opi, PyObject *args, PyObject *kwargs, PyObject *out, rl_cost *c,
                           int *st) {
    static const char *names[7] = {"matrix_flops",  "vector_flops",       "special_ops", "bytes_read",
                                   "bytes_written", "flop_counter_flops", "status"};
    PyObject *fn = Py_NewRef(self->undescribed), *idx = PyLong_FromSsize_t(opi);
    PyObject *r = idx ? PyObject_CallFunctionObjArgs(fn, idx, args, kwargs, out, NULL) : NULL;
    Py_DECREF(fn);
    Py_XDECREF(idx);
    if (!r) {
        return -1;
    }
    if (r == Py_None) {
        Py_DECREF(r);
        return 0;
    }
    int rc = -1;
    PyObject *label = self->ops[opi].name ? Py_NewRef(self->ops[opi].name) : PyUnicode_FromFormat("op %zd", opi);
    if (!label) {
        goto done;
    }
    if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 7) {
        PyErr_Format(PyExc_TypeError, "Recorder.record: %.200U: undescribed() must return None or a tuple of 7 ints, "
                     "got %.100s", label, Py_TYPE(r)->tp_name);
        goto done;
    }
    unsigned long long v[7];
    for (int k = 0; k < 7; k++) {
        if (parse_uint(PyTuple_GET_ITEM(r, k), k == 6 ? 255 : UINT64_MAX, label, "record", names[k], &v[k]) < 0) {
            goto done;
        }
    }
    if (!known_status(v[6])) {
        PyErr_Format(PyExc_ValueError, "Recorder.record: %.200U: status %llu is not a record status", label, v[6]);
        goto done;
    }
    *c = (rl_cost){v[0], v[1], v[2], v[3], v[4], v[5], 0};
    *st = (int)v[6];
    rc = 1;
done:
    Py_XDECREF(label);
    Py_DECREF(r);
    return rc;
}

/* record(op, module, phase, args, kwargs, out, t_start=nan, t_end=nan) */
static PyObject *Recorder_record(Recorder *self, PyObject *const *argv, Py_ssize_t argc) {
    Py_ssize_t opi;
    unsigned long long module;
    unsigned phase;
    if (parse_head(self, "record", "record(op, module, phase, args, kwargs, out[, t_start, t_end])", argv, argc, 6, 8,
                   &opi, &module, &phase, NULL) < 0) {
        return NULL;
    }
    if (check_call("record", argv[3], argv[4]) < 0) {
        return NULL;
    }
    double t0 = NAN, t1 = NAN;
    if (argc > 6 && (t0 = PyFloat_AsDouble(argv[6])) == -1.0 && PyErr_Occurred()) {
        return NULL;
    }
    if (argc > 7 && (t1 = PyFloat_AsDouble(argv[7])) == -1.0 && PyErr_Occurred()) {
        return NULL;
    }
    /* While busy, nothing can add ops (add_op refuses), so the entry stays where it is while describing the
     * arguments runs Python code. */
    const op_entry *e = &self->ops[opi];
    rl_call call;
    int bad = 0;
    PyObject *result = NULL;
    self->busy = 1;
    if (build_call(self, e, opi, argv[3], argv[4], argv[5], &call, &bad) == 0) {
        rl_cost c;
        int st = rl_cost_eval(&e->op, &call, &c);
        if (st == RL_OK && bad && e->op.kind != RL_K_ZERO) {
            st = RL_E_DESCRIBE;
        }
        int32_t dtype = st == RL_OK || st == RL_E_DESCRIBE ? c.dtype : 0;
        if (st != RL_OK) {
            memset(&c, 0, sizeof(c));
        }
        if (st == RL_E_DESCRIBE && self->undescribed) {
            int got = ask_undescribed(self, opi, argv[3], argv[4], argv[5], &c, &st);
            if (got < 0) {
                self->busy = 0;
                return NULL;
            }
            if (got) {
                c.dtype = dtype;
            }
        }
        if (push_record(self, opi, e->op.kind, (uint32_t)module, phase, (unsigned)st, &c, t0, t1) == 0) {
            if (rl_capture_call(self, &e->op, &call, &c, self->nrecs - 1) == 0) {
                result = Py_NewRef(Py_None);
            } else { /* all or nothing: the record goes too */
                self->nrecs--;
                self->seq--;
            }
        }
    }
    self->busy = 0;
    return result;
}

/* A known record status: an rl_status or RL_E_DESCRIBE. */
static int known_status(unsigned long long st) {
    return st <= 255 && (st == RL_E_DESCRIBE || strcmp(rl_status_str((int)st), rl_status_str(-1)) != 0);
}

/* append(op, module, phase, dtype, matrix, vector, special, bytes_read, bytes_written, flop_counter[, status]): a
 * record whose counts were computed elsewhere (a formula registered from Python). Every value is range-checked: a
 * count must be an int in [0, 2**64) (a float, a bool, a negative or larger value is an error naming the op). */
static PyObject *Recorder_append(Recorder *self, PyObject *const *argv, Py_ssize_t argc) {
    static const char *count_names[6] = {"matrix_flops", "vector_flops", "special_ops",
                                         "bytes_read",   "bytes_written", "flop_counter_flops"};
    Py_ssize_t opi;
    unsigned long long module = 0, dtype = 0, status = RL_OK, counts[6] = {0};
    unsigned phase = 0;
    PyObject *label;
    if (parse_head(self, "append",
                   "append(op, module, phase, dtype, matrix, vector, special, bytes_read, bytes_written, "
                   "flop_counter[, status])",
                   argv, argc, 10, 11, &opi, &module, &phase, &label) < 0) {
        return NULL;
    }
    int rc = -1;
    if (parse_uint(argv[3], RL_DT_COUNT - 1, label, "append", "dtype", &dtype) < 0) {
        goto done;
    }
    for (int k = 0; k < 6; k++) {
        if (parse_uint(argv[4 + k], UINT64_MAX, label, "append", count_names[k], &counts[k]) < 0) {
            goto done;
        }
    }
    if (argc > 10) {
        if (parse_uint(argv[10], 255, label, "append", "status", &status) < 0) {
            goto done;
        }
        if (!known_status(status)) {
            PyErr_Format(PyExc_ValueError, "Recorder.append: %.200U: status %llu is not a record status", label,
                         status);
            goto done;
        }
    }
    rl_cost c = {counts[0], counts[1], counts[2], counts[3], counts[4], counts[5], (int32_t)dtype};
    rc = push_record(self, opi, self->ops[opi].op.kind, (uint32_t)module, phase, (unsigned)status, &c, NAN, NAN);
done:
    Py_DECREF(label);
    return rc < 0 ? NULL : Py_NewRef(Py_None);
}

/* replay(start, stop, phase): append copies of records [start, stop) in phase `phase`, as if each call had been
 * recorded again: new call order numbers, no times, the same op, module, counts, status and signature, and copies of
 * their dataflow rows pointing at the new records. For a compiled graph that runs again with the same sizes and
 * modules, whose records are a pure function of those. All or nothing (MemoryError, OverflowError). */
static PyObject *Recorder_replay(Recorder *self, PyObject *const *argv, Py_ssize_t argc) {
    if (check_method(self, "replay", "replay(start, stop, phase)", argc, 3, 3) < 0) {
        return NULL;
    }
    Py_ssize_t lim[2];
    for (int k = 0; k < 2; k++) {
        if (!PyLong_Check(argv[k]) || PyBool_Check(argv[k])) {
            PyErr_Format(PyExc_TypeError, "Recorder.replay: %s must be an int, got %.100s", k ? "stop" : "start",
                         Py_TYPE(argv[k])->tp_name);
            return NULL;
        }
        lim[k] = PyLong_AsSsize_t(argv[k]);
        if (lim[k] == -1 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
                return NULL;
            }
            PyErr_Clear();
            lim[k] = -1; /* out of range either way */
        }
    }
    if (lim[0] < 0 || lim[1] < lim[0] || lim[1] > self->nrecs) {
        return rl_err_value("Recorder.replay: [%zd, %zd) is not a range of the %zd records", lim[0], lim[1],
                            self->nrecs);
    }
    PyObject *label = PyUnicode_FromString("the copies");
    if (!label) {
        return NULL;
    }
    unsigned phase;
    int prc = parse_phase(argv[2], label, "replay", &phase);
    Py_DECREF(label);
    if (prc < 0) {
        return NULL;
    }
    Py_ssize_t n = lim[1] - lim[0], base = self->nrecs;
    if (n == 0) {
        Py_RETURN_NONE;
    }
    if (n > PY_SSIZE_T_MAX - base) {
        PyErr_SetString(PyExc_OverflowError, "Recorder.replay: too many records");
        return NULL;
    }
    size_t acc_before = self->acc.n;
    if (self->storage_fn || self->signatures) {
        if (base + n - 1 > (Py_ssize_t)UINT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "Recorder: more than 2**32 records in one recorder with capture on");
            return NULL;
        }
        if (self->storage_fn &&
            rl_acc_replay(&self->acc, (uint32_t)lim[0], (uint32_t)lim[1], (uint32_t)base) < 0) {
            return PyErr_NoMemory();
        }
    }
    if (grow((void **)&self->recs, &self->cap_recs, base + n, sizeof(rl_record)) < 0) {
        self->acc.n = acc_before;
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        rl_record r = self->recs[lim[0] + i];
        r.seq = self->seq++;
        r.phase = (uint8_t)phase;
        r.t_start = NAN;
        r.t_end = NAN;
        self->recs[base + i] = r;
    }
    self->nrecs = base + n;
    Py_RETURN_NONE;
}

static PyObject *Recorder_records_bytes(Recorder *self, PyObject *Py_UNUSED(ignored)) {
    return PyBytes_FromStringAndSize((const char *)self->recs, self->nrecs * (Py_ssize_t)sizeof(rl_record));
}

static PyObject *Recorder_set_times(Recorder *self, PyObject *args) {
    Py_ssize_t i;
    double t0, t1;
    if (check_idle(self, "set_times") < 0) {
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "ndd:set_times", &i, &t0, &t1)) {
        return NULL;
    }
    if (i < 0 || i >= self->nrecs) {
        return rl_err_value("set_times: record index %zd out of range (0..%zd)", i, self->nrecs - 1);
    }
    self->recs[i].t_start = t0;
    self->recs[i].t_end = t1;
    Py_RETURN_NONE;
}

static PyObject *Recorder_clear_records(Recorder *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"release", NULL};
    int release = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|$p:clear", kwlist, &release) || check_idle(self, "clear") < 0) {
        return NULL;
    }
    self->nrecs = 0;
    self->seq = 0;
    self->acc.n = 0;
    if (release) {
        free_buffers(self);
    }
    Py_RETURN_NONE;
}

/* attach(args, kwargs, out): the signature and dataflow rows of the last record, added by append() for a call whose
 * counts were computed elsewhere: its arguments are described as record() describes them, under the op's
 * argument masks; the reads and writes follow the record's bytes_read / bytes_written. */
static PyObject *Recorder_attach(Recorder *self, PyObject *const *argv, Py_ssize_t argc) {
    if (check_method(self, "attach", "attach(args, kwargs, out)", argc, 3, 3) < 0) {
        return NULL;
    }
    if (check_call("attach", argv[0], argv[1]) < 0) {
        return NULL;
    }
    if (self->nrecs == 0) {
        return rl_err_value("attach: there is no record to attach a call to");
    }
    Py_ssize_t rec = self->nrecs - 1;
    Py_ssize_t opi = (Py_ssize_t)self->recs[rec].op;
    const op_entry *e = &self->ops[opi];
    rl_call call;
    int bad = 0, rc = -1;
    self->busy = 1;
    if (build_call(self, e, opi, argv[0], argv[1], argv[2], &call, &bad) == 0) {
        rl_cost c;
        memset(&c, 0, sizeof(c));
        c.bytes_read = self->recs[rec].bytes_read;
        c.bytes_written = self->recs[rec].bytes_written;
        rc = rl_capture_call(self, &e->op, &call, &c, rec);
    }
    self->busy = 0;
    return rc < 0 ? NULL : Py_NewRef(Py_None);
}

static PyObject *Recorder_accesses_bytes(Recorder *self, PyObject *Py_UNUSED(ignored)) {
    return PyBytes_FromStringAndSize((const char *)self->acc.rows, (Py_ssize_t)(self->acc.n * sizeof(rl_access)));
}

static PyObject *Recorder_get_signatures(Recorder *self, void *Py_UNUSED(c)) {
    if (!self->sigs) {
        return PyList_New(0);
    }
    if (check_idle(self, "signatures") < 0 || rl_format_signatures(self) < 0) {
        return NULL;
    }
    return PyList_GetSlice(self->sigs, 0, PyList_GET_SIZE(self->sigs));
}

static PyObject *Recorder_get_undescribed(Recorder *self, void *Py_UNUSED(c)) {
    return Py_NewRef(self->undescribed ? self->undescribed : Py_None);
}

static int Recorder_set_undescribed(Recorder *self, PyObject *v, void *Py_UNUSED(c)) {
    if (check_idle(self, "undescribed") < 0) {
        return -1;
    }
    if (v && v != Py_None && !PyCallable_Check(v)) {
        PyErr_Format(PyExc_TypeError, "Recorder.undescribed must be a callable or None, got %.100s",
                     Py_TYPE(v)->tp_name);
        return -1;
    }
    Py_XSETREF(self->undescribed, v && v != Py_None ? Py_NewRef(v) : NULL);
    return 0;
}

static PyGetSetDef Recorder_getset[] = {
    {"undescribed", (getter)Recorder_get_undescribed, (setter)Recorder_set_undescribed,
     "undescribed(op, args, kwargs, out) -> None or (matrix_flops, vector_flops, special_ops, bytes_read, "
     "bytes_written, flop_counter_flops, status): asked by record() for the counts of a call whose arguments cannot "
     "be described (a sparse layout); None keeps the call's error record. None (the default): not asked.",
     NULL},
    {"signatures", (getter)Recorder_get_signatures, NULL,
     "The call signatures by id (records' sig field), a list of str; empty when signatures are off.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static Py_ssize_t Recorder_len(Recorder *self) { return self->nrecs; }

static PyMethodDef Recorder_methods[] = {
    {"add_op", (PyCFunction)(void (*)(void))Recorder_add_op, METH_VARARGS | METH_KEYWORDS,
     "add_op(kind, p1=0, p2=0, noread_mask=0, write_mask=0, flags=0, kwnames=None, kwpos=-1, name=None, "
     "params=None) -> int\n"
     "Register an op's cost formula; returns the index record() takes. `params`: the kind's parameters by name "
     "(kind_table()); p1 / p2: shorthand for flops / special. `name` (a str) names the op in errors."},
    {"record", (PyCFunction)(void (*)(void))Recorder_record, METH_FASTCALL,
     "record(op, module, phase, args, kwargs, out, t_start=nan, t_end=nan)\n"
     "Evaluate the cost of one call and append a record."},
    {"append", (PyCFunction)(void (*)(void))Recorder_append, METH_FASTCALL,
     "append(op, module, phase, dtype, matrix, vector, special, bytes_read, bytes_written, flop_counter[, status])"},
    {"replay", (PyCFunction)(void (*)(void))Recorder_replay, METH_FASTCALL,
     "replay(start, stop, phase): append copies of records [start, stop) (new order numbers, no times) with their "
     "dataflow rows."},
    {"records_bytes", (PyCFunction)Recorder_records_bytes, METH_NOARGS, "The records as raw bytes (RECORD_DTYPE)."},
    {"set_times", (PyCFunction)Recorder_set_times, METH_VARARGS, "set_times(i, t_start, t_end)"},
    {"clear", (PyCFunction)(void (*)(void))Recorder_clear_records, METH_VARARGS | METH_KEYWORDS,
     "clear(*, release=False): drop all records and dataflow rows (registered ops and signatures are kept); "
     "release=True also frees their memory."},
    {"attach", (PyCFunction)(void (*)(void))Recorder_attach, METH_FASTCALL,
     "attach(args, kwargs, out): signature and dataflow rows of the last record (one added by append)."},
    {"accesses_bytes", (PyCFunction)Recorder_accesses_bytes, METH_NOARGS,
     "The dataflow rows as raw bytes (ACCESS_RAW_DTYPE)."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot Recorder_slots[] = {
    {Py_tp_doc, "Recorder(tensor_type, dtype_map, storage=None, signatures=False): per-op cost evaluation into a C "
                "array of records. storage(tensor) -> int names a tensor's storage block: each call then also "
                "records the storages it read and wrote (accesses_bytes); signatures: each record's sig field "
                "indexes `signatures`, the interned shapes and dtypes of its tensor arguments."},
    {Py_tp_init, Recorder_init},
    {Py_tp_new, PyType_GenericNew},
    RL_GC_SLOTS(Recorder),
    {Py_tp_methods, Recorder_methods},
    {Py_tp_getset, Recorder_getset},
    {Py_sq_length, Recorder_len},
    {Py_mp_length, Recorder_len},
    {0, NULL},
};

RL_GC_TYPE_SPEC(Recorder, "roofline._core.Recorder", 0);
PyType_Spec *const rl_recorder_spec = &Recorder_spec;
