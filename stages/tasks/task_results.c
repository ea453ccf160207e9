/* lm-evaluation-harness's table, results document and samples lines (task_results.h). */
#include "stages/tasks/task_results.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void em_task_result_of(const em_task *task, const em_example_outcome *outcomes,
                       em_task_result *out) {
    memset(out, 0, sizeof *out);
    out->task = task;
    size_t n = task->example_count;
    double *values = em_xmalloc((n ? n : 1) * sizeof *values);
    for (size_t r = 0; r < em_task_metric_row_count; r++) {
        const em_task_metric_row *row = &em_task_metric_rows[r];
        if (!(task->metrics & row->flag) || out->metric_count == 8) continue;
        for (size_t i = 0; i < n; i++) values[i] = row->value(&outcomes[i]);
        em_task_metric_value *m = &out->metrics[out->metric_count++];
        m->row = row;
        em_task_mean_stderr(values, n, &m->value, &m->stderr_value);
        if (row->exp_of_negative_mean) {
            m->value = exp(-m->value);
            m->stderr_value = NAN;
        }
    }
    free(values);
}

void em_task_groups_of(const em_task_result *results, size_t count, em_task_group_result **groups,
                       size_t *group_count) {
    *groups = em_xcalloc(count ? count : 1, sizeof **groups);
    *group_count = 0;
    for (size_t t = 0; t < count; t++) {
        const char *name = results[t].task->group;
        bool seen = !name;
        for (size_t g = 0; g < *group_count && !seen; g++) seen = !strcmp((*groups)[g].name, name);
        if (seen) continue;
        em_task_group_result *group = &(*groups)[(*group_count)++];
        group->name = name;
        /* the metrics of its first member that every member has */
        const em_task_result *lead = &results[t];
        for (size_t i = 0; i < lead->metric_count; i++) {
            const em_task_metric_row *row = lead->metrics[i].row;
            double weighted = 0, pooled = 0;
            size_t size = 0, members = 0;
            bool shared = true;
            for (size_t u = t; u < count && shared; u++) {
                if (!results[u].task->group || strcmp(results[u].task->group, name) != 0) continue;
                const em_task_metric_value *v = NULL;
                for (size_t j = 0; j < results[u].metric_count; j++)
                    if (results[u].metrics[j].row == row) v = &results[u].metrics[j];
                if (!v) {
                    shared = false;
                    break;
                }
                double n = (double)results[u].task->example_count;
                weighted += v->value * n;
                pooled += (n - 1) * v->stderr_value * v->stderr_value * n;
                size += results[u].task->example_count;
                members++;
            }
            if (!shared || row->exp_of_negative_mean || !size) continue;
            em_task_metric_value *m = &group->metrics[group->metric_count++];
            m->row = row;
            m->value = weighted / (double)size;
            m->stderr_value =
                size > members ? sqrt(pooled / (double)(size - members) / (double)size) : NAN;
            group->example_count = size;
        }
    }
}

/* The Filter of a task's metrics: an lm-eval generate_until task's filter_list name, else
 * lm-eval's "none". */
static const char *filter_of(const em_task *task) {
    return task && task->output == EM_TASK_GENERATE_UNTIL && task->generation.filter.name
               ? task->generation.filter.name
               : "none";
}

/* The rows of one of lm-eval's tables: name, version and n-shot on a metric's first row. */
static void print_rows(const char *name, const char *version, const char *filter, int shots,
                       const em_task_metric_value *metrics, size_t count, FILE *out) {
    for (size_t i = 0; i < count; i++) {
        const em_task_metric_value *m = &metrics[i];
        const char *arrow = m->row->exp_of_negative_mean ? "↓" : "↑";
        char shot[16] = "";
        if (shots >= 0) snprintf(shot, sizeof shot, "%d", shots);
        fprintf(out, "|%s|%s|%s|%s|%s|%s|%.4f|±|", i ? "" : name, i ? "" : version, filter, shot,
                m->row->name, arrow, m->value);
        if (isnan(m->stderr_value))
            fprintf(out, "N/A|\n");
        else
            fprintf(out, "%.4f|\n", m->stderr_value);
    }
}

