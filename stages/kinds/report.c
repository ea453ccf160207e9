/* Stage `report`: turns the metrics of an aggregate stage into what people and monitoring read.
 * `outputs` lists any of
 *   table        the metrics table on rank 0's stdout
 *   json         the results document (default <run_dir>/results.json)
 *   history      one line appended to a JSON Lines file shared by a series of runs
 *   html         a self-contained HTML page with inline SVG charts (default <run_dir>/report.html)
 *   pushgateway  a Prometheus Pushgateway PUT of every metric
 *   webhook      a POST of the results document
 * With `verdict: <gate stage>` the gate's verdict (stages/report/check.h) becomes the document's
 * "gate" section (results.json, the history line, the webhook body); run the gate first. When
 * the metrics' first input left complete window records, its per-token scores are kept in
 * <run_dir>/tokens/<stage>.tokens (named in the document's "tokens"), and a history output copies
 * them beside the history (<history>.tokens/<sha256>.tokens) for a later paired gate — unless
 * the run's gate failed: a failed run is recorded but never becomes a baseline. A task stage's
 * per-example values (its example file, stages/report/example_file.h) are named in "examples"
 * and copied beside the history (<history>.examples/<sha256>.json) the same way.
 * Only rank 0 writes and sends. Local files are written first, pushes last; a push that fails
 * after its retries is spooled in <run_dir>/push-spool/ for `evalmesh push RUN_DIR`, and fails
 * the run (exit 4) only when the output says `required: true` (otherwise it is a warning).
 * Relative json/html paths are inside the run directory; relative history paths (and an html
 * output's `history`) are relative to the recipe file's folder, like model and dataset paths.
 * Each output type is a row of output_types below: how its options are read and how it is
 * written or sent. The push options' defaults are the schema's (schemas/stages/report.schema.json),
 * filled in by the recipe validator.
 * Produces an em_report_artifact (stages/report/report_artifact.h). */
#include <errno.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runner/recipe/schema.h"
#include "runner/stage.h"
#include "stages/kinds/report_push_request.h"
#include "util/atomic_file.h"
#include "util/log.h"
#include "util/redact.h"
#include "util/regular_file.h"
#include "util/sha256.h"
#include "stages/metrics/metrics.h"
#include "stages/quant/activation_stats.h"
#include "stages/report/history.h"
#include "stages/report/html.h"
#include "stages/report/prometheus.h"
#include "stages/report/push.h"
#include "stages/report/report_artifact.h"
#include "stages/report/results.h"
#include "stages/report/check.h"
#include "stages/report/spool.h"
#include "stages/report/strbuf.h"
#include "stages/report/table.h"
#include "stages/report/textfile.h"
#include "stages/report/token_file.h"
#include "stages/report/writable.h"

typedef struct output_type output_type;

typedef struct output {
    const output_type *type;
    size_t index; /* in `outputs` */
    em_mark mark;
    char *path;            /* json, history, html: as written in the recipe */
    char *chart_history;   /* html: history file for the line chart, or NULL */
    char *chart_metric;    /* html: metric of the line chart, or NULL */
    em_push_request req;   /* pushgateway, webhook (for pushgateway, url is the base URL) */
    char *job;             /* pushgateway */
    const em_node *labels; /* pushgateway: extra grouping labels (in the options) */
    bool required;
} output;

/* What every output of a run is written from (rank 0, at run time). */
typedef struct report_context {
    const em_stage *self;
    const em_run_context *ctx;
    const em_metrics *metrics;
    const cJSON *results;
    const em_verdict *verdict; /* NULL without `verdict` */
    const char *history_path;  /* the first history output's path, or NULL */
    const char *tokens_path;   /* this run's token file, or NULL */
    const char *examples_path; /* this run's example file, or NULL */
    em_report_artifact *art;
} report_context;

/* One row per output type: how its options are read (item: the entry of `outputs`, map: the same
 * when it is a map, else NULL) and how it is written (path: its file, NULL for table and pushes).
 * Local outputs are written first, every one attempted; pushes are sent last, and a failed push is
 * spooled. */
