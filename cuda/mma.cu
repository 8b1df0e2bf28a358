// Tensor-core throughput with warp-level mma.sync (inline PTX), one kernel per input type.
//
// Compiled at run time by NVRTC (roofline/_gpu.py); needs no CUDA header, only rl_device.cuh (the operand
// generators, the SM clock). Every warp holds RL_MMA_SETS distinct
// A fragments and RL_MMA_SETS distinct B fragments in registers and RL_MMA_CHAINS independent accumulator
// fragments, and issues RL_MMA_CHAINS mma.sync per loop iteration, one into each accumulator, so that many
// matrix instructions are in flight per warp and their latency is hidden:
//
//   kernel         instruction                                         FLOPs per mma.sync (2*m*n*k)
//   rl_mma_f16     mma.sync.m16n8k16.row.col.f32.f16.f16.f32           2*16*8*16 = 4096
//   rl_mma_bf16    mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32         4096
//   rl_mma_tf32    mma.sync.m16n8k8.row.col.f32.tf32.tf32.f32          2*16*8*8  = 2048
//   rl_mma_s8      mma.sync.m16n8k32.row.col.s32.s8.s8.s32             2*16*8*32 = 8192 (integer ops)
//   rl_mma_e4m3    mma.sync.m16n8k32.row.col.f32.e4m3.e4m3.f32         8192 (sm_89 and sm_12x only)
//
// Work per launch: warps * iters * RL_MMA_CHAINS * (FLOPs per mma.sync), with warps = grid * block / 32.
//
// Operands. The fragments hold finite random values of the input type (drawn from a hash of the thread index,
// the set number and `seed`), not zeros, and they change from one instruction to the next: accumulator chain c
// multiplies A set c % RL_MMA_SETS by B set (c + c / RL_MMA_SETS) % RL_MMA_SETS, so the RL_MMA_CHAINS
// instructions of an iteration use RL_MMA_CHAINS different (A, B) pairs. Tensor cores draw less power on zeros
// or on operands that stay the same, and can then hold higher clocks than on real data, which would make the
// measured ceiling optimistic.
//
// Two modes, chosen by `check`:
//   0  (timing) the accumulators are summed and stored only when the sum equals `sentinel`, which keeps the
//      work alive without a store per thread;
//   1  (result check) every A and B element is 1, and block 0 stores all of its accumulators:
//      sink[(thread * RL_MMA_CHAINS + c) * 4 + j] = INIT(c, j) + iters * K, since each mma.sync adds the k-long
//      dot product of ones, K, to every element. INIT(c, j) = 0.125 * (4c + j) (float) or 4c + j (int32).
//      The host compares, which shows that the instruction runs and that K, the count the FLOPs use, is right.
//
// These kernels need sm_80; for an older target the body is empty and the benchmark registry never launches
// them. The fp8 kernel is built only where the hardware runs e4m3 mma.sync natively (QMMA in the machine code:
// sm_89 and sm_12x). On sm_90 and sm_100 the compiler emulates it with a conversion to fp16, an fp16 HMMA into
// a zero accumulator and one FADD per accumulator element, and then shares the product between accumulators,
// so timing it would measure FADDs, not fp8 tensor throughput. On Hopper (sm_90) mma.sync does not reach the
// tensor cores' full rate for any type: see wgmma.cu.
//
// SM clock: RL_CLOCK_BEGIN / RL_CLOCK_END of rl_device.cuh (the shared helpers) measure it in block 0.

#ifndef RL_MMA_CHAINS
#define RL_MMA_CHAINS 8
#endif
#ifndef RL_MMA_SETS
#define RL_MMA_SETS 4
#endif

#include "rl_device.cuh"

