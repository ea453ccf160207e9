/* schemas/results.schema.json describes what em_results_build writes: a built document (and a
 * history line, without ranks) validates against it through evalmesh's own validator; documents
 * with a metric lacking its value, or with a bad time, do not. */
#include <stdlib.h>
#include <string.h>

#include "runner/recipe/recipe.h"
#include "runner/recipe/schema.h"
#include "stages/report/check.h"
#include "stages/report/results.h"
#include "test.h"

/* Validates JSON text (JSON is YAML) against the embedded results schema. */
static em_status validate(const char *json) {
    em_node *node = NULL;
    em_status err = em_yaml_parse(json, strlen(json), "results.json", &node);
    if (err) return err;
    em_schema *schema = NULL;
    err = em_schema_load_embedded("results.schema.json", &schema);
    if (!err) err = em_schema_validate(schema, node, "results document");
    em_schema_free(schema);
    em_node_free(node);
    return err;
}

int main(void) {
    em_metrics *m = em_metrics_new();
    em_metric *ppl = em_metrics_set(m, "f.token_ppl", 12.5);
    ppl->has_error = true;
    ppl->error = 0.25;
    em_metrics_set(m, "f.tokens_per_second", 100)->timing = true;
    em_metrics_set(m, "f.kl_p99.9", 0.5);
    m->world_size = 1;
    m->ranks = calloc(1, sizeof *m->ranks);
    m->ranks[0] = (em_rank_timing){0, 100, 2, 1.0};
    m->model_path = strdup("m.gguf");
    char hash[65];
    memset(hash, 'a', 64);
    hash[64] = 0;
    em_results_info info = {.recipe_name = "r",
                            .recipe_sha256 = hash,
                            .world_size = 1,
                            .node_count = 1,
                            .ranks_per_node = 1,
                            .start_time = 1700000000,
                            .end_time = 1700000001};
    cJSON *doc = em_results_build(m, &info);
    char *text = em_results_print(doc, true);
    em_status err = validate(text);
    if (err) fprintf(stderr, "%s\n", err->message);
    CHECK(err == NULL);
    em_error_free(err);
    free(text);

    cJSON_DeleteItemFromObject(doc, "ranks"); /* a history line */
    text = em_results_print(doc, false);
    CHECK(validate(text) == NULL);
    free(text);

    /* with the gate's verdict: a paired relative check and an absolute one */
    em_verdict *v = calloc(1, sizeof *v);
    v->stage = strdup("gate");
    v->checks = calloc(2, sizeof *v->checks);
    v->checks[0] = (em_check){.rule = EM_CHECK_MAX_INCREASE_PCT,
                              .key = strdup("f.token_ppl"),
                              .limit = 1,
                              .value = 12.5,
                              .base = 12.0,
                              .comparison = EM_COMPARE_PAIRED,
                              .difference = 0.5,
                              .difference_error = 0.01,
                              .allowed = 12.14,
                              .message = strdup("f.token_ppl = 12.5 is not <= 12.14")};
    v->checks[1] = (em_check){.rule = EM_CHECK_MAX,
                              .key = strdup("f.token_ppl"),
                              .limit = 20,
                              .value = 12.5,
                              .allowed = 20,
                              .passed = true,
                              .message = strdup("f.token_ppl = 12.5 is <= 20 (max 20)")};
    v->count = 2;
    v->failed = 1;
    v->baseline = cJSON_Parse("{\"source\": \"h.jsonl:3\", \"why\": \"last passing run of the "
                              "history\", \"end_time\": null, \"commit\": \"abc\", \"model\": "
                              "{}, \"paired\": true}");
    v->paired = true;
    v->paired_stage = strdup("f");
    cJSON *gate = em_verdict_json(v);
    CHECK(cJSON_IsNull(cJSON_GetObjectItem(
        cJSON_GetArrayItem(cJSON_GetObjectItem(gate, "checks"), 1), "difference")));
    cJSON_AddItemToObject(doc, "gate", gate);
    text = em_results_print(doc, false);
    err = validate(text);
    if (err) fprintf(stderr, "%s\n", err->message);
    CHECK(err == NULL);
    em_error_free(err);
    free(text);
    cJSON_ReplaceItemInObject(cJSON_GetArrayItem(cJSON_GetObjectItem(gate, "checks"), 0),
                              "comparison", cJSON_CreateString("guessed"));
    text = em_results_print(doc, false);
    err = validate(text);
    CHECK(err != NULL);
    if (err) CHECK_CONTAINS(err->message, "comparison");
    em_error_free(err);
    free(text);
    cJSON_DeleteItemFromObject(doc, "gate");
    em_verdict_free(v);

    /* a metric without a value */
    cJSON *f = cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "metrics"), "f");
    cJSON_DeleteItemFromObject(cJSON_GetObjectItem(f, "token_ppl"), "value");
    text = em_results_print(doc, false);
    err = validate(text);
    CHECK(err != NULL && err->exit_code == EM_EXIT_BAD_INPUT);
    if (err) CHECK_CONTAINS(err->message, "value");
    em_error_free(err);
    free(text);

    /* a time that is not UTC ISO 8601 */
    cJSON_ReplaceItemInObject(doc, "end_time", cJSON_CreateString("yesterday"));
    cJSON_AddItemToObject(cJSON_GetObjectItem(f, "token_ppl"), "value", cJSON_CreateNumber(1));
    text = em_results_print(doc, false);
    err = validate(text);
    CHECK(err != NULL);
    if (err) CHECK_CONTAINS(err->message, "end_time");
    em_error_free(err);
    free(text);

    cJSON_Delete(doc);
    em_metrics_free(m);
    return test_finish();
}
