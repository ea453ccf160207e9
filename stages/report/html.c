/* The self-contained HTML report with inline SVG charts (see html.h). */
#include "stages/report/html.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "stages/report/results.h"
#include "stages/report/strbuf.h"

/* Chart geometry: a W x H canvas, the plot inside margins (left room for axis labels). */
enum { W = 640, H = 260, LEFT = 70, RIGHT = 20, TOP = 20, BOTTOM = 40 };

static void add_escaped(em_strbuf *b, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '<':
            em_strbuf_add(b, "&lt;");
            break;
        case '>':
            em_strbuf_add(b, "&gt;");
            break;
        case '&':
            em_strbuf_add(b, "&amp;");
            break;
        case '"':
            em_strbuf_add(b, "&quot;");
            break;
        default:
            em_strbuf_addn(b, s, 1);
        }
    }
}

static const char *str_at(const cJSON *doc, const char *obj, const char *key) {
    const char *s = cJSON_GetStringValue(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, obj), key));
    return s ? s : "—";
}

static void chart_open(em_strbuf *b, const char *id, const char *title) {
    em_strbuf_printf(b,
                     "<h2>%s</h2>\n<svg class=\"chart\" id=\"%s\" width=\"%d\" height=\"%d\" "
                     "viewBox=\"0 0 %d %d\" xmlns=\"http://www.w3.org/2000/svg\">\n",
                     title, id, W, H, W, H);
    em_strbuf_printf(b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" class=\"axis\"/>\n", LEFT,
                     H - BOTTOM, W - RIGHT, H - BOTTOM);
    em_strbuf_printf(b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" class=\"axis\"/>\n", LEFT,
                     TOP, LEFT, H - BOTTOM);
}

/* Labels of the y axis at the bottom (lo) and top (hi) of the plot. */
static void y_labels(em_strbuf *b, double lo, double hi) {
    em_strbuf_printf(b, "<text x=\"%d\" y=\"%d\" class=\"ylab\">%.4g</text>\n", LEFT - 6,
                     H - BOTTOM, lo);
    em_strbuf_printf(b, "<text x=\"%d\" y=\"%d\" class=\"ylab\">%.4g</text>\n", LEFT - 6, TOP + 4,
                     hi);
}

static void no_data(em_strbuf *b) {
    em_strbuf_printf(b, "<text x=\"%d\" y=\"%d\" class=\"empty\">no data</text>\n", W / 2, H / 2);
}

/* Bars of tokens per second, one per rank. */
static void throughput_chart(em_strbuf *b, const cJSON *results) {
    chart_open(b, "throughput", "Throughput per rank (tokens/s)");
    const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(results, "ranks");
    int n = cJSON_GetArraySize(ranks);
    double hi = 0;
    const cJSON *r;
    cJSON_ArrayForEach(r, ranks) {
        double v = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(r, "tokens_per_second"));
        if (isfinite(v) && v > hi) hi = v;
    }
    if (n == 0 || hi <= 0) {
        no_data(b);
    } else {
        double slot = (double)(W - LEFT - RIGHT) / n, plot_h = H - TOP - BOTTOM;
        int i = 0;
        cJSON_ArrayForEach(r, ranks) {
            double v =
                cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(r, "tokens_per_second"));
            double h = isfinite(v) ? v / hi * plot_h : 0;
            int rank = (int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(r, "rank"));
            em_strbuf_printf(b,
                             "<rect class=\"bar\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                             "height=\"%.1f\"><title>rank %d: %.6g tokens/s</title></rect>\n",
                             LEFT + i * slot + slot * 0.1, H - BOTTOM - h, slot * 0.8, h, rank, v);
            if (n <= 64)
                em_strbuf_printf(b, "<text x=\"%.1f\" y=\"%d\" class=\"xlab\">%d</text>\n",
                                 LEFT + (i + 0.5) * slot, H - BOTTOM + 16, rank);
            i++;
        }
        y_labels(b, 0, hi);
    }
    em_strbuf_printf(b, "<text x=\"%d\" y=\"%d\" class=\"xtitle\">rank</text>\n</svg>\n",
                     (W + LEFT) / 2, H - 6);
}

