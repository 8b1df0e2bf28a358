/* CPU ceiling microbenchmarks, 3: the thread team (pinned pthreads, a spinning barrier, a calibrated timing
 * protocol) and the two measurements, the all-core FMA peak and the bandwidth sweep (see cpu.h). */
#define _GNU_SOURCE
#include "cpu_arch.h"

/* ------------------------------------------------------------------------------------------------------------
 * 3. Thread team
 * ------------------------------------------------------------------------------------------------------------ */

/* Sense-counting barrier: spins briefly, then yields so an oversubscribed machine still makes progress. */
typedef struct {
    atomic_int count;
    atomic_int generation;
    int n;
} rl_barrier;

static void rl_barrier_wait(rl_barrier *b) {
    int gen = atomic_load_explicit(&b->generation, memory_order_acquire);
    if (atomic_fetch_add_explicit(&b->count, 1, memory_order_acq_rel) == b->n - 1) {
        atomic_store_explicit(&b->count, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&b->generation, 1, memory_order_acq_rel);
        return;
    }
    unsigned spins = 0;
    while (atomic_load_explicit(&b->generation, memory_order_acquire) == gen) {
        if (++spins > 2000) {
            sched_yield();
        }
    }
}

typedef struct rl_team rl_team;
typedef void (*rl_team_fn)(rl_team *team, int tid, void *arg);

struct rl_team {
    int n;                 /* threads */
    rl_barrier barrier;    /* all n threads */
    atomic_int gate;       /* 0: wait, 1: run, -1: abort (a thread could not be created) */
    atomic_int unpinned;   /* threads whose pinning failed */
    int cpus[RL_MAX_CPUS]; /* allowed CPUs, thread t runs on cpus[t % ncpus] */
    int ncpus;
    rl_team_fn fn;
    void *arg;
};

typedef struct {
    rl_team *team;
    int tid;
} rl_member;

static void *rl_team_main(void *p) {
    rl_member *m = p;
    rl_team *team = m->team;
#ifdef __linux__
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(team->cpus[m->tid % team->ncpus], &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0) {
        atomic_fetch_add(&team->unpinned, 1);
    }
#else
    atomic_fetch_add(&team->unpinned, 1);
#endif
    int gate;
    while ((gate = atomic_load_explicit(&team->gate, memory_order_acquire)) == 0) {
        sched_yield();
    }
    if (gate > 0) {
        team->fn(team, m->tid, team->arg);
    }
    return NULL;
}

/* Run fn(team, tid, arg) on n pinned threads (tid 0..n-1) and wait for all of them. *pinned is set to 1 when every
 * thread was pinned to its own CPU. Returns 0, or -1 with *err naming the failed call (no thread runs fn then). */
static int rl_team_run(int n, rl_team_fn fn, void *arg, int *pinned, rl_cpu_error *err) {
    rl_team *team = calloc(1, sizeof(*team));
    pthread_t *threads = calloc((size_t)n, sizeof(*threads));
    rl_member *members = calloc((size_t)n, sizeof(*members));
    if (team == NULL || threads == NULL || members == NULL) {
        free(team);
        free(threads);
        free(members);
        err->call = "calloc";
        err->code = ENOMEM;
        return -1;
    }
    team->n = n;
    team->barrier.n = n;
    team->ncpus = rl_allowed_cpus(team->cpus);
    team->fn = fn;
    team->arg = arg;
    int created = 0, rc = 0;
    for (; created < n; created++) {
        members[created].team = team;
        members[created].tid = created;
        rc = pthread_create(&threads[created], NULL, rl_team_main, &members[created]);
        if (rc != 0) {
            break;
        }
    }
    atomic_store_explicit(&team->gate, created == n ? 1 : -1, memory_order_release);
    for (int t = 0; t < created; t++) {
        pthread_join(threads[t], NULL);
    }
    if (pinned != NULL) {
        *pinned = atomic_load(&team->unpinned) == 0 && n <= team->ncpus;
    }
    free(team);
    free(threads);
    free(members);
    if (created != n) {
        err->call = "pthread_create";
        err->code = rc;
        return -1;
    }
    return 0;
}

