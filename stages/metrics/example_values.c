/* Per-example values of a task stage's metrics (see example_values.h). */
#include "stages/metrics/example_values.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

em_example_values *em_example_values_new(const char *stage) {
    em_example_values *v = em_xcalloc(1, sizeof *v);
    v->stage = em_xstrdup(stage);
    return v;
}

void em_example_values_free(em_example_values *v) {
    if (!v) return;
    for (size_t s = 0; s < v->count; s++) {
        em_example_set *set = &v->sets[s];
        for (size_t c = 0; c < set->column_count; c++) {
            free(set->columns[c].metric);
            free(set->columns[c].values);
        }
        free(set->columns);
        free(set->key);
        free(set->doc);
        free(set->sha256);
    }
    free(v->sets);
    free(v->stage);
    free(v);
}

em_example_set *em_example_values_add_set(em_example_values *v, const char *key, size_t count) {
    v->sets = em_xrealloc(v->sets, (v->count + 1) * sizeof *v->sets);
    em_example_set *set = &v->sets[v->count++];
    *set = (em_example_set){
        .key = em_xstrdup(key),
        .count = count,
        .doc = em_xcalloc(count ? count : 1, sizeof *set->doc),
        .sha256 = em_xcalloc(count ? count : 1, sizeof *set->sha256),
    };
    return set;
}

em_example_column *em_example_set_add_column(em_example_set *set, const char *metric, bool binary) {
    set->columns = em_xrealloc(set->columns, (set->column_count + 1) * sizeof *set->columns);
    em_example_column *c = &set->columns[set->column_count++];
    c->metric = em_xstrdup(metric);
    c->binary = binary;
    c->values = em_xcalloc(set->count ? set->count : 1, sizeof *c->values);
    return c;
}

em_example_set *em_example_values_add_concatenation(em_example_values *v, const char *key,
                                                    const size_t *members, size_t member_count,
                                                    const char *const *metrics,
                                                    size_t metric_count) {
    size_t n = 0;
    for (size_t i = 0; i < member_count; i++) n += v->sets[members[i]].count;
    em_example_values_add_set(v, key, n);
    em_example_set *set = &v->sets[v->count - 1]; /* adding it moved the members */
    for (size_t c = 0; c < metric_count; c++) {
        bool binary = true;
        for (size_t i = 0; i < member_count; i++)
            binary = binary && em_example_set_column(&v->sets[members[i]], metrics[c])->binary;
        em_example_set_add_column(set, metrics[c], binary);
    }
    size_t at = 0;
    for (size_t i = 0; i < member_count; i++) {
        const em_example_set *member = &v->sets[members[i]];
        memcpy(set->doc + at, member->doc, member->count * sizeof *set->doc);
        memcpy(set->sha256 + at, member->sha256, member->count * sizeof *set->sha256);
        for (size_t c = 0; c < metric_count; c++)
            memcpy(set->columns[c].values + at, em_example_set_column(member, metrics[c])->values,
                   member->count * sizeof *set->columns[c].values);
        at += member->count;
    }
    return set;
}

const em_example_set *em_example_values_find(const em_example_values *v, const char *key,
                                             size_t key_len) {
    for (size_t s = 0; v && s < v->count; s++)
        if (strlen(v->sets[s].key) == key_len && memcmp(v->sets[s].key, key, key_len) == 0)
            return &v->sets[s];
    return NULL;
}

const em_example_column *em_example_set_column(const em_example_set *set, const char *metric) {
    for (size_t c = 0; c < set->column_count; c++)
        if (strcmp(set->columns[c].metric, metric) == 0) return &set->columns[c];
    return NULL;
}

char *em_example_set_difference(const em_example_set *base, const em_example_set *cand) {
    size_t n = base->count < cand->count ? base->count : cand->count;
    for (size_t i = 0; i < n; i++)
        if (base->doc[i] != cand->doc[i] || strcmp(base->sha256[i], cand->sha256[i]) != 0)
            return em_xasprintf("example %zu differs (doc %lld with requests sha256 %.12s in the "
                                "baseline, doc %lld with %.12s in this run)",
                                i, (long long)base->doc[i], base->sha256[i],
                                (long long)cand->doc[i], cand->sha256[i]);
    if (base->count == cand->count) return NULL;
    const em_example_set *longer = base->count > cand->count ? base : cand;
    return em_xasprintf("example %zu (doc %lld) is only in %s: the baseline has %zu examples, "
                        "this run %zu",
                        n, (long long)longer->doc[n], longer == base ? "the baseline" : "this run",
                        base->count, cand->count);
}
