/* Perplexity math against values computed independently with NumPy:
 *   x = [0.5, 1.25, 2.0, 0.125]; ppl = exp(mean(x)); se = sqrt(var(x) / (n-1)) * ppl;
 *   word_ppl = exp(sum(x) / 3); byte_ppl = exp(sum(x) / 10); bpb = sum(x) / 10 / ln 2. */
#include <math.h>

#include "stages/metrics/nll_stats.h"
#include "test.h"

static int close_to(double a, double b) {
    return fabs(a - b) <= 1e-14 * fabs(b);
}

int main(void) {
    em_nll_totals t = {
        .sum_nll = 3.875, .sum_nll2 = 5.828125, .tokens = 4, .words = 3, .bytes = 10, .correct = 1};
    em_nll_stats s = em_nll_stats_compute(&t);
    CHECK(close_to(s.token_ppl, 2.6346490888156313));
    CHECK(s.has_se);
    CHECK(close_to(s.token_ppl_se, 1.095366448542965));
    CHECK(close_to(s.nll_mean, 0.96875));
    CHECK(s.has_words);
    CHECK(close_to(s.word_ppl, 3.638846248353525));
    CHECK(s.has_bytes);
    CHECK(close_to(s.byte_ppl, 1.4732929536190154));
    CHECK(close_to(s.bits_per_byte, 0.5590443283444734));
    CHECK(close_to(s.token_accuracy, 0.25));

    /* One token: no standard error; no words or bytes: no word/byte perplexity. */
    em_nll_totals one = {.sum_nll = 2.0, .sum_nll2 = 4.0, .tokens = 1};
    s = em_nll_stats_compute(&one);
    CHECK(!s.has_se);
    CHECK(!s.has_words);
    CHECK(!s.has_bytes);
    CHECK(close_to(s.token_ppl, exp(2.0)));
    return test_finish();
}
