/* CPU ceiling microbenchmarks: all-core FMA peak per dtype and a memory bandwidth sweep over working-set sizes.
 *
 * Pure C11 plus POSIX threads: no Python.h. The binding layer (binding_cpu.c) validates arguments and converts the
 * results; everything here reports failures through an rl_cpu_error naming the failed call.
 *
 * Units used throughout: sizes in bytes (int64_t), times in seconds (double), rates in FLOP/s or bytes/s (double),
 * clock in Hz. A FLOP is one add or one multiply; a fused multiply-add counts 2. */
#ifndef RL_CPU_H
#define RL_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "rl_dtype.h"

/* SIMD instruction sets a benchmark can run with. RL_SIMD_AUTO asks for the widest one this CPU supports. */
typedef enum {
    RL_SIMD_AUTO = -1,
    RL_SIMD_SCALAR = 0, /* portable C, no intrinsics (one lane; mul and add are separate operations) */
    RL_SIMD_SSE2 = 1,   /* x86-64 baseline: 128-bit, separate mul and add */
    RL_SIMD_AVX2 = 2,   /* x86: 256-bit with FMA3 (requires both the avx2 and fma CPU flags) */
    RL_SIMD_AVX512 = 3, /* x86: 512-bit AVX-512F with FMA */
    RL_SIMD_NEON = 4,   /* aarch64: 128-bit Advanced SIMD with FMA */
    RL_SIMD_COUNT = 5
} rl_simd;

/* Bandwidth kernels: an index into the kernel table of cpu_kernels.c (rl_cpu_bw_kernel_count() entries; find one by
 * name with rl_cpu_bw_kernel_find). Working set w bytes is split evenly over the threads; the arrays of one thread
 * are contiguous. Bytes counted per pass equal the working set: read touches one array of N doubles (N*8 bytes),
 * copy b[i] = a[i] two arrays (2*N*8: read + write), triad a[i] = b[i] + s*c[i] three arrays (3*N*8). The
 * write-allocate (read-for-ownership) traffic of stores is not counted, as in STREAM. The first three entries of
 * the table are fixed: */
typedef int rl_bw_kernel;
enum { RL_BW_READ = 0, RL_BW_COPY = 1, RL_BW_TRIAD = 2 };
#define RL_BW_MAX 16 /* most kernels the table may hold (callers size kernel lists with it) */
#define RL_BW_MAX_ARRAYS 3 /* most arrays one kernel may touch */

/* How repeats of one measurement are reduced to one figure. */
typedef enum { RL_STAT_MEDIAN = 0, RL_STAT_MAX = 1 } rl_stat;

/* Failure description filled by the functions below: the name of the failed call (a static string) and the
 * errno-style code it returned (0 when not applicable). */
typedef struct {
    const char *call;
    int code;
} rl_cpu_error;

#define RL_CPU_MAX_LEVEL 4 /* cache levels 1..4 are reported; index 0 is unused */

/* What the benchmarks need to know about the machine. Every field is filled (0 / "" / "unknown" when not known). */
typedef struct {
    char model[128];                        /* "model name" of /proc/cpuinfo, or the machine name from uname */
    int cpus;                               /* logical CPUs this process may run on (sched_getaffinity) */
    int online;                             /* online logical CPUs (sysconf) */
    int physical_cores;                     /* distinct (package, core) pairs among the allowed CPUs; 0 unknown */
    double clock_hz;                        /* nominal maximum clock, Hz; 0 when unknown */
    char clock_source[64];                  /* where clock_hz came from */
    int64_t cache_bytes[RL_CPU_MAX_LEVEL + 1];    /* data/unified cache size of one instance per level, bytes */
    int cache_instances[RL_CPU_MAX_LEVEL + 1];    /* instances of that cache serving the allowed CPUs */
    char cache_source[64];                  /* "sysfs", "sysconf" or "unknown" */
} rl_cpu_info;

/* Logical CPUs this process may run on (sched_getaffinity; sysconf elsewhere), >= 1: the default thread count. */
int rl_cpu_count(void);

/* Fill *out from sysfs / procfs / sysconf. Never fails: unknown fields are zero. */
void rl_cpu_info_get(rl_cpu_info *out);

/* The widest SIMD set this CPU and this build support (run-time detection on x86). */
rl_simd rl_cpu_simd_best(void);

