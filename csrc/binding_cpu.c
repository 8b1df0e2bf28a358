/* Python binding of the CPU ceiling benchmarks (cpu_info.c, cpu_kernels.c, cpu_runs.c).
 *
 * Each exported function parses and validates its arguments, then calls an `_impl` that does the work with the
 * GIL released around the pure C measurement and converts the result. Argument errors raise ValueError or
 * TypeError naming the argument; a failed system call raises RuntimeError naming that call. */
#include "rl_module.h" /* Python.h first: it sets the feature macros the C library headers read */

#include <errno.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "cost.h" /* rl_dtype_name */
#include "cpu.h"
#include "rl_numpy.h"

#define RL_MAX_THREADS 4096
#define RL_MAX_SECONDS 600.0

/* ---- shared argument converters ---- */

/* Name of the i-th FMA dtype / bandwidth kernel of cpu_kernels.c's tables. */
static const char *rl_fma_name(int i) { return rl_dtype_name(rl_cpu_fma_dtype(i)); }
static const char *rl_bw_name(int i) { return rl_cpu_bw_kernel_name(i); }

/* ValueError "<argname> must be 'a', 'b' or 'c', not '<got>'" listing the `count` names name(0..count-1). */
static void rl_err_choices(const char *argname, const char *(*name)(int), int count, const char *got) {
    char list[512];
    size_t used = 0;
    list[0] = '\0';
    for (int i = 0; i < count && used < sizeof(list); i++) {
        const char *sep = i == 0 ? "" : (i == count - 1 ? " or " : ", ");
        int w = snprintf(list + used, sizeof(list) - used, "%s'%s'", sep, name(i));
        used += w > 0 ? (size_t)w : 0;
    }
    rl_err_value("%s must be %s, not '%s'", argname, list, got);
}

/* Map a dtype name to one of the FMA kernels' dtypes. Returns 0, or -1 with ValueError naming `argname`. */
static int rl_parse_dtype(const char *name, const char *argname, rl_dtype *out) {
    for (int i = 0; i < rl_cpu_fma_dtype_count(); i++) {
        if (strcmp(name, rl_fma_name(i)) == 0) {
            *out = rl_cpu_fma_dtype(i);
            return 0;
        }
    }
    rl_err_choices(argname, rl_fma_name, rl_cpu_fma_dtype_count(), name);
    return -1;
}

