/* GPU layer of roofline: the CUDA driver API and NVRTC, loaded with dlopen on first use.
 *
 * Pure C11, no Python.h. Nothing here links against libcuda or libnvrtc: both libraries are opened at run time
 * from candidate paths that the caller supplies (the Python layer knows where pip wheels and toolkits put
 * them), and every entry point used is resolved into a function table. A machine without CUDA therefore loads
 * the extension fine; the first GPU call reports which library is missing.
 *
 * Every function returns an rl_gpu_status and, on failure, fills an rl_gpu_error naming the failed call and the
 * library's own error string (cuGetErrorString / nvrtcGetErrorString). Functions are safe to call from several
 * threads: library loading and context retention are serialised by an internal mutex; kernels launched from
 * two threads at once simply share the device. */
#ifndef RL_GPU_H
#define RL_GPU_H

#include <stddef.h>
#include <stdint.h>

/* Status of a call into this layer. RL_GPU_OK is 0; the others say which kind of exception to raise. */
typedef enum {
    RL_GPU_OK = 0,
    RL_GPU_UNAVAILABLE = 1, /* a library could not be opened, lacks a symbol, or cuInit found no usable GPU */
    RL_GPU_CUDA = 2,        /* a CUDA driver call failed: code is a CUresult */
    RL_GPU_NVRTC = 3,       /* an NVRTC call failed: code is an nvrtcResult */
    RL_GPU_NOMEM = 4,       /* host allocation failed */
    RL_GPU_ARG = 5,         /* invalid argument (index out of range, bad size) */
} rl_gpu_status;

/* What went wrong. `call` names the library function (e.g. "cuModuleLoadData"); `code` is its return value
 * (0 when the failure is not a library return code); `message` is a complete sentence for the user. */
typedef struct {
    rl_gpu_status status;
    int code;
    char call[64];
    char message[2048];
} rl_gpu_error;

/* A heap buffer returned to the caller, who releases it with rl_gpu_blob_free(). */
typedef struct {
    char *data;
    size_t size;
} rl_gpu_blob;

/* Device properties read with cuDeviceGetAttribute and friends. Clocks in kHz (the driver's unit), sizes in
 * bytes, bus width in bits. An attribute the driver does not report is -1. */
typedef struct {
    char name[256];
    unsigned char uuid[16];
    int has_uuid;
    int cc_major, cc_minor;
    int sm_count;
    int clock_khz;
    int memory_clock_khz;
    int memory_bus_width_bits;
    int l2_cache_bytes;
    int max_threads_per_sm;
    int max_shared_per_block_optin;
    int registers_per_sm;
    int pci_domain, pci_bus, pci_device;
    unsigned long long total_memory_bytes;
} rl_gpu_props;

/* Kinds of kernel argument for rl_gpu_bench. */
typedef enum {
    RL_GPU_ARG_BUFFER = 0, /* device pointer of buffer number `u.index` */
    RL_GPU_ARG_I32 = 1,
    RL_GPU_ARG_U32 = 2,
    RL_GPU_ARG_I64 = 3,
    RL_GPU_ARG_U64 = 4,
    RL_GPU_ARG_F32 = 5,
    RL_GPU_ARG_F64 = 6,
} rl_gpu_arg_kind;

/* The value of a kernel argument: the member its kind names, all at offset 0 (the launch passes the bytes). */
typedef union {
    int index;
    int32_t i32;
    uint32_t u32;
    int64_t i64;
    uint64_t u64;
    float f32;
    double f64;
} rl_gpu_value;

typedef struct {
    rl_gpu_arg_kind kind;
    rl_gpu_value u;
} rl_gpu_arg;

/* A device buffer that rl_gpu_bench allocates, fills with a 32-bit pattern, passes to the kernel and frees. */
typedef struct {
    size_t bytes; /* a multiple of 4 */
    uint32_t fill;
} rl_gpu_buffer_spec;

/* One timed kernel: load `cubin`, launch `kernel` `warmup` times untimed, then `reps` times a group of
 * `launches_per_rep` back-to-back launches (0 counts as 1) between a pair of CUDA events on the default stream;
 * each time reported is the group's time divided by `launches_per_rep`, so a short kernel is not timed alone
 * with the fixed cost of an event pair. `grid` 0 means "fill the device": multiprocessors times the blocks per
 * multiprocessor that the occupancy calculator allows (capped at `max_blocks_per_sm` when that is > 0).
 *
 * Before the module is loaded the cubin is checked to be a complete ELF image (rl_gpu_check_cubin), and, where
 * the driver has cuFuncGetParamInfo (CUDA 12.4 and later), the arguments are checked against the kernel's
 * parameters: their number and each one's size (8 bytes for buffers, i64, u64 and f64; 4 for the others). */
typedef struct {
    int device;
    const void *cubin;
    size_t cubin_size;
    const char *kernel;
    unsigned grid;
    unsigned block;
    unsigned shared_bytes; /* dynamic shared memory per block */
    unsigned max_blocks_per_sm;
    const rl_gpu_buffer_spec *buffers;
    size_t n_buffers;
    const rl_gpu_arg *args;
    size_t n_args;
    unsigned warmup;
    unsigned reps;
    unsigned launches_per_rep; /* launches timed by one event pair; 0 or 1: one */
    double *times_s;   /* out: `reps` elapsed times in seconds, per launch */
    int readback;      /* buffer to copy back after the runs, -1 for none */
    size_t readback_offset;
    void *readback_dst; /* `readback_bytes` bytes of host memory */
    size_t readback_bytes;
} rl_gpu_bench_spec;

