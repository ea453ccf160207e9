/* The CPU kernels of the Llama composition and the `cpu` forward backend (see llama_forward.h). */
#include "stages/kernels/cpu/llama_forward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stages/kernels/cpu/attention.h"
#include "stages/kernels/cpu/decode.h"
#include "stages/kernels/cpu/dequantize.h"
#include "stages/kernels/cpu/gemm.h"
#include "stages/kernels/cpu/matmul.h"
#include "stages/kernels/cpu/output_head.h"
#include "stages/kernels/cpu/pair_head.h"
#include "stages/kernels/cpu/ring_attention.h"
#include "stages/kernels/cpu/rmsnorm.h"
#include "stages/kernels/cpu/rope.h"
#include "stages/formats/ggml_types.h"
#include "stages/kernels/linear_inputs.h"
#include "stages/kernels/llama_block.h"

_Static_assert(EM_LINEAR_PANEL == EM_GEMM_PANEL, "the observer's view reads the GEMM's panels");

/* Small per-layer vectors converted to floats once. */
typedef struct layer_vectors {
    float *attn_norm, *ffn_norm;           /* (D) */
    float *q_norm, *k_norm;                /* (hd) with qk_norm, else NULL */
    float *attn_post_norm, *ffn_post_norm; /* (D) with post_norms, else NULL */
} layer_vectors;

/* The keys the windows of a batch run with kept keys (em_llama_forward_with_kept) attend to: each
 * window's kept rows, then its own. */
typedef struct window_keys {
    int32_t *start; /* (windows + 1) row offsets of each window's keys */
    int slots;      /* of start */
    float *k, *v;   /* (key rows, KVD) */
    float *vt;      /* em_attention_vt_floats of the key rows */
    int capacity;   /* the key rows the three above hold */
} window_keys;
/* H, KV and F below are this rank's heads, KV heads and MLP columns (the model's / tp). */
struct em_llama_forward {
    const em_model *model;
    em_forward_groups groups;
    em_llama_shard shard;
    int threads;
    em_scratch scratch;
    layer_vectors *layers;
    float *output_norm;    /* (D) */
    int capacity;          /* the most rows (a batch's positions) the activations below hold */
    int32_t *window_start; /* (windows + 1) the current batch's segments (segments.h) */
    int windows, window_slots;
    size_t activation_bytes; /* of the arrays below */
    float *x;                /* (T, D) the residual stream */
    float *xn;               /* (T, D) normalized x */
    float *y;                /* (T, D) this rank's partial sum of a row-parallel product (tp > 1) */
    float *q;                /* (T, H*hd) */
    float *k, *v;            /* (T, KV*hd) */
    float *vt;               /* v transposed, for attention (see em_attention_vt_floats) */
    float *att_packed;       /* attention's output (T, H*hd), packed for the output projection */
    float *h_packed;         /* the MLP's SwiGLU (T, F), packed for the down projection */
    float *rope;             /* (T, rope_dim/2, 2) */
    float *ring;             /* cp > 1: the online softmax state of ring attention */
    float *rope_swa;         /* (T, rope_dim/2, 2) of the sliding layers' base, or NULL */
    em_linear_observer observer; /* observe NULL: no calibration (the normal case) */
    const em_kept_keys *kept;    /* NULL but inside em_llama_forward_with_kept */
    bool attend_kept;            /* a window of the batch has kept rows before its own */
    window_keys keys;            /* with attend_kept */
    float *prefix_k, *prefix_v;  /* (layers, P, KVD) a shared prefix's kept keys and values */
    size_t prefix_floats;        /* of each of the two */
};

/* A tensor the forward needs: present, a supported type, shape {n_in, n_out}. */
static em_status check_tensor(const em_model *m, const em_tensor *t, const char *what, int64_t n_in,
                              int64_t n_out) {
    if (!t) return em_error_new(EM_EXIT_BAD_INPUT, "model %s: has no %s tensor", m->path, what);
    if (!em_ggml_type_supported((uint32_t)t->type)) {
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "model %s: tensor '%s' has type %s, which the CPU forward does not "
                            "support (%s)",
                            m->path, t->name, em_tensor_type_name(t->type),
                            em_ggml_supported_names());
    }
    if (t->shape[0] != n_in || t->shape[1] != n_out || t->shape[2] != 1 || t->shape[3] != 1) {
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "model %s: tensor '%s' has shape {%lld, %lld, %lld, %lld}, expected "
                            "{%lld, %lld} from the model's configuration",
                            m->path, t->name, (long long)t->shape[0], (long long)t->shape[1],
                            (long long)t->shape[2], (long long)t->shape[3], (long long)n_in,
                            (long long)n_out);
    }
    int block = em_ggml_type_info_get((uint32_t)t->type)->block_size;
    if (n_in % block != 0) {
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "model %s: tensor '%s' is %s with rows of %lld values, not a "
                            "multiple of %d",
                            m->path, t->name, em_tensor_type_name(t->type), (long long)n_in, block);
    }
    return NULL;
}

/* A vector tensor (norm weight or bias) of n values as floats. */
static float *vector_to_float(const em_tensor *t, int64_t n) {
    em_tensor row = *t;
    row.shape[0] = n;
    row.shape[1] = 1;
    float *out = em_xmalloc((size_t)n * sizeof(float));
    em_rows_to_float(&row, 0, 1, out, n);
    return out;
}

