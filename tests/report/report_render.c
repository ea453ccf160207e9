/* Test driver: renders a results document given as a file the way the report stage's outputs do,
 * so tests can use documents built by hand (a `gate` section with paired checks, a history with
 * failed runs, paired windows) before or without a gate stage producing them:
 *   report_render prometheus RESULTS.json          prints the Pushgateway exposition text
 *   report_render push RESULTS.json URL JOB        PUTs it to URL's group job/JOB/recipe/<recipe
 *                                                  name>, as the pushgateway output does
 *   report_render html RESULTS.json OUT.html [HISTORY.jsonl METRIC [WINDOWS.json]]
 *                                                  writes the HTML report; WINDOWS.json holds
 *                                                  {"window_nll": [...], "baseline": [...],
 *                                                  "candidate": [...]} (each optional)
 * Exit status: 0, 1 for usage, 2 for a bad input file, 4 when the push or a write failed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/regular_file.h"
#include "stages/report/history.h"
#include "stages/report/html.h"
#include "stages/report/prometheus.h"
#include "stages/report/push.h"
#include "stages/report/results.h"

static int fail(em_status err) {
    fprintf(stderr, "%s\n", err->message);
    int code = err->exit_code;
    em_error_free(err);
    return code;
}

/* The numbers of array `key` of obj (heap; *n entries). */
static double *numbers(const cJSON *obj, const char *key, size_t *n) {
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(obj, key);
    *n = (size_t)cJSON_GetArraySize(arr);
    double *v = calloc(*n ? *n : 1, sizeof *v);
    size_t i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) v[i++] = cJSON_GetNumberValue(it);
    return v;
}

static em_status html(const cJSON *doc, int argc, char **argv) {
    em_history history = {0};
    em_status err = argc >= 6 ? em_history_load(argv[4], false, &history) : NULL;
    cJSON *windows = NULL;
    if (!err && argc >= 7) {
        char *text = NULL;
        size_t len = 0;
        err = em_read_regular_file(argv[6], (size_t)1 << 26, "a windows file", &text, &len);
        if (!err) windows = cJSON_ParseWithLength(text, len);
        if (!err && !windows) err = em_error_new(EM_EXIT_BAD_INPUT, "%s: not JSON", argv[6]);
        free(text);
    }
    size_t nw = 0, nb = 0, nc = 0;
    double *w = numbers(windows, "window_nll", &nw);
    double *base = numbers(windows, "baseline", &nb);
    double *cand = numbers(windows, "candidate", &nc);
    if (!err) {
        em_html_input in = {.results = doc,
                            .window_nll = w,
                            .window_count = nw,
                            .history = argc >= 6 ? &history : NULL,
                            .history_metric = argc >= 6 ? argv[5] : NULL,
                            .baseline_window_nll = base,
                            .candidate_window_nll = cand,
                            .paired_window_count = nb < nc ? nb : nc};
        char *page = em_html_report(&in);
        err = em_atomic_write(argv[3], page, strlen(page), 0644);
        free(page);
    }
    free(w);
    free(base);
    free(cand);
    cJSON_Delete(windows);
    em_history_free(&history);
    return err;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    bool ok = (strcmp(mode, "prometheus") == 0 && argc == 3) ||
              (strcmp(mode, "push") == 0 && argc == 5) ||
              (strcmp(mode, "html") == 0 && (argc == 4 || argc == 6 || argc == 7));
    if (!ok) {
        fprintf(stderr, "usage: report_render prometheus RESULTS.json\n"
                        "       report_render push RESULTS.json URL JOB\n"
                        "       report_render html RESULTS.json OUT.html [HISTORY.jsonl METRIC "
                        "[WINDOWS.json]]\n");
        return 1;
    }
    cJSON *doc = NULL;
    em_status err = em_results_load(argv[2], &doc);
    if (err) return fail(err);
    if (strcmp(mode, "html") == 0) {
        err = html(doc, argc, argv);
    } else {
        char *text = em_prometheus_text(doc);
        if (strcmp(mode, "prometheus") == 0) {
            fputs(text, stdout);
        } else {
            const char *recipe = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(doc, "recipe"), "name"));
            em_prom_label grouping = {"recipe", recipe};
            em_push_request req = {.target = "pushgateway",
                                   .url = em_prometheus_group_url(argv[3], argv[4], &grouping, 1),
                                   .method = "PUT",
                                   .content_type = "text/plain; version=0.0.4",
                                   .verify_tls = true,
                                   .timeout_s = 5};
            err = em_push_send(&req, text, strlen(text));
            free(req.url);
        }
        free(text);
    }
    cJSON_Delete(doc);
    return err ? fail(err) : 0;
}
