/* Unit tests of csrc/cpu.c, built with -fsanitize=address,undefined by tests/test_cpu_c.py.
 *
 * Expected values are computed here from the kernels' definitions: the FMA recurrence x <- x*m + a per chain,
 * read = sum, copy b = a, triad a = b + 3*c. Exit status 0 when every check passes; failures are printed. */
#define _GNU_SOURCE
#include "cpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond, ...)                                                                                           \
    do {                                                                                                           \
        if (!(cond)) {                                                                                             \
            failures++;                                                                                            \
            printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                                                 \
            printf(__VA_ARGS__);                                                                                   \
            printf("\n");                                                                                          \
        }                                                                                                          \
    } while (0)

/* Sum over chains k of the recurrence x <- x*m + a from x0 + k/128, iterated `iters` times in the element type
 * (double or float), each lane of a chain identical. */
static double expected_fma(rl_simd simd, rl_dtype dtype, int64_t iters) {
    int chains = rl_cpu_fma_accumulators(simd);
    int lanes = rl_cpu_simd_lanes(simd, rl_cpu_fma_elem_bytes(dtype));
    double total = 0.0;
    for (int k = 0; k < chains; k++) {
        if (dtype == RL_DT_FLOAT64) {
            double x = RL_FMA_X0 + k * 0.0078125;
            for (int64_t i = 0; i < iters; i++) {
                x = x * RL_FMA_MUL + RL_FMA_ADD;
            }
            total += lanes * x;
        } else {
            float x = (float)(RL_FMA_X0 + k * 0.0078125);
            for (int64_t i = 0; i < iters; i++) {
                x = x * (float)RL_FMA_MUL + (float)RL_FMA_ADD;
            }
            total += lanes * (double)x;
        }
    }
    return total;
}

static void test_fma_kernels(void) {
    const int64_t iters[] = {0, 1, 7, 1000};
    for (int s = 0; s < RL_SIMD_COUNT; s++) {
        if (!rl_cpu_simd_supported((rl_simd)s)) {
            continue;
        }
        for (int d = 0; d < 2; d++) {
            for (size_t i = 0; i < sizeof(iters) / sizeof(iters[0]); i++) {
                double got = rl_cpu_fma_kernel((rl_simd)s, rl_cpu_fma_dtype(d), iters[i]);
                double want = expected_fma((rl_simd)s, rl_cpu_fma_dtype(d), iters[i]);
                /* fused vs separate rounding differ in the last bits of each step */
                CHECK(fabs(got - want) <= 1e-5 * fabs(want), "%s %s iters=%lld: got %.17g want %.17g",
                      rl_cpu_simd_name((rl_simd)s), d ? "f32" : "f64", (long long)iters[i], got, want);
            }
        }
    }
}

static void test_stream_kernels(void) {
    const int64_t sizes[] = {8, 64, 72, 1000, 4096 + 24};
    for (int s = 0; s < RL_SIMD_COUNT; s++) {
        if (!rl_cpu_simd_supported((rl_simd)s)) {
            continue;
        }
        for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
            int64_t n = sizes[z];
            for (int nt = 0; nt < 2; nt++) {
                double *buf = aligned_alloc(64, (size_t)(3 * n) * sizeof(double));
                CHECK(buf != NULL, "aligned_alloc");
                if (buf == NULL) {
                    return;
                }
                double *x0 = buf, *x1 = buf + n, *x2 = buf + 2 * n;
                for (int64_t i = 0; i < n; i++) {
                    x0[i] = (double)(i % 97);
                    x1[i] = -1.0;
                    x2[i] = (double)(i % 13);
                }
                /* read: sum of small integers is exact */
                double want = 0.0;
                for (int64_t i = 0; i < n; i++) {
                    want += (double)(i % 97);
                }
                double got = rl_cpu_bw_kernel_once((rl_simd)s, RL_BW_READ, nt, buf, n);
                CHECK(got == want, "%s read n=%lld: %g != %g", rl_cpu_simd_name((rl_simd)s), (long long)n, got, want);
                /* copy: x1 = x0 */
                rl_cpu_bw_kernel_once((rl_simd)s, RL_BW_COPY, nt, buf, n);
                int ok = 1;
                for (int64_t i = 0; i < n; i++) {
                    ok &= x1[i] == (double)(i % 97);
                }
                CHECK(ok, "%s copy nt=%d n=%lld", rl_cpu_simd_name((rl_simd)s), nt, (long long)n);
                /* triad: x0 = x1 + 3*x2, exact on small integers */
                rl_cpu_bw_kernel_once((rl_simd)s, RL_BW_TRIAD, nt, buf, n);
                ok = 1;
                for (int64_t i = 0; i < n; i++) {
                    ok &= x0[i] == (double)(i % 97) + RL_TRIAD_SCALAR * (double)(i % 13);
                }
                CHECK(ok, "%s triad nt=%d n=%lld", rl_cpu_simd_name((rl_simd)s), nt, (long long)n);
                free(buf);
            }
        }
    }
}

