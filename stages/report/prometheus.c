/* Prometheus text format and Pushgateway grouping URLs (see prometheus.h). */
#include "stages/report/prometheus.h"

#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "util/error.h"
#include "stages/metrics/metric_table.h"
#include "stages/report/base64.h"
#include "stages/report/results.h"
#include "stages/report/strbuf.h"

static char *sanitize(const char *s, bool allow_colon) {
    size_t n = strlen(s);
    char *out = em_xmalloc(n + 2);
    size_t o = 0;
    if (n == 0 || isdigit((unsigned char)s[0])) out[o++] = '_';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        bool ok = (c < 128 && isalnum(c)) || c == '_' || (allow_colon && c == ':');
        out[o++] = ok ? (char)c : '_';
    }
    out[o] = 0;
    return out;
}

char *em_prometheus_metric_name(const char *s) {
    return sanitize(s, true);
}

char *em_prometheus_label_name(const char *s) {
    char *name = sanitize(s, false);
    if (name[0] == '_' && name[1] == '_') { /* "__" is reserved for Prometheus itself */
        char *fixed = em_xasprintf("x%s", name);
        free(name);
        return fixed;
    }
    return name;
}

/* A sample value as the format spells it: the fewest digits that read back as exactly that
 * number, NaN and +Inf/-Inf. */
static void add_value(em_strbuf *b, double v) {
    if (isnan(v))
        em_strbuf_add(b, "NaN");
    else if (isinf(v))
        em_strbuf_add(b, v > 0 ? "+Inf" : "-Inf");
    else {
        char text[32];
        for (int digits = 15; digits <= 17; digits++) {
            snprintf(text, sizeof text, "%.*g", digits, v);
            if (strtod(text, NULL) == v) break;
        }
        em_strbuf_add(b, text);
    }
}

/* A label value (in_quotes) or help text: backslash and newline escaped, and in a label value
 * the double quote too. */
static void add_escaped(em_strbuf *b, const char *s, bool in_quotes) {
    for (; *s; s++) {
        if (*s == '\\')
            em_strbuf_add(b, "\\\\");
        else if (*s == '"' && in_quotes)
            em_strbuf_add(b, "\\\"");
        else if (*s == '\n')
            em_strbuf_add(b, "\\n");
        else
            em_strbuf_addn(b, s, 1);
    }
}

/* Labels evalmesh sets inside series, and those the Pushgateway sets itself. */
static const char *const reserved_labels[] = {
    "model", "model_digest", "model_sha256", "dataset", "commit", "stage",   "rank",
    "gate",  "metric",       "comparison",   "rule",    "job",    "instance"};

bool em_prometheus_reserved_label(const char *name) {
    for (size_t i = 0; i < sizeof reserved_labels / sizeof *reserved_labels; i++)
        if (strcmp(name, reserved_labels[i]) == 0) return true;
    return false;
}

/* name="value" appended to a label list (after a comma unless it is the first). */
static void add_label(em_strbuf *b, const char *name, const char *value) {
    if (b->len) em_strbuf_add(b, ",");
    em_strbuf_printf(b, "%s=\"", name);
    add_escaped(b, value, true);
    em_strbuf_add(b, "\"");
}

/* One sample: its family name (sanitized), the family's help text, its own labels as written,
 * and its value. */
typedef struct sample {
    char *family;
    char *help;
    char *labels;
    double value;
} sample;

typedef struct samples {
    sample *items;
    size_t count, cap;
    const cJSON *doc;
} samples;

/* Adds a sample; takes the labels string. */
static void add_sample(samples *s, const char *family, const char *help, char *labels,
                       double value) {
    if (s->count == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 32;
        s->items = em_xrealloc(s->items, s->cap * sizeof *s->items);
    }
    s->items[s->count++] =
        (sample){em_prometheus_metric_name(family), em_xstrdup(help), labels, value};
}

static char *one_label(const char *name, const char *value) {
    em_strbuf b = {0};
    add_label(&b, name, value);
    return em_strbuf_take(&b);
}

/* Whether the metric of key holds the standard error of another metric of its stage (its row in
 * the metric table names it) that the document has with its error, pushed as that one's
 * _stderr. */
static bool pushed_as_stderr(const cJSON *doc, const char *key) {
    const char *dot = strchr(key, '.');
    const em_metric_def *of = dot ? em_metric_def_error_of(dot + 1) : NULL;
    if (!of) return false;
    char *base = em_xasprintf("%.*s.%s", (int)(dot - key), key, of->name);
    bool has_error = false;
    bool found = em_results_metric(doc, base, NULL, NULL, &has_error);
    free(base);
    return found && has_error;
}

