/* Unit tests of the report library: results documents, Prometheus text and grouping URLs,
 * base64, history files with corrupt lines, the metrics table and the HTML report. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stages/metrics/metric_table.h"
#include "stages/report/base64.h"
#include "stages/report/history.h"
#include "stages/report/html.h"
#include "stages/report/prometheus.h"
#include "stages/report/results.h"
#include "stages/report/table.h"
#include "util/atomic_file.h"
#include "test.h"

/* Two stages' metrics, one timing metric, two ranks and four windows. */
static em_metrics *sample_metrics(void) {
    em_metrics *m = em_metrics_new();
    em_metric *ppl = em_metrics_set(m, "f_ref.token_ppl", 12.5);
    ppl->has_error = true;
    ppl->error = 0.25;
    em_metrics_set(m, "f_ref.bits_per_byte", 1.0 / 3.0);
    em_metric *q = em_metrics_set(m, "f_q4.token_ppl", 13.0);
    q->has_error = true;
    q->error = 0.5;
    em_metric *tps = em_metrics_set(m, "f_ref.tokens_per_second", 1000.0);
    tps->timing = true;
    m->world_size = 2;
    m->ranks = calloc(2, sizeof *m->ranks);
    m->ranks[0] = (em_rank_timing){0, 600, 3, 2.0};
    m->ranks[1] = (em_rank_timing){1, 400, 1, 0.5};
    m->window_count = 4;
    m->window_nll = calloc(4, sizeof(double));
    double nll[4] = {2.0, 2.5, 3.0, 2.25};
    memcpy(m->window_nll, nll, sizeof nll);
    m->model_path = strdup("models/tiny.gguf");
    m->model_header_sha256 = strdup("ab12");
    m->dataset_path = strdup("data/wiki.test.raw");
    m->dataset_sha256 = strdup("cd34");
    return m;
}

static em_results_info sample_info(void) {
    return (em_results_info){.recipe_name = "nightly",
                             .recipe_sha256 = "ee",
                             .world_size = 2,
                             .node_count = 1,
                             .ranks_per_node = 2,
                             .start_time = 1700000000,
                             .end_time = 1700000065};
}

