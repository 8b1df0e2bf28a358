/* Python binding of the GPU layer (gpu.c): library loading, device queries, NVRTC compilation, timed launches.
 *
 * These are private building blocks for roofline/_hardware/_gpu.py, which owns the policy (where to look for the
 * libraries, which kernels to run, how to count their work, the cubin cache). Each function parses its
 * arguments, then calls an `_impl` that does the work with the interpreter lock released where the work is pure
 * C (loading, compiling, running kernels).
 *
 * Errors from gpu.c become exceptions of the classes created in rl_gpu_exec, kept in the module state (rl_state)
 * and added to the module:
 *   GpuError(RuntimeError)           base class
 *   CudaUnavailableError(GpuError)   a library is missing or unusable, or no GPU is usable
 *   CudaError(GpuError)              a driver call failed; attributes `call` and `code` (the CUresult)
 *   NvrtcError(GpuError)             an NVRTC call failed; attributes `call`, `code` and `log` (compile log)
 * They are named roofline._hardware._gpu.* because that module re-exports them as the public spelling. */
#include "rl_module.h"

#include "gpu.h"

#include <string.h>

/* int value of a Python int, -1 with an exception set when it is not an int or does not fit (PyLong_AsInt is
 * public only from Python 3.13). */
static int rl_as_int(PyObject *obj) {
    long v = PyLong_AsLong(obj);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (v < -2147483647L - 1 || v > 2147483647L) {
        PyErr_SetString(PyExc_OverflowError, "value does not fit in a C int");
        return -1;
    }
    return (int)v;
}

/* Raise the exception that `err` describes, an instance of the module state's class for its status, with
 * attributes `call`, `code` and (when `log` is not NULL) `log`. Always returns NULL. */
static PyObject *rl_gpu_raise(PyObject *module, const rl_gpu_error *err, const rl_gpu_blob *log) {
    rl_state *st = rl_state_of(module);
    PyObject *cls, *message, *exc;

    switch (err->status) {
    case RL_GPU_NOMEM: return PyErr_NoMemory();
    case RL_GPU_ARG: return rl_err_value("%s", err->message);
    case RL_GPU_UNAVAILABLE: cls = st->cuda_unavailable_error; break;
    case RL_GPU_NVRTC: cls = st->nvrtc_error; break;
    case RL_GPU_CUDA: cls = st->cuda_error; break;
    default: cls = st->gpu_error; break;
    }
    if (log != NULL && log->size > 0) {
        message = PyUnicode_FromFormat("%s\n---- NVRTC log ----\n%s", err->message, log->data);
    } else {
        message = PyUnicode_DecodeUTF8(err->message, (Py_ssize_t)strlen(err->message), "replace");
    }
    if (message == NULL) {
        return NULL;
    }
    exc = PyObject_CallOneArg(cls, message);
    Py_DECREF(message);
    if (exc == NULL) {
        return NULL;
    }
    {
        PyObject *call = PyUnicode_FromString(err->call);
        PyObject *code = PyLong_FromLong(err->code);
        PyObject *text = log != NULL ? PyUnicode_DecodeUTF8(log->data != NULL ? log->data : "", (Py_ssize_t)log->size,
                                                            "replace")
                                     : NULL;
        int bad = call == NULL || code == NULL || (log != NULL && text == NULL) ||
                  PyObject_SetAttrString(exc, "call", call) < 0 || PyObject_SetAttrString(exc, "code", code) < 0 ||
                  (text != NULL && PyObject_SetAttrString(exc, "log", text) < 0);
        Py_XDECREF(call);
        Py_XDECREF(code);
        Py_XDECREF(text);
        if (bad) {
            Py_DECREF(exc);
            return NULL;
        }
    }
    PyErr_SetObject(cls, exc);
    Py_DECREF(exc);
    return NULL;
}

/* Convert a sequence of str into a new tuple (kept alive by the caller while the GIL is released) and a
 * malloc'ed array of UTF-8 pointers into it. Returns the tuple, or NULL with an exception set and *out NULL. A
 * str holding a NUL character is refused: C would see only the text before it. */
