/* CPU ceiling microbenchmarks, 1: machine information (sysfs, procfs, sysconf) and the clock (see cpu.h). */
#define _GNU_SOURCE
#include "cpu_arch.h"

double rl_cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ------------------------------------------------------------------------------------------------------------
 * 1. Machine information
 * ------------------------------------------------------------------------------------------------------------ */

/* Read the first line of `path` into buf (NUL-terminated, trailing newline removed). Returns 0, or -1 when the
 * file cannot be read. */
static int rl_read_line(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return -1;
    }
    char *ok = fgets(buf, (int)cap, f);
    fclose(f);
    if (ok == NULL) {
        return -1;
    }
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

/* Parse a sysfs cache size such as "48K", "2048K", "1M" into bytes; 0 when malformed. */
static int64_t rl_parse_size(const char *s) {
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (end == s || v <= 0) {
        return 0;
    }
    switch (toupper((unsigned char)*end)) {
    case 'K': return (int64_t)v << 10;
    case 'M': return (int64_t)v << 20;
    case 'G': return (int64_t)v << 30;
    default: return (int64_t)v;
    }
}

/* The logical CPUs this process may run on, in increasing order, written to cpus (capacity RL_MAX_CPUS).
 * Returns their count (>= 1). */
int rl_allowed_cpus(int *cpus) {
#ifdef __linux__
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        int n = 0;
        for (int c = 0; c < CPU_SETSIZE && n < RL_MAX_CPUS; c++) {
            if (CPU_ISSET(c, &set)) {
                cpus[n++] = c;
            }
        }
        if (n > 0) {
            return n;
        }
    }
#endif
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int n = online > 0 ? (int)(online < RL_MAX_CPUS ? online : RL_MAX_CPUS) : 1;
    for (int c = 0; c < n; c++) {
        cpus[c] = c;
    }
    return n;
}

int rl_cpu_count(void) {
    int *cpus = malloc(sizeof(int) * RL_MAX_CPUS);
    if (cpus == NULL) {
        return 1;
    }
    int n = rl_allowed_cpus(cpus);
    free(cpus);
    return n;
}

/* Count the distinct strings among n strings of `width` bytes each in `strs`. */
static int rl_count_distinct(const char *strs, int n, size_t width) {
    int distinct = 0;
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) {
            seen = strcmp(strs + (size_t)i * width, strs + (size_t)j * width) == 0;
        }
        distinct += !seen;
    }
    return distinct;
}

#define RL_LIST_WIDTH 64

/* For each allowed CPU read the sysfs file cpu<N>/<rel> (a CPU list) and count distinct contents: the number of
 * instances of a shared resource (a core, a cache) serving the allowed CPUs. 0 when any read fails. */
static int rl_count_instances(const int *cpus, int ncpus, const char *rel) {
    char *lists = calloc((size_t)ncpus, RL_LIST_WIDTH);
    if (lists == NULL) {
        return 0;
    }
    char path[256];
    int ok = 1;
    for (int i = 0; i < ncpus && ok; i++) {
        snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/%s", cpus[i], rel);
        ok = rl_read_line(path, lists + (size_t)i * RL_LIST_WIDTH, RL_LIST_WIDTH) == 0;
    }
    int count = ok ? rl_count_distinct(lists, ncpus, RL_LIST_WIDTH) : 0;
    free(lists);
    return count;
}

