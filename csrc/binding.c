/* roofline._core: the one CPython extension of the package.
 *
 * Multi-phase initialisation (PEP 489). Each binding file (binding_cost.c, binding_cpu.c, binding_gpu.c) owns its
 * method table and an exec hook; this file assembles the module, owns its state (rl_state in rl_module.h: exception
 * classes and interned strings, reached with PyType_GetModuleByDef from types) and imports the NumPy C API. The pure C
 * layers (cost.c, classify.c, cpu_*.c, gpu.c) never include Python.h. */
#define RL_NUMPY_IMPORT
#include "rl_module.h"
#include "rl_numpy.h"

#include <stdarg.h>

extern PyMethodDef rl_track_methods[]; /* binding_track.c (track_*.c): module tracking, dispatch, block */
int rl_track_exec(PyObject *module);

/* Error helpers in the style of psutil's errors.c: set the exception and return NULL. */
#define RL_ERR_FUNCTION(NAME, TYPE)                                                                                \
    PyObject *NAME(const char *fmt, ...) {                                                                         \
        va_list ap;                                                                                                \
        va_start(ap, fmt);                                                                                         \
        PyErr_FormatV((TYPE), fmt, ap);                                                                            \
        va_end(ap);                                                                                                \
        return NULL;                                                                                               \
    }
RL_ERR_FUNCTION(rl_err_value, PyExc_ValueError)
RL_ERR_FUNCTION(rl_err_runtime, PyExc_RuntimeError)

/* ---- module state (rl_state, rl_module.h) ---- */

static int core_state_init(PyObject *module) {
    rl_state *st = rl_state_of(module);
    st->s_shape = PyUnicode_InternFromString("shape");
    st->s_stride = PyUnicode_InternFromString("stride");
    st->s_is_mkldnn = PyUnicode_InternFromString("is_mkldnn");
    st->s_dtype = PyUnicode_InternFromString("dtype");
    st->s_enter = PyUnicode_InternFromString("__enter__");
    st->s_exit = PyUnicode_InternFromString("__exit__");
    return (st->s_shape && st->s_stride && st->s_dtype && st->s_is_mkldnn && st->s_enter && st->s_exit) ? 0 : -1;
}

/* Visit (visit != NULL) or clear (visit == NULL) the objects of the state, which is NULL before the module object
 * has allocated it. */
static int core_walk(PyObject *module, visitproc visit, void *arg) {
    rl_state *st = rl_state_of(module);
#define RL_WALK(name)                                                                                              \
    if (visit != NULL) {                                                                                           \
        Py_VISIT(st->name);                                                                                        \
    } else {                                                                                                       \
        Py_CLEAR(st->name);                                                                                        \
    }
    if (st != NULL) {
        RL_STATE_OBJECTS(RL_WALK)
    }
#undef RL_WALK
    return 0;
}

static int core_traverse(PyObject *module, visitproc visit, void *arg) { return core_walk(module, visit, arg); }

static int core_clear(PyObject *module) { return core_walk(module, NULL, NULL); }

static void core_free(void *module) { (void)core_clear((PyObject *)module); }

static int core_exec(PyObject *module) {
    if (PyArray_ImportNumPyAPI() < 0 || core_state_init(module) < 0) {
        return -1;
    }
    if (PyModule_AddFunctions(module, rl_cost_methods) < 0 || rl_cost_exec(module) < 0) {
        return -1;
    }
    if (PyModule_AddFunctions(module, rl_cpu_methods) < 0 || rl_cpu_exec(module) < 0) {
        return -1;
    }
    if (PyModule_AddFunctions(module, rl_gpu_methods) < 0 || rl_gpu_exec(module) < 0) {
        return -1;
    }
    if (PyModule_AddFunctions(module, rl_classify_methods) < 0 || rl_classify_exec(module) < 0) {
        return -1;
    }
    if (PyModule_AddFunctions(module, rl_track_methods) < 0 || rl_track_exec(module) < 0) {
        return -1;
    }
    return 0;
}

static PyModuleDef_Slot core_slots[] = {
    {Py_mod_exec, core_exec},
#ifdef Py_mod_multiple_interpreters
    {Py_mod_multiple_interpreters, Py_MOD_MULTIPLE_INTERPRETERS_NOT_SUPPORTED},
#endif
    {0, NULL},
};

struct PyModuleDef rl_core_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "roofline._core",
    .m_doc = "C core of roofline: op cost model, roofline classification, CPU and GPU ceiling benchmarks.",
    .m_size = sizeof(rl_state),
    .m_slots = core_slots,
    .m_traverse = core_traverse,
    .m_clear = core_clear,
    .m_free = core_free,
};

PyMODINIT_FUNC PyInit__core(void) { return PyModuleDef_Init(&rl_core_module); }