void em_task_results_print(const em_task_result *results, size_t count,
                           const em_task_group_result *groups, size_t group_count, FILE *out) {
    fprintf(out, "|Tasks|Version|Filter|n-shot|Metric| |Value| |Stderr|\n");
    fprintf(out, "|-----|------:|------|-----:|------|---|-----:|---|-----:|\n");
    for (size_t t = 0; t < count; t++)
        print_rows(results[t].task->name, results[t].task->version, filter_of(results[t].task),
                   results[t].task->num_fewshot, results[t].metrics, results[t].metric_count, out);
    if (!group_count) return;
    fprintf(out, "\n|Groups|Version|Filter|n-shot|Metric| |Value| |Stderr|\n");
    fprintf(out, "|------|------:|------|------|------|---|-----:|---|-----:|\n");
    for (size_t g = 0; g < group_count; g++)
        print_rows(groups[g].name, "", "none", -1, groups[g].metrics, groups[g].metric_count, out);
}

/* A number, or the string "N/A" as lm-eval writes an undefined standard error. */
static void add_number(cJSON *obj, const char *key, double v) {
    if (isnan(v))
        cJSON_AddStringToObject(obj, key, "N/A");
    else
        cJSON_AddNumberToObject(obj, key, v);
}

/* An lm-eval results entry: alias, then "<metric>,<filter>" and "<metric>_stderr,<filter>". */
static cJSON *add_entry(cJSON *parent, const char *name, const char *filter,
                        const em_task_metric_value *metrics, size_t count) {
    cJSON *entry = cJSON_AddObjectToObject(parent, name);
    cJSON_AddStringToObject(entry, "alias", name);
    for (size_t i = 0; i < count; i++) {
        char key[96];
        snprintf(key, sizeof key, "%s,%s", metrics[i].row->name, filter);
        add_number(entry, key, metrics[i].value);
        snprintf(key, sizeof key, "%s_stderr,%s", metrics[i].row->name, filter);
        add_number(entry, key, metrics[i].stderr_value);
    }
    return entry;
}

char *em_task_results_json(const em_task_result *results, size_t count,
                           const em_task_group_result *groups, size_t group_count) {
    cJSON *doc = cJSON_CreateObject();
    cJSON *res = cJSON_AddObjectToObject(doc, "results");
    for (size_t t = 0; t < count; t++)
        add_entry(res, results[t].task->name, filter_of(results[t].task), results[t].metrics,
                  results[t].metric_count);
    cJSON *group_doc = cJSON_AddObjectToObject(doc, "groups");
    for (size_t g = 0; g < group_count; g++)
        add_entry(group_doc, groups[g].name, "none", groups[g].metrics, groups[g].metric_count);
    cJSON *shots = cJSON_AddObjectToObject(doc, "n-shot");
    cJSON *versions = cJSON_AddObjectToObject(doc, "versions");
    cJSON *samples = cJSON_AddObjectToObject(doc, "n-samples");
    for (size_t t = 0; t < count; t++) {
        const em_task *task = results[t].task;
        cJSON_AddNumberToObject(shots, task->name, task->num_fewshot);
        cJSON_AddStringToObject(versions, task->name, task->version ? task->version : "");
        cJSON *n = cJSON_AddObjectToObject(samples, task->name);
        cJSON_AddNumberToObject(n, "effective", (double)task->example_count);
    }
    char *text = cJSON_Print(doc);
    cJSON_Delete(doc);
    char *copy = em_xstrdup(text);
    cJSON_free(text);
    return copy;
}

/* A samples line's first fields: doc_id and the document. */
static cJSON *start_sample(const em_task_example *example) {
    cJSON *line = cJSON_CreateObject();
    cJSON_AddNumberToObject(line, "doc_id", (double)example->doc_index);
    cJSON *doc = example->doc_json ? cJSON_Parse(example->doc_json) : NULL;
    cJSON_AddItemToObject(line, "doc", doc ? doc : cJSON_CreateNull());
    return line;
}

