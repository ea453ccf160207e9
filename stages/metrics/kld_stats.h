/* The statistics of llama.cpp's `perplexity --kl-divergence` from exact totals over the scored
 * tokens (nll of the reference "base" and the candidate "Q", their KL divergence and the change
 * of the target's probability dp = p_Q(target) - p_base(target)) and the sorted per-token KL and
 * dp values (percentiles exact, linearly interpolated between order statistics as llama.cpp).
 * Errors are llama.cpp's: a mean's standard error sqrt((E[x^2] - E[x]^2) / (n - 1)) (0 for n <=
 * 10), ln(PPL(Q)/PPL(base))'s from both variances less twice their covariance (the samples are
 * correlated token by token), RMS dp's by the delta method from sum dp^4. */
#ifndef EVALMESH_METRICS_KLD_STATS_H
#define EVALMESH_METRICS_KLD_STATS_H

#include <stddef.h>
#include <stdint.h>

typedef struct em_kld_totals {
    double sum_nll, sum_nll2;           /* the candidate's */
    double sum_nll_base, sum_nll_base2; /* the reference's */
    double sum_nll_nll_base;
    double sum_kld, sum_kld2;
    double sum_dp, sum_dp2, sum_dp4;
    int64_t count, same_top;
} em_kld_totals;

typedef struct em_value_error {
    double value, error;
} em_value_error;

enum { EM_KLD_PERCENTILES = 8, EM_DP_PERCENTILES = 11 };
extern const double em_kld_percentile_at[EM_KLD_PERCENTILES]; /* 0.999 .. 0.01 */
extern const double em_dp_percentile_at[EM_DP_PERCENTILES];   /* 0.999 .. 0.001 */

typedef struct em_kld_stats {
    em_value_error ppl, ppl_base, ln_ppl_ratio, ppl_ratio, ppl_diff;
    double ln_ppl_correlation; /* of ln PPL(Q) and ln PPL(base), -1 .. 1 */
    em_value_error kld, dp, dp_rms, same_top;
    double kld_max, kld_min, kld_percentile[EM_KLD_PERCENTILES];
    double dp_max, dp_min, dp_percentile[EM_DP_PERCENTILES];
} em_kld_stats;

/* t.count > 0; kld and dp are t.count values each, sorted ascending. */
em_kld_stats em_kld_stats_compute(const em_kld_totals *t, const double *kld, const double *dp);

#endif