/* Histogram of the per-window mean NLL: about sqrt(n) bins, at most 40. */
static void nll_chart(em_strbuf *b, const double *nll, size_t n) {
    chart_open(b, "nll", "Per-window mean NLL (nats/token)");
    double lo = INFINITY, hi = -INFINITY;
    size_t finite = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(nll[i])) continue;
        finite++;
        if (nll[i] < lo) lo = nll[i];
        if (nll[i] > hi) hi = nll[i];
    }
    if (finite == 0) {
        no_data(b);
        em_strbuf_add(b, "</svg>\n");
        return;
    }
    int bins = (int)ceil(sqrt((double)finite));
    if (bins > 40) bins = 40;
    if (hi == lo) bins = 1;
    size_t *counts = em_xcalloc((size_t)bins, sizeof *counts), top = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(nll[i])) continue;
        int k = hi > lo ? (int)((nll[i] - lo) / (hi - lo) * bins) : 0;
        if (k >= bins) k = bins - 1;
        if (++counts[k] > top) top = counts[k];
    }
    double slot = (double)(W - LEFT - RIGHT) / bins, plot_h = H - TOP - BOTTOM;
    double width = hi > lo ? (hi - lo) / bins : 0;
    for (int k = 0; k < bins; k++) {
        double h = (double)counts[k] / (double)top * plot_h;
        em_strbuf_printf(b,
                         "<rect class=\"bin\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                         "height=\"%.1f\"><title>[%.4g, %.4g): %zu windows</title></rect>\n",
                         LEFT + k * slot, H - BOTTOM - h, slot, h, lo + k * width,
                         lo + (k + 1) * width, counts[k]);
    }
    free(counts);
    y_labels(b, 0, (double)top);
    em_strbuf_printf(b, "<text x=\"%d\" y=\"%d\" class=\"xlab\">%.4g</text>\n", LEFT,
                     H - BOTTOM + 16, lo);
    em_strbuf_printf(b, "<text x=\"%d\" y=\"%d\" class=\"xlab\">%.4g</text>\n", W - RIGHT,
                     H - BOTTOM + 16, hi);
    em_strbuf_printf(b, "<text x=\"%d\" y=\"%d\" class=\"xtitle\">%zu windows</text>\n</svg>\n",
                     (W + LEFT) / 2, H - 6, finite);
}

/* First metric key of a results document that is not a timing one. */
static void first_exact(const char *key, double value, const double *error, bool timing,
                        void *user) {
    char **out = user;
    if (!*out && !timing) *out = em_xstrdup(key);
}

/* A line through the metric's value in each history entry that has it. */
static void history_chart(em_strbuf *b, const em_history *h, const char *key) {
    char *title = em_xasprintf("History of %s", key);
    em_strbuf tb = {0};
    add_escaped(&tb, title);
    free(title);
    title = em_strbuf_take(&tb);
    chart_open(b, "history", title);
    free(title);
    double *v = em_xcalloc(h->count ? h->count : 1, sizeof *v);
    size_t n = 0;
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < h->count; i++) {
        double x;
        if (!em_results_metric(h->entries[i], key, &x, NULL, NULL) || !isfinite(x)) continue;
        v[n++] = x;
        if (x < lo) lo = x;
        if (x > hi) hi = x;
    }
    if (n == 0) {
        no_data(b);
    } else {
        if (hi == lo) { /* a flat series: give the axis some height */
            lo -= fabs(lo) * 0.01 + 1e-9;
            hi += fabs(hi) * 0.01 + 1e-9;
        }
        double plot_w = W - LEFT - RIGHT, plot_h = H - TOP - BOTTOM;
        em_strbuf_add(b, "<polyline class=\"line\" points=\"");
        for (size_t i = 0; i < n; i++) {
            double x = LEFT + (n > 1 ? plot_w * (double)i / (double)(n - 1) : plot_w / 2);
            double y = H - BOTTOM - (v[i] - lo) / (hi - lo) * plot_h;
            em_strbuf_printf(b, "%s%.1f,%.1f", i ? " " : "", x, y);
        }
        em_strbuf_add(b, "\"/>\n");
        for (size_t i = 0; i < n; i++) {
            double x = LEFT + (n > 1 ? plot_w * (double)i / (double)(n - 1) : plot_w / 2);
            double y = H - BOTTOM - (v[i] - lo) / (hi - lo) * plot_h;
            em_strbuf_printf(b,
                             "<circle class=\"point\" cx=\"%.1f\" cy=\"%.1f\" r=\"3\"><title>run "
                             "%zu: %.8g</title></circle>\n",
                             x, y, i + 1, v[i]);
        }
        y_labels(b, lo, hi);
    }
    free(v);
    em_strbuf_printf(b, "<text x=\"%d\" y=\"%d\" class=\"xtitle\">run</text>\n</svg>\n",
                     (W + LEFT) / 2, H - 6);
}

