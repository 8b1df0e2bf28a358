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
//   rl_l2_read   16 * n * passes   (a working set well inside L2, read `passes` times)
//
// The read kernels fold what they load into one value per thread and store it only when it equals `sentinel`,
// a value the caller picks so that the store (practically) never happens; the compiler cannot tell, so it must
// perform every load. If the store does happen it lands in a small `sink` buffer and changes nothing else.

#ifndef RL_BW_UNROLL
#define RL_BW_UNROLL 4
#endif

typedef unsigned long long rl_u64;

__device__ __forceinline__ int rl_fold(int4 v) { return v.x ^ v.y ^ v.z ^ v.w; }

// Read `n` 16-byte words of `src`.
extern "C" __global__ void rl_bw_read(const int4 *__restrict__ src, rl_u64 n, int *__restrict__ sink, int sentinel) {
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
}

// Write `n` 16-byte words of `dst` (values derived from `value` and the index, never read back for timing).
extern "C" __global__ void rl_bw_write(int4 *__restrict__ dst, rl_u64 n, int value) {
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
}

// Copy `n` 16-byte words from `src` to `dst` (distinct buffers).
extern "C" __global__ void rl_bw_copy(const int4 *__restrict__ src, int4 *__restrict__ dst, rl_u64 n) {
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
}

// 16-byte load cached in L2 only (ld.global.cg), so repeated passes measure L2 rather than each SM's L1.
// `volatile` keeps the compiler from hoisting the same load out of the pass loop.
__device__ __forceinline__ int4 rl_load_l2(const int4 *p) {
    int4 v;
    asm volatile("ld.global.cg.v4.s32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

// Read the first `n` 16-byte words of `src` `passes` times; the caller keeps 16 * n well below the L2 size.
extern "C" __global__ void rl_l2_read(const int4 *__restrict__ src, rl_u64 n, int passes, int *__restrict__ sink,
                                      int sentinel) {
    const rl_u64 stride = (rl_u64)gridDim.x * blockDim.x;
    const rl_u64 first = (rl_u64)blockIdx.x * blockDim.x + threadIdx.x;
    int acc = 0;
    for (int p = 0; p < passes; ++p) {
        rl_u64 i = first;
        for (; i + (RL_BW_UNROLL - 1) * stride < n; i += RL_BW_UNROLL * stride) {
            int4 v[RL_BW_UNROLL];
#pragma unroll
            for (int u = 0; u < RL_BW_UNROLL; ++u) {
                v[u] = rl_load_l2(src + i + u * stride);
            }
#pragma unroll
            for (int u = 0; u < RL_BW_UNROLL; ++u) {
                acc ^= rl_fold(v[u]);
            }
        }
        for (; i < n; i += stride) {
            acc ^= rl_fold(rl_load_l2(src + i));
        }
    }
    if (acc == sentinel) {
        sink[threadIdx.x & 31] = acc;
    }
}
