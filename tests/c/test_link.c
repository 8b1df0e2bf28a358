/* Unit tests of csrc/link.c, the table of autograd sequence-number intervals behind backward attribution. Each case
 * states the marks and the expected module set of each node number; a random sequence of marks is checked against
 * a second account kept here: every mark remembered, the answer for node n taken as the last mark at or below n. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "link.h"

static void test_empty(void) {
    rl_links t = {0};
    CHECK_EQ(rl_link_find(&t, 0), RL_LINK_NONE);
    CHECK_EQ(rl_link_find(&t, 12345), RL_LINK_NONE);
    CHECK_EQ(rl_link_last(&t), RL_LINK_NONE);
    rl_link_free(&t);
}

static void test_intervals(void) {
    rl_links t = {0};
    /* module 1's forward from node 10, module 2 from 15, none from 20 (a backward), module 1 again from 30 */
    CHECK_EQ(rl_link_mark(&t, 10, 1), 0);
    CHECK_EQ(rl_link_mark(&t, 15, 2), 0);
    CHECK_EQ(rl_link_mark(&t, 20, RL_LINK_NONE), 0);
    CHECK_EQ(rl_link_mark(&t, 30, 1), 0);
    CHECK_EQ(t.n, 4);
    CHECK_EQ(rl_link_find(&t, 9), RL_LINK_NONE); /* before the first mark */
    CHECK_EQ(rl_link_find(&t, 10), 1);
    CHECK_EQ(rl_link_find(&t, 14), 1);
    CHECK_EQ(rl_link_find(&t, 15), 2);
    CHECK_EQ(rl_link_find(&t, 19), 2);
    CHECK_EQ(rl_link_find(&t, 20), RL_LINK_NONE);
    CHECK_EQ(rl_link_find(&t, 29), RL_LINK_NONE);
    CHECK_EQ(rl_link_find(&t, 30), 1);
    CHECK_EQ(rl_link_find(&t, UINT64_MAX), 1);
    CHECK_EQ(rl_link_last(&t), 1);
    rl_link_free(&t);
    CHECK_EQ(t.n, 0);
    CHECK_EQ(t.cap, 0);
}

static void test_same_set_continues(void) {
    rl_links t = {0};
    rl_link_mark(&t, 5, 3);
    rl_link_mark(&t, 8, 3); /* the same set: no new interval */
    CHECK_EQ(t.n, 1);
    CHECK_EQ(rl_link_find(&t, 7), 3);
    CHECK_EQ(rl_link_find(&t, 100), 3);
    rl_link_free(&t);
}

static void test_empty_interval_replaced(void) {
    rl_links t = {0};
    rl_link_mark(&t, 5, 1);
    rl_link_mark(&t, 9, 2);
    rl_link_mark(&t, 9, 4); /* no node was created under set 2: its mark is replaced */
    CHECK_EQ(t.n, 2);
    CHECK_EQ(rl_link_find(&t, 9), 4);
    CHECK_EQ(rl_link_find(&t, 8), 1);
    rl_link_mark(&t, 9, 1); /* replaced by the set before it, which then continues */
    CHECK_EQ(t.n, 1);
    CHECK_EQ(rl_link_find(&t, 9), 1);
    CHECK_EQ(rl_link_last(&t), 1);
    rl_link_free(&t);
}

static void test_going_backwards_breaks(void) {
    rl_links t = {0};
    rl_link_mark(&t, 50, 1);
    rl_link_mark(&t, 60, 2);
    CHECK_EQ(t.broken, 0);
    CHECK_EQ(rl_link_mark(&t, 40, 3), 0); /* another thread's counter: nothing is linked any more */
    CHECK_EQ(t.broken, 1);
    CHECK_EQ(rl_link_find(&t, 55), RL_LINK_NONE);
    CHECK_EQ(rl_link_find(&t, 65), RL_LINK_NONE);
    CHECK_EQ(rl_link_mark(&t, 70, 4), 0); /* marks after the break are ignored, without an error */
    CHECK_EQ(rl_link_find(&t, 75), RL_LINK_NONE);
    rl_link_free(&t);
}

/* A random walk of marks (repeats, same sets, empty intervals) against a plain list of every mark: the answer for
 * node n is the set of the last mark whose number is <= n (later marks at one number replace earlier ones). */
static void test_random_against_a_second_account(void) {
    enum { MARKS = 5000, QUERIES = 20000 };
    uint64_t *seqs = malloc(MARKS * sizeof *seqs);
    uint32_t *mids = malloc(MARKS * sizeof *mids);
    rl_links t = {0};
    srand(7);
    uint64_t seq = 100;
    for (int i = 0; i < MARKS; i++) {
        seq += (uint64_t)(rand() % 4); /* 0: another mark at the same number */
        uint32_t mid = (rand() % 9 == 0) ? RL_LINK_NONE : (uint32_t)(rand() % 6);
        seqs[i] = seq;
        mids[i] = mid;
        CHECK_EQ(rl_link_mark(&t, seq, mid), 0);
    }
    CHECK_EQ(t.broken, 0);
    CHECK_EQ(t.n <= MARKS, 1);
    for (int q = 0; q < QUERIES; q++) {
        uint64_t n = 90 + (uint64_t)(rand() % (int)(seq - 80));
        uint32_t want = RL_LINK_NONE;
        for (int i = 0; i < MARKS && seqs[i] <= n; i++) {
            want = mids[i];
        }
        uint32_t got = rl_link_find(&t, n);
        if (got != want) {
            fprintf(stderr, "node %llu: got %u, want %u\n", (unsigned long long)n, got, want);
            failures++;
            break;
        }
    }
    CHECK_EQ(rl_link_last(&t), mids[MARKS - 1]);
    /* no two neighbouring intervals have the same set, and the numbers increase strictly */
    for (size_t i = 1; i < t.n; i++) {
        if (t.mid[i] == t.mid[i - 1] || t.seq[i] <= t.seq[i - 1]) {
            fprintf(stderr, "intervals %zu and %zu: (%llu, %u) then (%llu, %u)\n", i - 1, i,
                    (unsigned long long)t.seq[i - 1], t.mid[i - 1], (unsigned long long)t.seq[i], t.mid[i]);
            failures++;
            break;
        }
    }
    rl_link_free(&t);
    free(seqs);
    free(mids);
}

int main(void) {
    test_empty();
    test_intervals();
    test_same_set_continues();
    test_empty_interval_replaced();
    test_going_backwards_breaks();
    test_random_against_a_second_account();
    if (failures) {
        fprintf(stderr, "%d C link test(s) failed\n", failures);
        return 1;
    }
    printf("all C link tests passed\n");
    return 0;
}