static PyObject *rl_string_array(PyObject *seq, const char ***out, Py_ssize_t *n, const char *what) {
    PyObject *tuple = PySequence_Tuple(seq);
    Py_ssize_t i, size;
    *out = NULL;
    if (tuple == NULL) {
        return NULL;
    }
    *n = PyTuple_GET_SIZE(tuple);
    *out = PyMem_Calloc((size_t)(*n > 0 ? *n : 1), sizeof **out);
    if (*out == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (i = 0; i < *n; i++) {
        PyObject *item = PyTuple_GET_ITEM(tuple, i);
        if (!PyUnicode_Check(item)) {
            rl_err_value("%s must be a sequence of str, item %zd is %.100s", what, i, Py_TYPE(item)->tp_name);
            goto fail;
        }
        (*out)[i] = PyUnicode_AsUTF8AndSize(item, &size);
        if ((*out)[i] == NULL) {
            goto fail;
        }
        if (strlen((*out)[i]) != (size_t)size) {
            rl_err_value("%s: item %zd holds a NUL character", what, i);
            goto fail;
        }
    }
    return tuple;
fail:
    PyMem_Free((void *)*out);
    *out = NULL;
    Py_DECREF(tuple);
    return NULL;
}

/* ---- loading ------------------------------------------------------------------------------------------ */

typedef rl_gpu_status (*rl_loader)(const char *const *, size_t, rl_gpu_error *);

/* Load a library through `load` from `paths`; return the path loaded (from `loaded_path()`) as str. */
static PyObject *rl_load_impl(PyObject *module, PyObject *paths, rl_loader load, const char *(*loaded_path)(void)) {
    const char **array = NULL;
    Py_ssize_t n = 0;
    rl_gpu_error err;
    rl_gpu_status st;
    PyObject *keep = rl_string_array(paths, &array, &n, "paths");
    if (keep == NULL) {
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    st = load(array, (size_t)n, &err);
    Py_END_ALLOW_THREADS
    PyMem_Free((void *)array);
    Py_DECREF(keep);
    if (st != RL_GPU_OK) {
        return rl_gpu_raise(module, &err, NULL);
    }
    return PyUnicode_DecodeFSDefault(loaded_path());
}

/* gpu_load_driver(paths) -> str. */
static PyObject *rl_gpu_load_driver_py(PyObject *module, PyObject *paths) {
    return rl_load_impl(module, paths, rl_gpu_load_driver, rl_gpu_driver_path);
}

/* gpu_load_nvrtc(paths) -> str. */
static PyObject *rl_gpu_load_nvrtc_py(PyObject *module, PyObject *paths) {
    return rl_load_impl(module, paths, rl_gpu_load_nvrtc, rl_gpu_nvrtc_path);
}

/* gpu_loaded() -> {'driver': str | None, 'nvrtc': str | None}; never loads anything. */
static PyObject *rl_gpu_loaded_py(PyObject *module, PyObject *unused) {
    const char *driver = rl_gpu_driver_path();
    const char *nvrtc = rl_gpu_nvrtc_path();
    (void)module;
    (void)unused;
    return Py_BuildValue("{s:z,s:z}", "driver", driver, "nvrtc", nvrtc);
}

/* ---- devices ------------------------------------------------------------------------------------------ */

/* The int a gpu.c query returns, or NULL with its error raised. */
static PyObject *rl_int_query(PyObject *module, rl_gpu_status (*query)(int *, rl_gpu_error *)) {
    int value = 0;
    rl_gpu_error err;
    if (query(&value, &err) != RL_GPU_OK) {
        return rl_gpu_raise(module, &err, NULL);
    }
    return PyLong_FromLong(value);
}

/* gpu_driver_version() -> int (1000 * major + 10 * minor). */
static PyObject *rl_gpu_driver_version_py(PyObject *module, PyObject *unused) {
    (void)unused;
    return rl_int_query(module, rl_gpu_driver_version);
}

/* gpu_device_count() -> int. */
static PyObject *rl_gpu_device_count_py(PyObject *module, PyObject *unused) {
    (void)unused;
    return rl_int_query(module, rl_gpu_device_count);
}

/* Build the dict of device `index`'s properties; unknown attributes (-1 from gpu.c) become None. */
static PyObject *rl_device_props_impl(PyObject *module, int index) {
    rl_gpu_props p;
    rl_gpu_error err;
    PyObject *uuid;
    PyObject *d;
    if (rl_gpu_device_props(index, &p, &err) != RL_GPU_OK) {
        return rl_gpu_raise(module, &err, NULL);
    }
    if (p.has_uuid) {
        uuid = PyBytes_FromStringAndSize((const char *)p.uuid, sizeof p.uuid);
    } else {
        uuid = Py_NewRef(Py_None);
    }
    if (uuid == NULL) {
        return NULL;
    }
#define RL_INT_OR_NONE(v) ((v) >= 0 ? PyLong_FromLong(v) : Py_NewRef(Py_None))
    d = Py_BuildValue("{s:s,s:i,s:N,s:(ii),s:i,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:K,s:N,s:N,s:N}", "name", p.name, "index",
                      index, "uuid", uuid, "compute_capability", p.cc_major, p.cc_minor, "sm_count", p.sm_count,
                      "clock_khz", RL_INT_OR_NONE(p.clock_khz), "memory_clock_khz", RL_INT_OR_NONE(p.memory_clock_khz),
                      "memory_bus_width_bits", RL_INT_OR_NONE(p.memory_bus_width_bits), "l2_cache_bytes",
                      RL_INT_OR_NONE(p.l2_cache_bytes), "max_threads_per_sm", RL_INT_OR_NONE(p.max_threads_per_sm),
                      "max_shared_per_block_optin", RL_INT_OR_NONE(p.max_shared_per_block_optin), "registers_per_sm",
                      RL_INT_OR_NONE(p.registers_per_sm), "total_memory_bytes", p.total_memory_bytes, "pci_domain",
                      RL_INT_OR_NONE(p.pci_domain), "pci_bus", RL_INT_OR_NONE(p.pci_bus), "pci_device",
                      RL_INT_OR_NONE(p.pci_device));
#undef RL_INT_OR_NONE
    return d;
}

/* gpu_device_props(index) -> dict. */
static PyObject *rl_gpu_device_props_py(PyObject *module, PyObject *arg) {
    int index = rl_as_int(arg);
    if (index == -1 && PyErr_Occurred()) {
        return NULL;
    }
    return rl_device_props_impl(module, index);
}

/* gpu_mem_info(index) -> (free_bytes, total_bytes); creates the primary context on first use. */
static PyObject *rl_gpu_mem_info_py(PyObject *module, PyObject *arg) {
    size_t free_bytes = 0, total_bytes = 0;
    rl_gpu_error err;
    rl_gpu_status st;
    int index = rl_as_int(arg);
    if (index == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    st = rl_gpu_mem_info(index, &free_bytes, &total_bytes, &err);
    Py_END_ALLOW_THREADS
    if (st != RL_GPU_OK) {
        return rl_gpu_raise(module, &err, NULL);
    }
    return Py_BuildValue("(nn)", (Py_ssize_t)free_bytes, (Py_ssize_t)total_bytes);
}

/* ---- NVRTC -------------------------------------------------------------------------------------------- */

/* gpu_nvrtc_version() -> (major, minor). */
static PyObject *rl_gpu_nvrtc_version_py(PyObject *module, PyObject *unused) {
    int major = 0, minor = 0;
    rl_gpu_error err;
    (void)unused;
    if (rl_gpu_nvrtc_version(&major, &minor, &err) != RL_GPU_OK) {
        return rl_gpu_raise(module, &err, NULL);
    }
    return Py_BuildValue("(ii)", major, minor);
}

/* gpu_nvrtc_archs() -> list[int], at most 128 entries. */
static PyObject *rl_gpu_nvrtc_archs_py(PyObject *module, PyObject *unused) {
    int archs[128];
    size_t n = 0, i;
    rl_gpu_error err;
    PyObject *list;
    (void)unused;
    if (rl_gpu_nvrtc_archs(archs, sizeof archs / sizeof archs[0], &n, &err) != RL_GPU_OK) {
        return rl_gpu_raise(module, &err, NULL);
    }
    if (n > sizeof archs / sizeof archs[0]) {
        n = sizeof archs / sizeof archs[0];
    }
    list = PyList_New((Py_ssize_t)n);
    if (list == NULL) {
        return NULL;
    }
    for (i = 0; i < n; i++) {
        PyObject *v = PyLong_FromLong(archs[i]);
        if (v == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, v);
    }
    return list;
}

/* Compile `source` and return (cubin bytes, log str). */
static PyObject *rl_compile_impl(PyObject *module, const char *source, const char *name, const char *const *headers,
                                 const char *const *header_names, size_t n_headers, const char *const *options,
                                 size_t n_options) {
    rl_gpu_blob cubin, log;
    rl_gpu_error err;
    rl_gpu_status st;
    PyObject *result = NULL;
    Py_BEGIN_ALLOW_THREADS
    st = rl_gpu_compile(source, name, headers, header_names, n_headers, options, n_options, &cubin, &log, &err);
    Py_END_ALLOW_THREADS
    if (st != RL_GPU_OK) {
        rl_gpu_raise(module, &err, st == RL_GPU_NVRTC ? &log : NULL);
    } else {
        result = Py_BuildValue("(y#s#)", cubin.data, (Py_ssize_t)cubin.size, log.data != NULL ? log.data : "",
                               (Py_ssize_t)log.size);
    }
    rl_gpu_blob_free(&cubin);
    rl_gpu_blob_free(&log);
    return result;
}

/* gpu_compile(source, name, options, headers=None) -> (bytes, str); headers maps include names to texts. */
static PyObject *rl_gpu_compile_py(PyObject *module, PyObject *args) {
    const char *source, *name;
    PyObject *options_seq, *headers_obj = Py_None, *keep[3] = {NULL, NULL, NULL}, *result = NULL;
    const char **options = NULL, **header_names = NULL, **headers = NULL;
    Py_ssize_t n_options = 0, n_names = 0, n_texts = 0;
    if (!PyArg_ParseTuple(args, "ssO|O:gpu_compile", &source, &name, &options_seq, &headers_obj)) {
        return NULL;
    }
    if (headers_obj != Py_None && !PyDict_Check(headers_obj)) {
        return rl_err_value("headers must be a dict {include name: text} or None, not %.100s",
                            Py_TYPE(headers_obj)->tp_name);
    }
    keep[0] = rl_string_array(options_seq, &options, &n_options, "options");
    if (keep[0] != NULL && headers_obj != Py_None) {
        PyObject *names = PyDict_Keys(headers_obj), *texts = names ? PyDict_Values(headers_obj) : NULL;
        keep[1] = names ? rl_string_array(names, &header_names, &n_names, "header names") : NULL;
        keep[2] = keep[1] && texts ? rl_string_array(texts, &headers, &n_texts, "header texts") : NULL;
        Py_XDECREF(names);
        Py_XDECREF(texts);
    }
    if (keep[0] != NULL && (headers_obj == Py_None || keep[2] != NULL)) {
        result = rl_compile_impl(module, source, name, headers, header_names, (size_t)n_names, options,
                                 (size_t)n_options);
    }
    PyMem_Free((void *)options);
    PyMem_Free((void *)header_names);
    PyMem_Free((void *)headers);
    Py_XDECREF(keep[0]);
    Py_XDECREF(keep[1]);
    Py_XDECREF(keep[2]);
    return result;
}

/* ---- timed launches ----------------------------------------------------------------------------------- */

/* Parse one kernel argument `(kind, value)` into `*out`; 0 on success, -1 with an exception set. */
static int rl_parse_arg(PyObject *item, Py_ssize_t i, rl_gpu_arg *out) {
    const char *kind;
    PyObject *value;
    if (!PyArg_ParseTuple(item, "sO", &kind, &value)) {
        PyErr_Format(PyExc_ValueError, "kernel argument %zd must be a (kind, value) pair", i);
        return -1;
    }
    static const char *const names[] = {[RL_GPU_ARG_BUFFER] = "buffer", [RL_GPU_ARG_I32] = "i32",
                                        [RL_GPU_ARG_U32] = "u32",       [RL_GPU_ARG_I64] = "i64",
                                        [RL_GPU_ARG_U64] = "u64",       [RL_GPU_ARG_F32] = "f32",
                                        [RL_GPU_ARG_F64] = "f64"};
    int k = 0;
    while (k < (int)(sizeof names / sizeof names[0]) && strcmp(kind, names[k]) != 0) {
        k++;
    }
    out->kind = (rl_gpu_arg_kind)k;
    switch (out->kind) {
    case RL_GPU_ARG_BUFFER: out->u.index = rl_as_int(value); break;
    case RL_GPU_ARG_I32: out->u.i32 = rl_as_int(value); break;
    case RL_GPU_ARG_U32: {
        unsigned long v = PyLong_AsUnsignedLong(value);
        if (!(v == (unsigned long)-1 && PyErr_Occurred()) && v > 0xFFFFFFFFul) {
            PyErr_Format(PyExc_OverflowError, "kernel argument %zd does not fit in 32 bits", i);
        }
        out->u.u32 = (uint32_t)v;
        break;
    }
    case RL_GPU_ARG_I64: out->u.i64 = PyLong_AsLongLong(value); break;
    case RL_GPU_ARG_U64: out->u.u64 = PyLong_AsUnsignedLongLong(value); break;
    case RL_GPU_ARG_F32: out->u.f32 = (float)PyFloat_AsDouble(value); break;
    case RL_GPU_ARG_F64: out->u.f64 = PyFloat_AsDouble(value); break;
    default:
        PyErr_Format(PyExc_ValueError,
                     "kernel argument %zd has unknown kind %R (buffer, i32, u32, i64, u64, f32 or f64)", i,
                     PyTuple_GET_ITEM(item, 0));
        return -1;
    }
    return PyErr_Occurred() ? -1 : 0;
}

/* Run the timed launch and build the result dict (see _gpu.py for its use). */
static PyObject *rl_bench_impl(PyObject *module, rl_gpu_bench_spec *spec, PyObject *readback) {
    rl_gpu_bench_result res;
    rl_gpu_error err;
    rl_gpu_status st;
    PyObject *times;
    unsigned k;
    Py_BEGIN_ALLOW_THREADS
    st = rl_gpu_bench(spec, &res, &err);
    Py_END_ALLOW_THREADS
    if (st != RL_GPU_OK) {
        return rl_gpu_raise(module, &err, NULL);
    }
    times = PyList_New((Py_ssize_t)spec->reps);
    if (times == NULL) {
        return NULL;
    }
    for (k = 0; k < spec->reps; k++) {
        PyObject *v = PyFloat_FromDouble(spec->times_s[k]);
        if (v == NULL) {
            Py_DECREF(times);
            return NULL;
        }
        PyList_SET_ITEM(times, (Py_ssize_t)k, v);
    }
    return Py_BuildValue("{s:N,s:I,s:I,s:I,s:i,s:i,s:i,s:i,s:O,s:K,s:K,s:O}", "times_s", times, "grid", res.grid,
                         "block", spec->block, "launches_per_rep",
                         spec->launches_per_rep > 0 ? spec->launches_per_rep : 1u, "blocks_per_sm", res.blocks_per_sm,
                         "registers", res.registers, "local_bytes", res.local_bytes, "static_shared_bytes",
                         res.static_shared_bytes, "params_checked", res.params_checked ? Py_True : Py_False,
                         "clock_cycles", res.clock_cycles, "clock_ns", res.clock_ns, "readback",
                         readback != NULL ? readback : Py_None);
}

/* gpu_bench(...) -> dict: parse buffers, arguments and the read-back range into a spec, then rl_bench_impl. */
static PyObject *rl_gpu_bench_py(PyObject *module, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"device",  "cubin", "kernel", "grid",     "block",
                               "shared",  "buffers", "args", "warmup",   "reps",
                               "readback", "max_blocks_per_sm", "launches_per_rep", NULL};
    rl_gpu_bench_spec spec;
    Py_buffer cubin = {0};
    PyObject *buffers_seq, *args_seq, *readback_obj = Py_None;
    PyObject *buffers = NULL, *kargs = NULL, *readback = NULL, *result = NULL;
    rl_gpu_buffer_spec *bufs = NULL;
    rl_gpu_arg *argv = NULL;
    double *times = NULL;
    Py_ssize_t i;

    memset(&spec, 0, sizeof spec);
    spec.readback = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iy*sIIIOOII|OII:gpu_bench", keywords, &spec.device, &cubin,
                                     &spec.kernel, &spec.grid, &spec.block, &spec.shared_bytes, &buffers_seq,
                                     &args_seq, &spec.warmup, &spec.reps, &readback_obj, &spec.max_blocks_per_sm,
                                     &spec.launches_per_rep)) {
        return NULL;
    }
    spec.cubin = cubin.buf;
    spec.cubin_size = (size_t)cubin.len;
    if (spec.reps == 0 || spec.reps > 100000) {
        rl_err_value("reps must be between 1 and 100000, got %u", spec.reps);
        goto done;
    }
    if (spec.launches_per_rep > 100000) {
        rl_err_value("launches_per_rep must be at most 100000, got %u", spec.launches_per_rep);
        goto done;
    }
    buffers = PySequence_Tuple(buffers_seq);
    kargs = buffers != NULL ? PySequence_Tuple(args_seq) : NULL;
    if (kargs == NULL) {
        goto done;
    }
    spec.n_buffers = (size_t)PyTuple_GET_SIZE(buffers);
    spec.n_args = (size_t)PyTuple_GET_SIZE(kargs);
    bufs = PyMem_Calloc(spec.n_buffers + 1, sizeof *bufs);
    argv = PyMem_Calloc(spec.n_args + 1, sizeof *argv);
    times = PyMem_Calloc(spec.reps, sizeof *times);
    if (bufs == NULL || argv == NULL || times == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (i = 0; i < (Py_ssize_t)spec.n_buffers; i++) {
        unsigned long long bytes;
        unsigned int fill;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(buffers, i), "KI", &bytes, &fill)) {
            PyErr_Format(PyExc_ValueError, "buffer %zd must be a (bytes, fill32) pair", i);
            goto done;
        }
        bufs[i].bytes = (size_t)bytes;
        bufs[i].fill = (uint32_t)fill;
    }
    for (i = 0; i < (Py_ssize_t)spec.n_args; i++) {
        if (rl_parse_arg(PyTuple_GET_ITEM(kargs, i), i, &argv[i]) < 0) {
            goto done;
        }
    }
    if (readback_obj != Py_None) {
        int index;
        unsigned long long offset, nbytes;
        if (!PyArg_ParseTuple(readback_obj, "iKK", &index, &offset, &nbytes)) {
            PyErr_SetString(PyExc_ValueError, "readback must be None or (buffer, offset, nbytes)");
            goto done;
        }
        readback = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)nbytes);
        if (readback == NULL) {
            goto done;
        }
        spec.readback = index;
        spec.readback_offset = (size_t)offset;
        spec.readback_bytes = (size_t)nbytes;
        spec.readback_dst = PyBytes_AS_STRING(readback);
    }
    spec.buffers = bufs;
    spec.args = argv;
    spec.times_s = times;
    result = rl_bench_impl(module, &spec, readback);
