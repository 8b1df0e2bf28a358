/* GradGate: the gradient hook of the ModuleTracker. */
#include "track.h"

/* ---- GradGate: the gradient hook of ModuleTracker (torch.autograd.graph.register_multi_grad_hook, "all" mode) ---- */

/* One module call's hook on its inputs (the module leaves the set once their gradients are computed) or its outputs
 * (it re-enters the set once theirs are). Each of those tensors gets an arm (Tensor.register_hook): a call counts per
 * backward (graph task) and keeps the gradient until the gate acts, on the call that completes the count of tensors
 * whose gradient node the engine will execute (computed on the first call of each backward):
 * register_multi_grad_hook's rule, without a Python frame per call. The gradients are kept as torch keeps them (a
 * leaf's gradient then has a second reference when it is accumulated, so AccumulateGrad copies it instead of taking
 * it): the ops of a backward are those FlopCounterMode sees. */

#define GATE_OBJECTS(X) X(tracker) X(name) X(grad_fns) X(leaves) X(count) X(buffer)

RL_GC_MEMBERS(GradGate, GATE_OBJECTS, (void)0)


/* arm(grad), bound to (gate, index): the gradient of the gate's index-th tensor is computed. Returns None (the
 * gradient is not changed). */
static PyObject *gate_arm(PyObject *bound, PyObject *grad) {
    GradGate *self = (GradGate *)PyTuple_GET_ITEM(bound, 0);
    Py_ssize_t idx = PyLong_AsSsize_t(PyTuple_GET_ITEM(bound, 1));
    if (idx < 0) {
        return NULL;
    }
    if (!self->tracker || !self->buffer) {
        PyErr_SetString(PyExc_RuntimeError, "GradGate: cleared");
        return NULL;
    }
    Tracker *tr = (Tracker *)self->tracker;
    if (rl_tracker_check_ready(tr) < 0) {
        return NULL;
    }
    PyObject *id = PyObject_CallNoArgs(tr->task_id);
    if (!id) {
        return NULL;
    }
    long v = PyLong_AsLong(id);
    if (v == -1) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_AssertionError, "expected this hook to be called inside a backward call");
        }
        Py_DECREF(id);
        return NULL;
    }
    PyObject *c = PyDict_GetItemWithError(self->count, id);
    Py_ssize_t curr = c ? PyLong_AsSsize_t(c) : 0;
    PyObject *next = (c || !PyErr_Occurred()) && curr >= 0 ? PyLong_FromSsize_t(curr + 1) : NULL;
    int rc = next ? PyDict_SetItem(self->count, id, next) : -1;
    Py_XDECREF(next);
    PyObject *buf = rc == 0 ? PyDict_GetItemWithError(self->buffer, id) : NULL;
    if (rc == 0 && !buf) {
        Py_ssize_t n = PyTuple_GET_SIZE(self->grad_fns);
        PyObject *fresh = PyErr_Occurred() ? NULL : PyList_New(n);
        for (Py_ssize_t i = 0; fresh && i < n; i++) {
            PyList_SET_ITEM(fresh, i, Py_NewRef(Py_None));
        }
        rc = fresh ? PyDict_SetItem(self->buffer, id, fresh) : -1;
        buf = fresh;
        Py_XDECREF(fresh); /* the dict holds it */
    }
    if (rc == 0 && curr == 0) { /* the first call of this backward: how many of the nodes will run */
        Py_ssize_t nb = 0;
        const char *leaf = PyBytes_AS_STRING(self->leaves);
        for (Py_ssize_t i = 0; rc == 0 && i < PyTuple_GET_SIZE(self->grad_fns); i++) {
            PyObject *r = PyObject_CallOneArg(tr->will_execute, PyTuple_GET_ITEM(self->grad_fns, i));
            int t = r ? PyObject_IsTrue(r) : -1;
            Py_XDECREF(r);
            if (t < 0 && leaf[i] && PyErr_ExceptionMatches(PyExc_RuntimeError)) {
                /* torch refuses to answer for a leaf's accumulator inside torch.autograd.grad(), and only when the
                 * leaf is one of the inputs whose gradient the call returns (it captures the gradient instead of
                 * running the accumulator): its tensor hooks run on the captured gradient, so this arm is called */
                PyErr_Clear();
                t = 1;
            }
            rc = t < 0 ? -1 : 0;
            nb += t > 0;
        }
        if (rc == 0) {
            self->nb_calls = nb;
        }
    }
    if (rc == 0 && idx < PyList_GET_SIZE(buf)) {
        rc = PyList_SetItem(buf, idx, Py_NewRef(grad));
    }
    if (rc == 0 && curr == self->nb_calls - 1) {
        PyObject *r = NULL;
        if (self->reenter) {
            PyObject *q = tr->reset_queued ? Py_NewRef(Py_None) : PyObject_CallNoArgs(tr->on_reenter);
            if (q) {
                tr->reset_queued = 1;
            }
            Py_XDECREF(q);
            r = q ? rl_tracker_add(tr, self->name) : NULL;
        } else {
            r = rl_tracker_discard(tr, self->name);
        }
        Py_XDECREF(r);
        rc = r && PyDict_DelItem(self->count, id) == 0 && PyDict_DelItem(self->buffer, id) == 0 ? 0 : -1;
    }
    Py_DECREF(id);
    if (rc < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

PyMethodDef rl_gate_arm_def = {"gate_arm", (PyCFunction)gate_arm, METH_O,
                                   "A tensor's gradient hook: its gradient is computed."};

static PyType_Slot GradGate_slots[] = {
    {Py_tp_doc, "A module call's gradient hooks (made by ModuleTracker); its arms are registered on the tensors."},
    RL_GC_SLOTS(GradGate),
    {0, NULL},
};

RL_GC_TYPE_SPEC(GradGate, "roofline._core.GradGate", 0);
PyType_Spec *const rl_gradgate_spec = &GradGate_spec;
