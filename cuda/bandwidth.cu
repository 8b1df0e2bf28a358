// Memory bandwidth kernels: DRAM read, write and copy, and L2 read.
//
// Compiled at run time by NVRTC for the device's own architecture (roofline/_gpu.py); needs no CUDA header.
// Every access is 16 bytes wide (int4) and coalesced across the warp: consecutive threads touch consecutive
// 16-byte words. The grid is sized by the caller to fill every multiprocessor, and each thread walks the buffer
// with a grid-sized stride, keeping RL_BW_UNROLL independent loads in flight before their first use.
//
// Bytes moved per launch, which the caller divides by the kernel time (n counts 16-byte words):
//   rl_bw_read   16 * n            (every word read once)
//   rl_bw_write  16 * n            (every word written once)
//   rl_bw_copy   2 * 16 * n        (every word read once and written once)
//   rl_l2_read   16 * n * passes   (a working set well inside L2, read `passes` times; see below)
//
// The read kernels fold what they load into one value per thread and store it only when it equals `sentinel`,
// a value the caller picks so that the store (practically) never happens; the compiler cannot tell, so it must
// perform every load. If the store does happen it lands in a small `sink` buffer and changes nothing else.
//
// SM clock: RL_CLOCK_BEGIN / RL_CLOCK_END of rl_device.cuh (the shared helpers) measure it in block 0.

#ifndef RL_BW_UNROLL
#define RL_BW_UNROLL 4
#endif

#include "rl_device.cuh"

__device__ __forceinline__ int rl_fold(int4 v) { return v.x ^ v.y ^ v.z ^ v.w; }

// Read `n` 16-byte words of `src`.
extern "C" __global__ void rl_bw_read(const int4 *__restrict__ src, rl_u64 n, int *__restrict__ sink, int sentinel) {
    RL_CLOCK_BEGIN
    const rl_u64 stride = (rl_u64)gridDim.x * blockDim.x;
    rl_u64 i = (rl_u64)blockIdx.x * blockDim.x + threadIdx.x;
    int acc = 0;
    for (; i + (RL_BW_UNROLL - 1) * stride < n; i += RL_BW_UNROLL * stride) {
        int4 v[RL_BW_UNROLL];
#pragma unroll
        for (int u = 0; u < RL_BW_UNROLL; ++u) {
            v[u] = src[i + u * stride];
        }
#pragma unroll
        for (int u = 0; u < RL_BW_UNROLL; ++u) {
            acc ^= rl_fold(v[u]);
        }
    }
    for (; i < n; i += stride) {
        acc ^= rl_fold(src[i]);
    }
    if (acc == sentinel) {
        sink[threadIdx.x & 31] = acc;
    }
    RL_CLOCK_END
}

// Write `n` 16-byte words of `dst` (values derived from `value` and the index, never read back for timing).
extern "C" __global__ void rl_bw_write(int4 *__restrict__ dst, rl_u64 n, int value) {
    RL_CLOCK_BEGIN
    const rl_u64 stride = (rl_u64)gridDim.x * blockDim.x;
    rl_u64 i = (rl_u64)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + (RL_BW_UNROLL - 1) * stride < n; i += RL_BW_UNROLL * stride) {
#pragma unroll
        for (int u = 0; u < RL_BW_UNROLL; ++u) {
            const int j = (int)(i + u * stride);
            dst[i + u * stride] = make_int4(value, value ^ j, value + j, j);
        }
    }
    for (; i < n; i += stride) {
        dst[i] = make_int4(value, value ^ (int)i, value + (int)i, (int)i);
    }
    RL_CLOCK_END
}

// Copy `n` 16-byte words from `src` to `dst` (distinct buffers).
extern "C" __global__ void rl_bw_copy(const int4 *__restrict__ src, int4 *__restrict__ dst, rl_u64 n) {
    RL_CLOCK_BEGIN
    const rl_u64 stride = (rl_u64)gridDim.x * blockDim.x;
    rl_u64 i = (rl_u64)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + (RL_BW_UNROLL - 1) * stride < n; i += RL_BW_UNROLL * stride) {
        int4 v[RL_BW_UNROLL];
#pragma unroll
        for (int u = 0; u < RL_BW_UNROLL; ++u) {
            v[u] = src[i + u * stride];
        }
#pragma unroll
        for (int u = 0; u < RL_BW_UNROLL; ++u) {
            dst[i + u * stride] = v[u];
        }
    }
    for (; i < n; i += stride) {
        dst[i] = src[i];
    }
    RL_CLOCK_END
}

