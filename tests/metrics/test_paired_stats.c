/* Unit tests of the paired statistics (stages/metrics/paired_stats.c): exact values on a small
 * case, 0 for identical runs, and the standard error equal to llama.cpp's correlated-samples
 * uncertainty of ln(PPL(Q)/PPL(base)) as kld_stats.c computes it from the two runs' separate
 * totals and their covariance. */
#include <math.h>
#include <stdlib.h>

#include "stages/metrics/kld_stats.h"
#include "stages/metrics/paired_stats.h"
#include "test.h"

int main(void) {
    /* d = 0.5, -0.25, 0.75, 0: mean 0.25, E[d^2] = 0.21875, var 0.15625, se sqrt(0.15625/3) */
    em_paired_totals t = {.sum_d = 1.0, .sum_d2 = 0.875, .sum_c = 1, .sum_c2 = 1, .tokens = 4};
    em_paired_stats s = em_paired_stats_compute(&t);
    CHECK(s.nll_diff == 0.25);
    CHECK(fabs(s.nll_diff_error - sqrt(0.15625 / 3)) < 1e-15);
    CHECK(s.accuracy_diff == 0.25);
    CHECK(fabs(s.accuracy_diff_error - sqrt((0.25 - 0.0625) / 3)) < 1e-15);

    /* identical runs: every difference 0 */
    t = (em_paired_totals){.tokens = 1000};
    s = em_paired_stats_compute(&t);
    CHECK(s.nll_diff == 0 && s.nll_diff_error == 0 && s.accuracy_diff == 0);

    /* the same as llama.cpp's sqrt(se_q^2 + se_b^2 - 2 cov) on correlated runs */
    enum { N = 5000 };
    double *base = malloc(N * sizeof *base), *cand = malloc(N * sizeof *cand);
    double *zeros = calloc(N, sizeof *zeros);
    em_kld_totals kt = {.count = N};
    t = (em_paired_totals){.tokens = N};
    srand(7);
    for (int i = 0; i < N; i++) {
        base[i] = 4.0 * rand() / RAND_MAX + 0.5;
        cand[i] = base[i] + 0.05 + 0.1 * rand() / RAND_MAX;
        double d = cand[i] - base[i];
        t.sum_d += d;
        t.sum_d2 += d * d;
        kt.sum_nll += cand[i];
        kt.sum_nll2 += cand[i] * cand[i];
        kt.sum_nll_base += base[i];
        kt.sum_nll_base2 += base[i] * base[i];
        kt.sum_nll_nll_base += cand[i] * base[i];
    }
    s = em_paired_stats_compute(&t);
    em_kld_stats k = em_kld_stats_compute(&kt, zeros, zeros);
    CHECK(fabs(s.nll_diff - k.ln_ppl_ratio.value) < 1e-12);
    CHECK(fabs(s.nll_diff_error / k.ln_ppl_ratio.error - 1) < 1e-6);
    /* and far below the unpaired sqrt(se_q^2 + se_b^2) */
    double unpaired =
        sqrt(k.ppl.error * k.ppl.error / (k.ppl.value * k.ppl.value) +
             k.ppl_base.error * k.ppl_base.error / (k.ppl_base.value * k.ppl_base.value));
    CHECK(s.nll_diff_error < unpaired / 10);
    free(base);
    free(cand);
    free(zeros);
    return test_finish();
}
