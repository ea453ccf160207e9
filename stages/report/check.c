/* Regression checks (see check.h). */
#include "stages/report/check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/metrics/mcnemar.h"
#include "stages/metrics/metric_table.h"
#include "stages/report/results.h"
#include "stages/report/strbuf.h"

/* One row per rule: its name in the recipe, whether it bounds the value from above (else from
 * below) and whether it compares with a baseline. */
static const struct rule_def {
    const char *name;
    bool upper;
    bool relative;
} rule_table[EM_CHECK_RULES] = {
    [EM_CHECK_MAX] = {"max", true, false},
    [EM_CHECK_MIN] = {"min", false, false},
    [EM_CHECK_MAX_INCREASE_PCT] = {"max_increase_pct", true, true},
    [EM_CHECK_MAX_DECREASE_PCT] = {"max_decrease_pct", false, true},
    [EM_CHECK_MAX_INCREASE_SIGMA] = {"max_increase_sigma", true, true},
    [EM_CHECK_MAX_DECREASE_SIGMA] = {"max_decrease_sigma", false, true},
    [EM_CHECK_MCNEMAR_P] = {"mcnemar_p", false, true},
};

const char *em_check_rule_name(em_check_rule rule) {
    return rule >= 0 && rule < EM_CHECK_RULES ? rule_table[rule].name : "?";
}

bool em_check_rule_relative(em_check_rule rule) {
    return rule_table[rule].relative;
}

/* The paired standard error of value - base for key, or false when the pairing does not cover
 * it (another stage, or a metric its row says is not derived from the paired tokens). */
static bool paired_error(const em_check_pairing *p, const char *key, double value, double *error) {
    size_t len = p && p->stage ? strlen(p->stage) : 0;
    if (!len || strncmp(key, p->stage, len) != 0 || key[len] != '.') return false;
    const em_metric_def *def = em_metric_def_find(key + len + 1);
    if (!def || def->pairing == EM_PAIRING_NONE) return false;
    int64_t k = def->per == EM_PER_TOKEN  ? p->tokens
                : def->per == EM_PER_WORD ? p->words
                                          : p->bytes;
    if (k <= 0) return false;
    /* the standard error of dS / K, S the NLL sum: N * se(mean d) / K */
    double se = (double)p->tokens / (double)k * p->stats.nll_diff_error;
    *error = def->pairing == EM_PAIRING_ACCURACY       ? p->stats.accuracy_diff_error
             : def->pairing == EM_PAIRING_NLL_EXP_MEAN ? fabs(value) * se
                                                       : def->factor * se;
    return true;
}

/* "no metric 'x' in <where> (it has: a, b, ...)", listing at most 8 keys. */
static em_status missing(const em_check *c, const char *where, const char *const *keys,
                         size_t count) {
    em_strbuf b = {0};
    for (size_t i = 0; i < count && i < 8; i++)
        em_strbuf_printf(&b, "%s%s", i ? ", " : "", keys[i]);
    if (count > 8) em_strbuf_add(&b, ", ...");
    char *have = em_strbuf_take(&b);
    em_status err =
        em_error_at(EM_EXIT_BAD_INPUT, c->mark, "%s: no metric '%s' in %s (it has: %s)",
                    em_check_rule_name(c->rule), c->key, where, count ? have : "no metrics");
    free(have);
    return err;
}

typedef struct key_list {
    char **keys;
    size_t count;
} key_list;

static void collect_key(const char *key, double value, const double *error, bool timing,
                        void *user) {
    key_list *l = user;
    l->keys = em_xrealloc(l->keys, (l->count + 1) * sizeof *l->keys);
    l->keys[l->count++] = em_xstrdup(key);
}

/* c->message from the evaluated check (why: when unpaired, why). */
static void describe(em_check *c, const char *why) {
    const char *op = rule_table[c->rule].upper ? "<=" : ">=";
    char how[512] = "";
    if (c->comparison == EM_COMPARE_PAIRED && c->examples)
        snprintf(how, sizeof how, ", paired over %lld examples", (long long)c->examples);
    else if (c->comparison == EM_COMPARE_PAIRED)
        snprintf(how, sizeof how, ", paired");
    else if (c->comparison == EM_COMPARE_UNPAIRED)
        snprintf(how, sizeof how, ", unpaired: %s", why ? why : "no per-token baseline");
    free(c->message);
    if (c->rule == EM_CHECK_MCNEMAR_P)
        c->message = em_xasprintf(
            "%s: McNemar p = %.6g %s %.6g with %lld examples only the baseline got right and %lld "
            "only this run: %s (%s %.6g%s)",
            c->key, c->p_value, c->p_value < c->allowed ? "<" : ">=", c->allowed,
            (long long)c->baseline_only, (long long)c->candidate_only,
            c->passed ? "no significant decrease" : "a significant decrease",
            em_check_rule_name(c->rule), c->limit, how);
    else if (c->rule == EM_CHECK_MAX_INCREASE_SIGMA || c->rule == EM_CHECK_MAX_DECREASE_SIGMA)
        c->message = em_xasprintf("%s - baseline = %.8g ± %.3g is %s%s %.8g (%s %.6g%s)", c->key,
                                  c->difference, c->difference_error, c->passed ? "" : "not ", op,
                                  c->allowed, em_check_rule_name(c->rule), c->limit, how);
    else
        c->message = em_xasprintf("%s = %.8g is %s%s %.8g (%s %.6g%s)", c->key, c->value,
                                  c->passed ? "" : "not ", op, c->allowed,
                                  em_check_rule_name(c->rule), c->limit, how);
}