/* 1 when this build and CPU can run `simd` (RL_SIMD_SCALAR is always supported). */
int rl_cpu_simd_supported(rl_simd simd);

/* Static name of a SIMD set ("avx512", "avx2", "sse2", "neon", "scalar"); "?" for an invalid value. */
const char *rl_cpu_simd_name(rl_simd simd);

/* Lanes per vector register for an element of `elem_bytes` (4 or 8) bytes; 0 for an invalid combination. */
int rl_cpu_simd_lanes(rl_simd simd, int elem_bytes);

/* 1 when `simd` has a fused multiply-add instruction (so one lane does 2 FLOP per FMA instruction). */
int rl_cpu_simd_has_fma(rl_simd simd);

/* Independent accumulators (vector registers) the FMA kernel of `simd` keeps in flight. */
int rl_cpu_fma_accumulators(rl_simd simd);

/* The FMA kernels are a table in cpu_kernels.c, one entry per element type: rl_cpu_fma_dtype(i) for 0 <= i <
 * rl_cpu_fma_dtype_count() lists them (float64 and float32 first). */
int rl_cpu_fma_dtype_count(void);
rl_dtype rl_cpu_fma_dtype(int i);

/* Bytes of one element of `dtype` in its FMA kernel; 0 when there is no FMA kernel of that dtype. */
int rl_cpu_fma_elem_bytes(rl_dtype dtype);

/* 1 when an FMA kernel of `dtype` exists for `simd` (which must itself be supported by the CPU to run it). */
int rl_cpu_fma_supported(rl_simd simd, rl_dtype dtype);

/* Run the single-thread FMA kernel for `iters` iterations and return the sum of its accumulators (every lane of
 * every accumulator follows x <- x*m + a from x0, with m and a fixed: tests compare with that recurrence).
 * FLOPs executed = iters * rl_cpu_fma_accumulators(simd) * lanes * 2. `simd` must be supported (not AUTO) and
 * rl_cpu_fma_supported(simd, dtype); otherwise NaN is returned and nothing runs. */
double rl_cpu_fma_kernel(rl_simd simd, rl_dtype dtype, int64_t iters);

/* Starting value, multiplier and addend of the FMA kernel recurrence (same for both dtypes, exact in float). */
#define RL_FMA_X0 1.0
#define RL_FMA_MUL 0.9990234375 /* 1 - 2^-10 */
#define RL_FMA_ADD 0.0009765625 /* 2^-10: fixed point x = 1, so values never overflow or become subnormal */

/* Result of an all-core FMA measurement. */
typedef struct {
    double flops;          /* all-core FLOP/s, reduced over repeats with `stat` */
    double best_flops;     /* best repeat, FLOP/s */
    double seconds;        /* wall time of the whole measurement including calibration, s */
    int64_t flop_per_rep;  /* FLOPs executed by all threads in one timed repeat */
    int threads;           /* threads that ran */
    int pinned;            /* 1 when every thread was pinned to its own CPU */
    int repeats;           /* timed repeats */
    double cpu_share;      /* median over timed repeats of (CPU time of the threads' work) / (threads x wall
                              time): near 1 on an idle machine, lower when other processes took the CPUs;
                              0 when unknown */
    rl_simd simd;          /* SIMD set used */
} rl_fma_result;

/* All-core FMA peak: `threads` pinned threads (<= 0: one per allowed CPU) run the FMA kernel of `simd` (AUTO: the
 * widest) in `dtype`, barrier-started; each timed repeat lasts about seconds / (repeats + 1) after calibration.
 * Returns 0 and fills *out, or -1 and fills *err. */
int rl_cpu_fma_peak(rl_simd simd, rl_dtype dtype, double seconds, int threads, int repeats, rl_stat stat,
                    rl_fma_result *out, rl_cpu_error *err);