static void test_measurements(void) {
    rl_cpu_error err = {NULL, 0};
    rl_fma_result r;
    for (int threads = 1; threads <= 3; threads++) {
        int rc = rl_cpu_fma_peak(RL_SIMD_AUTO, RL_DT_FLOAT32, 0.02, threads, 3, RL_STAT_MEDIAN, &r, &err);
        CHECK(rc == 0, "fma peak threads=%d failed in %s", threads, err.call ? err.call : "?");
        CHECK(r.flops > 0 && r.best_flops >= r.flops && r.threads == threads, "fma result threads=%d", threads);
        int lanes = rl_cpu_simd_lanes(r.simd, 4);
        CHECK(r.flop_per_rep % ((int64_t)threads * rl_cpu_fma_accumulators(r.simd) * lanes * 2) == 0,
              "flop count is whole iterations");
    }
    const int64_t sizes[] = {16 << 10, 1 << 20, 3 << 20};
    const rl_bw_kernel kernels[] = {RL_BW_READ, RL_BW_COPY, RL_BW_TRIAD};
    double rates[9];
    int pinned = -1;
    double share = -1;
    for (int threads = 1; threads <= 3; threads++) {
        memset(rates, 0, sizeof(rates));
        int rc = rl_cpu_bandwidth_sweep(RL_SIMD_AUTO, kernels, 3, sizes, 3, threads, 2, 0.0005, RL_STAT_MAX,
                                        2 << 20, threads == 2, rates, &pinned, &share, &err);
        CHECK(rc == 0, "sweep threads=%d failed in %s", threads, err.call ? err.call : "?");
        for (int i = 0; i < 9; i++) {
            CHECK(rates[i] > 0 && isfinite(rates[i]), "rate %d = %g", i, rates[i]);
        }
        CHECK(pinned == 0 || pinned == 1, "pinned flag");
        CHECK(share >= 0 && share < 1.5, "cpu share %g", share);
    }
    /* a working set below 1 KiB per thread is rejected, naming the call */
    const int64_t tiny[] = {512};
    err.call = NULL;
    CHECK(rl_cpu_bandwidth_sweep(RL_SIMD_AUTO, kernels, 1, tiny, 1, 1, 1, 0.0, RL_STAT_MEDIAN, 0, 0, rates, NULL, NULL,
                                 &err) == -1 &&
              err.call != NULL,
          "tiny size rejected");
    const rl_bw_kernel bad[] = {(rl_bw_kernel)7};
    CHECK(rl_cpu_bandwidth_sweep(RL_SIMD_AUTO, bad, 1, sizes, 1, 1, 1, 0.0, RL_STAT_MEDIAN, 0, 0, rates, NULL, NULL,
                                 &err) == -1,
          "bad kernel rejected");
}

