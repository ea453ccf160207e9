/* Test driver: the Pushgateway exposition of a results document given as a file, so tests can
 * push documents built by hand (a `gate` section with paired checks) to a real Pushgateway.
 * usage: prom_push RESULTS.json            prints the exposition text
 *        prom_push RESULTS.json URL JOB    PUTs it to URL's group job/JOB/recipe/<recipe name>,
 *                                          as the report stage's pushgateway output does
 * Exit status: 0, 2 for a bad document, 4 when the push failed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/report/prometheus.h"
#include "stages/report/push.h"
#include "stages/report/results.h"

int main(int argc, char **argv) {
    if (argc != 2 && argc != 4) {
        fprintf(stderr, "usage: prom_push RESULTS.json [URL JOB]\n");
        return 1;
    }
    cJSON *doc = NULL;
    em_status err = em_results_load(argv[1], &doc);
    if (err) {
        fprintf(stderr, "%s\n", err->message);
        int code = err->exit_code;
        em_error_free(err);
        return code;
    }
    char *text = em_prometheus_text(doc);
    if (argc == 2) {
        fputs(text, stdout);
    } else {
        const char *recipe = cJSON_GetStringValue(
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "recipe"),
                                             "name"));
        em_prom_label grouping = {"recipe", recipe};
        em_push_request req = {.target = "pushgateway",
                               .url = em_prometheus_group_url(argv[2], argv[3], &grouping, 1),
                               .method = "PUT",
                               .content_type = "text/plain; version=0.0.4",
                               .verify_tls = true,
                               .timeout_s = 5};
        err = em_push_send(&req, text, strlen(text));
        free(req.url);
    }
    int code = 0;
    if (err) {
        fprintf(stderr, "%s\n", err->message);
        code = err->exit_code;
        em_error_free(err);
    }
    free(text);
    cJSON_Delete(doc);
    return code;
}