static void test_results(void) {
    em_metrics *m = sample_metrics();
    em_results_info info = sample_info();
    cJSON *doc = em_results_build(m, &info);
    CHECK(em_results_check(doc, "doc") == NULL);
    CHECK_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(doc, "start_time")),
                 "2023-11-14T22:13:20Z");
    CHECK_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(doc, "end_time")),
                 "2023-11-14T22:14:25Z");
    CHECK_STR_EQ(cJSON_GetStringValue(
                     cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "model"), "header_sha256")),
                 "ab12");
    double v = 0, e = 0;
    bool has_error = false;
    CHECK(em_results_metric(doc, "f_ref.token_ppl", &v, &e, &has_error));
    CHECK(v == 12.5 && e == 0.25 && has_error);
    CHECK(em_results_metric(doc, "f_ref.bits_per_byte", &v, &e, &has_error));
    CHECK(v == 1.0 / 3.0 && !has_error);
    CHECK(!em_results_metric(doc, "f_ref.nothing", &v, NULL, NULL));
    CHECK(!em_results_metric(doc, "nodot", &v, NULL, NULL));
    /* nested by stage: metrics.f_ref.token_ppl.value */
    const cJSON *f_ref = cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "metrics"), "f_ref");
    CHECK_INT_EQ(cJSON_GetArraySize(f_ref), 3);
    CHECK(cJSON_IsTrue(
        cJSON_GetObjectItem(cJSON_GetObjectItem(f_ref, "tokens_per_second"), "timing")));
    const cJSON *r1 = cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "ranks"), 1);
    CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(r1, "tokens_per_second")) == 800.0);

    /* every double survives the trip through text, including one whose 15-digit form is only
     * close (cJSON_Print would write 9.46835616458784) */
    em_metrics_set(m, "f_ref.token_ppl_se", 9.468356164587838);
    cJSON *doc2 = em_results_build(m, &info);
    char *text = em_results_print(doc2, false);
    CHECK_CONTAINS(text, "\"token_ppl_se\":{\"value\":9.468356164587838}");
    cJSON *back = cJSON_Parse(text);
    CHECK(em_results_metric(back, "f_ref.bits_per_byte", &v, NULL, NULL) && v == 1.0 / 3.0);
    CHECK(em_results_metric(back, "f_ref.token_ppl_se", &v, NULL, NULL) && v == 9.468356164587838);
    CHECK(cJSON_Compare(back, doc2, true));
    cJSON_Delete(back);
    cJSON_Delete(doc2);
    free(text);

    /* documents that are not results */
    cJSON *other = cJSON_Parse("{\"schema\": \"something/1\", \"metrics\": {}}");
    em_status err = em_results_check(other, "base.json");
    CHECK(err && err->exit_code == EM_EXIT_BAD_INPUT);
    if (err)
        CHECK_STR_EQ(
            err->message,
            "base.json: not a results document (\"schema\" is not \"evalmesh.results/1\")");
    em_error_free(err);
    cJSON_Delete(other);
    other = cJSON_Parse("[1, 2]");
    err = em_results_check(other, "x");
    if (err) CHECK_STR_EQ(err->message, "x: not a results document (not a JSON object)");
    CHECK(err != NULL);
    em_error_free(err);
    cJSON_Delete(other);

    CHECK(em_metric_higher_is_better("f.token_accuracy"));
    CHECK(em_metric_higher_is_better("f.tokens_per_second"));
    CHECK(!em_metric_higher_is_better("f.token_ppl"));
    cJSON_Delete(doc);
    em_metrics_free(m);
}

/* The exposition text without its "# HELP" lines (heap). */
static char *without_help(char *text) {
    char *out = calloc(strlen(text) + 1, 1), *o = out;
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) + 1 : strlen(line);
        if (strncmp(line, "# HELP ", 7) != 0) {
            memcpy(o, line, n);
            o += n;
        }
        line += n;
    }
    free(text);
    return out;
}

/* The gate section a gate stage adds to the results document (hand-built here). */
static void add_gate(cJSON *doc, bool passed) {
    cJSON *gate = cJSON_AddObjectToObject(doc, "gate");
    cJSON_AddStringToObject(gate, "stage", "gate");
    cJSON_AddBoolToObject(gate, "passed", passed);
    cJSON *checks = cJSON_AddArrayToObject(gate, "checks");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "metric", "f_ref.token_ppl");
    cJSON_AddStringToObject(c, "rule", "max_increase_pct");
    cJSON_AddNumberToObject(c, "threshold", 1.0);
    cJSON_AddNumberToObject(c, "value", 12.5);
    cJSON_AddNumberToObject(c, "baseline", 12.0);
    cJSON_AddStringToObject(c, "comparison", "paired");
    cJSON_AddNumberToObject(c, "difference", 0.5);
    cJSON_AddNumberToObject(c, "difference_error", 0.125);
    cJSON_AddNumberToObject(c, "bound", 12.12);
    cJSON_AddBoolToObject(c, "passed", passed);
    cJSON_AddItemToArray(checks, c);
    c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "metric", "f_ref.token_ppl");
    cJSON_AddStringToObject(c, "rule", "max");
    cJSON_AddNumberToObject(c, "threshold", 200);
    cJSON_AddNumberToObject(c, "value", 12.5);
    cJSON_AddNullToObject(c, "baseline");
    cJSON_AddStringToObject(c, "comparison", "absolute");
    cJSON_AddNullToObject(c, "difference");
    cJSON_AddNullToObject(c, "difference_error");
    cJSON_AddNumberToObject(c, "bound", 200);
    cJSON_AddBoolToObject(c, "passed", true);
    cJSON_AddItemToArray(checks, c);
}