struct output_type {
    const char *name;
    em_status (*parse)(const em_stage *self, const em_node *item, const em_node *map, output *o,
                       const em_run_context *ctx);
    em_status (*write)(const output *o, const char *path, const report_context *rc);
    bool pushes;
    bool in_run_dir;          /* a relative path is inside the run directory */
    const char *default_path; /* the file when the output names none, or NULL */
    const char *method;       /* pushes: the HTTP request */
    const char *content_type;
    char *(*body)(const cJSON *results); /* pushes: what is sent (heap) */
};

typedef struct report_state {
    output *outs;
    size_t count;
    time_t start_time;
} report_state;

/* An error (exit 2) at the option's place: "file:line:col: stage 'out': ...". */
static em_status bad_option(const em_stage *self, em_mark mark, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static em_status bad_option(const em_stage *self, em_mark mark, const char *fmt, ...) {
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    return em_error_at(EM_EXIT_BAD_INPUT, mark, "stage '%s': %s", self->name, text);
}

static char *opt_dup(const em_node *map, const char *key) {
    const char *s = em_node_get_string(map, key, NULL);
    return s ? em_xstrdup(s) : NULL;
}

/* A path of the run directory or a path the recipe gives: run-directory outputs are checked once
 * the run directory is known. */
static em_status check_path(const em_stage *self, const output *o, const char *run_dir) {
    bool in_run_dir = o->type->in_run_dir;
    if (in_run_dir && o->path[0] != '/' && !run_dir) return NULL;
    char *full = in_run_dir ? em_textfile_join(run_dir, o->path) : em_xstrdup(o->path);
    const char *why = NULL;
    em_status err = NULL;
    if (!em_path_writable(full, &why))
        err =
            bad_option(self, o->mark, "cannot write %s output '%s': %s", o->type->name, full, why);
    free(full);
    return err;
}

static em_status parse_table(const em_stage *self, const em_node *item, const em_node *map,
                             output *o, const em_run_context *ctx) {
    (void)self, (void)item, (void)map, (void)o, (void)ctx;
    return NULL;
}

/* json: `path` in the run directory. */
static em_status parse_json(const em_stage *self, const em_node *item, const em_node *map,
                            output *o, const em_run_context *ctx) {
    (void)self, (void)item, (void)ctx;
    o->path = em_xstrdup(em_node_get_string(map, "path", o->type->default_path));
    return NULL;
}

/* html: `path` in the run directory, and the line chart's `history` and `metric`. */
static em_status parse_html(const em_stage *self, const em_node *item, const em_node *map,
                            output *o, const em_run_context *ctx) {
    parse_json(self, item, map, o, ctx);
    if (em_node_get(map, "history")) o->chart_history = em_node_path(em_node_get(map, "history"));
    o->chart_metric = opt_dup(map, "metric");
    return NULL;
}

/* history: `path`, required, relative to the recipe file's folder. */
static em_status parse_history(const em_stage *self, const em_node *item, const em_node *map,
                               output *o, const em_run_context *ctx) {
    (void)ctx;
    if (!em_node_get_string(map, "path", NULL))
        return bad_option(self, item->mark, "%s output needs `path`", o->type->name);
    o->path = em_node_path(em_node_get(map, "path"));
    return NULL;
}

/* The options every push reads (item: the output's map, its defaults filled by the schema). */
static em_status parse_push(const em_stage *self, const em_node *item, const em_node *map,
                            output *o, const em_run_context *ctx) {
    (void)map, (void)ctx;
    em_push_request *r = &o->req;
    r->target = em_xstrdup(o->type->name);
    r->url = opt_dup(item, "url");
    if (!r->url) return bad_option(self, item->mark, "%s output needs `url`", r->target);
    em_status err = em_push_check_url(r->url);
    if (err) {
        return em_error_prefix_at(err, em_node_get(item, "url")->mark, "stage '%s'", self->name);
    }
    r->method = em_xstrdup(o->type->method);
    r->content_type = em_xstrdup(o->type->content_type);
    r->verify_tls = em_node_option_bool(item, "verify_tls");
    const em_node *ca = em_node_get(item, "ca_path");
    r->ca_path = ca ? em_node_path(ca) : NULL;
    if (r->ca_path && access(r->ca_path, R_OK) != 0)
        return bad_option(self, em_node_get(item, "ca_path")->mark, "ca_path '%s': %s", r->ca_path,
                          strerror(errno));
    r->timeout_s = em_node_option_double(item, "timeout_s");
    r->retries = (int)em_node_option_int(item, "retries");
    r->backoff_s = em_node_option_double(item, "backoff_s");
    o->required = em_node_option_bool(item, "required");
    const em_node *auth = em_node_get(item, "auth");
    if (auth) {
        const char *type = em_node_option_string(auth, "type");
        r->auth = strcmp(type, "basic") == 0 ? EM_AUTH_BASIC : EM_AUTH_BEARER;
        r->auth_env = opt_dup(auth, "env");
        const em_node *file = em_node_get(auth, "file");
        r->auth_file = file ? em_node_path(file) : NULL;
        if (!r->auth_env == !r->auth_file)
            return bad_option(self, auth->mark,
                              "auth needs exactly one of `env` (a variable holding the %s "
                              "credential) or `file`",
                              type);
    }
    return NULL;
}

/* pushgateway: the push options, the `job` (default: the recipe name) and grouping `labels`. */
static em_status parse_pushgateway(const em_stage *self, const em_node *item, const em_node *map,
                                   output *o, const em_run_context *ctx) {
    em_status err = parse_push(self, item, map, o, ctx);
    if (err) return err;
    o->job = em_xstrdup(
        em_node_get_string(item, "job", ctx->recipe_name ? ctx->recipe_name : "evalmesh"));
    o->labels = em_node_get(item, "labels");
    for (size_t i = 0; o->labels && i < o->labels->count; i++) {
        const em_map_entry *e = &o->labels->entries[i];
        if (em_prometheus_reserved_label(e->key))
            return bad_option(self, e->key_mark,
                              "pushgateway label '%s' cannot be a grouping label: evalmesh "
                              "or the Pushgateway sets it inside the series (model, "
                              "model_sha256, dataset, commit, stage, rank, gate, metric, "
                              "rule, comparison, job, instance)",
                              e->key);
    }
    return NULL;
}

/* sha256 of the resolved recipe written as YAML. */
static void recipe_hash(const em_node *recipe, char hex[65]) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (recipe) em_node_write_yaml(recipe, f);
    fclose(f);
    em_sha256_hex(text, len, hex);
    free(text);
}

