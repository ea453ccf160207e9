/* Building, checking and reading results documents (see results.h). */
#include "stages/report/results.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build_info.h"
#include "util/regular_file.h"

const char *em_results_time(time_t t, char *buf, size_t size) {
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

static void add_string_or_null(cJSON *obj, const char *key, const char *s) {
    if (s)
        cJSON_AddStringToObject(obj, key, s);
    else
        cJSON_AddNullToObject(obj, key);
}

static void add_number_or_null(cJSON *obj, const char *key, double v) {
    if (isfinite(v))
        cJSON_AddNumberToObject(obj, key, v);
    else
        cJSON_AddNullToObject(obj, key);
}
/* The object of stage `stage` under metrics, created on first use. */
static cJSON *stage_object(cJSON *metrics, const char *stage) {
    cJSON *obj = cJSON_GetObjectItemCaseSensitive(metrics, stage);
    if (!obj) obj = cJSON_AddObjectToObject(metrics, stage);
    return obj;
}

cJSON *em_results_build(const em_metrics *m, const em_results_info *info) {
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "schema", EM_RESULTS_SCHEMA_ID);

    cJSON *recipe = cJSON_AddObjectToObject(doc, "recipe");
    add_string_or_null(recipe, "name", info->recipe_name);
    add_string_or_null(recipe, "sha256", info->recipe_sha256);
    cJSON *model = cJSON_AddObjectToObject(doc, "model");
    add_string_or_null(model, "path", m->model_path);
    add_string_or_null(model, "header_sha256", m->model_header_sha256);
    add_string_or_null(model, "digest", m->model_digest);
    add_string_or_null(model, "precision", m->precision);
    cJSON *dataset = cJSON_AddObjectToObject(doc, "dataset");
    add_string_or_null(dataset, "path", m->dataset_path);
    add_string_or_null(dataset, "sha256", m->dataset_sha256);
    cJSON *build = cJSON_AddObjectToObject(doc, "evalmesh");
    cJSON_AddStringToObject(build, "version", EVALMESH_VERSION);
    cJSON_AddStringToObject(build, "commit", EVALMESH_GIT_COMMIT);

    cJSON_AddNumberToObject(doc, "world_size", info->world_size);
    cJSON *mesh = cJSON_AddObjectToObject(doc, "mesh");
    cJSON_AddNumberToObject(mesh, "nodes", info->node_count);
    cJSON_AddNumberToObject(mesh, "ranks_per_node", info->ranks_per_node);
    char t[32];
    cJSON_AddStringToObject(doc, "start_time", em_results_time(info->start_time, t, sizeof t));
    cJSON_AddStringToObject(doc, "end_time", em_results_time(info->end_time, t, sizeof t));

    cJSON *metrics = cJSON_AddObjectToObject(doc, "metrics");
    for (size_t i = 0; i < m->count; i++) {
        const em_metric *it = &m->items[i];
        const char *dot = strchr(it->key, '.');
        char *stage = dot ? strndup(it->key, (size_t)(dot - it->key)) : em_xstrdup("run");
        if (!stage) stage = em_xstrdup("run");
        cJSON *obj = cJSON_AddObjectToObject(stage_object(metrics, stage), dot ? dot + 1 : it->key);
        free(stage);
        add_number_or_null(obj, "value", it->value);
        if (it->has_error) add_number_or_null(obj, "error", it->error);
        if (it->timing) cJSON_AddTrueToObject(obj, "timing");
    }

    cJSON *ranks = cJSON_AddArrayToObject(doc, "ranks");
    for (int r = 0; r < m->world_size && m->ranks; r++) {
        const em_rank_timing *rt = &m->ranks[r];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "rank", rt->rank);
        cJSON_AddNumberToObject(o, "tokens", (double)rt->tokens);
        cJSON_AddNumberToObject(o, "windows", (double)rt->windows);
        add_number_or_null(o, "seconds", rt->seconds);
        add_number_or_null(o, "tokens_per_second",
                           rt->seconds > 0 ? (double)rt->tokens / rt->seconds : NAN);
        cJSON_AddItemToArray(ranks, o);
    }
    return doc;
}

/* Turns every number below node into raw text with the fewest digits that read back as exactly
 * that number. */