/* Thread CPU time in seconds (0 where the clock is missing). */
static double rl_thread_cpu_time(void) {
#ifdef CLOCK_THREAD_CPUTIME_ID
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0) {
        return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    }
#endif
    return 0.0;
}

/* Calibrated timing shared by the team. Thread 0 times each run from one barrier to the next; runs repeat with
 * more work (`reps`, starting from `reps_hint`) until one lasts min_seconds, and then `repeats` runs are recorded
 * (the calibration run that reached min_seconds is the first of them). Two barriers per run: the one that ends
 * a run, and the one that publishes thread 0's decision and starts the next.
 *
 * Each thread also notes the CPU time its work took in cpu_slot[tid]; for each recorded run thread 0 appends
 * sum(CPU times) / (threads x wall time) to shares[]: near 1 when the threads had their CPUs to themselves, lower
 * when other processes competed for them. */
typedef struct {
    double min_seconds;
    int repeats;
    int64_t reps_hint;     /* first guess of reps (>= 1), written by thread 0 before the call */
    int64_t reps;          /* work units per run, written by thread 0 */
    int recorded;          /* runs recorded so far */
    int again;             /* 1 while more runs are needed */
    double *times;         /* [repeats] seconds per recorded run */
    double *cpu_slot;      /* [threads] CPU seconds of each thread's work in the current run */
    double *shares;        /* CPU share per recorded run, accumulated over calls (capacity: caller's business) */
    int nshares;
} rl_timing;

typedef void (*rl_work_fn)(void *job, int tid, int64_t reps);

#define RL_MAX_REPS ((int64_t)1 << 40)

static void rl_timed_runs(rl_team *team, int tid, rl_timing *tm, rl_work_fn work, void *job) {
    if (tid == 0) {
        tm->reps = tm->reps_hint > 0 ? tm->reps_hint : 1;
        tm->recorded = 0;
        tm->again = 1;
    }
    for (;;) {
        rl_barrier_wait(&team->barrier); /* publishes thread 0's decision and starts the run */
        if (!tm->again) {
            break;
        }
        double c0 = rl_thread_cpu_time(), t0 = rl_cpu_now();
        work(job, tid, tm->reps);
        tm->cpu_slot[tid] = rl_thread_cpu_time() - c0;
        rl_barrier_wait(&team->barrier); /* ends the run */
        if (tid == 0) {
            double dt = rl_cpu_now() - t0;
            if (tm->recorded > 0 || dt >= tm->min_seconds || tm->reps >= RL_MAX_REPS) {
                tm->times[tm->recorded++] = dt;
                double cpu = 0.0;
                for (int t = 0; t < team->n; t++) {
                    cpu += tm->cpu_slot[t];
                }
                tm->shares[tm->nshares++] = dt > 0.0 ? cpu / ((double)team->n * dt) : 0.0;
            } else {
                double factor = dt > 0.0 ? 1.25 * tm->min_seconds / dt : 1000.0;
                factor = factor < 2.0 ? 2.0 : (factor > 1000.0 ? 1000.0 : factor);
                tm->reps = (int64_t)((double)tm->reps * factor);
            }
            tm->again = tm->recorded < tm->repeats;
        }
    }
}

static int rl_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Seconds per run reduced so that the figure is a rate statistic: the median time gives the median rate, the
 * minimum time the best rate. Sorts `times` in place. */
static double rl_reduce_times(double *times, int n, rl_stat stat) {
    qsort(times, (size_t)n, sizeof(double), rl_cmp_double);
    if (stat == RL_STAT_MAX) {
        return times[0];
    }
    return n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
}

/* Median CPU share of the recorded runs (see rl_timing); 0 when unknown (no thread CPU clock). Sorts in place. */
static double rl_median_share(rl_timing *tm) {
    if (tm->nshares == 0) {
        return 0.0;
    }
    return rl_reduce_times(tm->shares, tm->nshares, RL_STAT_MEDIAN);
}

/* One padded slot per thread for results the compiler must not discard. */
typedef struct {
    volatile double value;
    char pad[RL_CACHE_LINE - sizeof(double)];
} rl_sink;