done:
    PyMem_Free(times);
    PyMem_Free(argv);
    PyMem_Free(bufs);
    Py_XDECREF(readback);
    Py_XDECREF(kargs);
    Py_XDECREF(buffers);
    PyBuffer_Release(&cubin);
    return result;
}

/* gpu_check_cubin(data) -> None; ValueError saying what is wrong when `data` is not a complete CUDA ELF image. */
static PyObject *rl_gpu_check_cubin_py(PyObject *module, PyObject *arg) {
    Py_buffer view;
    char why[256];
    int ok;
    (void)module;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    ok = rl_gpu_check_cubin(view.buf, (size_t)view.len, why, sizeof why);
    PyBuffer_Release(&view);
    if (!ok) {
        return rl_err_value("%s", why);
    }
    Py_RETURN_NONE;
}

PyMethodDef rl_gpu_methods[] = {
    {"gpu_check_cubin", rl_gpu_check_cubin_py, METH_O,
     "gpu_check_cubin(data) -> None\n\nRaise ValueError unless `data` is a complete 64-bit CUDA ELF image (header, "
     "section and program header tables and every section inside the buffer)."},
    {"gpu_load_driver", rl_gpu_load_driver_py, METH_O,
     "gpu_load_driver(paths) -> str\n\nOpen the CUDA driver library from the first loadable path, resolve its entry "
     "points and call cuInit. Returns the path loaded. Raises CudaUnavailableError."},
    {"gpu_load_nvrtc", rl_gpu_load_nvrtc_py, METH_O,
     "gpu_load_nvrtc(paths) -> str\n\nOpen NVRTC from the first loadable path. Returns the path loaded."},
    {"gpu_loaded", rl_gpu_loaded_py, METH_NOARGS,
     "gpu_loaded() -> dict\n\nPaths the driver and NVRTC were loaded from ({'driver': str|None, 'nvrtc': ...})."},
    {"gpu_driver_version", rl_gpu_driver_version_py, METH_NOARGS,
     "gpu_driver_version() -> int\n\nCUDA version the driver supports, 1000*major + 10*minor."},
    {"gpu_device_count", rl_gpu_device_count_py, METH_NOARGS, "gpu_device_count() -> int"},
    {"gpu_device_props", rl_gpu_device_props_py, METH_O,
     "gpu_device_props(index) -> dict\n\nDriver attributes of a device (clocks in kHz, sizes in bytes)."},
    {"gpu_mem_info", rl_gpu_mem_info_py, METH_O, "gpu_mem_info(index) -> (free_bytes, total_bytes)"},
    {"gpu_nvrtc_version", rl_gpu_nvrtc_version_py, METH_NOARGS, "gpu_nvrtc_version() -> (major, minor)"},
    {"gpu_nvrtc_archs", rl_gpu_nvrtc_archs_py, METH_NOARGS,
     "gpu_nvrtc_archs() -> list[int]\n\nReal architectures NVRTC supports (e.g. 90 for sm_90); empty if unknown."},
    {"gpu_compile", rl_gpu_compile_py, METH_VARARGS,
     "gpu_compile(source, name, options, headers=None) -> (cubin: bytes, log: str)\n\nCompile CUDA C++ with NVRTC; "
     "headers {include name: text} are what `#include \"name\"` finds. Raises NvrtcError carrying the compile log."},
    {"gpu_bench", (PyCFunction)(void (*)(void))rl_gpu_bench_py, METH_VARARGS | METH_KEYWORDS,
     "gpu_bench(device, cubin, kernel, grid, block, shared, buffers, args, warmup, reps, readback=None, "
     "max_blocks_per_sm=0, launches_per_rep=1) -> dict\n\nCheck `cubin` and load it, allocate `buffers` ((bytes, "
     "fill32) pairs), check `args` against the kernel's parameters where the driver can tell, launch `kernel` "
     "`warmup` times, then `reps` times `launches_per_rep` launches between CUDA events (times are per launch). "
     "grid 0 fills the device from the occupancy calculator. Returns {'times_s', 'grid', 'block', "
     "'launches_per_rep', 'blocks_per_sm', 'registers', 'local_bytes', 'static_shared_bytes', 'params_checked', "
     "'clock_cycles', 'clock_ns', 'readback'}."},
    {NULL, NULL, 0, NULL},
};

