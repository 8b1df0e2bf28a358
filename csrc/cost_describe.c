/* How the Recorder describes one op call's Python values (tensors by shape, strides and dtype; scalars; int lists)
 * into an rl_call, and the capture of each call's signature and dataflow rows (capture.h). */
#include "cost_binding.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- describing Python values -------------------------------------------------------------------------- */


/* Raise `exc` with "<op>: <argument N[, element M]>: <detail>". Returns -1. */
static int arg_error(const builder *b, PyObject *exc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    PyObject *detail = PyUnicode_FromFormatV(fmt, ap);
    va_end(ap);
    if (!detail) {
        return -1;
    }
    PyObject *label = op_label(b->e, b->opi);
    if (!label) {
        Py_DECREF(detail);
        return -1;
    }
    if (b->elem >= 0) {
        PyErr_Format(exc, "%.200U: %s %zd, element %zd: %U", label, b->where, b->pos, b->elem, detail);
    } else {
        PyErr_Format(exc, "%.200U: %s %zd: %U", label, b->where, b->pos, detail);
    }
    Py_DECREF(label);
    Py_DECREF(detail);
    return -1;
}

/* "(a, b, c)" of the first n sizes into buf (always fits: at most RL_MAX_DIMS 20-digit numbers). */
static const char *format_dims(const int64_t *v, int n, char *buf, size_t cap) {
    size_t k = 0;
    k += (size_t)snprintf(buf + k, cap - k, "(");
    for (int i = 0; i < n && k < cap; i++) {
        k += (size_t)snprintf(buf + k, cap - k, i ? ", %lld" : "%lld", (long long)v[i]);
    }
    if (k < cap) {
        snprintf(buf + k, cap - k, n == 1 ? ",)" : ")");
    }
    return buf;
}

/* Python code run on a tensor (shape, stride(), dtype) raised. An ordinary error (e.g. a layout without strides,
 * a symbolic size) means the tensor cannot be described: the exception is cleared and 0 returned. MemoryError and
 * the exceptions that are not errors of the tensor (KeyboardInterrupt, SystemExit, ...) propagate: -1. */
static int soft_error(void) {
    if (PyErr_ExceptionMatches(PyExc_Exception) && !PyErr_ExceptionMatches(PyExc_MemoryError)) {
        PyErr_Clear();
        return 0;
    }
    return -1;
}