/* The Pushgateway grouping of this run: the recipe name and the recipe's extra labels (which may
 * replace it); the job comes first in the URL. Model, dataset and commit are labels inside the
 * series (prometheus.h), so each push replaces the recipe's previous one. */
static em_prom_label *group_labels(const output *o, const em_run_context *ctx, size_t *count) {
    size_t extra = o->labels && o->labels->kind == EM_NODE_MAP ? o->labels->count : 0;
    em_prom_label *labels = em_xcalloc(1 + extra, sizeof *labels);
    labels[0] = (em_prom_label){"recipe", ctx->recipe_name};
    size_t n = 1;
    for (size_t i = 0; i < extra; i++) {
        const em_map_entry *e = &o->labels->entries[i];
        const char *value = em_node_get_string(o->labels, e->key, "");
        size_t j = 0;
        while (j < n && strcmp(labels[j].name, e->key) != 0) j++;
        labels[j] = (em_prom_label){e->key, value};
        if (j == n) n++;
    }
    /* A label without a value (no recipe name) is left out. */
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (labels[i].value) labels[kept++] = labels[i];
    *count = kept;
    return labels;
}

/* Sends a push output; on failure spools it (without URL or credential: see spool.h) and returns
 * the error. */
static em_status send_push(const output *o, const char *path, const report_context *rc) {
    (void)path;
    em_push_request req = o->req;
    em_spool_entry entry = {.stage = rc->self->name, .output = (int)o->index, .target = req.target};
    em_prom_label *labels = NULL;
    if (o->job) { /* a Pushgateway: the grouping key goes into the URL */
        labels = group_labels(o, rc->ctx, &entry.label_count);
        req.url = em_prometheus_group_url(o->req.url, o->job, labels, entry.label_count);
        entry.job = o->job;
        entry.labels = labels;
    } else {
        req.url = em_xstrdup(o->req.url);
    }
    char *body = o->type->body(rc->results);
    entry.body = body;
    em_status err = em_push_send(&req, body, strlen(body));
    const char *run_dir = rc->ctx->run_dir;
    if (err && run_dir) {
        char *spooled = NULL;
        em_status serr = em_spool_write(run_dir, &entry, &spooled);
        if (serr) {
            em_log_error("stage '%s': could not spool the failed push: %s", rc->self->name,
                         serr->message);
            em_error_free(serr);
        } else {
            em_status spooled_err =
                em_error_new(err->exit_code, "%s; spooled in %s (resend with `evalmesh push %s`)",
                             err->message, spooled, run_dir);
            em_error_free(err);
            err = spooled_err;
        }
        free(spooled);
    }
    free(labels);
    free(req.url);
    free(body);
    return err;
}

