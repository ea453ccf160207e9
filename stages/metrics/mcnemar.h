/* McNemar's exact test of two evaluations of the same examples with 0/1 outcomes: of the
 * discordant pairs, b examples only the baseline got right and c only the candidate did. Under
 * the null hypothesis (neither is better) b is Binomial(b + c, 1/2); the two-sided p-value is
 *   p = min(1, 2 * sum_{i <= min(b, c)} C(b + c, i) / 2^(b + c))
 * (scipy.stats.binomtest(min(b, c), b + c, 0.5).pvalue, statsmodels' mcnemar(exact=True)). */
#ifndef EVALMESH_METRICS_MCNEMAR_H
#define EVALMESH_METRICS_MCNEMAR_H

#include <stdint.h>

/* The p-value for b, c >= 0 (1 when both are 0). Computed in long double from the largest term,
 * exp(lgamma) of the binomial coefficient over 2^n, and the sum of the smaller terms' ratios to
 * it, so it neither overflows nor loses precision for b + c in the millions (a p-value below
 * the smallest long double is 0). */
double em_mcnemar_exact_p(int64_t b, int64_t c);

#endif
