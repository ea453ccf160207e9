/* Unit tests of the metric table (stages/metrics/metric_table.c) and of setting metrics through
 * it (em_metrics_put): every metric the aggregate and compare stages set has a row; the rows the
 * gate pairs, the timings, the directions and the error metric are the ones documented. */
#include <math.h>
#include <string.h>

#include "stages/metrics/metric_table.h"
#include "stages/metrics/metrics.h"
#include "test.h"

static const char *const aggregate_names[] = {"token_ppl",
                                              "token_ppl_se",
                                              "nll_mean",
                                              "word_ppl",
                                              "byte_ppl",
                                              "bits_per_byte",
                                              "token_accuracy",
                                              "tokens",
                                              "windows",
                                              "words",
                                              "bytes",
                                              "seconds",
                                              "tokens_per_second",
                                              "slowest_rank",
                                              "fastest_rank",
                                              "rank_tokens_per_second_min",
                                              "rank_tokens_per_second_max"};
static const char *const compare_names[] = {
    "ppl",      "ppl_base", "ln_ppl_ratio", "ppl_ratio", "ppl_diff", "ln_ppl_correlation",
    "kld_mean", "kld_max",  "kld_min",      "kld_p99_9", "kld_p99",  "kld_p95",
    "kld_p90",  "kld_p50",  "kld_p10",      "kld_p05",   "kld_p01",  "dp_mean",
    "dp_rms",   "dp_max",   "dp_min",       "dp_p99_9",  "dp_p99",   "dp_p95",
    "dp_p90",   "dp_p75",   "dp_p50",       "dp_p25",    "dp_p10",   "dp_p05",
    "dp_p01",   "dp_p00_1", "same_top",     "tokens"};

static bool in(const char *name, const char *const *names, size_t count) {
    for (size_t i = 0; i < count; i++)
        if (strcmp(name, names[i]) == 0) return true;
    return false;
}

int main(void) {
    static const char *const timings[] = {
        "seconds",      "tokens_per_second",          "slowest_rank",
        "fastest_rank", "rank_tokens_per_second_min", "rank_tokens_per_second_max"};
    static const char *const higher[] = {"token_accuracy",
                                         "tokens_per_second",
                                         "rank_tokens_per_second_min",
                                         "rank_tokens_per_second_max",
                                         "ln_ppl_correlation",
                                         "same_top"};
    static const char *const paired[] = {"nll_mean", "token_ppl",     "word_ppl",
                                         "byte_ppl", "bits_per_byte", "token_accuracy"};
    const char *const *lists[] = {aggregate_names, compare_names};
    size_t sizes[] = {sizeof aggregate_names / sizeof *aggregate_names,
                      sizeof compare_names / sizeof *compare_names};
    for (int l = 0; l < 2; l++) {
        for (size_t i = 0; i < sizes[l]; i++) {
            const char *name = lists[l][i];
            const em_metric_def *def = em_metric_def_find(name);
            CHECK(def != NULL && strcmp(def->name, name) == 0 && def->unit && def->unit[0]);
            if (!def) continue;
            CHECK(def->timing == in(name, timings, sizeof timings / sizeof *timings));
            CHECK((def->better == EM_BETTER_HIGHER) ==
                  in(name, higher, sizeof higher / sizeof *higher));
            CHECK((def->pairing != EM_PAIRING_NONE) ==
                  in(name, paired, sizeof paired / sizeof *paired));
            CHECK((def->error != NULL) == (strcmp(name, "token_ppl") == 0));
        }
    }
    CHECK(em_metric_def_find("kld_p99.9") == NULL && em_metric_def_find("") == NULL);

    /* how the gate carries the paired error to each metric's scale */
    const em_metric_def *d = em_metric_def_find("bits_per_byte");
    CHECK(d->pairing == EM_PAIRING_NLL_MEAN && d->per == EM_PER_BYTE &&
          d->factor == 1.0 / log(2.0));
    d = em_metric_def_find("word_ppl");
    CHECK(d->pairing == EM_PAIRING_NLL_EXP_MEAN && d->per == EM_PER_WORD);
    d = em_metric_def_find("nll_mean");
    CHECK(d->pairing == EM_PAIRING_NLL_MEAN && d->per == EM_PER_TOKEN && d->factor == 1.0);
    CHECK(em_metric_def_find("token_accuracy")->pairing == EM_PAIRING_ACCURACY);

    /* keys "<stage>.<name>" and the error metric */
    CHECK(em_metric_def_of_key("f_ref.token_ppl") == em_metric_def_find("token_ppl"));
    CHECK(em_metric_def_of_key("token_ppl") == NULL);
    CHECK(em_metric_def_error_of("token_ppl_se") == em_metric_def_find("token_ppl"));
    CHECK(em_metric_def_error_of("other_se") == NULL &&
          em_metric_def_error_of("token_ppl") == NULL);
    CHECK(em_metric_higher_is_better("s.same_top") && !em_metric_higher_is_better("s.kld_mean"));
    CHECK(!em_metric_higher_is_better("s.unknown_accuracy")); /* no row: lower */

    /* setting metrics: the key, the row's timing flag, the error metric right after its metric */
    em_metrics *m = em_metrics_new();
    em_metrics_put(m, "f", "tokens", 875);
    em_metric *ppl = em_metrics_put_with_error(m, "f", "token_ppl", 22.5, 2.25);
    CHECK(strcmp(ppl->key, "f.token_ppl") == 0 && ppl->value == 22.5 && ppl->has_error &&
          ppl->error == 2.25 && !ppl->timing);
    em_metrics_put_with_error(m, "g", "ppl", 3.0, 0.5);
    em_metrics_put(m, "f", "seconds", 1.5);
    CHECK(m->count == 5);
    CHECK(strcmp(m->items[0].key, "f.tokens") == 0 && !m->items[0].has_error);
    CHECK(strcmp(m->items[2].key, "f.token_ppl_se") == 0 && m->items[2].value == 2.25 &&
          !m->items[2].has_error);
    CHECK(strcmp(m->items[3].key, "g.ppl") == 0 && m->items[3].error == 0.5);
    CHECK(strcmp(m->items[4].key, "f.seconds") == 0 && m->items[4].timing);
    em_metrics_free(m);
    return test_finish();
}
