/* roofline._core: the one CPython extension of the package.
 *
 * Multi-phase initialisation (PEP 489). Each binding file (binding_cost.c, binding_cpu.c, binding_gpu.c) owns its
 * method table and an exec hook; this file only assembles the module and imports the NumPy C API. The pure C
 * layers (cost.c, classify.c, cpu.c, gpu.c) never include Python.h. */
#define RL_NUMPY_IMPORT
#include "rl_module.h"
#include "rl_numpy.h"

#include <stdarg.h>

extern PyMethodDef rl_track_methods[]; /* binding_track.c: module tracking and the per-op dispatch path */
int rl_track_exec(PyObject *module);

PyObject *rl_err_value(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    PyErr_FormatV(PyExc_ValueError, fmt, ap);
    va_end(ap);
    return NULL;
}

PyObject *rl_err_runtime(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    PyErr_FormatV(PyExc_RuntimeError, fmt, ap);
    va_end(ap);
    return NULL;
}

static int core_exec(PyObject *module) {
    if (PyArray_ImportNumPyAPI() < 0) {
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

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "roofline._core",
    .m_doc = "C core of roofline: op cost model, roofline classification, CPU and GPU ceiling benchmarks.",
    .m_size = 0,
    .m_slots = core_slots,
};

PyMODINIT_FUNC PyInit__core(void) { return PyModuleDef_Init(&core_module); }