/* Map an optional SIMD name (None: the widest supported) to rl_simd. Returns 0, or -1 with ValueError. */
static int rl_parse_simd(PyObject *obj, rl_simd *out) {
    if (obj == NULL || obj == Py_None) {
        *out = RL_SIMD_AUTO;
        return 0;
    }
    if (!PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "simd must be a str or None, not %.100s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    const char *name = PyUnicode_AsUTF8(obj);
    if (name == NULL) {
        return -1;
    }
    for (int s = 0; s < RL_SIMD_COUNT; s++) {
        if (strcmp(name, rl_cpu_simd_name((rl_simd)s)) == 0) {
            if (!rl_cpu_simd_supported((rl_simd)s)) {
                rl_err_value("simd='%s' is not supported by this CPU or build", name);
                return -1;
            }
            *out = (rl_simd)s;
            return 0;
        }
    }
    rl_err_value("simd must be one of 'avx512', 'avx2', 'sse2', 'neon', 'scalar' or None, not '%s'", name);
    return -1;
}

static int rl_parse_stat(const char *name, rl_stat *out) {
    if (strcmp(name, "median") == 0) {
        *out = RL_STAT_MEDIAN;
        return 0;
    }
    if (strcmp(name, "max") == 0) {
        *out = RL_STAT_MAX;
        return 0;
    }
    rl_err_value("stat must be 'median' or 'max', not '%s'", name);
    return -1;
}

/* threads: 0 means one per allowed CPU. Returns the resolved count, or -1 with ValueError. */
static int rl_parse_threads(int threads) {
    if (threads < 0 || threads > RL_MAX_THREADS) {
        rl_err_value("threads must be between 0 (one per CPU) and %d, not %d", RL_MAX_THREADS, threads);
        return -1;
    }
    return threads == 0 ? rl_cpu_count() : threads;
}

/* strerror_r returns an int (POSIX) or a char * (GNU) depending on the C library and feature macros: pick the text
 * from either. */
static const char *rl_errtext_int(int rc, const char *buf) { return (rc == 0 && buf[0]) ? buf : "unknown error"; }
static const char *rl_errtext_ptr(const char *p, const char *buf) {
    (void)buf;
    return p ? p : "unknown error";
}
#define RL_ERRTEXT(rc, buf) _Generic((rc), int: rl_errtext_int, default: rl_errtext_ptr)((rc), (buf))

static PyObject *rl_raise_cpu_error(const rl_cpu_error *err) {
    if (err->code != 0) {
        char buf[256];
        buf[0] = '\0';
        const char *text = RL_ERRTEXT(strerror_r(err->code, buf, sizeof(buf)), buf); /* strerror is not thread-safe */
        return rl_err_runtime("%s failed: %s (errno %d)", err->call, text, err->code);
    }
    return rl_err_runtime("%s failed", err->call);
}

/* ValueError "<name> must be <rule> <RL_MAX_SECONDS>, not <value>": PyErr_Format has no float conversion, so the
 * numbers are formatted here, as Python's repr() writes them. */
static PyObject *rl_err_seconds(const char *name, const char *rule, double value) {
    char *lim = PyOS_double_to_string(RL_MAX_SECONDS, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    char *got = PyOS_double_to_string(value, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (lim && got) {
        rl_err_value("%s must be %s %s, not %s", name, rule, lim, got);
    } else {
        PyErr_NoMemory();
    }
    PyMem_Free(lim);
    PyMem_Free(got);
    return NULL;
}

/* ---- cpu_info ---- */

static PyObject *cpu_info_impl(PyObject *module) {
    (void)module;
    rl_cpu_info info;
    Py_BEGIN_ALLOW_THREADS
    rl_cpu_info_get(&info);
    Py_END_ALLOW_THREADS

    rl_simd best = rl_cpu_simd_best();
    PyObject *supported = PyList_New(0);
    PyObject *caches = PyDict_New();
    PyObject *lanes = PyDict_New();
    if (supported == NULL || caches == NULL || lanes == NULL) {
        goto fail;
    }
    for (int i = 0; i < rl_cpu_fma_dtype_count(); i++) {
        rl_dtype dt = rl_cpu_fma_dtype(i);
        PyObject *n = PyLong_FromLong(rl_cpu_simd_lanes(best, rl_cpu_fma_elem_bytes(dt)));
        if (n == NULL || PyDict_SetItemString(lanes, rl_dtype_name(dt), n) < 0) {
            Py_XDECREF(n);
            goto fail;
        }
        Py_DECREF(n);
    }
    for (int s = RL_SIMD_COUNT - 1; s >= 0; s--) {
        if (rl_cpu_simd_supported((rl_simd)s)) {
            PyObject *name = PyUnicode_FromString(rl_cpu_simd_name((rl_simd)s));
            if (name == NULL || PyList_Append(supported, name) < 0) {
                Py_XDECREF(name);
                goto fail;
            }
            Py_DECREF(name);
        }
    }
    for (int level = 1; level <= RL_CPU_MAX_LEVEL; level++) {
        if (info.cache_bytes[level] <= 0) {
            continue;
        }
        char key[16];
        snprintf(key, sizeof(key), "L%d", level);
        PyObject *entry = Py_BuildValue("{s:L,s:i}", "bytes", (long long)info.cache_bytes[level], "instances",
                                        info.cache_instances[level]);
        if (entry == NULL || PyDict_SetItemString(caches, key, entry) < 0) {
            Py_XDECREF(entry);
            goto fail;
        }
        Py_DECREF(entry);
    }
    PyObject *result = Py_BuildValue(
        "{s:s,s:i,s:i,s:i,s:d,s:s,s:s,s:O,s:O,s:O,s:i,s:O,s:s}", "model", info.model, "cpus", info.cpus,
        "online", info.online, "physical_cores", info.physical_cores, "clock_hz", info.clock_hz, "clock_source",
        info.clock_source, "simd", rl_cpu_simd_name(best), "simd_supported", supported, "lanes", lanes, "fma",
        rl_cpu_simd_has_fma(best) ? Py_True : Py_False, "fma_accumulators", rl_cpu_fma_accumulators(best), "caches",
        caches, "cache_source", info.cache_source);
    Py_DECREF(supported);
    Py_DECREF(caches);
    Py_DECREF(lanes);
    return result;
fail:
    Py_XDECREF(supported);
    Py_XDECREF(caches);
    Py_XDECREF(lanes);
    return NULL;
}

static PyObject *cpu_info(PyObject *module, PyObject *Py_UNUSED(ignored)) { return cpu_info_impl(module); }

/* ---- cpu_fma_peak ---- */

static PyObject *cpu_fma_peak_impl(PyObject *module, rl_dtype dtype, double seconds, int threads, int repeats,
                                   rl_simd simd, rl_stat stat) {
    (void)module;
    rl_fma_result r;
    rl_cpu_error err = {NULL, 0};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = rl_cpu_fma_peak(simd, dtype, seconds, threads, repeats, stat, &r, &err);
    Py_END_ALLOW_THREADS
    if (rc != 0) {
        return rl_raise_cpu_error(&err);
    }
    int lanes = rl_cpu_simd_lanes(r.simd, rl_cpu_fma_elem_bytes(dtype));
    return Py_BuildValue("{s:d,s:d,s:d,s:L,s:i,s:O,s:i,s:s,s:i,s:i,s:O,s:d}", "flops", r.flops, "best_flops",
                         r.best_flops, "seconds", r.seconds, "flop_per_repeat", (long long)r.flop_per_rep,
                         "threads", r.threads, "pinned", r.pinned ? Py_True : Py_False, "repeats", r.repeats,
                         "simd", rl_cpu_simd_name(r.simd), "lanes", lanes, "accumulators",
                         rl_cpu_fma_accumulators(r.simd), "fma", rl_cpu_simd_has_fma(r.simd) ? Py_True : Py_False,
                         "cpu_share", r.cpu_share);
}

PyDoc_STRVAR(cpu_fma_peak_doc,
             "cpu_fma_peak(dtype, seconds=0.25, threads=0, *, repeats=5, simd=None, stat='median') -> dict\n\n"
             "All-core FMA peak in FLOP/s (an FMA counts 2 FLOP). dtype is one of cpu_kernels()['fma'] ('float64',\n"
             "'float32', ...); seconds is\n"
             "the approximate total time; threads=0 runs one pinned thread per allowed CPU; simd=None picks the\n"
             "widest SIMD set of this CPU. Returns flops (the median repeat, or the best with stat='max'),\n"
             "best_flops, seconds (wall time of the call), threads, pinned, simd, lanes, accumulators, fma, and\n"
             "cpu_share: CPU time the threads got / (threads x wall time), near 1 unless other processes\n"
             "competed for the CPUs.");

/* The run arguments of a peak benchmark (seconds per repeat, repeats, threads: 0 = all), checked; threads is
 * replaced by the resolved count. -1 with the exception set. */
static int rl_parse_peak_run(double seconds, int repeats, int *threads) {
    if (!isfinite(seconds) || seconds <= 0.0 || seconds > RL_MAX_SECONDS) {
        rl_err_seconds("seconds", "> 0 and <=", seconds);
        return -1;
    }
    if (repeats < 1 || repeats > 1000) {
        rl_err_value("repeats must be between 1 and 1000, not %d", repeats);
        return -1;
    }
    *threads = rl_parse_threads(*threads);
    return *threads < 0 ? -1 : 0;
}

static PyObject *cpu_fma_peak(PyObject *module, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"dtype", "seconds", "threads", "repeats", "simd", "stat", NULL};
    const char *dtype_name = NULL, *stat_name = "median";
    double seconds = 0.25;
    int threads = 0, repeats = 5;
    PyObject *simd_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s|di$iOs:cpu_fma_peak", kwlist, &dtype_name, &seconds,
                                     &threads, &repeats, &simd_obj, &stat_name)) {
        return NULL;
    }
    rl_dtype dtype;
    rl_simd simd;
    rl_stat stat;
    if (rl_parse_dtype(dtype_name, "dtype", &dtype) < 0 || rl_parse_simd(simd_obj, &simd) < 0 ||
        rl_parse_stat(stat_name, &stat) < 0) {
        return NULL;
    }
    if (rl_parse_peak_run(seconds, repeats, &threads) < 0) {
        return NULL;
    }
    return cpu_fma_peak_impl(module, dtype, seconds, threads, repeats, simd, stat);
}

