// Hopper tensor-core throughput with warpgroup-level wgmma.mma_async (inline PTX), one kernel per input type.
//
// On Hopper (sm_90) the tensor cores reach their full rate only through wgmma; warp-level mma.sync (mma.cu)
// stops well short of it. wgmma exists only in the architecture-specific target sm_90a, so roofline/_gpu.py
// compiles this file with -arch=sm_90a and runs it only on compute capability 9.0. For any other target the
// kernels below have empty bodies (the registry never launches them).
//
// Each block has RL_WGMMA_THREADS threads (two warpgroups of 128). Both operands are read from shared memory
// through matrix descriptors: an A operand is a 64 x K tile and a B operand an N x K tile (N = 256), each row
// holding 32 bytes of K (K = 16 for fp16/bf16, 8 for tf32, 32 for fp8/int8). Shared memory holds RL_WGMMA_TILES
// distinct A tiles and RL_WGMMA_TILES distinct B tiles of finite random values of the input type, and wgmma
// number u of a loop iteration reads A tile u % RL_WGMMA_TILES and B tile (u + u / RL_WGMMA_TILES) %
// RL_WGMMA_TILES, so consecutive instructions never see the same operands (tensor cores run cooler, and can
// clock higher, on data that does not change). Every warpgroup keeps one 64 x 256 accumulator tile in registers
// (128 per thread) and issues RL_WGMMA_UNROLL wgmma per loop iteration into it, then commits them as one group
// and waits until at most one group is still pending, so one group always queues behind the one executing:
//
//   kernel          instruction (m64n256k*, A and B from shared memory)     FLOPs per wgmma (2*64*256*K)
//   rl_wgmma_f16    wgmma.mma_async.m64n256k16.f32.f16.f16                  524288
//   rl_wgmma_bf16   wgmma.mma_async.m64n256k16.f32.bf16.bf16                524288
//   rl_wgmma_tf32   wgmma.mma_async.m64n256k8.f32.tf32.tf32                 262144
//   rl_wgmma_e4m3   wgmma.mma_async.m64n256k32.f32.e4m3.e4m3                1048576
//   rl_wgmma_s8     wgmma.mma_async.m64n256k32.s32.s8.s8                    1048576 (integer ops)
//
// Work per launch: warpgroups * iters * RL_WGMMA_UNROLL * (FLOPs per wgmma), warpgroups = grid * threads / 128.
//
// Shared-memory layout (no swizzle, K-major): an operand is made of 8-row x 16-byte "core matrices", each
// stored as 128 contiguous bytes. Core matrix (r, k) of an operand, r counting groups of 8 rows and k the two
// 16-byte halves of a 32-byte row, sits at byte (2 * r + k) * 128 from the tile's start: the leading-dimension
// byte offset (between neighbours along K) is 128 and the stride-dimension byte offset (between groups of 8
// rows) is 256. The A tiles come first (RL_A_BYTES each), then the B tiles (RL_B_BYTES each).
//
// Two modes, chosen by `check`:
//   0  (timing) the data are random, so the arithmetic result is meaningless; the accumulators are summed and
//      stored only when the sum equals `sentinel`, which keeps the work alive;
//   1  (result check) every A and B element is 1 and block 0 stores all of its accumulators:
//      sink[thread * 128 + i] = (i & 15) + iters * RL_WGMMA_UNROLL * K, since each wgmma adds the k-long dot
//      product of ones, K, to every element of D. The host compares: this shows that the instruction runs,
//      that it writes every accumulator, and that K, the count the FLOPs use, is right.
//
// SM clock: RL_CLOCK_BEGIN / RL_CLOCK_END of rl_device.cuh (the shared helpers) measure it in block 0.

#ifndef RL_WGMMA_UNROLL
#define RL_WGMMA_UNROLL 16
#endif
#ifndef RL_WGMMA_THREADS
#define RL_WGMMA_THREADS 256
#endif
#ifndef RL_WGMMA_TILES
#define RL_WGMMA_TILES 4
#endif

