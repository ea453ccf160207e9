/* Prometheus text format and Pushgateway grouping URLs (see prometheus.h). */
#include "stages/report/prometheus.h"

#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "util/error.h"
#include "stages/report/base64.h"
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

/* A sample value as the format spells it: full precision, NaN and +Inf/-Inf. */
static void add_value(em_strbuf *b, double v) {
    if (isnan(v))
        em_strbuf_add(b, "NaN");
    else if (isinf(v))
        em_strbuf_add(b, v > 0 ? "+Inf" : "-Inf");
    else
        em_strbuf_printf(b, "%.17g", v);
}

/* A label value inside double quotes: backslash, quote and newline escaped. */
static void add_label_value(em_strbuf *b, const char *s) {
    for (; *s; s++) {
        if (*s == '\\')
            em_strbuf_add(b, "\\\\");
        else if (*s == '"')
            em_strbuf_add(b, "\\\"");
        else if (*s == '\n')
            em_strbuf_add(b, "\\n");
        else
            em_strbuf_addn(b, s, 1);
    }
}

/* One sample: its family name, one label and a value. */
typedef struct sample {
    char *family;
    const char *label;
    char *label_value;
    double value;
} sample;

char *em_prometheus_text(const em_metrics *m) {
    size_t cap = 2 * m->count + (size_t)(m->ranks ? m->world_size : 0);
    sample *samples = em_xcalloc(cap ? cap : 1, sizeof *samples);
    size_t n = 0;
    for (size_t i = 0; i < m->count; i++) {
        const em_metric *it = &m->items[i];
        const char *dot = strchr(it->key, '.');
        char *metric = em_xasprintf("evalmesh_%s", dot ? dot + 1 : it->key);
        char *stage = dot ? strndup(it->key, (size_t)(dot - it->key)) : em_xstrdup("run");
        if (!stage) stage = em_xstrdup("run");
        samples[n++] = (sample){em_prometheus_metric_name(metric), "stage", stage, it->value};
        if (it->has_error) {
            char *err_name = em_xasprintf("%s_stderr", metric);
            samples[n++] = (sample){em_prometheus_metric_name(err_name), "stage", em_xstrdup(stage),
                                    it->error};
            free(err_name);
        }
        free(metric);
    }
    for (int r = 0; m->ranks && r < m->world_size; r++) {
        const em_rank_timing *rt = &m->ranks[r];
        double tps = rt->seconds > 0 ? (double)rt->tokens / rt->seconds : NAN;
        samples[n++] = (sample){em_xstrdup("evalmesh_rank_tokens_per_second"), "rank",
                                em_xasprintf("%d", rt->rank), tps};
    }

    /* Families in order of first appearance, each with all its samples under one TYPE line. */
    em_strbuf b = {0};
    bool *done = em_xcalloc(n ? n : 1, sizeof *done);
    for (size_t i = 0; i < n; i++) {
        if (done[i]) continue;
        em_strbuf_printf(&b, "# TYPE %s gauge\n", samples[i].family);
        for (size_t j = i; j < n; j++) {
            if (done[j] || strcmp(samples[j].family, samples[i].family) != 0) continue;
            done[j] = true;
            em_strbuf_printf(&b, "%s{%s=\"", samples[j].family, samples[j].label);
            add_label_value(&b, samples[j].label_value);
            em_strbuf_add(&b, "\"} ");
            add_value(&b, samples[j].value);
            em_strbuf_add(&b, "\n");
        }
    }
    for (size_t i = 0; i < n; i++) {
        free(samples[i].family);
        free(samples[i].label_value);
    }
    free(samples);
    free(done);
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
