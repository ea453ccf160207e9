/* `evalmesh history FILE [--metric KEY] [--baseline]`: the runs of a history file (one results
 * document per line, appended by report stages) with their date, commit, model, gate verdict and
 * the baseline their gate compared against, then for each metric every run's value with its
 * change against the previous run and against the best run of the series (lowest, or highest for
 * accuracy-like metrics: see em_metric_higher_is_better). `--baseline` prints only the run a gate
 * reading this history would compare against next, and why (em_history_baseline). Corrupt lines
 * are reported with their line number and left out. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/command.h"
#include "cli/options.h"
#include "util/error.h"
#include "stages/metrics/metric_table.h"
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

static const char *str(const cJSON *doc, const char *object, const char *key) {
    const cJSON *o = object ? cJSON_GetObjectItemCaseSensitive(doc, object) : doc;
    const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, key));
    return v ? v : "—";
}

/* "PATH (DIGEST12)" of a run's model: its digest (loaded_model.h), its header sha256 in lines
 * written before the digest. */
static void print_model(const cJSON *doc) {
    const char *digest = str(doc, "model", "digest");
    if (strcmp(digest, "—") == 0) digest = str(doc, "model", "header_sha256");
    printf("%s (%.12s)", str(doc, "model", "path"), digest);
}

/* What a run's gate compared against: "line N, paired", another source, or "—". */
static void print_compared(const cJSON *doc, const char *file) {
    const cJSON *base =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "gate"), "baseline");
    if (!cJSON_IsObject(base)) {
        printf("%-20s", "none");
        return;
    }
    const char *source = str(base, NULL, "source");
    size_t len = strlen(file);
    bool here = strncmp(source, file, len) == 0 && source[len] == ':';
    char text[600];
    snprintf(text, sizeof text, "%s%s, %s", here ? "line " : "", here ? source + len + 1 : source,
             cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(base, "paired")) ? "paired"
                                                                            : "unpaired");
    printf("%-20s", text);
}

/* The runs: when, which commit and model, the gate's verdict and what it compared against. */
static void print_runs(const em_history *h, const char *file) {
    long next = em_history_baseline(h);
    printf("runs of %s; the next gate reading it compares against ", file);
    if (next < 0)
        printf("none (no run passed its gate)\n");
    else
        printf("line %d\n", h->line_numbers[next]);
    printf("  %4s %5s  %-20s  %-12s  %-7s  %-20s  %s\n", "run", "line", "end time", "commit",
           "verdict", "its baseline", "model (digest)");
    for (size_t i = 0; i < h->count; i++) {
        const cJSON *doc = h->entries[i];
        printf("  %4zu %5d  %-20s  %-12.12s  %-7s  ", i + 1, h->line_numbers[i],
               str(doc, NULL, "end_time"), str(doc, "evalmesh", "commit"), em_history_verdict(doc));
        print_compared(doc, file);
        printf("  ");
        print_model(doc);
        printf("%s\n", (long)i == next ? "  <- next baseline" : "");
    }
}

/* `--baseline`: the run the next gate compares against, and why. */
static void print_baseline(const em_history *h, const char *file) {
    long next = em_history_baseline(h);
    if (next < 0) {
        printf("no baseline: none of the %zu runs of %s passed its gate (a gate reading it skips "
               "its relative checks)\n",
               h->count, file);
        return;
    }
    const cJSON *doc = h->entries[next];
    size_t later = h->count - (size_t)next - 1;
    printf("baseline: %s:%d\n", file, h->line_numbers[next]);
    printf("  end time  %s\n  commit    %s\n  model     ", str(doc, NULL, "end_time"),
           str(doc, "evalmesh", "commit"));
    print_model(doc);
    printf("\n  verdict   %s\n", em_history_verdict(doc));
    const char *tokens = cJSON_GetStringValue(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "tokens"), "file"));
    if (tokens)
        printf("  tokens    %s (per-token scores: the gate pairs token by token)\n", tokens);
    else
        printf("  tokens    none (aggregates only: the gate compares unpaired)\n");
    printf("why: the last run whose gate passed or that had no gate");
    if (later)
        printf("; the %zu run%s after it failed %s gate and cannot be a baseline", later,
               later == 1 ? "" : "s", later == 1 ? "its" : "their");
    printf("\n");
}

static int history_main(int argc, char **argv) {
    static const struct option options[] = {
        {"metric", required_argument, NULL, 'm'},
        {"baseline", no_argument, NULL, 'b'},
        {0},
    };
    const char *metric = NULL;
    bool baseline = false;
    int c;
    while ((c = em_cli_option("history", argc, argv, "", options)) != -1) {
        if (c == 'b') {
            baseline = true;
            continue;
        }
        if (c != 'm') return EM_EXIT_BAD_INPUT;
        metric = optarg;
    }
    if (optind >= argc) {
        fprintf(stderr, "usage: evalmesh history FILE [--metric KEY] [--baseline] (see --help)\n");
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
    } else if (baseline) {
        print_baseline(&h, file);
    } else if (metric) {
        print_runs(&h, file);
        printf("\n");
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
        print_runs(&h, file);
        for (size_t i = 0; i < keys.count; i++) {
            printf("\n");
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
    .summary = "show a history file: runs with verdict and baseline, each metric's series",
    .usage = "usage: evalmesh history FILE [--metric KEY] [--baseline]\n\n"
             "FILE is a history written by a report stage's `history` output (one results\n"
             "document per line). Prints its runs (end time, commit, gate verdict, the baseline\n"
             "their gate compared against, model path and digest) and marks the run a\n"
             "gate reading FILE compares against next: the last one whose gate passed or that\n"
             "had no gate (a failed run never becomes a baseline). --baseline prints only that\n"
             "run and why. For each metric (or only KEY, e.g. f_ref.token_ppl) prints\n"
             "every run's value and error, and its change in percent against the previous run\n"
             "and against the best run (the lowest value; the highest for metrics ending in\n"
             "accuracy, agreement, same_top or per_second). Corrupt lines are reported with\n"
             "their line number on stderr and the other lines are still used.\n"
             "Exit status: 0, or 2 when FILE cannot be read, has no valid line or lacks KEY.\n",
    .main = history_main,
};