static void test_info_and_names(void) {
    rl_cpu_info info;
    rl_cpu_info_get(&info);
    CHECK(info.cpus >= 1 && info.cpus == rl_cpu_count(), "cpus %d", info.cpus);
    CHECK(info.online >= 1, "online %d", info.online);
    CHECK(info.model[0] != '\0', "model name");
    CHECK(info.clock_hz >= 0, "clock");
    for (int level = 1; level <= RL_CPU_MAX_LEVEL; level++) {
        CHECK(info.cache_bytes[level] >= 0 && (info.cache_bytes[level] == 0 || info.cache_instances[level] >= 1),
              "cache L%d", level);
    }
    CHECK(strcmp(rl_cpu_simd_name((rl_simd)99), "?") == 0, "bad simd name");
    CHECK(strcmp(rl_cpu_bw_kernel_name(RL_BW_TRIAD), "triad") == 0, "kernel name");
    CHECK(rl_cpu_bw_kernel_arrays(RL_BW_COPY) == 2 && rl_cpu_bw_kernel_arrays((rl_bw_kernel)9) == 0, "arrays");
    CHECK(rl_cpu_simd_lanes(RL_SIMD_AVX512, 8) == 8 && rl_cpu_simd_lanes(RL_SIMD_AVX2, 4) == 8 &&
              rl_cpu_simd_lanes(RL_SIMD_SCALAR, 8) == 1 && rl_cpu_simd_lanes(RL_SIMD_SSE2, 3) == 0,
          "lanes");
    CHECK(rl_cpu_simd_supported(RL_SIMD_SCALAR) && rl_cpu_simd_supported(rl_cpu_simd_best()), "best is supported");
}

/* The kernel tables: the fixed entries, lookups by name, and entries that do not exist. */
static void test_tables(void) {
    CHECK(rl_cpu_fma_dtype_count() >= 2 && rl_cpu_fma_dtype(0) == RL_DT_FLOAT64 &&
              rl_cpu_fma_dtype(1) == RL_DT_FLOAT32 && rl_cpu_fma_dtype(-1) == RL_DT_UNKNOWN &&
              rl_cpu_fma_dtype(rl_cpu_fma_dtype_count()) == RL_DT_UNKNOWN,
          "fma dtypes");
    CHECK(rl_cpu_fma_elem_bytes(RL_DT_FLOAT64) == 8 && rl_cpu_fma_elem_bytes(RL_DT_FLOAT32) == 4 &&
              rl_cpu_fma_elem_bytes(RL_DT_BOOL) == 0,
          "fma element bytes");
    CHECK(rl_cpu_fma_supported(RL_SIMD_SCALAR, RL_DT_FLOAT64) && !rl_cpu_fma_supported(RL_SIMD_SCALAR, RL_DT_BOOL) &&
              !rl_cpu_fma_supported((rl_simd)99, RL_DT_FLOAT64),
          "fma supported");
    CHECK(isnan(rl_cpu_fma_kernel(RL_SIMD_SCALAR, RL_DT_BOOL, 10)), "no kernel: NaN");
    rl_fma_result r;
    rl_cpu_error err = {NULL, 0};
    CHECK(rl_cpu_fma_peak(RL_SIMD_SCALAR, RL_DT_BOOL, 0.01, 1, 1, RL_STAT_MEDIAN, &r, &err) == -1 && err.call != NULL &&
              strcmp(err.call, "rl_cpu_fma_supported") == 0,
          "fma peak of a dtype without a kernel is refused");
    CHECK(rl_cpu_bw_kernel_count() >= 3 && rl_cpu_bw_kernel_count() <= RL_BW_MAX, "kernel count");
    CHECK(rl_cpu_bw_kernel_find("read") == RL_BW_READ && rl_cpu_bw_kernel_find("copy") == RL_BW_COPY &&
              rl_cpu_bw_kernel_find("triad") == RL_BW_TRIAD && rl_cpu_bw_kernel_find("Triad") == -1 &&
              rl_cpu_bw_kernel_find("") == -1,
          "kernel lookup");
    for (int k = 0; k < rl_cpu_bw_kernel_count(); k++) {
        CHECK(rl_cpu_bw_kernel_find(rl_cpu_bw_kernel_name(k)) == k, "kernel %d round trip", k);
        CHECK(rl_cpu_bw_kernel_arrays(k) >= 1 && rl_cpu_bw_kernel_arrays(k) <= RL_BW_MAX_ARRAYS, "kernel %d arrays", k);
    }
    double buf[8] = {0};
    CHECK(isnan(rl_cpu_bw_kernel_once(RL_SIMD_SCALAR, (rl_bw_kernel)rl_cpu_bw_kernel_count(), 0, buf, 8)) &&
              isnan(rl_cpu_bw_kernel_once(RL_SIMD_SCALAR, (rl_bw_kernel)-1, 0, buf, 8)),
          "no such kernel: NaN");
}

