/* Shared declarations of the roofline._core extension module (binding layer only: includes Python.h). */
#ifndef RL_MODULE_H
#define RL_MODULE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* Module state (PEP 573): what the binding files share, owned by the module object. Functions reach it from their
 * module argument (rl_state_of), methods of a type the module created from that type (rl_state_of_type).
 *
 * Its members are the strong references X(name) below lists (the module's traverse and clear walk the list):
 *   gpu_error .. nvrtc_error  exception classes of the GPU layer, created in rl_gpu_exec (binding_gpu.c), also
 *                             module attributes;
 *   s_shape, s_stride, s_dtype  interned attribute names a Recorder reads from every tensor it describes
 *                             (cost_describe.c); s_is_mkldnn, read of a tensor whose strides say it is broadcast;
 *   s_enter, s_exit           "__enter__" / "__exit__": the Dispatch re-enters its mode around an op's
 *                             decomposition (track_dispatch.c); the strings are made in binding.c. */
#define RL_STATE_OBJECTS(X)                                                                                        \
    X(gpu_error) X(cuda_unavailable_error) X(cuda_error) X(nvrtc_error) X(s_shape) X(s_stride) X(s_dtype)           \
    X(s_is_mkldnn) X(s_enter) X(s_exit)

#define RL_STATE_MEMBER(name) PyObject *name;
typedef struct {
    RL_STATE_OBJECTS(RL_STATE_MEMBER)
} rl_state;
#undef RL_STATE_MEMBER

/* The module definition (binding.c): the key PyType_GetModuleByDef finds the module by. */
extern struct PyModuleDef rl_core_module;

static inline rl_state *rl_state_of(PyObject *module) { return (rl_state *)PyModule_GetState(module); }

/* The module that created `type` (or a base of it), borrowed; NULL with TypeError when none did. */
static inline PyObject *rl_module_of_type(PyTypeObject *type) {
#if PY_VERSION_HEX >= 0x030B0000
    return PyType_GetModuleByDef(type, &rl_core_module);
#else
    return PyType_GetModule(type); /* 3.10: the module of `type` itself (no type here is a base) */
#endif
}

/* State of the module that created `type` (or a base of it); NULL with TypeError when none did. */
static inline rl_state *rl_state_of_type(PyTypeObject *type) {
    PyObject *module = rl_module_of_type(type);
    return module == NULL ? NULL : rl_state_of(module);
}

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

/* tp_dealloc of the extension's garbage-collected heap types: untrack, drop the object's references (its type's
 * tp_clear), free it and release the type. */
static inline void rl_gc_dealloc(PyObject *self) {
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    tp->tp_clear(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

/* Visit (in a tp_traverse: `visit` and `arg` in scope) or clear a PyObject * member of `self`, for X-macro lists. */
#define RL_VISIT_MEMBER(m) Py_VISIT(self->m);
#define RL_CLEAR_MEMBER(m) Py_CLEAR(self->m);

#define RL_TAKE_MEMBER(m) self->m = Py_NewRef(m); /* a member set from the local of its name */

/* T_traverse, T_clear and T_dealloc of a garbage-collected heap type T whose PyObject * members OBJECTS(X) lists;
 * `after_clear` is a statement T_clear runs once they are cleared (`(void)0` for none). */
#define RL_GC_MEMBERS(T, OBJECTS, after_clear)                                                                      \
    static int T##_traverse(T *self, visitproc visit, void *arg) {                                                 \
        Py_VISIT(Py_TYPE(self));                                                                                   \
        OBJECTS(RL_VISIT_MEMBER)                                                                                   \
        return 0;                                                                                                  \
    }                                                                                                              \
    static int T##_clear(T *self) {                                                                                \
        OBJECTS(RL_CLEAR_MEMBER)                                                                                   \
        after_clear;                                                                                               \
        return 0;                                                                                                  \
    }                                                                                                              \
    static void T##_dealloc(T *self) { rl_gc_dealloc((PyObject *)self); }

/* TypeError "<who>: <names[i]> must be callable, got <type>" for the first objs[i] that is not callable. 0 or -1. */
static inline int rl_require_callables(const char *who, PyObject *const *objs, const char *const *names, int n) {
    for (int i = 0; i < n; i++) {
        if (!PyCallable_Check(objs[i])) {
            PyErr_Format(PyExc_TypeError, "%s: %s must be callable, got %.100s", who, names[i],
                         Py_TYPE(objs[i])->tp_name);
            return -1;
        }
    }
    return 0;
}

/* The slots and the spec of a garbage-collected heap type T (struct T, functions T_dealloc, T_traverse, T_clear;
 * the slot table T_slots). */
#define RL_GC_SLOTS(T) {Py_tp_dealloc, T##_dealloc}, {Py_tp_traverse, T##_traverse}, {Py_tp_clear, T##_clear}
#define RL_GC_TYPE_SPEC(T, qualname, extra_flags)                                                                  \
    static PyType_Spec T##_spec = {                                                                                \
        .name = qualname,                                                                                          \
        .basicsize = sizeof(T),                                                                                    \
        .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | (extra_flags),                                         \
        .slots = T##_slots,                                                                                        \
    }

/* Error helpers in the style of psutil's errors.c: set the exception and return NULL. */
PyObject *rl_err_value(const char *fmt, ...);
PyObject *rl_err_runtime(const char *fmt, ...);

#endif
