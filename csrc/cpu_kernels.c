/* CPU ceiling microbenchmarks, 2: SIMD detection and the per-ISA kernels (FMA chains; low-precision matrix
 * kernels; read / copy / triad streams). See cpu.h for the contracts and units.
 *
 * Keeping the work alive: every FMA accumulator is summed into a per-thread volatile sink after the timed loop;
 * read sums go to the same sinks; copy and triad write memory the caller can observe. Accumulators start from
 * different values so the compiler cannot merge identical chains. */
#define _GNU_SOURCE
#include "cpu_arch.h"

/* ------------------------------------------------------------------------------------------------------------
 * 2. SIMD detection and kernels
 * ------------------------------------------------------------------------------------------------------------ */

static const char *const rl_simd_names[RL_SIMD_COUNT] = {"scalar", "sse2", "avx2", "avx512", "neon"};

const char *rl_cpu_simd_name(rl_simd simd) {
    return (simd >= 0 && simd < RL_SIMD_COUNT) ? rl_simd_names[simd] : "?";
}

int rl_cpu_simd_supported(rl_simd simd) {
    switch (simd) {
    case RL_SIMD_SCALAR: return 1;
#ifdef RL_X86
    case RL_SIMD_SSE2: __builtin_cpu_init(); return __builtin_cpu_supports("sse2") != 0;
    case RL_SIMD_AVX2:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") != 0 && __builtin_cpu_supports("fma") != 0;
    case RL_SIMD_AVX512: __builtin_cpu_init(); return __builtin_cpu_supports("avx512f") != 0;
#endif
#ifdef RL_ARM64
    case RL_SIMD_NEON: return 1; /* Advanced SIMD with FMA is mandatory on AArch64 */
#endif
    default: return 0;
    }
}

rl_simd rl_cpu_simd_best(void) {
    static const rl_simd order[] = {RL_SIMD_AVX512, RL_SIMD_AVX2, RL_SIMD_NEON, RL_SIMD_SSE2};
    for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
        if (rl_cpu_simd_supported(order[i])) {
            return order[i];
        }
    }
    return RL_SIMD_SCALAR;
}

int rl_cpu_simd_lanes(rl_simd simd, int elem_bytes) {
    if (elem_bytes != 4 && elem_bytes != 8) {
        return 0;
    }
    static const int vector_bytes[RL_SIMD_COUNT] = {0, 16, 32, 64, 16};
    if (simd < 0 || simd >= RL_SIMD_COUNT) {
        return 0;
    }
    return simd == RL_SIMD_SCALAR ? 1 : vector_bytes[simd] / elem_bytes;
}

int rl_cpu_simd_has_fma(rl_simd simd) {
    return simd == RL_SIMD_AVX2 || simd == RL_SIMD_AVX512 || simd == RL_SIMD_NEON;
}

/* Accumulators: FMA latency (4-5 cycles) x FMA pipes (2, up to 4 on some Arm cores) must be covered. x86 has 16
 * ymm/xmm registers (12 chains + 2 constants) and 32 zmm; AArch64 has 32 vector registers. */
#define RL_FMA_CHAINS 12
#define RL_FMA_CHAINS_NEON 16

int rl_cpu_fma_accumulators(rl_simd simd) { return simd == RL_SIMD_NEON ? RL_FMA_CHAINS_NEON : RL_FMA_CHAINS; }

/* Starting value of chain k: distinct per chain so no two chains can be merged. */
#define RL_CHAIN_X0(k) (RL_FMA_X0 + (double)(k) * 0.0078125)

/* Apply OP(k) for k = 0..11 / 0..15. */
#define RL_REP12(OP) OP(0) OP(1) OP(2) OP(3) OP(4) OP(5) OP(6) OP(7) OP(8) OP(9) OP(10) OP(11)
#define RL_REP16(OP) RL_REP12(OP) OP(12) OP(13) OP(14) OP(15)

/* The multiplier and addend pass through a volatile so the compiler cannot fold the recurrence. */
static volatile double rl_fma_mul = RL_FMA_MUL;
static volatile double rl_fma_add = RL_FMA_ADD;

