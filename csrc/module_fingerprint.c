/* module_fingerprint(model, named_parameters, named_modules) -> bytes | None: what a model's parameter counts depend
 * on (roofline/_analysis/_parameters.py), as one bytes object to compare with ==.
 *
 * A breadth-first walk over every path of the module tree (as named_modules(remove_duplicate=False) walks it) writes,
 * per module, its submodule slots (name, the value's address, 0 for None) and its parameter slots (name, address),
 * then per parameter its shape, its dtype object's address (torch's dtypes are singletons) and requires_grad. Names
 * are written in full (UTF-8, with their length), so equal bytes mean equal trees of names, the same objects in the
 * same slots, and equal sizes, dtypes and flags. It runs at every measure block's end: no Python object is made per
 * module or parameter beyond the attribute reads.
 *
 * None (no exception) where the walk cannot vouch for the counts: a module whose class lists its parameters or
 * submodules its own way (its type's named_parameters / named_modules are not the ones given), _modules or
 * _parameters not a dict, a parameter without a shape (a lazy one), more than 2**20 modules on the walk (a module
 * that holds itself below it). MemoryError and the exceptions that are not errors (KeyboardInterrupt) propagate. */
#include <Python.h>

#include <stdint.h>
#include <string.h>

#define RL_FP_MAX_MODULES (1 << 20)
#define RL_FP_TYPES 32

typedef struct {
    char *p;
    size_t n, cap;
} fp_buf;

static int fp_put(fp_buf *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n) {
            cap *= 2;
        }
        char *p = PyMem_Realloc(b->p, cap);
        if (!p) {
            PyErr_NoMemory();
            return -1;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
    return 0;
}

static int fp_u64(fp_buf *b, uint64_t v) { return fp_put(b, &v, sizeof v); }

/* A slot's name: its length, then its UTF-8 bytes. -1 with an exception (a name that is not a str: TypeError). */
static int fp_name(fp_buf *b, PyObject *key) {
    if (!PyUnicode_Check(key)) {
        PyErr_SetString(PyExc_TypeError, "a slot name that is not a str");
        return -1;
    }
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(key, &n);
    if (!s) {
        return -1;
    }
    return fp_u64(b, (uint64_t)n) < 0 ? -1 : fp_put(b, s, (size_t)n);
}

/* An ordinary error (not MemoryError, not a BaseException such as KeyboardInterrupt) is cleared: 0; else -1. */
static int fp_soft(void) {
    if (PyErr_ExceptionMatches(PyExc_Exception) && !PyErr_ExceptionMatches(PyExc_MemoryError)) {
        PyErr_Clear();
        return 0;
    }
    return -1;
}

/* The attribute names, interned once (kept for the life of the process). */
enum { S_NP, S_NM, S_MODULES, S_PARAMETERS, S_SHAPE, S_DTYPE, S_REQUIRES_GRAD, S_COUNT };
static PyObject *names[S_COUNT];

static int fp_names(void) {
    static const char *text[S_COUNT] = {"named_parameters", "named_modules", "_modules", "_parameters",
                                        "shape", "dtype", "requires_grad"};
    for (int k = 0; k < S_COUNT; k++) {
        if (!names[k] && !(names[k] = PyUnicode_InternFromString(text[k]))) {
            return -1;
        }
    }
    return 0;
}

/* 2: type `tp` lists parameters and submodules as torch's nn.Module does (its named_parameters and named_modules
 * are `np` and `nm`) and defines no class attribute `_modules` or `_parameters` (so an instance's own __dict__ holds
 * what attribute access returns); 1: the first only; 0: it lists them its own way; -1: an exception. The answers
 * for the first RL_FP_TYPES types are kept in `seen` / `how` for the rest of the walk. */