/* Bandwidth sweep: for each kernel kernels[k] (k < nkernels) and each working set sizes[i] bytes (i < nsizes),
 * `threads` pinned threads (<= 0: one per allowed CPU) run the kernel over their share, passes repeated until a
 * timed repeat lasts at least `min_seconds`; `repeats` timed repeats are reduced with `stat` and written to
 * rates[k * nsizes + i] in bytes/s (caller owns `rates`, nkernels * nsizes doubles). One buffer of max(sizes)
 * bytes (plus padding) is allocated, first touched in parallel by the threads that use it, and freed before
 * returning. Working sets of at least nt_min_bytes (0: none) are written with non-temporal stores where the ISA
 * has them (x86): beyond the last-level cache that is the fastest way to write memory. *pinned is set to 1 when
 * every thread ran pinned to its own CPU; *cpu_share (may be NULL) to the median over all timed runs of the share
 * of their CPUs the threads got (see rl_fma_result.cpu_share). `hugepages` asks for transparent huge pages on large
 * working sets (fewer TLB misses, a higher DRAM figure; but the first touch may stall for seconds while the kernel
 * compacts memory). Every size must be at least 1024 * threads bytes. Returns 0, or -1 with
 * *err filled. */
int rl_cpu_bandwidth_sweep(rl_simd simd, const rl_bw_kernel *kernels, int nkernels, const int64_t *sizes,
                           int nsizes, int threads, int repeats, double min_seconds, rl_stat stat,
                           int64_t nt_min_bytes, int hugepages, double *rates, int *pinned, double *cpu_share,
                           rl_cpu_error *err);

/* Single-thread kernel entry for tests: run `kernel` once over n elements per array in `buf` (which must hold
 * the kernel's arrays back to back: n doubles each, read 1 array x0, copy 2 (x1 = x0), triad 3 (x0 = x1 + s*x2),
 * 64-byte aligned, n a multiple of 8), with non-temporal stores when `nt`. Returns the read kernel's sum (0 for
 * copy/triad). Triad uses s = RL_TRIAD_SCALAR. The caller owns `buf`. */
double rl_cpu_bw_kernel_once(rl_simd simd, rl_bw_kernel kernel, int nt, double *buf, int64_t n);

#define RL_TRIAD_SCALAR 3.0

/* Kernels in the table; the name of one ("read", "copy", "triad", ...; "?" for an invalid index); the arrays it
 * touches (1 .. RL_BW_MAX_ARRAYS; 0 for an invalid index); the index of a name (-1 when there is none). */
int rl_cpu_bw_kernel_count(void);
const char *rl_cpu_bw_kernel_name(rl_bw_kernel kernel);
int rl_cpu_bw_kernel_arrays(rl_bw_kernel kernel);
rl_bw_kernel rl_cpu_bw_kernel_find(const char *name);

/* ---- Low-precision and matrix-unit product kernels ----
 *
 * Instructions that multiply narrow types and accumulate wider ones, used by matrix products: AVX512-BF16
 * vdpbf16ps (pairs of bf16 products into fp32), AVX512-FP16 vfmadd231ph (fp16 FMA), AVX512-VNNI vpdpbusd (quads
 * of u8 x s8 products into int32), and the AMX tile instructions tdpbf16ps / tdpbssd (16x16 fp32 / int32 tiles +=
 * 16x32 bf16 x 32x16 bf16 / 16x64 int8 x 64x16 int8). Each is an entry of a table in cpu_kernels.c; whether one runs
 * depends on the build (the compiler must emit it), the CPU (cpuid), the OS (XCR0 state enabled through XSAVE)
 * and, for AMX, the kernel's permission for the tile data state (arch_prctl ARCH_REQ_XCOMP_PERM). Nothing is
 * assumed: rl_cpu_lowp_check says which of these failed. */
/* A kernel: an index into cpu_kernels.c's table of them, 0 .. rl_cpu_lowp_count() - 1 (rl_cpu_lowp_find gives the
 * index of a name). The table is the only list of the kernels: a new one is a function and a row in cpu_kernels.c. */
typedef int rl_lowp;

/* How many kernels the table has (whether or not this build or machine can run them). */
int rl_cpu_lowp_count(void);

/* What decides whether a low-precision kernel can run, as read from the machine (rl_cpu_features_get) or given
 * by a test. cpuid registers are 0 where the leaf does not exist. */
