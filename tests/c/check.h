/* Assertions and the tensor builder shared by the C unit tests (tests/c/test_*.c): each failed check prints file, line, the expression
 * and both values, and counts itself in `failures`; main() returns non-zero when any check failed. */
#ifndef RL_TEST_CHECK_H
#define RL_TEST_CHECK_H

#include <stdio.h>
#include <string.h>

#include "cost.h"

static int failures = 0;

/* A contiguous tensor of `dtype` and sizes `size[0..ndim)` (row-major strides). */
static inline rl_tensor tensor(int dtype, int ndim, const int64_t *size) {
    rl_tensor t;
    memset(&t, 0, sizeof(t));
    t.ndim = ndim;
    t.dtype = dtype;
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        t.size[d] = size[d];
        t.stride[d] = s;
        s = (int64_t)((uint64_t)s * (uint64_t)(size[d] > 0 ? size[d] : 1)); /* strides unused where this wraps */
    }
    return t;
}

#define CHECK_EQ(got, want)                                                                                          \
    do {                                                                                                             \
        unsigned long long g_ = (unsigned long long)(got), w_ = (unsigned long long)(want);                          \
        if (g_ != w_) {                                                                                              \
            fprintf(stderr, "%s:%d: %s = %llu, want %llu\n", __FILE__, __LINE__, #got, g_, w_);                      \
            failures++;                                                                                              \
        }                                                                                                            \
    } while (0)

#define CHECK_STR(got, want)                                                                                         \
    do {                                                                                                             \
        if (strcmp((got), (want)) != 0) {                                                                            \
            fprintf(stderr, "%s:%d: %s = \"%s\", want \"%s\"\n", __FILE__, __LINE__, #got, (got), (want));           \
            failures++;                                                                                              \
        }                                                                                                            \
    } while (0)

#endif