static void test_prometheus(void) {
    em_metrics *m = sample_metrics();
    /* the aggregate stage's "<stage>.token_ppl_se" duplicates token_ppl's error: left out */
    em_metrics_set(m, "f_ref.token_ppl_se", 0.25);
    em_metrics_set(m, "f_ref.other_se", 7); /* no "f_ref.other" with an error: kept */
    em_results_info info = sample_info();
    cJSON *doc = em_results_build(m, &info);
    char *text = em_prometheus_text(doc);
    CHECK_CONTAINS(text, "# HELP evalmesh_token_ppl evalmesh metric token_ppl of each stage "
                         "(results.json metrics.<stage>.token_ppl.value)\n"
                         "# TYPE evalmesh_token_ppl gauge\n");
    CHECK_CONTAINS(text, "# HELP evalmesh_last_success_timestamp_seconds end of this run, whose "
                         "gate passed (or which had no gate), in seconds since the epoch\n");
    text = without_help(text);
    char *run = em_xasprintf(
        "model=\"models/tiny.gguf\",model_sha256=\"ab12\",dataset=\"data/"
        "wiki.test.raw\",commit=\"%s\"",
        cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "evalmesh"), "commit")));
    char *expected = em_xasprintf("# TYPE evalmesh_token_ppl gauge\n"
                                  "evalmesh_token_ppl{stage=\"f_ref\",%s} 12.5\n"
                                  "evalmesh_token_ppl{stage=\"f_q4\",%s} 13\n"
                                  "# TYPE evalmesh_token_ppl_stderr gauge\n"
                                  "evalmesh_token_ppl_stderr{stage=\"f_ref\",%s} 0.25\n"
                                  "evalmesh_token_ppl_stderr{stage=\"f_q4\",%s} 0.5\n"
                                  "# TYPE evalmesh_bits_per_byte gauge\n"
                                  "evalmesh_bits_per_byte{stage=\"f_ref\",%s} 0.3333333333333333\n"
                                  "# TYPE evalmesh_tokens_per_second gauge\n"
                                  "evalmesh_tokens_per_second{stage=\"f_ref\",%s} 1000\n"
                                  "# TYPE evalmesh_other_se gauge\n"
                                  "evalmesh_other_se{stage=\"f_ref\",%s} 7\n"
                                  "# TYPE evalmesh_rank_tokens_per_second gauge\n"
                                  "evalmesh_rank_tokens_per_second{rank=\"0\",%s} 300\n"
                                  "evalmesh_rank_tokens_per_second{rank=\"1\",%s} 800\n"
                                  "# TYPE evalmesh_last_success_timestamp_seconds gauge\n"
                                  "evalmesh_last_success_timestamp_seconds{%s} 1700000065\n",
                                  run, run, run, run, run, run, run, run, run, run);
    CHECK_STR_EQ(text, expected);
    free(text);
    free(expected);

    /* A failed gate: its gauges (null quantities left out) and no last success. */
    add_gate(doc, false);
    text = without_help(em_prometheus_text(doc));
    CHECK(strstr(text, "evalmesh_last_success_timestamp_seconds") == NULL);
    const char *gate_part =
        "# TYPE evalmesh_gate_passed gauge\n"
        "evalmesh_gate_passed{gate=\"gate\",%s} 0\n"
        "# TYPE evalmesh_gate_check_value gauge\n"
        "evalmesh_gate_check_value{gate=\"gate\",metric=\"f_ref.token_ppl\",rule=\"max_increase_"
        "pct\",comparison=\"paired\",%s} 12.5\n"
        "evalmesh_gate_check_value{gate=\"gate\",metric=\"f_ref.token_ppl\",rule=\"max\","
        "comparison=\"absolute\",%s} 12.5\n"
        "# TYPE evalmesh_gate_check_baseline gauge\n"
        "evalmesh_gate_check_baseline{gate=\"gate\",metric=\"f_ref.token_ppl\",rule=\"max_"
        "increase_pct\",comparison=\"paired\",%s} 12\n"
        "# TYPE evalmesh_gate_check_threshold gauge\n"
        "evalmesh_gate_check_threshold{gate=\"gate\",metric=\"f_ref.token_ppl\",rule=\"max_"
        "increase_pct\",comparison=\"paired\",%s} 1\n"
        "evalmesh_gate_check_threshold{gate=\"gate\",metric=\"f_ref.token_ppl\",rule=\"max\","
        "comparison=\"absolute\",%s} 200\n"
        "# TYPE evalmesh_gate_check_bound gauge\n"
        "evalmesh_gate_check_bound{gate=\"gate\",metric=\"f_ref.token_ppl\",rule=\"max_increase_"
        "pct\",comparison=\"paired\",%s} 12.12\n"
        "evalmesh_gate_check_bound{gate=\"gate\",metric=\"f_ref.token_ppl\",rule=\"max\","
        "comparison=\"absolute\",%s} 200\n"
        "# TYPE evalmesh_gate_check_difference gauge\n"
        "evalmesh_gate_check_difference{gate=\"gate\",metric=\"f_ref.token_ppl\",rule=\"max_"
        "increase_pct\",comparison=\"paired\",%s} 0.5\n"
        "# TYPE evalmesh_gate_check_difference_stderr gauge\n"
        "evalmesh_gate_check_difference_stderr{gate=\"gate\",metric=\"f_ref.token_ppl\",rule="
        "\"max_increase_pct\",comparison=\"paired\",%s} 0.125\n"
        "# TYPE evalmesh_gate_check_passed gauge\n"
        "evalmesh_gate_check_passed{gate=\"gate\",metric=\"f_ref.token_ppl\",rule=\"max_increase_"
        "pct\",comparison=\"paired\",%s} 0\n"
        "evalmesh_gate_check_passed{gate=\"gate\",metric=\"f_ref.token_ppl\",rule=\"max\","
        "comparison=\"absolute\",%s} 1\n";
    expected = em_xasprintf(gate_part, run, run, run, run, run, run, run, run, run, run, run, run);
    const char *at = strstr(text, "# TYPE evalmesh_gate_passed gauge\n");
    CHECK(at != NULL);
    if (at) CHECK_STR_EQ(at, expected);
    free(text);
    free(expected);
    /* A passed gate: last success is the run's end time again. */
    cJSON_DeleteItemFromObject(doc, "gate");
    add_gate(doc, true);
    text = without_help(em_prometheus_text(doc));
    CHECK_CONTAINS(text, "evalmesh_gate_passed{gate=\"gate\",model=");
    CHECK_CONTAINS(text, "} 1\n# TYPE evalmesh_gate_check_value gauge\n");
    CHECK(strstr(text, "} 1700000065\n") != NULL);
    free(text);
    free(run);
    cJSON_Delete(doc);

    /* sanitizing, escaping and special values (not finite: null in the document, NaN here); no
     * provenance: no run labels */
    em_metrics *odd = em_metrics_new();
    em_metrics_set(odd, "st\"a\\ge.kl-p99.9", NAN);
    em_metrics_set(odd, "s.9lives", INFINITY);
    cJSON *odd_doc = em_results_build(odd, &info);
    cJSON_DeleteItemFromObject(odd_doc, "evalmesh");
    cJSON_DeleteItemFromObject(odd_doc, "end_time");
    text = without_help(em_prometheus_text(odd_doc));
    CHECK_STR_EQ(text, "# TYPE evalmesh_kl_p99_9 gauge\n"
                       "evalmesh_kl_p99_9{stage=\"st\\\"a\\\\ge\"} NaN\n"
                       "# TYPE evalmesh_9lives gauge\n"
                       "evalmesh_9lives{stage=\"s\"} NaN\n");
    free(text);
    cJSON_Delete(odd_doc);
    em_metrics_free(odd);

    CHECK(em_prometheus_reserved_label("model") && em_prometheus_reserved_label("job") &&
          !em_prometheus_reserved_label("cluster"));

    char *s = em_prometheus_metric_name("9a.b:c-d");
    CHECK_STR_EQ(s, "_9a_b:c_d");
    free(s);
    s = em_prometheus_label_name("a:b");
    CHECK_STR_EQ(s, "a_b");
    free(s);
    s = em_prometheus_label_name("__x");
    CHECK_STR_EQ(s, "x__x");
    free(s);

    em_prom_label labels[] = {{"recipe", "tiny.gguf"},
                              {"dataset", "wiki test/raw"},
                              {"cluster", ""},
                              {"skip", NULL},
                              {"co-mmit", "abc"}};
    s = em_prometheus_group_url("http://127.0.0.1:9091/", "night ly", labels, 5);
    /* "wiki test/raw" -> d2lraSB0ZXN0L3Jhdw== (url-safe alphabet); the empty value -> "=" */
    CHECK_STR_EQ(s, "http://127.0.0.1:9091/metrics/job/night%20ly/recipe/tiny.gguf"
                    "/dataset@base64/d2lraSB0ZXN0L3Jhdw==/cluster@base64/=/co_mmit/abc");
    free(s);
    em_metrics_free(m);
}

