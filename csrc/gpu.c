/* GPU layer: CUDA driver API and NVRTC through dlopen'ed function tables (see gpu.h for the contract).
 *
 * The types below mirror the few declarations of cuda.h and nvrtc.h that this file needs, so the package builds
 * on machines without a CUDA toolkit. Enum values are the ones both headers have kept stable since CUDA 11.
 * Symbols that cuda.h maps to versioned names (cuMemAlloc -> cuMemAlloc_v2, ...) are looked up under the
 * versioned name, with the plain name as fallback where an older driver only has that one. */
#define _POSIX_C_SOURCE 200809L

#include "gpu.h"
#include "rl_why.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- mirrored CUDA driver declarations ---------------------------------------------------------------- */

typedef int rl_cu_result;
typedef int rl_cu_device;
typedef unsigned long long rl_cu_deviceptr;
typedef struct rl_cu_ctx_st *rl_cu_context;
typedef struct rl_cu_mod_st *rl_cu_module;
typedef struct rl_cu_func_st *rl_cu_function;
typedef struct rl_cu_event_st *rl_cu_event;
typedef struct rl_cu_stream_st *rl_cu_stream;
typedef struct {
    char bytes[16];
} rl_cu_uuid;

enum {
    RL_CU_SUCCESS = 0,
    RL_CU_ERROR_INVALID_VALUE = 1,
    RL_CU_ATTR_CLOCK_RATE = 13,
    RL_CU_ATTR_MULTIPROCESSOR_COUNT = 16,
    RL_CU_ATTR_PCI_BUS_ID = 33,
    RL_CU_ATTR_PCI_DEVICE_ID = 34,
    RL_CU_ATTR_MEMORY_CLOCK_RATE = 36,
    RL_CU_ATTR_GLOBAL_MEMORY_BUS_WIDTH = 37,
    RL_CU_ATTR_L2_CACHE_SIZE = 38,
    RL_CU_ATTR_MAX_THREADS_PER_MULTIPROCESSOR = 39,
    RL_CU_ATTR_PCI_DOMAIN_ID = 50,
    RL_CU_ATTR_COMPUTE_CAPABILITY_MAJOR = 75,
    RL_CU_ATTR_COMPUTE_CAPABILITY_MINOR = 76,
    RL_CU_ATTR_MAX_REGISTERS_PER_MULTIPROCESSOR = 82,
    RL_CU_ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
    RL_CU_FUNC_SHARED_SIZE_BYTES = 1,
    RL_CU_FUNC_LOCAL_SIZE_BYTES = 3,
    RL_CU_FUNC_NUM_REGS = 4,
    RL_CU_FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
};

typedef struct {
    rl_cu_result (*cuInit)(unsigned);
    rl_cu_result (*cuDriverGetVersion)(int *);
    rl_cu_result (*cuGetErrorString)(rl_cu_result, const char **);
    rl_cu_result (*cuGetErrorName)(rl_cu_result, const char **);
    rl_cu_result (*cuDeviceGetCount)(int *);
    rl_cu_result (*cuDeviceGet)(rl_cu_device *, int);
    rl_cu_result (*cuDeviceGetName)(char *, int, rl_cu_device);
    rl_cu_result (*cuDeviceGetAttribute)(int *, int, rl_cu_device);
    rl_cu_result (*cuDeviceTotalMem)(size_t *, rl_cu_device);
    rl_cu_result (*cuDeviceGetUuid)(rl_cu_uuid *, rl_cu_device); /* optional */
    rl_cu_result (*cuDevicePrimaryCtxRetain)(rl_cu_context *, rl_cu_device);
    rl_cu_result (*cuCtxPushCurrent)(rl_cu_context);
    rl_cu_result (*cuCtxPopCurrent)(rl_cu_context *);
    rl_cu_result (*cuCtxSynchronize)(void);
    rl_cu_result (*cuMemGetInfo)(size_t *, size_t *);
    rl_cu_result (*cuModuleLoadData)(rl_cu_module *, const void *);
    rl_cu_result (*cuModuleUnload)(rl_cu_module);
    rl_cu_result (*cuModuleGetFunction)(rl_cu_function *, rl_cu_module, const char *);
    rl_cu_result (*cuFuncGetAttribute)(int *, int, rl_cu_function);
    rl_cu_result (*cuFuncSetAttribute)(rl_cu_function, int, int);
    rl_cu_result (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int *, rl_cu_function, int, size_t);
    rl_cu_result (*cuLaunchKernel)(rl_cu_function, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                   unsigned, rl_cu_stream, void **, void **);
    rl_cu_result (*cuMemAlloc)(rl_cu_deviceptr *, size_t);
    rl_cu_result (*cuMemFree)(rl_cu_deviceptr);
    rl_cu_result (*cuMemsetD32)(rl_cu_deviceptr, unsigned, size_t);
    rl_cu_result (*cuMemcpyDtoH)(void *, rl_cu_deviceptr, size_t);
    rl_cu_result (*cuEventCreate)(rl_cu_event *, unsigned);
    rl_cu_result (*cuEventDestroy)(rl_cu_event);
    rl_cu_result (*cuEventRecord)(rl_cu_event, rl_cu_stream);
    rl_cu_result (*cuEventSynchronize)(rl_cu_event);
    rl_cu_result (*cuEventElapsedTime)(float *, rl_cu_event, rl_cu_event);
    rl_cu_result (*cuModuleGetGlobal)(rl_cu_deviceptr *, size_t *, rl_cu_module, const char *); /* optional */
    rl_cu_result (*cuFuncGetParamInfo)(rl_cu_function, size_t, size_t *, size_t *); /* optional: CUDA >= 12.4 */
} rl_cu_table;

/* ---- mirrored NVRTC declarations ---------------------------------------------------------------------- */

typedef int rl_nvrtc_result;
typedef struct rl_nvrtc_prog_st *rl_nvrtc_program;

typedef struct {
    const char *(*nvrtcGetErrorString)(rl_nvrtc_result);
    rl_nvrtc_result (*nvrtcVersion)(int *, int *);
    rl_nvrtc_result (*nvrtcGetNumSupportedArchs)(int *); /* optional: NVRTC >= 11.2 */
    rl_nvrtc_result (*nvrtcGetSupportedArchs)(int *);    /* optional: NVRTC >= 11.2 */
    rl_nvrtc_result (*nvrtcCreateProgram)(rl_nvrtc_program *, const char *, const char *, int, const char *const *,
                                          const char *const *);
    rl_nvrtc_result (*nvrtcDestroyProgram)(rl_nvrtc_program *);
    rl_nvrtc_result (*nvrtcCompileProgram)(rl_nvrtc_program, int, const char *const *);
    rl_nvrtc_result (*nvrtcGetProgramLogSize)(rl_nvrtc_program, size_t *);
    rl_nvrtc_result (*nvrtcGetProgramLog)(rl_nvrtc_program, char *);
    rl_nvrtc_result (*nvrtcGetCUBINSize)(rl_nvrtc_program, size_t *);
    rl_nvrtc_result (*nvrtcGetCUBIN)(rl_nvrtc_program, char *);
} rl_nvrtc_table;

