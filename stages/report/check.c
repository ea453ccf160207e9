/* Regression checks (see check.h). */
#include "stages/report/check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stages/report/results.h"
#include "stages/report/strbuf.h"

const char *em_check_rule_name(em_check_rule rule) {
    switch (rule) {
    case EM_CHECK_MAX:
        return "max";
    case EM_CHECK_MIN:
        return "min";
    case EM_CHECK_MAX_INCREASE_PCT:
        return "max_increase_pct";
    case EM_CHECK_MAX_DECREASE_PCT:
        return "max_decrease_pct";
    }
    return "?";
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

em_status em_check_evaluate(em_check *c, const em_metrics *m, const cJSON *baseline,
                            const char *source, double k) {
    const em_metric *it = em_metrics_find(m, c->key);
    if (!it) {
        const char **keys = em_xcalloc(m->count ? m->count : 1, sizeof *keys);
        for (size_t i = 0; i < m->count; i++) keys[i] = m->items[i].key;
        em_status err = missing(c, "the metrics", keys, m->count);
        free(keys);
        return err;
    }
    c->value = it->value;
    double err_value = it->has_error ? it->error : 0;
    if (c->rule == EM_CHECK_MAX) {
        c->allowed = c->limit;
        c->passed = c->value <= c->limit;
        return NULL;
    }
    if (c->rule == EM_CHECK_MIN) {
        c->allowed = c->limit;
        c->passed = c->value >= c->limit;
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
    if (!has_error || !isfinite(base_error)) base_error = 0;
    double slack =
        fabs(c->base) * c->limit / 100 + k * sqrt(err_value * err_value + base_error * base_error);
    if (c->rule == EM_CHECK_MAX_INCREASE_PCT) {
        c->allowed = c->base + slack;
        c->passed = c->value <= c->allowed;
    } else {
        c->allowed = c->base - slack;
        c->passed = c->value >= c->allowed;
    }
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
    em_strbuf_printf(&b, "%-*s  %16s  %16s  %s\n", width, "check", "value", "bound", "result");
    for (size_t i = 0; i < count; i++) {
        const em_check *c = &checks[i];
        const char *op =
            c->rule == EM_CHECK_MAX || c->rule == EM_CHECK_MAX_INCREASE_PCT ? "<=" : ">=";
        em_strbuf_printf(&b, "%-*s  %16.8g  %s %13.8g  %s\n", width, names[i], c->value, op,
                         c->allowed, c->passed ? "PASS" : "FAIL");
        free(names[i]);
    }
    free(names);
    return em_strbuf_take(&b);
}