static void test_base64(void) {
    /* RFC 4648 test vectors, and a byte string where the alphabets differ (0xfb 0xff) */
    const char *in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    const char *out[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        char *s = em_base64_encode(in[i], strlen(in[i]), false);
        CHECK_STR_EQ(s, out[i]);
        free(s);
    }
    char *s = em_base64_encode("\xfb\xff", 2, false);
    CHECK_STR_EQ(s, "+/8=");
    free(s);
    s = em_base64_encode("\xfb\xff", 2, true);
    CHECK_STR_EQ(s, "-_8=");
    free(s);
}

static void test_history(const char *dir) {
    em_metrics *m = sample_metrics();
    em_results_info info = sample_info();
    cJSON *doc = em_results_build(m, &info);
    char *path = em_xasprintf("%s/sub/history.jsonl", dir);
    CHECK(em_history_append(path, doc) == NULL);
    /* a corrupt line and a JSON line that is not a results document, then a good run */
    em_atomic_append_line(path, "{\"schema\": \"evalmesh.results/1\", \"metr");
    em_atomic_append_line(path, "{\"hello\": 1}");
    em_atomic_append_line(path, "");
    em_metrics_set(m, "f_ref.token_ppl", 12.0);
    cJSON *doc2 = em_results_build(m, &info);
    CHECK(em_history_append(path, doc2) == NULL);

    em_history h;
    CHECK(em_history_load(path, false, &h) == NULL);
    CHECK_INT_EQ(h.count, 2);
    CHECK_INT_EQ(h.skipped, 2);
    CHECK_INT_EQ(h.line_numbers[0], 1);
    CHECK_INT_EQ(h.line_numbers[1], 5);
    double v = 0;
    CHECK(em_results_metric(h.entries[1], "f_ref.token_ppl", &v, NULL, NULL) && v == 12.0);
    CHECK(cJSON_GetObjectItem(h.entries[0], "ranks") == NULL);
    em_history_free(&h);

    char *missing = em_xasprintf("%s/none.jsonl", dir);
    CHECK(em_history_load(missing, true, &h) == NULL);
    CHECK_INT_EQ(h.count, 0);
    em_status err = em_history_load(missing, false, &h);
    CHECK(err && err->exit_code == EM_EXIT_BAD_INPUT);
    if (err) CHECK_CONTAINS(err->message, "none.jsonl': No such file or directory");
    em_error_free(err);
    free(missing);
    free(path);
    cJSON_Delete(doc);
    cJSON_Delete(doc2);
    em_metrics_free(m);
}

