/* Python binding of the cost model: the `Recorder` type.
 *
 * A Recorder turns one op call (its positional arguments, keyword arguments and outputs, as Python objects) into an
 * rl_call, evaluates rl_cost_eval and appends an rl_record to a growable C array. It is the per-op hot path of
 * roofline.measure, so it does no string work: ops are registered once (add_op) and referred to by index.
 *
 * A Recorder is configured with the tensor type it recognises (torch.Tensor, or roofline.TensorSpec for analytic
 * use without torch) and a dict mapping that type's `dtype` objects to rl_dtype codes. A tensor is described by
 * its `shape` (a tuple of ints), `stride()` (a tuple of ints, in elements) and `dtype`. */
#include "rl_module.h"

#include <math.h>
#include <string.h>

#include "cost.h"
#include "record.h"

typedef struct {
    rl_op op;
    PyObject *kwnames; /* tuple of keyword-only argument names, or NULL */
    Py_ssize_t kwpos;  /* schema position of the first keyword-only argument (-1: right after the positionals) */
} op_entry;

typedef struct {
    PyObject_HEAD
    PyObject *tensor_type; /* type object */
    PyObject *dtype_map;   /* dict: dtype object -> int code */
    PyObject *s_shape, *s_stride, *s_dtype;
    op_entry *ops;
    Py_ssize_t nops, cap_ops;
    rl_record *recs;
    Py_ssize_t nrecs, cap_recs;
    /* scratch for one call */
    rl_tensor *tensors;
    Py_ssize_t cap_tensors;
    int64_t *ints;
    Py_ssize_t cap_ints;
    rl_tensor *outs;
    Py_ssize_t cap_outs;
    uint32_t seq;
} Recorder;

/* Grow *buf (element size `elem`) to hold at least `need` elements. 0 on success, -1 with MemoryError set. */
static int grow(void **buf, Py_ssize_t *cap, Py_ssize_t need, size_t elem) {
    if (need <= *cap) {
        return 0;
    }
    Py_ssize_t n = *cap ? *cap : 16;
    while (n < need) {
        n *= 2;
    }
    void *p = PyMem_Realloc(*buf, (size_t)n * elem);
    if (!p) {
        PyErr_NoMemory();
        return -1;
    }
    *buf = p;
    *cap = n;
    return 0;
}

/* ---- describing Python values -------------------------------------------------------------------------- */

typedef struct {
    Recorder *r;
    Py_ssize_t ntensors, nints;
    int bad; /* an argument could not be described */
} builder;

/* Read a tuple of ints into dst (at most RL_MAX_DIMS). Returns ndim, or -1 (no exception left set) if `seq` is not
 * a tuple of plain ints (e.g. symbolic sizes) or is too long. */
