/* Intervals of autograd sequence numbers and the module sets that created them: see link.h. */
#include "link.h"

#include <stdlib.h>

int rl_link_mark(rl_links *t, uint64_t seq, uint32_t mid) {
    if (t->broken) {
        return 0;
    }
    if (t->n) {
        size_t last = t->n - 1;
        if (seq < t->seq[last]) {
            t->broken = 1;
            return 0;
        }
        if (t->mid[last] == mid) {
            return 0; /* the same set continues */
        }
        if (t->seq[last] == seq) { /* no node was created under the previous mark: it is replaced */
            t->mid[last] = mid;
            if (last && t->mid[last - 1] == mid) {
                t->n--; /* and the one before it continues */
            }
            return 0;
        }
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        uint64_t *s = realloc(t->seq, cap * sizeof *s);
        if (!s) {
            return -1;
        }
        t->seq = s;
        uint32_t *m = realloc(t->mid, cap * sizeof *m);
        if (!m) {
            return -1;
        }
        t->mid = m;
        t->cap = cap;
    }
    t->seq[t->n] = seq;
    t->mid[t->n] = mid;
    t->n++;
    return 0;
}

uint32_t rl_link_find(const rl_links *t, uint64_t seq) {
    if (t->broken || !t->n || seq < t->seq[0]) {
        return RL_LINK_NONE;
    }
    size_t lo = 0, hi = t->n; /* the last entry with seq[i] <= seq is in [lo, hi) */
    while (hi - lo > 1) {
        size_t m = lo + (hi - lo) / 2;
        if (t->seq[m] <= seq) {
            lo = m;
        } else {
            hi = m;
        }
    }
    return t->mid[lo];
}

uint32_t rl_link_last(const rl_links *t) { return t->n ? t->mid[t->n - 1] : RL_LINK_NONE; }

void rl_link_free(rl_links *t) {
    free(t->seq);
    free(t->mid);
    t->seq = NULL;
    t->mid = NULL;
    t->n = t->cap = 0;
}
