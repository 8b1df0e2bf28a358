/* Python binding of the cost model: the module functions and the method table, and the Recorder type
 * (cost_recorder.c, describing a call's values in cost_describe.c). */
#include "cost_binding.h"

#include <string.h>

/* ---- module-level functions ------------------------------------------------------------------------------ */

static PyObject *dtype_table(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored)) {
    PyObject *lst = PyList_New(0);
    if (!lst) {
        return NULL;
    }
    for (int i = 1; i < RL_DT_COUNT; i++) {
        PyObject *t = Py_BuildValue("(isI)", i, rl_dtype_name(i), rl_dtype_itemsize(i));
        if (!t || PyList_Append(lst, t) < 0) {
            Py_XDECREF(t);
            Py_DECREF(lst);
            return NULL;
        }
        Py_DECREF(t);
    }
    return lst;
}

static PyObject *kind_table(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored)) {
    static const char *types[] = {[RL_PT_COUNT] = "count", [RL_PT_FLAG] = "flag", [RL_PT_ARG] = "arg",
                                  [RL_PT_ARG_REQUIRED] = "arg_required"};
    PyObject *lst = PyList_New(0);
    for (int k = 0; lst && k < RL_K_COUNT; k++) {
        PyObject *params = PyList_New(0), *row = NULL;
        for (int p = 0; params && p < RL_P_COUNT; p++) {
            int64_t lo, hi;
            rl_param_range(p, &lo, &hi);
            PyObject *t = ((rl_kind_params(k) >> p) & 1u) ? Py_BuildValue("(sszLL)", rl_param_name(p),
                types[rl_param_type(p)], rl_param_argname(p), (long long)lo, (long long)hi) : Py_NewRef(Py_None);
            if (!t || (t != Py_None && PyList_Append(params, t) < 0)) {
                Py_CLEAR(params);
            }
            Py_XDECREF(t);
        }
        if (params) {
            row = Py_BuildValue("(isN)", k, rl_kind_name(k), PyList_AsTuple(params));
        }
        if (!row || PyList_Append(lst, row) < 0) {
            Py_CLEAR(lst);
        }
        Py_XDECREF(row);
        Py_XDECREF(params);
    }
    return lst;
}