static int read_dims(PyObject *seq, int64_t *dst) {
    if (!PyTuple_Check(seq)) {
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    if (n > RL_MAX_DIMS) {
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyTuple_GET_ITEM(seq, i);
        if (!PyLong_Check(v)) {
            return -1;
        }
        long long x = PyLong_AsLongLong(v);
        if (x == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return -1;
        }
        dst[i] = x;
    }
    return (int)n;
}

/* Describe tensor `t` into *d. Returns 0, or -1 with an exception set for a hard error (MemoryError). A tensor
 * that cannot be described sets b->bad and is recorded with ndim 0. */
static int describe(builder *b, PyObject *t, rl_tensor *d) {
    Recorder *r = b->r;
    d->ndim = 0;
    d->dtype = RL_DT_UNKNOWN;
    PyObject *shape = PyObject_GetAttr(t, r->s_shape);
    if (!shape) {
        PyErr_Clear();
        b->bad = 1;
        return 0;
    }
    int nd = read_dims(shape, d->size);
    Py_DECREF(shape);
    if (nd < 0) {
        b->bad = 1;
        return 0;
    }
    d->ndim = nd;
    PyObject *stride = PyObject_CallMethodNoArgs(t, r->s_stride);
    int ns = -1;
    if (stride) {
        ns = read_dims(stride, d->stride);
        Py_DECREF(stride);
    } else {
        PyErr_Clear(); /* e.g. sparse or nested layouts have no strides */
    }
    if (ns != nd) {
        /* no usable strides: describe as contiguous, and say the bytes are an estimate */
        int64_t s = 1;
        for (int i = nd - 1; i >= 0; i--) {
            d->stride[i] = s;
            s *= d->size[i] > 0 ? d->size[i] : 1;
        }
        b->bad = 1;
    }
    PyObject *dt = PyObject_GetAttr(t, r->s_dtype);
    if (!dt) {
        PyErr_Clear();
        b->bad = 1;
        return 0;
    }
    PyObject *code = PyDict_GetItemWithError(r->dtype_map, dt);
    Py_DECREF(dt);
    if (code) {
        long v = PyLong_AsLong(code);
        if (v == -1 && PyErr_Occurred()) {
            return -1;
        }
        d->dtype = (int32_t)v;
    } else if (PyErr_Occurred()) {
        return -1;
    }
    return 0;
}

static int is_tensor(Recorder *r, PyObject *o) { return PyObject_TypeCheck(o, (PyTypeObject *)r->tensor_type); }

static int push_tensor(builder *b, PyObject *t) {
    Recorder *r = b->r;
    if (grow((void **)&r->tensors, &r->cap_tensors, b->ntensors + 1, sizeof(rl_tensor)) < 0) {
        return -1;
    }
    if (describe(b, t, &r->tensors[b->ntensors]) < 0) {
        return -1;
    }
    b->ntensors++;
    return 0;
}

/* Convert one argument value into *a. Returns 0 or -1 with an exception set. */
static int convert_arg(builder *b, PyObject *v, rl_arg *a) {
    Recorder *r = b->r;
    memset(a, 0, sizeof(*a));
    if (v == Py_None) {
        a->type = RL_ARG_NONE;
    } else if (is_tensor(r, v)) {
        a->type = RL_ARG_TENSOR;
        a->first = (int32_t)b->ntensors;
        a->count = 1;
        return push_tensor(b, v);
    } else if (PyBool_Check(v)) {
        a->type = RL_ARG_BOOL;
        a->i = v == Py_True;
    } else if (PyLong_Check(v)) {
        long long x = PyLong_AsLongLong(v);
        if (x == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            a->type = RL_ARG_OTHER;
        } else {
            a->type = RL_ARG_INT;
            a->i = x;
        }
    } else if (PyFloat_Check(v)) {
        a->type = RL_ARG_FLOAT;
        a->f = PyFloat_AS_DOUBLE(v);
    } else if (PyList_Check(v) || PyTuple_Check(v)) {
        PyObject *seq = v;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        PyObject **items = PySequence_Fast_ITEMS(seq);
        int has_tensor = 0, all_int = 1, all_bool = 1;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *it = items[i];
            if (it != Py_None && is_tensor(r, it)) {
                has_tensor = 1;
            }
            if (!PyBool_Check(it)) {
                all_bool = 0;
            }
            if (!PyLong_Check(it)) {
                all_int = 0;
            }
        }
        if (has_tensor) {
            a->type = RL_ARG_TENSORLIST;
            a->first = (int32_t)b->ntensors;
            for (Py_ssize_t i = 0; i < n; i++) {
                if (items[i] != Py_None && is_tensor(r, items[i])) {
                    if (push_tensor(b, items[i]) < 0) {
                        return -1;
                    }
                    a->count++;
                }
            }
        } else if (all_int) { /* includes the empty list and bool lists */
            a->type = (all_bool && n > 0) ? RL_ARG_BOOLLIST : RL_ARG_INTLIST;
            if (grow((void **)&r->ints, &r->cap_ints, b->nints + n, sizeof(int64_t)) < 0) {
                return -1;
            }
            a->first = (int32_t)b->nints;
            a->count = (int32_t)n;
            for (Py_ssize_t i = 0; i < n; i++) {
                long long x = PyLong_AsLongLong(items[i]);
                if (x == -1 && PyErr_Occurred()) {
                    PyErr_Clear();
                    x = 0;
                    b->bad = 1;
                }
                r->ints[b->nints++] = x;
            }
        } else {
            a->type = RL_ARG_OTHER;
        }
    } else {
        a->type = RL_ARG_OTHER;
    }
    return 0;
}