/* The attribute `name` of type `tp`: a new reference, NULL (no exception) when it is missing or not of type `want`. */
PyObject *rl_type_descr(PyTypeObject *tp, PyObject *name, PyTypeObject *want) {
    PyObject *d = PyObject_GetAttr((PyObject *)tp, name);
    if (!d) {
        PyErr_Clear();
        return NULL;
    }
    if (Py_TYPE(d) != want) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

/* Whether tensor `t`'s shape, stride() and dtype are tensor_type's descriptors (the type of `t` has a valid version
 * tag and resolves the three names to the same objects), so that they can be called directly: the same getter and
 * method attribute access would run, without the lookups through the type's MRO. A type that changes (an attribute
 * set on it or a base) gets a new version tag and is checked again. A `stride` set on one tensor instance (a method
 * shadowed in its __dict__) is not seen: torch's own operators do not see it either. 1 or 0, never an exception. */
static int plain_tensor(Recorder *r, PyObject *t) {
    PyTypeObject *tp = Py_TYPE(t);
    if (!r->d_shape || !PyType_HasFeature(tp, Py_TPFLAGS_VALID_VERSION_TAG)) {
        return 0;
    }
    unsigned int tag = tp->tp_version_tag;
    for (int i = 0; i < RL_PLAIN_TYPES; i++) {
        if (r->plain[i] == tp && r->plain_tag[i] == tag) {
            return 1;
        }
    }
    PyObject *names[3] = {r->state->s_shape, r->state->s_stride, r->state->s_dtype};
    PyObject *want[3] = {r->d_shape, r->d_stride, r->d_dtype};
    for (int k = 0; k < 3; k++) {
        PyObject *d = rl_type_descr(tp, names[k], Py_TYPE(want[k]));
        Py_XDECREF(d);
        if (d != want[k]) {
            return 0;
        }
    }
    if (!PyType_HasFeature(tp, Py_TPFLAGS_VALID_VERSION_TAG) || tp->tp_version_tag != tag) {
        return 0; /* changed while it was looked up */
    }
    r->plain[r->plain_next] = tp;
    r->plain_tag[r->plain_next] = tag;
    r->plain_next = (r->plain_next + 1) % RL_PLAIN_TYPES;
    return 1;
}

/* Call getset descriptor `d` on `t` (what `t.<name>` runs for a data descriptor). */
static PyObject *get_descr(PyObject *d, PyObject *t) { return Py_TYPE(d)->tp_descr_get(d, t, (PyObject *)Py_TYPE(t)); }

/* `value` (a new reference, or NULL with an exception: an attribute just read) in *out. Returns 1; 0 when it could
 * not be read for an ordinary reason (b->bad is set: the tensor is not described); -1 with an exception set for
 * MemoryError and non-Exception errors. */
static int soft_result(builder *b, PyObject *value, PyObject **out) {
    *out = value;
    if (value != NULL) {
        return 1;
    }
    if (soft_error() < 0) {
        return -1;
    }
    b->bad = 1;
    return 0;
}

/* t.<name> as a new reference in *out, as soft_result returns it. */
static int soft_getattr(builder *b, PyObject *t, PyObject *name, PyObject **out) {
    return soft_result(b, PyObject_GetAttr(t, name), out);
}

/* Read the tuple `seq` of ints into dst (at most RL_MAX_DIMS). `what` ("shape" or "stride()") names it in errors.
 * Returns ndim; -1 without an exception when `seq` is not a tuple of ints (e.g. symbolic sizes) or has more than
 * RL_MAX_DIMS entries: the tensor cannot be described; -2 with an exception for values no tensor has: a bool, a
 * value beyond 64 bits, a negative size (`sizes` set). No Python code runs here. */
static int read_dims(const builder *b, PyObject *seq, const char *what, int sizes, int64_t *dst) {
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
        if (PyBool_Check(v)) {
            arg_error(b, PyExc_TypeError, "%s[%zd] is a bool, not an int", what, i);
            return -2;
        }
        int sign = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &sign);
        if (x == -1 && PyErr_Occurred()) {
            return -2;
        }
        if (sign != 0) {
            arg_error(b, PyExc_OverflowError, "%s[%zd] does not fit in a signed 64-bit integer", what, i);
            return -2;
        }
        if (sizes && x < 0) {
            arg_error(b, PyExc_ValueError, "%s[%zd] = %lld is negative", what, i, x);
            return -2;
        }
        dst[i] = x;
    }
    return (int)n;
}

/* Whether `d`'s strides are those oneDNN's opaque layout reports, (1, 0, 0, ...), over more than one element in
 * the dimensions after the first (where they would be taken for a broadcast). A real broadcast can have them too
 * (a column expanded along rows): opaque_layout tells the two apart. */
static int onednn_strides(const rl_tensor *d) {
    if (d->ndim < 2 || d->stride[0] != 1) {
        return 0;
    }
    int wide = 0;
    for (int i = 1; i < d->ndim; i++) {
        if (d->stride[i] != 0) {
            return 0;
        }
        wide |= d->size[i] > 1;
    }
    return wide;
}

/* Whether tensor `t` is in oneDNN's opaque layout (t.is_mkldnn), whose strides are not its memory's: 1, 0 (no, or
 * not a torch tensor), or -1 for an error other than an ordinary Exception. Asked only of a tensor with the strides
 * that layout reports (onednn_strides), so that other tensors pay nothing for it. */
static int opaque_layout(PyObject *t, const rl_state *st) {
    PyObject *v = PyObject_GetAttr(t, st->s_is_mkldnn);
    if (!v) {
        return soft_error() < 0 ? -1 : 0;
    }
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r < 0 ? (soft_error() < 0 ? -1 : 0) : r;
}

