/* multiple_choice_grade as BIG-bench computes it, bit for bit: NumPy's summation order, scipy's
 * logsumexp and task_metrics.argmax's sha256 tie-breaking. */
#include "stages/tasks/bigbench_scoring.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/sha256.h"

/* NumPy's pairwise summation of a contiguous float64 array (DOUBLE_pairwise_sum): plain below 8
 * values, eight running sums up to 128, halves (at a multiple of 8) above. */
static double numpy_sum(const double *a, size_t n) {
    if (n < 8) {
        double res = 0.;
        for (size_t i = 0; i < n; i++) res += a[i];
        return res;
    }
    if (n <= 128) {
        double r[8];
        memcpy(r, a, sizeof r);
        size_t i;
        for (i = 8; i < n - n % 8; i += 8)
            for (int j = 0; j < 8; j++) r[j] += a[i + j];
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) res += a[i];
        return res;
    }
    size_t half = n / 2;
    half -= half % 8;
    return numpy_sum(a, half) + numpy_sum(a + half, n - half);
}

void em_bigbench_scores(const double *sums, size_t n, bool absolute_normalization, double *scores) {
    if (absolute_normalization) {
        memcpy(scores, sums, n * sizeof *scores);
        return;
    }
    double max = sums[0];
    for (size_t i = 1; i < n; i++) max = sums[i] > max ? sums[i] : max;
    if (!isfinite(max)) max = 0;
    double *shifted = em_xmalloc(n * sizeof *shifted);
    for (size_t i = 0; i < n; i++) shifted[i] = exp(sums[i] - max);
    double lse = log(numpy_sum(shifted, n)) + max;
    free(shifted);
    for (size_t i = 0; i < n; i++) scores[i] = sums[i] - lse;
}

size_t em_bigbench_argmax(const double *scores, size_t n) {
    double max = scores[0];
    for (size_t i = 1; i < n; i++) max = scores[i] > max ? scores[i] : max;
    size_t tied = 0;
    for (size_t i = 0; i < n; i++) tied += scores[i] == max;
    uint8_t digest[32];
    em_sha256 sha;
    em_sha256_init(&sha);
    for (size_t i = 0; i < n; i++) { /* np.asarray(scores).tobytes(): little-endian float64 */
        uint64_t bits;
        memcpy(&bits, &scores[i], sizeof bits);
        uint8_t bytes[8];
        for (int b = 0; b < 8; b++) bytes[b] = (uint8_t)(bits >> (8 * b));
        em_sha256_update(&sha, bytes, sizeof bytes);
    }
    em_sha256_final(&sha, digest);
    uint64_t k = 0; /* the digest as a big-endian integer, modulo tied (k * 256 cannot wrap) */
    for (int b = 0; b < 32; b++) k = (k * 256 + digest[b]) % tied;
    for (size_t i = 0; i < n; i++)
        if (scores[i] == max && k-- == 0) return i;
    return 0;
}

double em_bigbench_grade(const em_task_example *example, const double *sums,
                         bool absolute_normalization, size_t *chosen) {
    size_t n = example->choice_count;
    double *scores = em_xmalloc(n * sizeof *scores);
    em_bigbench_scores(sums, n, absolute_normalization, scores);
    size_t pick = em_bigbench_argmax(scores, n);
    free(scores);
    if (chosen) *chosen = pick;
    return example->target_scores[pick];
}
