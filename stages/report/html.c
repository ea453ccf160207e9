/* The self-contained HTML report with inline SVG charts (see html.h). */
#include "stages/report/html.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
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

static const cJSON *item(const cJSON *obj, const char *key) {
    return cJSON_GetObjectItemCaseSensitive(obj, key);
}

/* A number of obj; false when absent or null. */
static bool num(const cJSON *obj, const char *key, double *v) {
    const cJSON *it = item(obj, key);
    if (!cJSON_IsNumber(it)) return false;
    *v = it->valuedouble;
    return true;
}

/* The first n characters of s (all of it when shorter), escaped. */
static void add_prefix(em_strbuf *b, const char *s, size_t n) {
    char buf[64];
    snprintf(buf, sizeof buf, "%.*s", (int)(n < sizeof buf - 1 ? n : sizeof buf - 1), s ? s : "");
    add_escaped(b, buf);
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

/* One run of the history chart. */
typedef struct run_point {
    double value, error; /* error: 0 when the metric has none */
    const char *end_time, *commit;
    bool failed; /* its gate failed */
} run_point;

/* A horizontal reference line of the history chart: the gate's baseline or a threshold. */
typedef struct ref_line {
    double at;
    const char *css; /* "baseline" or "threshold" */
    char *label;     /* heap, escaped HTML */
    bool shown;      /* inside the chart's range */
} ref_line;

enum { MAX_REFS = 9, MAX_X_LABELS = 8 };

/* Where a check's bound lies on the metric's scale: the bound itself, except for
 * max_increase_sigma and max_decrease_sigma, whose bound is on the difference (value - baseline),
 * and mcnemar_p, whose bound is on a p-value (no line). */
static bool check_line(const cJSON *c, double *at) {
    double bound, base;
    if (!num(c, "bound", &bound)) return false;
    const char *rule = cJSON_GetStringValue(item(c, "rule"));
    if (rule && strcmp(rule, "mcnemar_p") == 0) return false;
    if (rule &&
        (strcmp(rule, "max_increase_sigma") == 0 || strcmp(rule, "max_decrease_sigma") == 0)) {
        if (!num(c, "baseline", &base)) return false;
        *at = base + bound;
    } else {
        *at = bound;
    }
    return isfinite(*at);
}

/* The baseline line (the first check on key that has a baseline), then the threshold lines of
 * the gate's checks on key. */
static size_t reference_lines(const cJSON *gate, const char *key, ref_line *refs) {
    size_t n = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, item(gate, "checks")) {
        const char *metric = cJSON_GetStringValue(item(c, "metric"));
        double base;
        if (!metric || strcmp(metric, key) != 0 || !num(c, "baseline", &base) || !isfinite(base))
            continue;
        em_strbuf lb = {0};
        const char *source = cJSON_GetStringValue(item(item(gate, "baseline"), "source"));
        em_strbuf_printf(&lb, "baseline %.6g", base);
        if (source) {
            em_strbuf_add(&lb, " (");
            add_escaped(&lb, source);
            em_strbuf_add(&lb, ")");
        }
        refs[n++] = (ref_line){base, "baseline", em_strbuf_take(&lb), false};
        break;
    }
    cJSON_ArrayForEach(c, item(gate, "checks")) {
        const char *metric = cJSON_GetStringValue(item(c, "metric"));
        double at, threshold = NAN;
        if (!metric || strcmp(metric, key) != 0 || !check_line(c, &at) || n == MAX_REFS) continue;
        num(c, "threshold", &threshold);
        const char *rule = cJSON_GetStringValue(item(c, "rule"));
        em_strbuf lb = {0};
        em_strbuf_add(&lb, "threshold: ");
        add_escaped(&lb, rule ? rule : "?");
        em_strbuf_printf(&lb, " %.6g &rarr; bound %.6g", threshold, at);
        refs[n++] = (ref_line){at, "threshold", em_strbuf_take(&lb), false};
    }
    return n;
}