static char *results_text(const cJSON *results) {
    return em_results_print(results, true);
}

/* Keeps the per-token scores of the metrics' first input in <run_dir>/tokens/<stage>.tokens and
 * names the file in results (relative to the run directory) with its sha256 and window options;
 * *path gets the file. Without complete window records nothing is kept (an info line says why):
 * such a run can only be an unpaired baseline. */
static void keep_tokens(const em_stage *self, const em_metrics *m, const em_run_context *ctx,
                        cJSON *results, char **path) {
    *path = NULL;
    if (!ctx->run_dir || !m->source_stage) return;
    char key_name[256];
    snprintf(key_name, sizeof key_name, "%s.windows", m->source_stage);
    const em_metric *windows = em_metrics_find(m, key_name);
    em_records_key key =
        em_records_key_of(m->model_digest, m->dataset_sha256, ctx->recipe_sha256, m->precision);
    bool complete = false;
    char *why = NULL;
    char sha[65];
    char *name = em_xasprintf("tokens/%s.tokens", m->source_stage);
    char *full = em_textfile_join(ctx->run_dir, name);
    char *dir = em_textfile_join(ctx->run_dir, "tokens");
    em_status err = em_textfile_mkdirs(dir);
    if (!err)
        err = em_token_file_write_from_records(full, ctx->run_dir, m->source_stage, &key,
                                               m->window_spec, windows ? (size_t)windows->value : 0,
                                               sha, &complete, &why);
    if (err) {
        em_log_warn("stage '%s': per-token scores not kept (no paired comparison against this "
                    "run): %s",
                    self->name, err->message);
        em_error_free(err);
    } else if (!complete) {
        em_log_info("stage '%s': per-token scores not kept: %s", self->name, why);
    } else {
        cJSON *t = cJSON_AddObjectToObject(results, "tokens");
        cJSON_AddStringToObject(t, "stage", m->source_stage);
        cJSON_AddStringToObject(t, "file", name);
        cJSON_AddStringToObject(t, "sha256", sha);
        cJSON *spec = cJSON_Parse(m->window_spec ? m->window_spec : "{}");
        cJSON_AddItemToObject(t, "windows", spec ? spec : cJSON_CreateObject());
        *path = em_xstrdup(full);
    }
    free(why);
    free(name);
    free(full);
    free(dir);
}

/* Names the example file a task stage wrote (stages/report/example_file.h) in results' "examples"
 * with its sha256 (relative to the run directory); *path gets the file. Without one (not a task
 * stage's metrics, or a run without a directory) nothing is named. */
static void keep_examples(const em_stage *self, const em_metrics *m, const em_run_context *ctx,
                          cJSON *results, char **path) {
    *path = NULL;
    if (!ctx->run_dir || !m->examples_file) return;
    char *full = em_textfile_join(ctx->run_dir, m->examples_file);
    char *data = NULL;
    size_t len = 0;
    em_status err = em_read_regular_file(full, EM_TEXT_MAX_BYTES, "an example file", &data, &len);
    if (err) {
        em_log_warn("stage '%s': per-example values not kept (no paired comparison against this "
                    "run): %s",
                    self->name, err->message);
        em_error_free(err);
        free(full);
        return;
    }
    char sha[65];
    em_sha256_hex(data, len, sha);
    free(data);
    cJSON *e = cJSON_AddObjectToObject(results, "examples");
    cJSON_AddStringToObject(e, "stage", m->examples->stage);
    cJSON_AddStringToObject(e, "file", m->examples_file);
    cJSON_AddStringToObject(e, "sha256", sha);
    *path = full;
}