typedef struct {
    int x86;               /* 1 when the registers below were read with cpuid (x86 build) */
    uint32_t leaf1_ecx;    /* cpuid(1).ecx: bit 27 OSXSAVE */
    uint32_t leaf7_ebx;    /* cpuid(7, 0).ebx: bit 16 AVX512F */
    uint32_t leaf7_ecx;    /* cpuid(7, 0).ecx: bit 11 AVX512_VNNI */
    uint32_t leaf7_edx;    /* cpuid(7, 0).edx: bit 22 AMX-BF16, 23 AVX512_FP16, 24 AMX-TILE, 25 AMX-INT8 */
    uint32_t leaf7_1_eax;  /* cpuid(7, 1).eax: bit 5 AVX512_BF16 */
    uint64_t xcr0;         /* XGETBV(0) when OSXSAVE, else 0: bits 5-7 AVX-512 state, 17-18 AMX tile state */
    int amx_perm;          /* arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA): 0 granted, > 0 the errno it failed with,
                              -1 not asked (no AMX in cpuid or XCR0, or not Linux) */
} rl_cpu_features;

/* Read the features of this machine. On x86 Linux, when cpuid and XCR0 show AMX tile state, this asks the kernel
 * for permission to use it (once per process; the permission is process-wide and stays granted). */
void rl_cpu_features_get(rl_cpu_features *out);

/* 1 when kernel `k` can run given features *f (and this build has the kernel); otherwise 0 and, when why != NULL,
 * a sentence in why[0..cap) naming what is missing. A pure function of its arguments (tests feed it made-up
 * features). */
int rl_cpu_lowp_check(rl_lowp k, const rl_cpu_features *f, char *why, size_t cap);

/* 1 when kernel `k` can run on this machine (rl_cpu_features_get + rl_cpu_lowp_check, cached). */
int rl_cpu_lowp_available(rl_lowp k);

/* Static descriptions of kernel `k` (NULL / 0 for an invalid k): its name ("avx512_bf16", "avx512_fp16",
 * "avx512_vnni", "amx_bf16", "amx_int8"), the instruction, the element type multiplied, and the operations one
 * iteration of its loop executes (a multiply and an add count one each, so a multiply-add counts 2). */
const char *rl_cpu_lowp_name(rl_lowp k);
const char *rl_cpu_lowp_instruction(rl_lowp k);
rl_dtype rl_cpu_lowp_dtype(rl_lowp k);
int64_t rl_cpu_lowp_flop_per_iter(rl_lowp k);
/* Independent accumulators (vector registers or tiles) the kernel keeps in flight. */
int rl_cpu_lowp_accumulators(rl_lowp k);
/* The index of a name, or -1. */
int rl_cpu_lowp_find(const char *name);

/* Run kernel `k` on this thread for `iters` loop iterations and return the sum of its accumulators; NaN when the
 * build has no such kernel or `k` is invalid. The caller must have checked rl_cpu_lowp_available(k) (the
 * instruction faults otherwise). Accumulators start from distinct values and every iteration adds a fixed amount
 * (below), so tests can compute the result:
 *   avx512_bf16: 12 zmm chains of 16 fp32 lanes, x0 = 1 + c/128, each iteration adds 2 x (1.0 x 2^-10) = 2^-9
 *   avx512_fp16: 12 zmm chains of 32 fp16 lanes, x <- x*m + a as the FMA kernels (m = 1 - 2^-10, a = 2^-10);
 *                fp16 rounding stalls the chains, so every lane stays within [1, x0]
 *   avx512_vnni: 12 zmm chains of 16 int32 lanes, x0 = c, each iteration adds 1*1 + 1*1 + 1*1 + 1*(-1) = 2
 *   amx_bf16:    4 tiles of 16x16 fp32, x0 = 1 + t/128, each iteration adds 32 x (1.0 x 2^-10) = 2^-5
 *   amx_int8:    4 tiles of 16x16 int32, x0 = t, each iteration adds 64 x (1 x 1) = 64 */
double rl_cpu_lowp_kernel(rl_lowp k, int64_t iters);

/* All-core peak of kernel `k`, with the protocol of rl_cpu_fma_peak (*out's simd is RL_SIMD_AUTO's choice and
 * not meaningful here; flops counts the kernel's operations per second). Returns 0, or -1 with *err filled
 * (call "rl_cpu_lowp_available" when the kernel cannot run here). */
int rl_cpu_lowp_peak(rl_lowp k, double seconds, int threads, int repeats, rl_stat stat, rl_fma_result *out,
                     rl_cpu_error *err);

/* Monotonic clock in seconds. */
double rl_cpu_now(void);

#endif
