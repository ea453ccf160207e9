/* `evalmesh history FILE [--metric KEY]`: the series of a history file (one results document per
 * line, appended by report stages): for each metric, every run's value with its change against
 * the previous run and against the best run of the series (lowest, or highest for accuracy-like
 * metrics: see em_metric_higher_is_better). Corrupt lines are reported with their line number
 * and left out. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/command.h"
#include "cli/options.h"
#include "util/error.h"
#include "stages/report/history.h"
#include "stages/report/results.h"

typedef struct key_list {
    char **keys;
    size_t count;
} key_list;

static void add_key(const char *key, double value, const double *error, bool timing, void *user) {
    key_list *l = user;
    for (size_t i = 0; i < l->count; i++)
        if (strcmp(l->keys[i], key) == 0) return;
    l->keys = em_xrealloc(l->keys, (l->count + 1) * sizeof *l->keys);
    l->keys[l->count++] = em_xstrdup(key);
}

static void print_change(double value, double ref) {
    if (isnan(ref) || ref == 0 || isnan(value))
        printf("  %12s", "—");
    else
        printf("  %+11.3f%%", (value - ref) / fabs(ref) * 100);
}

/* One metric's series. */
static void print_series(const em_history *h, const char *key) {
    bool higher = em_metric_higher_is_better(key);
    double best = NAN;
    size_t best_run = 0;
    for (size_t i = 0; i < h->count; i++) {
        double v;
        if (!em_results_metric(h->entries[i], key, &v, NULL, NULL) || isnan(v)) continue;
        if (isnan(best) || (higher ? v > best : v < best)) {
            best = v;
            best_run = i + 1;
        }
    }
    printf("%s (%s is better; best: run %zu)\n", key, higher ? "higher" : "lower", best_run);
    printf("  %4s %5s  %-20s  %-12s  %16s  %10s  %12s  %12s\n", "run", "line", "end time", "commit",
           "value", "± error", "vs previous", "vs best");
    double prev = NAN;
    for (size_t i = 0; i < h->count; i++) {
        const cJSON *doc = h->entries[i];
        const char *end = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(doc, "end_time"));
        const char *commit = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(doc, "evalmesh"), "commit"));
        printf("  %4zu %5d  %-20s  %-12.12s", i + 1, h->line_numbers[i], end ? end : "—",
               commit ? commit : "—");
        double v, e;
        bool has_error;
        if (!em_results_metric(doc, key, &v, &e, &has_error)) {
            printf("  %16s\n", "(absent)");
            continue;
        }
        printf("  %16.8g", v);
        if (has_error)
            printf("  %10.3g", e);
        else
            printf("  %10s", "");
        print_change(v, prev);
        print_change(v, best);
        printf("%s\n", i + 1 == best_run ? "  best" : "");
        prev = v;
    }
}

static int history_main(int argc, char **argv) {
    static const struct option options[] = {
        {"metric", required_argument, NULL, 'm'},
        {0},
    };
    const char *metric = NULL;
    int c;
    while ((c = em_cli_option("history", argc, argv, "", options)) != -1) {
        if (c != 'm') return EM_EXIT_BAD_INPUT;
        metric = optarg;
    }
    if (optind >= argc) {
        fprintf(stderr, "usage: evalmesh history FILE [--metric KEY] (see --help)\n");
        return EM_EXIT_BAD_INPUT;
    }
    if (optind + 1 < argc) return em_cli_unexpected("history", argv[optind + 1]);
    const char *file = argv[optind];
    em_history h;
    em_status err = em_history_load(file, false, &h);
    if (err) {
        fprintf(stderr, "evalmesh history: %s\n", err->message);
        int code = err->exit_code;
        em_error_free(err);
        return code;
    }
    int code = EM_EXIT_OK;
    key_list keys = {0};
    for (size_t i = 0; i < h.count; i++) em_results_each_metric(h.entries[i], add_key, &keys);
    if (h.count == 0) {
        fprintf(stderr, "evalmesh history: %s: no valid run (%d line%s skipped)\n", file, h.skipped,
                h.skipped == 1 ? "" : "s");
        code = EM_EXIT_BAD_INPUT;
    } else if (metric) {
        bool found = false;
        for (size_t i = 0; i < keys.count; i++) found |= strcmp(keys.keys[i], metric) == 0;
        if (found) {
            print_series(&h, metric);
        } else {
            fprintf(stderr, "evalmesh history: %s: no metric '%s' in any run (it has:", file,
                    metric);
            for (size_t i = 0; i < keys.count; i++)
                fprintf(stderr, "%s %s", i ? "," : "", keys.keys[i]);
            fprintf(stderr, ")\n");
            code = EM_EXIT_BAD_INPUT;
        }
    } else {
        for (size_t i = 0; i < keys.count; i++) {
            if (i) printf("\n");
            print_series(&h, keys.keys[i]);
        }
    }
    if (h.skipped)
        fprintf(stderr, "evalmesh history: %d corrupt line%s of %s skipped (see above)\n",
                h.skipped, h.skipped == 1 ? "" : "s", file);
    for (size_t i = 0; i < keys.count; i++) free(keys.keys[i]);
    free(keys.keys);
    em_history_free(&h);
    return code;
}

const em_command em_command_history = {
    .name = "history",
    .summary = "show a history file's series: each run's metrics, change vs previous and best",
    .usage = "usage: evalmesh history FILE [--metric KEY]\n\n"
             "FILE is a history written by a report stage's `history` output (one results\n"
             "document per line). For each metric (or only KEY, e.g. f_ref.token_ppl) prints\n"
             "every run's value and error, and its change in percent against the previous run\n"
             "and against the best run (the lowest value; the highest for metrics ending in\n"
             "accuracy, agreement, same_top or per_second). Corrupt lines are reported with\n"
             "their line number on stderr and the other lines are still used.\n"
             "Exit status: 0, or 2 when FILE cannot be read, has no valid line or lacks KEY.\n",
    .main = history_main,
};