/* Portable scalar chains: x = x*m + a as a separate multiply and add (ISO C mode does not contract them). */
#define RL_SCALAR_FMA(T, NAME)                                                                                     \
    __attribute__((noinline)) static double NAME(int64_t iters) {                                                  \
        const T m = (T)rl_fma_mul, a = (T)rl_fma_add;                                                              \
        RL_REP12(RL_SC_DECL_##T)                                                                                   \
        for (int64_t i = 0; i < iters; i++) {                                                                      \
            RL_REP12(RL_SC_STEP)                                                                                   \
        }                                                                                                          \
        double s = 0.0;                                                                                            \
        RL_REP12(RL_SC_SUM)                                                                                        \
        return s;                                                                                                  \
    }
#define RL_SC_DECL_double(k) double x##k = (double)RL_CHAIN_X0(k);
#define RL_SC_DECL_float(k) float x##k = (float)RL_CHAIN_X0(k);
#define RL_SC_STEP(k) x##k = x##k * m + a;
#define RL_SC_SUM(k) s += (double)x##k;
RL_SCALAR_FMA(double, rl_fma_scalar_f64)
RL_SCALAR_FMA(float, rl_fma_scalar_f32)

/* A kernel of independent chains over the vector type VT_ of element ET_ (macros defined before each use): OPERANDS
 * declares the loop's constant operands m and a, DECL(k) declares and starts chain k, STEP_(x, m, a) advances a chain
 * by one instruction, STORE_ writes a vector to an ET_ array for the checksum. REP picks the chain count. */
#define RL_CHAIN_KERNEL(ATTR, NAME, REP, DECL, ...)                                                                 \
    ATTR __attribute__((noinline)) static double NAME(int64_t iters) {                                             \
        __VA_ARGS__                                                                                                \
        REP(DECL)                                                                                                  \
        for (int64_t i = 0; i < iters; i++) {                                                                      \
            REP(RL_V_STEP)                                                                                         \
        }                                                                                                          \
        ET_ lanes[sizeof(VT_) / sizeof(ET_)];                                                                      \
        double s = 0.0;                                                                                            \
        REP(RL_V_SUM)                                                                                              \
        return s;                                                                                                  \
    }
/* The FMA kernels: SET1_ broadcasts, STEP_(x, m, a) computes x*m + a. */
#define RL_VECTOR_FMA(ATTR, NAME, REP)                                                                             \
    RL_CHAIN_KERNEL(ATTR, NAME, REP, RL_V_DECL, const VT_ m = SET1_((ET_)rl_fma_mul), a = SET1_((ET_)rl_fma_add);)
#define RL_V_DECL(k) VT_ x##k = SET1_((ET_)RL_CHAIN_X0(k));
#define RL_V_STEP(k) x##k = STEP_(x##k, m, a);
#define RL_V_SUM(k)                                                                                                \
    STORE_(lanes, x##k);                                                                                           \
    for (int l = 0; l < (int)(sizeof(lanes) / sizeof(lanes[0])); l++) {                                           \
        s += (double)lanes[l];                                                                                     \
    }

#ifdef RL_X86
#define RL_ATTR_SSE2 __attribute__((target("sse2")))
#define RL_ATTR_AVX2 __attribute__((target("avx2,fma")))
#define RL_ATTR_AVX512 __attribute__((target("avx512f")))

#define VT_ __m128d
#define ET_ double
#define SET1_ _mm_set1_pd
#define STEP_(x, m, a) _mm_add_pd(_mm_mul_pd((x), (m)), (a))
#define STORE_ _mm_storeu_pd
RL_VECTOR_FMA(RL_ATTR_SSE2, rl_fma_sse2_f64, RL_REP12)
#undef VT_
#undef ET_
#undef SET1_
#undef STEP_
#undef STORE_

#define VT_ __m128
#define ET_ float
#define SET1_ _mm_set1_ps
#define STEP_(x, m, a) _mm_add_ps(_mm_mul_ps((x), (m)), (a))
#define STORE_ _mm_storeu_ps
RL_VECTOR_FMA(RL_ATTR_SSE2, rl_fma_sse2_f32, RL_REP12)
#undef VT_
#undef ET_
#undef SET1_
#undef STEP_
#undef STORE_

#define VT_ __m256d
#define ET_ double
#define SET1_ _mm256_set1_pd
#define STEP_(x, m, a) _mm256_fmadd_pd((x), (m), (a))
#define STORE_ _mm256_storeu_pd
RL_VECTOR_FMA(RL_ATTR_AVX2, rl_fma_avx2_f64, RL_REP12)
#undef VT_
#undef ET_
#undef SET1_
#undef STEP_
#undef STORE_

#define VT_ __m256
#define ET_ float
#define SET1_ _mm256_set1_ps
#define STEP_(x, m, a) _mm256_fmadd_ps((x), (m), (a))
#define STORE_ _mm256_storeu_ps
RL_VECTOR_FMA(RL_ATTR_AVX2, rl_fma_avx2_f32, RL_REP12)
#undef VT_
#undef ET_
#undef SET1_
#undef STEP_
#undef STORE_

#define VT_ __m512d
#define ET_ double
#define SET1_ _mm512_set1_pd
#define STEP_(x, m, a) _mm512_fmadd_pd((x), (m), (a))
#define STORE_ _mm512_storeu_pd
RL_VECTOR_FMA(RL_ATTR_AVX512, rl_fma_avx512_f64, RL_REP12)
#undef VT_
#undef ET_
#undef SET1_
#undef STEP_
#undef STORE_

#define VT_ __m512
#define ET_ float
#define SET1_ _mm512_set1_ps
#define STEP_(x, m, a) _mm512_fmadd_ps((x), (m), (a))
#define STORE_ _mm512_storeu_ps
RL_VECTOR_FMA(RL_ATTR_AVX512, rl_fma_avx512_f32, RL_REP12)
#undef VT_
#undef ET_
#undef SET1_
#undef STEP_
#undef STORE_
#endif /* RL_X86 */

#ifdef RL_ARM64
#define RL_ATTR_NEON
/* vfmaq(a, x, m) = a + x*m */
#define VT_ float64x2_t
#define ET_ double
#define SET1_ vdupq_n_f64
#define STEP_(x, m, a) vfmaq_f64((a), (x), (m))
#define STORE_ vst1q_f64
RL_VECTOR_FMA(RL_ATTR_NEON, rl_fma_neon_f64, RL_REP16)
#undef VT_
#undef ET_
#undef SET1_
#undef STEP_
#undef STORE_

#define VT_ float32x4_t
#define ET_ float
#define SET1_ vdupq_n_f32
#define STEP_(x, m, a) vfmaq_f32((a), (x), (m))
#define STORE_ vst1q_f32
RL_VECTOR_FMA(RL_ATTR_NEON, rl_fma_neon_f32, RL_REP16)
#undef VT_
#undef ET_
#undef SET1_
#undef STEP_
#undef STORE_
#endif /* RL_ARM64 */

/* The FMA kernel table: one entry per element type, a kernel per SIMD set (NULL where there is none). A new
 * dtype is a kernel per ISA above and one row here; the Python side lists it in roofline/_hardware/_ceilings.py. */
typedef double (*rl_fma_fn)(int64_t iters);

#define RL_FMA_FNS(SUF)                                                                                            \
    {                                                                                                              \
        [RL_SIMD_SCALAR] = rl_fma_scalar_##SUF,                                                                    \
        RL_X86_ONLY([RL_SIMD_SSE2] = rl_fma_sse2_##SUF, [RL_SIMD_AVX2] = rl_fma_avx2_##SUF,                        \
                    [RL_SIMD_AVX512] = rl_fma_avx512_##SUF, )                                                      \
        RL_ARM64_ONLY([RL_SIMD_NEON] = rl_fma_neon_##SUF, )                                                        \
    }

static const struct {
    rl_dtype dtype;
    int elem_bytes;
    rl_fma_fn fn[RL_SIMD_COUNT];
} rl_fma_table[] = {
    {RL_DT_FLOAT64, 8, RL_FMA_FNS(f64)},
    {RL_DT_FLOAT32, 4, RL_FMA_FNS(f32)},
};

#define RL_FMA_TABLE_SIZE ((int)(sizeof(rl_fma_table) / sizeof(rl_fma_table[0])))

int rl_cpu_fma_dtype_count(void) { return RL_FMA_TABLE_SIZE; }

rl_dtype rl_cpu_fma_dtype(int i) { return (i >= 0 && i < RL_FMA_TABLE_SIZE) ? rl_fma_table[i].dtype : RL_DT_UNKNOWN; }

/* The kernel of (simd, dtype), or NULL. */
static rl_fma_fn rl_fma_lookup(rl_simd simd, rl_dtype dtype) {
    if (simd < 0 || simd >= RL_SIMD_COUNT) {
        return NULL;
    }
    for (int i = 0; i < RL_FMA_TABLE_SIZE; i++) {
        if (rl_fma_table[i].dtype == dtype) {
            return rl_fma_table[i].fn[simd];
        }
    }
    return NULL;
}

int rl_cpu_fma_elem_bytes(rl_dtype dtype) {
    for (int i = 0; i < RL_FMA_TABLE_SIZE; i++) {
        if (rl_fma_table[i].dtype == dtype) {
            return rl_fma_table[i].elem_bytes;
        }
    }
    return 0;
}

int rl_cpu_fma_supported(rl_simd simd, rl_dtype dtype) { return rl_fma_lookup(simd, dtype) != NULL; }

double rl_cpu_fma_kernel(rl_simd simd, rl_dtype dtype, int64_t iters) {
    rl_fma_fn fn = rl_fma_lookup(simd, dtype);
    return fn != NULL ? fn(iters) : NAN;
}

/* ------------------------------------------------------------------------------------------------------------
 * 2b. Low-precision and matrix-unit product kernels (see cpu.h for what each computes)
 * ------------------------------------------------------------------------------------------------------------ */

#ifdef RL_X86
/* Values the kernels multiply pass through volatiles so that no compiler can fold the loops. */
__attribute__((unused)) static volatile float rl_lowp_one = 1.0f;
__attribute__((unused)) static volatile float rl_lowp_small = 0.0009765625f; /* 2^-10 */
__attribute__((unused)) static volatile int rl_lowp_int_one = 1;
#endif

typedef double (*rl_lowp_fn)(int64_t iters);

/* The compilers that can emit each instruction set (an older one builds the extension without that kernel, and
 * rl_cpu_lowp_check says so): AVX512-VNNI GCC 8 / clang 6, AVX512-BF16 GCC 10 / clang 9, AMX GCC 11 / clang 12
 * (x86-64 only), AVX512-FP16 GCC 12 / clang 15. */
#ifdef RL_X86
#if defined(__clang__)
#define RL_CC_AT_LEAST(gcc, clang) (__clang_major__ >= (clang))
#elif defined(__GNUC__)
#define RL_CC_AT_LEAST(gcc, clang) (__GNUC__ >= (gcc))
#else
#define RL_CC_AT_LEAST(gcc, clang) 0
#endif
#if RL_CC_AT_LEAST(8, 6)
#define RL_HAVE_AVX512_VNNI 1
#endif
#if RL_CC_AT_LEAST(10, 9)
#define RL_HAVE_AVX512_BF16 1
#endif
#if RL_CC_AT_LEAST(12, 15)
#define RL_HAVE_AVX512_FP16 1
#endif
#if RL_CC_AT_LEAST(11, 12)
#define RL_HAVE_AVX_VNNI 1
#endif
#if RL_CC_AT_LEAST(11, 12) && defined(__x86_64__) && defined(__linux__)
#define RL_HAVE_AMX 1 /* the tile state must be granted by the kernel (arch_prctl), which only Linux does */
#endif
#endif

#ifdef RL_HAVE_AVX512_BF16
/* bf16 pairs: m = (1.0, 1.0), a = (2^-10, 2^-10), converted from fp32 (exact); each step adds 2^-9 per lane */
#define VT_ __m512
#define ET_ float
#define STEP_ _mm512_dpbf16_ps
#define STORE_ _mm512_storeu_ps
#define RL_BF_DECL(k) VT_ x##k = _mm512_set1_ps(1.0f + (float)(k) * 0.0078125f);
RL_CHAIN_KERNEL(__attribute__((target("avx512f,avx512bf16"))), rl_lowp_avx512_bf16, RL_REP12, RL_BF_DECL,
                const __m512 one = _mm512_set1_ps(rl_lowp_one), small = _mm512_set1_ps(rl_lowp_small);
                const __m512bh m = _mm512_cvtne2ps_pbh(one, one), a = _mm512_cvtne2ps_pbh(small, small);)
#undef VT_
#undef ET_
#undef STEP_
#undef STORE_
#endif

#ifdef RL_HAVE_AVX512_FP16
#define VT_ __m512h
#define ET_ _Float16
#define SET1_ _mm512_set1_ph
#define STEP_ _mm512_fmadd_ph
#define STORE_ _mm512_storeu_ph
RL_VECTOR_FMA(__attribute__((target("avx512f,avx512bw,avx512vl,avx512fp16"))), rl_lowp_avx512_fp16, RL_REP12)
#undef VT_
#undef ET_
#undef SET1_
#undef STEP_
#undef STORE_
#endif

/* The VNNI kernels, zmm (AVX512-VNNI) and ymm (AVX-VNNI, the VEX-encoded vpdpbusd of client cores without AVX-512:
 * Alder Lake and later), RL_W bits wide: unsigned bytes m = (1, 1, 1, 1), signed bytes a = (1, 1, 1, -1) per int32
 * lane, so each step adds 2; chain k starts at k. */
#define RL_CAT4_(a, b, c, d) a##b##c##d
#define RL_CAT4(a, b, c, d) RL_CAT4_(a, b, c, d)
#define VT_ RL_CAT4(__m, RL_W, i, )
#define ET_ int32_t
#define SET1_ RL_CAT4(_mm, RL_W, _set1_epi32, )
#define STORE_(p, x) RL_CAT4(_mm, RL_W, _storeu_si, RL_W)((VT_ *)(p), (x))
#define RL_VNNI_DECL(k) VT_ x##k = SET1_(k);
#define RL_VNNI_OPERANDS                                                                                           \
    const int one = rl_lowp_int_one;                                                                               \
    const VT_ m = SET1_(one * 0x01010101), a = SET1_((int)(0xFF010101u * (unsigned)one));
#ifdef RL_HAVE_AVX512_VNNI
#define RL_W 512
#define STEP_ _mm512_dpbusd_epi32
RL_CHAIN_KERNEL(__attribute__((target("avx512f,avx512vnni"))), rl_lowp_avx512_vnni, RL_REP12, RL_VNNI_DECL, RL_VNNI_OPERANDS)
#undef RL_W
#undef STEP_
#endif
#ifdef RL_HAVE_AVX_VNNI
#define RL_W 256
#define STEP_ _mm256_dpbusd_avx_epi32
RL_CHAIN_KERNEL(__attribute__((target("avx2,avxvnni"))), rl_lowp_avx_vnni, RL_REP12, RL_VNNI_DECL, RL_VNNI_OPERANDS)
#endif
#undef RL_W
#undef STEP_
#undef VT_
#undef ET_
#undef SET1_
#undef STORE_

#ifdef RL_HAVE_AMX
/* Tile configuration (palette 1): tiles 0-3 hold the 16x16 accumulators, 4-5 the left and 6-7 the right
 * operands, each 16 rows of 64 bytes. */
typedef struct {
    uint8_t palette_id;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} rl_tile_config;

static void rl_tile_config_init(rl_tile_config *cfg) {
    memset(cfg, 0, sizeof(*cfg));
    cfg->palette_id = 1;
    for (int t = 0; t < 8; t++) {
        cfg->rows[t] = 16;
        cfg->colsb[t] = 64;
    }
}

/* One body for both AMX kernels: ACC element type, OPERAND_INIT fills the 16x64-byte operand buffers, DP is the
 * tile product instruction. Four independent accumulators cover the latency of the tile multiplier. */
#define RL_AMX_KERNEL(NAME, TARGET, ACC_T, X0, FILL_A, FILL_B, DP)                                                 \
    __attribute__((target(TARGET), noinline)) static double NAME(int64_t iters) {                                  \
        rl_tile_config cfg;                                                                                        \
        rl_tile_config_init(&cfg);                                                                                 \
        _Alignas(64) ACC_T acc[4][256];                                                                            \
        _Alignas(64) uint8_t opa[1024], opb[1024];                                                                 \
        for (int t = 0; t < 4; t++) {                                                                              \
            for (int e = 0; e < 256; e++) {                                                                        \
                acc[t][e] = (ACC_T)(X0);                                                                           \
            }                                                                                                      \
        }                                                                                                          \
        FILL_A;                                                                                                    \
        FILL_B;                                                                                                    \
        _tile_loadconfig(&cfg);                                                                                    \
        _tile_loadd(0, acc[0], 64);                                                                                \
        _tile_loadd(1, acc[1], 64);                                                                                \
        _tile_loadd(2, acc[2], 64);                                                                                \
        _tile_loadd(3, acc[3], 64);                                                                                \
        _tile_loadd(4, opa, 64);                                                                                   \
        _tile_loadd(5, opa, 64);                                                                                   \
        _tile_loadd(6, opb, 64);                                                                                   \
        _tile_loadd(7, opb, 64);                                                                                   \
        for (int64_t i = 0; i < iters; i++) {                                                                      \
            DP(0, 4, 6);                                                                                           \
            DP(1, 4, 7);                                                                                           \
            DP(2, 5, 6);                                                                                           \
            DP(3, 5, 7);                                                                                           \
        }                                                                                                          \
        _tile_stored(0, acc[0], 64);                                                                               \
        _tile_stored(1, acc[1], 64);                                                                               \
        _tile_stored(2, acc[2], 64);                                                                               \
        _tile_stored(3, acc[3], 64);                                                                               \
        _tile_release();                                                                                           \
        double s = 0.0;                                                                                            \
        for (int t = 0; t < 4; t++) {                                                                              \
            for (int e = 0; e < 256; e++) {                                                                        \
                s += (double)acc[t][e];                                                                            \
            }                                                                                                      \
        }                                                                                                          \
        return s;                                                                                                  \
    }

/* bf16 bit patterns of 1.0 and 2^-10 (the upper halves of the fp32 patterns; exact) */
static uint16_t rl_bf16_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return (uint16_t)(u >> 16);
}
static void rl_fill16(uint8_t *buf, uint16_t v) {
    for (int i = 0; i < 512; i++) {
        memcpy(buf + 2 * i, &v, 2);
    }
}
#define RL_AMX_DP_BF16(c, a, b) _tile_dpbf16ps(c, a, b)
#define RL_AMX_DP_INT8(c, a, b) _tile_dpbssd(c, a, b)
RL_AMX_KERNEL(rl_lowp_amx_bf16, "amx-tile,amx-bf16", float, 1.0f + (float)t * 0.0078125f,
              rl_fill16(opa, rl_bf16_bits(rl_lowp_one)), rl_fill16(opb, rl_bf16_bits(rl_lowp_small)),
              RL_AMX_DP_BF16)
RL_AMX_KERNEL(rl_lowp_amx_int8, "amx-tile,amx-int8", int32_t, t, memset(opa, rl_lowp_int_one, sizeof(opa)),
              memset(opb, rl_lowp_int_one, sizeof(opb)), RL_AMX_DP_INT8)
#endif


/* Feature bits (cpuid leaf 7 unless noted) and XCR0 state components. */
#define RL_CPUID1_ECX_OSXSAVE (1u << 27)
#define RL_CPUID7_EBX_AVX2 (1u << 5)
#define RL_CPUID7_EBX_AVX512F (1u << 16)
#define RL_CPUID7_ECX_AVX512_VNNI (1u << 11)
#define RL_CPUID7_EDX_AMX_BF16 (1u << 22)
#define RL_CPUID7_EDX_AVX512_FP16 (1u << 23)
#define RL_CPUID7_EDX_AMX_TILE (1u << 24)
#define RL_CPUID7_EDX_AMX_INT8 (1u << 25)
#define RL_CPUID7_1_EAX_AVX512_BF16 (1u << 5)
#define RL_CPUID7_1_EAX_AVX_VNNI (1u << 4)
#define RL_XCR0_AVX 0x6ull            /* SSE, AVX (the ymm registers) */
#define RL_XCR0_AVX512 0xE6ull        /* SSE, AVX, opmask, ZMM_Hi256, Hi16_ZMM */
#define RL_XCR0_AMX (3ull << 17)      /* XTILECFG, XTILEDATA */
#define RL_ARCH_GET_XCOMP_PERM 0x1022
#define RL_ARCH_REQ_XCOMP_PERM 0x1023
#define RL_XFEATURE_XTILEDATA 18

/* The kernels absent from this build (the compiler cannot emit their instructions) have no function. */
#ifndef RL_HAVE_AVX512_BF16
#define rl_lowp_avx512_bf16 NULL
#endif
#ifndef RL_HAVE_AVX512_FP16
#define rl_lowp_avx512_fp16 NULL
#endif
#ifndef RL_HAVE_AVX512_VNNI
#define rl_lowp_avx512_vnni NULL
#endif
#ifndef RL_HAVE_AVX_VNNI
#define rl_lowp_avx_vnni NULL
#endif
#ifndef RL_HAVE_AMX
#define rl_lowp_amx_bf16 NULL
#define rl_lowp_amx_int8 NULL
#endif

/* The register state a kernel needs: ymm (AVX: XCR0 SSE and AVX), zmm (AVX-512: AVX512F in cpuid and the opmask and
 * zmm state in XCR0), AMX tiles (AMX-TILE in cpuid, the tile state in XCR0 and the kernel's permission). */
typedef enum { RL_STATE_YMM, RL_STATE_ZMM, RL_STATE_TILE } rl_reg_state;

/* The cpuid registers a kernel's feature bit can be in (fields of rl_cpu_features). */
typedef enum { RL_REG_7_ECX, RL_REG_7_EDX, RL_REG_7_1_EAX } rl_feature_reg;

static uint32_t rl_feature_word(const rl_cpu_features *f, rl_feature_reg reg) {
    return reg == RL_REG_7_ECX ? f->leaf7_ecx : (reg == RL_REG_7_EDX ? f->leaf7_edx : f->leaf7_1_eax);
}

/* The low-precision kernels: the only list of them (an rl_lowp is an index here; Python reads the table through
 * _core.cpu_lowp_kernels()). flop_per_iter: operations per loop iteration of one thread (all accumulators);
 * feature/reg/bit: the cpuid flag the CPU must have; state: the register state it needs (rl_reg_state); build:
 * what the compiler needs to emit the kernel. A new kernel is a function above and a row here. */
static const struct {
    const char *name;
    const char *instruction;
    rl_dtype dtype;
    int accumulators;
    int64_t flop_per_iter;
    rl_lowp_fn fn;
    const char *feature;
    rl_feature_reg reg;
    uint32_t bit;
    rl_reg_state state;
    const char *build;
} rl_lowp_table[] = {
    /* 16 fp32 lanes x 2 bf16 products each: 2 multiplies + 2 adds per lane */
    {"avx512_bf16", "vdpbf16ps zmm", RL_DT_BFLOAT16, RL_FMA_CHAINS, RL_FMA_CHAINS * 16 * 4, rl_lowp_avx512_bf16,
     "AVX512_BF16", RL_REG_7_1_EAX, RL_CPUID7_1_EAX_AVX512_BF16, RL_STATE_ZMM, "AVX512-BF16 needs GCC 10 or clang 9"},
    /* 32 fp16 lanes, one FMA each */
    {"avx512_fp16", "vfmadd231ph zmm", RL_DT_FLOAT16, RL_FMA_CHAINS, RL_FMA_CHAINS * 32 * 2, rl_lowp_avx512_fp16,
     "AVX512_FP16", RL_REG_7_EDX, RL_CPUID7_EDX_AVX512_FP16, RL_STATE_ZMM, "AVX512-FP16 needs GCC 12 or clang 15"},
    /* 16 int32 lanes x 4 byte products each */
    {"avx512_vnni", "vpdpbusd zmm", RL_DT_INT8, RL_FMA_CHAINS, RL_FMA_CHAINS * 16 * 8, rl_lowp_avx512_vnni,
     "AVX512_VNNI", RL_REG_7_ECX, RL_CPUID7_ECX_AVX512_VNNI, RL_STATE_ZMM, "AVX512-VNNI needs GCC 8 or clang 6"},
    /* 4 tiles x (16 x 16 outputs x 32 bf16 products) multiply-adds */
    {"amx_bf16", "tdpbf16ps", RL_DT_BFLOAT16, 4, 4LL * 16 * 16 * 32 * 2, rl_lowp_amx_bf16, "AMX-BF16", RL_REG_7_EDX,
     RL_CPUID7_EDX_AMX_BF16, RL_STATE_TILE, "AMX needs GCC 11 or clang 12, x86-64 and Linux"},
    /* 4 tiles x (16 x 16 outputs x 64 int8 products) multiply-adds */
    {"amx_int8", "tdpbssd", RL_DT_INT8, 4, 4LL * 16 * 16 * 64 * 2, rl_lowp_amx_int8, "AMX-INT8", RL_REG_7_EDX,
     RL_CPUID7_EDX_AMX_INT8, RL_STATE_TILE, "AMX needs GCC 11 or clang 12, x86-64 and Linux"},
    /* 8 int32 lanes x 4 byte products each */
    {"avx_vnni", "vpdpbusd ymm", RL_DT_INT8, RL_FMA_CHAINS, RL_FMA_CHAINS * 8 * 8, rl_lowp_avx_vnni, "AVX_VNNI",
     RL_REG_7_1_EAX, RL_CPUID7_1_EAX_AVX_VNNI, RL_STATE_YMM, "AVX-VNNI needs GCC 11 or clang 12"},
};
#define RL_LOWP_N ((int)(sizeof(rl_lowp_table) / sizeof(rl_lowp_table[0])))

int rl_cpu_lowp_count(void) { return RL_LOWP_N; }
static int rl_lowp_valid(rl_lowp k) { return k >= 0 && k < RL_LOWP_N; }

const char *rl_cpu_lowp_name(rl_lowp k) { return rl_lowp_valid(k) ? rl_lowp_table[k].name : NULL; }
const char *rl_cpu_lowp_instruction(rl_lowp k) { return rl_lowp_valid(k) ? rl_lowp_table[k].instruction : NULL; }
rl_dtype rl_cpu_lowp_dtype(rl_lowp k) { return rl_lowp_valid(k) ? rl_lowp_table[k].dtype : RL_DT_UNKNOWN; }
int64_t rl_cpu_lowp_flop_per_iter(rl_lowp k) { return rl_lowp_valid(k) ? rl_lowp_table[k].flop_per_iter : 0; }
int rl_cpu_lowp_accumulators(rl_lowp k) { return rl_lowp_valid(k) ? rl_lowp_table[k].accumulators : 0; }

int rl_cpu_lowp_find(const char *name) {
    for (int k = 0; name != NULL && k < RL_LOWP_N; k++) {
        if (strcmp(name, rl_lowp_table[k].name) == 0) {
            return k;
        }
    }
    return -1;
}

double rl_cpu_lowp_kernel(rl_lowp k, int64_t iters) {
    if (!rl_lowp_valid(k) || rl_lowp_table[k].fn == NULL) {
        return NAN;
    }
    return rl_lowp_table[k].fn(iters);
}

#define RL_WHY(...) return rl_why(why, cap, __VA_ARGS__)

int rl_cpu_lowp_check(rl_lowp k, const rl_cpu_features *f, char *why, size_t cap) {
    if (why != NULL && cap > 0) {
        why[0] = '\0';
    }
    if (!rl_lowp_valid(k)) {
        RL_WHY("no such kernel");
    }
    const char *name = rl_lowp_table[k].name;
    if (!f->x86) {
        RL_WHY("%s: not an x86-64 CPU (no kernel for this architecture)", name);
    }
    if (rl_lowp_table[k].fn == NULL) {
        RL_WHY("%s: this build has no %s kernel (%s)", name, name, rl_lowp_table[k].build);
    }
    const char *feature = rl_lowp_table[k].feature;
    int has = (rl_feature_word(f, rl_lowp_table[k].reg) & rl_lowp_table[k].bit) != 0;
    rl_reg_state state = rl_lowp_table[k].state;
    if (state != RL_STATE_TILE) {
        int zmm = state == RL_STATE_ZMM;
        /* the base a kernel's target attribute assumes: AVX512F for zmm kernels, AVX2 for ymm ones */
        uint32_t base = zmm ? RL_CPUID7_EBX_AVX512F : RL_CPUID7_EBX_AVX2;
        if (!(f->leaf7_ebx & base) || !has) {
            RL_WHY("%s: the CPU does not support %s%s (cpuid)", name, feature,
                   (f->leaf7_ebx & base) ? "" : (zmm ? " (no AVX-512F)" : " (no AVX2)"));
        }
        uint64_t need = zmm ? RL_XCR0_AVX512 : RL_XCR0_AVX;
        if (!(f->leaf1_ecx & RL_CPUID1_ECX_OSXSAVE) || (f->xcr0 & need) != need) {
            RL_WHY("%s: the OS has not enabled the %s register state (XCR0 = 0x%llx)", name, zmm ? "AVX-512" : "AVX",
                   (unsigned long long)f->xcr0);
        }
        return 1;
    }
    if (!(f->leaf7_edx & RL_CPUID7_EDX_AMX_TILE) || !has) {
        RL_WHY("%s: the CPU has no AMX (%s) tiles (cpuid)", name, feature);
    }
    if (!(f->leaf1_ecx & RL_CPUID1_ECX_OSXSAVE) || (f->xcr0 & RL_XCR0_AMX) != RL_XCR0_AMX) {
        RL_WHY("%s: the OS has not enabled the AMX tile state (XCR0 = 0x%llx)", name, (unsigned long long)f->xcr0);
    }
    if (f->amx_perm != 0) {
        if (f->amx_perm < 0) {
            RL_WHY("%s: permission for the AMX tile data was not requested", name);
        }
        RL_WHY("%s: the kernel refused the AMX tile data state (arch_prctl ARCH_REQ_XCOMP_PERM: %s, errno %d; "
               "Linux 5.16 or later is needed)", name, f->amx_perm == EINVAL ? "EINVAL" :
               (f->amx_perm == EPERM ? "EPERM" : (f->amx_perm == ENOSYS ? "ENOSYS" : "error")), f->amx_perm);
    }
    return 1;
}

void rl_cpu_features_get(rl_cpu_features *out) {
    memset(out, 0, sizeof(*out));
    out->amx_perm = -1;
#ifdef RL_X86
    out->x86 = 1;
    unsigned a, b, c, d;
    if (__get_cpuid(1, &a, &b, &c, &d)) {
        out->leaf1_ecx = c;
    }
    if (__get_cpuid_max(0, NULL) >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        out->leaf7_ebx = b;
        out->leaf7_ecx = c;
        out->leaf7_edx = d;
        unsigned subleaves = a;
        if (subleaves >= 1) {
            __cpuid_count(7, 1, a, b, c, d);
            out->leaf7_1_eax = a;
        }
    }
    if (out->leaf1_ecx & RL_CPUID1_ECX_OSXSAVE) {
        uint32_t lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        out->xcr0 = ((uint64_t)hi << 32) | lo;
    }
#if defined(__linux__) && defined(SYS_arch_prctl)
    if ((out->leaf7_edx & RL_CPUID7_EDX_AMX_TILE) && (out->xcr0 & RL_XCR0_AMX) == RL_XCR0_AMX) {
        out->amx_perm = syscall(SYS_arch_prctl, RL_ARCH_REQ_XCOMP_PERM, RL_XFEATURE_XTILEDATA) == 0 ? 0 : errno;
        if (out->amx_perm == 0) {
            /* granted: confirm the permission covers the tile data */
            unsigned long bits = 0;
            if (syscall(SYS_arch_prctl, RL_ARCH_GET_XCOMP_PERM, &bits) != 0 ||
                !(bits & (1ul << RL_XFEATURE_XTILEDATA))) {
                out->amx_perm = EPERM;
            }
        }
    }
#endif
#endif
}

static pthread_once_t rl_lowp_once = PTHREAD_ONCE_INIT;
static int rl_lowp_ok[sizeof(rl_lowp_table) / sizeof(rl_lowp_table[0])];

static void rl_lowp_detect(void) {
    rl_cpu_features f;
    rl_cpu_features_get(&f);
    for (int k = 0; k < RL_LOWP_N; k++) {
        rl_lowp_ok[k] = rl_cpu_lowp_check((rl_lowp)k, &f, NULL, 0);
    }
}

int rl_cpu_lowp_available(rl_lowp k) {
    if (!rl_lowp_valid(k)) {
        return 0;
    }
    pthread_once(&rl_lowp_once, rl_lowp_detect);
    return rl_lowp_ok[k];
}

/* Stream kernels. Arrays x0, x1, x2 of n doubles, `reps` passes: read sums x0; copy x1[i] = x0[i]; triad
 * x0[i] = x1[i] + s*x2[i]. The passes loop inside the kernel so that small (L1) working sets are not dominated by
 * call and reduction overhead. Each vector body moves 8 vectors (triad: 4 per array); a scalar loop finishes the
 * tail. */

__attribute__((noinline)) static double rl_read_scalar(const double *x0, int64_t n, int64_t reps) {
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int64_t r = 0; r < reps; r++) {
        int64_t i = 0;
        for (; i + 4 <= n; i += 4) {
            s0 += x0[i];
            s1 += x0[i + 1];
            s2 += x0[i + 2];
            s3 += x0[i + 3];
        }
        for (; i < n; i++) {
            s0 += x0[i];
        }
    }
    return (s0 + s1) + (s2 + s3);
}

__attribute__((noinline)) static void rl_copy_scalar(const double *restrict x0, double *restrict x1, int64_t n,
                                                     int64_t reps) {
    for (int64_t r = 0; r < reps; r++) {
        for (int64_t i = 0; i < n; i++) {
            x1[i] = x0[i];
        }
    }
}

__attribute__((noinline)) static void rl_triad_scalar(double *restrict x0, const double *restrict x1,
                                                      const double *restrict x2, int64_t n, int64_t reps) {
    const double s = RL_TRIAD_SCALAR;
    for (int64_t r = 0; r < reps; r++) {
        for (int64_t i = 0; i < n; i++) {
            x0[i] = x1[i] + s * x2[i];
        }
    }
}

/* Vector stream kernels for one ISA. V vector type, W doubles per vector, LOAD/STORE unaligned memory ops, ADD,
 * MULADD(s, c, b) = b + s*c, SET1, ZERO, HSUM reduces a vector to a double. */
#define RL_STREAM_KERNELS(ATTR, SUF, V, W, LOAD, STORE, ADD, MULADD, SET1, ZERO, HSUM)                              \
    RL_READ_KERNEL(ATTR, SUF, V, W, LOAD, ADD, ZERO, HSUM)                                                         \
    RL_WRITE_KERNELS(ATTR, SUF, V, W, LOAD, STORE, MULADD, SET1)

#define RL_READ_KERNEL(ATTR, SUF, V, W, LOAD, ADD, ZERO, HSUM)                                                     \
    ATTR __attribute__((noinline)) static double rl_read_##SUF(const double *x0, int64_t n, int64_t reps) {        \
        V s0 = ZERO(), s1 = ZERO(), s2 = ZERO(), s3 = ZERO(), s4 = ZERO(), s5 = ZERO(), s6 = ZERO(), s7 = ZERO();   \
        double tail = 0.0;                                                                                         \
        for (int64_t r = 0; r < reps; r++) {                                                                       \
            int64_t i = 0;                                                                                         \
            for (; i + 8 * (W) <= n; i += 8 * (W)) {                                                               \
                s0 = ADD(s0, LOAD(x0 + i));                                                                        \
                s1 = ADD(s1, LOAD(x0 + i + (W)));                                                                  \
                s2 = ADD(s2, LOAD(x0 + i + 2 * (W)));                                                              \
                s3 = ADD(s3, LOAD(x0 + i + 3 * (W)));                                                              \
                s4 = ADD(s4, LOAD(x0 + i + 4 * (W)));                                                              \
                s5 = ADD(s5, LOAD(x0 + i + 5 * (W)));                                                              \
                s6 = ADD(s6, LOAD(x0 + i + 6 * (W)));                                                              \
                s7 = ADD(s7, LOAD(x0 + i + 7 * (W)));                                                              \
            }                                                                                                      \
            for (; i < n; i++) {                                                                                   \
                tail += x0[i];                                                                                     \
            }                                                                                                      \
        }                                                                                                          \
        return HSUM(ADD(ADD(ADD(s0, s1), ADD(s2, s3)), ADD(ADD(s4, s5), ADD(s6, s7)))) + tail;                     \
    }

/* Copy and triad for one store flavour: SUF names the variant, STORE is the store instruction. */
#define RL_WRITE_KERNELS(ATTR, SUF, V, W, LOAD, STORE, MULADD, SET1)                                               \
    ATTR __attribute__((noinline)) static void rl_copy_##SUF(const double *restrict x0, double *restrict x1,       \
                                                             int64_t n, int64_t reps) {                            \
        for (int64_t r = 0; r < reps; r++) {                                                                       \
            int64_t i = 0;                                                                                         \
            for (; i + 8 * (W) <= n; i += 8 * (W)) {                                                               \
                V v0 = LOAD(x0 + i), v1 = LOAD(x0 + i + (W)), v2 = LOAD(x0 + i + 2 * (W)),                         \
                  v3 = LOAD(x0 + i + 3 * (W));                                                                     \
                V v4 = LOAD(x0 + i + 4 * (W)), v5 = LOAD(x0 + i + 5 * (W)), v6 = LOAD(x0 + i + 6 * (W)),           \
                  v7 = LOAD(x0 + i + 7 * (W));                                                                     \
                STORE(x1 + i, v0);                                                                                 \
                STORE(x1 + i + (W), v1);                                                                           \
                STORE(x1 + i + 2 * (W), v2);                                                                       \
                STORE(x1 + i + 3 * (W), v3);                                                                       \
                STORE(x1 + i + 4 * (W), v4);                                                                       \
                STORE(x1 + i + 5 * (W), v5);                                                                       \
                STORE(x1 + i + 6 * (W), v6);                                                                       \
                STORE(x1 + i + 7 * (W), v7);                                                                       \
            }                                                                                                      \
            for (; i < n; i++) {                                                                                   \
                x1[i] = x0[i];                                                                                     \
            }                                                                                                      \
        }                                                                                                          \
    }                                                                                                              \
    ATTR __attribute__((noinline)) static void rl_triad_##SUF(double *restrict x0, const double *restrict x1,      \
                                                              const double *restrict x2, int64_t n,                \
                                                              int64_t reps) {                                      \
        const V s = SET1(RL_TRIAD_SCALAR);                                                                         \
        for (int64_t r = 0; r < reps; r++) {                                                                       \
            int64_t i = 0;                                                                                         \
            for (; i + 4 * (W) <= n; i += 4 * (W)) {                                                               \
                V c0 = LOAD(x2 + i), c1 = LOAD(x2 + i + (W)), c2 = LOAD(x2 + i + 2 * (W)),                         \
                  c3 = LOAD(x2 + i + 3 * (W));                                                                     \
                V b0 = LOAD(x1 + i), b1 = LOAD(x1 + i + (W)), b2 = LOAD(x1 + i + 2 * (W)),                         \
                  b3 = LOAD(x1 + i + 3 * (W));                                                                     \
                STORE(x0 + i, MULADD(s, c0, b0));                                                                  \
                STORE(x0 + i + (W), MULADD(s, c1, b1));                                                            \
                STORE(x0 + i + 2 * (W), MULADD(s, c2, b2));                                                        \
                STORE(x0 + i + 3 * (W), MULADD(s, c3, b3));                                                        \
            }                                                                                                      \
            for (; i < n; i++) {                                                                                   \
                x0[i] = x1[i] + RL_TRIAD_SCALAR * x2[i];                                                           \
            }                                                                                                      \
        }                                                                                                          \
    }