typedef struct {
    unsigned grid;          /* blocks launched */
    int blocks_per_sm;      /* occupancy calculator's answer */
    int registers;          /* per thread */
    int local_bytes;        /* per thread: > 0 means the compiler spilled or put an array in local memory */
    int static_shared_bytes;
    int params_checked;     /* 1: arguments checked with cuFuncGetParamInfo; 0: the driver cannot tell */
    /* SM clock during the timed launches, from the module's `__device__ unsigned long long rl_clock[2]` when it
     * has one: the kernels add the SM cycles (%clock64) and nanoseconds (%globaltimer) that block 0's first
     * thread spent in each launch. Both 0 when the module has no such variable. */
    unsigned long long clock_cycles;
    unsigned long long clock_ns;
} rl_gpu_bench_result;

/* Check that `data[0..size)` is a complete 64-bit little-endian ELF image for the CUDA machine (EM_CUDA): the
 * header, the program and section header tables and every section and segment with file contents lie inside
 * the buffer. The driver trusts the offsets of an image it loads, so a truncated or corrupt cubin must never
 * reach cuModuleLoadData. Returns 1 when it is complete; else 0, with the reason in `why` (of `why_size`). */
int rl_gpu_check_cubin(const void *data, size_t size, char *why, size_t why_size);

/* Open the CUDA driver library from the first of `paths[0..n)` that dlopen accepts and that has every required
 * entry point (a candidate lacking one is closed and the next one tried), resolve its entry points and call
 * cuInit(0). Idempotent: once loaded, returns RL_GPU_OK at once. On failure the message lists every path tried
 * with dlerror's answer or the symbol it lacks. */
rl_gpu_status rl_gpu_load_driver(const char *const *paths, size_t n, rl_gpu_error *err);

/* Same for NVRTC. */
rl_gpu_status rl_gpu_load_nvrtc(const char *const *paths, size_t n, rl_gpu_error *err);

/* Path the library was opened from, or NULL while it is not loaded. The string lives as long as the process. */
const char *rl_gpu_driver_path(void);
const char *rl_gpu_nvrtc_path(void);

/* CUDA version the driver supports, encoded 1000 * major + 10 * minor (cuDriverGetVersion). */
rl_gpu_status rl_gpu_driver_version(int *version, rl_gpu_error *err);

/* Number of CUDA devices (cuDeviceGetCount). */
rl_gpu_status rl_gpu_device_count(int *count, rl_gpu_error *err);

/* Properties of device `index` into `*props`. */
rl_gpu_status rl_gpu_device_props(int index, rl_gpu_props *props, rl_gpu_error *err);

/* Free and total device memory in bytes, in the device's primary context (cuMemGetInfo). */
rl_gpu_status rl_gpu_mem_info(int index, size_t *free_bytes, size_t *total_bytes, rl_gpu_error *err);

/* NVRTC's version (nvrtcVersion). */
rl_gpu_status rl_gpu_nvrtc_version(int *major, int *minor, rl_gpu_error *err);

/* Real architectures NVRTC can compile for, as 10 * major + minor (e.g. 90), into `out[0..cap)`; `*n` receives
 * the full count even when it exceeds `cap`. An NVRTC too old to answer (before 11.2) reports 0 archs. */
rl_gpu_status rl_gpu_nvrtc_archs(int *out, size_t cap, size_t *n, rl_gpu_error *err);

/* Compile CUDA C++ `source` (NUL-terminated; `name` is the file name used in diagnostics) with NVRTC and the
 * `n_options` options, and return the cubin in `*cubin`. The `n_headers` headers (texts `headers[i]`, included
 * as `#include "<header_names[i]>"`) are handed to nvrtcCreateProgram, so the source needs no file system.
 * The compile log is returned in `*log` whether or not the compile succeeds (it holds warnings, or the errors on
 * failure); both blobs start empty and the caller frees them with rl_gpu_blob_free() in every case. The options must name a real architecture (-arch=sm_XY):
 * a virtual one yields no cubin and is reported as an error. */
rl_gpu_status rl_gpu_compile(const char *source, const char *name, const char *const *headers,
                             const char *const *header_names, size_t n_headers, const char *const *options,
                             size_t n_options, rl_gpu_blob *cubin, rl_gpu_blob *log, rl_gpu_error *err);

/* Release a blob returned by this layer; safe on an empty or already released blob. */
void rl_gpu_blob_free(rl_gpu_blob *blob);

/* Run one timed kernel as described by `spec` (see rl_gpu_bench_spec). The device's primary context is
 * retained on first use and kept for the life of the process (it is the context PyTorch's runtime uses too),
 * pushed for the duration of the call and popped before returning. Every buffer, event and module is released
 * before returning, on success and on failure. A fault inside the kernel surfaces as RL_GPU_CUDA from the call
 * that synchronised (its name says after which kernel). Blocks the calling thread: the caller should release
 * any interpreter lock around it. */
rl_gpu_status rl_gpu_bench(const rl_gpu_bench_spec *spec, rl_gpu_bench_result *result, rl_gpu_error *err);

#endif
