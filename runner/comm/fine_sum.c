/* The exact fixed-point sum of resolution 2^-96 (see fine_sum.h). */
#include "runner/comm/fine_sum.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DIGIT 4294967296.0 /* 2^32 */
static const int64_t NORMALIZE_EVERY = 1LL << 29;

void em_fine_sum_normalize(em_fine_sum *s) {
    for (int k = 0; k + 1 < EM_FINE_SUM_LIMBS; k++) {
        int64_t low = (int64_t)((uint64_t)s->limb[k] & 0xffffffffULL);
        s->limb[k + 1] += (s->limb[k] - low) / (int64_t)DIGIT;
        s->limb[k] = low;
    }
    s->pending = 0;
}

void em_fine_sum_add(em_fine_sum *s, double value) {
    if (!isfinite(value) || fabs(value) >= 0x1p62) {
        s->invalid++;
        return;
    }
    /* |value| * 2^96 < 2^158 is exact (a power-of-two scaling). Each digit from the top is the
     * floor of a power-of-two division, and taking it away leaves the lower bits of the same
     * double: every step is exact. The last digit is rounded to an integer, ties to even. */
    double rest = ldexp(fabs(value), 96);
    int64_t sign = value < 0 ? -1 : 1;
    for (int k = EM_FINE_SUM_LIMBS - 1; k > 0; k--) {
        double unit = ldexp(1.0, 32 * k), digit = floor(rest / unit);
        rest -= digit * unit;
        s->limb[k] += sign * (int64_t)digit;
    }
    s->limb[0] += sign * (int64_t)rint(rest);
    if (++s->pending >= NORMALIZE_EVERY) em_fine_sum_normalize(s);
}

double em_fine_sum_value(const em_fine_sum *s) {
    if (s->invalid) return NAN;
    em_fine_sum n = *s;
    em_fine_sum_normalize(&n);
    /* limbs 4 .. 1 as one 128-bit integer (|total| < 2^62 keeps it below 2^126), rounded once;
     * limb 0 lies below its last bit but one and adds after, as a second rounding */
    __int128 high = 0;
    for (int k = EM_FINE_SUM_LIMBS - 1; k > 0; k--) high = high * (__int128)DIGIT + n.limb[k];
    return ldexp((double)high, -64) + ldexp((double)n.limb[0], -96);
}

em_status em_fine_sum_allreduce(em_comm *comm, em_fine_sum *sums, size_t n) {
    if (n == 0) return NULL;
    enum { ROW = EM_FINE_SUM_LIMBS + 1 };
    int64_t *flat = em_xmalloc(n * ROW * sizeof *flat);
    for (size_t i = 0; i < n; i++) {
        em_fine_sum_normalize(&sums[i]);
        memcpy(&flat[ROW * i], sums[i].limb, sizeof sums[i].limb);
        flat[ROW * i + EM_FINE_SUM_LIMBS] = sums[i].invalid;
    }
    em_status err = em_allreduce(comm, flat, flat, ROW * n, EM_DTYPE_INT64, EM_OP_SUM);
    for (size_t i = 0; i < n && !err; i++) {
        memcpy(sums[i].limb, &flat[ROW * i], sizeof sums[i].limb);
        sums[i].invalid = flat[ROW * i + EM_FINE_SUM_LIMBS];
        em_fine_sum_normalize(&sums[i]);
    }
    free(flat);
    return err;
}