#ifdef RL_X86
RL_ATTR_SSE2 static inline double rl_hsum_sse2(__m128d v) {
    double t[2];
    _mm_storeu_pd(t, v);
    return t[0] + t[1];
}
RL_ATTR_AVX2 static inline double rl_hsum_avx2(__m256d v) {
    double t[4];
    _mm256_storeu_pd(t, v);
    return (t[0] + t[1]) + (t[2] + t[3]);
}
RL_ATTR_AVX512 static inline double rl_hsum_avx512(__m512d v) {
    double t[8];
    _mm512_storeu_pd(t, v);
    return ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]));
}
#define RL_SSE2_MULADD(s, c, b) _mm_add_pd((b), _mm_mul_pd((s), (c)))
RL_STREAM_KERNELS(RL_ATTR_SSE2, sse2, __m128d, 2, _mm_loadu_pd, _mm_storeu_pd, _mm_add_pd, RL_SSE2_MULADD,
                  _mm_set1_pd, _mm_setzero_pd, rl_hsum_sse2)
RL_STREAM_KERNELS(RL_ATTR_AVX2, avx2, __m256d, 4, _mm256_loadu_pd, _mm256_storeu_pd, _mm256_add_pd,
                  _mm256_fmadd_pd, _mm256_set1_pd, _mm256_setzero_pd, rl_hsum_avx2)
