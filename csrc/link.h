/* Which module's forward created an autograd node: a table of intervals of autograd sequence numbers. Pure C.
 *
 * Autograd numbers every node it creates from a per-thread counter (its "sequence number"; the node of a forward op
 * is created just before the op's kernel runs). The measure block writes down, each time the set of running modules
 * changes (a module's forward starts or ends), the counter's value and the new set: node n was created under the
 * set of the last entry at or below n. A backward op runs inside the node it computes, so its module is the one
 * whose forward created that node: the exact attribution of backward work (roofline/_capture/_session.py). An entry
 * may say "no module" (RL_LINK_NONE): nodes created from then on (inside a backward, for a double backward) are not
 * the forward's, and their backward work is reported as not linked. */
#ifndef RL_LINK_H
#define RL_LINK_H

#include <stddef.h>
#include <stdint.h>

#define RL_LINK_NONE UINT32_MAX /* an interval of nodes no forward module created */

typedef struct {
    uint64_t *seq; /* first sequence number of each interval, increasing */
    uint32_t *mid; /* its module-set id, or RL_LINK_NONE */
    size_t n, cap;
    int broken; /* a sequence number went backwards (another thread's counter): nothing is linked any more */
} rl_links;

/* Nodes numbered `seq` and above were created under module set `mid` (until the next mark). 0, or -1 when out of
 * memory (the table is unchanged). A mark below the last one breaks the table: rl_link_find then finds nothing. */
int rl_link_mark(rl_links *t, uint64_t seq, uint32_t mid);

/* The module set that node `seq` was created under, or RL_LINK_NONE (before the first mark, in a "no module"
 * interval, or a broken table). */
uint32_t rl_link_find(const rl_links *t, uint64_t seq);

/* The last mark's module set (RL_LINK_NONE when there is none). */
uint32_t rl_link_last(const rl_links *t);

void rl_link_free(rl_links *t);

#endif
