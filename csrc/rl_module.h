/* Shared declarations of the roofline._core extension module (binding layer only: includes Python.h). */
#ifndef RL_MODULE_H
#define RL_MODULE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* Each binding file contributes a method table, added to the module in its exec slot. */
extern PyMethodDef rl_cost_methods[];
extern PyMethodDef rl_cpu_methods[];
extern PyMethodDef rl_gpu_methods[];
extern PyMethodDef rl_classify_methods[];

/* Per-file exec hooks (0 on success, -1 with an exception set). */
int rl_cost_exec(PyObject *module);
int rl_cpu_exec(PyObject *module);
int rl_gpu_exec(PyObject *module);
int rl_classify_exec(PyObject *module);

/* Error helpers in the style of psutil's errors.c: set the exception and return NULL. */
PyObject *rl_err_value(const char *fmt, ...);
PyObject *rl_err_runtime(const char *fmt, ...);

#endif
