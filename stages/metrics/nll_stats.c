/* Perplexity, its standard error, word/byte perplexity and accuracy from totals (see
 * nll_stats.h). */
#include "stages/metrics/nll_stats.h"

#include <math.h>

em_nll_stats em_nll_stats_compute(const em_nll_totals *t) {
    em_nll_stats s = {0};
    double n = (double)t->tokens;
    s.nll_mean = t->sum_nll / n;
    s.token_ppl = exp(s.nll_mean);
    s.token_accuracy = (double)t->correct / n;
    double variance = t->sum_nll2 / n - s.nll_mean * s.nll_mean;
    if (t->tokens > 1 && variance > 0) {
        s.token_ppl_se = sqrt(variance / (n - 1)) * s.token_ppl;
        s.has_se = true;
    }
    if (t->words > 0) {
        s.word_ppl = exp(t->sum_nll / (double)t->words);
        s.has_words = true;
    }
    if (t->bytes > 0) {
        s.byte_ppl = exp(t->sum_nll / (double)t->bytes);
        s.bits_per_byte = t->sum_nll / (double)t->bytes / log(2.0);
        s.has_bytes = true;
    }
    return s;
}
