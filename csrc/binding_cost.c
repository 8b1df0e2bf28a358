/* Python binding of the cost model (placeholder). */
#include "rl_module.h"

PyMethodDef rl_cost_methods[] = {
    {NULL, NULL, 0, NULL},
};

int rl_cost_exec(PyObject *module) {
    (void)module;
    return 0;
}