/* ---- cpu_bandwidth_sweep ---- */

/* Map a kernel name to rl_bw_kernel. Returns 0, or -1 with ValueError. */
static int rl_parse_kernel(PyObject *obj, rl_bw_kernel *out) {
    if (!PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "kernel must be a str or a sequence of str, not %.100s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    const char *name = PyUnicode_AsUTF8(obj);
    if (name == NULL) {
        return -1;
    }
    *out = rl_cpu_bw_kernel_find(name);
    if (*out < 0) {
        rl_err_choices("kernel", rl_bw_name, rl_cpu_bw_kernel_count(), name);
        return -1;
    }
    return 0;
}

/* sizes: int64 array (owned reference, caller decrefs), kernels[nkernels]; result 1-D when `one_kernel`. */
static PyObject *cpu_bandwidth_sweep_impl(PyObject *module, PyArrayObject *sizes, const rl_bw_kernel *kernels,
                                          int nkernels, int one_kernel, int threads, int repeats,
                                          double min_seconds, rl_stat stat, rl_simd simd, int64_t nt_min_bytes,
                                          int hugepages, int return_stats) {
    (void)module;
    npy_intp nsizes = PyArray_SIZE(sizes);
    npy_intp dims[2] = {nkernels, nsizes};
    PyObject *rates = one_kernel ? PyArray_SimpleNew(1, &dims[1], NPY_FLOAT64) : PyArray_SimpleNew(2, dims, NPY_FLOAT64);
    if (rates == NULL) {
        return NULL;
    }
    const int64_t *size_data = (const int64_t *)PyArray_DATA(sizes);
    double *rate_data = (double *)PyArray_DATA((PyArrayObject *)rates);
    rl_cpu_error err = {NULL, 0};
    int pinned = 0, rc;
    double cpu_share = 0.0, start = rl_cpu_now(), seconds;
    Py_BEGIN_ALLOW_THREADS
    rc = rl_cpu_bandwidth_sweep(simd, kernels, nkernels, size_data, (int)nsizes, threads, repeats, min_seconds,
                                stat, nt_min_bytes, hugepages, rate_data, &pinned, &cpu_share, &err);
    Py_END_ALLOW_THREADS
    seconds = rl_cpu_now() - start;
    if (rc != 0) {
        Py_DECREF(rates);
        return rl_raise_cpu_error(&err);
    }
    if (!return_stats) {
        return rates;
    }
    return Py_BuildValue("(N{s:i,s:O,s:d,s:d,s:s})", rates, "threads", threads, "pinned",
                         pinned ? Py_True : Py_False, "cpu_share", cpu_share, "seconds", seconds, "simd",
                         rl_cpu_simd_name(simd == RL_SIMD_AUTO ? rl_cpu_simd_best() : simd));
}

PyDoc_STRVAR(cpu_bandwidth_sweep_doc,
             "cpu_bandwidth_sweep(sizes, kernel, threads=0, repeats=3, *, min_seconds=0.002, stat='median',\n"
             "                    simd=None, nt_min_bytes=0, return_stats=False) -> ndarray[float64]\n\n"
             "Bandwidth in bytes/s for each working-set size in `sizes` (bytes, int64, each >= 1024 * threads).\n"
             "kernel is one of cpu_kernels()['bandwidth']: 'read' (N*8 bytes per pass), 'copy' (2*N*8: read +\n"
             "write), 'triad' a=b+s*c (3*N*8), ...;\n"
             "the working set is all arrays of all threads, so bytes counted per pass equal the size. A sequence\n"
             "of kernels gives a 2-D array, one row per kernel. Threads are pinned and first-touch their own\n"
             "memory; each timed repeat lasts at least min_seconds; repeats are reduced with stat ('median' or\n"
             "'max'). Working sets >= nt_min_bytes (0: never) use non-temporal stores where available (x86).\n"
             "return_stats=True returns (rates, stats) with stats: threads, pinned, cpu_share, seconds, simd.");

static PyObject *cpu_bandwidth_sweep(PyObject *module, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"sizes", "kernel", "threads", "repeats", "min_seconds", "stat", "simd",
                             "nt_min_bytes", "return_stats", "hugepages", NULL};
    PyObject *sizes_obj = NULL, *kernel_obj = NULL, *simd_obj = Py_None;
    int threads = 0, repeats = 3;
    double min_seconds = 0.002;
    const char *stat_name = "median";
    long long nt_min_bytes = 0;
    int return_stats = 0, hugepages = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|ii$dsOLpp:cpu_bandwidth_sweep", kwlist, &sizes_obj,
                                     &kernel_obj, &threads, &repeats, &min_seconds, &stat_name, &simd_obj,
                                     &nt_min_bytes, &return_stats, &hugepages)) {
        return NULL;
    }
    rl_bw_kernel kernels[RL_BW_MAX];
    int nkernels = 0, one_kernel = PyUnicode_Check(kernel_obj);
    if (one_kernel) {
        if (rl_parse_kernel(kernel_obj, &kernels[0]) < 0) {
            return NULL;
        }
        nkernels = 1;
    } else {
        PyObject *seq = PySequence_Fast(kernel_obj, "kernel must be a str or a sequence of str");
        if (seq == NULL) {
            return NULL;
        }
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        if (n < 1 || n > rl_cpu_bw_kernel_count()) {
            Py_DECREF(seq);
            return rl_err_value("kernel must name 1 to %d kernels, got %zd", rl_cpu_bw_kernel_count(), n);
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            if (rl_parse_kernel(PySequence_Fast_GET_ITEM(seq, i), &kernels[i]) < 0) {
                Py_DECREF(seq);
                return NULL;
            }
        }
        Py_DECREF(seq);
        nkernels = (int)n;
    }
    rl_stat stat;
    rl_simd simd;
    if (rl_parse_stat(stat_name, &stat) < 0 || rl_parse_simd(simd_obj, &simd) < 0) {
        return NULL;
    }
    threads = rl_parse_threads(threads);
    if (threads < 0) {
        return NULL;
    }
    if (repeats < 1 || repeats > 1000) {
        return rl_err_value("repeats must be between 1 and 1000, not %d", repeats);
    }
    if (!isfinite(min_seconds) || min_seconds < 0.0 || min_seconds > RL_MAX_SECONDS) {
        return rl_err_seconds("min_seconds", ">= 0 and <=", min_seconds);
    }
    if (nt_min_bytes < 0) {
        return rl_err_value("nt_min_bytes must be >= 0, not %lld", nt_min_bytes);
    }
    PyArrayObject *sizes = (PyArrayObject *)PyArray_FROMANY(sizes_obj, NPY_INT64, 1, 1, NPY_ARRAY_IN_ARRAY | NPY_ARRAY_ENSURECOPY);
    if (sizes == NULL) {
        if (PyErr_ExceptionMatches(PyExc_ValueError) || PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError, "sizes must be a 1-D array of integers (bytes)");
        }
        return NULL;
    }
    npy_intp nsizes = PyArray_SIZE(sizes);
    if (nsizes < 1 || nsizes > 100000) {
        Py_DECREF(sizes);
        return rl_err_value("sizes must hold 1 to 100000 sizes, got %zd", (Py_ssize_t)nsizes);
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    int64_t limit = (pages > 0 && page > 0) ? (int64_t)pages * page / 2 : INT64_MAX / 4;
    const int64_t *size_data = (const int64_t *)PyArray_DATA(sizes);
    for (npy_intp i = 0; i < nsizes; i++) {
        if (size_data[i] < 1024 * (int64_t)threads || size_data[i] > limit) {
            Py_DECREF(sizes);
            return rl_err_value("sizes[%zd] = %lld bytes is out of range: each size must be >= 1024 * threads "
                                "(%lld) and <= half the physical memory (%lld)",
                                (Py_ssize_t)i, (long long)size_data[i], 1024LL * threads, (long long)limit);
        }
    }
    PyObject *result = cpu_bandwidth_sweep_impl(module, sizes, kernels, nkernels, one_kernel, threads, repeats,
                                                min_seconds, stat, simd, (int64_t)nt_min_bytes, hugepages, return_stats);
    Py_DECREF(sizes);
    return result;
}

