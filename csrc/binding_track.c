/* The tracking part of roofline._core: the method table and the types of ModuleTracker (track_tracker.c,
 * track_link.c), GradGate (track_gate.c), Dispatch (track_dispatch.c) and Block (track_block.c). */
#include "track.h"

PyTypeObject *rl_tracker_type_of(PyObject *module) {
    if (!module) {
        return NULL;
    }
    PyObject *tp = PyObject_GetAttrString(module, "ModuleTracker");
    if (!tp) {
        return NULL;
    }
    if (!PyType_Check(tp)) {
        Py_DECREF(tp);
        PyErr_SetString(PyExc_TypeError, "roofline._core.ModuleTracker is not a type");
        return NULL;
    }
    Py_DECREF(tp); /* the module keeps it alive */
    return (PyTypeObject *)tp;
}

/* The GradGate type of the module that made `tracker_type` (a new reference), or NULL with an exception. */
PyObject *rl_gate_type_of(PyTypeObject *tracker_type) {
    PyObject *module = rl_module_of_type(tracker_type);
    return module ? PyObject_GetAttrString(module, "GradGate") : NULL;
}

PyMethodDef rl_track_methods[] = {
    {"remove_mode", (PyCFunction)(void (*)(void))rl_remove_mode, METH_FASTCALL,
     "remove_mode(mode, length, at, pop, push, log): take mode off one of this thread's mode stacks in one step (the "
     "modes above it are pushed back); appends the tuple of those modes to log. True if it was on the stack."},
    {"call_alone", (PyCFunction)(void (*)(void))rl_call_alone, METH_FASTCALL,
     "call_alone(mode, fn, arg, length, pop, push): fn(arg) with mode alone on this thread's dispatch mode stack; the "
     "stack is put back whatever fn raises."},
    {NULL, NULL, 0, NULL},
};

int rl_track_exec(PyObject *module) {
    if (rl_block_lock_init() < 0) {
        return -1;
    }
    PyType_Spec *specs[] = {rl_gradgate_spec, rl_tracker_spec, rl_dispatch_spec, rl_block_spec};
    const char *names[] = {"GradGate", "ModuleTracker", "Dispatch", "Block"};
    for (int i = 0; i < 4; i++) {
        PyObject *tp = PyType_FromModuleAndSpec(module, specs[i], NULL);
        if (!tp) {
            return -1;
        }
        int rc = PyModule_AddObjectRef(module, names[i], tp);
        Py_DECREF(tp);
        if (rc < 0) {
            return -1;
        }
    }
    return 0;
}
