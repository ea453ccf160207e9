/* llama-perplexity --kl-divergence's layout of the compare statistics (see kld_summary.h). */
#include "stages/metrics/kld_summary.h"

#include <stdio.h>

#include "util/log.h"

/* "99.9%", " 5.0%" or "Median" before a percentile's name; at in (0, 1). */
static void percentile_label(char *buf, size_t size, double at) {
    if (at == 0.5)
        snprintf(buf, size, "Median");
    else
        snprintf(buf, size, "%4.1f%%", 100.0 * at);
}

void em_kld_summary_print(const char *candidate, const em_kld_stats *s, int64_t tokens) {
    char label[16];
    em_log_summary("\n====== Perplexity statistics (%s, %lld tokens) ======\n", candidate,
                   (long long)tokens);
    em_log_summary("Mean PPL(Q)                   : %10.6f ± %10.6f\n", s->ppl.value, s->ppl.error);
    em_log_summary("Mean PPL(base)                : %10.6f ± %10.6f\n", s->ppl_base.value,
                   s->ppl_base.error);
    em_log_summary("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100.0 * s->ln_ppl_correlation);
    em_log_summary("Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", s->ln_ppl_ratio.value,
                   s->ln_ppl_ratio.error);
    em_log_summary("Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", s->ppl_ratio.value,
                   s->ppl_ratio.error);
    em_log_summary("Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n", s->ppl_diff.value,
                   s->ppl_diff.error);
    em_log_summary("\n====== KL divergence statistics ======\n");
    em_log_summary("Mean    KLD: %10.6f ± %10.6f\n", s->kld.value, s->kld.error);
    em_log_summary("Maximum KLD: %10.6f\n", s->kld_max);
    for (int i = 0; i < EM_KLD_PERCENTILES; i++) {
        percentile_label(label, sizeof label, em_kld_percentile_at[i]);
        em_log_summary("%-7s KLD: %10.6f\n", label, s->kld_percentile[i]);
    }
    em_log_summary("Minimum KLD: %10.6f\n", s->kld_min);
    em_log_summary("\n====== Token probability statistics ======\n");
    em_log_summary("Mean    Δp: %6.3f ± %5.3f %%\n", 100.0 * s->dp.value, 100.0 * s->dp.error);
    em_log_summary("Maximum Δp: %6.3f%%\n", 100.0 * s->dp_max);
    for (int i = 0; i < EM_DP_PERCENTILES; i++) {
        percentile_label(label, sizeof label, em_dp_percentile_at[i]);
        em_log_summary("%-7s Δp: %6.3f%%\n", label, 100.0 * s->dp_percentile[i]);
    }
    em_log_summary("Minimum Δp: %6.3f%%\n", 100.0 * s->dp_min);
    em_log_summary("RMS Δp    : %6.3f ± %5.3f %%\n", 100.0 * s->dp_rms.value,
                   100.0 * s->dp_rms.error);
    em_log_summary("Same top p: %6.3f ± %5.3f %%\n", 100.0 * s->same_top.value,
                   100.0 * s->same_top.error);
}