/* ---- cpu_kernels ---- */

static PyObject *cpu_kernels(PyObject *module, PyObject *Py_UNUSED(ignored)) {
    (void)module;
    int nf = rl_cpu_fma_dtype_count(), nb = rl_cpu_bw_kernel_count();
    PyObject *fma = PyTuple_New(nf), *bw = PyTuple_New(nb);
    if (fma == NULL || bw == NULL) {
        goto fail;
    }
    for (int i = 0; i < nf; i++) {
        PyObject *name = PyUnicode_FromString(rl_fma_name(i));
        if (name == NULL) {
            goto fail;
        }
        PyTuple_SET_ITEM(fma, i, name);
    }
    for (int k = 0; k < nb; k++) {
        PyObject *entry = Py_BuildValue("(si)", rl_cpu_bw_kernel_name(k), rl_cpu_bw_kernel_arrays(k));
        if (entry == NULL) {
            goto fail;
        }
        PyTuple_SET_ITEM(bw, k, entry);
    }
    return Py_BuildValue("{s:N,s:N}", "fma", fma, "bandwidth", bw);
fail:
    Py_XDECREF(fma);
    Py_XDECREF(bw);
    return NULL;
}

/* ---- low-precision kernels ---- */

/* Fill *f from a dict of made-up features (tests): every key of rl_cpu_features, all required, ints. Returns 0,
 * or -1 with TypeError / ValueError naming the key. */
