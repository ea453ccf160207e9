/* Regression checks (see check.h). */
#include "stages/report/check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/report/results.h"
#include "stages/report/strbuf.h"

static const char *const rule_names[EM_CHECK_RULES] = {"max", "min", "max_increase_pct",
                                                       "max_decrease_pct", "max_increase_sigma"};

const char *em_check_rule_name(em_check_rule rule) {
    return rule >= 0 && rule < EM_CHECK_RULES ? rule_names[rule] : "?";
}

int em_check_rule_find(const char *name) {
    for (int r = 0; r < EM_CHECK_RULES; r++)
        if (strcmp(name, rule_names[r]) == 0) return r;
    return -1;
}

/* The metrics a paired comparison covers: those computed from the paired stage's per-token NLLs
 * (or correct predictions), with what they divide the NLL sum by and how. */
typedef enum scale { PER_TOKEN, PER_WORD, PER_BYTE } scale;
typedef enum form { EXP_OF_MEAN, MEAN, ACCURACY } form;
static const struct paired_metric {
    const char *name;
    scale per;
    form shape;
    double factor; /* MEAN: the metric is factor * S / K */
} paired_metrics[] = {
    {"nll_mean", PER_TOKEN, MEAN, 1.0},
    {"token_ppl", PER_TOKEN, EXP_OF_MEAN, 1.0},
    {"word_ppl", PER_WORD, EXP_OF_MEAN, 1.0},
    {"byte_ppl", PER_BYTE, EXP_OF_MEAN, 1.0},
    {"bits_per_byte", PER_BYTE, MEAN, 1.4426950408889634}, /* 1 / ln 2 */
    {"token_accuracy", PER_TOKEN, ACCURACY, 1.0},
};

/* The paired standard error of value - base for key, or false when the pairing does not cover
 * it (another stage, or a metric not derived from the paired tokens). */
static bool paired_error(const em_check_pairing *p, const char *key, double value, double *error) {
    size_t len = p && p->stage ? strlen(p->stage) : 0;
    if (!len || strncmp(key, p->stage, len) != 0 || key[len] != '.') return false;
    for (size_t i = 0; i < sizeof paired_metrics / sizeof *paired_metrics; i++) {
        const struct paired_metric *pm = &paired_metrics[i];
        if (strcmp(key + len + 1, pm->name) != 0) continue;
        int64_t k = pm->per == PER_TOKEN ? p->tokens : pm->per == PER_WORD ? p->words : p->bytes;
        if (k <= 0) return false;
        /* the standard error of dS / K, S the NLL sum: N * se(mean d) / K */
        double se = (double)p->tokens / (double)k * p->stats.nll_diff_error;
        *error = pm->shape == ACCURACY      ? p->stats.accuracy_diff_error
                 : pm->shape == EXP_OF_MEAN ? fabs(value) * se
                                            : pm->factor * se;
        return true;
    }
    return false;
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

static bool upper_bound(em_check_rule rule) {
    return rule != EM_CHECK_MIN && rule != EM_CHECK_MAX_DECREASE_PCT;
}

/* c->message from the evaluated check. */
static void describe(em_check *c, const em_check_pairing *p) {
    const char *op = upper_bound(c->rule) ? "<=" : ">=";
    char how[512] = "";
    if (c->comparison == EM_COMPARE_PAIRED)
        snprintf(how, sizeof how, ", paired");
    else if (c->comparison == EM_COMPARE_UNPAIRED)
        snprintf(how, sizeof how, ", unpaired: %s",
                 p && p->unpaired_why ? p->unpaired_why : "no per-token baseline");
    free(c->message);
    if (c->rule == EM_CHECK_MAX_INCREASE_SIGMA)
        c->message = em_xasprintf("%s - baseline = %.8g ± %.3g is %s%s %.8g (%s %.6g%s)", c->key,
                                  c->difference, c->difference_error, c->passed ? "" : "not ", op,
                                  c->allowed, em_check_rule_name(c->rule), c->limit, how);
    else
        c->message = em_xasprintf("%s = %.8g is %s%s %.8g (%s %.6g%s)", c->key, c->value,
                                  c->passed ? "" : "not ", op, c->allowed,
                                  em_check_rule_name(c->rule), c->limit, how);
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
    if (c->rule == EM_CHECK_MAX || c->rule == EM_CHECK_MIN) {
        c->comparison = EM_COMPARE_ABSOLUTE;
        c->allowed = c->limit;
        c->passed = c->rule == EM_CHECK_MAX ? c->value <= c->limit : c->value >= c->limit;
        describe(c, pairing);
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
    if (paired_error(pairing, c->key, c->value, &c->difference_error)) {
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
    default: /* EM_CHECK_MAX_INCREASE_SIGMA */
        c->allowed = c->limit * c->difference_error;
        c->passed = c->difference <= c->allowed;
        break;
    }
    describe(c, pairing);
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
        const char *op = upper_bound(c->rule) ? "<=" : ">=";
        char change[64] = "";
        if (c->comparison != EM_COMPARE_ABSOLUTE)
            snprintf(change, sizeof change, "%+.6g ± %.3g %s", c->difference, c->difference_error,
                     c->comparison == EM_COMPARE_PAIRED ? "p" : "u");
        em_strbuf_printf(&b, "%-*s  %16.8g  %24s  %s %13.8g  %s\n", width, names[i], c->value,
                         change, op, c->allowed, c->passed ? "PASS" : "FAIL");
        free(names[i]);
    }
    em_strbuf_add(&b, "(change: value - baseline; p: paired error, u: unpaired error)\n");
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