static void rl_info_caches(rl_cpu_info *out, const int *cpus, int ncpus) {
    char path[256], buf[128];
    for (int idx = 0; idx < 16; idx++) {
        int cpu0 = cpus[0];
        snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/cache/index%d/type", cpu0, idx);
        if (rl_read_line(path, buf, sizeof(buf)) != 0) {
            break;
        }
        if (strcmp(buf, "Instruction") == 0) {
            continue;
        }
        snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/cache/index%d/level", cpu0, idx);
        if (rl_read_line(path, buf, sizeof(buf)) != 0) {
            continue;
        }
        int level = atoi(buf);
        if (level < 1 || level > RL_CPU_MAX_LEVEL) {
            continue;
        }
        snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/cache/index%d/size", cpu0, idx);
        if (rl_read_line(path, buf, sizeof(buf)) != 0) {
            continue;
        }
        out->cache_bytes[level] = rl_parse_size(buf);
        snprintf(path, sizeof(path), "cache/index%d/shared_cpu_list", idx);
        int inst = rl_count_instances(cpus, ncpus, path);
        out->cache_instances[level] = inst > 0 ? inst : 1;
        snprintf(out->cache_source, sizeof(out->cache_source), "sysfs");
    }
    if (out->cache_bytes[1] > 0) {
        return;
    }
#if defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE) && defined(_SC_LEVEL3_CACHE_SIZE)
    /* glibc fallback: sizes only; L1 and L2 assumed private to each CPU, L3 shared by all. */
    long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE),
         l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l1 > 0) {
        out->cache_bytes[1] = l1;
        out->cache_instances[1] = ncpus;
        if (l2 > 0) {
            out->cache_bytes[2] = l2;
            out->cache_instances[2] = ncpus;
        }
        if (l3 > 0) {
            out->cache_bytes[3] = l3;
            out->cache_instances[3] = 1;
        }
        snprintf(out->cache_source, sizeof(out->cache_source), "sysconf");
    }
#endif
}

static void rl_info_cpuinfo(rl_cpu_info *out) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL) {
        return;
    }
    char line[512];
    double mhz = 0.0;
    while (fgets(line, sizeof(line), f) != NULL) {
        char *colon = strchr(line, ':');
        if (colon == NULL) {
            continue;
        }
        char *value = colon + 1;
        while (*value == ' ' || *value == '\t') {
            value++;
        }
        value[strcspn(value, "\n")] = '\0';
        if (out->model[0] == '\0' && strncmp(line, "model name", 10) == 0) {
            snprintf(out->model, sizeof(out->model), "%s", value);
        } else if (mhz == 0.0 && strncmp(line, "cpu MHz", 7) == 0) {
            mhz = strtod(value, NULL);
        }
    }
    fclose(f);
    if (out->clock_hz == 0.0 && mhz > 0.0) {
        out->clock_hz = mhz * 1e6;
        snprintf(out->clock_source, sizeof(out->clock_source), "/proc/cpuinfo cpu MHz");
    }
}

void rl_cpu_info_get(rl_cpu_info *out) {
    memset(out, 0, sizeof(*out));
    snprintf(out->clock_source, sizeof(out->clock_source), "unknown");
    snprintf(out->cache_source, sizeof(out->cache_source), "unknown");
    int *cpus = malloc(sizeof(int) * RL_MAX_CPUS);
    int fallback_cpu = 0;
    int ncpus = 1;
    if (cpus != NULL) {
        ncpus = rl_allowed_cpus(cpus);
    } else {
        cpus = &fallback_cpu;
    }
    out->cpus = ncpus;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    out->online = online > 0 ? (int)online : ncpus;

    char path[256], buf[128];
    snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/cpufreq/cpuinfo_max_freq", cpus[0]);
    if (rl_read_line(path, buf, sizeof(buf)) == 0 && strtod(buf, NULL) > 0) {
        out->clock_hz = strtod(buf, NULL) * 1e3; /* the file is in kHz */
        snprintf(out->clock_source, sizeof(out->clock_source), "cpufreq cpuinfo_max_freq");
    }
    rl_info_cpuinfo(out);
    if (out->model[0] == '\0') {
        struct utsname u;
        if (uname(&u) == 0) {
            snprintf(out->model, sizeof(out->model), "%s", u.machine);
        }
    }
    out->physical_cores = rl_count_instances(cpus, ncpus, "topology/core_cpus_list");
    if (out->physical_cores == 0) {
        out->physical_cores = rl_count_instances(cpus, ncpus, "topology/thread_siblings_list");
    }
    rl_info_caches(out, cpus, ncpus);
    if (cpus != &fallback_cpu) {
        free(cpus);
    }
}