static em_status check_model(const em_model *m) {
    const em_llama_config *c = &m->config;
    if (c->n_vocab <= 0 || c->dim <= 0 || c->n_layers <= 0 || c->ffn_dim <= 0 || c->n_heads <= 0 ||
        c->n_kv_heads <= 0 || c->head_dim <= 0 || c->n_heads % c->n_kv_heads != 0 ||
        c->rope_dim <= 0 || c->rope_dim % 2 != 0 || c->rope_dim > c->head_dim) {
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "model %s: unusable configuration (vocab %d, dim %d, layers %d, "
                            "ffn %d, heads %d, kv heads %d, head dim %d, rope dim %d)",
                            m->path, c->n_vocab, c->dim, c->n_layers, c->ffn_dim, c->n_heads,
                            c->n_kv_heads, c->head_dim, c->rope_dim);
    }
    int64_t D = c->dim, F = c->ffn_dim, QD = (int64_t)c->n_heads * c->head_dim;
    int64_t KVD = (int64_t)c->n_kv_heads * c->head_dim;
    em_status err;
    if ((err = check_tensor(m, m->tok_embd, "token embedding", D, c->n_vocab))) return err;
    if ((err = check_tensor(m, m->output_norm, "output norm", D, 1))) return err;
    if ((err = check_tensor(m, m->output, "output", D, c->n_vocab))) return err;
    for (int l = 0; l < c->n_layers; l++) {
        const em_layer_weights *w = &m->layers[l];
        if ((err = check_tensor(m, w->attn_norm, "attention norm", D, 1)) ||
            (err = check_tensor(m, w->wq, "attention q", D, QD)) ||
            (err = check_tensor(m, w->wk, "attention k", D, KVD)) ||
            (err = check_tensor(m, w->wv, "attention v", D, KVD)) ||
            (err = check_tensor(m, w->wo, "attention output", QD, D)) ||
            (err = check_tensor(m, w->ffn_norm, "ffn norm", D, 1)) ||
            (err = check_tensor(m, w->w_gate, "ffn gate", D, F)) ||
            (err = check_tensor(m, w->w_up, "ffn up", D, F)) ||
            (err = check_tensor(m, w->w_down, "ffn down", F, D))) {
            return em_error_prefix(err, "layer %d", l);
        }
        if (c->qk_norm && ((err = check_tensor(m, w->q_norm, "q norm", c->head_dim, 1)) ||
                           (err = check_tensor(m, w->k_norm, "k norm", c->head_dim, 1))))
            return em_error_prefix(err, "layer %d", l);
        if (c->post_norms &&
            ((err = check_tensor(m, w->attn_post_norm, "attention post-norm", D, 1)) ||
             (err = check_tensor(m, w->ffn_post_norm, "ffn post-norm", D, 1))))
            return em_error_prefix(err, "layer %d", l);
        if (c->has_qkv_bias && ((err = check_tensor(m, w->bq, "q bias", QD, 1)) ||
                                (err = check_tensor(m, w->bk, "k bias", KVD, 1)) ||
                                (err = check_tensor(m, w->bv, "v bias", KVD, 1)))) {
            return em_error_prefix(err, "layer %d", l);
        }
    }
    return NULL;
}

em_status em_llama_forward_new_split(const em_model *model, const em_forward_groups *groups,
                                     int threads, em_llama_forward **out) {
    *out = NULL;
    em_status err = check_model(model);
    if (err) return err;
    const em_llama_config *c = &model->config;
    em_llama_forward *f = em_xcalloc(1, sizeof *f);
    f->model = model;
    f->groups = *groups;
    f->threads = threads < 1 ? 1 : threads;
    err = em_llama_shard_new(model, groups->tp.size, groups->tp.rank, &f->shard);
    if (err) {
        free(f);
        return em_error_prefix(err, "model %s", model->path);
    }
    err = em_scratch_init(&f->scratch, f->threads);
    if (err) {
        em_llama_forward_free(f);
        return err;
    }
    f->layers = em_xcalloc((size_t)c->n_layers, sizeof *f->layers);
    for (int l = 0; l < c->n_layers; l++) {
        const em_layer_weights *w = &model->layers[l];
        layer_vectors *lv = &f->layers[l];
        lv->attn_norm = vector_to_float(w->attn_norm, c->dim);
        lv->ffn_norm = vector_to_float(w->ffn_norm, c->dim);
        if (c->qk_norm) {
            lv->q_norm = vector_to_float(w->q_norm, c->head_dim);
            lv->k_norm = vector_to_float(w->k_norm, c->head_dim);
        }
        if (c->post_norms) {
            lv->attn_post_norm = vector_to_float(w->attn_post_norm, c->dim);
            lv->ffn_post_norm = vector_to_float(w->ffn_post_norm, c->dim);
        }
    }
    f->output_norm = vector_to_float(model->output_norm, c->dim);
    *out = f;
    return NULL;
}

em_status em_llama_forward_new(const em_model *model, int threads, em_llama_forward **out) {
    em_forward_groups alone = {.tp = {.rank = 0, .size = 1}, .cp = {.rank = 0, .size = 1}};
    return em_llama_forward_new_split(model, &alone, threads, out);
}

static void free_activations(em_llama_forward *f) {
    free(f->x);
    free(f->xn);
    free(f->y);
    free(f->q);
    free(f->att_packed);
    free(f->k);
    free(f->v);
    free(f->vt);
    free(f->h_packed);
    free(f->rope);
    free(f->ring);
    free(f->rope_swa);
    f->capacity = 0;
    f->activation_bytes = 0;
}

/* malloc of floats that adds their bytes to *bytes. */
static float *alloc_floats(size_t floats, size_t *bytes) {
    *bytes += floats * sizeof(float);
    return malloc(floats * sizeof(float));
}

/* The activation forms (ggml_dot.h's EM_GGML_READS_*) the model's weights' dot products read in
 * precision ggml with the kernel's tiles. */
static unsigned ggml_forms_read(const em_model *m, const em_ggml_kernel *kernel) {
    unsigned reads = 0;
    for (uint64_t i = 0; i < m->tensor_count; i++) {
        int column = em_ggml_dot_type_of(m->tensors[i].type);
        if (column >= 0) reads |= em_ggml_kernel_reads(kernel, column);
    }
    return reads;
}