/* Copies the file `source` (what: for messages) beside the history at path as
 * <history>.<folder>/<sha256>.<ext> and names the copy in section's "file", relative to the
 * history's folder. */
static em_status copy_beside_history(const char *path, cJSON *section, const char *source,
                                     const char *folder_suffix, const char *ext, const char *what) {
    const char *sha = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(section, "sha256"));
    const char *slash = strrchr(path, '/');
    char *folder = slash ? em_xasprintf("%.*s", (int)(slash - path), path) : em_xstrdup(".");
    char *name =
        em_xasprintf("%s.%s/%s.%s", slash ? slash + 1 : path, folder_suffix, sha ? sha : "", ext);
    char *copy = em_textfile_join(folder, name);
    char *copy_dir = em_xstrdup(copy);
    char *data = NULL;
    size_t len = 0;
    em_status err = em_textfile_mkdirs(dirname(copy_dir));
    if (!err) err = em_read_regular_file(source, (size_t)1 << 34, what, &data, &len);
    if (!err) err = em_atomic_write(copy, data, len, 0644);
    if (!err) cJSON_ReplaceItemInObject(section, "file", cJSON_CreateString(name));
    free(data);
    free(copy_dir);
    free(copy);
    free(name);
    free(folder);
    return err;
}

/* Appends the history line: the document with the run's token file and example file copied beside
 * the history (<history>.tokens/<sha256>.tokens, <history>.examples/<sha256>.json, named relative
 * to its folder) when the run can be a baseline, and without them when its gate failed. */
static em_status append_history(const char *path, const cJSON *results, const char *tokens_path,
                                const char *examples_path) {
    cJSON *line = cJSON_Duplicate(results, true);
    const cJSON *gate = cJSON_GetObjectItemCaseSensitive(line, "gate");
    bool failed = gate && !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(gate, "passed"));
    cJSON *tokens = cJSON_GetObjectItemCaseSensitive(line, "tokens");
    cJSON *examples = cJSON_GetObjectItemCaseSensitive(line, "examples");
    em_status err = NULL;
    if (tokens && (failed || !tokens_path))
        cJSON_DeleteItemFromObjectCaseSensitive(line, "tokens");
    else if (tokens)
        err = copy_beside_history(path, tokens, tokens_path, "tokens", "tokens", "a token file");
    if (examples && (failed || !examples_path))
        cJSON_DeleteItemFromObjectCaseSensitive(line, "examples");
    else if (examples && !err)
        err = copy_beside_history(path, examples, examples_path, "examples", "json",
                                  "an example file");
    if (!err) err = em_history_append(path, line);
    cJSON_Delete(line);
    return err;
}

static em_status write_table(const output *o, const char *path, const report_context *rc) {
    (void)o, (void)path;
    char *table = em_report_table(rc->metrics);
    em_log_summary("%s", table);
    free(table);
    return NULL;
}

static em_status write_json(const output *o, const char *path, const report_context *rc) {
    (void)o;
    char *text = em_results_print(rc->results, true);
    char *dir = em_xstrdup(path);
    em_status err = em_textfile_mkdirs(dirname(dir));
    free(dir);
    if (!err) err = em_atomic_write(path, text, strlen(text), 0644);
    free(text);
    if (!rc->art->results_path) rc->art->results_path = em_xstrdup(path);
    return err;
}

static em_status write_history(const output *o, const char *path, const report_context *rc) {
    (void)o;
    em_status err = append_history(path, rc->results, rc->tokens_path, rc->examples_path);
    if (!rc->art->history_path) rc->art->history_path = em_xstrdup(path);
    return err;
}

