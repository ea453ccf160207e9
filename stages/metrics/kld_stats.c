/* llama.cpp's KL-divergence statistics (see kld_stats.h). */
#include "stages/metrics/kld_stats.h"

#include <math.h>

const double em_kld_percentile_at[EM_KLD_PERCENTILES] = {0.999, 0.99, 0.95, 0.90,
                                                         0.50,  0.10, 0.05, 0.01};
const double em_dp_percentile_at[EM_DP_PERCENTILES] = {0.999, 0.99, 0.95, 0.90, 0.75, 0.50,
                                                       0.25,  0.10, 0.05, 0.01, 0.001};

static em_value_error mean_and_error(double sum, double sum2, int64_t n) {
    double mean = sum / (double)n, var = sum2 / (double)n - mean * mean;
    double error = var > 0 && n > 10 ? sqrt(var / (double)(n - 1)) : 0.0;
    return (em_value_error){mean, error};
}

static double covariance(double a, double b, double ab, int64_t n) {
    if (n < 10) return 0.0;
    return (ab / (double)n - (a / (double)n) * (b / (double)n)) / (double)(n - 1);
}

/* The value at `fraction` of n sorted values, between the neighbouring order statistics. */
static double percentile(const double *sorted, int64_t n, double fraction) {
    double p = fraction * (double)(n - 1);
    int64_t i = (int64_t)p;
    double f = p - (double)i;
    int64_t j = i + 1 < n ? i + 1 : n - 1;
    return (1.0 - f) * sorted[i] + f * sorted[j];
}

em_kld_stats em_kld_stats_compute(const em_kld_totals *t, const double *kld, const double *dp) {
    em_kld_stats s = {0};
    int64_t n = t->count;
    em_value_error lq = mean_and_error(t->sum_nll, t->sum_nll2, n);
    em_value_error lb = mean_and_error(t->sum_nll_base, t->sum_nll_base2, n);
    double cov = covariance(t->sum_nll, t->sum_nll_base, t->sum_nll_nll_base, n);
    double ppl = exp(lq.value), ppl_base = exp(lb.value);
    s.ppl = (em_value_error){ppl, ppl * lq.error};
    s.ppl_base = (em_value_error){ppl_base, ppl_base * lb.error};
    s.ln_ppl_correlation = lq.error > 0 && lb.error > 0 ? cov / (lq.error * lb.error) : 0.0;
    double ratio_var = lq.error * lq.error + lb.error * lb.error - 2.0 * cov;
    s.ln_ppl_ratio = (em_value_error){lq.value - lb.value, ratio_var > 0 ? sqrt(ratio_var) : 0.0};
    s.ppl_ratio = (em_value_error){exp(s.ln_ppl_ratio.value),
                                   exp(s.ln_ppl_ratio.value) * s.ln_ppl_ratio.error};
    double diff_var = s.ppl.error * s.ppl.error + s.ppl_base.error * s.ppl_base.error -
                      2.0 * ppl * ppl_base * cov;
    s.ppl_diff = (em_value_error){ppl - ppl_base, diff_var > 0 ? sqrt(diff_var) : 0.0};
    s.kld = mean_and_error(t->sum_kld, t->sum_kld2, n);
    s.dp = mean_and_error(t->sum_dp, t->sum_dp2, n);
    em_value_error mse = mean_and_error(t->sum_dp2, t->sum_dp4, n);
    double rms = sqrt(mse.value);
    s.dp_rms = (em_value_error){rms, rms > 0 ? 0.5 * mse.error / rms : 0.0};
    double top = (double)t->same_top / (double)n;
    s.same_top = (em_value_error){top, n > 1 ? sqrt(top * (1.0 - top) / (double)(n - 1)) : 0.0};
    s.kld_min = kld[0], s.kld_max = kld[n - 1];
    s.dp_min = dp[0], s.dp_max = dp[n - 1];
    for (int i = 0; i < EM_KLD_PERCENTILES; i++)
        s.kld_percentile[i] = percentile(kld, n, em_kld_percentile_at[i]);
    for (int i = 0; i < EM_DP_PERCENTILES; i++)
        s.dp_percentile[i] = percentile(dp, n, em_dp_percentile_at[i]);
    return s;
}