/* Describe tensor `t` into *d (the caller's own storage: Python code runs here, which may reallocate the
 * recorder's arrays). Returns 0, or -1 with an exception set: MemoryError, or a shape/stride no tensor can have
 * (named in the message). A tensor that cannot be described (no strides, symbolic sizes, too many dimensions)
 * sets b->bad and is recorded as well as possible. */
static int describe(builder *b, PyObject *t, rl_tensor *d, uint64_t *storage) {
    Recorder *r = b->r;
    char buf[RL_MAX_DIMS * 24 + 8];
    memset(d, 0, sizeof(*d));
    *storage = 0;
    if (r->storage_fn) { /* a storage that cannot be named (a sparse layout, say) gives no dataflow row */
        PyObject *sid = PyObject_CallOneArg(r->storage_fn, t);
        if (sid) {
            unsigned long long v = PyLong_Check(sid) ? PyLong_AsUnsignedLongLong(sid) : 0;
            Py_DECREF(sid);
            if (v == (unsigned long long)-1 && PyErr_Occurred()) {
                v = 0;
                if (soft_error() < 0) {
                    return -1;
                }
            }
            *storage = v;
        } else if (soft_error() < 0) {
            return -1;
        }
    }
    d->ndim = 0;
    d->dtype = RL_DT_UNKNOWN;
    int plain = plain_tensor(r, t);
    PyObject *shape;
    int got = plain ? soft_result(b, get_descr(r->d_shape, t), &shape) : soft_getattr(b, t, r->state->s_shape, &shape);
    if (got <= 0) {
        return got;
    }
    int nd = read_dims(b, shape, "shape", 1, d->size);
    Py_DECREF(shape);
    if (nd == -2) {
        return -1;
    }
    if (nd < 0) {
        b->bad = 1;
        return 0;
    }
    /* A tensor's element count fits in int64 (torch checks it): a shape whose count does not is refused here,
     * before any count is derived from it. */
    int64_t numel = 1;
    int empty = 0, ovf = 0;
    for (int i = 0; i < nd; i++) {
        if (d->size[i] == 0) {
            empty = 1;
        } else if (__builtin_mul_overflow(numel, d->size[i], &numel)) {
            ovf = 1;
        }
    }
    if (ovf && !empty) {
        return arg_error(b, PyExc_OverflowError, "shape %s has 2**63 or more elements (does not fit in 64 bits)",
                         format_dims(d->size, nd, buf, sizeof(buf)));
    }
    d->ndim = nd;
    PyObject *stride = plain ? PyObject_Vectorcall(r->d_stride, &t, 1, NULL)
                             : PyObject_CallMethodNoArgs(t, r->state->s_stride);
    int ns = -1;
    if (stride) {
        ns = read_dims(b, stride, "stride()", 0, d->stride);
        Py_DECREF(stride);
        if (ns == -2) {
            return -1;
        }
    } else if (soft_error() < 0) { /* e.g. sparse or nested layouts have no strides */
        return -1;
    }
    if (ns == nd && onednn_strides(d)) {
        int opaque = opaque_layout(t, r->state);
        if (opaque < 0) {
            return -1;
        }
        ns = opaque ? -1 : ns; /* oneDNN's layout reports strides (1, 0, 0, ...), which say broadcast: not usable */
    }
    if (ns != nd) {
        /* no usable strides: describe as contiguous, and say the bytes are an estimate */
        int64_t s = 1;
        for (int i = nd - 1; i >= 0; i--) {
            d->stride[i] = s;
            if (i > 0 && __builtin_mul_overflow(s, d->size[i] > 0 ? d->size[i] : 1, &s)) {
                return arg_error(b, PyExc_OverflowError,
                                 "the contiguous strides of shape %s do not fit in 64 bits",
                                 format_dims(d->size, nd, buf, sizeof(buf)));
            }
        }
        b->bad = 1;
    }
    PyObject *dt;
    got = plain ? soft_result(b, get_descr(r->d_dtype, t), &dt) : soft_getattr(b, t, r->state->s_dtype, &dt);
    if (got <= 0) {
        return got;
    }
    PyObject *code = PyDict_GetItemWithError(r->dtype_map, dt);
    Py_XINCREF(code);
    Py_DECREF(dt);
    if (!code) {
        if (PyErr_Occurred() && soft_error() < 0) { /* an unhashable dtype: not one the map knows */
            return -1;
        }
        return 0;
    }
    if (!PyLong_Check(code)) {
        PyErr_Format(PyExc_TypeError, "Recorder: dtype_map values must be int codes, got %.100s",
                     Py_TYPE(code)->tp_name);
        Py_DECREF(code);
        return -1;
    }
    long v = PyLong_AsLong(code);
    Py_DECREF(code);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (v < 0 || v >= RL_DT_COUNT) {
        PyErr_Format(PyExc_ValueError, "Recorder: dtype_map code %ld is not a dtype code (0..%d)", v,
                     RL_DT_COUNT - 1);
        return -1;
    }
    d->dtype = (int32_t)v;
    return 0;
}