static em_status write_html(const output *o, const char *path, const report_context *rc) {
    em_history history = {0};
    const char *chart = o->chart_history ? o->chart_history : rc->history_path;
    em_status err = chart ? em_history_load(chart, true, &history) : NULL;
    if (!err) {
        const em_verdict *verdict = rc->verdict;
        bool paired = verdict && verdict->paired;
        em_html_input in = {.results = rc->results,
                            .window_nll = rc->metrics->window_nll,
                            .window_count = rc->metrics->window_count,
                            .history = chart ? &history : NULL,
                            .history_metric = o->chart_metric,
                            .baseline_window_nll = paired ? verdict->baseline_window_nll : NULL,
                            .candidate_window_nll = paired ? verdict->candidate_window_nll : NULL,
                            .paired_window_count = paired ? verdict->paired_windows : 0};
        char *page = em_html_report(&in);
        err = em_atomic_write(path, page, strlen(page), 0644);
        free(page);
    }
    em_history_free(&history);
    if (!rc->art->html_path) rc->art->html_path = em_xstrdup(path);
    return err;
}

/* Writes or sends one output; a file output's path is logged once written. */
static em_status write_output(const output *o, const report_context *rc) {
    char *path = NULL;
    if (o->path)
        path =
            o->type->in_run_dir ? em_textfile_join(rc->ctx->run_dir, o->path) : em_xstrdup(o->path);
    em_status err = o->type->write(o, path, rc);
    if (!err && path) em_log_info("%s written to %s", o->type->name, path);
    free(path);
    return err;
}

static const output_type output_types[] = {
    {.name = "table", .parse = parse_table, .write = write_table},
    {.name = "json",
     .parse = parse_json,
     .write = write_json,
     .in_run_dir = true,
     .default_path = "results.json"},
    {.name = "history", .parse = parse_history, .write = write_history},
    {.name = "html",
     .parse = parse_html,
     .write = write_html,
     .in_run_dir = true,
     .default_path = "report.html"},
    {.name = "pushgateway",
     .parse = parse_pushgateway,
     .write = send_push,
     .pushes = true,
     .method = "PUT",
     .content_type = "text/plain; version=0.0.4",
     .body = em_prometheus_text},
    {.name = "webhook",
     .parse = parse_push,
     .write = send_push,
     .pushes = true,
     .method = "POST",
     .content_type = "application/json",
     .body = results_text},
};
static const size_t output_type_count = sizeof output_types / sizeof *output_types;

/* The output type names, "table, json, ..., <last_separator>webhook" (heap). */
static char *type_list(const char *last_separator) {
    em_strbuf b = {0};
    for (size_t t = 0; t < output_type_count; t++) {
        const char *sep = t == 0 ? "" : t + 1 < output_type_count ? ", " : last_separator;
        em_strbuf_printf(&b, "%s%s", sep, output_types[t].name);
    }
    return em_strbuf_take(&b);
}

static const output_type *find_type(const char *name) {
    for (size_t t = 0; t < output_type_count; t++)
        if (strcmp(name, output_types[t].name) == 0) return &output_types[t];
    return NULL;
}

static em_status parse_output(const em_stage *self, const em_node *item, output *o,
                              const em_run_context *ctx) {
    const em_node *type_node = item;
    if (item->kind == EM_NODE_MAP) type_node = em_node_get(item, "type");
    if (!type_node || type_node->kind != EM_NODE_SCALAR) {
        char *types = type_list(" or ");
        em_status err = bad_option(self, item->mark,
                                   "an output is a type name or a map with `type` (%s)", types);
        free(types);
        return err;
    }
    const char *type = type_node->text;
    o->mark = type_node->mark;
    o->type = find_type(type);
    if (!o->type) {
        const char **names = em_xcalloc(output_type_count, sizeof *names);
        for (size_t t = 0; t < output_type_count; t++) names[t] = output_types[t].name;
        const char *near = em_did_you_mean(type, names, output_type_count);
        char *types = type_list(", ");
        char *hint = near ? em_xasprintf(" (did you mean '%s'?)", near)
                          : em_xasprintf(" (one of %s)", types);
        em_status err = bad_option(self, type_node->mark, "unknown output type '%s'%s", type, hint);
        free(hint);
        free(types);
        free(names);
        return err;
    }
    const em_node *map = item->kind == EM_NODE_MAP ? item : NULL;
    em_status err = o->type->parse(self, item, map, o, ctx);
    if (!err && o->path) err = check_path(self, o, ctx->run_dir);
    return err;
}

