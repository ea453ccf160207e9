/* The plain C reference forward (see llama_reference.h). */
#include "stages/kernels/reference/llama_reference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stages/kernels/cpu/dequantize.h"
#include "stages/kernels/cpu/rope.h"

/* y (T, n_out) = x (T, n_in) W^T (+ y when accumulate), W {n_in, n_out} of any supported type. */
static void matmul(const double *x, int T, const em_tensor *w, double *y, bool accumulate) {
    int64_t n_in = w->shape[0], n_out = w->shape[1];
    float *row = em_xmalloc((size_t)n_in * sizeof *row);
    for (int64_t o = 0; o < n_out; o++) {
        em_rows_to_float(w, o, 1, row, n_in);
        for (int t = 0; t < T; t++) {
            double sum = 0;
            for (int64_t i = 0; i < n_in; i++) sum += x[(size_t)t * n_in + i] * row[i];
            double *out = &y[(size_t)t * n_out + o];
            *out = accumulate ? *out + sum : sum;
        }
    }
    free(row);
}

/* The values of a vector tensor (norm weight or bias). */
static double *vector(const em_tensor *t) {
    int64_t n = t->shape[0];
    float *f = em_xmalloc((size_t)n * sizeof *f);
    em_tensor row = *t;
    row.shape[1] = 1;
    em_rows_to_float(&row, 0, 1, f, n);
    double *d = em_xmalloc((size_t)n * sizeof *d);
    for (int64_t i = 0; i < n; i++) d[i] = f[i];
    free(f);
    return d;
}

/* y (T, D) = x / rms(x) * w */
static void rmsnorm(const double *x, const em_tensor *weight, int T, int D, double eps, double *y) {
    double *w = vector(weight);
    for (int t = 0; t < T; t++) {
        double ss = 0;
        for (int i = 0; i < D; i++) ss += x[(size_t)t * D + i] * x[(size_t)t * D + i];
        double scale = 1.0 / sqrt(ss / D + eps);
        for (int i = 0; i < D; i++) y[(size_t)t * D + i] = x[(size_t)t * D + i] * scale * w[i];
    }
    free(w);
}

static void add_bias(double *y, const em_tensor *b, int T, int n) {
    double *v = vector(b);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < n; i++) y[(size_t)t * n + i] += v[i];
    free(v);
}

/* Rotates pairs (2i, 2i+1) of the first rope_dim values of every head by t * freqs[i]. */
static void rope(double *x, int T, int heads, int hd, int rope_dim, const double *freqs,
                 double magnitude) {
    for (int t = 0; t < T; t++)
        for (int h = 0; h < heads; h++) {
            double *v = x + ((size_t)t * heads + h) * hd;
            for (int i = 0; i < rope_dim / 2; i++) {
                double c = cos(t * freqs[i]) * magnitude, s = sin(t * freqs[i]) * magnitude;
                double a = v[2 * i], b = v[2 * i + 1];
                v[2 * i] = a * c - b * s;
                v[2 * i + 1] = a * s + b * c;
            }
        }
}

/* cap * tanh(x / cap), or x when cap is 0 */
static double softcap(double x, double cap) {
    return cap > 0 ? cap * tanh(x / cap) : x;
}

/* out (T, H*hd): query head h attends to keys 0..t of KV head h / (H / KV) (only those within
 * the window when window > 0), scores q.k / sqrt(scale_base) soft-capped by cap. */
static void attention(const double *q, const double *k, const double *v, int T, int H, int KV,
                      int hd, int scale_base, double cap, int window, double *out) {
    double *p = em_xmalloc((size_t)T * sizeof *p);
    for (int h = 0; h < H; h++) {
        int g = h / (H / KV);
        for (int t = 0; t < T; t++) {
            const double *qt = q + ((size_t)t * H + h) * hd;
            double max = -INFINITY, sum = 0;
            int j0 = window > 0 && t - window + 1 > 0 ? t - window + 1 : 0;
            for (int j = j0; j <= t; j++) {
                double s = 0;
                for (int d = 0; d < hd; d++) s += qt[d] * k[((size_t)j * KV + g) * hd + d];
                p[j] = softcap(s / sqrt((double)scale_base), cap);
                if (p[j] > max) max = p[j];
            }
            for (int j = j0; j <= t; j++) sum += p[j] = exp(p[j] - max);
            double *o = out + ((size_t)t * H + h) * hd;
            for (int d = 0; d < hd; d++) {
                double acc = 0;
                for (int j = j0; j <= t; j++) acc += p[j] * v[((size_t)j * KV + g) * hd + d];
                o[d] = acc / sum;
            }
        }
    }
    free(p);
}

/* silu(x) or gelu_tanh(x) */
static double gate(em_activation act, double x) {
    if (act == EM_ACTIVATION_GELU_TANH)
        return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    return x / (1.0 + exp(-x));
}

