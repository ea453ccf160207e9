/* An exact, order-independent sum of doubles with a fine resolution: the accumulator for
 * activation statistics (sums of x^2 and |x| that may be as small as 1e-12 per window, where
 * exact_sum.h's 2^-32 would keep few digits).
 *
 * Each value v is rounded once to the nearest multiple of 2^-96 (ties to even) and that integer
 * X = round(v * 2^96) is added exactly, as five base-2^32 digits kept in int64 limbs:
 *     sum * 2^96 = limb[0] + limb[1] * 2^32 + ... + limb[4] * 2^128
 * Integer addition is associative, so the total does not depend on the order of additions, on
 * how values are split across ranks, or on the reduction tree.
 *
 * Resolution: 2^-96 (about 1.3e-29) per value. Range: each value and every running or global
 * total must satisfy |x| < 2^62 (about 4.6e18). Values that are NaN, infinite or out of range are
 * counted in `invalid`, and em_fine_sum_value then returns NaN. Limbs are normalized (carries
 * moved up) every 2^29 additions, so they never overflow. The all-reduce sums the normalized
 * limbs with one int64 all-reduce (exact for up to 2^30 ranks). */
#ifndef EVALMESH_FINE_SUM_H
#define EVALMESH_FINE_SUM_H

#include <stddef.h>
#include <stdint.h>

#include "runner/comm/comm.h"

#define EM_FINE_SUM_LIMBS 5

typedef struct em_fine_sum {
    int64_t limb[EM_FINE_SUM_LIMBS]; /* the total in units of 2^-96, least significant first */
    int64_t invalid;                 /* values not added: NaN, infinite or |v| >= 2^62 */
    int64_t pending;                 /* additions since the last normalization */
} em_fine_sum;

void em_fine_sum_add(em_fine_sum *s, double value);
/* Moves carries up so limbs 0 .. 3 lie in [0, 2^32); the value is unchanged. */
void em_fine_sum_normalize(em_fine_sum *s);
/* The total as a double, NaN when invalid > 0: a function of the exact total alone (the same
 * total gives the same bits), within a relative 2^-52 of it. */
double em_fine_sum_value(const em_fine_sum *s);
/* Replaces each of the n sums on every rank of comm by its global total (one all-reduce). */
em_status em_fine_sum_allreduce(em_comm *comm, em_fine_sum *sums, size_t n);

#endif