/* mcnemar_p on c: McNemar's p of the discordant examples. An error (exit 2) when its metric was
 * not paired by example or is not 0/1. */
static em_status mcnemar(em_check *c, const em_example_pairing *ex, const char *why) {
    if (!ex || ex->why)
        return em_error_at(EM_EXIT_BAD_INPUT, c->mark,
                           "mcnemar_p: %s: McNemar's test needs the per-example values of both "
                           "runs over the same examples, and this comparison is unpaired: %s",
                           c->key,
                           ex    ? ex->why
                           : why ? why
                                 : "not a task metric kept per example");
    if (ex->not_binary)
        return em_error_at(EM_EXIT_BAD_INPUT, c->mark,
                           "mcnemar_p: %s is not a 0/1 metric (%s): McNemar's test needs each "
                           "example right or wrong; use max_decrease_sigma for it",
                           c->key, ex->not_binary);
    c->baseline_only = ex->baseline_only;
    c->candidate_only = ex->candidate_only;
    c->p_value = em_mcnemar_exact_p(ex->baseline_only, ex->candidate_only);
    c->allowed = c->limit;
    c->passed = !(ex->baseline_only > ex->candidate_only && c->p_value < c->limit);
    return NULL;
}

em_status em_check_evaluate(em_check *c, const em_metrics *m, const cJSON *baseline,
                            const char *source, double k, const em_check_pairing *pairing) {
    const em_metric *it = em_metrics_find(m, c->key);
    if (!it) {
        const char **keys = em_xcalloc(m->count ? m->count : 1, sizeof *keys);
        for (size_t i = 0; i < m->count; i++) keys[i] = m->items[i].key;
        em_status err = missing(c, "the metrics", keys, m->count);
        free(keys);
        return err;
    }
    c->value = it->value;
    if (!rule_table[c->rule].relative) {
        c->comparison = EM_COMPARE_ABSOLUTE;
        c->allowed = c->limit;
        c->passed = rule_table[c->rule].upper ? c->value <= c->limit : c->value >= c->limit;
        describe(c, NULL);
        return NULL;
    }
    double base_error = 0;
    bool has_error = false;
    if (!baseline || !em_results_metric(baseline, c->key, &c->base, &base_error, &has_error)) {
        if (!baseline)
            return em_error_at(EM_EXIT_BAD_INPUT, c->mark,
                               "%s needs a baseline (`baseline` or `baseline_history`)",
                               em_check_rule_name(c->rule));
        key_list l = {0};
        em_results_each_metric(baseline, collect_key, &l);
        char *where = em_xasprintf("baseline %s", source);
        em_status err = missing(c, where, (const char *const *)l.keys, l.count);
        free(where);
        for (size_t i = 0; i < l.count; i++) free(l.keys[i]);
        free(l.keys);
        return err;
    }
    c->difference = c->value - c->base;
    const em_example_pairing *ex = pairing ? pairing->examples : NULL;
    const char *why = ex && ex->why ? ex->why : pairing ? pairing->unpaired_why : NULL;
    if (ex && !ex->why) {
        c->comparison = EM_COMPARE_PAIRED;
        c->difference_error = ex->difference_error;
        c->examples = ex->count;
    } else if (paired_error(pairing, c->key, c->value, &c->difference_error)) {
        c->comparison = EM_COMPARE_PAIRED;
    } else {
        double err_value = it->has_error && isfinite(it->error) ? it->error : 0;
        if (!has_error || !isfinite(base_error)) base_error = 0;
        c->comparison = EM_COMPARE_UNPAIRED;
        c->difference_error = sqrt(err_value * err_value + base_error * base_error);
    }
    double slack = fabs(c->base) * c->limit / 100 + k * c->difference_error;
    switch (c->rule) {
    case EM_CHECK_MAX_INCREASE_PCT:
        c->allowed = c->base + slack;
        c->passed = c->value <= c->allowed;
        break;
    case EM_CHECK_MAX_DECREASE_PCT:
        c->allowed = c->base - slack;
        c->passed = c->value >= c->allowed;
        break;
    case EM_CHECK_MAX_INCREASE_SIGMA:
        c->allowed = c->limit * c->difference_error;
        c->passed = c->difference <= c->allowed;
        break;
    case EM_CHECK_MAX_DECREASE_SIGMA:
        c->allowed = 0.0 - c->limit * c->difference_error; /* 0 - x: never -0 */
        c->passed = c->difference >= c->allowed;
        break;
    default: { /* EM_CHECK_MCNEMAR_P */
        em_status err = mcnemar(c, ex, why);
        if (err) return err;
        break;
    }
    }
    describe(c, why);
    return NULL;
}

