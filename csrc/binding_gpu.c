/* Python binding of the gpu ceiling benchmarks (placeholder until the benchmarks land). */
#include "rl_module.h"

PyMethodDef rl_gpu_methods[] = {
    {NULL, NULL, 0, NULL},
};

int rl_gpu_exec(PyObject *module) {
    (void)module;
    return 0;
}
