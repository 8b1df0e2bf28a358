// Vector (non-tensor-core) fused multiply-add throughput: fp64, fp32, fp16x2 and bf16x2.
//
// Compiled at run time by NVRTC (roofline/_gpu.py); needs no CUDA header: the packed half-precision FMAs are
// written as PTX (fma.rn.f16x2 / fma.rn.bf16x2, sm_80+), which is what __hfma2 from cuda_fp16.h / cuda_bf16.h
// compiles to.
//
// Each thread keeps RL_FMA_CHAINS independent accumulators, so that several FMAs are in flight per thread and
// the pipeline latency is hidden, and updates every one of them RL_FMA_UNROLL times per loop iteration (the
// iteration loop itself is not unrolled further: `#pragma unroll 1`). With 8 x 64 = 512 FMAs per trip the
// loop's own counter, compare and branch cost under 1% of the issue slots (at 8 x 16 they capped FFMA near
// 97.7% of the peak):
//     a[k] = a[k] * mul + add
// `mul` and `add` are kernel arguments (the caller passes 0.999 and 0.001, so values stay finite and never
// denormal), so nothing can be folded at compile time, and the chain a -> a*m+c cannot be collapsed without
// reassociating floating-point arithmetic, which the compiler does not do.
//
// Work per launch, for the caller to divide by the kernel time (threads = grid * block):
//   FMAs  = threads * iters * RL_FMA_UNROLL * RL_FMA_CHAINS * lanes   (lanes: 1 for fp64/fp32, 2 for x2 types)
//   FLOPs = 2 * FMAs                                                   (an FMA is a multiply and an add)
//
// The accumulators are summed and stored only when the sum equals `sentinel` (the caller passes a value the sum
// cannot reach), which keeps the compiler from discarding the work.
//
// SM clock: RL_CLOCK_BEGIN / RL_CLOCK_END of rl_device.cuh (the shared helpers) measure it in block 0.

#ifndef RL_FMA_CHAINS
#define RL_FMA_CHAINS 8
#endif
#ifndef RL_FMA_UNROLL
#define RL_FMA_UNROLL 64
#endif

#include "rl_device.cuh"

// Packed half-precision helpers (32-bit registers holding two 16-bit values).
__device__ __forceinline__ unsigned rl_f16x2_from(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

__device__ __forceinline__ unsigned rl_bf16x2_from(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

__device__ __forceinline__ unsigned rl_hfma2_f16(unsigned a, unsigned b, unsigned c) {
    unsigned d;
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

__device__ __forceinline__ unsigned rl_hfma2_bf16(unsigned a, unsigned b, unsigned c) {
    unsigned d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

// Starting value of accumulator k of this thread: distinct, small, positive.
__device__ __forceinline__ float rl_seed(int k) { return 1e-3f * (float)((threadIdx.x + 7 * k) & 255) + 0.25f; }

extern "C" __global__ void rl_fma_f64(double *sink, int iters, double mul, double add, double sentinel) {
    RL_CLOCK_BEGIN
    double a[RL_FMA_CHAINS];
#pragma unroll
    for (int k = 0; k < RL_FMA_CHAINS; ++k) {
        a[k] = (double)rl_seed(k);
    }
#pragma unroll 1
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int u = 0; u < RL_FMA_UNROLL; ++u) {
#pragma unroll
            for (int k = 0; k < RL_FMA_CHAINS; ++k) {
                a[k] = __fma_rn(a[k], mul, add);
            }
        }
    }
    double s = 0.0;
#pragma unroll
    for (int k = 0; k < RL_FMA_CHAINS; ++k) {
        s += a[k];
    }
    if (s == sentinel) {
        sink[threadIdx.x & 31] = s;
    }
    RL_CLOCK_END
}

extern "C" __global__ void rl_fma_f32(float *sink, int iters, float mul, float add, float sentinel) {
    RL_CLOCK_BEGIN
    float a[RL_FMA_CHAINS];
#pragma unroll
    for (int k = 0; k < RL_FMA_CHAINS; ++k) {
        a[k] = rl_seed(k);
    }
#pragma unroll 1
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int u = 0; u < RL_FMA_UNROLL; ++u) {
#pragma unroll
            for (int k = 0; k < RL_FMA_CHAINS; ++k) {
                a[k] = __fmaf_rn(a[k], mul, add);
            }
        }
    }
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < RL_FMA_CHAINS; ++k) {
        s += a[k];
    }
    if (s == sentinel) {
        sink[threadIdx.x & 31] = s;
    }
    RL_CLOCK_END
}

// One kernel body for both packed 16-bit types: PACK converts two floats, FMA2 is the packed FMA.
#define RL_FMA_X2_KERNEL(NAME, PACK, FMA2)                                                                           \
    extern "C" __global__ void NAME(unsigned *sink, int iters, float mul, float add, unsigned sentinel) {          \
        RL_CLOCK_BEGIN                                                                                             \
        unsigned a[RL_FMA_CHAINS];                                                                                 \
        const unsigned m = PACK(mul, mul);                                                                         \
        const unsigned c = PACK(add, add);                                                                         \
        _Pragma("unroll") for (int k = 0; k < RL_FMA_CHAINS; ++k) { a[k] = PACK(rl_seed(k), rl_seed(k + 1)); }     \
        _Pragma("unroll 1") for (int it = 0; it < iters; ++it) {                                                   \
            _Pragma("unroll") for (int u = 0; u < RL_FMA_UNROLL; ++u) {                                            \
                _Pragma("unroll") for (int k = 0; k < RL_FMA_CHAINS; ++k) { a[k] = FMA2(a[k], m, c); }             \
            }                                                                                                      \
        }                                                                                                          \
        unsigned s = 0;                                                                                            \
        _Pragma("unroll") for (int k = 0; k < RL_FMA_CHAINS; ++k) { s ^= a[k]; }                                   \
        if (s == sentinel) {                                                                                       \
            sink[threadIdx.x & 31] = s;                                                                            \
        }                                                                                                          \
        RL_CLOCK_END                                                                                               \
    }

// The packed conversions and FMAs are sm_80 PTX: below that the kernels compile to empty stubs (their benchmarks
// are filtered out by the registry), so the fp32 / fp64 kernels of this file still build for sm_75.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
RL_FMA_X2_KERNEL(rl_fma_f16x2, rl_f16x2_from, rl_hfma2_f16)
RL_FMA_X2_KERNEL(rl_fma_bf16x2, rl_bf16x2_from, rl_hfma2_bf16)
#else
extern "C" __global__ void rl_fma_f16x2(unsigned *, int, float, float, unsigned) {}
extern "C" __global__ void rl_fma_bf16x2(unsigned *, int, float, float, unsigned) {}
#endif