/* A samples line's last fields, the task's metric values, and its text (malloc'd). */
static char *finish_sample(const em_task *task, const em_example_outcome *outcome, cJSON *line) {
    for (size_t r = 0; r < em_task_metric_row_count; r++) {
        const em_task_metric_row *row = &em_task_metric_rows[r];
        if (task->metrics & row->flag)
            cJSON_AddNumberToObject(line, row->name, row->value(outcome));
    }
    char *text = cJSON_PrintUnformatted(line);
    cJSON_Delete(line);
    char *copy = em_xstrdup(text);
    cJSON_free(text);
    return copy;
}

char *em_task_sample_json(const em_task *task, const em_task_example *example,
                          const em_example_scores *scores, const em_example_outcome *outcome) {
    cJSON *line = start_sample(example);
    if (task->output == EM_TASK_LOGLIKELIHOOD) /* lm-eval: the target text */
        cJSON_AddStringToObject(line, "target", example->choices[0]);
    else if (example->gold >= 0)
        cJSON_AddNumberToObject(line, "target", example->gold);
    else
        cJSON_AddNullToObject(line, "target");
    cJSON *arguments = cJSON_AddArrayToObject(line, "arguments");
    cJSON *resps = cJSON_AddArrayToObject(line, "resps");
    for (size_t c = 0; c < example->choice_count; c++) {
        cJSON *pair = cJSON_CreateArray();
        cJSON_AddItemToArray(pair, cJSON_CreateString(example->context));
        cJSON_AddItemToArray(pair, cJSON_CreateString(example->continuations[c]));
        cJSON_AddItemToArray(arguments, pair);
        cJSON *resp = cJSON_CreateArray();
        cJSON_AddItemToArray(resp, cJSON_CreateNumber(scores->loglik[c]));
        cJSON_AddItemToArray(resp, cJSON_CreateBool(scores->greedy[c]));
        cJSON_AddItemToArray(resps, resp);
    }
    cJSON_AddNumberToObject(line, "prediction", outcome->prediction);
    return finish_sample(task, outcome, line);
}

char *em_task_generation_sample_json(const em_task *task, const em_task_example *example,
                                     const char *generated, const char *answer,
                                     const em_example_outcome *outcome) {
    cJSON *line = start_sample(example);
    if (example->choice_count == 1)
        cJSON_AddStringToObject(line, "target", example->choices[0]);
    else
        cJSON_AddItemToObject(line, "target",
                              cJSON_CreateStringArray((const char *const *)example->choices,
                                                      (int)example->choice_count));
    cJSON *request = cJSON_CreateArray();
    cJSON_AddItemToArray(request, cJSON_CreateString(example->context));
    cJSON *kwargs = cJSON_CreateObject();
    cJSON_AddItemToObject(kwargs, "until",
                          cJSON_CreateStringArray((const char *const *)task->generation.until,
                                                  (int)task->generation.until_count));
    cJSON_AddNumberToObject(kwargs, "max_gen_toks", task->generation.max_gen_toks);
    cJSON_AddItemToArray(request, kwargs);
    cJSON *arguments = cJSON_AddArrayToObject(line, "arguments");
    cJSON_AddItemToArray(arguments, request);
    cJSON *resps = cJSON_AddArrayToObject(line, "resps");
    cJSON *resp = cJSON_CreateArray();
    cJSON_AddItemToArray(resp, cJSON_CreateString(generated));
    cJSON_AddItemToArray(resps, resp);
    cJSON *filtered = cJSON_AddArrayToObject(line, "filtered_resps");
    cJSON_AddItemToArray(filtered, cJSON_CreateString(answer));
    cJSON_AddStringToObject(line, "filter", filter_of(task));
    return finish_sample(task, outcome, line);
}