// One kernel per type. ACC is the accumulator type, CONS its asm constraint, INIT(c, j) an accumulator's
// starting value, BITS the fragment generator, ONE the word of ones, MMA the PTX instruction.
#define RL_MMA_KERNEL(NAME, ACC, CONS, INIT, BITS, ONE, MMA)                                                      \
    extern "C" __global__ void NAME(ACC *sink, int iters, unsigned seed, ACC sentinel, int check) {              \
        RL_CLOCK_BEGIN                                                                                             \
        const unsigned lane = (blockIdx.x * blockDim.x + threadIdx.x) * (6U * RL_MMA_SETS) + seed;                 \
        unsigned a[RL_MMA_SETS][4], b[RL_MMA_SETS][2];                                                             \
        _Pragma("unroll") for (int s = 0; s < RL_MMA_SETS; ++s) {                                                  \
            _Pragma("unroll") for (int j = 0; j < 4; ++j) {                                                        \
                a[s][j] = check ? ONE : BITS(rl_hash(lane + 6U * s + j));                                          \
            }                                                                                                      \
            _Pragma("unroll") for (int j = 0; j < 2; ++j) {                                                        \
                b[s][j] = check ? ONE : BITS(rl_hash(lane + 6U * s + 4U + j));                                     \
            }                                                                                                      \
        }                                                                                                          \
        ACC d[RL_MMA_CHAINS][4];                                                                                   \
        _Pragma("unroll") for (int c = 0; c < RL_MMA_CHAINS; ++c) {                                                \
            _Pragma("unroll") for (int j = 0; j < 4; ++j) { d[c][j] = INIT(c, j); }                                \
        }                                                                                                          \
        _Pragma("unroll 1") for (int it = 0; it < iters; ++it) {                                                   \
            _Pragma("unroll") for (int c = 0; c < RL_MMA_CHAINS; ++c) {                                            \
                const int sa = c % RL_MMA_SETS, sb = (c + c / RL_MMA_SETS) % RL_MMA_SETS;                          \
                asm volatile(MMA " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"                \
                             : CONS(d[c][0]), CONS(d[c][1]), CONS(d[c][2]), CONS(d[c][3])                          \
                             : "r"(a[sa][0]), "r"(a[sa][1]), "r"(a[sa][2]), "r"(a[sa][3]), "r"(b[sb][0]),          \
                               "r"(b[sb][1]));                                                                     \
            }                                                                                                      \
        }                                                                                                          \
        if (check) {                                                                                               \
            if (blockIdx.x == 0) {                                                                                 \
                _Pragma("unroll") for (int c = 0; c < RL_MMA_CHAINS; ++c) {                                        \
                    _Pragma("unroll") for (int j = 0; j < 4; ++j) {                                                \
                        sink[(threadIdx.x * RL_MMA_CHAINS + c) * 4 + j] = d[c][j];                                 \
                    }                                                                                              \
                }                                                                                                  \
            }                                                                                                      \
        } else {                                                                                                   \
            ACC s = 0;                                                                                             \
            _Pragma("unroll") for (int c = 0; c < RL_MMA_CHAINS; ++c) {                                            \
                s += d[c][0] + d[c][1] + d[c][2] + d[c][3];                                                        \
            }                                                                                                      \
            if (s == sentinel) {                                                                                   \
                sink[threadIdx.x & 31] = s;                                                                        \
            }                                                                                                      \
        }                                                                                                          \
        RL_CLOCK_END                                                                                               \
    }

#define RL_INIT_F(c, j) (0.125f * (float)((c) * 4 + (j)))
#define RL_INIT_S(c, j) ((int)((c) * 4 + (j)))

// The asm text is only legal for targets that have the instruction, so each kernel is compiled out below its
// minimum architecture (NVRTC and nvcc both define __CUDA_ARCH__ while compiling device code).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
RL_MMA_KERNEL(rl_mma_f16, float, RL_CONS_F, RL_INIT_F, rl_bits_f16, RL_ONE_F16,
              "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
RL_MMA_KERNEL(rl_mma_bf16, float, RL_CONS_F, RL_INIT_F, rl_bits_bf16, RL_ONE_BF16,
              "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32")
RL_MMA_KERNEL(rl_mma_tf32, float, RL_CONS_F, RL_INIT_F, rl_bits_tf32, RL_ONE_TF32,
              "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32")
RL_MMA_KERNEL(rl_mma_s8, int, RL_CONS_R, RL_INIT_S, rl_bits_s8, RL_ONE_S8,
              "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32")
#else
extern "C" __global__ void rl_mma_f16(float *, int, unsigned, float, int) {}
extern "C" __global__ void rl_mma_bf16(float *, int, unsigned, float, int) {}
extern "C" __global__ void rl_mma_tf32(float *, int, unsigned, float, int) {}
extern "C" __global__ void rl_mma_s8(int *, int, unsigned, int, int) {}
#endif

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 890 || __CUDA_ARCH__ >= 1200)
RL_MMA_KERNEL(rl_mma_e4m3, float, RL_CONS_F, RL_INIT_F, rl_bits_e4m3, RL_ONE_E4M3,
              "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32")
#else
extern "C" __global__ void rl_mma_e4m3(float *, int, unsigned, float, int) {}
#endif