static void report_destroy(em_stage *self) {
    report_state *st = self->state;
    if (!st) return;
    for (size_t i = 0; i < st->count; i++) {
        output *o = &st->outs[i];
        free(o->path);
        free(o->chart_history);
        free(o->chart_metric);
        free(o->job);
        em_push_request_free_fields(&o->req);
    }
    free(st->outs);
    free(st);
    self->state = NULL;
}

static em_status report_init(em_stage *self, const em_run_context *ctx) {
    report_state *st = em_xcalloc(1, sizeof *st);
    self->state = st;
    st->start_time = time(NULL); /* init runs before any stage: the run's start */
    const em_node *outs = em_node_get(self->options, "outputs");
    if (!outs || outs->kind != EM_NODE_SEQ || outs->count == 0) {
        char *types = type_list(", ");
        em_status err = bad_option(self, outs ? outs->mark : self->mark,
                                   "`outputs` must list at least one of %s", types);
        free(types);
        return err;
    }
    st->outs = em_xcalloc(outs->count, sizeof *st->outs);
    for (size_t i = 0; i < outs->count; i++) {
        st->count++;
        st->outs[i].index = i;
        em_status err = parse_output(self, outs->items[i], &st->outs[i], ctx);
        if (err) return err;
    }
    return NULL;
}

em_status em_report_push_request(const em_node *recipe, const char *stage, int index,
                                 const char *target, em_push_request *out) {
    memset(out, 0, sizeof *out);
    const em_node *stages = em_node_get(recipe, "stages");
    const em_node *st = stages ? em_node_get(stages, stage) : NULL;
    const em_node *outs = st ? em_node_get(st, "outputs") : NULL;
    if (!st || strcmp(em_node_get_string(st, "kind", ""), "report") != 0)
        return em_error_new(EM_EXIT_BAD_INPUT, "the run's recipe has no report stage '%s'", stage);
    if (!outs || outs->kind != EM_NODE_SEQ || index < 0 || (size_t)index >= outs->count)
        return em_error_new(EM_EXIT_BAD_INPUT, "report stage '%s' has no output %d", stage, index);
    const em_node *item = outs->items[index];
    const char *type = em_node_get_string(item, "type", "");
    if (strcmp(type, target) != 0)
        return em_error_new(EM_EXIT_BAD_INPUT, "output %d of report stage '%s' is '%s', not '%s'",
                            index, stage, type, target);
    const char *url = em_node_get_string(item, "url", "");
    if (em_has_url_secret(url) || strstr(url, EM_REDACTED))
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "output %d of report stage '%s': its URL held a secret, which was "
                            "redacted from recipe.resolved.yaml, so it cannot be sent again (give "
                            "credentials through `auth`, never in the URL)",
                            index, stage);
    output o = {.type = find_type(target), .index = (size_t)index};
    if (!o.type || !o.type->pushes)
        return em_error_new(EM_EXIT_BAD_INPUT, "output %d of report stage '%s' is '%s', not a push",
                            index, stage, type);
    /* the stage's options as the stage read them: checked, with the schema's defaults (which a
     * resolved recipe has already, unless an older evalmesh wrote it) */
    em_node *options = em_node_clone(st);
    char *what = em_xasprintf("stage '%s'", stage);
    em_status err = em_schema_validate_stage(options, "report", what);
    free(what);
    em_stage self = {.name = stage};
    em_run_context ctx = {.recipe_name = em_node_get_string(recipe, "name", NULL)};
    if (!err) {
        const em_node *checked = em_node_get(options, "outputs")->items[index];
        err = o.type->parse(&self, checked, checked, &o, &ctx);
    }
    *out = o.req;
    free(o.job);
    em_node_free(options);
    if (err) em_push_request_free_fields(out);
    return err;
}

/* The results document's "calibration": per calibrate stage of `calibrations`, what it was
 * calibrated on and on how many tokens. */