static int is_tensor(Recorder *r, PyObject *o) { return PyObject_TypeCheck(o, (PyTypeObject *)r->tensor_type); }

/* Describe `t` and append it to the call's tensors. The description is complete before the array is touched. */
static int push_tensor(builder *b, PyObject *t) {
    Recorder *r = b->r;
    rl_tensor d;
    uint64_t sid;
    if (describe(b, t, &d, &sid) < 0) {
        return -1;
    }
    if (b->ntensors >= INT32_MAX) {
        return arg_error(b, PyExc_OverflowError, "more than 2**31 tensors in one call");
    }
    if (grow((void **)&r->tensors, &r->cap_tensors, b->ntensors + 1, sizeof(rl_tensor)) < 0 ||
        grow((void **)&r->tstor, &r->cap_tstor, b->ntensors + 1, sizeof(uint64_t)) < 0 ||
        grow((void **)&r->tobj, &r->cap_tobj, b->ntensors + 1, sizeof(PyObject *)) < 0) {
        return -1;
    }
    r->tobj[b->ntensors] = t;
    r->tstor[b->ntensors] = sid;
    r->tensors[b->ntensors++] = d;
    return 0;
}

/* Convert one argument value (a reference the caller keeps alive) into *a. Returns 0 or -1 with an exception. */
int rl_convert_arg(builder *b, PyObject *v, rl_arg *a) {
    Recorder *r = b->r;
    memset(a, 0, sizeof(*a));
    b->elem = -1;
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
        /* a scalar beyond 64 bits (e.g. a uint64 fill value) is not interpreted */
        int sign = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &sign);
        if (x == -1 && PyErr_Occurred()) {
            return -1;
        }
        if (sign != 0) {
            a->type = RL_ARG_OTHER;
        } else {
            a->type = RL_ARG_INT;
            a->i = x;
        }
    } else if (PyFloat_Check(v)) {
        a->type = RL_ARG_FLOAT;
        a->f = PyFloat_AS_DOUBLE(v);
    } else if (PyList_Check(v) || PyTuple_Check(v)) {
        /* Classify the items: type checks only, no Python code runs, so the borrowed item array stays valid. */
        Py_ssize_t n = PySequence_Fast_GET_SIZE(v);
        PyObject **items = PySequence_Fast_ITEMS(v);
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
            /* describe() runs Python code, which may mutate a list: walk a tuple copy that owns its items. */
            PyObject *tup = PyList_Check(v) ? PyList_AsTuple(v) : Py_NewRef(v);
            if (!tup) {
                return -1;
            }
            a->type = RL_ARG_TENSORLIST;
            a->first = (int32_t)b->ntensors;
            for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tup); i++) {
                PyObject *it = PyTuple_GET_ITEM(tup, i);
                if (it != Py_None && is_tensor(r, it)) {
                    b->elem = i;
                    if (push_tensor(b, it) < 0) {
                        Py_DECREF(tup);
                        return -1;
                    }
                    a->count++;
                }
            }
            b->elem = -1;
            Py_DECREF(tup);
        } else if (all_int && n > RL_MAX_INTLIST) {
            a->type = RL_ARG_OTHER; /* longer than any list a formula reads: not copied */
        } else if (all_int) {       /* includes the empty list and bool lists */
            a->type = (all_bool && n > 0) ? RL_ARG_BOOLLIST : RL_ARG_INTLIST;
            /* check every value first (no Python code runs: the items are ints), then fill the scratch array */
            for (Py_ssize_t i = 0; i < n; i++) {
                int sign = 0;
                long long x = PyLong_AsLongLongAndOverflow(items[i], &sign);
                if (x == -1 && PyErr_Occurred()) {
                    return -1;
                }
                if (sign != 0) {
                    b->elem = i;
                    return arg_error(b, PyExc_OverflowError, "does not fit in a signed 64-bit integer");
                }
            }
            if (grow((void **)&r->ints, &r->cap_ints, b->nints + n, sizeof(int64_t)) < 0) {
                return -1;
            }
            a->first = (int32_t)b->nints;
            a->count = (int32_t)n;
            for (Py_ssize_t i = 0; i < n; i++) {
                r->ints[b->nints++] = PyLong_AsLongLong(items[i]);
            }
        } else {
            a->type = RL_ARG_OTHER;
        }
    } else {
        a->type = RL_ARG_OTHER;
    }
    return 0;
}