/* The history chart's axes: n runs evenly across, values lo..hi up the plot. */
typedef struct axes {
    size_t n;
    double lo, hi;
} axes;

static double x_at(const axes *a, size_t i) {
    double plot_w = W - LEFT - RIGHT;
    return LEFT + (a->n > 1 ? plot_w * (double)i / (double)(a->n - 1) : plot_w / 2);
}

static double y_at(const axes *a, double v) {
    return H - BOTTOM - (v - a->lo) / (a->hi - a->lo) * (H - TOP - BOTTOM);
}

/* The metric's value in each history entry that has it, with error bars, each run's date and
 * short commit under the axis (at most MAX_X_LABELS of them), failed runs marked, and the gate's
 * baseline and threshold lines; a legend follows the chart. */
static void history_chart(em_strbuf *b, const em_history *h, const char *key, const cJSON *gate) {
    char *title = em_xasprintf("History of %s", key);
    em_strbuf tb = {0};
    add_escaped(&tb, title);
    free(title);
    title = em_strbuf_take(&tb);
    chart_open(b, "history", title);
    free(title);
    run_point *p = em_xcalloc(h->count ? h->count : 1, sizeof *p);
    size_t n = 0;
    double lo = INFINITY, hi = -INFINITY;
    bool any_error = false, any_failed = false;
    for (size_t i = 0; i < h->count; i++) {
        const cJSON *e = h->entries[i];
        double x, err = 0;
        bool has_error = false;
        if (!em_results_metric(e, key, &x, &err, &has_error) || !isfinite(x)) continue;
        if (!has_error || !isfinite(err)) err = 0;
        const cJSON *g = item(e, "gate");
        p[n] = (run_point){x, err, cJSON_GetStringValue(item(e, "end_time")),
                           cJSON_GetStringValue(item(item(e, "evalmesh"), "commit")),
                           cJSON_IsObject(g) && !cJSON_IsTrue(item(g, "passed"))};
        any_error |= err > 0;
        any_failed |= p[n].failed;
        if (x - err < lo) lo = x - err;
        if (x + err > hi) hi = x + err;
        n++;
    }
    ref_line refs[MAX_REFS];
    size_t nrefs = n ? reference_lines(gate, key, refs) : 0;
    for (size_t r = 0; r < nrefs; r++) /* the baseline always, thresholds near the data */
        if (strcmp(refs[r].css, "baseline") == 0) {
            refs[r].shown = true;
            if (refs[r].at < lo) lo = refs[r].at;
            if (refs[r].at > hi) hi = refs[r].at;
        }
    double span = hi - lo > 0 ? hi - lo : fabs(hi) * 0.01 + 1e-9;
    for (size_t r = 0; r < nrefs; r++) {
        if (refs[r].shown || refs[r].at < lo - span || refs[r].at > hi + span) continue;
        refs[r].shown = true;
        if (refs[r].at < lo) lo = refs[r].at;
        if (refs[r].at > hi) hi = refs[r].at;
    }
    if (n == 0) {
        no_data(b);
    } else {
        if (hi == lo) { /* a flat series: give the axis some height */
            lo -= fabs(lo) * 0.01 + 1e-9;
            hi += fabs(hi) * 0.01 + 1e-9;
        } else { /* a margin so lines at the ends stay visible */
            double pad = (hi - lo) * 0.05;
            lo -= pad;
            hi += pad;
        }
        axes ax = {n, lo, hi};
        for (size_t r = 0; r < nrefs; r++) {
            if (!refs[r].shown) continue;
            em_strbuf_printf(b,
                             "<line class=\"%s\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\">"
                             "<title>%s</title></line>\n",
                             refs[r].css, LEFT, y_at(&ax, refs[r].at), W - RIGHT,
                             y_at(&ax, refs[r].at), refs[r].label);
        }
        for (size_t i = 0; i < n; i++) {
            if (p[i].error <= 0) continue;
            double x = x_at(&ax, i), y1 = y_at(&ax, p[i].value - p[i].error),
                   y2 = y_at(&ax, p[i].value + p[i].error);
            em_strbuf_printf(b,
                             "<path class=\"errbar\" d=\"M%.1f %.1fV%.1fM%.1f %.1fH%.1fM%.1f "
                             "%.1fH%.1f\"/>\n",
                             x, y1, y2, x - 3, y1, x + 3, x - 3, y2, x + 3);
        }
        em_strbuf_add(b, "<polyline class=\"line\" points=\"");
        for (size_t i = 0; i < n; i++)
            em_strbuf_printf(b, "%s%.1f,%.1f", i ? " " : "", x_at(&ax, i), y_at(&ax, p[i].value));
        em_strbuf_add(b, "\"/>\n");
        size_t every = (n + MAX_X_LABELS - 1) / MAX_X_LABELS;
        for (size_t i = 0; i < n; i++) {
            double x = x_at(&ax, i);
            em_strbuf_printf(
                b,
                "<circle class=\"point%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"%d\"><title>run "
                "%zu: %.8g",
                p[i].failed ? " failed" : "", x, y_at(&ax, p[i].value), p[i].failed ? 4 : 3, i + 1,
                p[i].value);
            if (p[i].error > 0) em_strbuf_printf(b, " ± %.3g", p[i].error);
            em_strbuf_add(b, ", ");
            add_escaped(b, p[i].end_time ? p[i].end_time : "—");
            em_strbuf_add(b, ", commit ");
            add_escaped(b, p[i].commit ? p[i].commit : "—");
            em_strbuf_printf(b, "%s</title></circle>\n", p[i].failed ? ", gate failed" : "");
            /* the last run is always labelled; the others every `every` runs before it */
            if ((n - 1 - i) % every != 0) continue;
            const char *t = p[i].end_time ? p[i].end_time : "";
            const char *end = n > 1 && i == n - 1 ? " end" : ""; /* kept inside the chart */
            em_strbuf_printf(b, "<text class=\"xlab date%s\" x=\"%.1f\" y=\"%d\">", end, x,
                             H - BOTTOM + 13);
            add_prefix(b, strlen(t) >= 16 ? t + 5 : t, 5); /* MM-DD */
            em_strbuf_add(b, " ");
            add_prefix(b, strlen(t) >= 16 ? t + 11 : "", 5); /* HH:MM */
            em_strbuf_printf(b, "</text><text class=\"xlab commit%s\" x=\"%.1f\" y=\"%d\">", end, x,
                             H - BOTTOM + 26);
            add_prefix(b, p[i].commit ? p[i].commit : "", 7);
            em_strbuf_add(b, "</text>\n");
        }
        y_labels(b, lo, hi);
    }
    em_strbuf_printf(b,
                     "<text x=\"%d\" y=\"%d\" class=\"xtitle\">run end (UTC) and commit</text>\n"
                     "</svg>\n",
                     (W + LEFT) / 2, H - 2);
    if (n > 0) {
        em_strbuf_add(b, "<p class=\"legend\"><span class=\"key line\">&#9644;</span> value");
        if (any_error) em_strbuf_add(b, " ± standard error");
        if (any_failed)
            em_strbuf_add(b,
                          " &nbsp;<span class=\"key failed\">&#9679;</span> run whose gate failed");
        for (size_t r = 0; r < nrefs; r++) {
            em_strbuf_printf(b, "<br><span class=\"key %s\">&#9472; &#9472;</span> %s%s",
                             refs[r].css, refs[r].label, refs[r].shown ? "" : " (off the chart)");
            free(refs[r].label);
        }
        em_strbuf_add(b, "</p>\n");
    }
    free(p);
}

