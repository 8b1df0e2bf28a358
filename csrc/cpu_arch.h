/* What the CPU microbenchmark files share (cpu_info.c, cpu_kernels.c, cpu_runs.c; their contracts are cpu.h's):
 * the system headers, the architecture macros, and the two functions one file gives another. Include it first,
 * after defining _GNU_SOURCE. */
#ifndef RL_CPU_ARCH_H
#define RL_CPU_ARCH_H

#include "cpu.h"
#include "rl_why.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#define RL_X86 1
#include <cpuid.h>
#include <immintrin.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#endif
#if defined(__aarch64__)
#define RL_ARM64 1
#include <arm_neon.h>
#endif

/* RL_X86_ONLY(...) / RL_ARM64_ONLY(...): the arguments on that architecture, nothing elsewhere (for the kernel
 * tables' per-ISA initialisers). */
#ifdef RL_X86
#define RL_X86_ONLY(...) __VA_ARGS__
#else
#define RL_X86_ONLY(...)
#endif
#ifdef RL_ARM64
#define RL_ARM64_ONLY(...) __VA_ARGS__
#else
#define RL_ARM64_ONLY(...)
#endif

#define RL_CACHE_LINE 64
#define RL_MAX_CPUS 1024 /* CPU_SETSIZE on glibc; machines with more CPUs are measured on the first 1024 */

/* cpu_info.c: the CPUs this process may run on (its affinity mask), at most RL_MAX_CPUS; their count. */
int rl_allowed_cpus(int *cpus);

/* cpu_kernels.c: `reps` passes of a bandwidth kernel over x0, x1, x2 (n doubles each); the read sum or 0. */
double rl_bw_passes(rl_simd simd, rl_bw_kernel kernel, int nt, double *x0, double *x1, double *x2, int64_t n,
                    int64_t reps);

#endif