/* Describe one output (a tensor, or None: an absent output, ndim -1) and append it to the call's outputs. */
static int add_out(builder *b, Py_ssize_t *n, PyObject *o) {
    Recorder *r = b->r;
    rl_tensor d;
    uint64_t sid = 0;
    b->pos = *n;
    /* An output that is one of the arguments (an in-place op returns its `self`) has the description the argument
     * got: both were described after the op ran, and two objects alive at once are never at one address. */
    Py_ssize_t same = -1;
    for (Py_ssize_t i = 0; o != Py_None && i < b->ntensors && i < 16; i++) {
        if (r->tobj[i] == o) {
            same = i;
            break;
        }
    }
    if (o == Py_None) {
        memset(&d, 0, sizeof(d));
        d.ndim = -1;
        d.dtype = RL_DT_UNKNOWN;
    } else if (same >= 0) {
        d = r->tensors[same];
        sid = r->tstor[same];
    } else if (describe(b, o, &d, &sid) < 0) {
        return -1;
    }
    if (*n >= INT32_MAX) {
        return arg_error(b, PyExc_OverflowError, "more than 2**31 outputs");
    }
    if (grow((void **)&r->outs, &r->cap_outs, *n + 1, sizeof(rl_tensor)) < 0 ||
        grow((void **)&r->ostor, &r->cap_ostor, *n + 1, sizeof(uint64_t)) < 0) {
        return -1;
    }
    r->ostor[*n] = sid;
    r->outs[(*n)++] = d;
    return 0;
}

/* Flatten outputs (a tensor, None, or tuples/lists of those, nested once) into r->outs. None inside a sequence
 * keeps its position as an absent output. Lists are walked as tuple copies: describe() runs Python code. Returns
 * the count, or -1 with an exception set. */
Py_ssize_t rl_flatten_outs(builder *b, PyObject *out) {
    Recorder *r = b->r;
    Py_ssize_t n = 0;
    b->where = "output";
    b->elem = -1;
    if (is_tensor(r, out)) {
        return add_out(b, &n, out) < 0 ? -1 : n;
    }
    if (!(PyTuple_Check(out) || PyList_Check(out))) {
        return 0;
    }
    PyObject *tup = PyList_Check(out) ? PyList_AsTuple(out) : Py_NewRef(out);
    if (!tup) {
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tup); i++) {
        PyObject *o = PyTuple_GET_ITEM(tup, i);
        if (o == Py_None || is_tensor(r, o)) {
            if (add_out(b, &n, o) < 0) {
                goto fail;
            }
        } else if (PyTuple_Check(o) || PyList_Check(o)) {
            PyObject *sub = PyList_Check(o) ? PyList_AsTuple(o) : Py_NewRef(o);
            if (!sub) {
                goto fail;
            }
            for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(sub); j++) {
                PyObject *s = PyTuple_GET_ITEM(sub, j);
                if (is_tensor(r, s) && add_out(b, &n, s) < 0) {
                    Py_DECREF(sub);
                    goto fail;
                }
            }
            Py_DECREF(sub);
        }
    }
    Py_DECREF(tup);
    return n;