static PyObject *status_str(PyObject *Py_UNUSED(m), PyObject *arg) {
    long st = PyLong_AsLong(arg);
    if (st == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (st == RL_E_DESCRIBE) {
        return PyUnicode_FromString("an argument could not be described (symbolic shape, sparse or nested layout)");
    }
    return PyUnicode_FromString(rl_status_str((int)st));
}

/* attention_pairs(sq, sk, mask) -> the (query, key) pairs of one head (rl_attention_pairs). */
static PyObject *attention_pairs(PyObject *Py_UNUSED(m), PyObject *const *argv, Py_ssize_t argc) {
    if (argc != 3) {
        PyErr_SetString(PyExc_TypeError, "attention_pairs(sq, sk, mask) takes 3 arguments");
        return NULL;
    }
    unsigned long long v[2];
    for (int i = 0; i < 2; i++) {
        if (!PyLong_Check(argv[i]) || PyBool_Check(argv[i])) {
            return PyErr_Format(PyExc_TypeError, "attention_pairs: %s must be an int, got %.80s", i ? "sk" : "sq",
                                Py_TYPE(argv[i])->tp_name);
        }
        v[i] = PyLong_AsUnsignedLongLong(argv[i]);
        if (v[i] == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            return PyErr_Format(PyExc_ValueError, "attention_pairs: %s must be an int in [0, 2**64)", i ? "sk" : "sq");
        }
    }
    long mask = PyLong_Check(argv[2]) && !PyBool_Check(argv[2]) ? PyLong_AsLong(argv[2]) : -1;
    if (mask < 0 || mask > 2) {
        PyErr_Clear();
        PyErr_SetString(PyExc_ValueError, "attention_pairs: mask must be 0 (none), 1 (causal, top-left) or 2 "
                                          "(causal, bottom-right)");
        return NULL;
    }
    int ov = 0;
    uint64_t n = rl_attention_pairs(v[0], v[1], (int)mask, &ov);
    if (ov) {
        PyErr_SetString(PyExc_OverflowError, "attention_pairs: the count does not fit 64 bits");
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(n);
}

PyObject *rl_module_fingerprint(PyObject *m, PyObject *const *argv, Py_ssize_t argc); /* module_fingerprint.c */

PyMethodDef rl_cost_methods[] = {
    {"dtype_table", dtype_table, METH_NOARGS, "[(code, name, itemsize)] of the cost model's scalar types."},
    {"kind_table", kind_table, METH_NOARGS,
     "[(code, name, params)] of the cost kinds; params: ((name, type, schema argument name or None, lo, hi), ...), "
     "type one of count, flag, arg, arg_required."},
    {"status_str", status_str, METH_O, "Text of a record status code."},
    {"module_fingerprint", (PyCFunction)(void (*)(void))rl_module_fingerprint, METH_FASTCALL,
     "module_fingerprint(model, named_parameters, named_modules) -> bytes or None: what the model's parameter counts "
     "depend on (csrc/module_fingerprint.c)."},
    {"attention_pairs", (PyCFunction)(void (*)(void))attention_pairs, METH_FASTCALL,
     "attention_pairs(sq, sk, mask) -> (query, key) pairs of one head: mask 0 none, 1 causal top-left, 2 causal "
     "bottom-right (the cost model's count)."},
    {NULL, NULL, 0, NULL},
};

int rl_cost_exec(PyObject *module) {
    PyObject *tp = PyType_FromModuleAndSpec(module, rl_recorder_spec, NULL);
    if (!tp) {
        return -1;
    }
    int rc = PyModule_AddObjectRef(module, "Recorder", tp);
    Py_DECREF(tp);
    if (rc < 0) {
        return -1;
    }
    if (PyModule_AddIntConstant(module, "RECORD_SIZE", (long)sizeof(rl_record)) < 0 ||
        PyModule_AddIntConstant(module, "ACCESS_SIZE", (long)sizeof(rl_access)) < 0) {
        return -1;
    }
    /* The record and access-row layouts, field by field: (name, offset, size, kind 'u' unsigned int / 'f' float).
     * roofline/_datamodel/_records.py checks its dtypes against them at import. */
    typedef struct {
        const char *name;
        size_t offset, size;
        char kind;
    } field_desc;
#define RL_FIELD_(T, f, k) {#f, offsetof(T, f), sizeof(((T *)0)->f), k}
    static const field_desc rec_fields[] = {
        RL_FIELD_(rl_record, matrix_flops, 'u'), RL_FIELD_(rl_record, vector_flops, 'u'),
        RL_FIELD_(rl_record, special_ops, 'u'),  RL_FIELD_(rl_record, bytes_read, 'u'),
        RL_FIELD_(rl_record, bytes_written, 'u'), RL_FIELD_(rl_record, flop_counter_flops, 'u'),
        RL_FIELD_(rl_record, t_start, 'f'),      RL_FIELD_(rl_record, t_end, 'f'),
        RL_FIELD_(rl_record, op, 'u'),           RL_FIELD_(rl_record, module, 'u'),
        RL_FIELD_(rl_record, phase, 'u'),        RL_FIELD_(rl_record, dtype, 'u'),
        RL_FIELD_(rl_record, status, 'u'),       RL_FIELD_(rl_record, kind, 'u'),
        RL_FIELD_(rl_record, seq, 'u'),          RL_FIELD_(rl_record, sig, 'u'),
        RL_FIELD_(rl_record, reserved, 'u'),
    };
    static const field_desc acc_fields[] = {
        RL_FIELD_(rl_access, storage, 'u'), RL_FIELD_(rl_access, nbytes, 'u'),
        RL_FIELD_(rl_access, record, 'u'),  RL_FIELD_(rl_access, write, 'u'),
    };
#undef RL_FIELD_
    static const struct {
        const char *attr;
        const field_desc *f;
        size_t n;
    } layouts[] = {{"RECORD_FIELDS", rec_fields, sizeof rec_fields / sizeof *rec_fields},
                   {"ACCESS_FIELDS", acc_fields, sizeof acc_fields / sizeof *acc_fields}};
    for (size_t l = 0; l < 2; l++) {
        PyObject *t = PyTuple_New((Py_ssize_t)layouts[l].n);
        for (size_t i = 0; t && i < layouts[l].n; i++) {
            const field_desc *f = &layouts[l].f[i];
            PyObject *item = Py_BuildValue("(snnC)", f->name, (Py_ssize_t)f->offset, (Py_ssize_t)f->size, f->kind);
            if (!item) {
                Py_CLEAR(t);
                break;
            }
            PyTuple_SET_ITEM(t, (Py_ssize_t)i, item);
        }
        rc = t ? PyModule_AddObjectRef(module, layouts[l].attr, t) : -1;
        Py_XDECREF(t);
        if (rc < 0) {
            return -1;
        }
    }
    static const char *phase_names[] = {
#define RL_PHASE_NAME_(id, code, name) [code] = name,
        RL_PHASES(RL_PHASE_NAME_)
#undef RL_PHASE_NAME_
    };
    PyObject *phases = PyTuple_New(RL_PHASE_COUNT);
    for (int i = 0; phases && i < RL_PHASE_COUNT; i++) {
        PyObject *n = PyUnicode_FromString(phase_names[i]);
        if (!n) {
            Py_CLEAR(phases);
            break;
        }
        PyTuple_SET_ITEM(phases, i, n);
    }
    rc = phases ? PyModule_AddObjectRef(module, "PHASES", phases) : -1;
    Py_XDECREF(phases);
    if (rc < 0) {
        return -1;
    }
    static const struct {
        const char *name;
        int value;
    } kinds[] = {
#define RL_KIND_CONST_(id, name, params, formula) {"K_" #id, RL_K_##id},
        RL_KINDS(RL_KIND_CONST_)
#undef RL_KIND_CONST_
        {"OPF_FLOP_COUNTER", (int)RL_OPF_FLOP_COUNTER}, {"OPF_FRESH_OUTS", (int)RL_OPF_FRESH_OUTS},
        {"MAX_ARGS", RL_MAX_ARGS},   {"MAX_DIMS", RL_MAX_DIMS},   {"E_DESCRIBE", RL_E_DESCRIBE},
        {"E_OVERFLOW", RL_E_OVERFLOW},
    };
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        if (PyModule_AddIntConstant(module, kinds[i].name, kinds[i].value) < 0) {
            return -1;
        }
    }
    return 0;
}