/* Makes the activations and scratch hold T rows, windows of at most `longest` positions. */
static em_status reserve(em_llama_forward *f, int T, int longest) {
    const em_llama_config *c = &f->model->config;
    const em_llama_shard *sh = &f->shard;
    size_t D = (size_t)c->dim, F = (size_t)sh->ffn_dim, QD = (size_t)sh->n_heads * c->head_dim;
    size_t KVD = (size_t)sh->n_kv_heads * c->head_dim;
    /* per thread: the largest of a matmul tile for each input width, the fused gate and up
     * tiles, attention, the head; shared: the packed xn */
    size_t need = em_attention_scratch_floats(longest, c->head_dim);
    int64_t widths[3] = {c->dim, (int64_t)F, (int64_t)QD};
    for (int i = 0; i < 3; i++) {
        size_t tile = em_matmul_tile_floats(T, widths[i], EM_MATMUL_TILE_ROWS);
        if (tile > need) need = tile;
    }
    if (em_matmul_swiglu_floats(T, c->dim) > need) need = em_matmul_swiglu_floats(T, c->dim);
    if (em_output_head_scratch_floats(T, c->dim) > need) {
        need = em_output_head_scratch_floats(T, c->dim);
    }
    em_status err = em_scratch_reserve(&f->scratch, need, em_gemm_packed_floats(T, c->dim));
    size_t widest = D > F ? D : F; /* the widest input of a product */
    if (!err && f->scratch.ggml)
        err = em_q8_reserve(&f->scratch.q8, T, (int)(widest > QD ? widest : QD));
    unsigned reads = f->scratch.ggml ? ggml_forms_read(f->model, f->scratch.ggml) : 0;
    if (!err && f->scratch.ggml && f->scratch.ggml->prepare_k) {
        /* Q6_K's lanes for T tokens, or for the few of a product that reads them only then */
        int K = (int)(widest > QD ? widest : QD),
            q6k_tokens = em_ggml_reads_q6k_lanes(reads, T) ? T : EM_GGML_FEW_TOKENS;
        err = em_q8_reserve_k_lanes(&f->scratch.q8, T, K, reads & EM_GGML_READS_Q4K_LANES, false);
        if (!err && em_ggml_reads_q6k_lanes(reads, 1))
            err = em_q8_reserve_k_lanes(&f->scratch.q8, q6k_tokens, K, false, true);
    }
    if (!err && (reads & EM_GGML_READS_F16))
        err = em_q8_reserve_f16(&f->scratch.q8, T, (int)(widest > QD ? widest : QD));
    if (!err && f->scratch.bf16)
        err = em_scratch_reserve_bf16(
            &f->scratch,
            em_bf16_packed_words(f->scratch.bf16, T, (int)(widest > QD ? widest : QD)));
    if (err) return err;
    if (T <= f->capacity) return NULL;
    free_activations(f);
    size_t t = (size_t)T, *bytes = &f->activation_bytes;
    f->x = alloc_floats(t * D, bytes);
    f->xn = alloc_floats(t * D, bytes);
    bool tp = f->groups.tp.size > 1, cp = f->groups.cp.size > 1;
    bool need_y = tp || c->post_norms;
    f->y = need_y ? alloc_floats(t * D, bytes) : NULL;
    f->q = alloc_floats(t * QD, bytes);
    f->att_packed = alloc_floats(em_gemm_packed_floats(T, (int)QD), bytes);
    f->k = alloc_floats(t * KVD, bytes);
    f->v = alloc_floats(t * KVD, bytes);
    f->vt = alloc_floats(em_attention_vt_floats(T, sh->n_kv_heads, c->head_dim), bytes);
    f->h_packed = alloc_floats(em_gemm_packed_floats(T, (int)F), bytes);
    f->rope = alloc_floats(t * (size_t)c->rope_dim, bytes);
    f->ring = cp ? alloc_floats(em_ring_attention_state_floats(T, sh->n_heads, c->head_dim), bytes)
                 : NULL;
    f->rope_swa = c->rope_freq_base_swa > 0 ? alloc_floats(t * (size_t)c->rope_dim, bytes) : NULL;
    if (!f->x || !f->xn || (need_y && !f->y) || !f->q || !f->k || !f->v || !f->vt ||
        !f->att_packed || !f->h_packed || !f->rope || (cp && !f->ring) ||
        (c->rope_freq_base_swa > 0 && !f->rope_swa)) {
        free_activations(f);
        return em_error_new(EM_EXIT_RUNTIME, "out of memory for the activations of %d positions",
                            T);
    }
    f->capacity = T;
    return NULL;
}

/* Makes the key arrays hold each window's kept rows (before[w]) and its own. */
static em_status reserve_window_keys(em_llama_forward *f, const em_segments *windows,
                                     const int32_t *before) {
    window_keys *keys = &f->keys;
    const em_llama_config *c = &f->model->config;
    if (windows->count + 1 > keys->slots) {
        keys->slots = windows->count + 1;
        keys->start = em_xrealloc(keys->start, (size_t)keys->slots * sizeof(int32_t));
    }
    keys->start[0] = 0;
    for (int w = 0; w < windows->count; w++)
        keys->start[w + 1] = keys->start[w] + before[w] + windows->start[w + 1] - windows->start[w];
    int rows = keys->start[windows->count];
    if (rows <= keys->capacity) return NULL;
    size_t kv = (size_t)f->shard.n_kv_heads * c->head_dim;
    size_t vt = em_attention_vt_floats(rows, f->shard.n_kv_heads, c->head_dim);
    free(keys->k);
    free(keys->v);
    free(keys->vt);
    keys->k = malloc((size_t)rows * kv * sizeof(float));
    keys->v = malloc((size_t)rows * kv * sizeof(float));
    keys->vt = malloc(vt * sizeof(float));
    keys->capacity = 0;
    if (!keys->k || !keys->v || !keys->vt)
        return em_error_new(EM_EXIT_RUNTIME,
                            "out of memory for the keys of windows after kept ones (%d rows)",
                            rows);
    keys->capacity = rows;
    return NULL;
}

