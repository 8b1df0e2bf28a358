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

#include <limits.h>
#include <stddef.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "capture.h"
#include "cost.h"
#include "record.h"

/* Int lists longer than this are not interpreted (no cost formula reads one that long): the argument is recorded
 * as RL_ARG_OTHER, so a junk list costs no memory in proportion to its length. */
#define RL_MAX_INTLIST 4096

typedef struct {
    rl_op op;
    PyObject *kwnames; /* tuple of keyword-only argument names (str), or NULL */
    Py_ssize_t kwpos;  /* schema position of the first keyword-only argument (-1: right after the positionals) */
    PyObject *name;    /* the op's name (str) for error messages, or NULL */
} op_entry;

#define RL_PLAIN_TYPES 4 /* tensor types remembered as reading shape, stride() and dtype through tensor_type's */

typedef struct {
    PyObject_HEAD
    PyObject *tensor_type; /* type object */
    /* tensor_type's `shape` and `dtype` (getset descriptors) and `stride` (method descriptor), or NULL when they are
     * something else; `plain`: the types (with their version tags) whose instances resolve the three names to them,
     * read by calling the descriptors directly instead of three attribute lookups per tensor */
    PyObject *d_shape, *d_stride, *d_dtype;
    PyTypeObject *plain[RL_PLAIN_TYPES]; /* compared by address only, with the tag; never dereferenced */
    unsigned int plain_tag[RL_PLAIN_TYPES];
    int plain_next;
    PyObject *dtype_map;   /* dict (a private copy): dtype object -> int code */
    const rl_state *state; /* module state (interned attribute names); the type keeps the module alive */
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
    /* capture (capture.h): storage(tensor) -> int id of its storage block, or NULL (no dataflow rows); the
     * storage ids of the scratch tensors and outputs; the rows; the signature table and its texts (`sigs`, a
     * list of str by id) when signatures are on */
    PyObject *storage_fn;
    int signatures;
    uint64_t *tstor, *ostor;
    Py_ssize_t cap_tstor, cap_ostor;
    PyObject **tobj; /* the scratch tensors' objects (borrowed, compared by identity only) */
    Py_ssize_t cap_tobj;
    rl_accbuf acc;
    rl_sigtab sigtab;
    PyObject *sigs;
    int64_t *keybuf;
    Py_ssize_t cap_keybuf;
    /* Set while record() describes a call: Python code runs then (a tensor's shape, stride() or dtype may be
     * Python, a finalizer may fire, another thread may take the GIL) and must not re-enter the recorder, whose
     * scratch arrays, op table and records are in use. */
    int busy;
} Recorder;

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