/* Each paired window's mean NLL, this run (y) against the baseline (x), with the diagonal where
 * they are equal: points above it are windows this run scores worse. */
static void paired_chart(em_strbuf *b, const double *base, const double *cand, size_t n) {
    chart_open(b, "paired", "Per-window mean NLL vs. the baseline (nats/token)");
    double lo = INFINITY, hi = -INFINITY;
    size_t finite = 0, worse = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(base[i]) || !isfinite(cand[i])) continue;
        finite++;
        worse += cand[i] > base[i];
        lo = fmin(lo, fmin(base[i], cand[i]));
        hi = fmax(hi, fmax(base[i], cand[i]));
    }
    if (finite == 0) {
        no_data(b);
        em_strbuf_add(b, "</svg>\n");
        return;
    }
    double pad = hi > lo ? (hi - lo) * 0.03 : fabs(hi) * 0.01 + 1e-9;
    lo -= pad;
    hi += pad;
    double plot_w = W - LEFT - RIGHT, plot_h = H - TOP - BOTTOM;
    em_strbuf_printf(b, "<line class=\"diag\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>\n", LEFT,
                     H - BOTTOM, W - RIGHT, TOP);
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(base[i]) || !isfinite(cand[i])) continue;
        double x = LEFT + (base[i] - lo) / (hi - lo) * plot_w;
        double y = H - BOTTOM - (cand[i] - lo) / (hi - lo) * plot_h;
        em_strbuf_printf(b, "<circle class=\"pwin\" cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\">", x, y);
        if (n <= 2000) /* titles for a readable number of windows only */
            em_strbuf_printf(b, "<title>window %zu: baseline %.6g, this run %.6g</title>", i,
                             base[i], cand[i]);
        em_strbuf_add(b, "</circle>\n");
    }
    y_labels(b, lo, hi);
    em_strbuf_printf(b, "<text x=\"%d\" y=\"%d\" class=\"xlab\">%.4g</text>\n", LEFT,
                     H - BOTTOM + 16, lo);
    em_strbuf_printf(b, "<text x=\"%d\" y=\"%d\" class=\"xlab\">%.4g</text>\n", W - RIGHT,
                     H - BOTTOM + 16, hi);
    em_strbuf_printf(b,
                     "<text x=\"%d\" y=\"%d\" class=\"xtitle\">baseline; this run is worse in %zu "
                     "of %zu windows (above the diagonal)</text>\n"
                     "<text class=\"xtitle\" transform=\"translate(%d %d) rotate(-90)\">this "
                     "run</text>\n</svg>\n",
                     (W + LEFT) / 2, H - 6, worse, finite, LEFT - 30, (H - BOTTOM + TOP) / 2);
}