static int fp_plain_type(PyTypeObject *tp, PyObject *np, PyObject *nm, PyTypeObject **seen, int *how, int *nseen) {
    for (int i = 0; i < *nseen; i++) {
        if (seen[i] == tp) {
            return how[i];
        }
    }
    /* the class attributes as the type's MRO resolves them (each class's own dict in order, no exception raised for
     * a missing name); a type whose metaclass is not `type` is asked through attribute access */
    PyObject *found[4] = {NULL, NULL, NULL, NULL}; /* named_parameters, named_modules, _modules, _parameters */
    int ok;
    PyObject *mro = tp->tp_mro;
    if (Py_IS_TYPE(tp, &PyType_Type) && mro && PyTuple_Check(mro)) {
        for (int k = 0; k < 4; k++) {
            for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(mro) && !found[k]; j++) {
                PyObject *dict = ((PyTypeObject *)PyTuple_GET_ITEM(mro, j))->tp_dict;
                found[k] = dict ? PyDict_GetItemWithError(dict, names[S_NP + k]) : NULL;
                if (!found[k] && PyErr_Occurred()) {
                    return -1;
                }
            }
        }
        ok = found[0] == np && found[1] == nm ? (found[2] || found[3] ? 1 : 2) : 0;
    } else {
        PyObject *a = PyObject_GetAttr((PyObject *)tp, names[S_NP]);
        PyObject *b = a ? PyObject_GetAttr((PyObject *)tp, names[S_NM]) : NULL;
        ok = a && b && a == np && b == nm;
        Py_XDECREF(a);
        Py_XDECREF(b);
        if (!a || !b) {
            return fp_soft() < 0 ? -1 : 0;
        }
    }
    if (*nseen < RL_FP_TYPES) {
        seen[*nseen] = tp;
        how[(*nseen)++] = ok;
    }
    return ok;
}

/* mod.<name> (a new reference): from the instance's __dict__ when `direct` (fp_plain_type's 2) and it is there, else
 * through attribute access. NULL with an exception. */
static PyObject *fp_module_attr(PyObject *mod, PyObject *name, int direct) {
    if (direct == 2) {
        PyObject *d = PyObject_GenericGetDict(mod, NULL);
        if (!d) {
            return NULL;
        }
        PyObject *v = PyDict_Check(d) ? PyDict_GetItemWithError(d, name) : NULL;
        Py_XINCREF(v);
        Py_DECREF(d);
        if (v || PyErr_Occurred()) {
            return v;
        }
    }
    return PyObject_GetAttr(mod, name);
}

/* The data descriptors (getset) `shape`, `dtype` and `requires_grad` of a tensor type, to call directly on its
 * instances (what attribute access runs for a data descriptor, without the lookups): d[k] NULL where the type's
 * attribute is something else. */
typedef struct {
    PyTypeObject *tp;
    PyObject *d[3];
} fp_getters;

static void fp_getters_clear(fp_getters *g) {
    for (int k = 0; k < 3; k++) {
        Py_CLEAR(g->d[k]);
    }
    g->tp = NULL;
}

static int fp_getters_for(fp_getters *g, PyTypeObject *tp) {
    if (g->tp == tp) {
        return 0;
    }
    fp_getters_clear(g);
    for (int k = 0; k < 3; k++) {
        PyObject *d = PyObject_GetAttr((PyObject *)tp, names[S_SHAPE + k]);
        if (!d) {
            if (fp_soft() < 0) {
                return -1;
            }
            continue;
        }
        if (Py_TYPE(d)->tp_descr_get && Py_TYPE(d)->tp_descr_set) {
            g->d[k] = d;
        } else {
            Py_DECREF(d);
        }
    }
    g->tp = tp;
    return 0;
}

/* p.<k-th of shape, dtype, requires_grad> (a new reference), or NULL with an exception. */
static PyObject *fp_tensor_attr(fp_getters *g, PyObject *p, int k) {
    PyObject *d = g->d[k];
    return d ? Py_TYPE(d)->tp_descr_get(d, p, (PyObject *)Py_TYPE(p)) : PyObject_GetAttr(p, names[S_SHAPE + k]);
}