/* y (T, n) += b (n) on every row */
static void add_bias(float *y, const float *b, int T, int n, int threads) {
#pragma omp parallel for num_threads(threads) if ((int64_t)T * n >= EM_PARALLEL_MIN_ELEMENTS)
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < n; i++) y[(size_t)t * n + i] += b[i];
    }
}

/* Hands the observer x (T, K), row-major (packed false) or packed in GEMM panels. */
static void observe(const em_llama_forward *f, int layer, em_linear_site site, const float *x,
                    int T, int K, bool packed) {
    size_t width = (size_t)em_gemm_panel_width(T); /* of the packed panels */
    em_linear_input in = {x, T, K, (size_t)K * width, packed ? 1 : (size_t)K, packed ? width : 1};
    f->observer.observe(f->observer.user, layer, site, &in);
}

/* The kernels of the composition (llama_block.h); b is the em_llama_forward. */

static em_status cpu_begin(void *b, const int32_t *input, const int32_t *positions,
                           const em_segments *windows) {
    em_llama_forward *f = b;
    const em_model *m = f->model;
    const em_llama_config *c = &m->config;
    int T = windows->start[windows->count];
    /* windows after kept rows attend to those as well as to their own */
    const int32_t *before = f->kept ? f->kept->before : NULL;
    int longest = 0;
    f->attend_kept = false;
    for (int w = 0; w < windows->count; w++) {
        int keys = windows->start[w + 1] - windows->start[w] + (before ? before[w] : 0);
        if (keys > longest) longest = keys;
        if (before && before[w] > 0) f->attend_kept = true;
    }
    em_status err = reserve(f, T, longest);
    if (!err && f->attend_kept) err = reserve_window_keys(f, windows, before);
    if (err) return err;
    if (windows->count + 1 > f->window_slots) {
        f->window_slots = windows->count + 1;
        f->window_start = em_xrealloc(f->window_start, (size_t)f->window_slots * sizeof(int32_t));
    }
    memcpy(f->window_start, windows->start, (size_t)(windows->count + 1) * sizeof(int32_t));
    f->windows = windows->count;
    int D = c->dim;
    /* x (T, D) = embedding rows of the input tokens */
#pragma omp parallel for num_threads(f->threads) if ((int64_t)T * D >= EM_PARALLEL_MIN_ELEMENTS)
    for (int t = 0; t < T; t++) {
        float *xt = f->x + (size_t)t * D;
        em_rows_to_float(m->tok_embd, input[t], 1, xt, D);
        if (c->embed_scale != 1.0f)
            for (int i = 0; i < D; i++) xt[i] *= c->embed_scale;
    }
    int32_t *after = NULL; /* a window's positions follow its kept rows */
    if (f->attend_kept) {
        after = em_xmalloc((size_t)T * sizeof *after);
        for (int w = 0; w < windows->count; w++)
            for (int t = windows->start[w]; t < windows->start[w + 1]; t++)
                after[t] = before[w] + (positions ? positions[t] : t);
        positions = after;
    }
    em_rope_table(c, m->rope_freqs ? m->rope_freqs->data : NULL, positions, T, f->rope);
    if (f->rope_swa) {
        em_llama_config local = em_rope_config_swa(c);
        em_rope_table(&local, NULL, positions, T, f->rope_swa);
    }
    free(after);
    return NULL;
}

static void cpu_norm(void *b, int layer, bool ffn, int T) {
    em_llama_forward *f = b;
    const em_llama_config *c = &f->model->config;
    const layer_vectors *lv = &f->layers[layer];
    em_rmsnorm(f->x, ffn ? lv->ffn_norm : lv->attn_norm, T, c->dim, c->rms_eps, f->xn, f->threads);
}

static void cpu_qkv(void *b, int layer, int T) {
    em_llama_forward *f = b;
    const em_llama_config *c = &f->model->config;
    const em_llama_shard_layer *w = &f->shard.layers[layer];
    int H = f->shard.n_heads, KV = f->shard.n_kv_heads, hd = c->head_dim;
    int QD = H * hd, KVD = KV * hd;
    em_scratch *s = &f->scratch;
    /* q (T, QD), k (T, KVD), v (T, KVD) */
    const em_tensor *qkv_w[3] = {&w->wq, &w->wk, &w->wv};
    float *qkv[3] = {f->q, f->k, f->v};
    if (f->observer.observe) observe(f, layer, EM_LINEAR_QKV, f->xn, T, c->dim, false);
    em_matmul_pack(f->xn, T, c->dim, s->packed, s);
    em_matmul_packed(s->packed, T, 3, qkv_w, qkv, false, s);
    if (w->bq) {
        add_bias(f->q, w->bq, T, QD, f->threads);
        add_bias(f->k, w->bk, T, KVD, f->threads);
        add_bias(f->v, w->bv, T, KVD, f->threads);
    }
    if (c->qk_norm) { /* each head's (hd) values as a row */
        const layer_vectors *lv = &f->layers[layer];
        em_rmsnorm(f->q, lv->q_norm, T * H, hd, c->rms_eps, f->q, f->threads);
        em_rmsnorm(f->k, lv->k_norm, T * KV, hd, c->rms_eps, f->k, f->threads);
    }
    const float *rope = f->rope_swa && em_layer_is_sliding(c, layer) ? f->rope_swa : f->rope;
    em_rope_apply(f->q, T, QD, H, hd, c->rope_dim, rope, f->threads);
    em_rope_apply(f->k, T, KVD, KV, hd, c->rope_dim, rope, f->threads);
}

/* How the layer's scores are scaled, soft-capped and windowed. */
static em_attention_mask layer_mask(const em_llama_config *c, int layer) {
    return (em_attention_mask){
        .scale = 1.0f / sqrtf((float)c->attn_scale_base),
        .softcap = c->attn_softcap,
        .window = em_layer_is_sliding(c, layer) ? c->sliding_window : 0,
    };
}