// L2 read. Loads are cached in L2 only (ld.global.cg), so repeated passes measure L2 rather than each SM's L1;
// `volatile` keeps the compiler from hoisting the same loads out of the pass loop.
//
// RL_L2_LOADS (4) 16-byte loads, one grid stride apart, are written as one asm statement and folded only after
// it: the machine code then issues all of them before the first instruction that waits for one (the compiler
// keeps no fold between them; tests/test_gpu.py checks the order in the SASS where cuobjdump is available).
#ifndef RL_L2_LOADS
#define RL_L2_LOADS 4
#endif
#if RL_L2_LOADS != 4
#error "rl_l2_read's asm statement is written for RL_L2_LOADS == 4"
#endif

__device__ __forceinline__ void rl_load_l2_x4(int4 v[4], const int4 *p, rl_u64 stride) {
    asm volatile("ld.global.cg.v4.s32 {%0, %1, %2, %3}, [%16];\n\t"
                 "ld.global.cg.v4.s32 {%4, %5, %6, %7}, [%17];\n\t"
                 "ld.global.cg.v4.s32 {%8, %9, %10, %11}, [%18];\n\t"
                 "ld.global.cg.v4.s32 {%12, %13, %14, %15}, [%19];"
                 : "=r"(v[0].x), "=r"(v[0].y), "=r"(v[0].z), "=r"(v[0].w), "=r"(v[1].x), "=r"(v[1].y), "=r"(v[1].z),
                   "=r"(v[1].w), "=r"(v[2].x), "=r"(v[2].y), "=r"(v[2].z), "=r"(v[2].w), "=r"(v[3].x), "=r"(v[3].y),
                   "=r"(v[3].z), "=r"(v[3].w)
                 : "l"(p), "l"(p + stride), "l"(p + 2 * stride), "l"(p + 3 * stride));
}

// One 16-byte L2 load predicated on `i < n`: past the end it loads nothing and returns zeros, without a branch.
__device__ __forceinline__ int4 rl_load_l2_if(const int4 *src, rl_u64 i, rl_u64 n) {
    int4 v = make_int4(0, 0, 0, 0);
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.lt.u64 p, %5, %6;\n"
                 "@p ld.global.cg.v4.s32 {%0, %1, %2, %3}, [%4];\n"
                 "}\n"
                 : "+r"(v.x), "+r"(v.y), "+r"(v.z), "+r"(v.w)
                 : "l"(src + i), "l"(i), "l"(n));
    return v;
}

// Read the first `n` 16-byte words of `src` `passes` times. The caller keeps 16 * n well below the L2 size and
// makes n a multiple of RL_L2_LOADS * threads, so that every thread loads the same number of words in full
// trips of RL_L2_LOADS loads in flight. For any other n, the last, partial trip of a thread uses predicated
// loads, still independent of each other (no remainder loop of dependent loads). Bytes per launch:
// 16 * n * passes.
extern "C" __global__ void rl_l2_read(const int4 *__restrict__ src, rl_u64 n, int passes, int *__restrict__ sink,
                                      int sentinel) {
    RL_CLOCK_BEGIN
    const rl_u64 stride = (rl_u64)gridDim.x * blockDim.x;
    const rl_u64 first = (rl_u64)blockIdx.x * blockDim.x + threadIdx.x;
    int acc = 0;
    for (int p = 0; p < passes; ++p) {
        rl_u64 i = first;
        for (; i + (RL_L2_LOADS - 1) * stride < n; i += RL_L2_LOADS * stride) {
            int4 v[RL_L2_LOADS];
            rl_load_l2_x4(v, src + i, stride);
            int folded = rl_fold(v[0]);
#pragma unroll
            for (int u = 1; u < RL_L2_LOADS; ++u) {
                folded ^= rl_fold(v[u]);
            }
            acc ^= folded;
        }
        if (i < n) {
            int4 v[RL_L2_LOADS];
#pragma unroll
            for (int u = 0; u < RL_L2_LOADS; ++u) {
                v[u] = rl_load_l2_if(src, i + u * stride, n);
            }
#pragma unroll
            for (int u = 0; u < RL_L2_LOADS; ++u) {
                acc ^= rl_fold(v[u]);
            }
        }
    }
    if (acc == sentinel) {
        sink[threadIdx.x & 31] = acc;
    }
    RL_CLOCK_END
}