/* x += in W^T, or with a post-norm weight x += RMSNorm(in W^T) * post_norm (y is scratch). */
static void residual(const double *in, int T, const em_tensor *w, const em_tensor *post_norm,
                     double eps, double *y, double *x) {
    if (!post_norm) {
        matmul(in, T, w, x, true);
        return;
    }
    int D = (int)w->shape[1];
    matmul(in, T, w, y, false);
    rmsnorm(y, post_norm, T, D, eps, y);
    for (size_t i = 0; i < (size_t)T * D; i++) x[i] += y[i];
}

em_status em_llama_reference_window(const em_model *m, const int32_t *input, const int32_t *target,
                                    int T, int score_from, double *nll, int32_t *argmax) {
    const em_llama_config *c = &m->config;
    int D = c->dim, H = c->n_heads, KV = c->n_kv_heads, hd = c->head_dim, F = c->ffn_dim;
    int V = c->n_vocab;
    for (int t = 0; t < T; t++)
        if (input[t] < 0 || input[t] >= V || target[t] < 0 || target[t] >= V)
            return em_error_new(EM_EXIT_BAD_INPUT, "token id outside the vocabulary at %d", t);
    size_t t_ = (size_t)T;
    double *x = em_xcalloc(t_ * D, sizeof *x), *xn = em_xmalloc(t_ * D * sizeof *xn);
    double *q = em_xmalloc(t_ * H * hd * sizeof *q), *att = em_xmalloc(t_ * H * hd * sizeof *att);
    double *k = em_xmalloc(t_ * KV * hd * sizeof *k), *v = em_xmalloc(t_ * KV * hd * sizeof *v);
    double *g = em_xmalloc(t_ * F * sizeof *g), *u = em_xmalloc(t_ * F * sizeof *u);
    double *logits = em_xmalloc((size_t)V * sizeof *logits);
    double *y = em_xmalloc(t_ * D * sizeof *y);
    double freqs[c->rope_dim / 2], freqs_swa[c->rope_dim / 2];
    em_rope_freqs(c, m->rope_freqs ? m->rope_freqs->data : NULL, freqs);
    em_llama_config local = em_rope_config_swa(c);
    em_rope_freqs(&local, NULL, freqs_swa);
    float *row = em_xmalloc((size_t)D * sizeof *row);
    for (int t = 0; t < T; t++) {
        em_rows_to_float(m->tok_embd, input[t], 1, row, D);
        for (int i = 0; i < D; i++) x[(size_t)t * D + i] = row[i] * (double)c->embed_scale;
    }
    for (int l = 0; l < c->n_layers; l++) {
        const em_layer_weights *w = &m->layers[l];
        bool sliding = em_layer_is_sliding(c, l);
        bool local_rope = sliding && c->rope_freq_base_swa > 0; /* unscaled: magnitude 1 */
        const double *f = local_rope ? freqs_swa : freqs;
        double magnitude = local_rope ? 1.0 : em_rope_magnitude(c);
        rmsnorm(x, w->attn_norm, T, D, c->rms_eps, xn);
        matmul(xn, T, w->wq, q, false);
        matmul(xn, T, w->wk, k, false);
        matmul(xn, T, w->wv, v, false);
        if (c->has_qkv_bias) {
            add_bias(q, w->bq, T, H * hd);
            add_bias(k, w->bk, T, KV * hd);
            add_bias(v, w->bv, T, KV * hd);
        }
        if (c->qk_norm) { /* every head as a row of hd values */
            rmsnorm(q, w->q_norm, T * H, hd, c->rms_eps, q);
            rmsnorm(k, w->k_norm, T * KV, hd, c->rms_eps, k);
        }
        rope(q, T, H, hd, c->rope_dim, f, magnitude);
        rope(k, T, KV, hd, c->rope_dim, f, magnitude);
        attention(q, k, v, T, H, KV, hd, c->attn_scale_base, c->attn_softcap,
                  sliding ? c->sliding_window : 0, att);
        residual(att, T, w->wo, w->attn_post_norm, c->rms_eps, y, x);
        rmsnorm(x, w->ffn_norm, T, D, c->rms_eps, xn);
        matmul(xn, T, w->w_gate, g, false);
        matmul(xn, T, w->w_up, u, false);
        for (size_t i = 0; i < t_ * F; i++) g[i] = gate(c->activation, g[i]) * u[i];
        residual(g, T, w->w_down, w->ffn_post_norm, c->rms_eps, y, x);
    }
    rmsnorm(x, m->output_norm, T, D, c->rms_eps, xn);
    for (int t = score_from; t < T; t++) {
        matmul(xn + (size_t)t * D, 1, m->output, logits, false);
        for (int i = 0; i < V; i++) logits[i] = softcap(logits[i], c->final_softcap);
        int best = 0;
        for (int i = 1; i < V; i++)
            if (logits[i] > logits[best]) best = i;
        double sum = 0;
        for (int i = 0; i < V; i++) sum += exp(logits[i] - logits[best]);
        nll[t - score_from] = logits[best] + log(sum) - logits[target[t]];
        argmax[t - score_from] = best;
    }
    free(row);
    free(y);
    free(x);
    free(xn);
    free(q);
    free(att);
    free(k);
    free(v);
    free(g);
    free(u);
    free(logits);
    return NULL;
}
