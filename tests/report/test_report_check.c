/* Unit tests of the gate's checks: max/min, relative rules with and without tolerance, task
 * metrics paired by example (max_decrease_sigma, mcnemar_p and its refusals), missing
 * metrics in the metrics and in the baseline, and the check table. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stages/report/check.h"
#include "stages/report/results.h"
#include "test.h"

static em_check make(em_check_rule rule, const char *key, double limit) {
    return (em_check){.rule = rule, .key = (char *)key, .limit = limit, .mark = {"r.yaml", 7, 9}};
}

/* A new check in place of an evaluated one (whose message is freed). */
static em_check remake(em_check *old, em_check_rule rule, const char *key, double limit) {
    free(old->message);
    return make(rule, key, limit);
}

int main(void) {
    em_metrics *m = em_metrics_new();
    em_metric *ppl = em_metrics_set(m, "f.token_ppl", 10.5);
    ppl->has_error = true;
    ppl->error = 0.3;
    em_metrics_set(m, "f.token_accuracy", 0.4);

    em_check c = make(EM_CHECK_MAX, "f.token_ppl", 10.5);
    CHECK(em_check_evaluate(&c, m, NULL, NULL, 0, NULL) == NULL);
    CHECK(c.passed && c.value == 10.5 && c.allowed == 10.5); /* equal to the limit passes */
    c = remake(&c, EM_CHECK_MAX, "f.token_ppl", 10.4);
    CHECK(em_check_evaluate(&c, m, NULL, NULL, 0, NULL) == NULL);
    CHECK(!c.passed);
    c = remake(&c, EM_CHECK_MIN, "f.token_accuracy", 0.5);
    CHECK(em_check_evaluate(&c, m, NULL, NULL, 0, NULL) == NULL);
    CHECK(!c.passed);

    /* baseline: ppl 10.0 ± 0.4, accuracy 0.42 */
    em_metrics *b = em_metrics_new();
    em_metric *bp = em_metrics_set(b, "f.token_ppl", 10.0);
    bp->has_error = true;
    bp->error = 0.4;
    em_metrics_set(b, "f.token_accuracy", 0.42);
    em_results_info info = {.recipe_name = "r", .world_size = 1};
    cJSON *base = em_results_build(b, &info);

    /* +5% exactly: 10.5 <= 10 + 0.5 passes; 4% fails without tolerance ... */
    c = remake(&c, EM_CHECK_MAX_INCREASE_PCT, "f.token_ppl", 5);
    CHECK(em_check_evaluate(&c, m, base, "base.json", 0, NULL) == NULL);
    CHECK(c.passed && c.base == 10.0 && c.allowed == 10.5);
    c = remake(&c, EM_CHECK_MAX_INCREASE_PCT, "f.token_ppl", 4);
    CHECK(em_check_evaluate(&c, m, base, "base.json", 0, NULL) == NULL);
    CHECK(!c.passed);
    /* ... and passes with one combined standard error sqrt(0.3^2 + 0.4^2) = 0.5 of slack */
    c = remake(&c, EM_CHECK_MAX_INCREASE_PCT, "f.token_ppl", 4);
    CHECK(em_check_evaluate(&c, m, base, "base.json", 1, NULL) == NULL);
    CHECK(c.passed && fabs(c.allowed - 10.9) < 1e-12);
    /* accuracy fell from 0.42 to 0.4: 4.76% */
    c = remake(&c, EM_CHECK_MAX_DECREASE_PCT, "f.token_accuracy", 5);
    CHECK(em_check_evaluate(&c, m, base, "base.json", 0, NULL) == NULL);
    CHECK(c.passed);
    c = remake(&c, EM_CHECK_MAX_DECREASE_PCT, "f.token_accuracy", 4);
    CHECK(em_check_evaluate(&c, m, base, "base.json", 0, NULL) == NULL);
    CHECK(!c.passed);

    char *table = em_check_table(&c, 1);
    CHECK_CONTAINS(table, "f.token_accuracy max_decrease_pct 4");
    CHECK_CONTAINS(table, "FAIL");
    free(table);

    /* a metric that does not exist, in the metrics and in the baseline */
    c = remake(&c, EM_CHECK_MAX, "f.token_pl", 1);
    em_status err = em_check_evaluate(&c, m, NULL, NULL, 0, NULL);
    CHECK(err && err->exit_code == EM_EXIT_BAD_INPUT);
    if (err)
        CHECK_STR_EQ(err->message, "r.yaml:7:9: max: no metric 'f.token_pl' in the metrics (it "
                                   "has: f.token_ppl, f.token_accuracy)");
    em_error_free(err);
    em_metrics_set(m, "g.x", 1);
    c = remake(&c, EM_CHECK_MAX_INCREASE_PCT, "g.x", 1);
    err = em_check_evaluate(&c, m, base, "base.json", 0, NULL);
    if (err)
        CHECK_STR_EQ(err->message, "r.yaml:7:9: max_increase_pct: no metric 'g.x' in baseline "
                                   "base.json (it has: f.token_ppl, f.token_accuracy)");
    CHECK(err != NULL);
    em_error_free(err);
    err = em_check_evaluate(&c, m, NULL, NULL, 0, NULL);
    CHECK(err != NULL);
    em_error_free(err);

    /* Paired: the error of the difference comes from the per-token differences, carried to each
     * metric's scale; the percent rule's slack shrinks with it. */
    em_check_pairing pairing = {.stage = "f",
                                .stats = {.nll_diff = 0.048790164169432, .nll_diff_error = 0.002},
                                .tokens = 1000,
                                .words = 250,
                                .bytes = 4000};
    c = remake(&c, EM_CHECK_MAX_INCREASE_PCT, "f.token_ppl", 4);
    CHECK(em_check_evaluate(&c, m, base, "base.json", 1, &pairing) == NULL);
    CHECK(c.comparison == EM_COMPARE_PAIRED && c.difference == 0.5);
    CHECK(fabs(c.difference_error - 10.5 * 0.002) < 1e-15); /* value * se(mean d) */
    CHECK(!c.passed && fabs(c.allowed - (10.4 + 0.021)) < 1e-12);
    CHECK_STR_EQ(c.message, "f.token_ppl = 10.5 is not <= 10.421 (max_increase_pct 4, paired)");
    /* the same check unpaired (no pairing) would pass: 10.9, as above */
    pairing.stage = NULL;
    pairing.unpaired_why = "the baseline base.json kept no per-token scores";
    c = remake(&c, EM_CHECK_MAX_INCREASE_PCT, "f.token_ppl", 4);
    CHECK(em_check_evaluate(&c, m, base, "base.json", 1, &pairing) == NULL);
    CHECK(c.passed && c.comparison == EM_COMPARE_UNPAIRED);
    CHECK_STR_EQ(c.message, "f.token_ppl = 10.5 is <= 10.9 (max_increase_pct 4, unpaired: the "
                            "baseline base.json kept no per-token scores)");
    pairing.stage = "f";
    /* max_increase_sigma: 0.5 > 3 * 0.021 */
    c = remake(&c, EM_CHECK_MAX_INCREASE_SIGMA, "f.token_ppl", 3);
    CHECK(em_check_evaluate(&c, m, base, "base.json", 0, &pairing) == NULL);
    CHECK(!c.passed && fabs(c.allowed - 0.063) < 1e-15);
    CHECK_STR_EQ(c.message, "f.token_ppl - baseline = 0.5 ± 0.021 is not <= 0.063 "
                            "(max_increase_sigma 3, paired)");
    c = remake(&c, EM_CHECK_MAX_INCREASE_SIGMA, "f.token_ppl", 30);
    CHECK(em_check_evaluate(&c, m, base, "base.json", 0, &pairing) == NULL);
    CHECK(c.passed);
    /* a task metric paired by example: accuracy 0.42 -> 0.4 over 100 examples, e = 0.01, 12
     * examples only the baseline got right and 3 only this run (McNemar p = 0.03515625) */
    em_example_pairing ex = {
        .count = 100, .difference_error = 0.01, .baseline_only = 12, .candidate_only = 3};
    pairing.examples = &ex;
    c = remake(&c, EM_CHECK_MAX_DECREASE_SIGMA, "f.token_accuracy", 1);
    CHECK(em_check_evaluate(&c, m, base, "base.json", 0, &pairing) == NULL);
    CHECK(!c.passed && c.comparison == EM_COMPARE_PAIRED && c.examples == 100 &&
          c.allowed == -0.01);
    CHECK_STR_EQ(c.message, "f.token_accuracy - baseline = -0.02 ± 0.01 is not >= -0.01 "
                            "(max_decrease_sigma 1, paired over 100 examples)");
    c = remake(&c, EM_CHECK_MAX_DECREASE_SIGMA, "f.token_accuracy", 3);
    CHECK(em_check_evaluate(&c, m, base, "base.json", 0, &pairing) == NULL);
    CHECK(c.passed);
    c = remake(&c, EM_CHECK_MCNEMAR_P, "f.token_accuracy", 0.05);
    CHECK(em_check_evaluate(&c, m, base, "base.json", 0, &pairing) == NULL);
    CHECK(!c.passed && c.p_value == 0.03515625 && c.baseline_only == 12 && c.candidate_only == 3);
    CHECK_STR_EQ(c.message, "f.token_accuracy: McNemar p = 0.0351562 < 0.05 with 12 examples only "
                            "the baseline got right and 3 only this run: a significant decrease "
                            "(mcnemar_p 0.05, paired over 100 examples)");
    ex.baseline_only = 3, ex.candidate_only = 12; /* as significant, but better: passes */
    c = remake(&c, EM_CHECK_MCNEMAR_P, "f.token_accuracy", 0.05);
    CHECK(em_check_evaluate(&c, m, base, "base.json", 0, &pairing) == NULL);
    CHECK(c.passed && c.p_value == 0.03515625);
    ex.not_binary = "the baseline's values of it may be other than 0 and 1, as a partial credit";
    c = remake(&c, EM_CHECK_MCNEMAR_P, "f.token_accuracy", 0.05);
    err = em_check_evaluate(&c, m, base, "base.json", 0, &pairing);
    CHECK(err && err->exit_code == EM_EXIT_BAD_INPUT);
    if (err)
        CHECK_STR_EQ(err->message,
                     "r.yaml:7:9: mcnemar_p: f.token_accuracy is not a 0/1 metric (the baseline's "
                     "values of it may be other than 0 and 1, as a partial credit): McNemar's test "
                     "needs each example right or wrong; use max_decrease_sigma for it");
    em_error_free(err);
    ex = (em_example_pairing){.why = "the baseline base.json kept no per-example values"};
    c = remake(&c, EM_CHECK_MCNEMAR_P, "f.token_accuracy", 0.05);
    err = em_check_evaluate(&c, m, base, "base.json", 0, &pairing);
    CHECK(err && err->exit_code == EM_EXIT_BAD_INPUT);
    if (err)
        CHECK_CONTAINS(err->message, "this comparison is unpaired: the baseline base.json kept no "
                                     "per-example values");
    em_error_free(err);
    /* an identical run: d = 0 ± 0 passes max_decrease_sigma with the bound 0 (not -0) */
    ex = (em_example_pairing){.count = 100};
    em_metrics_set(m, "f.same", 0.5);
    em_metrics_set(b, "f.same", 0.5);
    cJSON_Delete(base);
    base = em_results_build(b, &info);
    c = remake(&c, EM_CHECK_MAX_DECREASE_SIGMA, "f.same", 2);
    CHECK(em_check_evaluate(&c, m, base, "base.json", 0, &pairing) == NULL);
    CHECK(c.passed && c.difference == 0 && c.allowed == 0 && !signbit(c.allowed));
    pairing.examples = NULL;
    /* accuracy is paired with its own error; bits_per_byte per byte, / ln 2 */
    c = remake(&c, EM_CHECK_MAX_DECREASE_PCT, "f.token_accuracy", 5);
    pairing.stats.accuracy_diff_error = 0.01;
    CHECK(em_check_evaluate(&c, m, base, "base.json", 0, &pairing) == NULL);
    CHECK(c.comparison == EM_COMPARE_PAIRED && c.difference_error == 0.01);
    em_metrics_set(m, "f.bits_per_byte", 1.2);
    em_metrics_set(b, "f.bits_per_byte", 1.1);
    em_metrics_set(m, "f.token_ppl_se", 0.3);
    em_metrics_set(b, "f.token_ppl_se", 0.4);
    cJSON_Delete(base);
    base = em_results_build(b, &info);
    c = remake(&c, EM_CHECK_MAX_INCREASE_PCT, "f.bits_per_byte", 1);
    CHECK(em_check_evaluate(&c, m, base, "base.json", 0, &pairing) == NULL);
    CHECK(c.comparison == EM_COMPARE_PAIRED);
    CHECK(fabs(c.difference_error - 1000.0 / 4000 * 0.002 / log(2)) < 1e-15);
    /* a metric not derived from the paired tokens stays unpaired */
    c = remake(&c, EM_CHECK_MAX_INCREASE_PCT, "f.token_ppl_se", 50);
    CHECK(em_check_evaluate(&c, m, base, "base.json", 0, &pairing) == NULL);
    CHECK(c.comparison == EM_COMPARE_UNPAIRED && c.passed);

    /* NaN never passes */
    em_metrics_set(m, "g.x", NAN);
    c = remake(&c, EM_CHECK_MAX, "g.x", 1);
    CHECK(em_check_evaluate(&c, m, NULL, NULL, 0, NULL) == NULL);
    CHECK(!c.passed);

    free(c.message);
    cJSON_Delete(base);
    em_metrics_free(b);
    em_metrics_free(m);
    return test_finish();
}