static int rl_parse_features(PyObject *obj, rl_cpu_features *f) {
    if (!PyDict_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "features must be a dict or None, not %.100s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    static const char *const keys[] = {"x86", "leaf1_ecx", "leaf7_ebx", "leaf7_ecx", "leaf7_edx", "leaf7_1_eax",
                                       "xcr0", "amx_perm"};
    unsigned long long v[8];
    for (int i = 0; i < 8; i++) {
        PyObject *item = PyDict_GetItemString(obj, keys[i]); /* borrowed */
        if (item == NULL) {
            rl_err_value("features lacks the key '%s'", keys[i]);
            return -1;
        }
        if (!PyLong_Check(item) || PyBool_Check(item)) {
            PyErr_Format(PyExc_TypeError, "features['%s'] must be an int, not %.100s", keys[i], Py_TYPE(item)->tp_name);
            return -1;
        }
        if (i == 7) { /* amx_perm: -1 (not asked), 0 (granted) or an errno */
            long p = PyLong_AsLong(item);
            if (p == -1 && PyErr_Occurred()) {
                PyErr_Clear();
                p = -2; /* out of range: reported below */
            }
            if (p < -1 || p > 4095) {
                rl_err_value("features['amx_perm'] must be -1, 0 or an errno (1..4095), not %R", item);
                return -1;
            }
            v[i] = (unsigned long long)(p + 1);
            continue;
        }
        v[i] = PyLong_AsUnsignedLongLong(item);
        if (PyErr_Occurred()) {
            PyErr_Clear();
            rl_err_value("features['%s'] must be an unsigned integer that fits in %d bits", keys[i],
                         i == 6 ? 64 : 32);
            return -1;
        }
        if (i < 6 && v[i] > 0xFFFFFFFFull) {
            rl_err_value("features['%s'] must fit in 32 bits, not %llu", keys[i], v[i]);
            return -1;
        }
    }
    memset(f, 0, sizeof(*f));
    f->x86 = v[0] != 0;
    f->leaf1_ecx = (uint32_t)v[1];
    f->leaf7_ebx = (uint32_t)v[2];
    f->leaf7_ecx = (uint32_t)v[3];
    f->leaf7_edx = (uint32_t)v[4];
    f->leaf7_1_eax = (uint32_t)v[5];
    f->xcr0 = (uint64_t)v[6];
    f->amx_perm = (int)v[7] - 1;
    return 0;
}

