/* Python binding of the cpu ceiling benchmarks (placeholder until the benchmarks land). */
#include "rl_module.h"

PyMethodDef rl_cpu_methods[] = {
    {NULL, NULL, 0, NULL},
};

int rl_cpu_exec(PyObject *module) {
    (void)module;
    return 0;
}