#define RL_A_BYTES (64 * 32)
#define RL_B_BYTES (256 * 32)
#define RL_SMEM_WORDS (RL_WGMMA_TILES * (RL_A_BYTES + RL_B_BYTES) / 4)

#include "rl_device.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)

// Shared-memory matrix descriptor: bits 0-13 start address >> 4, bits 16-29 leading-dimension byte offset >> 4,
// bits 32-45 stride-dimension byte offset >> 4, bits 49-51 base offset (0), bits 62-63 swizzle mode (0: none).
__device__ __forceinline__ unsigned long long rl_smem_desc(unsigned address) {
    const unsigned long long lbo = 128, sbo = 256;
    return (unsigned long long)((address & 0x3FFFFU) >> 4) | ((lbo >> 4) << 16) | ((sbo >> 4) << 32);
}

__device__ __forceinline__ void rl_wgmma_fence(void) { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void rl_wgmma_commit(void) {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void rl_wgmma_wait1(void) { asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory"); }
__device__ __forceinline__ void rl_wgmma_wait0(void) { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }

// Operand lists of the 128 accumulator registers.
#define RL_D8(C, i) C(d[i]), C(d[i + 1]), C(d[i + 2]), C(d[i + 3]), C(d[i + 4]), C(d[i + 5]), C(d[i + 6]), C(d[i + 7])
#define RL_D128(C)                                                                                                 \
    RL_D8(C, 0), RL_D8(C, 8), RL_D8(C, 16), RL_D8(C, 24), RL_D8(C, 32), RL_D8(C, 40), RL_D8(C, 48), RL_D8(C, 56),  \
        RL_D8(C, 64), RL_D8(C, 72), RL_D8(C, 80), RL_D8(C, 88), RL_D8(C, 96), RL_D8(C, 104), RL_D8(C, 112),        \
        RL_D8(C, 120)
#define RL_REGS128                                                                                                 \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                     \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                            \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                            \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "                            \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "                            \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "                            \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "                \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"

#define RL_KEEP_F(x) asm volatile("" : "+f"(x)::"memory")
#define RL_KEEP_R(x) asm volatile("" : "+r"(x)::"memory")

// One kernel per type. ACC/CONS/KEEP: accumulator type, its asm constraint and an empty asm that pins it (so the
// compiler moves no accumulator access across the wgmma fences); BITS fills shared memory and ONE is a word of
// ones; INSTR is the instruction and TAIL its immediate operands after scale-d (scale-a, scale-b and, for 16-bit
// types, the two transpose flags, all plain: 1, 1, 0, 0).
#define RL_WGMMA_KERNEL(NAME, ACC, CONS, KEEP, BITS, ONE, INSTR, TAIL)                                            \
    extern "C" __global__ void __launch_bounds__(RL_WGMMA_THREADS, 1)                                              \
        NAME(ACC *sink, int iters, unsigned seed, ACC sentinel, int check) {                                       \
        RL_CLOCK_BEGIN                                                                                             \
        __shared__ __align__(1024) unsigned smem[RL_SMEM_WORDS];                                                   \
        for (unsigned i = threadIdx.x; i < RL_SMEM_WORDS; i += blockDim.x) {                                       \
            smem[i] = check ? ONE : BITS(rl_hash(i * 2654435761U + seed + blockIdx.x));                            \
        }                                                                                                          \
        /* Ordinary stores become visible to the tensor cores (the async proxy) only after this fence. */          \
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");                                               \
        __syncthreads();                                                                                           \
        const unsigned base = (unsigned)__cvta_generic_to_shared(smem);                                            \
        unsigned long long desc_a[RL_WGMMA_TILES], desc_b[RL_WGMMA_TILES];                                         \
        _Pragma("unroll") for (int t = 0; t < RL_WGMMA_TILES; ++t) {                                               \
            desc_a[t] = rl_smem_desc(base + t * RL_A_BYTES);                                                       \
            desc_b[t] = rl_smem_desc(base + RL_WGMMA_TILES * RL_A_BYTES + t * RL_B_BYTES);                         \
        }                                                                                                          \
        ACC d[128];                                                                                                \
        _Pragma("unroll") for (int i = 0; i < 128; ++i) {                                                          \
            d[i] = (ACC)(i & 15);                                                                                  \
            KEEP(d[i]);                                                                                            \
        }                                                                                                          \
        _Pragma("unroll 1") for (int it = 0; it < iters; ++it) {                                                   \
            rl_wgmma_fence();                                                                                      \
            _Pragma("unroll") for (int u = 0; u < RL_WGMMA_UNROLL; ++u) {                                          \
                const int ta = u % RL_WGMMA_TILES, tb = (u + u / RL_WGMMA_TILES) % RL_WGMMA_TILES;                 \
                asm volatile("{\n"                                                                                 \
                             ".reg .pred p;\n"                                                                     \
                             "setp.ne.b32 p, %130, 0;\n" INSTR " " RL_REGS128 ", %128, %129, p" TAIL ";\n"         \
                             "}\n"                                                                                 \
                             : RL_D128(CONS)                                                                       \
                             : "l"(desc_a[ta]), "l"(desc_b[tb]), "r"(1));                                          \
            }                                                                                                      \
            rl_wgmma_commit();                                                                                     \
            rl_wgmma_wait1();                                                                                      \
        }                                                                                                          \
        rl_wgmma_wait0();                                                                                          \
        if (check) {                                                                                               \
            if (blockIdx.x == 0) {                                                                                 \
                _Pragma("unroll") for (int i = 0; i < 128; ++i) {                                                  \
                    KEEP(d[i]);                                                                                    \
                    sink[threadIdx.x * 128 + i] = d[i];                                                            \
                }                                                                                                  \
            }                                                                                                      \
        } else {                                                                                                   \
            ACC s = 0;                                                                                             \
            _Pragma("unroll") for (int i = 0; i < 128; ++i) {                                                      \
                KEEP(d[i]);                                                                                        \
                s += d[i];                                                                                         \
            }                                                                                                      \
            if (s == sentinel) {                                                                                   \
                sink[threadIdx.x & 31] = s;                                                                        \
            }                                                                                                      \
        }                                                                                                          \
        RL_CLOCK_END                                                                                               \
    }

RL_WGMMA_KERNEL(rl_wgmma_f16, float, RL_CONS_F, RL_KEEP_F, rl_bits_f16, RL_ONE_F16,
                "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16", ", 1, 1, 0, 0")
RL_WGMMA_KERNEL(rl_wgmma_bf16, float, RL_CONS_F, RL_KEEP_F, rl_bits_bf16, RL_ONE_BF16,
                "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16", ", 1, 1, 0, 0")
RL_WGMMA_KERNEL(rl_wgmma_tf32, float, RL_CONS_F, RL_KEEP_F, rl_bits_tf32, RL_ONE_TF32,
                "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32", ", 1, 1")
RL_WGMMA_KERNEL(rl_wgmma_e4m3, float, RL_CONS_F, RL_KEEP_F, rl_bits_e4m3, RL_ONE_E4M3,
                "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3", ", 1, 1")
RL_WGMMA_KERNEL(rl_wgmma_s8, int, RL_CONS_R, RL_KEEP_R, rl_bits_s8, RL_ONE_S8,
                "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8", "")

#else

extern "C" __global__ void rl_wgmma_f16(float *, int, unsigned, float, int) {}
extern "C" __global__ void rl_wgmma_bf16(float *, int, unsigned, float, int) {}
extern "C" __global__ void rl_wgmma_tf32(float *, int, unsigned, float, int) {}
extern "C" __global__ void rl_wgmma_e4m3(float *, int, unsigned, float, int) {}
extern "C" __global__ void rl_wgmma_s8(int *, int, unsigned, int, int) {}

#endif