/* Flatten outputs (a tensor, None, or tuples/lists of those, nested once) into r->outs. None inside a sequence
 * keeps its position as an absent output (ndim -1). Returns the count, or -1 with an exception set. */
static int add_out(builder *b, Py_ssize_t *n, PyObject *o) {
    Recorder *r = b->r;
    if (grow((void **)&r->outs, &r->cap_outs, *n + 1, sizeof(rl_tensor)) < 0) {
        return -1;
    }
    rl_tensor *d = &r->outs[*n];
    if (o == Py_None) {
        d->ndim = -1;
        d->dtype = RL_DT_UNKNOWN;
    } else if (describe(b, o, d) < 0) {
        return -1;
    }
    (*n)++;
    return 0;
}

static Py_ssize_t flatten_outs(builder *b, PyObject *out) {
    Recorder *r = b->r;
    Py_ssize_t n = 0;
    if (is_tensor(r, out)) {
        return add_out(b, &n, out) < 0 ? -1 : n;
    }
    if (!(PyTuple_Check(out) || PyList_Check(out))) {
        return 0;
    }
    Py_ssize_t m = PySequence_Fast_GET_SIZE(out);
    PyObject **items = PySequence_Fast_ITEMS(out);
    for (Py_ssize_t i = 0; i < m; i++) {
        PyObject *o = items[i];
        if (o == Py_None || is_tensor(r, o)) {
            if (add_out(b, &n, o) < 0) {
                return -1;
            }
        } else if (PyTuple_Check(o) || PyList_Check(o)) {
            Py_ssize_t k = PySequence_Fast_GET_SIZE(o);
            PyObject **sub = PySequence_Fast_ITEMS(o);
            for (Py_ssize_t j = 0; j < k; j++) {
                if (is_tensor(r, sub[j]) && add_out(b, &n, sub[j]) < 0) {
                    return -1;
                }
            }
        }
    }
    return n;
}

/* ---- Recorder methods ----------------------------------------------------------------------------------- */

static int Recorder_init(Recorder *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"tensor_type", "dtype_map", NULL};
    PyObject *tt, *dm;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO!:Recorder", kwlist, &tt, &PyDict_Type, &dm)) {
        return -1;
    }
    if (!PyType_Check(tt)) {
        PyErr_SetString(PyExc_TypeError, "Recorder: tensor_type must be a type");
        return -1;
    }
    Py_XSETREF(self->tensor_type, Py_NewRef(tt));
    Py_XSETREF(self->dtype_map, Py_NewRef(dm));
    if (!self->s_shape) {
        self->s_shape = PyUnicode_InternFromString("shape");
        self->s_stride = PyUnicode_InternFromString("stride");
        self->s_dtype = PyUnicode_InternFromString("dtype");
        if (!self->s_shape || !self->s_stride || !self->s_dtype) {
            return -1;
        }
    }
    return 0;
}

static int Recorder_traverse(Recorder *self, visitproc visit, void *arg) {
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->tensor_type);
    Py_VISIT(self->dtype_map);
    for (Py_ssize_t i = 0; i < self->nops; i++) {
        Py_VISIT(self->ops[i].kwnames);
    }
    return 0;
}

static int Recorder_clear(Recorder *self) {
    Py_CLEAR(self->tensor_type);
    Py_CLEAR(self->dtype_map);
    for (Py_ssize_t i = 0; i < self->nops; i++) {
        Py_CLEAR(self->ops[i].kwnames);
    }
    return 0;
}