static int count(const char *s, const char *what) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p++) n++;
    return n;
}

static void test_table_and_html(const char *dir) {
    em_metrics *m = sample_metrics();
    char *table = em_report_table(m);
    CHECK_STR_EQ(table, "metric                              value       ± error\n"
                        "f_ref.token_ppl                      12.5  ±       0.25\n"
                        "f_ref.bits_per_byte            0.33333333\n"
                        "f_q4.token_ppl                         13  ±        0.5\n"
                        "f_ref.tokens_per_second              1000  (timing)\n");
    free(table);

    em_results_info info = sample_info();
    cJSON *doc = em_results_build(m, &info);
    char *path = em_xasprintf("%s/h.jsonl", dir);
    em_history_append(path, doc);
    em_history_append(path, doc);
    em_history h;
    CHECK(em_history_load(path, false, &h) == NULL);
    em_html_input in = {.results = doc,
                        .window_nll = m->window_nll,
                        .window_count = m->window_count,
                        .history = &h};
    char *html = em_html_report(&in);
    CHECK_CONTAINS(html, "<svg class=\"chart\" id=\"throughput\"");
    CHECK_CONTAINS(html, "<svg class=\"chart\" id=\"nll\"");
    CHECK_CONTAINS(html, "<svg class=\"chart\" id=\"history\"");
    CHECK_CONTAINS(html, "History of f_ref.token_ppl");
    CHECK_INT_EQ(count(html, "class=\"bar\""), 2);
    /* 4 windows -> 2 bins: [2, 2.5) holds 2.0 and 2.25, [2.5, 3] holds 2.5 and 3.0 */
    CHECK_INT_EQ(count(html, "class=\"bin\""), 2);
    CHECK_CONTAINS(html, "[2, 2.5): 2 windows");
    CHECK_CONTAINS(html, "[2.5, 3): 2 windows");
    CHECK_INT_EQ(count(html, "class=\"point\""), 2);
    CHECK(strstr(html, "http://") == strstr(html, "http://www.w3.org/2000/svg"));
    CHECK(strstr(html, "<script") == NULL);
    CHECK(strstr(html, "id=\"verdict\"") == NULL && strstr(html, "id=\"paired\"") == NULL);
    free(html);

    /* A gate section: the verdict before the provenance table; paired windows: the scatter. */
    add_gate(doc, false);
    double base_nll[4] = {2.0, 2.4, 3.0, 2.2};
    in.baseline_window_nll = base_nll;
    in.candidate_window_nll = m->window_nll;
    in.paired_window_count = 4;
    html = em_html_report(&in);
    const char *verdict = strstr(html, "<section id=\"verdict\" class=\"verdict fail\">");
    CHECK(verdict && verdict < strstr(html, "<table>"));
    CHECK_CONTAINS(html, "<h2>Gate 'gate': FAILED</h2>");
    CHECK_CONTAINS(html, "<td class=\"num\">+0.5 ± 0.125</td>");
    CHECK_INT_EQ(count(html, "class=\"pwin\""), 4);
    /* 2.0 vs 2.0 equal; 2.5 > 2.4, 3.0 = 3.0, 2.25 > 2.2: worse in 2 of 4 */
    CHECK_CONTAINS(html, "this run is worse in 2 of 4 windows");
    CHECK_INT_EQ(count(html, "class=\"baseline\""), 1);
    free(html);
    em_history_free(&h);
    free(path);
    cJSON_Delete(doc);
    em_metrics_free(m);
}

int main(void) {
    char dir[] = "/tmp/em-report-lib-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    test_results();
    test_prometheus();
    test_base64();
    test_history(dir);
    test_table_and_html(dir);
    char *cmd = em_xasprintf("rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    free(cmd);
    return test_finish();
}
