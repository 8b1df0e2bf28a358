/* Roofline classification of op records: pure C, vectorised over arrays. No Python.h.
 *
 * For op i with `flops[i]` FLOPs, `bytes[i]` compulsory bytes, measured time `time[i]` seconds (NaN: not timed), and
 * the ceilings of its own unit and dtype `peak[i]` FLOP/s and `bw[i]` bytes/s:
 *   intensity  = flops / bytes (inf when bytes == 0 and flops > 0; 0 when both are 0)
 *   ridge      = peak / bw
 *   bound      = RL_BOUND_COMPUTE if intensity >= ridge, else RL_BOUND_MEMORY; RL_BOUND_BANDWIDTH for ops with no
 *                FLOPs that move bytes (judged against bandwidth only); RL_BOUND_NONE when nothing is counted
 *   attainable = min(peak, intensity * bw) FLOP/s (for RL_BOUND_BANDWIDTH: bw bytes/s)
 *   t_min      = max(flops / peak, bytes / bw): the op's time if it ran exactly on the roofline
 *   achieved   = flops / time and bytes / time
 *   efficiency = achieved / attainable (FLOP/s, or bytes/s for bandwidth-only ops) = t_min / time
 *   mfu        = flops / (time * peak);  mbu = bytes / (time * bw)
 * A rate above its ceiling is flagged (RL_FLAG_ABOVE_PEAK / RL_FLAG_ABOVE_BW), never clipped: the ceiling is too
 * low or the count too high. Untimed ops (NaN time) get NaN rates and RL_FLAG_UNTIMED; zero time RL_FLAG_ZERO_TIME.
 * A non-positive or NaN ceiling makes that op's ceiling-derived outputs NaN and sets RL_FLAG_NO_CEILING. */
#ifndef RL_CLASSIFY_H
#define RL_CLASSIFY_H

#include <stddef.h>
#include <stdint.h>

#define RL_BOUND_NONE 0
#define RL_BOUND_MEMORY 1
#define RL_BOUND_COMPUTE 2
#define RL_BOUND_BANDWIDTH 3
#define RL_BOUND_INTERCONNECT 4 /* collectives, judged against the interconnect (set by the Python network view) */

#define RL_FLAG_ABOVE_PEAK 1u
#define RL_FLAG_ABOVE_BW 2u
#define RL_FLAG_UNTIMED 4u
#define RL_FLAG_ZERO_TIME 8u
#define RL_FLAG_NO_CEILING 16u

typedef struct {
    double *intensity, *ridge, *attainable, *t_min, *achieved_flops, *achieved_bytes, *efficiency, *mfu, *mbu;
    int8_t *bound;
    uint8_t *flags;
} rl_class_out;

/* Classify n ops. Inputs are read-only arrays of length n; every output array of `out` must hold n elements (the
 * caller owns all memory). Pure function of its inputs; safe to call without the GIL. */
void rl_classify(size_t n, const double *flops, const double *bytes, const double *time, const double *peak,
                 const double *bw, const rl_class_out *out);

#endif