/* ------------------------------------------------------------------------------------------------------------
 * 4. Measurements
 * ------------------------------------------------------------------------------------------------------------ */

#define RL_FMA_ITERS_PER_REP 4096

/* A peak measurement: the FMA kernel of (simd, dtype), or the low-precision kernel `lowp` when it is >= 0, run by
 * every thread of a team under the timing protocol. */
typedef struct {
    rl_simd simd;
    rl_dtype dtype;
    int lowp;
    rl_timing tm;
    rl_sink *sinks;
} rl_peak_job;

static void rl_peak_work(void *p, int tid, int64_t reps) {
    rl_peak_job *job = p;
    int64_t iters = reps * RL_FMA_ITERS_PER_REP;
    job->sinks[tid].value += job->lowp >= 0 ? rl_cpu_lowp_kernel((rl_lowp)job->lowp, iters)
                                            : rl_cpu_fma_kernel(job->simd, job->dtype, iters);
}

static void rl_peak_member(rl_team *team, int tid, void *arg) {
    rl_timed_runs(team, tid, &((rl_peak_job *)arg)->tm, rl_peak_work, arg);
}

/* Run `job` (kernel fields set) on `threads` threads (<= 0: every CPU) `repeats` times within about `seconds`;
 * `flop_per_iter` is one thread's operations per kernel iteration. Fills `out` (its simd field is the caller's). */
static int rl_peak_run(rl_peak_job *job, double seconds, int threads, int repeats, rl_stat stat,
                       int64_t flop_per_iter, rl_fma_result *out, rl_cpu_error *err) {
    double start = rl_cpu_now();
    if (threads <= 0) {
        threads = rl_cpu_count();
    }
    if (repeats < 1) {
        repeats = 1;
    }
    job->tm.min_seconds = seconds / (repeats + 1);
    job->tm.repeats = repeats;
    job->tm.times = calloc((size_t)repeats, sizeof(double));
    job->tm.cpu_slot = calloc((size_t)threads, sizeof(double));
    job->tm.shares = calloc((size_t)repeats, sizeof(double));
    job->sinks = calloc((size_t)threads, sizeof(rl_sink));
    int rc = -1;
    if (job->tm.times == NULL || job->tm.cpu_slot == NULL || job->tm.shares == NULL || job->sinks == NULL) {
        err->call = "calloc";
        err->code = ENOMEM;
    } else {
        int pinned = 0;
        rc = rl_team_run(threads, rl_peak_member, job, &pinned, err);
        if (rc == 0) {
            int64_t flop = job->tm.reps * RL_FMA_ITERS_PER_REP * flop_per_iter * (int64_t)threads;
            double typical = rl_reduce_times(job->tm.times, repeats, stat);
            out->flop_per_rep = flop;
            out->flops = (double)flop / typical;
            out->best_flops = (double)flop / job->tm.times[0];
            out->threads = threads;
            out->pinned = pinned;
            out->repeats = repeats;
            out->cpu_share = rl_median_share(&job->tm);
            out->seconds = rl_cpu_now() - start;
        }
    }
    free(job->tm.times);
    free(job->tm.cpu_slot);
    free(job->tm.shares);
    free(job->sinks);
    return rc;
}

int rl_cpu_fma_peak(rl_simd simd, rl_dtype dtype, double seconds, int threads, int repeats, rl_stat stat,
                    rl_fma_result *out, rl_cpu_error *err) {
    if (simd == RL_SIMD_AUTO) {
        simd = rl_cpu_simd_best();
    }
    if (!rl_cpu_simd_supported(simd)) {
        err->call = "rl_cpu_simd_supported";
        err->code = EINVAL;
        return -1;
    }
    if (!rl_cpu_fma_supported(simd, dtype)) {
        err->call = "rl_cpu_fma_supported";
        err->code = EINVAL;
        return -1;
    }
    rl_peak_job job = {.simd = simd, .dtype = dtype, .lowp = -1};
    int lanes = rl_cpu_simd_lanes(simd, rl_cpu_fma_elem_bytes(dtype));
    int64_t per_iter = (int64_t)rl_cpu_fma_accumulators(simd) * lanes * 2;
    out->simd = simd;
    return rl_peak_run(&job, seconds, threads, repeats, stat, per_iter, out, err);
}