/* A made-up machine for rl_cpu_lowp_check: x86 with every feature the kernels need, the OS state enabled and the
 * AMX permission granted; tests clear one piece at a time. */
static rl_cpu_features full_features(void) {
    rl_cpu_features f;
    memset(&f, 0, sizeof(f));
    f.x86 = 1;
    f.leaf1_ecx = 1u << 27;                                          /* OSXSAVE */
    f.leaf7_ebx = (1u << 16) | (1u << 5);                            /* AVX512F, AVX2 */
    f.leaf7_ecx = 1u << 11;                                          /* AVX512_VNNI */
    f.leaf7_edx = (1u << 22) | (1u << 23) | (1u << 24) | (1u << 25); /* AMX-BF16, AVX512_FP16, AMX-TILE, AMX-INT8 */
    f.leaf7_1_eax = (1u << 5) | (1u << 4);                           /* AVX512_BF16, AVX_VNNI */
    f.xcr0 = 0xE7ull | (3ull << 17);                                 /* x87, SSE, AVX, AVX-512, AMX tile state */
    f.amx_perm = 0;
    return f;
}

/* The index of a low-precision kernel by name (the table in cpu.c is the only list of them). */
#define LOWP(name) ((rl_lowp)rl_cpu_lowp_find(name))

/* Each kernel's decision, and the reason named when one piece is missing. */
static void test_lowp_check(void) {
    char why[256];
    rl_cpu_features f = full_features();
#ifdef __x86_64__
    /* a machine with everything runs every kernel this build has (which ones depends on the compiler) */
    for (int k = 0; k < rl_cpu_lowp_count(); k++) {
        int ok = rl_cpu_lowp_check((rl_lowp)k, &f, why, sizeof(why));
        CHECK((ok == 1 && why[0] == '\0') || (ok == 0 && strstr(why, "this build has no") != NULL), "full %d: %s", k,
              why);
    }
#if defined(__linux__) && (defined(__clang__) ? __clang_major__ >= 12 : __GNUC__ >= 11)
    CHECK(rl_cpu_lowp_check(LOWP("avx512_bf16"), &f, why, sizeof(why)) == 1 && why[0] == '\0', "bf16: %s", why);
    CHECK(rl_cpu_lowp_check(LOWP("avx512_vnni"), &f, why, sizeof(why)) == 1, "vnni: %s", why);
    CHECK(rl_cpu_lowp_check(LOWP("amx_bf16"), &f, why, sizeof(why)) == 1, "amx bf16: %s", why);
    CHECK(rl_cpu_lowp_check(LOWP("amx_int8"), &f, why, sizeof(why)) == 1, "amx int8: %s", why);
    /* Zen 4: AVX512_BF16 and VNNI, no AMX, no AVX512_FP16 */
    rl_cpu_features zen4 = f;
    zen4.leaf7_edx = 0;
    zen4.xcr0 = 0xE7;
    zen4.amx_perm = -1;
    CHECK(rl_cpu_lowp_check(LOWP("avx512_bf16"), &zen4, why, sizeof(why)) == 1, "zen4 bf16");
    CHECK(rl_cpu_lowp_check(LOWP("amx_bf16"), &zen4, why, sizeof(why)) == 0 && strstr(why, "no AMX") != NULL,
          "zen4 amx: %s", why);
    CHECK(rl_cpu_lowp_check(LOWP("avx512_fp16"), &zen4, why, sizeof(why)) == 0 &&
              (strstr(why, "AVX512_FP16") != NULL || strstr(why, "GCC 12") != NULL),
          "zen4 fp16: %s", why);
    /* AMX in cpuid but the OS has not enabled the tile state */
    rl_cpu_features g = f;
    g.xcr0 = 0xE7;
    CHECK(rl_cpu_lowp_check(LOWP("amx_bf16"), &g, why, sizeof(why)) == 0 && strstr(why, "XCR0") != NULL,
          "amx without XCR0: %s", why);
    /* the kernel refuses the tile data permission (older than 5.16: EINVAL) */
    g = f;
    g.amx_perm = 22;
    CHECK(rl_cpu_lowp_check(LOWP("amx_int8"), &g, why, sizeof(why)) == 0 && strstr(why, "ARCH_REQ_XCOMP_PERM") &&
              strstr(why, "errno 22"),
          "amx refused: %s", why);
    g.amx_perm = -1;
    CHECK(rl_cpu_lowp_check(LOWP("amx_int8"), &g, why, sizeof(why)) == 0 && strstr(why, "not requested"),
          "amx not asked: %s", why);
    /* AMX-TILE without AMX-BF16 */
    g = f;
    g.leaf7_edx &= ~(1u << 22);
    CHECK(rl_cpu_lowp_check(LOWP("amx_bf16"), &g, why, sizeof(why)) == 0 &&
              rl_cpu_lowp_check(LOWP("amx_int8"), &g, why, sizeof(why)) == 1,
          "amx-bf16 bit");
#endif
    /* no AVX-512 register state from the OS */
    rl_cpu_features h = f;
    h.xcr0 = 0x7;
    CHECK(rl_cpu_lowp_check(LOWP("avx512_vnni"), &h, why, sizeof(why)) == 0 &&
              (strstr(why, "XCR0 = 0x7") || strstr(why, "this build has no")),
          "no zmm state: %s", why);
    h = f;
    h.leaf1_ecx = 0;
    CHECK(rl_cpu_lowp_check(LOWP("avx512_bf16"), &h, why, sizeof(why)) == 0, "no OSXSAVE");
    /* Alder Lake: AVX-VNNI on ymm, no AVX-512 in cpuid or XCR0 */
    h = f;
    h.leaf7_ebx = 1u << 5; /* AVX2 */
    h.leaf7_ecx = h.leaf7_edx = 0;
    h.leaf7_1_eax = 1u << 4;
    h.xcr0 = 0x7;
    CHECK(rl_cpu_lowp_check(LOWP("avx_vnni"), &h, why, sizeof(why)) == 1 || strstr(why, "this build has no") != NULL,
          "alder lake avx_vnni: %s", why);
    CHECK(rl_cpu_lowp_check(LOWP("avx512_vnni"), &h, why, sizeof(why)) == 0 && strstr(why, "no AVX-512F") != NULL,
          "alder lake avx512_vnni: %s", why);
    h.leaf7_ebx = 0; /* a VM that hides AVX2 but shows AVX-VNNI: not run (the kernel is built for AVX2) */
    CHECK(rl_cpu_lowp_check(LOWP("avx_vnni"), &h, why, sizeof(why)) == 0 &&
              (strstr(why, "no AVX2") != NULL || strstr(why, "this build has no") != NULL),
          "avx_vnni without avx2: %s", why);
    h.leaf7_ebx = 1u << 5;
    h.xcr0 = 0x3; /* the OS has not enabled the ymm state */
    CHECK(rl_cpu_lowp_check(LOWP("avx_vnni"), &h, why, sizeof(why)) == 0 &&
              (strstr(why, "AVX register state") != NULL || strstr(why, "this build has no") != NULL),
          "avx_vnni without ymm state: %s", why);
    /* Zen 3 / AVX2 only */
    h = f;
    h.leaf7_ebx = h.leaf7_ecx = h.leaf7_edx = h.leaf7_1_eax = 0;
    for (int k = 0; k < rl_cpu_lowp_count(); k++) {
        CHECK(rl_cpu_lowp_check((rl_lowp)k, &h, why, sizeof(why)) == 0 && why[0] != '\0', "avx2-only %d", k);
    }
    CHECK(strstr((rl_cpu_lowp_check(LOWP("avx512_bf16"), &h, why, sizeof(why)), why), "BF16") != NULL,
          "names the flag: %s", why);
#endif
    rl_cpu_features arm = f;
    arm.x86 = 0;
    for (int k = 0; k < rl_cpu_lowp_count(); k++) {
        CHECK(rl_cpu_lowp_check((rl_lowp)k, &arm, why, sizeof(why)) == 0 && strstr(why, "x86-64") != NULL,
              "non-x86 %d: %s", k, why);
    }
    CHECK(rl_cpu_lowp_check((rl_lowp)rl_cpu_lowp_count(), &f, why, sizeof(why)) == 0, "invalid kernel");
    CHECK(rl_cpu_lowp_check(LOWP("avx512_bf16"), &arm, NULL, 0) == 0, "why may be NULL");
    /* the table */
    for (int k = 0; k < rl_cpu_lowp_count(); k++) {
        CHECK(rl_cpu_lowp_find(rl_cpu_lowp_name((rl_lowp)k)) == k, "name round trip %d", k);
        CHECK(rl_cpu_lowp_flop_per_iter((rl_lowp)k) > 0 && rl_cpu_lowp_accumulators((rl_lowp)k) > 0, "flop %d", k);
    }
    CHECK(rl_cpu_lowp_find("amx") == -1 && rl_cpu_lowp_find(NULL) == -1 && rl_cpu_lowp_name((rl_lowp)-1) == NULL,
          "lookups");
    /* operations per iteration, from the instruction definitions */
    CHECK(rl_cpu_lowp_flop_per_iter(LOWP("avx512_bf16")) == 12 * 16 * 2 * 2, "bf16 flop");
    CHECK(rl_cpu_lowp_flop_per_iter(LOWP("avx512_vnni")) == 12 * 16 * 4 * 2, "vnni ops");
    CHECK(rl_cpu_lowp_flop_per_iter(LOWP("avx512_fp16")) == 12 * 32 * 2, "fp16 flop");
    CHECK(rl_cpu_lowp_flop_per_iter(LOWP("amx_bf16")) == 4 * 16 * 16 * 32 * 2, "amx bf16 flop");
    CHECK(rl_cpu_lowp_flop_per_iter(LOWP("amx_int8")) == 4 * 16 * 16 * 64 * 2, "amx int8 ops");
    CHECK(rl_cpu_lowp_flop_per_iter(LOWP("avx_vnni")) == 12 * 8 * 4 * 2, "avx vnni ops");
    CHECK(isnan(rl_cpu_lowp_kernel((rl_lowp)rl_cpu_lowp_count(), 1)), "invalid kernel: NaN");
}