static void Recorder_dealloc(Recorder *self) {
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    Recorder_clear(self);
    Py_CLEAR(self->s_shape);
    Py_CLEAR(self->s_stride);
    Py_CLEAR(self->s_dtype);
    PyMem_Free(self->ops);
    PyMem_Free(self->recs);
    PyMem_Free(self->tensors);
    PyMem_Free(self->ints);
    PyMem_Free(self->outs);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

static PyObject *Recorder_add_op(Recorder *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"kind", "p1", "p2", "noread_mask", "write_mask", "flags", "kwnames", "kwpos", NULL};
    int kind;
    long long p1 = 0, p2 = 0;
    unsigned long long noread = 0, write = 0;
    unsigned int flags = 0;
    PyObject *kwnames = Py_None;
    Py_ssize_t kwpos = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "i|LLKKIOn:add_op", kwlist, &kind, &p1, &p2, &noread, &write,
                                     &flags, &kwnames, &kwpos)) {
        return NULL;
    }
    if (kind < 0 || kind >= RL_K_COUNT) {
        return rl_err_value("add_op: kind %d is not a cost kind (0..%d)", kind, RL_K_COUNT - 1);
    }
    if (kwnames != Py_None && !PyTuple_Check(kwnames)) {
        PyErr_SetString(PyExc_TypeError, "add_op: kwnames must be a tuple of str or None");
        return NULL;
    }
    if (grow((void **)&self->ops, &self->cap_ops, self->nops + 1, sizeof(op_entry)) < 0) {
        return NULL;
    }
    op_entry *e = &self->ops[self->nops];
    e->op.kind = kind;
    e->op.p1 = p1;
    e->op.p2 = p2;
    e->op.noread_mask = noread;
    e->op.write_mask = write;
    e->op.flags = flags;
    e->kwnames = (kwnames != Py_None && PyTuple_GET_SIZE(kwnames) > 0) ? Py_NewRef(kwnames) : NULL;
    e->kwpos = kwpos;
    return PyLong_FromSsize_t(self->nops++);
}