static void numbers_to_exact_text(cJSON *node) {
    for (cJSON *it = node; it; it = it->next) {
        if (cJSON_IsNumber(it)) {
            char buf[32];
            for (int digits = 15; digits <= 17; digits++) {
                snprintf(buf, sizeof buf, "%.*g", digits, it->valuedouble);
                if (strtod(buf, NULL) == it->valuedouble) break;
            }
            it->type = cJSON_Raw;
            it->valuestring = em_xstrdup(buf);
        }
        if (it->child) numbers_to_exact_text(it->child);
    }
}

char *em_results_print(const cJSON *doc, bool formatted) {
    cJSON *copy = cJSON_Duplicate(doc, true);
    numbers_to_exact_text(copy);
    char *text = formatted ? cJSON_Print(copy) : cJSON_PrintUnformatted(copy);
    cJSON_Delete(copy);
    return text;
}

em_status em_results_check(const cJSON *doc, const char *what) {
    if (!cJSON_IsObject(doc))
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: not a results document (not a JSON object)",
                            what);
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(doc, "schema");
    if (!cJSON_IsString(id) || strcmp(id->valuestring, EM_RESULTS_SCHEMA_ID) != 0)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: not a results document (\"schema\" is not \"%s\")", what,
                            EM_RESULTS_SCHEMA_ID);
    const cJSON *metrics = cJSON_GetObjectItemCaseSensitive(doc, "metrics");
    if (!cJSON_IsObject(metrics))
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: not a results document (no \"metrics\" object)",
                            what);
    const cJSON *stage;
    cJSON_ArrayForEach(stage, metrics) {
        if (!cJSON_IsObject(stage))
            return em_error_new(EM_EXIT_BAD_INPUT, "%s: metrics.%s is not an object", what,
                                stage->string);
        const cJSON *metric;
        cJSON_ArrayForEach(metric, stage) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(metric, "value");
            if (!cJSON_IsNumber(v) && !cJSON_IsNull(v))
                return em_error_new(EM_EXIT_BAD_INPUT, "%s: metrics.%s.%s has no numeric \"value\"",
                                    what, stage->string, metric->string);
        }
    }
    return NULL;
}

em_status em_results_load(const char *path, cJSON **out) {
    char *text;
    em_status err =
        em_read_regular_file(path, EM_TEXT_MAX_BYTES, "a results document", &text, NULL);
    if (err) return err;
    cJSON *doc = cJSON_Parse(text);
    free(text);
    if (!doc)
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: not a results document (not valid JSON)", path);
    err = em_results_check(doc, path);
    if (err) {
        cJSON_Delete(doc);
        return err;
    }
    *out = doc;
    return NULL;
}

static double number_or_nan(const cJSON *v) {
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

bool em_results_metric(const cJSON *doc, const char *key, double *value, double *error,
                       bool *has_error) {
    const char *dot = strchr(key, '.');
    if (!dot) return false;
    const cJSON *metrics = cJSON_GetObjectItemCaseSensitive(doc, "metrics");
    const cJSON *stage = NULL;
    const cJSON *it;
    cJSON_ArrayForEach(it, metrics) {
        if (strlen(it->string) == (size_t)(dot - key) && strncmp(it->string, key, dot - key) == 0)
            stage = it;
    }
    const cJSON *metric = cJSON_GetObjectItemCaseSensitive(stage, dot + 1);
    if (!cJSON_IsObject(metric)) return false;
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(metric, "error");
    if (value) *value = number_or_nan(cJSON_GetObjectItemCaseSensitive(metric, "value"));
    if (has_error) *has_error = e != NULL;
    if (error) *error = e ? number_or_nan(e) : 0.0;
    return true;
}

void em_results_each_metric(const cJSON *doc,
                            void (*fn)(const char *key, double value, const double *error,
                                       bool timing, void *user),
                            void *user) {
    const cJSON *stage, *metric;
    cJSON_ArrayForEach(stage, cJSON_GetObjectItemCaseSensitive(doc, "metrics")) {
        cJSON_ArrayForEach(metric, stage) {
            char *key = em_xasprintf("%s.%s", stage->string, metric->string);
            const cJSON *e = cJSON_GetObjectItemCaseSensitive(metric, "error");
            double err = e ? number_or_nan(e) : 0.0;
            bool timing = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(metric, "timing"));
            fn(key, number_or_nan(cJSON_GetObjectItemCaseSensitive(metric, "value")),
               e ? &err : NULL, timing, user);
            free(key);
        }
    }
}
