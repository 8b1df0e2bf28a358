/* Roofline classification; see classify.h for the definitions. Pure C11. */
#include "classify.h"

#include <math.h>

/* Relative slack before a rate counts as above its ceiling: floating-point rounding of rates computed exactly on
 * the roof (projections) must not be flagged. */
#define RL_CEILING_TOLERANCE 1e-9

void rl_classify(size_t n, const double *flops, const double *bytes, const double *time, const double *peak,
                 const double *bw, const rl_class_out *o) {
    for (size_t i = 0; i < n; i++) {
        double f = flops[i], b = bytes[i], t = time[i], p = peak[i], w = bw[i];
        uint8_t flags = 0;
        int8_t bound;
        double inten = b > 0 ? f / b : (f > 0 ? INFINITY : 0.0);
        int have_peak = p > 0 && !isnan(p), have_bw = w > 0 && !isnan(w);
        double ridge = (have_peak && have_bw) ? p / w : NAN;
        double attain = NAN, tmin = NAN;
        if (f > 0) {
            if (have_peak && have_bw) {
                bound = inten >= ridge ? RL_BOUND_COMPUTE : RL_BOUND_MEMORY;
                attain = fmin(p, inten * w);
                tmin = fmax(f / p, b / w);
            } else {
                bound = RL_BOUND_NONE;
                flags |= RL_FLAG_NO_CEILING;
            }
        } else if (b > 0) {
            bound = RL_BOUND_BANDWIDTH;
            if (have_bw) {
                attain = w;
                tmin = b / w;
            } else {
                flags |= RL_FLAG_NO_CEILING;
            }
        } else {
            bound = RL_BOUND_NONE;
            tmin = 0.0;
        }
        double af = NAN, ab = NAN, eff = NAN, mfu = NAN, mbu = NAN;
        if (isnan(t)) {
            flags |= RL_FLAG_UNTIMED;
        } else if (t <= 0) {
            flags |= RL_FLAG_ZERO_TIME;
        } else {
            af = f / t;
            ab = b / t;
            if (have_peak) {
                mfu = f / (t * p);
                if (af > p * (1.0 + RL_CEILING_TOLERANCE)) {
                    flags |= RL_FLAG_ABOVE_PEAK;
                }
            }
            if (have_bw) {
                mbu = b / (t * w);
                if (ab > w * (1.0 + RL_CEILING_TOLERANCE)) {
                    flags |= RL_FLAG_ABOVE_BW;
                }
            }
            if (!isnan(tmin) && (f > 0 || b > 0)) {
                eff = tmin / t;
            }
        }
        o->intensity[i] = inten;
        o->ridge[i] = ridge;
        o->attainable[i] = attain;
        o->t_min[i] = tmin;
        o->achieved_flops[i] = af;
        o->achieved_bytes[i] = ab;
        o->efficiency[i] = eff;
        o->mfu[i] = mfu;
        o->mbu[i] = mbu;
        o->bound[i] = bound;
        o->flags[i] = flags;
    }
}
