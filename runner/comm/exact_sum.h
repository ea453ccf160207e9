/* An exact, order-independent sum of doubles: the accumulator for log-likelihood sums.
 *
 * Each value v is rounded once to the nearest multiple of 2^-32 (ties to even) and that integer
 * X = round(v * 2^32) is added exactly, as three base-2^32 digits kept in int64 limbs:
 *     sum * 2^32 = limb[0] + limb[1] * 2^32 + limb[2] * 2^64
 * Integer addition is associative, so the total does not depend on the order of additions, on
 * how values are split across ranks, or on the reduction tree: the same values give the same bits.
 *
 * Resolution: 2^-32 (about 2.3e-10) per value. Range: each value and every running or global
 * total must satisfy |x| < 2^62 (about 4.6e18). Values that are NaN, infinite or out of range are
 * counted in `invalid`, and em_exact_sum_value then returns NaN so they cannot go unnoticed.
 * Limbs 0 and 1 grow by less than 2^32 per addition and are normalized (carries moved up) every
 * 2^29 additions, so they never overflow.
 *
 * Across ranks, em_exact_sum_allreduce normalizes, sums the limbs with one int64 all-reduce
 * (exact for up to 2^30 ranks) and normalizes again. Counts (tokens, bytes, words) need no such
 * type: they are int64 and reduce exactly with em_allreduce(..., EM_DTYPE_INT64, EM_OP_SUM). */
#ifndef EVALMESH_EXACT_SUM_H
#define EVALMESH_EXACT_SUM_H

#include <stddef.h>
#include <stdint.h>

#include "runner/comm/comm.h"

typedef struct em_exact_sum {
    int64_t limb[3]; /* the total in units of 2^-32, base 2^32 digits, least significant first */
    int64_t invalid; /* values not added: NaN, infinite or |v| >= 2^62 */
    int64_t pending; /* additions since the last normalization */
} em_exact_sum;

void em_exact_sum_init(em_exact_sum *s);
void em_exact_sum_add(em_exact_sum *s, double value);
/* into += from (exact). */
void em_exact_sum_merge(em_exact_sum *into, const em_exact_sum *from);
/* Moves carries up so limb[0] and limb[1] lie in [0, 2^32); the value is unchanged. */
void em_exact_sum_normalize(em_exact_sum *s);
/* The total, rounded once to the nearest double; NaN when invalid > 0. */
double em_exact_sum_value(const em_exact_sum *s);
/* Sums as int64 for a reduction: flat is (n, 4), each sum's three normalized limbs then its
 * invalid count; summing such rows element-wise and unpacking gives the exact total. */
void em_exact_sum_pack(em_exact_sum *sums, size_t n, int64_t *flat);
void em_exact_sum_unpack(const int64_t *flat, size_t n, em_exact_sum *sums);
/* Replaces each of the n sums on every rank of comm by its global total (one all-reduce). */
em_status em_exact_sum_allreduce(em_comm *comm, em_exact_sum *sums, size_t n);

#endif
