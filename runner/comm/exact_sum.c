/* The exact fixed-point sum (see exact_sum.h for the representation, range and resolution). */
#include "runner/comm/exact_sum.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DIGIT 4294967296.0 /* 2^32 */
static const int64_t DIGIT_MASK = 0xffffffffLL;
static const int64_t NORMALIZE_EVERY = 1LL << 29;

void em_exact_sum_init(em_exact_sum *s) {
    memset(s, 0, sizeof *s);
}

/* Splits x into a low digit in [0, 2^32) and the carry: x = low + carry * 2^32. */
static int64_t split_carry(int64_t *x) {
    int64_t low = (int64_t)((uint64_t)*x & (uint64_t)DIGIT_MASK);
    int64_t carry = (*x - low) / (int64_t)DIGIT;
    *x = low;
    return carry;
}

void em_exact_sum_normalize(em_exact_sum *s) {
    s->limb[1] += split_carry(&s->limb[0]);
    s->limb[2] += split_carry(&s->limb[1]);
    s->pending = 0;
}

void em_exact_sum_add(em_exact_sum *s, double value) {
    if (!isfinite(value) || fabs(value) >= 0x1p62) {
        s->invalid++;
        return;
    }
    /* value * 2^32 is exact (a power-of-two scaling); rint rounds to an integer, ties to even.
     * |x| < 2^94, so it fits a 128-bit integer; split it into three digits. */
    __int128 x = (__int128)rint(value * DIGIT);
    unsigned __int128 u = (unsigned __int128)x;
    s->limb[0] += (int64_t)(u & (uint64_t)DIGIT_MASK);
    s->limb[1] += (int64_t)((u >> 32) & (uint64_t)DIGIT_MASK);
    s->limb[2] += (int64_t)(x >> 64); /* the signed top digit */
    if (++s->pending >= NORMALIZE_EVERY) em_exact_sum_normalize(s);
}

void em_exact_sum_merge(em_exact_sum *into, const em_exact_sum *from) {
    em_exact_sum f = *from;
    em_exact_sum_normalize(&f);
    em_exact_sum_normalize(into);
    for (int k = 0; k < 3; k++) into->limb[k] += f.limb[k];
    into->invalid += f.invalid;
    em_exact_sum_normalize(into);
}

double em_exact_sum_value(const em_exact_sum *s) {
    if (s->invalid) return NAN;
    em_exact_sum n = *s;
    em_exact_sum_normalize(&n);
    __int128 x =
        (__int128)n.limb[2] * ((__int128)1 << 64) + (__int128)n.limb[1] * (1LL << 32) + n.limb[0];
    /* One rounding (the conversion); the scaling by 2^-32 is exact. */
    return ldexp((double)x, -32);
}

void em_exact_sum_pack(em_exact_sum *sums, size_t n, int64_t *flat) {
    for (size_t i = 0; i < n; i++) {
        em_exact_sum_normalize(&sums[i]);
        memcpy(&flat[4 * i], sums[i].limb, sizeof sums[i].limb);
        flat[4 * i + 3] = sums[i].invalid;
    }
}

void em_exact_sum_unpack(const int64_t *flat, size_t n, em_exact_sum *sums) {
    for (size_t i = 0; i < n; i++) {
        memcpy(sums[i].limb, &flat[4 * i], sizeof sums[i].limb);
        sums[i].invalid = flat[4 * i + 3];
        em_exact_sum_normalize(&sums[i]);
    }
}

em_status em_exact_sum_allreduce(em_comm *comm, em_exact_sum *sums, size_t n) {
    if (n == 0) return NULL;
    int64_t *flat = em_xmalloc(n * 4 * sizeof *flat);
    em_exact_sum_pack(sums, n, flat);
    em_status err = em_allreduce(comm, flat, flat, 4 * n, EM_DTYPE_INT64, EM_OP_SUM);
    if (!err) em_exact_sum_unpack(flat, n, sums);
    free(flat);
    return err;
}
