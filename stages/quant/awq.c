/* AWQ-style scaling of a layer (see awq.h). */
#include "stages/quant/awq.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stages/kernels/cpu/dequantize.h"
#include "stages/formats/ggml_types.h"
#include "stages/quant/quantize_model.h"

#define SEARCH_ROWS 512 /* rows of each weight the alpha search looks at, at most */
#define ALPHA_STEPS 20  /* alpha = k / ALPHA_STEPS, k = 0..ALPHA_STEPS */

typedef struct group_def {
    int members[3]; /* indices into em_awq_layer.w */
    int n;
} group_def;

static const group_def groups[EM_AWQ_GROUPS] = {
    [EM_AWQ_QKV] = {{EM_AWQ_WQ, EM_AWQ_WK, EM_AWQ_WV}, 3},
    [EM_AWQ_GATE_UP] = {{EM_AWQ_WGATE, EM_AWQ_WUP}, 2},
    [EM_AWQ_DOWN] = {{EM_AWQ_WDOWN}, 1},
};

/* The float rows of t: (n_out, n_in). */
static float *to_floats(const em_tensor *t) {
    int64_t n = t->shape[0], rows = em_tensor_numel(t) / n;
    float *x = em_xmalloc((size_t)(rows * n) * sizeof *x);
    em_rows_to_float(t, 0, rows, x, n);
    return x;
}

/* s_j = max(a_j^alpha, 1e-4) / sqrt(max s * min s). */
static void make_scales(const double *a, int64_t n, float alpha, float *s) {
    double lo = INFINITY, hi = 0;
    for (int64_t j = 0; j < n; j++) {
        double v = fmax(pow(a[j], alpha), 1e-4);
        s[j] = (float)v;
        lo = fmin(lo, v);
        hi = fmax(hi, v);
    }
    float norm = (float)sqrt(hi * lo);
    for (int64_t j = 0; j < n; j++) s[j] /= norm;
}

/* qw_j = e_j / s_j^2: the importance of the rescaled weight's column j (its input is x_j / s_j). */
static float *scaled_importance(const double *e, const float *s, int64_t n) {
    float *qw = em_xmalloc((size_t)n * sizeof *qw);
    for (int64_t j = 0; j < n; j++) qw[j] = (float)(e[j] / ((double)s[j] * s[j]));
    return qw;
}

/* sum over up to SEARCH_ROWS evenly spaced rows r of w (rows x n) and columns j of
 * e_j (w[r][j] - dequantize(quantize(w[r] * s))[j] / s_j)^2, with scheme sc, rounding with
 * importance weights qw when given (and sc has a weighted form). */
static double weight_error(const float *w, int64_t rows, int64_t n, const em_quant_scheme *sc,
                           const float *s, const double *e, const float *qw, int threads) {
    int64_t R = rows < SEARCH_ROWS ? rows : SEARCH_ROWS;
    double *row_err = em_xmalloc((size_t)R * sizeof *row_err);
    em_ggml_row_fn *to_float = em_ggml_type_info_get((uint32_t)sc->type)->to_float;
    size_t row_bytes = em_quant_row_bytes(sc, n);
#pragma omp parallel num_threads(threads)
    {
        float *x = em_xmalloc((size_t)n * sizeof *x), *y = em_xmalloc((size_t)n * sizeof *y);
        void *blocks = em_xmalloc(row_bytes);
#pragma omp for schedule(static)
        for (int64_t i = 0; i < R; i++) {
            const float *wr = w + (i * rows / R) * n;
            for (int64_t j = 0; j < n; j++) x[j] = wr[j] * s[j];
            if (qw && sc->quantize_row_imatrix)
                sc->quantize_row_imatrix(x, n, qw, blocks);
            else
                sc->quantize_row(x, n, blocks);
            to_float(blocks, y, n);
            double err = 0;
            for (int64_t j = 0; j < n; j++) {
                double d = (double)wr[j] - (double)y[j] / s[j];
                err += e[j] * d * d;
            }
            row_err[i] = err;
        }
        free(x);
        free(y);
        free(blocks);
    }
    double total = 0;
    for (int64_t i = 0; i < R; i++) total += row_err[i];
    free(row_err);
    return total;
}

static float *norm_copy(const em_tensor *t) {
    float *g = em_xmalloc((size_t)t->shape[0] * sizeof *g);
    memcpy(g, t->data, (size_t)t->shape[0] * sizeof *g);
    return g;
}

