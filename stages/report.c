/* Stage `report`: turns the metrics of an aggregate stage into what people and monitoring read.
 * `outputs` lists any of
 *   table        the metrics table on rank 0's stdout
 *   json         the results document (default <run_dir>/results.json)
 *   history      one line appended to a JSON Lines file shared by a series of runs
 *   html         a self-contained HTML page with inline SVG charts (default <run_dir>/report.html)
 *   pushgateway  a Prometheus Pushgateway PUT of every metric
 *   webhook      a POST of the results document
 * Only rank 0 writes and sends. Local files are written first, pushes last; a push that fails
 * after its retries is spooled in <run_dir>/push-spool/ for `evalmesh push RUN_DIR`, and fails
 * the run (exit 4) only when the output says `required: true` (otherwise it is a warning).
 * Relative json/html paths are inside the run directory; relative history paths (and an html
 * output's `history`) are relative to the recipe file's folder, like model and dataset paths.
 * Produces an em_report_artifact (stages/report/report_artifact.h). */
#include <errno.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "build_info.h"
#include "runner/recipe/schema.h"
#include "runner/stage.h"
#include "stages/report.h"
#include "util/atomic_file.h"
#include "util/log.h"
#include "util/redact.h"
#include "util/sha256.h"
#include "stages/metrics/metrics.h"
#include "stages/quant/activation_stats.h"
#include "stages/report/history.h"
#include "stages/report/html.h"
#include "stages/report/prometheus.h"
#include "stages/report/push.h"
#include "stages/report/report_artifact.h"
#include "stages/report/results.h"
#include "stages/report/spool.h"
#include "stages/report/table.h"
#include "stages/report/textfile.h"
#include "stages/report/writable.h"

typedef enum out_type { TABLE, JSON, HISTORY, HTML, PUSHGATEWAY, WEBHOOK, OUT_TYPES } out_type;
static const char *const type_names[OUT_TYPES] = {"table", "json",        "history",
                                                  "html",  "pushgateway", "webhook"};

typedef struct output {
    out_type type;
    em_mark mark;
    char *path;            /* json, history, html: as written in the recipe */
    char *chart_history;   /* html: history file for the line chart, or NULL */
    char *chart_metric;    /* html: metric of the line chart, or NULL */
    em_push_request req;   /* pushgateway, webhook (for pushgateway, url is the base URL) */
    char *job;             /* pushgateway */
    const em_node *labels; /* pushgateway: extra grouping labels (in the options) */
    bool required;
} output;

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
    bool in_run_dir = o->type != HISTORY;
    if (in_run_dir && o->path[0] != '/' && !run_dir) return NULL;
    char *full = in_run_dir ? em_textfile_join(run_dir, o->path) : em_xstrdup(o->path);
    const char *why = NULL;
    em_status err = NULL;
    if (!em_path_writable(full, &why))
        err = bad_option(self, o->mark, "cannot write %s output '%s': %s", type_names[o->type],
                         full, why);
    free(full);
    return err;
}

/* Reads the push options shared by pushgateway and webhook. */
static em_status parse_push(const em_stage *self, const em_node *item, output *o,
                            const em_run_context *ctx) {
    em_push_request *r = &o->req;
    r->target = em_xstrdup(type_names[o->type]);
    r->url = opt_dup(item, "url");
    if (!r->url) return bad_option(self, item->mark, "%s output needs `url`", r->target);
    em_status err = em_push_check_url(r->url);
    if (err) {
        return em_error_prefix_at(err, em_node_get(item, "url")->mark, "stage '%s'", self->name);
    }
    r->method = em_xstrdup(o->type == PUSHGATEWAY ? "PUT" : "POST");
    r->content_type =
        em_xstrdup(o->type == PUSHGATEWAY ? "text/plain; version=0.0.4" : "application/json");
    r->verify_tls = em_node_get_bool(item, "verify_tls", true);
    const em_node *ca = em_node_get(item, "ca_path");
    r->ca_path = ca ? em_node_path(ca) : NULL;
    if (r->ca_path && access(r->ca_path, R_OK) != 0)
        return bad_option(self, em_node_get(item, "ca_path")->mark, "ca_path '%s': %s", r->ca_path,
                          strerror(errno));
    r->timeout_s = em_node_get_double(item, "timeout_s", 10);
    r->retries = (int)em_node_get_int(item, "retries", 3);
    r->backoff_s = em_node_get_double(item, "backoff_s", 1);
    o->required = em_node_get_bool(item, "required", false);
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
    if (o->type == PUSHGATEWAY) {
        o->job = em_xstrdup(
            em_node_get_string(item, "job", ctx->recipe_name ? ctx->recipe_name : "evalmesh"));
        o->labels = em_node_get(item, "labels");
    }
    return NULL;
}