/* A number of a check for the verdict table, or a dash when null. */
static void check_number(em_strbuf *b, const cJSON *c, const char *key) {
    double v;
    if (num(c, key, &v))
        em_strbuf_printf(b, "<td class=\"num\">%.6g</td>", v);
    else
        em_strbuf_add(b, "<td class=\"num\">—</td>");
}

/* The gate's verdict: passed or failed, the baseline it compared against, each check, the paired
 * comparison's summary and the checks' messages. */
static void verdict_section(em_strbuf *b, const cJSON *gate) {
    bool passed = cJSON_IsTrue(item(gate, "passed"));
    const char *stage = cJSON_GetStringValue(item(gate, "stage"));
    em_strbuf_printf(b, "<section id=\"verdict\" class=\"verdict %s\">\n<h2>Gate '",
                     passed ? "pass" : "fail");
    add_escaped(b, stage ? stage : "gate");
    em_strbuf_printf(b, "': %s</h2>\n<p class=\"baseline-run\">", passed ? "PASSED" : "FAILED");
    const cJSON *base = item(gate, "baseline");
    if (cJSON_IsObject(base)) {
        em_strbuf_add(b, "Baseline: ");
        add_escaped(b, str_at(gate, "baseline", "source"));
        em_strbuf_add(b, " (");
        add_escaped(b, str_at(gate, "baseline", "why"));
        em_strbuf_add(b, "), run ended ");
        add_escaped(b, str_at(gate, "baseline", "end_time"));
        em_strbuf_add(b, ", commit ");
        add_prefix(b, str_at(gate, "baseline", "commit"), 12);
        em_strbuf_add(b, ", model ");
        add_escaped(b, str_at(base, "model", "path"));
        /* the digest names the weights; a baseline from before digests has only its header's */
        const char *digest = cJSON_GetStringValue(item(item(base, "model"), "digest"));
        em_strbuf_add(b, digest ? " (digest " : " (header sha256 ");
        add_prefix(b, digest ? digest : str_at(base, "model", "header_sha256"), 12);
        em_strbuf_printf(
            b, "). %s",
            cJSON_IsTrue(item(base, "paired"))
                ? "Compared token by token (paired: both runs scored the same windows)."
                : "Not paired: compared as independent runs.");
    } else {
        em_strbuf_add(b, "No baseline: absolute checks only.");
    }
    em_strbuf_add(b, "</p>\n<table class=\"checks\">\n<tr><th>metric</th><th>rule</th>"
                     "<th>value</th><th>baseline</th><th>difference ± error</th><th>bound</th>"
                     "<th>result</th></tr>\n");
    const cJSON *c;
    cJSON_ArrayForEach(c, item(gate, "checks")) {
        bool ok = cJSON_IsTrue(item(c, "passed"));
        em_strbuf_printf(b, "<tr class=\"%s\"><td>", ok ? "pass" : "fail");
        add_escaped(b, cJSON_GetStringValue(item(c, "metric")));
        em_strbuf_add(b, "</td><td>");
        add_escaped(b, cJSON_GetStringValue(item(c, "rule")));
        double threshold;
        if (num(c, "threshold", &threshold)) em_strbuf_printf(b, " %.6g", threshold);
        const char *comparison = cJSON_GetStringValue(item(c, "comparison"));
        if (comparison) {
            em_strbuf_add(b, " <span class=\"comparison\">(");
            add_escaped(b, comparison);
            em_strbuf_add(b, ")</span>");
        }
        em_strbuf_add(b, "</td>");
        check_number(b, c, "value");
        check_number(b, c, "baseline");
        double d, e;
        if (num(c, "difference", &d)) {
            em_strbuf_printf(b, "<td class=\"num\">%+.4g", d);
            if (num(c, "difference_error", &e)) em_strbuf_printf(b, " ± %.3g", e);
            em_strbuf_add(b, "</td>");
        } else {
            em_strbuf_add(b, "<td class=\"num\">—</td>");
        }
        check_number(b, c, "bound");
        em_strbuf_printf(b, "<td class=\"result\">%s</td></tr>\n", ok ? "PASS" : "FAIL");
    }
    em_strbuf_add(b, "</table>\n");
    const cJSON *paired = item(gate, "paired");
    double windows, tokens, nll_d, nll_e, acc_d, acc_e;
    if (num(paired, "windows", &windows) && num(paired, "tokens", &tokens) &&
        num(paired, "nll_mean_difference", &nll_d) &&
        num(paired, "nll_mean_difference_error", &nll_e)) {
        em_strbuf_add(b, "<p class=\"paired\">Paired over ");
        em_strbuf_printf(b, "%.0f windows, %.0f tokens of stage '", windows, tokens);
        add_escaped(b, cJSON_GetStringValue(item(paired, "stage")));
        em_strbuf_printf(b, "': mean NLL difference %+.4g ± %.2g nats/token", nll_d, nll_e);
        if (num(paired, "token_accuracy_difference", &acc_d) &&
            num(paired, "token_accuracy_difference_error", &acc_e))
            em_strbuf_printf(b, ", token accuracy difference %+.4g ± %.2g", acc_d, acc_e);
        em_strbuf_add(b, ".</p>\n");
    }
    em_strbuf_add(b, "<ul class=\"messages\">\n");
    cJSON_ArrayForEach(c, item(gate, "checks")) {
        const char *message = cJSON_GetStringValue(item(c, "message"));
        if (!message || !message[0]) continue;
        em_strbuf_printf(b, "<li class=\"%s\">", cJSON_IsTrue(item(c, "passed")) ? "pass" : "fail");
        add_escaped(b, message);
        em_strbuf_add(b, "</li>\n");
    }
    em_strbuf_add(b, "</ul>\n</section>\n");
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
    ".verdict{padding:2px 14px;margin:1em 0;border-left:8px solid}"
    ".verdict.pass{background:#e6f4ea;border-color:#2e8b57}"
    ".verdict.fail{background:#fbe9e7;border-color:#c0392b}"
    ".verdict table{font-size:13px}.verdict td,.verdict th{padding:2px 6px;overflow-wrap:normal}"
    ".verdict td.num,.verdict th{white-space:nowrap}"
    "tr.fail td.result,li.fail{color:#c0392b;font-weight:bold}tr.pass td.result{color:#2e8b57}"
    ".comparison{color:#666}.messages{font-size:13px}.legend{font-size:12px;margin:4px 0 1em}"
    "svg.chart{background:#fafafa;border:1px solid #ddd}.axis{stroke:#555}"
    ".bar{fill:#4a7ebb}.bin{fill:#d08a3a;stroke:#fff}.line{fill:none;stroke:#3a9d5d;stroke-width:2}"
    ".point{fill:#3a9d5d}.point.failed{fill:#c0392b}.errbar{stroke:#3a9d5d;fill:none}"
    ".baseline{stroke:#1f5fa8;stroke-width:2;stroke-dasharray:8 4}"
    ".threshold{stroke:#c0392b;stroke-width:2;stroke-dasharray:3 3}"
    ".diag{stroke:#999;stroke-dasharray:4 4}.pwin{fill:#8e44ad}"
    ".key.line{color:#3a9d5d}.key.failed{color:#c0392b}.key.baseline{color:#1f5fa8}"
    ".key.threshold{color:#c0392b}"
    ".ylab{font-size:11px;text-anchor:end}.xlab{font-size:11px;text-anchor:"
    "middle}.xlab.date,.xlab.commit{font-size:10px}.xlab.end{text-anchor:end}.xlab.commit{fill:#"
    "666;font-family:monospace}"
    ".xtitle{font-size:12px;text-anchor:middle}.empty{font-size:14px;text-anchor:middle;"
    "fill:#888}";

char *em_html_report(const em_html_input *in) {
    em_strbuf b = {0};
    const cJSON *r = in->results;
    const char *name = str_at(r, "recipe", "name");
    em_strbuf_add(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>");
    add_escaped(&b, name);
    em_strbuf_printf(&b, " — evalmesh report</title>\n<style>%s</style></head><body>\n<h1>", style);
    add_escaped(&b, name);
    em_strbuf_add(&b, "</h1>\n");
    const cJSON *gate = item(r, "gate");
    if (cJSON_IsObject(gate)) verdict_section(&b, gate);
    em_strbuf_add(&b, "<table>\n");
    const char *rows[][3] = {
        {"recipe sha256", "recipe", "sha256"}, {"model", "model", "path"},
        {"model digest", "model", "digest"},   {"model header sha256", "model", "header_sha256"},
        {"dataset", "dataset", "path"},        {"dataset sha256", "dataset", "sha256"},
        {"evalmesh", "evalmesh", "version"},   {"commit", "evalmesh", "commit"}};
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
        if (key) history_chart(&b, in->history, key, gate);
        free(key);
    }
    if (in->paired_window_count && in->baseline_window_nll && in->candidate_window_nll)
        paired_chart(&b, in->baseline_window_nll, in->candidate_window_nll,
                     in->paired_window_count);
    em_strbuf_add(&b, "</body></html>\n");
    return em_strbuf_take(&b);
}