/* Low-precision kernels: the same team and timing protocol as the FMA peak, one kernel per thread. */
int rl_cpu_lowp_peak(rl_lowp k, double seconds, int threads, int repeats, rl_stat stat, rl_fma_result *out,
                     rl_cpu_error *err) {
    if (!rl_cpu_lowp_available(k)) {
        err->call = "rl_cpu_lowp_available";
        err->code = EINVAL;
        return -1;
    }
    rl_peak_job job = {.lowp = (int)k};
    out->simd = rl_cpu_simd_best();
    return rl_peak_run(&job, seconds, threads, repeats, stat, rl_cpu_lowp_flop_per_iter(k), out, err);
}

/* Per-thread layout of the bandwidth buffer: arrays of n doubles, array j starting at j * rl_bw_array_stride(n)
 * doubles from the thread's base. Arrays start 64-byte aligned and are offset from each other by 1088 bytes
 * modulo 4 KiB so a load and a store in flight do not alias in the low address bits. */
static int64_t rl_bw_array_stride(int64_t n) { return ((n * 8 + 4095) / 4096 * 4096 + 1088) / 8; }

/* Elements per array per thread for a working set of `bytes` over `threads` threads and `arrays` arrays: a
 * multiple of 8 (one cache line). */
static int64_t rl_bw_elems(int64_t bytes, int threads, int arrays) {
    return bytes / threads / arrays / 8 / 8 * 8;
}

typedef struct {
    rl_simd simd;
    const rl_bw_kernel *kernels;
    int nkernels;
    const int64_t *sizes;
    int nsizes;
    int threads;
    rl_stat stat;
    double *region;        /* whole buffer */
    int64_t thread_elems;  /* doubles reserved per thread */
    rl_bw_kernel kernel;   /* current kernel (all threads compute it themselves) */
    int64_t n;             /* current elements per array per thread */
    int nt;                /* current measurement uses non-temporal stores */
    int64_t nt_min_bytes;  /* working sets of at least this many bytes use non-temporal stores; 0: never */
    rl_timing tm;
    double *rates;
    rl_sink *sinks;
} rl_bw_job;

static void rl_bw_work(void *p, int tid, int64_t reps) {
    rl_bw_job *job = p;
    double *base = job->region + (int64_t)tid * job->thread_elems;
    int64_t n = job->n, stride = rl_bw_array_stride(n);
    double *x0 = base, *x1 = base + stride, *x2 = base + 2 * stride; /* RL_BW_MAX_ARRAYS arrays */
    job->sinks[tid].value += rl_bw_passes(job->simd, job->kernel, job->nt, x0, x1, x2, n, reps);
}

static void rl_bw_member(rl_team *team, int tid, void *arg) {
    rl_bw_job *job = arg;
    /* First touch by the thread that will use the memory, so its pages are local to that thread's node. */
    double *base = job->region + (int64_t)tid * job->thread_elems;
    for (int64_t i = 0; i < job->thread_elems; i++) {
        base[i] = 1.0;
    }
    for (int k = 0; k < job->nkernels; k++) {
        for (int i = 0; i < job->nsizes; i++) {
            rl_bw_kernel kernel = job->kernels[k];
            int64_t n = rl_bw_elems(job->sizes[i], job->threads, rl_cpu_bw_kernel_arrays(kernel));
            double pass_bytes = (double)n * 8.0 * rl_cpu_bw_kernel_arrays(kernel) * (double)job->threads;
            /* Every thread has left the previous measurement (and read its last decision) before thread 0 sets up
             * the next one. */
            rl_barrier_wait(&team->barrier);
            if (tid == 0) {
                job->kernel = kernel;
                job->n = n;
                job->nt = job->nt_min_bytes > 0 && job->sizes[i] >= job->nt_min_bytes;
                /* Start from the passes the previous size's rate predicts (larger sets rarely run faster), so
                 * most sizes need no calibration runs. */
                job->tm.reps_hint = 1;
                if (i > 0 && job->rates[(int64_t)k * job->nsizes + i - 1] > 0.0) {
                    double predicted = 1.25 * job->tm.min_seconds * job->rates[(int64_t)k * job->nsizes + i - 1];
                    job->tm.reps_hint = (int64_t)(predicted / pass_bytes) + 1;
                }
            }
            rl_timed_runs(team, tid, &job->tm, rl_bw_work, job);
            if (tid == 0) {
                job->rates[(int64_t)k * job->nsizes + i] =
                    (double)job->tm.reps * pass_bytes / rl_reduce_times(job->tm.times, job->tm.repeats, job->stat);
            }
        }
    }
}