static void cpu_attention(void *b, int layer, int T) {
    em_llama_forward *f = b;
    const em_llama_config *c = &f->model->config;
    em_attention_mask mask = layer_mask(c, layer);
    em_segments windows = {f->windows, f->window_start};
    const em_kept_keys *kept = f->kept;
    size_t kv = (size_t)f->shard.n_kv_heads * c->head_dim;
    if (kept && kept->keep) { /* each window's own rows after its kept ones */
        for (int w = 0; w < f->windows; w++) {
            size_t to = (size_t)layer * kept->layer_stride + (size_t)kept->before[w] * kv;
            size_t from = (size_t)f->window_start[w] * kv;
            size_t own = (size_t)(f->window_start[w + 1] - f->window_start[w]) * kv;
            memcpy(kept->k[w] + to, f->k + from, own * sizeof(float));
            memcpy(kept->v[w] + to, f->v + from, own * sizeof(float));
        }
    }
    if (!f->attend_kept) {
        /* att (T, QD), packed, within each window */
        em_attention(f->q, f->k, f->v, &windows, f->shard.n_heads, f->shard.n_kv_heads, c->head_dim,
                     &mask, f->att_packed, f->vt, &f->scratch);
        return;
    }
    /* each window's keys and values: its kept rows, then its own (where the cache keeps them,
     * there already; else side by side in keys) */
    window_keys *keys = &f->keys;
    const float **kw = em_xmalloc(2 * (size_t)f->windows * sizeof *kw), **vw = kw + f->windows;
    for (int w = 0; w < f->windows; w++) {
        size_t to = (size_t)keys->start[w] * kv, from = (size_t)f->window_start[w] * kv;
        size_t earlier = (size_t)kept->before[w] * kv, layer0 = (size_t)layer * kept->layer_stride;
        size_t own = (size_t)(f->window_start[w + 1] - f->window_start[w]) * kv;
        if (kept->keep) {
            kw[w] = kept->k[w] + layer0;
            vw[w] = kept->v[w] + layer0;
            continue;
        }
        memcpy(keys->k + to, kept->k[w] + layer0, earlier * sizeof(float));
        memcpy(keys->v + to, kept->v[w] + layer0, earlier * sizeof(float));
        memcpy(keys->k + to + earlier, f->k + from, own * sizeof(float));
        memcpy(keys->v + to + earlier, f->v + from, own * sizeof(float));
        kw[w] = keys->k + to;
        vw[w] = keys->v + to;
    }
    em_segments key_windows = {f->windows, keys->start};
    /* att (T, QD), packed, of the windows' own positions only */
    em_attention_queries(f->q, f->window_start, kw, vw, &key_windows, f->shard.n_heads,
                         f->shard.n_kv_heads, c->head_dim, &mask, f->att_packed, keys->vt,
                         &f->scratch);
    free(kw);
}

static void cpu_local_kv(void *b, float **k, float **v, int *kv_width) {
    em_llama_forward *f = b;
    *k = f->k;
    *v = f->v;
    *kv_width = f->shard.n_kv_heads * f->model->config.head_dim;
}

static void cpu_attention_block(void *b, int layer, int T, const int32_t *qpos, const float *k,
                                const float *v, const int32_t *kpos, int nk, bool first) {
    em_llama_forward *f = b;
    em_attention_mask mask = layer_mask(&f->model->config, layer);
    em_ring_attention_block(f->q, qpos, T, k, v, kpos, nk, f->shard.n_heads, f->shard.n_kv_heads,
                            f->model->config.head_dim, &mask, f->ring, first, f->threads);
}

/* att (T, QD) from the ring state, written over q (no longer needed), then packed */
static void cpu_attention_finish(void *b, int T) {
    em_llama_forward *f = b;
    int QD = f->shard.n_heads * f->model->config.head_dim;
    em_ring_attention_finish(f->ring, T, f->shard.n_heads, f->model->config.head_dim, f->q,
                             f->threads);
    em_matmul_pack(f->q, T, QD, f->att_packed, &f->scratch);
}

static void cpu_attn_out(void *b, int layer, int T, bool partial) {
    em_llama_forward *f = b;
    const em_tensor *wo = &f->shard.layers[layer].wo;
    if (f->observer.observe)
        observe(f, layer, EM_LINEAR_ATTN_OUT, f->att_packed, T,
                f->shard.n_heads * f->model->config.head_dim, true);
    /* x += att Wo^T, or y = att Wo_shard^T */
    em_matmul_packed(f->att_packed, T, 1, &wo, partial ? &f->y : &f->x, !partial, &f->scratch);
}

static void cpu_mlp(void *b, int layer, int T, bool partial) {
    em_llama_forward *f = b;
    const em_llama_shard_layer *w = &f->shard.layers[layer];
    em_scratch *s = &f->scratch;
    const em_tensor *down = &w->w_down;
    /* h (T, F) = silu(xn Wgate^T) * (xn Wup^T); x += h Wdown^T, or y = h Wdown_shard^T */
    if (f->observer.observe)
        observe(f, layer, EM_LINEAR_GATE_UP, f->xn, T, f->model->config.dim, false);
    em_matmul_pack(f->xn, T, f->model->config.dim, s->packed, s);
    em_matmul_swiglu_packed(s->packed, T, &w->w_gate, &w->w_up, f->model->config.activation,
                            f->h_packed, s);
    if (f->observer.observe)
        observe(f, layer, EM_LINEAR_DOWN, f->h_packed, T, f->shard.ffn_dim, true);
    em_matmul_packed(f->h_packed, T, 1, &down, partial ? &f->y : &f->x, !partial, s);
}

static float *cpu_partial(void *b) {
    return ((em_llama_forward *)b)->y;
}

static void cpu_add_partials(void *b, const float *all, int parts, int T) {
    em_llama_forward *f = b;
    size_t n = (size_t)T * (size_t)f->model->config.dim;
#pragma omp parallel for num_threads(f->threads) if ((int64_t)n >= EM_PARALLEL_MIN_ELEMENTS)
    for (size_t i = 0; i < n; i++) {
        float sum = all[i];
        for (int p = 1; p < parts; p++) sum += all[(size_t)p * n + i];
        f->x[i] += sum;
    }
}