char *em_check_table(const em_check *checks, size_t count) {
    int width = (int)strlen("check");
    char **names = em_xcalloc(count ? count : 1, sizeof *names);
    for (size_t i = 0; i < count; i++) {
        const em_check *c = &checks[i];
        names[i] = em_xasprintf("%s %s %.6g", c->key, em_check_rule_name(c->rule), c->limit);
        if ((int)strlen(names[i]) > width) width = (int)strlen(names[i]);
    }
    em_strbuf b = {0};
    em_strbuf_printf(&b, "%-*s  %16s  %24s  %16s  %s\n", width, "check", "value", "change ± error",
                     "bound", "result");
    for (size_t i = 0; i < count; i++) {
        const em_check *c = &checks[i];
        const char *op = rule_table[c->rule].upper ? "<=" : ">=";
        char change[64] = "";
        if (c->comparison != EM_COMPARE_ABSOLUTE)
            snprintf(change, sizeof change, "%+.6g ± %.3g %s", c->difference, c->difference_error,
                     c->comparison == EM_COMPARE_PAIRED ? "p" : "u");
        double shown = c->rule == EM_CHECK_MCNEMAR_P ? c->p_value : c->value;
        em_strbuf_printf(&b, "%-*s  %16.8g  %24s  %s %13.8g  %s\n", width, names[i], shown, change,
                         op, c->allowed, c->passed ? "PASS" : "FAIL");
        free(names[i]);
    }
    em_strbuf_add(&b, "(change: value - baseline; p: paired error, u: unpaired error; the value "
                      "of mcnemar_p is McNemar's p)\n");
    free(names);
    return em_strbuf_take(&b);
}

static void add_number_or_null(cJSON *o, const char *key, double v, bool present) {
    if (present && isfinite(v))
        cJSON_AddNumberToObject(o, key, v);
    else
        cJSON_AddNullToObject(o, key);
}

cJSON *em_verdict_json(const em_verdict *v) {
    static const char *const comparisons[] = {"absolute", "paired", "unpaired"};
    cJSON *g = cJSON_CreateObject();
    cJSON_AddStringToObject(g, "stage", v->stage);
    cJSON_AddBoolToObject(g, "passed", v->passed);
    if (v->baseline)
        cJSON_AddItemToObject(g, "baseline", cJSON_Duplicate(v->baseline, true));
    else
        cJSON_AddNullToObject(g, "baseline");
    cJSON *checks = cJSON_AddArrayToObject(g, "checks");
    for (size_t i = 0; i < v->count; i++) {
        const em_check *c = &v->checks[i];
        bool rel = c->comparison != EM_COMPARE_ABSOLUTE;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "metric", c->key);
        cJSON_AddStringToObject(o, "rule", em_check_rule_name(c->rule));
        cJSON_AddNumberToObject(o, "threshold", c->limit);
        add_number_or_null(o, "value", c->value, true);
        add_number_or_null(o, "baseline", c->base, rel);
        cJSON_AddStringToObject(o, "comparison", comparisons[c->comparison]);
        add_number_or_null(o, "difference", c->difference, rel);
        add_number_or_null(o, "difference_error", c->difference_error, rel);
        add_number_or_null(o, "bound", c->allowed, true);
        if (c->examples) cJSON_AddNumberToObject(o, "examples", (double)c->examples);
        if (c->rule == EM_CHECK_MCNEMAR_P) {
            cJSON_AddNumberToObject(o, "p_value", c->p_value);
            cJSON_AddNumberToObject(o, "baseline_only_correct", (double)c->baseline_only);
            cJSON_AddNumberToObject(o, "candidate_only_correct", (double)c->candidate_only);
        }
        cJSON_AddBoolToObject(o, "passed", c->passed);
        cJSON_AddStringToObject(o, "message", c->message ? c->message : "");
        cJSON_AddItemToArray(checks, o);
    }
    if (v->paired) {
        cJSON *p = cJSON_AddObjectToObject(g, "paired");
        cJSON_AddStringToObject(p, "stage", v->paired_stage);
        cJSON_AddNumberToObject(p, "windows", (double)v->paired_windows);
        cJSON_AddNumberToObject(p, "tokens", (double)v->paired_tokens);
        cJSON_AddNumberToObject(p, "nll_mean_difference", v->paired_stats.nll_diff);
        cJSON_AddNumberToObject(p, "nll_mean_difference_error", v->paired_stats.nll_diff_error);
        cJSON_AddNumberToObject(p, "token_accuracy_difference", v->paired_stats.accuracy_diff);
        cJSON_AddNumberToObject(p, "token_accuracy_difference_error",
                                v->paired_stats.accuracy_diff_error);
    }
    return g;
}

void em_verdict_free(em_verdict *v) {
    if (!v) return;
    for (size_t i = 0; i < v->count; i++) {
        free(v->checks[i].key);
        free(v->checks[i].message);
    }
    free(v->checks);
    free(v->stage);
    free(v->paired_stage);
    cJSON_Delete(v->baseline);
    free(v->candidate_window_nll);
    free(v->baseline_window_nll);
    free(v);
}