static PyObject *cpu_lowp_kernels(PyObject *module, PyObject *args, PyObject *kwargs) {
    (void)module;
    static char *kwlist[] = {"features", NULL};
    PyObject *features_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:cpu_lowp_kernels", kwlist, &features_obj)) {
        return NULL;
    }
    rl_cpu_features f;
    if (features_obj == Py_None) {
        Py_BEGIN_ALLOW_THREADS
        rl_cpu_features_get(&f);
        Py_END_ALLOW_THREADS
    } else if (rl_parse_features(features_obj, &f) < 0) {
        return NULL;
    }
    PyObject *out = PyTuple_New(rl_cpu_lowp_count());
    if (out == NULL) {
        return NULL;
    }
    for (int k = 0; k < rl_cpu_lowp_count(); k++) {
        char why[256];
        int ok = rl_cpu_lowp_check((rl_lowp)k, &f, why, sizeof(why));
        PyObject *entry = Py_BuildValue(
            "{s:s,s:s,s:s,s:i,s:L,s:O,s:s}", "name", rl_cpu_lowp_name((rl_lowp)k), "instruction",
            rl_cpu_lowp_instruction((rl_lowp)k), "dtype", rl_dtype_name(rl_cpu_lowp_dtype((rl_lowp)k)),
            "accumulators", rl_cpu_lowp_accumulators((rl_lowp)k), "flop_per_iteration",
            (long long)rl_cpu_lowp_flop_per_iter((rl_lowp)k), "available", ok ? Py_True : Py_False, "reason", why);
        if (entry == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, k, entry);
    }
    if (features_obj != Py_None) {
        return out;
    }
    PyObject *feat = Py_BuildValue("{s:i,s:k,s:k,s:k,s:k,s:k,s:K,s:i}", "x86", f.x86, "leaf1_ecx",
                                   (unsigned long)f.leaf1_ecx, "leaf7_ebx", (unsigned long)f.leaf7_ebx, "leaf7_ecx",
                                   (unsigned long)f.leaf7_ecx, "leaf7_edx", (unsigned long)f.leaf7_edx,
                                   "leaf7_1_eax", (unsigned long)f.leaf7_1_eax, "xcr0", (unsigned long long)f.xcr0,
                                   "amx_perm", f.amx_perm);
    if (feat == NULL) {
        Py_DECREF(out);
        return NULL;
    }
    return Py_BuildValue("(NN)", out, feat);
}