int rl_cpu_bandwidth_sweep(rl_simd simd, const rl_bw_kernel *kernels, int nkernels, const int64_t *sizes,
                           int nsizes, int threads, int repeats, double min_seconds, rl_stat stat,
                           int64_t nt_min_bytes, int hugepages, double *rates, int *pinned, double *cpu_share,
                           rl_cpu_error *err) {
    if (simd == RL_SIMD_AUTO) {
        simd = rl_cpu_simd_best();
    }
    if (threads <= 0) {
        threads = rl_cpu_count();
    }
    if (!rl_cpu_simd_supported(simd) || nkernels < 1 || nsizes < 1 || repeats < 1) {
        err->call = "rl_cpu_bandwidth_sweep";
        err->code = EINVAL;
        return -1;
    }
    int64_t max_size = 0;
    for (int i = 0; i < nsizes; i++) {
        if (sizes[i] < 1024 * (int64_t)threads) {
            err->call = "rl_cpu_bandwidth_sweep";
            err->code = EINVAL;
            return -1;
        }
        max_size = sizes[i] > max_size ? sizes[i] : max_size;
    }
    for (int k = 0; k < nkernels; k++) {
        if (rl_cpu_bw_kernel_arrays(kernels[k]) == 0) {
            err->call = "rl_cpu_bandwidth_sweep";
            err->code = EINVAL;
            return -1;
        }
    }
    /* Per-thread share: the largest layout any kernel needs, rounded to 4 KiB (2 MiB when large, so each thread's
     * share starts on its own huge page). */
    int64_t per_thread = max_size / threads + RL_BW_MAX_ARRAYS * (4096 + 1088) + 4096;
    int64_t align = per_thread >= ((int64_t)8 << 20) ? ((int64_t)2 << 20) : 4096;
    per_thread = (per_thread + align - 1) / align * align;
    size_t total = (size_t)per_thread * (size_t)threads;
    void *region = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED) {
        err->call = "mmap";
        err->code = errno;
        return -1;
    }
#ifdef MADV_HUGEPAGE
    if (hugepages && align > 4096) {
        (void)madvise(region, total, MADV_HUGEPAGE); /* advisory: fewer TLB misses on large working sets */
    }
#endif
    rl_bw_job job = {.simd = simd,
                     .kernels = kernels,
                     .nkernels = nkernels,
                     .sizes = sizes,
                     .nsizes = nsizes,
                     .threads = threads,
                     .stat = stat,
                     .region = region,
                     .thread_elems = per_thread / 8,
                     .nt_min_bytes = nt_min_bytes,
                     .rates = rates};
    job.tm.min_seconds = min_seconds;
    job.tm.repeats = repeats;
    job.tm.times = calloc((size_t)repeats, sizeof(double));
    job.tm.cpu_slot = calloc((size_t)threads, sizeof(double));
    job.tm.shares = calloc((size_t)repeats * (size_t)nkernels * (size_t)nsizes, sizeof(double));
    job.sinks = calloc((size_t)threads, sizeof(rl_sink));
    int rc;
    if (job.tm.times == NULL || job.tm.cpu_slot == NULL || job.tm.shares == NULL || job.sinks == NULL) {
        err->call = "calloc";
        err->code = ENOMEM;
        rc = -1;
    } else {
        rc = rl_team_run(threads, rl_bw_member, &job, pinned, err);
    }
    if (rc == 0 && cpu_share != NULL) {
        *cpu_share = rl_median_share(&job.tm);
    }
    free(job.tm.times);
    free(job.tm.cpu_slot);
    free(job.tm.shares);
    free(job.sinks);
    munmap(region, total);
    return rc;
}