/* Create the exception classes, keep them in the module state (which owns one reference each) and add them to the
 * module. */
int rl_gpu_exec(PyObject *module) {
    rl_state *st = rl_state_of(module);
    st->gpu_error = PyErr_NewExceptionWithDoc("roofline._hardware._gpu.GpuError", "Base class of roofline's GPU errors.",
                                              PyExc_RuntimeError, NULL);
    if (st->gpu_error == NULL) {
        return -1;
    }
    st->cuda_unavailable_error = PyErr_NewExceptionWithDoc(
        "roofline._hardware._gpu.CudaUnavailableError",
        "CUDA cannot be used here: the driver library (libcuda) or NVRTC is missing or unusable, or no GPU is "
        "visible. The message says what is missing and how to fix it.",
        st->gpu_error, NULL);
    st->cuda_error = PyErr_NewExceptionWithDoc(
        "roofline._hardware._gpu.CudaError", "A CUDA driver call failed. `call` names it; `code` is the CUresult.",
        st->gpu_error, NULL);
    st->nvrtc_error = PyErr_NewExceptionWithDoc(
        "roofline._hardware._gpu.NvrtcError",
        "An NVRTC call failed. `call` names it, `code` is the nvrtcResult, `log` holds the compile log.",
        st->gpu_error, NULL);
    /* on failure the state keeps what was made; the module's m_clear releases it */
    if (st->cuda_unavailable_error == NULL || st->cuda_error == NULL || st->nvrtc_error == NULL ||
        PyModule_AddObjectRef(module, "GpuError", st->gpu_error) < 0 ||
        PyModule_AddObjectRef(module, "CudaUnavailableError", st->cuda_unavailable_error) < 0 ||
        PyModule_AddObjectRef(module, "CudaError", st->cuda_error) < 0 ||
        PyModule_AddObjectRef(module, "NvrtcError", st->nvrtc_error) < 0) {
        return -1;
    }
    return 0;
}
