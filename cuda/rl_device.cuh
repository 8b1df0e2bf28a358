// Device helpers shared by the kernel sources (bandwidth.cu, fma.cu, mma.cu, wgmma.cu).
//
// NVRTC compiles each source from memory: roofline/_gpu.py passes this file to every compile as a header named
// "rl_device.cuh" (nvrtcCreateProgram's headers), and the cubin cache key includes its text, so editing it
// recompiles every kernel. It defines only inline functions, macros and one small __device__ array: any source
// may include it whatever its target architecture.

#ifndef RL_DEVICE_CUH
#define RL_DEVICE_CUH

typedef unsigned long long rl_u64;

// ---- SM clock -------------------------------------------------------------------------------------------------
// Block 0's first thread adds the SM cycles (%clock64) and nanoseconds (%globaltimer) it spent in the kernel to
// `rl_clock`, which the host zeroes before the timed launches and reads back after them: cycles / nanoseconds is
// the average SM clock of those launches. A kernel opens with RL_CLOCK_BEGIN and ends with RL_CLOCK_END.

__device__ rl_u64 rl_clock[2];

__device__ __forceinline__ rl_u64 rl_clock64(void) {
    rl_u64 c;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c));
    return c;
}
__device__ __forceinline__ rl_u64 rl_globaltimer(void) {
    rl_u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
#define RL_CLOCK_BEGIN const rl_u64 rl_c0 = rl_clock64(), rl_t0 = rl_globaltimer();
#define RL_CLOCK_END                                                                                               \
    if (blockIdx.x == 0 && threadIdx.x == 0) {                                                                     \
        const rl_u64 rl_c1 = rl_clock64(), rl_t1 = rl_globaltimer();                                               \
        atomicAdd(&rl_clock[0], rl_c1 - rl_c0);                                                                    \
        atomicAdd(&rl_clock[1], rl_t1 - rl_t0);                                                                    \
    }

// ---- Tensor-core operands (mma.cu, wgmma.cu) ------------------------------------------------------------------

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

// The value 1 in every element of a 32-bit operand word, per input type (for the result checks).
#define RL_ONE_F16 0x3c003c00U
#define RL_ONE_BF16 0x3f803f80U
#define RL_ONE_TF32 0x3f800000U
#define RL_ONE_S8 0x01010101U
#define RL_ONE_E4M3 0x38383838U

// asm constraints of a read-write accumulator register: float or 32-bit integer.
#define RL_CONS_F(x) "+f"(x)
#define RL_CONS_R(x) "+r"(x)

#endif
