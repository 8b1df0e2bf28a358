/* Python binding of the roofline classification: NumPy arrays in, a dict of NumPy arrays out. */
#include "rl_module.h"
#include "rl_numpy.h"

#include "classify.h"

/* A 1-D C-contiguous float64 view of `obj` (new reference), or NULL with an exception naming `name`. */
static PyArrayObject *as_f64(PyObject *obj, const char *name) {
    PyArrayObject *a = (PyArrayObject *)PyArray_FROMANY(obj, NPY_DOUBLE, 1, 1, NPY_ARRAY_IN_ARRAY);
    /* Only a value that is not a 1-D array of numbers becomes this TypeError (NumPy says so with TypeError or
     * ValueError); anything else (MemoryError, KeyboardInterrupt, an error raised by the object's own __array__ or
     * __len__ that is neither) propagates as it is. */
    if (!a && (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_ValueError))) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "classify: %s must be a 1-D array of numbers", name);
    }
    return a;
}

static PyObject *classify_impl(PyArrayObject *in[5]) {
    npy_intp n = PyArray_DIM(in[0], 0);
    static const char *dnames[] = {"intensity", "ridge", "attainable", "t_min", "achieved_flops", "achieved_bytes",
                                   "efficiency", "mfu", "mbu"};
    PyObject *arrs[11] = {NULL};
    PyObject *result = NULL;
    for (int k = 0; k < 9; k++) {
        arrs[k] = PyArray_SimpleNew(1, &n, NPY_DOUBLE);
    }
    arrs[9] = PyArray_SimpleNew(1, &n, NPY_INT8);
    arrs[10] = PyArray_SimpleNew(1, &n, NPY_UINT8);
    for (int k = 0; k < 11; k++) {
        if (!arrs[k]) {
            goto done;
        }
    }
#define D(k) ((double *)PyArray_DATA((PyArrayObject *)arrs[k]))
    rl_class_out out = {D(0), D(1), D(2), D(3), D(4), D(5), D(6), D(7), D(8),
                        (int8_t *)PyArray_DATA((PyArrayObject *)arrs[9]),
                        (uint8_t *)PyArray_DATA((PyArrayObject *)arrs[10])};
#undef D
    const double *p[5];
    for (int k = 0; k < 5; k++) {
        p[k] = (const double *)PyArray_DATA(in[k]);
    }
    Py_BEGIN_ALLOW_THREADS
    rl_classify((size_t)n, p[0], p[1], p[2], p[3], p[4], &out);
    Py_END_ALLOW_THREADS
    result = PyDict_New();
    if (!result) {
        goto done;
    }
    for (int k = 0; k < 9; k++) {
        if (PyDict_SetItemString(result, dnames[k], arrs[k]) < 0) {
            Py_CLEAR(result);
            goto done;
        }
    }
    if (PyDict_SetItemString(result, "bound", arrs[9]) < 0 || PyDict_SetItemString(result, "flags", arrs[10]) < 0) {
        Py_CLEAR(result);
    }
done:
    for (int k = 0; k < 11; k++) {
        Py_XDECREF(arrs[k]);
    }
    return result;
}

/* classify(flops, bytes, time, peak, bw) -> dict of arrays. */
static PyObject *classify(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"flops", "bytes", "time", "peak", "bw", NULL};
    static const char *names[] = {"flops", "bytes", "time", "peak", "bw"};
    PyObject *o[5];
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOO:classify", kwlist, &o[0], &o[1], &o[2], &o[3], &o[4])) {
        return NULL;
    }
    PyArrayObject *in[5] = {NULL};
    PyObject *res = NULL;
    for (int k = 0; k < 5; k++) {
        if (!(in[k] = as_f64(o[k], names[k]))) {
            goto done;
        }
        if (k && PyArray_DIM(in[k], 0) != PyArray_DIM(in[0], 0)) {
            PyErr_Format(PyExc_ValueError, "classify: %s has %zd elements, flops has %zd", names[k],
                         (Py_ssize_t)PyArray_DIM(in[k], 0), (Py_ssize_t)PyArray_DIM(in[0], 0));
            goto done;
        }
    }
    res = classify_impl(in);
done:
    for (int k = 0; k < 5; k++) {
        Py_XDECREF(in[k]);
    }
    return res;
}

PyMethodDef rl_classify_methods[] = {
    {"classify", (PyCFunction)(void (*)(void))classify, METH_VARARGS | METH_KEYWORDS,
     "classify(flops, bytes, time, peak, bw) -> dict of arrays (see csrc/classify.h for the definitions)."},
    {NULL, NULL, 0, NULL},
};

int rl_classify_exec(PyObject *module) {
    static const struct {
        const char *name;
        int value;
    } c[] = {{"BOUND_NONE", RL_BOUND_NONE},           {"BOUND_MEMORY", RL_BOUND_MEMORY},
             {"BOUND_COMPUTE", RL_BOUND_COMPUTE},     {"BOUND_BANDWIDTH", RL_BOUND_BANDWIDTH},
             {"FLAG_ABOVE_PEAK", RL_FLAG_ABOVE_PEAK}, {"FLAG_ABOVE_BW", RL_FLAG_ABOVE_BW},
             {"FLAG_UNTIMED", RL_FLAG_UNTIMED},       {"FLAG_ZERO_TIME", RL_FLAG_ZERO_TIME},
             {"FLAG_NO_CEILING", RL_FLAG_NO_CEILING}, {"BOUND_INTERCONNECT", RL_BOUND_INTERCONNECT}};
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        if (PyModule_AddIntConstant(module, c[i].name, c[i].value) < 0) {
            return -1;
        }
    }
    return 0;
}