/* evalmesh_<metric>{stage} and evalmesh_<metric>_stderr{stage} of one metric of the document. */
static void metric_samples(const char *key, double value, const double *error, bool timing,
                           void *user) {
    samples *s = user;
    if (pushed_as_stderr(s->doc, key)) return;
    const char *dot = strchr(key, '.');
    char *stage = dot ? strndup(key, (size_t)(dot - key)) : em_xstrdup("run");
    if (!stage) stage = em_xstrdup("run");
    char *family = em_xasprintf("evalmesh_%s", dot ? dot + 1 : key);
    const char *name = dot ? dot + 1 : key;
    char *help = em_xasprintf("evalmesh metric %s of each stage (results.json "
                              "metrics.<stage>.%s.value)",
                              name, name);
    add_sample(s, family, help, one_label("stage", stage), value);
    free(help);
    if (error) {
        char *err_family = em_xasprintf("%s_stderr", family);
        help = em_xasprintf("standard error of evalmesh metric %s (results.json "
                            "metrics.<stage>.%s.error)",
                            name, name);
        add_sample(s, err_family, help, one_label("stage", stage), *error);
        free(help);
        free(err_family);
    }
    free(family);
    free(stage);
}

static const char *string_at(const cJSON *obj, const char *key) {
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(obj, key));
}

/* A number of obj: true with *v when it is a number or null (NaN); false when absent. */
static bool number_at(const cJSON *obj, const char *key, bool null_ok, double *v) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (cJSON_IsNumber(it)) {
        *v = it->valuedouble;
        return true;
    }
    *v = NAN;
    return null_ok && cJSON_IsNull(it);
}

/* The quantities of a gate check, each its own gauge. */
static const struct {
    const char *key;    /* in the check's object */
    const char *family; /* the gauge */
    const char *help;
} check_quantities[] = {
    {"value", "evalmesh_gate_check_value", "the candidate's value of the checked metric"},
    {"baseline", "evalmesh_gate_check_baseline", "the baseline's value of the checked metric"},
    {"threshold", "evalmesh_gate_check_threshold",
     "the check's threshold as written in the recipe"},
    {"bound", "evalmesh_gate_check_bound",
     "the bound the value or difference was compared against"},
    {"difference", "evalmesh_gate_check_difference", "value minus baseline"},
    {"difference_error", "evalmesh_gate_check_difference_stderr",
     "standard error of the difference (paired: of the per-token differences)"},
};

/* evalmesh_gate_passed and the per-check gauges of the document's `gate` section. */
static void gate_samples(samples *s, const cJSON *gate) {
    const char *name = string_at(gate, "stage");
    if (!name) name = "gate";
    bool passed = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(gate, "passed"));
    add_sample(s, "evalmesh_gate_passed", "1 when every check of the gate passed, else 0",
               one_label("gate", name), passed ? 1 : 0);
    const cJSON *check;
    cJSON_ArrayForEach(check, cJSON_GetObjectItemCaseSensitive(gate, "checks")) {
        em_strbuf lb = {0};
        add_label(&lb, "gate", name);
        const char *parts[] = {"metric", "rule", "comparison"};
        for (size_t i = 0; i < 3; i++) {
            const char *v = string_at(check, parts[i]);
            if (v) add_label(&lb, parts[i], v);
        }
        char *labels = em_strbuf_take(&lb);
        for (size_t q = 0; q < sizeof check_quantities / sizeof *check_quantities; q++) {
            double v;
            if (number_at(check, check_quantities[q].key, false, &v))
                add_sample(s, check_quantities[q].family, check_quantities[q].help,
                           em_xstrdup(labels), v);
        }
        const cJSON *ok = cJSON_GetObjectItemCaseSensitive(check, "passed");
        if (cJSON_IsBool(ok))
            add_sample(s, "evalmesh_gate_check_passed", "1 when the check passed, else 0",
                       em_xstrdup(labels), cJSON_IsTrue(ok));
        free(labels);
    }
}

/* "2026-12-02T13:50:50Z" as seconds since the epoch; false when it is not that form. */
static bool parse_time(const char *text, double *out) {
    struct tm tm = {0};
    char z = 0;
    if (!text ||
        sscanf(text, "%4d-%2d-%2dT%2d:%2d:%2d%c", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
               &tm.tm_min, &tm.tm_sec, &z) != 7 ||
        z != 'Z')
        return false;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    *out = (double)timegm(&tm);
    return true;
}