/* Fill an rl_call from (args, kwargs, out) for op `e`. Returns 0 or -1 with an exception set. */
static int build_call(Recorder *self, op_entry *e, PyObject *args, PyObject *kwargs, PyObject *out, rl_call *call,
                      int *bad) {
    builder b = {self, 0, 0, 0};
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
    for (Py_ssize_t i = 0; i < npos; i++) {
        if (convert_arg(&b, PyTuple_GET_ITEM(args, i), &call->args[i]) < 0) {
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
        if (kwargs && kwargs != Py_None) {
            v = PyDict_GetItemWithError(kwargs, PyTuple_GET_ITEM(e->kwnames, k));
            if (!v && PyErr_Occurred()) {
                return -1;
            }
        }
        if (!v) {
            memset(a, 0, sizeof(*a));
            a->type = RL_ARG_ABSENT;
        } else if (convert_arg(&b, v, a) < 0) {
            return -1;
        }
    }
    Py_ssize_t nouts = flatten_outs(&b, out);
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

/* Append one record with the counts of `c` (its dtype included). 0, or -1 with MemoryError set. */
static int push_record(Recorder *self, Py_ssize_t opi, uint32_t module, uint32_t phase, uint32_t status,
                       const rl_cost *c, double t0, double t1) {
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
    rec->compat_flops = c->compat;
    rec->t_start = t0;
    rec->t_end = t1;
    rec->op = (uint32_t)opi;
    rec->module = module;
    rec->phase = (uint8_t)phase;
    rec->dtype = (uint8_t)c->dtype;
    rec->status = (uint8_t)status;
    rec->kind = (uint8_t)self->ops[opi].op.kind;
    rec->seq = self->seq++;
    return 0;
}

/* record(op, module, phase, args, kwargs, out, t_start=nan, t_end=nan) */
static PyObject *Recorder_record(Recorder *self, PyObject *const *argv, Py_ssize_t argc) {
    if (argc < 6 || argc > 8) {
        PyErr_SetString(PyExc_TypeError, "record(op, module, phase, args, kwargs, out[, t_start, t_end])");
        return NULL;
    }
    Py_ssize_t opi = PyLong_AsSsize_t(argv[0]);
    long module = PyLong_AsLong(argv[1]);
    long phase = PyLong_AsLong(argv[2]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (opi < 0 || opi >= self->nops) {
        return rl_err_value("record: op index %zd was not registered with add_op", opi);
    }
    if (!PyTuple_Check(argv[3])) {
        PyErr_SetString(PyExc_TypeError, "record: args must be a tuple");
        return NULL;
    }
    double t0 = NAN, t1 = NAN;
    if (argc > 6 && (t0 = PyFloat_AsDouble(argv[6])) == -1.0 && PyErr_Occurred()) {
        return NULL;
    }
    if (argc > 7 && (t1 = PyFloat_AsDouble(argv[7])) == -1.0 && PyErr_Occurred()) {
        return NULL;
    }
    op_entry *e = &self->ops[opi];
    rl_call call;
    int bad = 0;
    if (build_call(self, e, argv[3], argv[4], argv[5], &call, &bad) < 0) {
        return NULL;
    }
    rl_cost c;
    int st = rl_cost_eval(&e->op, &call, &c);
    if (st == RL_OK && bad && e->op.kind != RL_K_ZERO) {
        st = RL_E_DESCRIBE;
    }
    if (st != RL_OK) {
        memset(&c, 0, sizeof(c));
    }
    if (push_record(self, opi, (uint32_t)module, (uint32_t)phase, (uint32_t)st, &c, t0, t1) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* append(op, module, phase, dtype, matrix, vector, special, bytes_read, bytes_written, compat[, status]): a record
 * whose counts were computed elsewhere (a formula registered from Python). */
static PyObject *Recorder_append(Recorder *self, PyObject *args) {
    Py_ssize_t opi;
    unsigned int module, phase, dtype, status = RL_OK;
    unsigned long long m, v, sp, br, bw, cp;
    if (!PyArg_ParseTuple(args, "nIIIKKKKKK|I:append", &opi, &module, &phase, &dtype, &m, &v, &sp, &br, &bw, &cp,
                          &status)) {
        return NULL;
    }
    if (opi < 0 || opi >= self->nops) {
        return rl_err_value("append: op index %zd was not registered with add_op", opi);
    }
    rl_cost c = {m, v, sp, br, bw, cp, (int32_t)dtype};
    if (push_record(self, opi, module, phase, status, &c, NAN, NAN) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *Recorder_records_bytes(Recorder *self, PyObject *Py_UNUSED(ignored)) {
    return PyBytes_FromStringAndSize((const char *)self->recs, self->nrecs * (Py_ssize_t)sizeof(rl_record));
}

static PyObject *Recorder_set_times(Recorder *self, PyObject *args) {
    Py_ssize_t i;
    double t0, t1;
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

static PyObject *Recorder_clear_records(Recorder *self, PyObject *Py_UNUSED(ignored)) {
    self->nrecs = 0;
    self->seq = 0;
    Py_RETURN_NONE;
}

static Py_ssize_t Recorder_len(Recorder *self) { return self->nrecs; }

static PyMethodDef Recorder_methods[] = {
    {"add_op", (PyCFunction)(void (*)(void))Recorder_add_op, METH_VARARGS | METH_KEYWORDS,
     "add_op(kind, p1=0, p2=0, noread_mask=0, write_mask=0, flags=0, kwnames=None) -> int\n"
     "Register an op's cost formula; returns the index record() takes."},
    {"record", (PyCFunction)(void (*)(void))Recorder_record, METH_FASTCALL,
     "record(op, module, phase, args, kwargs, out, t_start=nan, t_end=nan)\n"
     "Evaluate the cost of one call and append a record."},
    {"append", (PyCFunction)Recorder_append, METH_VARARGS,
     "append(op, module, phase, dtype, matrix, vector, special, bytes_read, bytes_written, compat[, status])"},
    {"records_bytes", (PyCFunction)Recorder_records_bytes, METH_NOARGS, "The records as raw bytes (RECORD_DTYPE)."},
    {"set_times", (PyCFunction)Recorder_set_times, METH_VARARGS, "set_times(i, t_start, t_end)"},
    {"clear", (PyCFunction)Recorder_clear_records, METH_NOARGS, "Drop all records (registered ops are kept)."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot Recorder_slots[] = {
    {Py_tp_doc, "Recorder(tensor_type, dtype_map): per-op cost evaluation into a C array of records."},
    {Py_tp_init, Recorder_init},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_dealloc, Recorder_dealloc},
    {Py_tp_traverse, Recorder_traverse},
    {Py_tp_clear, Recorder_clear},
    {Py_tp_methods, Recorder_methods},
    {Py_sq_length, Recorder_len},
    {Py_mp_length, Recorder_len},
    {0, NULL},
};

static PyType_Spec Recorder_spec = {
    .name = "roofline._core.Recorder",
    .basicsize = sizeof(Recorder),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = Recorder_slots,
};

/* ---- module-level functions ------------------------------------------------------------------------------ */

static PyObject *dtype_table(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored)) {
    PyObject *lst = PyList_New(0);
    if (!lst) {
        return NULL;
    }
    for (int i = 1; i < RL_DT_COUNT; i++) {
        PyObject *t = Py_BuildValue("(isI)", i, rl_dtype_name(i), rl_dtype_itemsize(i));
        if (!t || PyList_Append(lst, t) < 0) {
            Py_XDECREF(t);
            Py_DECREF(lst);
            return NULL;
        }
        Py_DECREF(t);
    }
    return lst;
}

static PyObject *status_str(PyObject *Py_UNUSED(m), PyObject *arg) {
    long st = PyLong_AsLong(arg);
    if (st == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (st == RL_E_DESCRIBE) {
        return PyUnicode_FromString("an argument could not be described (symbolic shape, sparse or nested layout)");
    }
    return PyUnicode_FromString(rl_status_str((int)st));
}

PyMethodDef rl_cost_methods[] = {
    {"dtype_table", dtype_table, METH_NOARGS, "[(code, name, itemsize)] of the cost model's scalar types."},
    {"status_str", status_str, METH_O, "Text of a record status code."},
    {NULL, NULL, 0, NULL},
};

int rl_cost_exec(PyObject *module) {
    PyObject *tp = PyType_FromModuleAndSpec(module, &Recorder_spec, NULL);
    if (!tp) {
        return -1;
    }
    int rc = PyModule_AddObjectRef(module, "Recorder", tp);
    Py_DECREF(tp);
    if (rc < 0) {
        return -1;
    }
    if (PyModule_AddIntConstant(module, "RECORD_SIZE", (long)sizeof(rl_record)) < 0) {
        return -1;
    }
    static const struct {
        const char *name;
        int value;
    } kinds[] = {
        {"K_ZERO", RL_K_ZERO},       {"K_COPY", RL_K_COPY},         {"K_FILL", RL_K_FILL},
        {"K_EWISE", RL_K_EWISE},     {"K_EWISE_IN", RL_K_EWISE_IN}, {"K_MM", RL_K_MM},
        {"K_ADDMM", RL_K_ADDMM},     {"K_BMM", RL_K_BMM},           {"K_BADDBMM", RL_K_BADDBMM},
        {"K_SCALED_MM", RL_K_SCALED_MM}, {"K_CONV", RL_K_CONV},     {"K_CONV_BWD", RL_K_CONV_BWD},
        {"K_ATTN", RL_K_ATTN},       {"K_ATTN_BWD", RL_K_ATTN_BWD}, {"K_GATHER", RL_K_GATHER},
        {"K_POOL", RL_K_POOL},       {"K_NLL", RL_K_NLL},           {"K_FOREACH", RL_K_FOREACH},
        {"K_MHA", RL_K_MHA},
        {"ATTN_BSHD", RL_ATTN_BSHD}, {"ATTN_MASKTYPE", RL_ATTN_MASKTYPE}, {"ATTN_FCM", RL_ATTN_FCM},
        {"ATTN_FCM_BSHD", RL_ATTN_FCM_BSHD}, {"OPF_FCM", (int)RL_OPF_FCM}, {"MAX_ARGS", RL_MAX_ARGS},
        {"MAX_DIMS", RL_MAX_DIMS},   {"E_DESCRIBE", RL_E_DESCRIBE}, {"E_OVERFLOW", RL_E_OVERFLOW},
    };
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        if (PyModule_AddIntConstant(module, kinds[i].name, kinds[i].value) < 0) {
            return -1;
        }
    }
    return 0;
}