/* x += RMSNorm(all[0] + ... + all[parts-1]) * the layer's post-norm; all NULL: y alone. */
static void cpu_add_normed(void *b, int layer, bool ffn, const float *all, int parts, int T) {
    em_llama_forward *f = b;
    const em_llama_config *c = &f->model->config;
    size_t n = (size_t)T * (size_t)c->dim;
    if (all) {
#pragma omp parallel for num_threads(f->threads) if ((int64_t)n >= EM_PARALLEL_MIN_ELEMENTS)
        for (size_t i = 0; i < n; i++) {
            float sum = all[i];
            for (int p = 1; p < parts; p++) sum += all[(size_t)p * n + i];
            f->y[i] = sum;
        }
    }
    const layer_vectors *lv = &f->layers[layer];
    em_rmsnorm(f->y, ffn ? lv->ffn_post_norm : lv->attn_post_norm, T, c->dim, c->rms_eps, f->y,
               f->threads);
#pragma omp parallel for num_threads(f->threads) if ((int64_t)n >= EM_PARALLEL_MIN_ELEMENTS)
    for (size_t i = 0; i < n; i++) f->x[i] += f->y[i];
}

static void cpu_head_tiles(void *b, int from, int n, const int32_t *target, em_head_tile *part,
                           float *target_logit) {
    em_llama_forward *f = b;
    const em_llama_config *c = &f->model->config;
    int D = c->dim;
    /* xn (n, D): the head sees only the scored positions */
    em_rmsnorm(f->x + (size_t)from * D, f->output_norm, n, D, c->rms_eps, f->xn, f->threads);
    em_output_head_tiles(f->xn, n, f->model->output, f->shard.vocab_row0, f->shard.vocab_rows,
                         c->final_softcap, target, part, target_logit, &f->scratch);
}

static const em_llama_kernels cpu_kernels = {
    .begin = cpu_begin,
    .norm = cpu_norm,
    .qkv = cpu_qkv,
    .attention = cpu_attention,
    .local_kv = cpu_local_kv,
    .attention_block = cpu_attention_block,
    .attention_finish = cpu_attention_finish,
    .attn_out = cpu_attn_out,
    .mlp = cpu_mlp,
    .partial = cpu_partial,
    .add_partials = cpu_add_partials,
    .add_normed = cpu_add_normed,
    .head_tiles = cpu_head_tiles,
};

em_status em_llama_forward_batch(em_llama_forward *f, const em_batch_window *windows, int count) {
    const em_llama_config *c = &f->model->config;
    return em_llama_compose(&cpu_kernels, f, c->n_layers, c->dim, c->post_norms, c->n_vocab,
                            &f->groups, f->threads, windows, count);
}

em_status em_llama_forward_refuse_cp(const em_llama_forward *f, const char *what) {
    if (f->groups.cp.size == 1) return NULL;
    return em_error_new(EM_EXIT_BAD_INPUT, "a forward with cp = %d does not %s", f->groups.cp.size,
                        what);
}

em_status em_llama_forward_with_kept(em_llama_forward *f, const em_kept_keys *kept,
                                     const em_batch_window *windows, int count) {
    em_status err =
        em_llama_forward_refuse_cp(f, "keep keys and values (shared prefixes and decoding need "
                                      "cp = 1)");
    if (err) return err;
    const em_llama_config *c = &f->model->config;
    f->kept = kept;
    err = em_llama_compose(&cpu_kernels, f, c->n_layers, c->dim, c->post_norms, c->n_vocab,
                           &f->groups, f->threads, windows, count);
    f->kept = NULL;
    f->attend_kept = false;
    return err;
}

const em_llama_config *em_llama_forward_config(const em_llama_forward *f) {
    return &f->model->config;
}

int em_llama_forward_kv_width(const em_llama_forward *f) {
    return f->shard.n_kv_heads * f->model->config.head_dim;
}

em_status em_llama_forward_logits(em_llama_forward *f, int row, float *logits) {
    const em_llama_config *c = &f->model->config;
    const em_forward_group *tp = &f->groups.tp;
    em_rmsnorm(f->x + (size_t)row * c->dim, f->output_norm, 1, c->dim, c->rms_eps, f->xn,
               f->threads);
    float *mine = tp->size > 1 ? em_xcalloc((size_t)c->n_vocab + 1, sizeof *mine) : logits;
    em_output_head_logits(f->xn, 1, f->model->output, f->shard.vocab_row0, f->shard.vocab_rows,
                          c->final_softcap, mine, &f->scratch);
    em_status err = em_forward_gather_vocab(tp, c->n_vocab, mine, logits);
    if (mine != logits) free(mine);
    return err;
}

/* Keeps room for each layer's keys and values of a prefix of P positions. */
static em_status reserve_prefix(em_llama_forward *f, int P) {
    size_t floats =
        (size_t)f->model->config.n_layers * (size_t)P * (size_t)em_llama_forward_kv_width(f);
    if (floats <= f->prefix_floats) return NULL;
    free(f->prefix_k);
    free(f->prefix_v);
    f->prefix_k = malloc(floats * sizeof(float));
    f->prefix_v = malloc(floats * sizeof(float));
    f->prefix_floats = 0;
    if (!f->prefix_k || !f->prefix_v)
        return em_error_new(EM_EXIT_RUNTIME,
                            "out of memory for the keys and values of a prefix of %d positions", P);
    f->prefix_floats = floats;
    return NULL;
}