RL_STREAM_KERNELS(RL_ATTR_AVX512, avx512, __m512d, 8, _mm512_loadu_pd, _mm512_storeu_pd, _mm512_add_pd,
                  _mm512_fmadd_pd, _mm512_set1_pd, _mm512_setzero_pd, rl_hsum_avx512)
/* Non-temporal (streaming) stores: they bypass the caches and skip the read-for-ownership of the destination;
 * the destination must be aligned to the vector width (the sweep's arrays are 64-byte aligned). */
RL_WRITE_KERNELS(RL_ATTR_SSE2, sse2_nt, __m128d, 2, _mm_loadu_pd, _mm_stream_pd, RL_SSE2_MULADD, _mm_set1_pd)
RL_WRITE_KERNELS(RL_ATTR_AVX2, avx2_nt, __m256d, 4, _mm256_loadu_pd, _mm256_stream_pd, _mm256_fmadd_pd,
                 _mm256_set1_pd)
RL_WRITE_KERNELS(RL_ATTR_AVX512, avx512_nt, __m512d, 8, _mm512_loadu_pd, _mm512_stream_pd, _mm512_fmadd_pd,
                 _mm512_set1_pd)
#endif

#ifdef RL_ARM64
static inline double rl_hsum_neon(float64x2_t v) { return vaddvq_f64(v); }
#define RL_NEON_MULADD(s, c, b) vfmaq_f64((b), (s), (c))
#define RL_NEON_ZERO() vdupq_n_f64(0.0)
RL_STREAM_KERNELS(RL_ATTR_NEON, neon, float64x2_t, 2, vld1q_f64, vst1q_f64, vaddq_f64, RL_NEON_MULADD,
                  vdupq_n_f64, RL_NEON_ZERO, rl_hsum_neon)