/* The provenance labels every series carries, as written after a series' own labels. */
static char *run_labels(const cJSON *doc) {
    const struct {
        const char *label, *object, *key;
    } from[] = {{"model", "model", "path"},
                {"model_digest", "model", "digest"},
                {"model_sha256", "model", "header_sha256"},
                {"dataset", "dataset", "path"},
                {"commit", "evalmesh", "commit"}};
    em_strbuf b = {0};
    for (size_t i = 0; i < sizeof from / sizeof *from; i++) {
        const char *v =
            string_at(cJSON_GetObjectItemCaseSensitive(doc, from[i].object), from[i].key);
        if (v) add_label(&b, from[i].label, v);
    }
    return em_strbuf_take(&b);
}

char *em_prometheus_text(const cJSON *doc) {
    samples s = {.doc = doc};
    em_results_each_metric(doc, metric_samples, &s);
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(doc, "ranks")) {
        double rank, tps;
        if (!number_at(r, "rank", false, &rank)) continue;
        number_at(r, "tokens_per_second", true, &tps);
        char text[32];
        snprintf(text, sizeof text, "%.0f", rank);
        add_sample(&s, "evalmesh_rank_tokens_per_second", "tokens per second of each rank",
                   one_label("rank", text), tps);
    }
    const cJSON *gate = cJSON_GetObjectItemCaseSensitive(doc, "gate");
    if (cJSON_IsObject(gate)) gate_samples(&s, gate);
    double end;
    bool succeeded =
        !cJSON_IsObject(gate) || cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(gate, "passed"));
    if (succeeded && parse_time(string_at(doc, "end_time"), &end))
        add_sample(&s, "evalmesh_last_success_timestamp_seconds",
                   "end of this run, whose gate passed (or which had no gate), in seconds since "
                   "the epoch",
                   em_xstrdup(""), end);

    /* Families in order of first appearance, each with all its samples under one TYPE line. */
    char *common = run_labels(doc);
    em_strbuf b = {0};
    bool *done = em_xcalloc(s.count ? s.count : 1, sizeof *done);
    for (size_t i = 0; i < s.count; i++) {
        if (done[i]) continue;
        em_strbuf_printf(&b, "# HELP %s ", s.items[i].family);
        add_escaped(&b, s.items[i].help, false);
        em_strbuf_printf(&b, "\n# TYPE %s gauge\n", s.items[i].family);
        for (size_t j = i; j < s.count; j++) {
            if (done[j] || strcmp(s.items[j].family, s.items[i].family) != 0) continue;
            done[j] = true;
            const char *own = s.items[j].labels;
            em_strbuf_add(&b, s.items[j].family);
            if (own[0] || common[0])
                em_strbuf_printf(&b, "{%s%s%s}", own, own[0] && common[0] ? "," : "", common);
            em_strbuf_add(&b, " ");
            add_value(&b, s.items[j].value);
            em_strbuf_add(&b, "\n");
        }
    }
    for (size_t i = 0; i < s.count; i++) {
        free(s.items[i].family);
        free(s.items[i].labels);
        free(s.items[i].help);
    }
    free(s.items);
    free(done);
    free(common);
    return em_strbuf_take(&b);
}

/* "/<name>/<value>" or "/<name>@base64/<value in url-safe base64>". */
static void add_group_part(em_strbuf *b, const char *name, const char *value) {
    char *label = em_prometheus_label_name(name);
    if (value[0] == 0 || strchr(value, '/')) {
        char *enc = em_base64_encode(value, strlen(value), true);
        em_strbuf_printf(b, "/%s@base64/%s", label, enc[0] ? enc : "=");
        free(enc);
    } else {
        char *esc = curl_easy_escape(NULL, value, (int)strlen(value));
        em_strbuf_printf(b, "/%s/%s", label, esc);
        curl_free(esc);
    }
    free(label);
}

char *em_prometheus_group_url(const char *base_url, const char *job, const em_prom_label *labels,
                              size_t count) {
    em_strbuf b = {0};
    size_t n = strlen(base_url);
    while (n > 0 && base_url[n - 1] == '/') n--;
    em_strbuf_addn(&b, base_url, n);
    em_strbuf_add(&b, "/metrics");
    add_group_part(&b, "job", job);
    for (size_t i = 0; i < count; i++)
        if (labels[i].value) add_group_part(&b, labels[i].name, labels[i].value);
    return em_strbuf_take(&b);
}
