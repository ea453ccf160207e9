/* Paired differences of two evaluations of the same tokens (see paired_stats.h). */
#include "stages/metrics/paired_stats.h"

#include <math.h>

void em_paired_mean_error(double sum, double sum2, int64_t n, double *mean, double *error) {
    *mean = sum / (double)n;
    double var = sum2 / (double)n - *mean * *mean;
    *error = n > 1 && var > 0 ? sqrt(var / (double)(n - 1)) : 0.0;
}

em_paired_stats em_paired_stats_compute(const em_paired_totals *t) {
    em_paired_stats s;
    em_paired_mean_error(t->sum_d, t->sum_d2, t->tokens, &s.nll_diff, &s.nll_diff_error);
    em_paired_mean_error((double)t->sum_c, (double)t->sum_c2, t->tokens, &s.accuracy_diff,
                         &s.accuracy_diff_error);
    return s;
}