static void add_calibrations(const em_stage *self, cJSON *results) {
    size_t n = em_stage_input_count(self, "calibrations");
    cJSON *all = n ? cJSON_AddObjectToObject(results, "calibration") : NULL;
    for (size_t i = 0; i < n; i++) {
        const em_activation_stats *s = em_stage_input_artifact(self, "calibrations", i)->data;
        cJSON *c =
            cJSON_AddObjectToObject(all, em_stage_input_producer(self, "calibrations", i)->name);
        if (s->dataset)
            cJSON_AddStringToObject(c, "dataset", s->dataset);
        else
            cJSON_AddNullToObject(c, "dataset");
        cJSON_AddNumberToObject(c, "windows", (double)s->windows);
        cJSON_AddNumberToObject(c, "window_tokens", (double)s->window_len);
        cJSON_AddNumberToObject(c, "tokens", (double)s->tokens);
        cJSON_AddNumberToObject(c, "tensors", (double)s->n);
    }
}

static em_status report_run(em_stage *self, const em_run_context *ctx) {
    report_state *st = self->state;
    em_report_artifact *art = em_xcalloc(1, sizeof *art);
    self->output = (em_artifact){.data = art, .free = em_report_artifact_free};
    if (ctx->rank != 0) return NULL;
    const em_artifact *in = em_stage_input_artifact(self, "metrics", 0);
    const em_metrics *m = in ? in->data : NULL;
    if (!m) return em_error_new(EM_EXIT_FAILURE, "stage '%s': no metrics input", self->name);

    char hash[65];
    recipe_hash(ctx->recipe, hash);
    em_results_info info = {.recipe_name = ctx->recipe_name,
                            .recipe_sha256 = hash,
                            .world_size = ctx->world_size,
                            .node_count = ctx->node_count,
                            .ranks_per_node = ctx->local_size,
                            .start_time = st->start_time,
                            .end_time = time(NULL)};
    cJSON *results = em_results_build(m, &info);
    add_calibrations(self, results);
    const em_artifact *verdict = em_stage_input_artifact(self, "verdict", 0);
    if (verdict) cJSON_AddItemToObject(results, "gate", em_verdict_json(verdict->data));
    char *tokens_path = NULL, *examples_path = NULL;
    keep_tokens(self, m, ctx, results, &tokens_path);
    keep_examples(self, m, ctx, results, &examples_path);

    report_context rc = {.self = self,
                         .ctx = ctx,
                         .metrics = m,
                         .results = results,
                         .verdict = verdict ? verdict->data : NULL,
                         .tokens_path = tokens_path,
                         .examples_path = examples_path,
                         .art = art};
    for (size_t i = 0; i < st->count && !rc.history_path; i++)
        if (st->outs[i].type == find_type("history")) rc.history_path = st->outs[i].path;
    /* Local outputs first (every one is attempted; the first error is returned at the end). */
    em_status first = NULL;
    for (size_t i = 0; i < st->count; i++) {
        output *o = &st->outs[i];
        if (o->type->pushes) continue;
        em_status err = write_output(o, &rc);
        if (err && !first) {
            first = err;
        } else if (err) {
            em_log_error("%s", err->message);
            em_error_free(err);
        }
    }
    for (size_t i = 0; i < st->count; i++) {
        output *o = &st->outs[i];
        if (!o->type->pushes) continue;
        em_status err = write_output(o, &rc);
        if (!err) continue;
        art->pushes_failed++;
        if (o->required && !first) {
            first = err;
        } else {
            em_log_warn("stage '%s': %s%s", self->name, err->message,
                        o->required ? "" : " (not required: the run goes on)");
            em_error_free(err);
        }
    }
    cJSON_Delete(results);
    free(tokens_path);
    free(examples_path);
    return first;
}

static const em_input_spec report_inputs[] = {
    {.option = "metrics", .accepts = {"metrics"}},
    {.option = "calibrations",
     .accepts = {EM_ACTIVATION_STATS_TYPE},
     .is_list = true,
     .optional = true},
    {.option = "verdict", .accepts = {"verdict"}, .optional = true},
    {0},
};

const em_stage_kind em_stage_kind_report = {
    .name = "report",
    .summary = "write metrics as a table, results.json, history, HTML; push to a Pushgateway or "
               "webhook",
    .produces = "report",
    .inputs = report_inputs,
    .collective = false,
    .writes_results = true,
    .init = report_init,
    .run = report_run,
    .destroy = report_destroy,
};
