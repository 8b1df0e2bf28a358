/* Assertions shared by the C unit tests (tests/c/test_cost*.c): each failed check prints file, line, the expression
 * and both values, and counts itself in `failures`; main() returns non-zero when any check failed. */
#ifndef RL_TEST_CHECK_H
#define RL_TEST_CHECK_H

#include <stdio.h>
#include <string.h>

static int failures = 0;

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
