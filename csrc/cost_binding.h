/* Shared declarations of the cost model's binding (binding layer: includes Python.h): the Recorder type
 * (cost_recorder.c), how a call's Python values are described into an rl_call (cost_describe.c), and the
 * module functions (binding_cost.c). */
#ifndef RL_COST_BINDING_H
#define RL_COST_BINDING_H

#include "rl_module.h"

#include <stddef.h>

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
    /* undescribed(op, args, kwargs, out) -> None or (matrix, vector, special, bytes_read, bytes_written,
     * flop_counter, status): asked for the counts of a call whose arguments cannot be described (a sparse layout
     * has no strides), or NULL */
    PyObject *undescribed;
    /* Set while record() describes a call: Python code runs then (a tensor's shape, stride() or dtype may be
     * Python, a finalizer may fire, another thread may take the GIL) and must not re-enter the recorder, whose
     * scratch arrays, op table and records are in use. */
    int busy;
} Recorder;

/* Grow *buf (element size `elem`) to hold at least `need` elements. 0 on success, -1 with MemoryError set. */
static inline int grow(void **buf, Py_ssize_t *cap, Py_ssize_t need, size_t elem) {
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
static inline PyObject *op_label(const op_entry *e, Py_ssize_t opi) {
    return e->name ? Py_NewRef(e->name) : PyUnicode_FromFormat("op #%zd", opi);
}

/* ---- describing Python values (cost_describe.c) ---- */

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

/* The descriptor `name` of type `tp` when it is of type `want` and the same object torch.Tensor's is (new reference),
 * else None; NULL with an exception. */
PyObject *rl_type_descr(PyTypeObject *tp, PyObject *name, PyTypeObject *want);
int rl_convert_arg(builder *b, PyObject *v, rl_arg *a);   /* one argument into *a: 0, or -1 with an exception */
Py_ssize_t rl_flatten_outs(builder *b, PyObject *out);    /* the outputs: their count, or -1 with an exception */

/* ---- capture (cost_describe.c) ---- */
int rl_intern_signature(Recorder *self, const int64_t *key, size_t len, uint32_t *id);
int rl_format_signatures(Recorder *self);
int rl_capture_call(Recorder *self, const rl_op *op, const rl_call *call, const rl_cost *c, Py_ssize_t rec);

/* ---- the Recorder type (cost_recorder.c) ---- */
extern PyType_Spec *const rl_recorder_spec;

#endif