/* One row of the metrics table. */
static void metric_row(const char *key, double value, const double *error, bool timing,
                       void *user) {
    em_strbuf *b = user;
    em_strbuf_add(b, "<tr><td>");
    add_escaped(b, key);
    em_strbuf_printf(b, "</td><td class=\"num\">%.8g</td><td class=\"num\">", value);
    if (error) em_strbuf_printf(b, "± %.3g", *error);
    em_strbuf_printf(b, "</td><td>%s</td></tr>\n", timing ? "timing" : "");
}

static const char *style =
    "body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:720px}"
    "table{border-collapse:collapse;margin:1em 0}th{white-space:nowrap}td{overflow-wrap:anywhere}"
    "td,th{padding:2px 10px;"
    "border-bottom:1px solid "
    "#ddd;text-align:left}td.num{text-align:right;font-variant-numeric:tabular-nums}"
    "svg.chart{background:#fafafa;border:1px solid #ddd}.axis{stroke:#555}"
    ".bar{fill:#4a7ebb}.bin{fill:#d08a3a;stroke:#fff}.line{fill:none;stroke:#3a9d5d;stroke-width:2}"
    ".point{fill:#3a9d5d}.ylab{font-size:11px;text-anchor:end}.xlab{font-size:11px;text-anchor:"
    "middle}.xtitle{font-size:12px;text-anchor:middle}.empty{font-size:14px;text-anchor:middle;"
    "fill:#888}";

char *em_html_report(const em_html_input *in) {
    em_strbuf b = {0};
    const cJSON *r = in->results;
    const char *name = str_at(r, "recipe", "name");
    em_strbuf_add(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>");
    add_escaped(&b, name);
    em_strbuf_printf(&b, " — evalmesh report</title>\n<style>%s</style></head><body>\n<h1>", style);
    add_escaped(&b, name);
    em_strbuf_add(&b, "</h1>\n<table>\n");
    const char *rows[][3] = {{"recipe sha256", "recipe", "sha256"},
                             {"model", "model", "path"},
                             {"model header sha256", "model", "header_sha256"},
                             {"dataset", "dataset", "path"},
                             {"dataset sha256", "dataset", "sha256"},
                             {"evalmesh", "evalmesh", "version"},
                             {"commit", "evalmesh", "commit"}};
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        em_strbuf_printf(&b, "<tr><th>%s</th><td>", rows[i][0]);
        add_escaped(&b, str_at(r, rows[i][1], rows[i][2]));
        em_strbuf_add(&b, "</td></tr>\n");
    }
    em_strbuf_printf(&b, "<tr><th>world size</th><td>%d</td></tr>\n",
                     (int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(r, "world_size")));
    const char *start = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "start_time"));
    const char *end = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "end_time"));
    em_strbuf_add(&b, "<tr><th>time</th><td>");
    add_escaped(&b, start ? start : "—");
    em_strbuf_add(&b, " – ");
    add_escaped(&b, end ? end : "—");
    em_strbuf_add(&b, "</td></tr>\n</table>\n<h2>Metrics</h2>\n<table>\n"
                      "<tr><th>metric</th><th>value</th><th>error</th><th></th></tr>\n");
    em_results_each_metric(r, metric_row, &b);
    em_strbuf_add(&b, "</table>\n");

    throughput_chart(&b, r);
    nll_chart(&b, in->window_nll, in->window_count);
    if (in->history) {
        char *key = in->history_metric ? em_xstrdup(in->history_metric) : NULL;
        if (!key) em_results_each_metric(r, first_exact, &key);
        if (key) history_chart(&b, in->history, key);
        free(key);
    }
    em_strbuf_add(&b, "</body></html>\n");
    return em_strbuf_take(&b);
}