PyObject *rl_module_fingerprint(PyObject *Py_UNUSED(m), PyObject *const *argv, Py_ssize_t argc) {
    if (fp_names() < 0) {
        return NULL;
    }
    if (argc != 3) {
        PyErr_SetString(PyExc_TypeError, "module_fingerprint(model, named_parameters, named_modules) takes 3 arguments");
        return NULL;
    }
    PyObject *np = argv[1], *nm = argv[2];
    fp_buf b = {NULL, 0, 0};
    /* the walk: strong references to the modules (a tensor's shape may run Python code) */
    PyObject **walk = PyMem_Malloc(64 * sizeof(PyObject *));
    Py_ssize_t nwalk = 0, capwalk = 64, i = 0;
    PyObject **params = PyMem_Malloc(64 * sizeof(PyObject *));
    Py_ssize_t nparams = 0, capparams = 64;
    PyTypeObject *seen[RL_FP_TYPES];
    int how[RL_FP_TYPES];
    int nseen = 0, rc = -1;
    fp_getters g = {NULL, {NULL, NULL, NULL}};
    PyObject *result = NULL;
    if (!walk || !params) {
        PyErr_NoMemory();
        goto done;
    }
    walk[nwalk++] = Py_NewRef(argv[0]);
    for (i = 0; i < nwalk; i++) {
        PyObject *mod = walk[i];
        int plain = fp_plain_type(Py_TYPE(mod), np, nm, seen, how, &nseen);
        if (plain <= 0) {
            rc = plain;
            goto done;
        }
        PyObject *dicts[2] = {fp_module_attr(mod, names[S_MODULES], plain), NULL};
        dicts[1] = dicts[0] ? fp_module_attr(mod, names[S_PARAMETERS], plain) : NULL;
        if (!dicts[0] || !dicts[1] || !PyDict_Check(dicts[0]) || !PyDict_Check(dicts[1])) {
            Py_XDECREF(dicts[0]);
            Py_XDECREF(dicts[1]);
            rc = PyErr_Occurred() ? (fp_soft() < 0 ? -1 : 0) : 0;
            goto done;
        }
        int bad = 0;
        for (int d = 0; d < 2 && !bad; d++) {
            PyObject *key, *value;
            Py_ssize_t pos = 0;
            if (fp_u64(&b, (uint64_t)PyDict_GET_SIZE(dicts[d])) < 0) {
                bad = 1;
                break;
            }
            while (PyDict_Next(dicts[d], &pos, &key, &value)) {
                if (fp_name(&b, key) < 0 || fp_u64(&b, value == Py_None ? 0 : (uint64_t)(uintptr_t)value) < 0) {
                    bad = 1;
                    break;
                }
                if (value == Py_None) {
                    continue;
                }
                PyObject ***arr = d ? &params : &walk;
                Py_ssize_t *n = d ? &nparams : &nwalk, *cap = d ? &capparams : &capwalk;
                if (*n >= (d ? PY_SSIZE_T_MAX : RL_FP_MAX_MODULES)) {
                    bad = 2; /* the walk would not end */
                    break;
                }
                if (*n == *cap) {
                    PyObject **grown = PyMem_Realloc(*arr, (size_t)(*cap * 2) * sizeof(PyObject *));
                    if (!grown) {
                        PyErr_NoMemory();
                        bad = 1;
                        break;
                    }
                    *arr = grown;
                    *cap *= 2;
                }
                (*arr)[(*n)++] = Py_NewRef(value);
            }
        }
        Py_DECREF(dicts[0]);
        Py_DECREF(dicts[1]);
        if (bad) {
            rc = bad == 2 ? 0 : (fp_soft() < 0 ? -1 : 0);
            goto done;
        }
    }
    for (Py_ssize_t k = 0; k < nparams; k++) {
        PyObject *p = params[k];
        if (fp_getters_for(&g, Py_TYPE(p)) < 0) {
            goto done;
        }
        PyObject *shape = fp_tensor_attr(&g, p, 0);
        PyObject *dtype = shape ? fp_tensor_attr(&g, p, 1) : NULL;
        PyObject *rg = dtype ? fp_tensor_attr(&g, p, 2) : NULL;
        int ok = shape && dtype && rg && PyTuple_Check(shape);
        if (ok) {
            Py_ssize_t nd = PyTuple_GET_SIZE(shape);
            ok = fp_u64(&b, (uint64_t)nd) == 0;
            for (Py_ssize_t j = 0; ok && j < nd; j++) {
                long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, j));
                ok = !(v == -1 && PyErr_Occurred()) && fp_u64(&b, (uint64_t)v) == 0;
            }
            ok = ok && fp_u64(&b, (uint64_t)(uintptr_t)dtype) == 0 &&
                 fp_u64(&b, rg == Py_True ? 1 : rg == Py_False ? 0 : 2) == 0;
        }
        Py_XDECREF(shape);
        Py_XDECREF(dtype);
        Py_XDECREF(rg);
        if (!ok) {
            rc = PyErr_Occurred() ? (fp_soft() < 0 ? -1 : 0) : 0;
            goto done;
        }
    }
    rc = 1;
done:
    if (rc == 1) {
        result = PyBytes_FromStringAndSize(b.p ? b.p : "", (Py_ssize_t)b.n);
    } else if (rc == 0) {
        result = Py_NewRef(Py_None);
    }
    for (Py_ssize_t k = 0; walk && k < nwalk; k++) {
        Py_DECREF(walk[k]);
    }
    for (Py_ssize_t k = 0; params && k < nparams; k++) {
        Py_DECREF(params[k]);
    }
    fp_getters_clear(&g);
    PyMem_Free(walk);
    PyMem_Free(params);
    PyMem_Free(b.p);
    return result;
}