static em_status parse_output(const em_stage *self, const em_node *item, output *o,
                              const em_run_context *ctx) {
    const char *type = NULL;
    const em_node *type_node = item;
    if (item->kind == EM_NODE_MAP) type_node = em_node_get(item, "type");
    if (!type_node || type_node->kind != EM_NODE_SCALAR)
        return bad_option(self, item->mark,
                          "an output is a type name or a map with `type` (table, json, "
                          "history, html, pushgateway or webhook)");
    type = type_node->text;
    o->mark = type_node->mark;
    int found = -1;
    for (int t = 0; t < OUT_TYPES; t++)
        if (strcmp(type, type_names[t]) == 0) found = t;
    if (found < 0) {
        const char *near = em_did_you_mean(type, type_names, OUT_TYPES);
        char *hint = near ? em_xasprintf(" (did you mean '%s'?)", near)
                          : em_xstrdup(" (one of table, json, history, html, pushgateway, "
                                       "webhook)");
        em_status err = bad_option(self, type_node->mark, "unknown output type '%s'%s", type, hint);
        free(hint);
        return err;
    }
    o->type = (out_type)found;
    const em_node *map = item->kind == EM_NODE_MAP ? item : NULL;
    switch (o->type) {
    case TABLE:
        return NULL;
    case JSON:
        o->path = em_xstrdup(em_node_get_string(map, "path", "results.json"));
        break;
    case HTML:
        o->path = em_xstrdup(em_node_get_string(map, "path", "report.html"));
        if (em_node_get(map, "history"))
            o->chart_history = em_node_path(em_node_get(map, "history"));
        o->chart_metric = opt_dup(map, "metric");
        break;
    case HISTORY:
        if (!em_node_get_string(map, "path", NULL))
            return bad_option(self, item->mark, "history output needs `path`");
        o->path = em_node_path(em_node_get(map, "path"));
        break;
    case PUSHGATEWAY:
    case WEBHOOK:
        return parse_push(self, map ? map : item, o, ctx);
    case OUT_TYPES:
        break;
    }
    return check_path(self, o, ctx->run_dir);
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
    if (!outs || outs->kind != EM_NODE_SEQ || outs->count == 0)
        return bad_option(self, outs ? outs->mark : self->mark,
                          "`outputs` must list at least one of table, json, history, html, "
                          "pushgateway, webhook");
    st->outs = em_xcalloc(outs->count, sizeof *st->outs);
    for (size_t i = 0; i < outs->count; i++) {
        st->count++;
        em_status err = parse_output(self, outs->items[i], &st->outs[i], ctx);
        if (err) return err;
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

static const char *base_name(const char *path, char *buf, size_t size) {
    if (!path) return NULL;
    const char *slash = strrchr(path, '/');
    snprintf(buf, size, "%s", slash ? slash + 1 : path);
    return buf;
}

/* The Pushgateway grouping of this run: model, dataset, recipe, commit and the recipe's extra
 * labels (which may replace those four); the job comes first in the URL. model and dataset are
 * buffers of 256 bytes the labels point into. */
static em_prom_label *group_labels(const output *o, const em_metrics *m, const em_run_context *ctx,
                                   char *model, char *dataset, size_t *count) {
    size_t extra = o->labels && o->labels->kind == EM_NODE_MAP ? o->labels->count : 0;
    em_prom_label *labels = em_xcalloc(4 + extra, sizeof *labels);
    labels[0] = (em_prom_label){"model", base_name(m->model_path, model, 256)};
    labels[1] = (em_prom_label){"dataset", base_name(m->dataset_path, dataset, 256)};
    labels[2] = (em_prom_label){"recipe", ctx->recipe_name};
    labels[3] = (em_prom_label){"commit", EVALMESH_GIT_COMMIT};
    size_t n = 4;
    for (size_t i = 0; i < extra; i++) {
        const em_map_entry *e = &o->labels->entries[i];
        const char *value = em_node_get_string(o->labels, e->key, "");
        size_t j = 0;
        while (j < n && strcmp(labels[j].name, e->key) != 0) j++;
        labels[j] = (em_prom_label){e->key, value};
        if (j == n) n++;
    }
    /* A label without a value (no model path, no recipe name) is left out. */
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (labels[i].value) labels[kept++] = labels[i];
    *count = kept;
    return labels;
}

/* Sends one push; on failure spools it (without URL or credential: see spool.h) and returns the
 * error. */
static em_status push(const em_stage *self, size_t index, output *o, const em_metrics *m,
                      const cJSON *results, const em_run_context *ctx) {
    em_push_request req = o->req;
    em_spool_entry entry = {.stage = self->name, .output = (int)index, .target = req.target};
    char model[256], dataset[256];
    em_prom_label *labels = NULL;
    char *body;
    if (o->type == PUSHGATEWAY) {
        labels = group_labels(o, m, ctx, model, dataset, &entry.label_count);
        req.url = em_prometheus_group_url(o->req.url, o->job, labels, entry.label_count);
        entry.job = o->job;
        entry.labels = labels;
        body = em_prometheus_text(m);
    } else {
        req.url = em_xstrdup(o->req.url);
        body = em_results_print(results, true);
    }
    entry.body = body;
    em_status err = em_push_send(&req, body, strlen(body));
    if (err && ctx->run_dir) {
        char *spooled = NULL;
        em_status serr = em_spool_write(ctx->run_dir, &entry, &spooled);
        if (serr) {
            em_log_error("stage '%s': could not spool the failed push: %s", self->name,
                         serr->message);
            em_error_free(serr);
        } else {
            em_status spooled_err =
                em_error_new(err->exit_code, "%s; spooled in %s (resend with `evalmesh push %s`)",
                             err->message, spooled, ctx->run_dir);
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
    em_stage self = {.name = stage};
    output o = {.type = strcmp(target, "pushgateway") == 0 ? PUSHGATEWAY : WEBHOOK};
    em_run_context ctx = {.recipe_name = em_node_get_string(recipe, "name", NULL)};
    em_status err = parse_push(&self, item, &o, &ctx);
    *out = o.req;
    free(o.job);
    if (err) em_push_request_free_fields(out);
    return err;
}

/* Writes one local output (table, json, history, html). */
static em_status write_local(output *o, const em_metrics *m, const cJSON *results,
                             const em_run_context *ctx, em_report_artifact *art,
                             const char *history_path) {
    if (o->type == TABLE) {
        char *table = em_report_table(m);
        em_log_summary("%s", table);
        free(table);
        return NULL;
    }
    char *path = o->type == HISTORY ? em_xstrdup(o->path) : em_textfile_join(ctx->run_dir, o->path);
    em_status err = NULL;
    if (o->type == JSON) {
        char *text = em_results_print(results, true);
        char *dir = em_xstrdup(path);
        err = em_textfile_mkdirs(dirname(dir));
        free(dir);
        if (!err) err = em_atomic_write(path, text, strlen(text), 0644);
        free(text);
        if (!art->results_path) art->results_path = em_xstrdup(path);
    } else if (o->type == HISTORY) {
        err = em_history_append(path, results);
        if (!art->history_path) art->history_path = em_xstrdup(path);
    } else if (o->type == HTML) {
        em_history history = {0};
        const char *chart = o->chart_history ? o->chart_history : history_path;
        if (chart) err = em_history_load(chart, true, &history);
        if (!err) {
            em_html_input in = {results, m->window_nll, m->window_count, chart ? &history : NULL,
                                o->chart_metric};
            char *page = em_html_report(&in);
            err = em_atomic_write(path, page, strlen(page), 0644);
            free(page);
        }
        em_history_free(&history);
        if (!art->html_path) art->html_path = em_xstrdup(path);
    }
    if (!err) em_log_info("%s written to %s", type_names[o->type], path);
    free(path);
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

    /* Local outputs first (every one is attempted; the first error is returned at the end). */
    em_status first = NULL;
    const char *history_path = NULL;
    for (size_t i = 0; i < st->count; i++)
        if (st->outs[i].type == HISTORY && !history_path) history_path = st->outs[i].path;
    for (size_t i = 0; i < st->count; i++) {
        output *o = &st->outs[i];
        if (o->type == PUSHGATEWAY || o->type == WEBHOOK) continue;
        em_status err = write_local(o, m, results, ctx, art, history_path);
        if (err && !first) {
            first = err;
        } else if (err) {
            em_log_error("%s", err->message);
            em_error_free(err);
        }
    }
    for (size_t i = 0; i < st->count; i++) {
        output *o = &st->outs[i];
        if (o->type != PUSHGATEWAY && o->type != WEBHOOK) continue;
        em_status err = push(self, i, o, m, results, ctx);
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
    return first;
}

static const em_input_spec report_inputs[] = {
    {.option = "metrics", .accepts = {"metrics"}},
    {.option = "calibrations",
     .accepts = {EM_ACTIVATION_STATS_TYPE},
     .is_list = true,
     .optional = true},
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