fail:
    Py_DECREF(tup);
    return -1;
}

/* ---- capture (capture.h) -------------------------------------------------------------------------------- */

/* The id of signature key[0..len); a new one gets its text appended to `sigs`. 0, or -1 with an exception. */
int rl_intern_signature(Recorder *self, const int64_t *key, size_t len, uint32_t *id) {
    if (rl_sig_find(&self->sigtab, key, len, id)) {
        return 0;
    }
    /* the text is made when `signatures` is read (format_signatures), not during the measured block */
    if (rl_sig_add(&self->sigtab, key, len, id) < 0) {
        PyErr_SetString(PyExc_MemoryError, "Recorder: no memory for another call signature (or 2**32 of them)");
        return -1;
    }
    return 0;
}

/* Append to `sigs` the texts of the interned signatures it does not list yet (ids len(sigs) .. n - 1). 0, or -1
 * with an exception (then `sigs` lists a prefix of them: a later read goes on from there). */
int rl_format_signatures(Recorder *self) {
    const rl_sigtab *t = &self->sigtab;
    Py_ssize_t have = PyList_GET_SIZE(self->sigs);
    if ((size_t)have >= t->n) {
        return 0;
    }
    size_t *off = PyMem_Malloc(2 * t->n * sizeof(size_t)), *len = off + t->n;
    if (!off) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < t->cap; i++) { /* each id's key: the table's slots, one per id */
        if (t->tab[i].used) {
            off[t->tab[i].id] = t->tab[i].off;
            len[t->tab[i].id] = t->tab[i].len;
        }
    }
    char small[512];
    int rc = 0;
    for (size_t id = (size_t)have; id < t->n && rc == 0; id++) {
        const int64_t *key = t->keys ? t->keys + off[id] : NULL;
        char *buf = small;
        size_t need = rl_sig_format(key, len[id], small, sizeof(small));
        if (need >= sizeof(small)) {
            buf = PyMem_Malloc(need + 1);
            if (!buf) {
                PyErr_NoMemory();
                rc = -1;
                break;
            }
            rl_sig_format(key, len[id], buf, need + 1);
        }
        PyObject *text = PyUnicode_FromStringAndSize(buf, (Py_ssize_t)need);
        if (buf != small) {
            PyMem_Free(buf);
        }
        rc = text ? PyList_Append(self->sigs, text) : -1;
        Py_XDECREF(text);
    }
    PyMem_Free(off);
    return rc;
}

/* The signature and the dataflow rows of record `rec`, whose call is `call` with cost `c` under `op`. 0, or -1
 * with an exception set (then nothing was added). */
int rl_capture_call(Recorder *self, const rl_op *op, const rl_call *call, const rl_cost *c, Py_ssize_t rec) {
    if (rec > (Py_ssize_t)UINT32_MAX && (self->signatures || self->storage_fn)) {
        PyErr_SetString(PyExc_OverflowError, "Recorder: more than 2**32 records in one recorder with capture on");
        return -1;
    }
    if (self->signatures) {
        size_t need = rl_sig_key(call, self->keybuf, (size_t)self->cap_keybuf);
        if (need > (size_t)self->cap_keybuf) {
            if (grow((void **)&self->keybuf, &self->cap_keybuf, (Py_ssize_t)need, sizeof(int64_t)) < 0) {
                return -1;
            }
            rl_sig_key(call, self->keybuf, need);
        }
        uint32_t id;
        if (rl_intern_signature(self, self->keybuf, need, &id) < 0) {
            return -1;
        }
        self->recs[rec].sig = id;
    }
    if (self->storage_fn &&
        rl_call_accesses(op, call, self->tstor, self->ostor, c, (uint32_t)rec, &self->acc) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}
