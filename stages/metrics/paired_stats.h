/* The paired comparison of two evaluations that scored the same tokens (a candidate against its
 * baseline): per token the difference d = nll_candidate - nll_baseline and, for accuracy,
 * c = correct_candidate - correct_baseline (-1, 0 or 1). From exact totals over the N tokens:
 *   nll_diff        sum d / N                     (the change of the mean NLL, ln PPL)
 *   nll_diff_error  sqrt((E[d^2] - E[d]^2) / (N - 1))
 *   accuracy_diff, accuracy_diff_error  the same for c.
 * nll_diff_error is llama.cpp's uncertainty of ln(PPL(Q)/PPL(base)) (perplexity
 * --kl-divergence): sqrt(se_Q^2 + se_base^2 - 2 cov) with se^2 = (E[x^2] - E[x]^2) / (N - 1) and
 * cov = (E[xy] - E[x]E[y]) / (N - 1) is, term for term, the expression above written with d; it
 * is small when both runs err on the same tokens, which is what an unpaired comparison (two
 * independent standard errors) cannot see. Errors are 0 for N < 2. */
#ifndef EVALMESH_METRICS_PAIRED_STATS_H
#define EVALMESH_METRICS_PAIRED_STATS_H

#include <stdint.h>

typedef struct em_paired_totals {
    double sum_d, sum_d2;  /* exact sums (rounded once) of d and d^2 */
    int64_t sum_c, sum_c2; /* integer sums of c and c^2 */
    int64_t tokens;        /* N > 0 */
} em_paired_totals;

typedef struct em_paired_stats {
    double nll_diff, nll_diff_error;
    double accuracy_diff, accuracy_diff_error;
} em_paired_stats;

em_paired_stats em_paired_stats_compute(const em_paired_totals *t);

/* The mean of n > 0 differences from their sum and sum of squares, and its standard error
 * sqrt((E[d^2] - E[d]^2) / (n - 1)) (0 for n < 2): the sample standard deviation over sqrt(n). */
void em_paired_mean_error(double sum, double sum2, int64_t n, double *mean, double *error);

#endif
