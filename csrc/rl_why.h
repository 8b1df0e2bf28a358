/* The reason a check fails, written into the caller's buffer: one helper for every C predicate that says why. */
#ifndef RL_WHY_H
#define RL_WHY_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/* Format the reason into why[cap] when there is a buffer, and return 0 (false): a predicate ends with
 * `return rl_why(why, cap, "...", ...);`. */
static inline __attribute__((format(printf, 3, 4))) int rl_why(char *why, size_t cap, const char *fmt, ...) {
    if (why != NULL && cap > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, cap, fmt, ap);
        va_end(ap);
    }
    return 0;
}

#endif