/* The kernels this machine can run, against their definitions (cpu.h). */
static void test_lowp_kernels(void) {
    const int64_t iters[] = {0, 1, 7, 1000};
    int ran = 0;
    for (int k = 0; k < rl_cpu_lowp_count(); k++) {
        if (!rl_cpu_lowp_available((rl_lowp)k)) {
            continue;
        }
        ran++;
        for (size_t i = 0; i < sizeof(iters) / sizeof(iters[0]); i++) {
            int64_t n = iters[i];
            double got = rl_cpu_lowp_kernel((rl_lowp)k, n), want = 0.0, lo = 0.0, hi = 0.0;
            if (k == LOWP("avx512_bf16")) {
                for (int c = 0; c < 12; c++) {
                    want += 16 * (1.0 + c / 128.0 + (double)n / 512.0);
                }
            } else if (k == LOWP("avx512_vnni")) {
                for (int c = 0; c < 12; c++) {
                    want += 16 * (double)(c + 2 * n);
                }
            } else if (k == LOWP("avx_vnni")) { /* 8 int32 lanes, x0 = c, + 2 per iteration */
                for (int c = 0; c < 12; c++) {
                    want += 8 * (double)(c + 2 * n);
                }
            } else if (k == LOWP("amx_bf16")) {
                for (int t = 0; t < 4; t++) {
                    want += 256 * (1.0 + t / 128.0 + (double)n / 32.0);
                }
            } else if (k == LOWP("amx_int8")) {
                for (int t = 0; t < 4; t++) {
                    want += 256 * (double)(t + 64 * n);
                }
            } else if (k == LOWP("avx512_fp16")) { /* every lane within [1, x0] */
                for (int c = 0; c < 12; c++) {
                    lo += 32 * 1.0;
                    hi += 32 * (1.0 + c / 128.0);
                }
                CHECK(got >= lo - 1e-9 && got <= hi + 1e-9, "fp16 iters=%lld: %g not in [%g, %g]", (long long)n, got,
                      lo, hi);
                continue;
            } else {
                CHECK(0, "%s: a kernel of the table this test has no expected result for", rl_cpu_lowp_name(k));
                continue;
            }
            CHECK(got == want, "%s iters=%lld: got %.17g want %.17g", rl_cpu_lowp_name((rl_lowp)k), (long long)n, got,
                  want);
        }
        rl_fma_result r;
        rl_cpu_error err = {NULL, 0};
        int rc = rl_cpu_lowp_peak((rl_lowp)k, 0.02, 2, 3, RL_STAT_MEDIAN, &r, &err);
        CHECK(rc == 0 && r.flops > 0 && r.threads == 2 && r.flop_per_rep % (2 * rl_cpu_lowp_flop_per_iter((rl_lowp)k)) == 0,
              "%s peak", rl_cpu_lowp_name((rl_lowp)k));
    }
    for (int k = 0; k < rl_cpu_lowp_count(); k++) {
        if (!rl_cpu_lowp_available((rl_lowp)k)) {
            rl_fma_result r;
            rl_cpu_error err = {NULL, 0};
            CHECK(rl_cpu_lowp_peak((rl_lowp)k, 0.01, 1, 1, RL_STAT_MEDIAN, &r, &err) == -1 &&
                      strcmp(err.call, "rl_cpu_lowp_available") == 0,
                  "%s refused where unavailable", rl_cpu_lowp_name((rl_lowp)k));
        }
    }
    /* the machine's own decision agrees with the pure check of its features */
    rl_cpu_features f;
    rl_cpu_features_get(&f);
    for (int k = 0; k < rl_cpu_lowp_count(); k++) {
        CHECK(rl_cpu_lowp_check((rl_lowp)k, &f, NULL, 0) == rl_cpu_lowp_available((rl_lowp)k), "decision %d", k);
    }
    printf("low-precision kernels run here: %d of %d\n", ran, rl_cpu_lowp_count());
}

int main(void) {
    test_info_and_names();
    test_tables();
    test_fma_kernels();
    test_stream_kernels();
    test_measurements();
    test_lowp_check();
    test_lowp_kernels();
    printf("%s: %d failure(s)\n", failures ? "FAILED" : "ok", failures);
    return failures != 0;
}