/* One entry of a symbol table: the symbol, an older name to try when the first is absent (or NULL), where its
 * address goes inside the table, and whether a library without it is unusable. */
typedef struct {
    const char *name;
    const char *fallback;
    size_t offset;
    int required;
} rl_symbol;

#define RL_SYM(table, field, name, fallback, required) {name, fallback, offsetof(table, field), required}

static const rl_symbol rl_cu_symbols[] = {
    RL_SYM(rl_cu_table, cuInit, "cuInit", NULL, 1),
    RL_SYM(rl_cu_table, cuDriverGetVersion, "cuDriverGetVersion", NULL, 1),
    RL_SYM(rl_cu_table, cuGetErrorString, "cuGetErrorString", NULL, 1),
    RL_SYM(rl_cu_table, cuGetErrorName, "cuGetErrorName", NULL, 1),
    RL_SYM(rl_cu_table, cuDeviceGetCount, "cuDeviceGetCount", NULL, 1),
    RL_SYM(rl_cu_table, cuDeviceGet, "cuDeviceGet", NULL, 1),
    RL_SYM(rl_cu_table, cuDeviceGetName, "cuDeviceGetName", NULL, 1),
    RL_SYM(rl_cu_table, cuDeviceGetAttribute, "cuDeviceGetAttribute", NULL, 1),
    RL_SYM(rl_cu_table, cuDeviceTotalMem, "cuDeviceTotalMem_v2", NULL, 1),
    RL_SYM(rl_cu_table, cuDeviceGetUuid, "cuDeviceGetUuid_v2", "cuDeviceGetUuid", 0),
    RL_SYM(rl_cu_table, cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", NULL, 1),
    RL_SYM(rl_cu_table, cuCtxPushCurrent, "cuCtxPushCurrent_v2", NULL, 1),
    RL_SYM(rl_cu_table, cuCtxPopCurrent, "cuCtxPopCurrent_v2", NULL, 1),
    RL_SYM(rl_cu_table, cuCtxSynchronize, "cuCtxSynchronize", NULL, 1),
    RL_SYM(rl_cu_table, cuMemGetInfo, "cuMemGetInfo_v2", NULL, 1),
    RL_SYM(rl_cu_table, cuModuleLoadData, "cuModuleLoadData", NULL, 1),
    RL_SYM(rl_cu_table, cuModuleUnload, "cuModuleUnload", NULL, 1),
    RL_SYM(rl_cu_table, cuModuleGetFunction, "cuModuleGetFunction", NULL, 1),
    RL_SYM(rl_cu_table, cuFuncGetAttribute, "cuFuncGetAttribute", NULL, 1),
    RL_SYM(rl_cu_table, cuFuncSetAttribute, "cuFuncSetAttribute", NULL, 1),
    RL_SYM(rl_cu_table, cuOccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor",
           NULL, 1),
    RL_SYM(rl_cu_table, cuLaunchKernel, "cuLaunchKernel", NULL, 1),
    RL_SYM(rl_cu_table, cuMemAlloc, "cuMemAlloc_v2", NULL, 1),
    RL_SYM(rl_cu_table, cuMemFree, "cuMemFree_v2", NULL, 1),
    RL_SYM(rl_cu_table, cuMemsetD32, "cuMemsetD32_v2", NULL, 1),
    RL_SYM(rl_cu_table, cuMemcpyDtoH, "cuMemcpyDtoH_v2", NULL, 1),
    RL_SYM(rl_cu_table, cuEventCreate, "cuEventCreate", NULL, 1),
    RL_SYM(rl_cu_table, cuEventDestroy, "cuEventDestroy_v2", "cuEventDestroy", 1),
    RL_SYM(rl_cu_table, cuEventRecord, "cuEventRecord", NULL, 1),
    RL_SYM(rl_cu_table, cuEventSynchronize, "cuEventSynchronize", NULL, 1),
    RL_SYM(rl_cu_table, cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime", 1),
    RL_SYM(rl_cu_table, cuModuleGetGlobal, "cuModuleGetGlobal_v2", "cuModuleGetGlobal", 0),
    RL_SYM(rl_cu_table, cuFuncGetParamInfo, "cuFuncGetParamInfo", NULL, 0),
};

static const rl_symbol rl_nvrtc_symbols[] = {
    RL_SYM(rl_nvrtc_table, nvrtcGetErrorString, "nvrtcGetErrorString", NULL, 1),
    RL_SYM(rl_nvrtc_table, nvrtcVersion, "nvrtcVersion", NULL, 1),
    RL_SYM(rl_nvrtc_table, nvrtcGetNumSupportedArchs, "nvrtcGetNumSupportedArchs", NULL, 0),
    RL_SYM(rl_nvrtc_table, nvrtcGetSupportedArchs, "nvrtcGetSupportedArchs", NULL, 0),
    RL_SYM(rl_nvrtc_table, nvrtcCreateProgram, "nvrtcCreateProgram", NULL, 1),
    RL_SYM(rl_nvrtc_table, nvrtcDestroyProgram, "nvrtcDestroyProgram", NULL, 1),
    RL_SYM(rl_nvrtc_table, nvrtcCompileProgram, "nvrtcCompileProgram", NULL, 1),
    RL_SYM(rl_nvrtc_table, nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize", NULL, 1),
    RL_SYM(rl_nvrtc_table, nvrtcGetProgramLog, "nvrtcGetProgramLog", NULL, 1),
    RL_SYM(rl_nvrtc_table, nvrtcGetCUBINSize, "nvrtcGetCUBINSize", NULL, 1),
    RL_SYM(rl_nvrtc_table, nvrtcGetCUBIN, "nvrtcGetCUBIN", NULL, 1),
};

/* ---- process-wide state --------------------------------------------------------------------------------
 * dlopen handles are process-wide by nature, so the tables are too. `rl_lock` serialises loading and primary
 * context retention; the tables are written once, before the `loaded` flag is set, and only read afterwards. */

#define RL_MAX_DEVICES 64
#define RL_PATH_MAX 4096

static pthread_mutex_t rl_lock = PTHREAD_MUTEX_INITIALIZER;
static rl_cu_table rl_cu;
static rl_nvrtc_table rl_nvrtc;
/* Set (release) under rl_lock once a table is complete; read (acquire) without the lock. */
static _Atomic int rl_cu_loaded;
static _Atomic int rl_nvrtc_loaded;
static char rl_cu_path[RL_PATH_MAX];
static char rl_nvrtc_path[RL_PATH_MAX];
static rl_cu_context rl_primary[RL_MAX_DEVICES];

/* ---- errors ------------------------------------------------------------------------------------------- */

/* Fill `err` (when not NULL) with `status`, `code`, the failed `call` and a printf-style message; return
 * `status` so callers can write `return rl_fail(...)`. */
static rl_gpu_status rl_fail(rl_gpu_error *err, rl_gpu_status status, int code, const char *call, const char *fmt,
                             ...) {
    if (err != NULL) {
        va_list ap;
        err->status = status;
        err->code = code;
        snprintf(err->call, sizeof err->call, "%s", call != NULL ? call : "");
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return status;
}

/* Record a failed driver call: "<call> failed: CUDA_ERROR_X (driver's description)<context>". The driver must
 * be loaded (it is whenever a driver call could fail). `context` is appended verbatim, may be "". */
static rl_gpu_status rl_cu_fail(rl_gpu_error *err, rl_cu_result rc, const char *call, const char *context) {
    const char *name = NULL;
    const char *text = NULL;
    if (rl_cu.cuGetErrorName == NULL || rl_cu.cuGetErrorName(rc, &name) != RL_CU_SUCCESS || name == NULL) {
        name = "CUDA_ERROR_UNKNOWN_CODE";
    }
    if (rl_cu.cuGetErrorString == NULL || rl_cu.cuGetErrorString(rc, &text) != RL_CU_SUCCESS || text == NULL) {
        text = "no description from the driver";
    }
    return rl_fail(err, RL_GPU_CUDA, rc, call, "%s failed with %s (%d): %s%s", call, name, rc, text, context);
}

/* Record a failed NVRTC call. */
static rl_gpu_status rl_nvrtc_fail(rl_gpu_error *err, rl_nvrtc_result rc, const char *call) {
    const char *text = rl_nvrtc.nvrtcGetErrorString != NULL ? rl_nvrtc.nvrtcGetErrorString(rc) : NULL;
    return rl_fail(err, RL_GPU_NVRTC, rc, call, "%s failed with %s (%d)", call,
                   text != NULL ? text : "NVRTC_ERROR_UNKNOWN_CODE", rc);
}

/* ---- loading ------------------------------------------------------------------------------------------ */

/* Append "<path> (<why>)" to the list of tried candidates in `tried` (of `cap` bytes, `*used` filled). */
static void rl_note_tried(char *tried, size_t cap, size_t *used, const char *path, const char *why) {
    if (*used < cap) {
        int w = snprintf(tried + *used, cap - *used, "%s%s (%s)", *used > 0 ? "; " : "", path, why);
        *used += w > 0 ? (size_t)w : 0;
    }
}

/* Try `paths[0..n)` in order: dlopen each and resolve `symbols[0..n_symbols)` into `table`; the first candidate
 * that opens and has every required symbol wins, and its path goes to `path_out` (of size RL_PATH_MAX). A
 * candidate lacking a required symbol (an old driver, a stub library earlier on the search path) is closed and
 * the next one tried. `what` names the library in messages ("the CUDA driver library (libcuda)"). Called with
 * rl_lock held. On failure nothing stays open and the message names every candidate with why it was refused. */
static rl_gpu_status rl_open_library(const char *what, const char *const *paths, size_t n, const rl_symbol *symbols,
                                     size_t n_symbols, void *table, size_t table_size, char *path_out,
                                     rl_gpu_error *err) {
    char tried[1536];
    char reason[160];
    size_t used = 0;
    size_t i, j;

    tried[0] = '\0';
    for (i = 0; i < n; i++) {
        const char *why;
        const char *missing = NULL;
        void *handle;
        if (paths[i] == NULL || paths[i][0] == '\0') {
            continue;
        }
        handle = dlopen(paths[i], RTLD_NOW | RTLD_LOCAL);
        if (handle == NULL) {
            why = dlerror();
            if (why != NULL) {
                /* glibc's message starts with the path again: "<path>: cannot open shared object file: ..." */
                size_t len = strlen(paths[i]);
                if (strncmp(why, paths[i], len) == 0 && why[len] == ':' && why[len + 1] == ' ') {
                    why += len + 2;
                }
            }
            rl_note_tried(tried, sizeof tried, &used, paths[i], why != NULL ? why : "not found");
            continue;
        }
        memset(table, 0, table_size);
        for (j = 0; j < n_symbols; j++) {
            void *address = dlsym(handle, symbols[j].name);
            if (address == NULL && symbols[j].fallback != NULL) {
                address = dlsym(handle, symbols[j].fallback);
            }
            if (address == NULL && symbols[j].required) {
                missing = symbols[j].name;
                break;
            }
            /* Function pointers and void * have the same representation on every platform dlsym exists on. */
            memcpy((char *)table + symbols[j].offset, &address, sizeof address);
        }
        if (missing != NULL) {
            dlclose(handle);
            memset(table, 0, table_size);
            snprintf(reason, sizeof reason, "lacks the symbol %s: too old or not the real library", missing);
            rl_note_tried(tried, sizeof tried, &used, paths[i], reason);
            continue;
        }
        snprintf(path_out, RL_PATH_MAX, "%s", paths[i]);
        return RL_GPU_OK;
    }
    path_out[0] = '\0';
    return rl_fail(err, RL_GPU_UNAVAILABLE, 0, used > 0 && strstr(tried, "lacks the symbol") ? "dlsym" : "dlopen",
                   "could not load %s: %s", what, used > 0 ? tried : "no candidate paths were given");
}

/* See gpu.h. cuInit runs on every call, so a GPU that became unusable is reported. */
rl_gpu_status rl_gpu_load_driver(const char *const *paths, size_t n, rl_gpu_error *err) {
    rl_gpu_status st = RL_GPU_OK;
    rl_cu_result rc;

    pthread_mutex_lock(&rl_lock);
    if (!rl_cu_loaded) {
        st = rl_open_library("the CUDA driver library (libcuda)", paths, n, rl_cu_symbols,
                             sizeof rl_cu_symbols / sizeof rl_cu_symbols[0], &rl_cu, sizeof rl_cu, rl_cu_path, err);
        if (st == RL_GPU_OK) {
            rl_cu_loaded = 1;
        }
    }
    if (st == RL_GPU_OK) {
        /* cuInit is cheap once it has succeeded; calling it every time reports a GPU that went away. */
        rc = rl_cu.cuInit(0);
        if (rc != RL_CU_SUCCESS) {
            rl_cu_fail(err, rc, "cuInit", "");
            if (err != NULL) {
                err->status = RL_GPU_UNAVAILABLE;
            }
            st = RL_GPU_UNAVAILABLE;
        }
    }
    pthread_mutex_unlock(&rl_lock);
    return st;
}

/* See gpu.h. */
rl_gpu_status rl_gpu_load_nvrtc(const char *const *paths, size_t n, rl_gpu_error *err) {
    rl_gpu_status st = RL_GPU_OK;

    pthread_mutex_lock(&rl_lock);
    if (!rl_nvrtc_loaded) {
        st = rl_open_library("the CUDA runtime compiler (libnvrtc)", paths, n, rl_nvrtc_symbols,
                             sizeof rl_nvrtc_symbols / sizeof rl_nvrtc_symbols[0], &rl_nvrtc, sizeof rl_nvrtc,
                             rl_nvrtc_path, err);
        if (st == RL_GPU_OK) {
            rl_nvrtc_loaded = 1;
        }
    }
    pthread_mutex_unlock(&rl_lock);
    return st;
}

/* See gpu.h: the stored path, or NULL before a successful load. */
const char *rl_gpu_driver_path(void) { return rl_cu_loaded ? rl_cu_path : NULL; }

/* See gpu.h. */
const char *rl_gpu_nvrtc_path(void) { return rl_nvrtc_loaded ? rl_nvrtc_path : NULL; }

/* RL_GPU_OK when the driver table is usable, else an RL_GPU_UNAVAILABLE error naming `call`. */
static rl_gpu_status rl_need_driver(const char *call, rl_gpu_error *err) {
    if (rl_cu_loaded) {
        return RL_GPU_OK;
    }
    return rl_fail(err, RL_GPU_UNAVAILABLE, 0, call, "the CUDA driver library is not loaded (load it first)");
}

/* RL_GPU_OK when the NVRTC table is usable, else an RL_GPU_UNAVAILABLE error naming `call`. */
static rl_gpu_status rl_need_nvrtc(const char *call, rl_gpu_error *err) {
    if (rl_nvrtc_loaded) {
        return RL_GPU_OK;
    }
    return rl_fail(err, RL_GPU_UNAVAILABLE, 0, call, "the NVRTC library is not loaded (load it first)");
}

/* ---- devices ------------------------------------------------------------------------------------------ */

/* See gpu.h. */
rl_gpu_status rl_gpu_driver_version(int *version, rl_gpu_error *err) {
    rl_cu_result rc;
    if (rl_need_driver("cuDriverGetVersion", err) != RL_GPU_OK) {
        return RL_GPU_UNAVAILABLE;
    }
    rc = rl_cu.cuDriverGetVersion(version);
    return rc == RL_CU_SUCCESS ? RL_GPU_OK : rl_cu_fail(err, rc, "cuDriverGetVersion", "");
}

/* See gpu.h. */
rl_gpu_status rl_gpu_device_count(int *count, rl_gpu_error *err) {
    rl_cu_result rc;
    if (rl_need_driver("cuDeviceGetCount", err) != RL_GPU_OK) {
        return RL_GPU_UNAVAILABLE;
    }
    rc = rl_cu.cuDeviceGetCount(count);
    return rc == RL_CU_SUCCESS ? RL_GPU_OK : rl_cu_fail(err, rc, "cuDeviceGetCount", "");
}

/* Resolve device `index` into `*dev`, checking the range. */
static rl_gpu_status rl_get_device(int index, rl_cu_device *dev, rl_gpu_error *err) {
    int count = 0;
    rl_cu_result rc;
    rl_gpu_status st = rl_gpu_device_count(&count, err);
    if (st != RL_GPU_OK) {
        return st;
    }
    if (index < 0 || index >= count || index >= RL_MAX_DEVICES) {
        return rl_fail(err, RL_GPU_ARG, 0, "cuDeviceGet", "device index %d is out of range: %d CUDA device%s",
                       index, count, count == 1 ? "" : "s");
    }
    rc = rl_cu.cuDeviceGet(dev, index);
    return rc == RL_CU_SUCCESS ? RL_GPU_OK : rl_cu_fail(err, rc, "cuDeviceGet", "");
}

/* Read one integer attribute; -1 when the driver does not know it (an older driver, a removed attribute). */
static int rl_attribute(rl_cu_device dev, int attribute) {
    int value = -1;
    if (rl_cu.cuDeviceGetAttribute(&value, attribute, dev) != RL_CU_SUCCESS) {
        return -1;
    }
    return value;
}

/* See gpu.h. Name and total memory must be readable; other attributes may be -1. */
rl_gpu_status rl_gpu_device_props(int index, rl_gpu_props *props, rl_gpu_error *err) {
    rl_cu_device dev;
    rl_cu_result rc;
    size_t total = 0;
    rl_gpu_status st;

    if (rl_need_driver("cuDeviceGet", err) != RL_GPU_OK) {
        return RL_GPU_UNAVAILABLE;
    }
    st = rl_get_device(index, &dev, err);
    if (st != RL_GPU_OK) {
        return st;
    }
    memset(props, 0, sizeof *props);
    rc = rl_cu.cuDeviceGetName(props->name, (int)sizeof props->name - 1, dev);
    if (rc != RL_CU_SUCCESS) {
        return rl_cu_fail(err, rc, "cuDeviceGetName", "");
    }
    rc = rl_cu.cuDeviceTotalMem(&total, dev);
    if (rc != RL_CU_SUCCESS) {
        return rl_cu_fail(err, rc, "cuDeviceTotalMem", "");
    }
    props->total_memory_bytes = (unsigned long long)total;
    if (rl_cu.cuDeviceGetUuid != NULL) {
        rl_cu_uuid uuid;
        if (rl_cu.cuDeviceGetUuid(&uuid, dev) == RL_CU_SUCCESS) {
            memcpy(props->uuid, uuid.bytes, sizeof props->uuid);
            props->has_uuid = 1;
        }
    }
    props->cc_major = rl_attribute(dev, RL_CU_ATTR_COMPUTE_CAPABILITY_MAJOR);
    props->cc_minor = rl_attribute(dev, RL_CU_ATTR_COMPUTE_CAPABILITY_MINOR);
    props->sm_count = rl_attribute(dev, RL_CU_ATTR_MULTIPROCESSOR_COUNT);
    props->clock_khz = rl_attribute(dev, RL_CU_ATTR_CLOCK_RATE);
    props->memory_clock_khz = rl_attribute(dev, RL_CU_ATTR_MEMORY_CLOCK_RATE);
    props->memory_bus_width_bits = rl_attribute(dev, RL_CU_ATTR_GLOBAL_MEMORY_BUS_WIDTH);
    props->l2_cache_bytes = rl_attribute(dev, RL_CU_ATTR_L2_CACHE_SIZE);
    props->max_threads_per_sm = rl_attribute(dev, RL_CU_ATTR_MAX_THREADS_PER_MULTIPROCESSOR);
    props->max_shared_per_block_optin = rl_attribute(dev, RL_CU_ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    props->registers_per_sm = rl_attribute(dev, RL_CU_ATTR_MAX_REGISTERS_PER_MULTIPROCESSOR);
    props->pci_domain = rl_attribute(dev, RL_CU_ATTR_PCI_DOMAIN_ID);
    props->pci_bus = rl_attribute(dev, RL_CU_ATTR_PCI_BUS_ID);
    props->pci_device = rl_attribute(dev, RL_CU_ATTR_PCI_DEVICE_ID);
    if (props->cc_major < 0 || props->sm_count <= 0) {
        return rl_fail(err, RL_GPU_CUDA, 0, "cuDeviceGetAttribute",
                       "the driver did not report the compute capability or multiprocessor count of device %d",
                       index);
    }
    return RL_GPU_OK;
}

/* Retain (once per process) and push the primary context of device `index`, whose handle goes to `*dev`. On
 * RL_GPU_OK the caller must pop it with rl_pop_context(). */
static rl_gpu_status rl_push_context(int index, rl_cu_device *dev_out, rl_gpu_error *err) {
    rl_cu_device dev;
    rl_cu_result rc;
    rl_gpu_status st = rl_get_device(index, &dev, err);
    if (st != RL_GPU_OK) {
        return st;
    }
    pthread_mutex_lock(&rl_lock);
    if (rl_primary[index] == NULL) {
        rc = rl_cu.cuDevicePrimaryCtxRetain(&rl_primary[index], dev);
        if (rc != RL_CU_SUCCESS) {
            rl_primary[index] = NULL;
            pthread_mutex_unlock(&rl_lock);
            return rl_cu_fail(err, rc, "cuDevicePrimaryCtxRetain", "");
        }
    }
    pthread_mutex_unlock(&rl_lock);
    *dev_out = dev;
    rc = rl_cu.cuCtxPushCurrent(rl_primary[index]);
    return rc == RL_CU_SUCCESS ? RL_GPU_OK : rl_cu_fail(err, rc, "cuCtxPushCurrent", "");
}

/* Undo rl_push_context(); a failure here leaves nothing to clean up, so it is ignored. */
static void rl_pop_context(void) {
    rl_cu_context popped = NULL;
    (void)rl_cu.cuCtxPopCurrent(&popped);
}

/* See gpu.h. */
rl_gpu_status rl_gpu_mem_info(int index, size_t *free_bytes, size_t *total_bytes, rl_gpu_error *err) {
    rl_cu_device dev;
    rl_cu_result rc;
    rl_gpu_status st;
    if (rl_need_driver("cuMemGetInfo", err) != RL_GPU_OK) {
        return RL_GPU_UNAVAILABLE;
    }
    st = rl_push_context(index, &dev, err);
    if (st != RL_GPU_OK) {
        return st;
    }
    rc = rl_cu.cuMemGetInfo(free_bytes, total_bytes);
    rl_pop_context();
    return rc == RL_CU_SUCCESS ? RL_GPU_OK : rl_cu_fail(err, rc, "cuMemGetInfo", "");
}

/* ---- NVRTC -------------------------------------------------------------------------------------------- */

/* See gpu.h. */
rl_gpu_status rl_gpu_nvrtc_version(int *major, int *minor, rl_gpu_error *err) {
    rl_nvrtc_result rc;
    if (rl_need_nvrtc("nvrtcVersion", err) != RL_GPU_OK) {
        return RL_GPU_UNAVAILABLE;
    }
    rc = rl_nvrtc.nvrtcVersion(major, minor);
    return rc == 0 ? RL_GPU_OK : rl_nvrtc_fail(err, rc, "nvrtcVersion");
}

/* See gpu.h. */
rl_gpu_status rl_gpu_nvrtc_archs(int *out, size_t cap, size_t *n, rl_gpu_error *err) {
    int count = 0;
    int *all;
    size_t i;
    rl_nvrtc_result rc;

    *n = 0;
    if (rl_need_nvrtc("nvrtcGetSupportedArchs", err) != RL_GPU_OK) {
        return RL_GPU_UNAVAILABLE;
    }
    if (rl_nvrtc.nvrtcGetNumSupportedArchs == NULL || rl_nvrtc.nvrtcGetSupportedArchs == NULL) {
        return RL_GPU_OK;
    }
    rc = rl_nvrtc.nvrtcGetNumSupportedArchs(&count);
    if (rc != 0) {
        return rl_nvrtc_fail(err, rc, "nvrtcGetNumSupportedArchs");
    }
    if (count <= 0) {
        return RL_GPU_OK;
    }
    all = malloc((size_t)count * sizeof *all);
    if (all == NULL) {
        return rl_fail(err, RL_GPU_NOMEM, 0, "malloc", "out of host memory");
    }
    rc = rl_nvrtc.nvrtcGetSupportedArchs(all);
    if (rc != 0) {
        free(all);
        return rl_nvrtc_fail(err, rc, "nvrtcGetSupportedArchs");
    }
    for (i = 0; i < (size_t)count && i < cap; i++) {
        out[i] = all[i];
    }
    *n = (size_t)count;
    free(all);
    return RL_GPU_OK;
}

/* See gpu.h. */
void rl_gpu_blob_free(rl_gpu_blob *blob) {
    if (blob != NULL) {
        free(blob->data);
        blob->data = NULL;
        blob->size = 0;
    }
}

/* Copy the program's log into `*log` (NUL-terminated; size excludes the NUL). Best effort: on any failure the
 * log stays empty, since the log only decorates the error that the caller is about to report. */
static void rl_fetch_log(rl_nvrtc_program prog, rl_gpu_blob *log) {
    size_t size = 0;
    if (rl_nvrtc.nvrtcGetProgramLogSize(prog, &size) != 0 || size == 0) {
        return;
    }
    log->data = malloc(size + 1);
    if (log->data == NULL) {
        return;
    }
    if (rl_nvrtc.nvrtcGetProgramLog(prog, log->data) != 0) {
        rl_gpu_blob_free(log);
        return;
    }
    log->data[size] = '\0';
    log->size = strlen(log->data);
}

/* See gpu.h. The program is destroyed on every path; the log is fetched before the result is checked. */
rl_gpu_status rl_gpu_compile(const char *source, const char *name, const char *const *headers,
                             const char *const *header_names, size_t n_headers, const char *const *options,
                             size_t n_options, rl_gpu_blob *cubin, rl_gpu_blob *log, rl_gpu_error *err) {
    rl_nvrtc_program prog = NULL;
    rl_nvrtc_result rc;
    rl_gpu_status st = RL_GPU_OK;
    size_t size = 0;

    cubin->data = NULL;
    cubin->size = 0;
    log->data = NULL;
    log->size = 0;
    if (rl_need_nvrtc("nvrtcCreateProgram", err) != RL_GPU_OK) {
        return RL_GPU_UNAVAILABLE;
    }
    if (n_options > 1024) {
        return rl_fail(err, RL_GPU_ARG, 0, "nvrtcCompileProgram", "too many compiler options (%zu)", n_options);
    }
    if (n_headers > 1024) {
        return rl_fail(err, RL_GPU_ARG, 0, "nvrtcCreateProgram", "too many headers (%zu)", n_headers);
    }
    rc = rl_nvrtc.nvrtcCreateProgram(&prog, source, name, (int)n_headers, n_headers ? headers : NULL,
                                     n_headers ? header_names : NULL);
    if (rc != 0) {
        return rl_nvrtc_fail(err, rc, "nvrtcCreateProgram");
    }
    rc = rl_nvrtc.nvrtcCompileProgram(prog, (int)n_options, options);
    rl_fetch_log(prog, log);
    if (rc != 0) {
        st = rl_nvrtc_fail(err, rc, "nvrtcCompileProgram");
        goto done;
    }
    rc = rl_nvrtc.nvrtcGetCUBINSize(prog, &size);
    if (rc != 0) {
        st = rl_nvrtc_fail(err, rc, "nvrtcGetCUBINSize");
        goto done;
    }
    if (size == 0) {
        st = rl_fail(err, RL_GPU_NVRTC, 0, "nvrtcGetCUBIN",
                     "NVRTC produced no cubin for %s: the options must name a real architecture (-arch=sm_XY), "
                     "not a virtual one (compute_XY)",
                     name);
        goto done;
    }
    cubin->data = malloc(size);
    if (cubin->data == NULL) {
        st = rl_fail(err, RL_GPU_NOMEM, 0, "malloc", "out of host memory for a %zu-byte cubin", size);
        goto done;
    }
    rc = rl_nvrtc.nvrtcGetCUBIN(prog, cubin->data);
    if (rc != 0) {
        rl_gpu_blob_free(cubin);
        st = rl_nvrtc_fail(err, rc, "nvrtcGetCUBIN");
        goto done;
    }
    cubin->size = size;
done:
    rl_nvrtc.nvrtcDestroyProgram(&prog);
    return st;
}

/* ---- cubin check -------------------------------------------------------------------------------------- */

/* Little-endian reads from a buffer whose bounds the caller has checked. */
static uint64_t rl_le(const unsigned char *p, int bytes) {
    uint64_t v = 0;
    int i;
    for (i = bytes - 1; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return v;
}

/* 1 when [offset, offset + length) lies inside a buffer of `size` bytes (no overflow possible). */
static int rl_inside(uint64_t offset, uint64_t length, size_t size) {
    return offset <= (uint64_t)size && length <= (uint64_t)size - offset;
}

#define RL_ELF_HEADER 64
#define RL_ELF_SECTION_HEADER 64
#define RL_ELF_PROGRAM_HEADER 56
#define RL_EM_CUDA 190
#define RL_SHT_NOBITS 8

/* See gpu.h. */
int rl_gpu_check_cubin(const void *data, size_t size, char *why, size_t why_size) {
    const unsigned char *b = data;
    uint64_t phoff, shoff, i;
    unsigned phnum, shnum, phentsize, shentsize, machine;

#define RL_BAD(...) return rl_why(why, why_size, __VA_ARGS__)

    if (b == NULL || size < RL_ELF_HEADER) {
        RL_BAD("the cubin is %zu bytes, shorter than an ELF header (%d bytes)", size, RL_ELF_HEADER);
    }
    if (memcmp(b, "\x7f" "ELF", 4) != 0) {
        RL_BAD("the cubin does not start with the ELF magic number");
    }
    if (b[4] != 2 || b[5] != 1) {
        RL_BAD("the cubin is not a 64-bit little-endian ELF image (class %u, data %u)", b[4], b[5]);
    }
    machine = (unsigned)rl_le(b + 18, 2);
    if (machine != RL_EM_CUDA) {
        RL_BAD("the ELF image is for machine %u, not CUDA (%d)", machine, RL_EM_CUDA);
    }
    phoff = rl_le(b + 32, 8);
    shoff = rl_le(b + 40, 8);
    phentsize = (unsigned)rl_le(b + 54, 2);
    phnum = (unsigned)rl_le(b + 56, 2);
    shentsize = (unsigned)rl_le(b + 58, 2);
    shnum = (unsigned)rl_le(b + 60, 2);
    if (rl_le(b + 52, 2) != RL_ELF_HEADER) {
        RL_BAD("the ELF header size field is %u, not %d", (unsigned)rl_le(b + 52, 2), RL_ELF_HEADER);
    }
    if (shnum == 0 || shentsize != RL_ELF_SECTION_HEADER) {
        RL_BAD("the ELF image has %u section headers of %u bytes (a cubin has sections of %d-byte headers)", shnum,
               shentsize, RL_ELF_SECTION_HEADER);
    }
    if (!rl_inside(shoff, (uint64_t)shnum * RL_ELF_SECTION_HEADER, size)) {
        RL_BAD("the cubin is truncated: its section header table (%u x %d bytes at offset %llu) ends past its %zu "
               "bytes",
               shnum, RL_ELF_SECTION_HEADER, (unsigned long long)shoff, size);
    }
    if (rl_le(b + 62, 2) >= shnum) {
        RL_BAD("the ELF section-name table index %u is not below the section count %u", (unsigned)rl_le(b + 62, 2),
               shnum);
    }
    if (phnum > 0) {
        if (phentsize != RL_ELF_PROGRAM_HEADER) {
            RL_BAD("the ELF program headers are %u bytes, not %d", phentsize, RL_ELF_PROGRAM_HEADER);
        }
        if (!rl_inside(phoff, (uint64_t)phnum * RL_ELF_PROGRAM_HEADER, size)) {
            RL_BAD("the cubin is truncated: its program header table (%u x %d bytes at offset %llu) ends past its "
                   "%zu bytes",
                   phnum, RL_ELF_PROGRAM_HEADER, (unsigned long long)phoff, size);
        }
    }
    for (i = 0; i < shnum; i++) {
        const unsigned char *sh = b + shoff + i * RL_ELF_SECTION_HEADER;
        uint64_t offset = rl_le(sh + 24, 8), length = rl_le(sh + 32, 8);
        if (rl_le(sh + 4, 4) != RL_SHT_NOBITS && !rl_inside(offset, length, size)) {
            RL_BAD("the cubin is truncated: section %llu (%llu bytes at offset %llu) ends past its %zu bytes",
                   (unsigned long long)i, (unsigned long long)length, (unsigned long long)offset, size);
        }
    }
    for (i = 0; i < phnum; i++) {
        const unsigned char *ph = b + phoff + i * RL_ELF_PROGRAM_HEADER;
        uint64_t offset = rl_le(ph + 8, 8), length = rl_le(ph + 32, 8);
        if (!rl_inside(offset, length, size)) {
            RL_BAD("the cubin is truncated: segment %llu (%llu bytes at offset %llu) ends past its %zu bytes",
                   (unsigned long long)i, (unsigned long long)length, (unsigned long long)offset, size);
        }
    }
#undef RL_BAD
    return 1;
}

/* ---- timed launches ----------------------------------------------------------------------------------- */

/* Storage for one kernel argument: a buffer's device pointer, or the scalar as given; cuLaunchKernel reads the
 * value through a pointer into this. */
typedef union {
    rl_cu_deviceptr ptr;
    rl_gpu_value scalar;
} rl_arg_value;

#define RL_MAX_PARAMS 256

/* Size in bytes of the kernel parameter an argument of this kind fills. */
static size_t rl_arg_size(rl_gpu_arg_kind kind) {
    switch (kind) {
    case RL_GPU_ARG_BUFFER:
    case RL_GPU_ARG_I64:
    case RL_GPU_ARG_U64:
    case RL_GPU_ARG_F64: return 8;
    default: return 4;
    }
}

static const char *rl_arg_kind_name(rl_gpu_arg_kind kind) {
    static const char *const names[] = {"buffer", "i32", "u32", "i64", "u64", "f32", "f64"};
    return (unsigned)kind < sizeof names / sizeof names[0] ? names[kind] : "unknown";
}

/* Check the spec's arguments against the parameters of `fn` (their number and each one's size) with
 * cuFuncGetParamInfo. `*checked` is 1 when the driver could answer, 0 when it has no such entry point (before
 * CUDA 12.4) or does not support it for this function; then nothing is checked and RL_GPU_OK is returned.
 * A mismatch is RL_GPU_ARG: cuLaunchKernel would read parameter values past the caller's array. */
static rl_gpu_status rl_check_params(rl_cu_function fn, const rl_gpu_bench_spec *s, int *checked, rl_gpu_error *err) {
    size_t count, offset = 0, size = 0;
    size_t sizes[RL_MAX_PARAMS + 1];
    rl_cu_result rc = RL_CU_SUCCESS;

    *checked = 0;
    if (rl_cu.cuFuncGetParamInfo == NULL) {
        return RL_GPU_OK;
    }
    for (count = 0; count <= RL_MAX_PARAMS; count++) {
        rc = rl_cu.cuFuncGetParamInfo(fn, count, &offset, &size);
        if (rc != RL_CU_SUCCESS) {
            break;
        }
        sizes[count] = size;
    }
    if (rc != RL_CU_ERROR_INVALID_VALUE) { /* not "index past the last parameter": the driver cannot tell */
        return RL_GPU_OK;
    }
    *checked = 1;
    if (count != s->n_args) {
        return rl_fail(err, RL_GPU_ARG, 0, "cuFuncGetParamInfo", "%s takes %zu parameter%s, but %zu argument%s given",
                       s->kernel, count, count == 1 ? "" : "s", s->n_args, s->n_args == 1 ? " was" : "s were");
    }
    for (count = 0; count < s->n_args; count++) {
        size_t want = rl_arg_size(s->args[count].kind);
        if (sizes[count] != want) {
            return rl_fail(err, RL_GPU_ARG, 0, "cuFuncGetParamInfo",
                           "parameter %zu of %s is %zu bytes, but argument %zu is a %s (%zu bytes)", count, s->kernel,
                           sizes[count], count, rl_arg_kind_name(s->args[count].kind), want);
        }
    }
    return RL_GPU_OK;
}

/* See gpu.h. Validates the spec before touching the device, then: push context, load module, size the grid,
 * allocate and fill buffers, warm up, time `reps` launches with event pairs, read back, and release everything. */
rl_gpu_status rl_gpu_bench(const rl_gpu_bench_spec *s, rl_gpu_bench_result *r, rl_gpu_error *err) {
    rl_gpu_status st;
    rl_cu_result rc;
    rl_cu_module module = NULL;
    rl_cu_function fn = NULL;
    rl_cu_deviceptr *buffers = NULL;
    rl_arg_value *values = NULL;
    void **params = NULL;
    rl_cu_event *events = NULL;
    size_t n_events = 0;
    size_t i;
    unsigned k;
    int sm_count = 0;
    rl_cu_device dev;
    rl_cu_deviceptr clock_global = 0;
    size_t clock_bytes = 0;
    unsigned per_rep = s->launches_per_rep > 0 ? s->launches_per_rep : 1;
    char after[160];
    char why[256];

    memset(r, 0, sizeof *r);
    if (s->block == 0 || s->reps == 0 || s->kernel == NULL || s->cubin == NULL || s->cubin_size == 0) {
        return rl_fail(err, RL_GPU_ARG, 0, "cuLaunchKernel", "a timed launch needs a cubin, a kernel name, "
                                                              "a block size > 0 and at least one repetition");
    }
    if (!rl_gpu_check_cubin(s->cubin, s->cubin_size, why, sizeof why)) {
        return rl_fail(err, RL_GPU_ARG, 0, "cuModuleLoadData", "refusing to load %s's cubin: %s", s->kernel, why);
    }
    for (i = 0; i < s->n_buffers; i++) {
        if (s->buffers[i].bytes == 0 || s->buffers[i].bytes % 4 != 0) {
            return rl_fail(err, RL_GPU_ARG, 0, "cuMemAlloc", "buffer %zu: size %zu is not a positive multiple of 4",
                           i, s->buffers[i].bytes);
        }
    }
    for (i = 0; i < s->n_args; i++) {
        if (s->args[i].kind == RL_GPU_ARG_BUFFER &&
            (s->args[i].u.index < 0 || (size_t)s->args[i].u.index >= s->n_buffers)) {
            return rl_fail(err, RL_GPU_ARG, 0, "cuLaunchKernel", "argument %zu names buffer %d of %zu", i,
                           s->args[i].u.index, s->n_buffers);
        }
    }
    if (s->readback >= 0 &&
        ((size_t)s->readback >= s->n_buffers || s->readback_dst == NULL ||
         s->readback_offset > s->buffers[s->readback].bytes ||
         s->readback_bytes > s->buffers[s->readback].bytes - s->readback_offset)) {
        return rl_fail(err, RL_GPU_ARG, 0, "cuMemcpyDtoH", "the read-back range lies outside buffer %d",
                       s->readback);
    }
    if (s->n_args > RL_MAX_PARAMS) {
        return rl_fail(err, RL_GPU_ARG, 0, "cuLaunchKernel", "%zu kernel arguments, more than the %d supported",
                       s->n_args, RL_MAX_PARAMS);
    }
    if (rl_need_driver("cuLaunchKernel", err) != RL_GPU_OK) {
        return RL_GPU_UNAVAILABLE;
    }
    snprintf(after, sizeof after, " (after launching %s)", s->kernel);

    st = rl_push_context(s->device, &dev, err);
    if (st != RL_GPU_OK) {
        return st;
    }
    sm_count = rl_attribute(dev, RL_CU_ATTR_MULTIPROCESSOR_COUNT);

    buffers = calloc(s->n_buffers > 0 ? s->n_buffers : 1, sizeof *buffers);
    values = calloc(s->n_args > 0 ? s->n_args : 1, sizeof *values);
    params = calloc(s->n_args > 0 ? s->n_args : 1, sizeof *params);
    n_events = 2 * (size_t)s->reps;
    events = calloc(n_events, sizeof *events);
    if (buffers == NULL || values == NULL || params == NULL || events == NULL) {
        st = rl_fail(err, RL_GPU_NOMEM, 0, "calloc", "out of host memory");
        goto done;
    }

    rc = rl_cu.cuModuleLoadData(&module, s->cubin);
    if (rc != RL_CU_SUCCESS) {
        module = NULL;
        st = rl_cu_fail(err, rc, "cuModuleLoadData", "");
        goto done;
    }
    rc = rl_cu.cuModuleGetFunction(&fn, module, s->kernel);
    if (rc != RL_CU_SUCCESS) {
        st = rl_cu_fail(err, rc, "cuModuleGetFunction", "");
        goto done;
    }
    st = rl_check_params(fn, s, &r->params_checked, err);
    if (st != RL_GPU_OK) {
        goto done;
    }
    if (rl_cu.cuModuleGetGlobal != NULL &&
        rl_cu.cuModuleGetGlobal(&clock_global, &clock_bytes, module, "rl_clock") != RL_CU_SUCCESS) {
        clock_global = 0; /* a module without the clock counters: nothing to read back */
    }
    if (clock_bytes < 2 * sizeof(unsigned long long)) {
        clock_global = 0;
    }
    if (s->shared_bytes > 48 * 1024) {
        rc = rl_cu.cuFuncSetAttribute(fn, RL_CU_FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)s->shared_bytes);
        if (rc != RL_CU_SUCCESS) {
            st = rl_cu_fail(err, rc, "cuFuncSetAttribute", "");
            goto done;
        }
    }
    (void)rl_cu.cuFuncGetAttribute(&r->registers, RL_CU_FUNC_NUM_REGS, fn);
    (void)rl_cu.cuFuncGetAttribute(&r->local_bytes, RL_CU_FUNC_LOCAL_SIZE_BYTES, fn);
    (void)rl_cu.cuFuncGetAttribute(&r->static_shared_bytes, RL_CU_FUNC_SHARED_SIZE_BYTES, fn);
    rc = rl_cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(&r->blocks_per_sm, fn, (int)s->block,
                                                            (size_t)s->shared_bytes);
    if (rc != RL_CU_SUCCESS) {
        st = rl_cu_fail(err, rc, "cuOccupancyMaxActiveBlocksPerMultiprocessor", "");
        goto done;
    }
    if (r->blocks_per_sm <= 0) {
        st = rl_fail(err, RL_GPU_ARG, 0, "cuOccupancyMaxActiveBlocksPerMultiprocessor",
                     "%s cannot be resident with %u threads and %u bytes of dynamic shared memory per block "
                     "(%d registers per thread)",
                     s->kernel, s->block, s->shared_bytes, r->registers);
        goto done;
    }
    r->grid = s->grid;
    if (r->grid == 0) {
        unsigned per_sm = (unsigned)r->blocks_per_sm;
        if (s->max_blocks_per_sm > 0 && per_sm > s->max_blocks_per_sm) {
            per_sm = s->max_blocks_per_sm;
        }
        r->grid = per_sm * (unsigned)(sm_count > 0 ? sm_count : 1);
    }

    for (i = 0; i < s->n_buffers; i++) {
        rc = rl_cu.cuMemAlloc(&buffers[i], s->buffers[i].bytes);
        if (rc != RL_CU_SUCCESS) {
            buffers[i] = 0;
            st = rl_cu_fail(err, rc, "cuMemAlloc", "");
            goto done;
        }
        rc = rl_cu.cuMemsetD32(buffers[i], s->buffers[i].fill, s->buffers[i].bytes / 4);
        if (rc != RL_CU_SUCCESS) {
            st = rl_cu_fail(err, rc, "cuMemsetD32", "");
            goto done;
        }
    }
    for (i = 0; i < s->n_args; i++) {
        switch (s->args[i].kind) {
        case RL_GPU_ARG_BUFFER: values[i].ptr = buffers[s->args[i].u.index]; break;
        case RL_GPU_ARG_I32:
        case RL_GPU_ARG_U32:
        case RL_GPU_ARG_I64:
        case RL_GPU_ARG_U64:
        case RL_GPU_ARG_F32:
        case RL_GPU_ARG_F64: values[i].scalar = s->args[i].u; break;
        default:
            st = rl_fail(err, RL_GPU_ARG, 0, "cuLaunchKernel", "argument %zu has an unknown kind", i);
            goto done;
        }
        params[i] = &values[i];
    }

    for (k = 0; k < s->warmup; k++) {
        rc = rl_cu.cuLaunchKernel(fn, r->grid, 1, 1, s->block, 1, 1, s->shared_bytes, NULL, params, NULL);
        if (rc != RL_CU_SUCCESS) {
            st = rl_cu_fail(err, rc, "cuLaunchKernel", after);
            goto done;
        }
    }
    rc = rl_cu.cuCtxSynchronize();
    if (rc != RL_CU_SUCCESS) {
        st = rl_cu_fail(err, rc, "cuCtxSynchronize", after);
        goto done;
    }
    if (clock_global != 0) { /* count the timed launches only */
        rc = rl_cu.cuMemsetD32(clock_global, 0, 4);
        if (rc != RL_CU_SUCCESS) {
            st = rl_cu_fail(err, rc, "cuMemsetD32", " (clearing rl_clock)");
            goto done;
        }
    }

    for (i = 0; i < n_events; i++) {
        rc = rl_cu.cuEventCreate(&events[i], 0);
        if (rc != RL_CU_SUCCESS) {
            events[i] = NULL;
            st = rl_cu_fail(err, rc, "cuEventCreate", "");
            goto done;
        }
    }
    for (k = 0; k < s->reps; k++) {
        rc = rl_cu.cuEventRecord(events[2 * k], NULL);
        if (rc == RL_CU_SUCCESS) {
            unsigned j;
            for (j = 0; j < per_rep; j++) {
                rc = rl_cu.cuLaunchKernel(fn, r->grid, 1, 1, s->block, 1, 1, s->shared_bytes, NULL, params, NULL);
                if (rc != RL_CU_SUCCESS) {
                    st = rl_cu_fail(err, rc, "cuLaunchKernel", after);
                    goto done;
                }
            }
            rc = rl_cu.cuEventRecord(events[2 * k + 1], NULL);
        }
        if (rc != RL_CU_SUCCESS) {
            st = rl_cu_fail(err, rc, "cuEventRecord", "");
            goto done;
        }
    }
    rc = rl_cu.cuEventSynchronize(events[n_events - 1]);
    if (rc != RL_CU_SUCCESS) {
        st = rl_cu_fail(err, rc, "cuEventSynchronize", after);
        goto done;
    }
    for (k = 0; k < s->reps; k++) {
        float ms = 0.0f;
        rc = rl_cu.cuEventElapsedTime(&ms, events[2 * k], events[2 * k + 1]);
        if (rc != RL_CU_SUCCESS) {
            st = rl_cu_fail(err, rc, "cuEventElapsedTime", "");
            goto done;
        }
        s->times_s[k] = (double)ms * 1e-3 / per_rep;
    }
    if (clock_global != 0) {
        unsigned long long counters[2] = {0, 0};
        rc = rl_cu.cuMemcpyDtoH(counters, clock_global, sizeof counters);
        if (rc != RL_CU_SUCCESS) {
            st = rl_cu_fail(err, rc, "cuMemcpyDtoH", " (reading rl_clock)");
            goto done;
        }
        r->clock_cycles = counters[0];
        r->clock_ns = counters[1];
    }
    if (s->readback >= 0 && s->readback_bytes > 0) {
        rc = rl_cu.cuMemcpyDtoH(s->readback_dst, buffers[s->readback] + s->readback_offset, s->readback_bytes);
        if (rc != RL_CU_SUCCESS) {
            st = rl_cu_fail(err, rc, "cuMemcpyDtoH", after);
            goto done;
        }
    }

done:
    /* Release everything; errors here are ignored, since the first error is the one worth reporting. */
    if (events != NULL) {
        for (i = 0; i < n_events; i++) {
            if (events[i] != NULL) {
                (void)rl_cu.cuEventDestroy(events[i]);
            }
        }
    }
    if (buffers != NULL) {
        for (i = 0; i < s->n_buffers; i++) {
            if (buffers[i] != 0) {
                (void)rl_cu.cuMemFree(buffers[i]);
            }
        }
    }
    if (module != NULL) {
        (void)rl_cu.cuModuleUnload(module);
    }
    free(events);
    free(params);
    free(values);
    free(buffers);
    rl_pop_context();
    return st;
}