#endif

/* Uniform entry points of one ISA's stream kernels for the kernel table: arrays x0, x1, x2 (those the kernel
 * does not touch are ignored), n doubles each, `reps` passes; the read sum or 0. The non-temporal ones end with a
 * store fence so the streamed data is globally visible when they return. */
#define RL_BW_ENTRIES(SUF)                                                                                         \
    static double rl_bw_read_##SUF(double *x0, double *x1, double *x2, int64_t n, int64_t reps) {                  \
        (void)x1;                                                                                                  \
        (void)x2;                                                                                                  \
        return rl_read_##SUF(x0, n, reps);                                                                         \
    }                                                                                                              \
    RL_BW_WRITE_ENTRIES(SUF, , )
#define RL_BW_WRITE_ENTRIES(SUF, NT, FENCE)                                                                        \
    static double rl_bw_copy_##SUF##NT(double *x0, double *x1, double *x2, int64_t n, int64_t reps) {              \
        (void)x2;                                                                                                  \
        rl_copy_##SUF##NT(x0, x1, n, reps);                                                                        \
        FENCE;                                                                                                     \
        return 0.0;                                                                                                \
    }                                                                                                              \
    static double rl_bw_triad_##SUF##NT(double *x0, double *x1, double *x2, int64_t n, int64_t reps) {             \
        rl_triad_##SUF##NT(x0, x1, x2, n, reps);                                                                   \
        FENCE;                                                                                                     \
        return 0.0;                                                                                                \
    }