/* Grow *buf (element size `elem`) to hold at least `need` elements. 0 on success, -1 with MemoryError set. */
static int grow(void **buf, Py_ssize_t *cap, Py_ssize_t need, size_t elem) {
    if (need <= *cap) {
        return 0;
    }
    Py_ssize_t n = *cap ? *cap : 16;
    while (n < need) {
        if (n > PY_SSIZE_T_MAX / 2 || (size_t)n > (size_t)PY_SSIZE_T_MAX / elem / 2) {
            PyErr_NoMemory();
            return -1;
        }
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

/* The op's name for messages: a new reference to its name, or "op #i". */
static PyObject *op_label(const op_entry *e, Py_ssize_t opi) {
    return e->name ? Py_NewRef(e->name) : PyUnicode_FromFormat("op #%zd", opi);
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

/* ---- describing Python values -------------------------------------------------------------------------- */

typedef struct {
    Recorder *r;
    const op_entry *e;
    Py_ssize_t opi;
    Py_ssize_t ntensors, nints;
    int bad; /* an argument could not be described */
    /* where the value being described sits, for error messages */
    const char *where; /* "argument" or "output" */
    Py_ssize_t pos;    /* its position */
    Py_ssize_t elem;   /* its index in a list argument, or -1 */
} builder;

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
static PyObject *type_descr(PyTypeObject *tp, PyObject *name, PyTypeObject *want) {
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
        PyObject *d = type_descr(tp, names[k], Py_TYPE(want[k]));
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
static int convert_arg(builder *b, PyObject *v, rl_arg *a) {
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
static Py_ssize_t flatten_outs(builder *b, PyObject *out) {
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
static int intern_signature(Recorder *self, const int64_t *key, size_t len, uint32_t *id) {
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
static int format_signatures(Recorder *self) {
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
static int capture_call(Recorder *self, const rl_op *op, const rl_call *call, const rl_cost *c, Py_ssize_t rec) {
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
        if (intern_signature(self, self->keybuf, need, &id) < 0) {
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
        if (!self->sigs || intern_signature(self, NULL, 0, &(uint32_t){0}) < 0) { /* id 0: no tensor argument */
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
    PyObject *ds = type_descr((PyTypeObject *)tt, self->state->s_shape, &PyGetSetDescr_Type);
    PyObject *dst = type_descr((PyTypeObject *)tt, self->state->s_stride, &PyMethodDescr_Type);
    PyObject *dd = type_descr((PyTypeObject *)tt, self->state->s_dtype, &PyGetSetDescr_Type);
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
        int rc = convert_arg(&b, v, a);
        Py_DECREF(v);
        if (rc < 0) {
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
        if (st != RL_OK) {
            memset(&c, 0, sizeof(c));
        }
        if (push_record(self, opi, e->op.kind, (uint32_t)module, phase, (unsigned)st, &c, t0, t1) == 0) {
            if (capture_call(self, &e->op, &call, &c, self->nrecs - 1) == 0) {
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
        rc = capture_call(self, &e->op, &call, &c, rec);
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
    if (check_idle(self, "signatures") < 0 || format_signatures(self) < 0) {
        return NULL;
    }
    return PyList_GetSlice(self->sigs, 0, PyList_GET_SIZE(self->sigs));
}

static PyGetSetDef Recorder_getset[] = {
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

static PyObject *kind_table(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored)) {
    static const char *types[] = {[RL_PT_COUNT] = "count", [RL_PT_FLAG] = "flag", [RL_PT_ARG] = "arg",
                                  [RL_PT_ARG_REQUIRED] = "arg_required"};
    PyObject *lst = PyList_New(0);
    for (int k = 0; lst && k < RL_K_COUNT; k++) {
        PyObject *params = PyList_New(0), *row = NULL;
        for (int p = 0; params && p < RL_P_COUNT; p++) {
            int64_t lo, hi;
            rl_param_range(p, &lo, &hi);
            PyObject *t = ((rl_kind_params(k) >> p) & 1u) ? Py_BuildValue("(sszLL)", rl_param_name(p),
                types[rl_param_type(p)], rl_param_argname(p), (long long)lo, (long long)hi) : Py_NewRef(Py_None);
            if (!t || (t != Py_None && PyList_Append(params, t) < 0)) {
                Py_CLEAR(params);
            }
            Py_XDECREF(t);
        }
        if (params) {
            row = Py_BuildValue("(isN)", k, rl_kind_name(k), PyList_AsTuple(params));
        }
        if (!row || PyList_Append(lst, row) < 0) {
            Py_CLEAR(lst);
        }
        Py_XDECREF(row);
        Py_XDECREF(params);
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

/* attention_pairs(sq, sk, mask) -> the (query, key) pairs of one head (rl_attention_pairs). */
static PyObject *attention_pairs(PyObject *Py_UNUSED(m), PyObject *const *argv, Py_ssize_t argc) {
    if (argc != 3) {
        PyErr_SetString(PyExc_TypeError, "attention_pairs(sq, sk, mask) takes 3 arguments");
        return NULL;
    }
    unsigned long long v[2];
    for (int i = 0; i < 2; i++) {
        if (!PyLong_Check(argv[i]) || PyBool_Check(argv[i])) {
            return PyErr_Format(PyExc_TypeError, "attention_pairs: %s must be an int, got %.80s", i ? "sk" : "sq",
                                Py_TYPE(argv[i])->tp_name);
        }
        v[i] = PyLong_AsUnsignedLongLong(argv[i]);
        if (v[i] == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            return PyErr_Format(PyExc_ValueError, "attention_pairs: %s must be an int in [0, 2**64)", i ? "sk" : "sq");
        }
    }
    long mask = PyLong_Check(argv[2]) && !PyBool_Check(argv[2]) ? PyLong_AsLong(argv[2]) : -1;
    if (mask < 0 || mask > 2) {
        PyErr_Clear();
        PyErr_SetString(PyExc_ValueError, "attention_pairs: mask must be 0 (none), 1 (causal, top-left) or 2 "
                                          "(causal, bottom-right)");
        return NULL;
    }
    int ov = 0;
    uint64_t n = rl_attention_pairs(v[0], v[1], (int)mask, &ov);
    if (ov) {
        PyErr_SetString(PyExc_OverflowError, "attention_pairs: the count does not fit 64 bits");
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(n);
}

PyMethodDef rl_cost_methods[] = {
    {"dtype_table", dtype_table, METH_NOARGS, "[(code, name, itemsize)] of the cost model's scalar types."},
    {"kind_table", kind_table, METH_NOARGS,
     "[(code, name, params)] of the cost kinds; params: ((name, type, schema argument name or None, lo, hi), ...), "
     "type one of count, flag, arg, arg_required."},
    {"status_str", status_str, METH_O, "Text of a record status code."},
    {"attention_pairs", (PyCFunction)(void (*)(void))attention_pairs, METH_FASTCALL,
     "attention_pairs(sq, sk, mask) -> (query, key) pairs of one head: mask 0 none, 1 causal top-left, 2 causal "
     "bottom-right (the cost model's count)."},
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
    if (PyModule_AddIntConstant(module, "RECORD_SIZE", (long)sizeof(rl_record)) < 0 ||
        PyModule_AddIntConstant(module, "ACCESS_SIZE", (long)sizeof(rl_access)) < 0) {
        return -1;
    }
    /* The record and access-row layouts, field by field: (name, offset, size, kind 'u' unsigned int / 'f' float).
     * roofline/model/_records.py checks its dtypes against them at import. */
    typedef struct {
        const char *name;
        size_t offset, size;
        char kind;
    } field_desc;
#define RL_FIELD_(T, f, k) {#f, offsetof(T, f), sizeof(((T *)0)->f), k}
    static const field_desc rec_fields[] = {
        RL_FIELD_(rl_record, matrix_flops, 'u'), RL_FIELD_(rl_record, vector_flops, 'u'),
        RL_FIELD_(rl_record, special_ops, 'u'),  RL_FIELD_(rl_record, bytes_read, 'u'),
        RL_FIELD_(rl_record, bytes_written, 'u'), RL_FIELD_(rl_record, flop_counter_flops, 'u'),
        RL_FIELD_(rl_record, t_start, 'f'),      RL_FIELD_(rl_record, t_end, 'f'),
        RL_FIELD_(rl_record, op, 'u'),           RL_FIELD_(rl_record, module, 'u'),
        RL_FIELD_(rl_record, phase, 'u'),        RL_FIELD_(rl_record, dtype, 'u'),
        RL_FIELD_(rl_record, status, 'u'),       RL_FIELD_(rl_record, kind, 'u'),
        RL_FIELD_(rl_record, seq, 'u'),          RL_FIELD_(rl_record, sig, 'u'),
        RL_FIELD_(rl_record, reserved, 'u'),
    };
    static const field_desc acc_fields[] = {
        RL_FIELD_(rl_access, storage, 'u'), RL_FIELD_(rl_access, nbytes, 'u'),
        RL_FIELD_(rl_access, record, 'u'),  RL_FIELD_(rl_access, write, 'u'),
    };
#undef RL_FIELD_
    static const struct {
        const char *attr;
        const field_desc *f;
        size_t n;
    } layouts[] = {{"RECORD_FIELDS", rec_fields, sizeof rec_fields / sizeof *rec_fields},
                   {"ACCESS_FIELDS", acc_fields, sizeof acc_fields / sizeof *acc_fields}};
    for (size_t l = 0; l < 2; l++) {
        PyObject *t = PyTuple_New((Py_ssize_t)layouts[l].n);
        for (size_t i = 0; t && i < layouts[l].n; i++) {
            const field_desc *f = &layouts[l].f[i];
            PyObject *item = Py_BuildValue("(snnC)", f->name, (Py_ssize_t)f->offset, (Py_ssize_t)f->size, f->kind);
            if (!item) {
                Py_CLEAR(t);
                break;
            }
            PyTuple_SET_ITEM(t, (Py_ssize_t)i, item);
        }
        rc = t ? PyModule_AddObjectRef(module, layouts[l].attr, t) : -1;
        Py_XDECREF(t);
        if (rc < 0) {
            return -1;
        }
    }
    static const char *phase_names[] = {
#define RL_PHASE_NAME_(id, code, name) [code] = name,
        RL_PHASES(RL_PHASE_NAME_)
#undef RL_PHASE_NAME_
    };
    PyObject *phases = PyTuple_New(RL_PHASE_COUNT);
    for (int i = 0; phases && i < RL_PHASE_COUNT; i++) {
        PyObject *n = PyUnicode_FromString(phase_names[i]);
        if (!n) {
            Py_CLEAR(phases);
            break;
        }
        PyTuple_SET_ITEM(phases, i, n);
    }
    rc = phases ? PyModule_AddObjectRef(module, "PHASES", phases) : -1;
    Py_XDECREF(phases);
    if (rc < 0) {
        return -1;
    }
    static const struct {
        const char *name;
        int value;
    } kinds[] = {
#define RL_KIND_CONST_(id, name, params, formula) {"K_" #id, RL_K_##id},
        RL_KINDS(RL_KIND_CONST_)
#undef RL_KIND_CONST_
        {"OPF_FLOP_COUNTER", (int)RL_OPF_FLOP_COUNTER}, {"OPF_FRESH_OUTS", (int)RL_OPF_FRESH_OUTS},
        {"MAX_ARGS", RL_MAX_ARGS},   {"MAX_DIMS", RL_MAX_DIMS},   {"E_DESCRIBE", RL_E_DESCRIBE},
        {"E_OVERFLOW", RL_E_OVERFLOW},
    };
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        if (PyModule_AddIntConstant(module, kinds[i].name, kinds[i].value) < 0) {
            return -1;
        }
    }
    return 0;
}