PyDoc_STRVAR(cpu_lowp_kernels_doc,
             "cpu_lowp_kernels(features=None) -> (kernels, features) or kernels\n\n"
             "The low-precision product kernels ('avx512_bf16', 'avx512_fp16', 'avx512_vnni', 'amx_bf16',\n"
             "'amx_int8'): one dict each with name, instruction, dtype, accumulators, flop_per_iteration,\n"
             "available, and reason (why it cannot run, '' when it can). Without `features` the machine is read\n"
             "(cpuid, XCR0, and on an AMX machine the kernel's permission for the tile data, requested here) and\n"
             "(kernels, features) is returned; with a dict of made-up features (keys x86, leaf1_ecx, leaf7_ebx,\n"
             "leaf7_ecx, leaf7_edx, leaf7_1_eax, xcr0, amx_perm) the decision for them is returned alone.");

static PyObject *cpu_lowp_peak(PyObject *module, PyObject *args, PyObject *kwargs) {
    (void)module;
    static char *kwlist[] = {"kernel", "seconds", "threads", "repeats", "stat", NULL};
    const char *name = NULL, *stat_name = "median";
    double seconds = 0.25;
    int threads = 0, repeats = 5;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s|di$is:cpu_lowp_peak", kwlist, &name, &seconds, &threads,
                                     &repeats, &stat_name)) {
        return NULL;
    }
    int k = rl_cpu_lowp_find(name);
    if (k < 0) {
        return rl_err_value("kernel must be one of 'avx512_bf16', 'avx512_fp16', 'avx512_vnni', 'amx_bf16' or "
                            "'amx_int8', not '%s'", name);
    }
    rl_stat stat;
    if (rl_parse_stat(stat_name, &stat) < 0) {
        return NULL;
    }
    if (rl_parse_peak_run(seconds, repeats, &threads) < 0) {
        return NULL;
    }
    if (!rl_cpu_lowp_available((rl_lowp)k)) {
        char why[256];
        rl_cpu_features f;
        rl_cpu_features_get(&f);
        rl_cpu_lowp_check((rl_lowp)k, &f, why, sizeof(why));
        return rl_err_value("kernel '%s' cannot run here: %s", name, why);
    }
    rl_fma_result r;
    rl_cpu_error err = {NULL, 0};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = rl_cpu_lowp_peak((rl_lowp)k, seconds, threads, repeats, stat, &r, &err);
    Py_END_ALLOW_THREADS
    if (rc != 0) {
        return rl_raise_cpu_error(&err);
    }
    return Py_BuildValue("{s:d,s:d,s:d,s:L,s:i,s:O,s:i,s:s,s:s,s:s,s:i,s:L,s:d}", "flops", r.flops, "best_flops",
                         r.best_flops, "seconds", r.seconds, "flop_per_repeat", (long long)r.flop_per_rep, "threads",
                         r.threads, "pinned", r.pinned ? Py_True : Py_False, "repeats", r.repeats, "kernel", name,
                         "instruction", rl_cpu_lowp_instruction((rl_lowp)k), "dtype",
                         rl_dtype_name(rl_cpu_lowp_dtype((rl_lowp)k)), "accumulators",
                         rl_cpu_lowp_accumulators((rl_lowp)k), "flop_per_iteration",
                         (long long)rl_cpu_lowp_flop_per_iter((rl_lowp)k), "cpu_share", r.cpu_share);
}