em_status em_llama_forward_shared_prefixes(em_llama_forward *f, const em_shared_prefix *prefixes,
                                           int count) {
    em_status err =
        em_llama_forward_refuse_cp(f, "score shared prefixes (score the whole windows)");
    if (err) return err;
    int positions = 0, continuations = 0;
    for (int g = 0; g < count; g++) {
        if (prefixes[g].P < 1)
            return em_error_new(EM_EXIT_BAD_INPUT, "a shared prefix of %d positions",
                                prefixes[g].P);
        positions += prefixes[g].P;
        continuations += prefixes[g].count;
    }
    if (continuations == 0) return NULL;
    err = reserve_prefix(f, positions);
    if (err) return err;
    /* the kept rows are (layers, positions, kv): each prefix's rows follow the earlier prefixes' in
     * every layer (row counts the rows before them) */
    size_t kv = (size_t)em_llama_forward_kv_width(f), stride = (size_t)positions * kv;
    int n = count > continuations ? count : continuations;
    float **k = em_xmalloc((size_t)n * sizeof *k), **v = em_xmalloc((size_t)n * sizeof *v);
    int32_t *before = em_xcalloc((size_t)n, sizeof *before);
    em_batch_window *windows = em_xmalloc((size_t)n * sizeof *windows);
    /* the prefixes' layers only, keeping their keys and values (nothing is scored: their targets
     * stand for the check of the window's ids) */
    size_t row = 0;
    for (int g = 0; g < count; g++) {
        const em_shared_prefix *p = &prefixes[g];
        windows[g] = (em_batch_window){p->ids, p->ids, p->P, p->P - 1, NULL, NULL};
        k[g] = f->prefix_k + row * kv;
        v[g] = f->prefix_v + row * kv;
        row += (size_t)p->P;
    }
    em_kept_keys keep = {k, v, before, stride, true};
    err = em_llama_forward_with_kept(f, &keep, windows, count);
    if (err) err = em_error_prefix(err, "shared prefix");
    /* every continuation after its prefix's rows */
    int w = 0;
    row = 0;
    for (int g = 0; g < count && !err; g++) {
        const em_shared_prefix *p = &prefixes[g];
        for (int c = 0; c < p->count; c++, w++) {
            windows[w] = p->continuations[c];
            k[w] = f->prefix_k + row * kv;
            v[w] = f->prefix_v + row * kv;
            before[w] = p->P;
        }
        row += (size_t)p->P;
    }
    em_kept_keys attend = {k, v, before, stride, false};
    if (!err) err = em_llama_forward_with_kept(f, &attend, windows, continuations);
    free(k);
    free(v);
    free(before);
    free(windows);
    return err;
}

em_status em_llama_forward_window(em_llama_forward *f, const int32_t *input, const int32_t *target,
                                  int T, int score_from, double *nll, int32_t *argmax) {
    em_batch_window one = {input, target, T, score_from, nll, argmax};
    return em_llama_forward_batch(f, &one, 1);
}

double em_llama_forward_flops(const em_llama_config *c, int T, int score_from) {
    double D = c->dim, F = c->ffn_dim, QD = (double)c->n_heads * c->head_dim;
    double KVD = (double)c->n_kv_heads * c->head_dim;
    double projections = 2.0 * T * (D * QD + 2.0 * D * KVD + QD * D + 3.0 * D * F);
    /* scores and P.V: query i meets keys 0..i, head_dim multiply-adds each, twice */
    double attention = 2.0 * 2.0 * QD * ((double)T * (T + 1) / 2.0);
    double head = 2.0 * (double)(T - score_from) * D * c->n_vocab;
    return c->n_layers * (projections + attention) + head;
}

size_t em_llama_forward_memory(const em_llama_forward *f) {
    const em_scratch *s = &f->scratch;
    size_t scratch = ((size_t)s->threads * s->floats + s->packed_floats) * sizeof(float) +
                     s->q8.capacity * (EM_Q8_BLOCK + 2 * sizeof(float) + sizeof(int32_t)) +
                     s->q8.kcapacity * (EM_Q8K_BLOCK + sizeof(float) + 16 * sizeof(int16_t));
    size_t head = em_output_head_partial_bytes(f->capacity, f->model->config.n_vocab);
    const window_keys *wk = &f->keys;
    size_t kv = (size_t)em_llama_forward_kv_width(f);
    size_t keys = 2 * (size_t)wk->capacity * kv +
                  (wk->capacity ? em_attention_vt_floats(wk->capacity, f->shard.n_kv_heads,
                                                         f->model->config.head_dim)
                                : 0);
    size_t prefix = (2 * f->prefix_floats + keys) * sizeof(float);
    return f->activation_bytes + scratch + head + prefix;
}

size_t em_llama_forward_weight_bytes(const em_llama_forward *f) {
    return f->shard.weight_bytes;
}

void em_llama_forward_observe(em_llama_forward *f, const em_linear_observer *observer) {
    f->observer = observer ? *observer : (em_linear_observer){0};
}

em_status em_llama_forward_set_precision(em_llama_forward *f, em_precision precision) {
    f->scratch.ggml = NULL;
    f->scratch.bf16 = NULL;
    if (precision == EM_PRECISION_GGML) return em_scratch_use_ggml(&f->scratch);
    if (precision == EM_PRECISION_BF16) return em_scratch_use_bf16(&f->scratch);
    return NULL;
}

const char *em_llama_forward_kernel(const em_llama_forward *f) {
    return f->scratch.kernel_name;
}

const char *em_llama_forward_ggml_kernel(const em_llama_forward *f) {
    return f->scratch.ggml ? f->scratch.ggml->name : NULL;
}

const char *em_llama_forward_bf16_kernel(const em_llama_forward *f) {
    return f->scratch.bf16 ? f->scratch.bf16->name : NULL;
}

void em_llama_forward_free(em_llama_forward *f) {
    if (!f) return;
    for (int l = 0; f->layers && l < f->model->config.n_layers; l++) {
        free(f->layers[l].attn_norm);
        free(f->layers[l].ffn_norm);
        free(f->layers[l].q_norm);
        free(f->layers[l].k_norm);
        free(f->layers[l].attn_post_norm);
        free(f->layers[l].ffn_post_norm);
    }
    free(f->layers);
    free(f->output_norm);
    free(f->window_start);
    free(f->prefix_k);
    free(f->prefix_v);
    free(f->keys.start);
    free(f->keys.k);
    free(f->keys.v);
    free(f->keys.vt);
    free_activations(f);
    em_scratch_free(&f->scratch);
    em_llama_shard_free(&f->shard, f->model->config.n_layers);
    free(f);
}

