// Tensor-core throughput with warp-level mma.sync (inline PTX), one kernel per input type.
//
// Compiled at run time by NVRTC (roofline/_gpu.py); needs no CUDA header. Every warp holds one A and one B
// fragment in registers and RL_MMA_CHAINS independent accumulator fragments, and issues RL_MMA_CHAINS
// mma.sync per loop iteration, one into each accumulator, so that many matrix instructions are in flight per
// warp and their latency is hidden:
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
// The fragments hold finite random values of the input type (drawn from a hash of the thread index and `seed`),
// not zeros: tensor cores draw less power on zeros and can then run at higher clocks than on real data. The
// accumulators are summed and stored only when the sum equals `sentinel`, which keeps the work alive.
//
// These kernels need sm_80; for an older target the body is empty and the benchmark registry never launches
// them. The fp8 kernel is built only where the hardware runs e4m3 mma.sync natively (QMMA in the machine code:
// sm_89 and sm_12x). On sm_90 and sm_100 the compiler emulates it with a conversion to fp16, an fp16 HMMA into
// a zero accumulator and one FADD per accumulator element, and then shares the product between accumulators,
// so timing it would measure FADDs, not fp8 tensor throughput. On Hopper (sm_90) mma.sync does not reach the
// tensor cores' full rate for any type: see wgmma.cu.

#ifndef RL_MMA_CHAINS
#define RL_MMA_CHAINS 8
#endif

__device__ __forceinline__ unsigned rl_hash(unsigned x) {
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

// 32 random bits turned into finite values of magnitude in [0.5, 1) with random signs, per input type.
// fp16: sign | exponent 01110 | 10 random mantissa bits, two per word.
__device__ __forceinline__ unsigned rl_bits_f16(unsigned h) { return (h & 0x83ff83ffU) | 0x38003800U; }
// bf16: sign | exponent 01111110 | 7 random mantissa bits, two per word.
__device__ __forceinline__ unsigned rl_bits_bf16(unsigned h) { return (h & 0x807f807fU) | 0x3f003f00U; }
// tf32 (an fp32 word whose low 13 mantissa bits are ignored): exponent 01111110.
__device__ __forceinline__ unsigned rl_bits_tf32(unsigned h) { return (h & 0x807fe000U) | 0x3f000000U; }
// int8: any byte.
__device__ __forceinline__ unsigned rl_bits_s8(unsigned h) { return h; }
// fp8 e4m3: sign | exponent 0110 | 3 random mantissa bits, four per word (never the NaN pattern S.1111.111).
__device__ __forceinline__ unsigned rl_bits_e4m3(unsigned h) { return (h & 0x87878787U) | 0x30303030U; }

// One kernel per type. ACC is the accumulator type, CONS its asm constraint, INIT(k, j) an accumulator's
// starting value, BITS the fragment generator, MMA the PTX instruction.
#define RL_MMA_KERNEL(NAME, ACC, CONS, INIT, BITS, MMA)                                                           \
    extern "C" __global__ void NAME(ACC *sink, int iters, unsigned seed, ACC sentinel) {                         \
        {                                                                                                          \
            const unsigned lane = (blockIdx.x * blockDim.x + threadIdx.x) * 8U + seed;                             \
            const unsigned a0 = BITS(rl_hash(lane + 0U)), a1 = BITS(rl_hash(lane + 1U));                           \
            const unsigned a2 = BITS(rl_hash(lane + 2U)), a3 = BITS(rl_hash(lane + 3U));                           \
            const unsigned b0 = BITS(rl_hash(lane + 4U)), b1 = BITS(rl_hash(lane + 5U));                           \
            ACC d[RL_MMA_CHAINS][4];                                                                               \
            _Pragma("unroll") for (int k = 0; k < RL_MMA_CHAINS; ++k) {                                            \
                _Pragma("unroll") for (int j = 0; j < 4; ++j) { d[k][j] = INIT(k, j); }                            \
            }                                                                                                      \
            _Pragma("unroll 1") for (int it = 0; it < iters; ++it) {                                               \
                _Pragma("unroll") for (int k = 0; k < RL_MMA_CHAINS; ++k) {                                        \
                    asm volatile(MMA " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"            \
                                 : CONS(d[k][0]), CONS(d[k][1]), CONS(d[k][2]), CONS(d[k][3])                      \
                                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));                          \
                }                                                                                                  \
            }                                                                                                      \
            ACC s = 0;                                                                                             \
            _Pragma("unroll") for (int k = 0; k < RL_MMA_CHAINS; ++k) {                                            \
                s += d[k][0] + d[k][1] + d[k][2] + d[k][3];                                                        \
            }                                                                                                      \
            if (s == sentinel) {                                                                                   \
                sink[threadIdx.x & 31] = s;                                                                        \
            }                                                                                                      \
        }                                                                                                          \
    }

#define RL_CONS_F(x) "+f"(x)
#define RL_CONS_R(x) "+r"(x)
#define RL_INIT_F(k, j) (0.125f * (float)((k) * 4 + (j)))
#define RL_INIT_S(k, j) ((int)((k) * 4 + (j)))

// The asm text is only legal for targets that have the instruction, so each kernel is compiled out below its
// minimum architecture (NVRTC and nvcc both define __CUDA_ARCH__ while compiling device code).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
RL_MMA_KERNEL(rl_mma_f16, float, RL_CONS_F, RL_INIT_F, rl_bits_f16,
              "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
RL_MMA_KERNEL(rl_mma_bf16, float, RL_CONS_F, RL_INIT_F, rl_bits_bf16,
              "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32")
RL_MMA_KERNEL(rl_mma_tf32, float, RL_CONS_F, RL_INIT_F, rl_bits_tf32,
              "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32")
RL_MMA_KERNEL(rl_mma_s8, int, RL_CONS_R, RL_INIT_S, rl_bits_s8, "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32")
#else
extern "C" __global__ void rl_mma_f16(float *, int, unsigned, float) {}
extern "C" __global__ void rl_mma_bf16(float *, int, unsigned, float) {}
extern "C" __global__ void rl_mma_tf32(float *, int, unsigned, float) {}
extern "C" __global__ void rl_mma_s8(int *, int, unsigned, int) {}
#endif

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 890 || __CUDA_ARCH__ >= 1200)
RL_MMA_KERNEL(rl_mma_e4m3, float, RL_CONS_F, RL_INIT_F, rl_bits_e4m3,
              "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32")
#else
extern "C" __global__ void rl_mma_e4m3(float *, int, unsigned, float) {}
#endif