em_status em_awq_scale_layer(const em_model *m, int layer, const em_quant_plan *plan,
                             const em_activation_stats *stats, float fixed_alpha,
                             bool weighted_rounding, int threads, em_awq_layer *out) {
    memset(out, 0, sizeof *out);
    for (int g = 0; g < EM_AWQ_GROUPS; g++) out->alpha[g] = -1;
    const em_layer_weights *L = &m->layers[layer];
    const em_tensor *w[EM_AWQ_WEIGHTS] = {L->wq, L->wk, L->wv, L->w_gate, L->w_up, L->w_down};
    const em_quant_scheme *sc[EM_AWQ_WEIGHTS];
    for (int i = 0; i < EM_AWQ_WEIGHTS; i++)
        sc[i] = w[i] ? em_quant_plan_scheme_for(plan, m, w[i]) : NULL;
    static const int order[EM_AWQ_GROUPS] = {EM_AWQ_DOWN, EM_AWQ_GATE_UP, EM_AWQ_QKV};
    for (int o = 0; o < EM_AWQ_GROUPS; o++) {
        int g = order[o];
        const group_def *gd = &groups[g];
        bool ok = true;
        for (int k = 0; k < gd->n; k++) ok = ok && sc[gd->members[k]];
        const em_tensor *norm = g == EM_AWQ_QKV ? L->attn_norm : L->ffn_norm;
        ok =
            ok && (g == EM_AWQ_DOWN ? sc[EM_AWQ_WUP] != NULL : norm && norm->type == EM_TENSOR_F32);
        const em_tensor *first = w[gd->members[0]];
        const em_activation_stat *st = ok ? em_activation_stats_find(stats, first->name) : NULL;
        if (!st || st->count <= 0) continue;
        int64_t n = first->shape[0];
        if (st->columns != n) {
            em_awq_layer_free(out);
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "tensor %s: the calibration statistics have %lld columns, the "
                                "weight's rows %lld",
                                first->name, (long long)st->columns, (long long)n);
        }
        double *a = em_xmalloc((size_t)n * sizeof *a), *e = em_xmalloc((size_t)n * sizeof *e);
        for (int64_t j = 0; j < n; j++) {
            e[j] = st->sum_x2[j] / (double)st->count;
            a[j] = st->sum_abs ? st->sum_abs[j] / (double)st->count : sqrt(e[j]);
        }
        for (int k = 0; k < gd->n; k++)
            if (!out->w[gd->members[k]]) out->w[gd->members[k]] = to_floats(w[gd->members[k]]);
        float *s = em_xmalloc((size_t)n * sizeof *s);
        float best_alpha = fixed_alpha;
        if (fixed_alpha < 0) {
            for (int step = 0; step <= ALPHA_STEPS; step++) {
                float alpha = (float)step / ALPHA_STEPS;
                make_scales(a, n, alpha, s);
                float *qw = weighted_rounding ? scaled_importance(e, s, n) : NULL;
                double err = 0;
                for (int k = 0; k < gd->n; k++) {
                    int i = gd->members[k];
                    err += weight_error(out->w[i], em_tensor_numel(w[i]) / n, n, sc[i], s, e, qw,
                                        threads);
                }
                free(qw);
                if (step == 0) out->error_plain[g] = err;
                if (step == 0 || err < out->error[g]) {
                    out->error[g] = err;
                    best_alpha = alpha;
                }
            }
        }
        out->alpha[g] = best_alpha;
        make_scales(a, n, best_alpha, s);
        for (int k = 0; k < gd->n && weighted_rounding; k++)
            out->qw[gd->members[k]] = scaled_importance(e, s, n);
        for (int k = 0; k < gd->n; k++) {
            int i = gd->members[k];
            int64_t rows = em_tensor_numel(w[i]) / n;
            for (int64_t r = 0; r < rows; r++)
                for (int64_t j = 0; j < n; j++) out->w[i][r * n + j] *= s[j];
        }
        if (g == EM_AWQ_DOWN) { /* row j of ffn_up makes channel j of ffn_down's input */
            if (!out->w[EM_AWQ_WUP]) out->w[EM_AWQ_WUP] = to_floats(w[EM_AWQ_WUP]);
            int64_t d = w[EM_AWQ_WUP]->shape[0];
            for (int64_t r = 0; r < n; r++)
                for (int64_t j = 0; j < d; j++) out->w[EM_AWQ_WUP][r * d + j] /= s[r];
        } else {
            float **g_out = g == EM_AWQ_QKV ? &out->attn_norm : &out->ffn_norm;
            *g_out = norm_copy(norm);
            for (int64_t j = 0; j < n; j++) (*g_out)[j] /= s[j];
        }
        free(a);
        free(e);
        free(s);
    }
    return NULL;
}

void em_awq_layer_free(em_awq_layer *l) {
    for (int i = 0; i < EM_AWQ_WEIGHTS; i++) {
        free(l->w[i]);
        free(l->qw[i]);
    }
    free(l->attn_norm);
    free(l->ffn_norm);
    memset(l, 0, sizeof *l);
}