/* The `cpu` row of the forward-backend table. It computes F32 matrices in FP32 and quantized ones
 * from their blocks: the default weight storage, the only one the stage lets through
 * (weight_storage false); either precision. */
static em_status backend_create(const em_model *model, const em_forward_groups *groups, int threads,
                                const em_forward_options *options, void **out) {
    em_llama_forward *f;
    em_status err = em_llama_forward_new_split(model, groups, threads, &f);
    if (!err) err = em_llama_forward_set_precision(f, options->precision);
    if (err) {
        em_llama_forward_free(f);
        return err;
    }
    *out = f;
    return NULL;
}
static em_status backend_score_batch(void *f, const em_batch_window *windows, int count) {
    return em_llama_forward_batch(f, windows, count);
}
static em_status backend_score_shared_prefixes(void *f, const em_shared_prefix *prefixes,
                                               int count) {
    return em_llama_forward_shared_prefixes(f, prefixes, count);
}
/* Both forwards' layers over the window, each one's final norm of the scored positions into its
 * xn (n, D), then one paired head for both (pair_head.h): the nll and argmax score_batch gives
 * and the KL divergence, with each head's logits computed once. */
static em_status layers_and_final_norm(em_llama_forward *f, const int32_t *input,
                                       const int32_t *target, int T, int score_from) {
    const em_llama_config *c = &f->model->config;
    em_batch_window one = {input, target, T, score_from, NULL, NULL}; /* the layers only */
    em_status err = em_llama_compose(&cpu_kernels, f, c->n_layers, c->dim, c->post_norms,
                                     c->n_vocab, &f->groups, f->threads, &one, 1);
    if (err) return err;
    em_rmsnorm(f->x + (size_t)score_from * c->dim, f->output_norm, T - score_from, c->dim,
               c->rms_eps, f->xn, f->threads);
    return NULL;
}
static em_status backend_score_pair(void *ref, void *cand, const int32_t *input,
                                    const int32_t *target, int T, int score_from, double *nll_ref,
                                    int32_t *argmax_ref, double *nll_cand, int32_t *argmax_cand,
                                    double *kl) {
    em_llama_forward *r = ref, *c = cand;
    if (r->groups.tp.size > 1 || r->groups.cp.size > 1 || c->groups.tp.size > 1 ||
        c->groups.cp.size > 1)
        return em_error_new(EM_EXIT_BAD_INPUT, "paired scoring needs tp = cp = 1");
    em_status err = layers_and_final_norm(r, input, target, T, score_from);
    if (!err) err = layers_and_final_norm(c, input, target, T, score_from);
    if (err) return err;
    em_pair_side a = {r->xn,       r->model->output, r->model->config.final_softcap,
                      &r->scratch, nll_ref,          argmax_ref};
    em_pair_side b = {c->xn,       c->model->output, c->model->config.final_softcap,
                      &c->scratch, nll_cand,         argmax_cand};
    return em_pair_head(&a, &b, target + score_from, T - score_from, kl);
}
static em_status backend_decode_new(void *f, int sequences, int positions, void **out) {
    return em_cpu_decode_new(f, sequences, positions, (em_cpu_decode **)out);
}
static em_status backend_prefill(void *d, const int *slots, const int32_t *const *prompts,
                                 const int *lengths, int count, int32_t *next, float *logits) {
    return em_cpu_decode_prefill(d, slots, prompts, lengths, count, next, logits);
}
static em_status backend_step(void *d, const int *slots, const int32_t *tokens, int count,
                              int32_t *next, float *logits) {
    return em_cpu_decode_step(d, slots, tokens, count, next, logits);
}
static size_t backend_decode_memory(const void *d) {
    return em_cpu_decode_memory(d);
}
static void backend_decode_free(void *d) {
    em_cpu_decode_free(d);
}
static void backend_observe(void *f, const em_linear_observer *observer) {
    em_llama_forward_observe(f, observer);
}
/* the dot-product kernel in precision ggml, the BF16 kernel in bf16, else the GEMM microkernel */
static const char *backend_kernel(const void *f) {
    const char *ggml = em_llama_forward_ggml_kernel(f), *bf16 = em_llama_forward_bf16_kernel(f);
    return ggml ? ggml : bf16 ? bf16 : em_llama_forward_kernel(f);
}
static size_t backend_memory(const void *f) {
    return em_llama_forward_memory(f);
}
static size_t backend_weight_bytes(const void *f) {
    return em_llama_forward_weight_bytes(f);
}
static void backend_free(void *f) {
    em_llama_forward_free(f);
}

const em_forward_backend em_forward_backend_cpu = {
    .name = "cpu",
    /* one window per batch: the GEMM already reuses each converted weight tile across a window's
     * positions, so batching would only add activation memory */
    .batch_tokens = 1,
    .gpu_buffers = false,
    .weight_storage = false,
    .ggml_precision = true,
    .bf16_precision = true,
    .needs_gpu = false,
    .available = NULL,
    .create = backend_create,
    .score_batch = backend_score_batch,
    .score_shared_prefixes = backend_score_shared_prefixes,
    /* prefixes of about a window together: each converted weight tile then serves a window's
     * positions, where one example's context of ~100 positions would leave it mostly idle */
    .prefix_batch_tokens = 512,
    .score_pair = backend_score_pair,
    .decode_new = backend_decode_new,
    .prefill = backend_prefill,
    .step = backend_step,
    .decode_memory = backend_decode_memory,
    .decode_free = backend_decode_free,
    .observe = backend_observe,
    .kernel = backend_kernel,
    .memory = backend_memory,
    .weight_bytes = backend_weight_bytes,
    .free = backend_free,
};