RL_BW_ENTRIES(scalar)
#ifdef RL_X86
RL_BW_ENTRIES(sse2)
RL_BW_ENTRIES(avx2)
RL_BW_ENTRIES(avx512)
RL_BW_WRITE_ENTRIES(sse2, _nt, _mm_sfence())
RL_BW_WRITE_ENTRIES(avx2, _nt, _mm_sfence())
RL_BW_WRITE_ENTRIES(avx512, _nt, _mm_sfence())
#endif
#ifdef RL_ARM64
RL_BW_ENTRIES(neon)
#endif

typedef double (*rl_bw_fn)(double *x0, double *x1, double *x2, int64_t n, int64_t reps);

/* Per-ISA initialisers: KERNEL's regular-store entries, and its non-temporal ones (x86 only; elsewhere, and for
 * the read kernel, the regular entries serve). */
#define RL_BW_FNS(KERNEL)                                                                                          \
    {                                                                                                              \
        [RL_SIMD_SCALAR] = rl_bw_##KERNEL##_scalar,                                                                \
        RL_X86_ONLY([RL_SIMD_SSE2] = rl_bw_##KERNEL##_sse2, [RL_SIMD_AVX2] = rl_bw_##KERNEL##_avx2,                \
                    [RL_SIMD_AVX512] = rl_bw_##KERNEL##_avx512, )                                                  \
        RL_ARM64_ONLY([RL_SIMD_NEON] = rl_bw_##KERNEL##_neon, )                                                    \
    }
#define RL_BW_NT_FNS(KERNEL)                                                                                       \
    {                                                                                                              \
        RL_X86_ONLY([RL_SIMD_SSE2] = rl_bw_##KERNEL##_sse2_nt, [RL_SIMD_AVX2] = rl_bw_##KERNEL##_avx2_nt,          \
                    [RL_SIMD_AVX512] = rl_bw_##KERNEL##_avx512_nt, )                                               \
    }

/* The bandwidth kernel table, in rl_bw_kernel order (read, copy, triad fixed first). A new kernel is a kernel per
 * ISA above, its entries, and one row here; the Python side lists it in roofline/_hardware/_ceilings.py (KERNELS). */
static const struct {
    const char *name;
    int arrays;
    rl_bw_fn fn[RL_SIMD_COUNT]; /* regular stores, per ISA */
    rl_bw_fn nt[RL_SIMD_COUNT]; /* non-temporal stores, per ISA (NULL: the regular entry) */
} rl_bw_table[] = {
    {"read", 1, RL_BW_FNS(read), {NULL}},
    {"copy", 2, RL_BW_FNS(copy), RL_BW_NT_FNS(copy)},
    {"triad", 3, RL_BW_FNS(triad), RL_BW_NT_FNS(triad)},
};

#define RL_BW_TABLE_SIZE ((int)(sizeof(rl_bw_table) / sizeof(rl_bw_table[0])))
_Static_assert(RL_BW_TABLE_SIZE <= RL_BW_MAX, "raise RL_BW_MAX in cpu.h");

int rl_cpu_bw_kernel_count(void) { return RL_BW_TABLE_SIZE; }

const char *rl_cpu_bw_kernel_name(rl_bw_kernel kernel) {
    return (kernel >= 0 && kernel < RL_BW_TABLE_SIZE) ? rl_bw_table[kernel].name : "?";
}

int rl_cpu_bw_kernel_arrays(rl_bw_kernel kernel) {
    return (kernel >= 0 && kernel < RL_BW_TABLE_SIZE) ? rl_bw_table[kernel].arrays : 0;
}

rl_bw_kernel rl_cpu_bw_kernel_find(const char *name) {
    for (int k = 0; k < RL_BW_TABLE_SIZE; k++) {
        if (strcmp(name, rl_bw_table[k].name) == 0) {
            return k;
        }
    }
    return -1;
}

/* Run `reps` passes of `kernel` over arrays x0, x1, x2 (n doubles each) with regular stores, or with
 * non-temporal stores when `nt` is set and the ISA has them (x86; elsewhere regular stores). Returns the read sum
 * or 0. An ISA without an entry runs the scalar one. */
double rl_bw_passes(rl_simd simd, rl_bw_kernel kernel, int nt, double *x0, double *x1, double *x2, int64_t n,
                    int64_t reps) {
    if (kernel < 0 || kernel >= RL_BW_TABLE_SIZE) {
        return NAN;
    }
    rl_bw_fn fn = NULL;
    if (simd >= 0 && simd < RL_SIMD_COUNT) {
        fn = nt ? rl_bw_table[kernel].nt[simd] : NULL;
        fn = fn != NULL ? fn : rl_bw_table[kernel].fn[simd];
    }
    return (fn != NULL ? fn : rl_bw_table[kernel].fn[RL_SIMD_SCALAR])(x0, x1, x2, n, reps);
}

double rl_cpu_bw_kernel_once(rl_simd simd, rl_bw_kernel kernel, int nt, double *buf, int64_t n) {
    return rl_bw_passes(simd, kernel, nt, buf, buf + n, buf + 2 * n, n, 1);
}