PyDoc_STRVAR(cpu_lowp_peak_doc,
             "cpu_lowp_peak(kernel, seconds=0.25, threads=0, *, repeats=5, stat='median') -> dict\n\n"
             "All-core peak of a low-precision product kernel (see cpu_lowp_kernels) in operations per second\n"
             "(a multiply and an add count one each), with the protocol of cpu_fma_peak. ValueError naming the\n"
             "reason when the kernel cannot run on this machine. Returns flops, best_flops, seconds, threads,\n"
             "pinned, repeats, kernel, instruction, dtype, accumulators, flop_per_iteration and cpu_share.");

PyMethodDef rl_cpu_methods[] = {
    {"cpu_kernels", cpu_kernels, METH_NOARGS,
     PyDoc_STR("cpu_kernels() -> dict: the C benchmark kernels, {'fma': (dtype, ...), 'bandwidth': ((name, "
               "arrays), ...)}; arrays x N*8 bytes move per pass of a bandwidth kernel.")},
    {"cpu_info", (PyCFunction)cpu_info, METH_NOARGS,
     PyDoc_STR("cpu_info() -> dict: model, cpus, physical_cores, clock_hz and clock_source, simd (widest), "
               "simd_supported, lanes per dtype, fma, fma_accumulators, caches {'L1': {'bytes', 'instances'}, "
               "...}, cache_source.")},
    {"cpu_fma_peak", (PyCFunction)(void (*)(void))cpu_fma_peak, METH_VARARGS | METH_KEYWORDS, cpu_fma_peak_doc},
    {"cpu_bandwidth_sweep", (PyCFunction)(void (*)(void))cpu_bandwidth_sweep, METH_VARARGS | METH_KEYWORDS,
     cpu_bandwidth_sweep_doc},
    {"cpu_lowp_kernels", (PyCFunction)(void (*)(void))cpu_lowp_kernels, METH_VARARGS | METH_KEYWORDS,
     cpu_lowp_kernels_doc},
    {"cpu_lowp_peak", (PyCFunction)(void (*)(void))cpu_lowp_peak, METH_VARARGS | METH_KEYWORDS, cpu_lowp_peak_doc},
    {NULL, NULL, 0, NULL},
};

int rl_cpu_exec(PyObject *module) {
    (void)module;
    return 0;
}
