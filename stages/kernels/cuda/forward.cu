/* The `cuda` forward backend: device weights, the composition's kernels over device buffers and
 * the row of the forward-backend table (see cuda_forward.h). */
#include "stages/kernels/cuda/cuda_forward.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/kernels/cuda/kernels.cuh"
extern "C" { /* the C side: checks, RoPE tables, the composition, the type table */
#include "stages/kernels/cpu/dequantize.h"
#include "stages/kernels/cpu/llama_forward.h"
#include "stages/kernels/cpu/rope.h"
#include "stages/kernels/llama_block.h"
#include "stages/model/ggml_types.h"
}

#define STAGE_BYTES ((size_t)64 << 20)      /* upload staging: raw blocks or floats per chunk */
#define WORKSPACE_BYTES ((size_t)32 << 20)  /* cuBLAS workspace, one fixed buffer per forward */
#define HEAD_CHUNK_FLOATS ((size_t)1 << 26) /* logits of one vocabulary stretch (256 MiB) */
#define MAX_HEAD_DIM 256                    /* the attention kernel's limit (kernels.cu) */

typedef struct cuda_layer {
    em_dmat wq, wk, wv, wo, w_gate, w_up, w_down;
    float *attn_norm, *ffn_norm;           /* (D) */
    float *bq, *bk, *bv;                   /* (QD), (KVD), (KVD) or NULL */
    float *q_norm, *k_norm;                /* (hd) with qk_norm */
    float *attn_post_norm, *ffn_post_norm; /* (D) with post_norms */
} cuda_layer;

typedef struct em_cuda_forward {
    em_llama_config c;
    const em_model *model; /* NULL for a forward of generated weights */
    int threads;           /* host threads of the head's merge */
    cublasHandle_t blas;
    void *workspace;
    cuda_layer *layers;
    em_dmat tok_embd, output; /* output.data == tok_embd.data when tied */
    float *output_norm;       /* (D) */
    size_t weight_bytes;
    char fault[256]; /* the first cuBLAS or CUDA failure of the current window */
    /* device activations for `capacity` positions */
    int capacity;
    size_t activation_bytes;
    float *x, *xn, *y;      /* (T, D); y with post_norms */
    float *q, *att;         /* (T, QD) */
    float *k, *v;           /* (T, KVD) */
    float *gate, *up;       /* (T, F) */
    void *typed;            /* (T, max(D, QD, F)) BF16/F16 copy of a GEMM input */
    float *rope, *rope_swa; /* (T, rope_dim/2, 2); rope_swa with rope_freq_base_swa */
    int32_t *ids;           /* (T) */
    float *logits;          /* (rows, n) transposed logits of one stretch (head_floats) */
    em_head_tile *part;     /* (tiles, T) */
    float *target_logit;    /* (T) */
    /* RoPE tables of positions 0 .. capacity-1; rope and rope_swa hold the batch's rows of them */
    float *rope_table, *rope_swa_table;
    /* the current batch's windows (begin): host and device offsets, room for window_slots */
    em_cuda_segments windows;
    int32_t *window_start, *window_start_device;
    int window_slots;
} em_cuda_forward;

static em_status cuda_error(cudaError_t e, const char *what) {
    return em_error_new(EM_EXIT_RUNTIME, "cuda: %s: %s", what, cudaGetErrorString(e));
}

/* Records the first failure of a window (kernels of the composition return nothing). */
static void note(em_cuda_forward *f, const char *what, int code) {
    if (!f->fault[0]) snprintf(f->fault, sizeof f->fault, "%s failed (status %d)", what, code);
}

em_status em_cuda_available(void) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess)
        return em_error_new(EM_EXIT_BAD_INPUT, "no CUDA device (cudaGetDeviceCount: %s)",
                            cudaGetErrorString(e));
    if (count == 0)
        return em_error_new(EM_EXIT_BAD_INPUT, "no CUDA device (cudaGetDeviceCount: 0)");
    return NULL;
}

/* The device of this rank: its local rank (as the launcher gives it) modulo the devices it sees,
 * so CUDA_VISIBLE_DEVICES and Slurm's per-task GPU binding decide which ones those are. */
static em_status select_device(void) {
    em_status err = em_cuda_available();
    if (err) return err;
    int count = 0, local = 0;
    cudaGetDeviceCount(&count);
    const char *vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) {
            local = atoi(v);
            break;
        }
    }
    cudaError_t e = cudaSetDevice(local % count);
    return e == cudaSuccess ? NULL : cuda_error(e, "cudaSetDevice");
}

static em_status dev_alloc(void **p, size_t bytes, size_t *counter) {
    *p = NULL;
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
    if (e != cudaSuccess)
        return em_error_new(EM_EXIT_RUNTIME, "cuda: cannot allocate %.1f MiB of device memory: %s",
                            (double)bytes / (1 << 20), cudaGetErrorString(e));
    if (counter) *counter += bytes;
    return NULL;
}

/* A 1-D tensor (norm weight or bias) of n values, as floats on the device. */
static em_status upload_vector(em_cuda_forward *f, const em_tensor *t, int64_t n, float **out) {
    em_tensor row = *t;
    row.shape[0] = n;
    row.shape[1] = 1;
    float *host = (float *)em_xmalloc((size_t)n * sizeof *host);
    em_rows_to_float(&row, 0, 1, host, n);
    em_status err = dev_alloc((void **)out, (size_t)n * sizeof(float), &f->weight_bytes);
    if (!err) {
        cudaError_t e = cudaMemcpy(*out, host, (size_t)n * sizeof(float), cudaMemcpyHostToDevice);
        if (e != cudaSuccess) err = cuda_error(e, "uploading a vector");
    }
    free(host);
    return err;
}

/* A matrix {cols, rows} onto the device: F32, F16 and BF16 as they are; a type with a device
 * decoder as raw blocks, a stretch of rows at a time, dequantized to BF16 there; any other type
 * dequantized on the host through the type table, a stretch at a time, and rounded to BF16 on
 * the device. */
static em_status upload_matrix(em_cuda_forward *f, const em_tensor *t, em_dmat *out) {
    int64_t cols = t->shape[0], rows = t->shape[1], n = cols * rows;
    uint32_t type = (uint32_t)t->type;
    out->rows = rows;
    out->cols = cols;
    cudaError_t e = cudaSuccess;
    em_status err;
    if (type == EM_TENSOR_F32 || type == EM_TENSOR_F16 || type == EM_TENSOR_BF16) {
        out->type = type == EM_TENSOR_F32   ? CUDA_R_32F
                    : type == EM_TENSOR_F16 ? CUDA_R_16F
                                            : CUDA_R_16BF;
        size_t bytes = em_tensor_type_row_bytes(t->type, cols) * (size_t)rows;
        if ((err = dev_alloc(&out->data, bytes, &f->weight_bytes))) return err;
        e = cudaMemcpy(out->data, t->data, bytes, cudaMemcpyHostToDevice);
        return e == cudaSuccess ? NULL : em_error_prefix(cuda_error(e, "upload"), "%s", t->name);
    }
    out->type = CUDA_R_16BF;
    if ((err = dev_alloc(&out->data, (size_t)n * 2, &f->weight_bytes))) return err;
    __nv_bfloat16 *dst = (__nv_bfloat16 *)out->data;
    void *stage = NULL;
    if ((err = dev_alloc(&stage, STAGE_BYTES, NULL))) return err;
    int values = em_cuda_block_values(type);
    if (values) {
        size_t row_bytes = em_tensor_type_row_bytes(t->type, cols);
        int64_t chunk =
            (int64_t)(STAGE_BYTES / row_bytes) > 0 ? (int64_t)(STAGE_BYTES / row_bytes) : 1;
        for (int64_t r0 = 0; r0 < rows && e == cudaSuccess; r0 += chunk) {
            int64_t nr = rows - r0 < chunk ? rows - r0 : chunk;
            e = cudaMemcpy(stage, (const uint8_t *)t->data + (size_t)r0 * row_bytes,
                           (size_t)nr * row_bytes, cudaMemcpyHostToDevice);
            if (e == cudaSuccess)
                em_cuda_dequantize_bf16(type, (const uint8_t *)stage, nr * cols / values,
                                        dst + (size_t)r0 * cols);
        }
    } else {
        int64_t chunk = (int64_t)(STAGE_BYTES / sizeof(float) / (size_t)cols);
        if (chunk < 1) chunk = 1;
        float *host = (float *)em_xmalloc((size_t)chunk * (size_t)cols * sizeof *host);
        for (int64_t r0 = 0; r0 < rows && e == cudaSuccess; r0 += chunk) {
            int64_t nr = rows - r0 < chunk ? rows - r0 : chunk;
            em_rows_to_float(t, r0, nr, host, cols);
            e = cudaMemcpy(stage, host, (size_t)(nr * cols) * sizeof(float),
                           cudaMemcpyHostToDevice);
            if (e == cudaSuccess)
                em_cuda_f32_to_bf16((const float *)stage, dst + (size_t)r0 * cols, nr * cols);
        }
        free(host);
    }
    if (e == cudaSuccess) e = cudaDeviceSynchronize(); /* the staging buffer is freed next */
    cudaFree(stage);
    return e == cudaSuccess ? NULL : em_error_prefix(cuda_error(e, "upload"), "%s", t->name);
}

static void free_activations(em_cuda_forward *f) {
    void *bufs[] = {f->x,   f->xn,     f->y,    f->q,           f->att,  f->k,
                    f->v,   f->gate,   f->up,   f->typed,       f->rope, f->rope_swa,
                    f->ids, f->logits, f->part, f->target_logit};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) cudaFree(bufs[i]);
    f->x = f->xn = f->y = f->q = f->att = f->k = f->v = f->gate = f->up = NULL;
    f->rope = f->rope_swa = f->logits = f->target_logit = NULL;
    cudaFree(f->rope_table);
    cudaFree(f->rope_swa_table);
    f->rope_table = f->rope_swa_table = NULL;
    f->typed = NULL;
    f->ids = NULL;
    f->part = NULL;
    f->capacity = 0;
    f->activation_bytes = 0;
}

/* Vocabulary rows per head stretch for n positions: whole tiles, logits at most
 * HEAD_CHUNK_FLOATS. A function of n alone, so a window's stretches do not depend on others. */
static int head_rows_for(const em_llama_config *c, int n) {
    int64_t tiles = (int64_t)(HEAD_CHUNK_FLOATS / (size_t)n) / EM_HEAD_TILE_ROWS;
    if (tiles < 1) tiles = 1;
    if (tiles > em_head_tiles(c->n_vocab)) tiles = em_head_tiles(c->n_vocab);
    return (int)(tiles * EM_HEAD_TILE_ROWS);
}

/* Floats of the logits buffer for windows of up to T scored positions: every n <= T has
 * head_rows_for(n) n <= min(HEAD_CHUNK_FLOATS, all tiles' rows x T), and at least one tile. */
static size_t head_floats(const em_llama_config *c, int T) {
    size_t all = (size_t)em_head_tiles(c->n_vocab) * EM_HEAD_TILE_ROWS * (size_t)T;
    size_t floats = all < HEAD_CHUNK_FLOATS ? all : HEAD_CHUNK_FLOATS;
    size_t one_tile = (size_t)EM_HEAD_TILE_ROWS * (size_t)T;
    return floats > one_tile ? floats : one_tile;
}

/* Makes the activations hold T rows (a batch's positions); the RoPE tables of positions cover
 * 0 .. capacity-1, so every window of the batch (at most T positions) finds its rows there. */
static em_status reserve(em_cuda_forward *f, int T) {
    if (T <= f->capacity) return NULL;
    free_activations(f);
    const em_llama_config *c = &f->c;
    size_t t = (size_t)T, D = (size_t)c->dim, F = (size_t)c->ffn_dim;
    size_t QD = (size_t)c->n_heads * c->head_dim, KVD = (size_t)c->n_kv_heads * c->head_dim;
    size_t widest = D > QD ? D : QD;
    widest = widest > F ? widest : F;
    size_t half = (size_t)c->rope_dim / 2, *bytes = &f->activation_bytes;
    size_t tiles = (size_t)em_head_tiles(c->n_vocab);
    em_status err = NULL;
    struct {
        void **p;
        size_t bytes;
    } want[] = {
        {(void **)&f->x, t * D * 4},
        {(void **)&f->xn, t * D * 4},
        {(void **)&f->y, c->post_norms ? t * D * 4 : 0},
        {(void **)&f->q, t * QD * 4},
        {(void **)&f->att, t * QD * 4},
        {(void **)&f->k, t * KVD * 4},
        {(void **)&f->v, t * KVD * 4},
        {(void **)&f->gate, t * F * 4},
        {(void **)&f->up, t * F * 4},
        {&f->typed, t * widest * 2},
        {(void **)&f->rope, t * half * 2 * 4},
        {(void **)&f->rope_swa, c->rope_freq_base_swa > 0 ? t * half * 2 * 4 : 0},
        {(void **)&f->rope_table, t * half * 2 * 4},
        {(void **)&f->rope_swa_table, c->rope_freq_base_swa > 0 ? t * half * 2 * 4 : 0},
        {(void **)&f->ids, t * 4},
        {(void **)&f->logits, head_floats(c, T) * 4},
        {(void **)&f->part, tiles * t * sizeof(em_head_tile)},
        {(void **)&f->target_logit, t * 4},
    };
    for (size_t i = 0; i < sizeof want / sizeof *want && !err; i++)
        if (want[i].bytes) err = dev_alloc(want[i].p, want[i].bytes, bytes);
    if (err) {
        free_activations(f);
        return em_error_prefix(err, "activations of %d positions", T);
    }
    /* the RoPE tables of the CPU path (rope.h), computed in double on the host */
    float *table = (float *)em_xmalloc(t * half * 2 * sizeof *table);
    const float *factors =
        f->model && f->model->rope_freqs ? (const float *)f->model->rope_freqs->data : NULL;
    em_rope_table(c, factors, NULL, T, table);
    cudaError_t e = cudaMemcpy(f->rope_table, table, t * half * 2 * 4, cudaMemcpyHostToDevice);
    if (e == cudaSuccess && f->rope_swa_table) {
        em_llama_config local = em_rope_config_swa(c);
        em_rope_table(&local, NULL, NULL, T, table);
        e = cudaMemcpy(f->rope_swa_table, table, t * half * 2 * 4, cudaMemcpyHostToDevice);
    }
    free(table);
    if (e != cudaSuccess) {
        free_activations(f);
        return cuda_error(e, "uploading the RoPE table");
    }
    f->capacity = T;
    return NULL;
}

/* in as the GEMM input for weights of `type`: itself (FP32) or its BF16/F16 copy in f->typed. */
static const void *typed_input(em_cuda_forward *f, const float *in, int64_t n,
                               cudaDataType_t type) {
    if (type == CUDA_R_32F) return in;
    em_cuda_convert(in, f->typed, type, n);
    return f->typed;
}

/* out (T, w->rows) = in (T, w->cols) w^T, plus out when accumulate; in is already of w's type
 * (typed_input). FP32 accumulation and results, cuBLAS's algorithm for the shape. */
static void gemm(em_cuda_forward *f, const void *in, int T, const em_dmat *w, float *out,
                 bool accumulate) {
    float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    cublasStatus_t s =
        cublasGemmEx(f->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)w->rows, T, (int)w->cols, &alpha,
                     w->data, w->type, (int)w->cols, in, w->type, (int)w->cols, &beta, out,
                     CUDA_R_32F, (int)w->rows, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS) note(f, "cublasGemmEx", (int)s);
}

/* The kernels of the composition (llama_block.h); b is the em_cuda_forward. tp = cp = 1 only,
 * so local_kv, attention_block, attention_finish, partial and add_partials are never called. */

/* The batch's windows kept as em_cuda_segments (host and device offsets) for attention. */
static em_status keep_windows(em_cuda_forward *f, const em_segments *windows) {
    int n = windows->count + 1;
    if (n > f->window_slots) {
        cudaFree(f->window_start_device);
        f->window_start_device = NULL;
        f->window_slots = 0;
        f->window_start = (int32_t *)em_xrealloc(f->window_start, (size_t)n * sizeof(int32_t));
        em_status err =
            dev_alloc((void **)&f->window_start_device, (size_t)n * sizeof(int32_t), NULL);
        if (err) return err;
        f->window_slots = n;
    }
    memcpy(f->window_start, windows->start, (size_t)n * sizeof(int32_t));
    f->windows = em_cuda_segments{windows->count, f->window_start, f->window_start_device};
    cudaError_t e = cudaMemcpy(f->window_start_device, f->window_start, (size_t)n * sizeof(int32_t),
                               cudaMemcpyHostToDevice);
    return e == cudaSuccess ? NULL : cuda_error(e, "uploading the batch's windows");
}

/* positions restart at 0 in every window (cp = 1), so the batch's RoPE rows of window w are
 * rows 0 .. T_w-1 of the tables of positions: copied on the device, the same bits as alone. */
static em_status cuda_begin(void *b, const int32_t *input, const int32_t *positions,
                            const em_segments *windows) {
    em_cuda_forward *f = (em_cuda_forward *)b;
    int T = windows->start[windows->count];
    em_status err = reserve(f, T);
    if (!err) err = keep_windows(f, windows);
    if (err) return err;
    cudaError_t e = cudaMemcpy(f->ids, input, (size_t)T * sizeof *input, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) return cuda_error(e, "uploading the batch");
    size_t row = (size_t)f->c.rope_dim / 2 * 2 * sizeof(float);
    for (int w = 0; w < windows->count && e == cudaSuccess; w++) {
        size_t at = (size_t)windows->start[w] * row / sizeof(float);
        size_t bytes = (size_t)(windows->start[w + 1] - windows->start[w]) * row;
        e = cudaMemcpyAsync(f->rope + at, f->rope_table, bytes, cudaMemcpyDeviceToDevice, 0);
        if (e == cudaSuccess && f->rope_swa)
            e = cudaMemcpyAsync(f->rope_swa + at, f->rope_swa_table, bytes,
                                cudaMemcpyDeviceToDevice, 0);
    }
    if (e != cudaSuccess) return cuda_error(e, "the batch's RoPE rows");
    /* x (T, D) = embedding rows (scaled) */
    em_cuda_embed(&f->tok_embd, f->ids, T, f->c.embed_scale, f->x);
    return NULL;
}

static void cuda_norm(void *b, int layer, bool ffn, int T) {
    em_cuda_forward *f = (em_cuda_forward *)b;
    const cuda_layer *l = &f->layers[layer];
    em_cuda_rmsnorm(f->x, ffn ? l->ffn_norm : l->attn_norm, T, f->c.dim, f->c.rms_eps, f->xn);
}

static void cuda_qkv(void *b, int layer, int T) {
    em_cuda_forward *f = (em_cuda_forward *)b;
    const em_llama_config *c = &f->c;
    const cuda_layer *l = &f->layers[layer];
    int H = c->n_heads, KV = c->n_kv_heads, hd = c->head_dim, QD = H * hd, KVD = KV * hd;
    int64_t n = (int64_t)T * c->dim;
    /* q (T, QD), k (T, KVD), v (T, KVD); xn converted once per weight type */
    const void *in = typed_input(f, f->xn, n, l->wq.type);
    gemm(f, in, T, &l->wq, f->q, false);
    if (l->wk.type != l->wq.type) in = typed_input(f, f->xn, n, l->wk.type);
    gemm(f, in, T, &l->wk, f->k, false);
    if (l->wv.type != l->wk.type) in = typed_input(f, f->xn, n, l->wv.type);
    gemm(f, in, T, &l->wv, f->v, false);
    if (l->bq) {
        em_cuda_add_bias(f->q, l->bq, T, QD);
        em_cuda_add_bias(f->k, l->bk, T, KVD);
        em_cuda_add_bias(f->v, l->bv, T, KVD);
    }
    if (c->qk_norm) { /* each head's (hd) values as a row */
        em_cuda_rmsnorm(f->q, l->q_norm, T * H, hd, c->rms_eps, f->q);
        em_cuda_rmsnorm(f->k, l->k_norm, T * KV, hd, c->rms_eps, f->k);
    }
    const float *rope = f->rope_swa && em_layer_is_sliding(c, layer) ? f->rope_swa : f->rope;
    em_cuda_rope(f->q, T, QD, H, hd, c->rope_dim, rope);
    em_cuda_rope(f->k, T, KVD, KV, hd, c->rope_dim, rope);
}

static void cuda_attention(void *b, int layer, int T) {
    em_cuda_forward *f = (em_cuda_forward *)b;
    const em_llama_config *c = &f->c;
    em_cuda_mask mask = {1.0f / sqrtf((float)c->attn_scale_base), c->attn_softcap,
                         em_layer_is_sliding(c, layer) ? c->sliding_window : 0};
    /* att (T, QD) within each window of the batch */
    em_cuda_attention(f->q, f->k, f->v, &f->windows, c->n_heads, c->n_kv_heads, c->head_dim, &mask,
                      f->att);
}

static void cuda_attn_out(void *b, int layer, int T, bool partial) {
    em_cuda_forward *f = (em_cuda_forward *)b;
    const em_dmat *wo = &f->layers[layer].wo;
    /* x += att Wo^T, or y = att Wo^T (post-norms) */
    const void *in = typed_input(f, f->att, (int64_t)T * wo->cols, wo->type);
    gemm(f, in, T, wo, partial ? f->y : f->x, !partial);
}

static void cuda_mlp(void *b, int layer, int T, bool partial) {
    em_cuda_forward *f = (em_cuda_forward *)b;
    const cuda_layer *l = &f->layers[layer];
    int64_t n = (int64_t)T * f->c.dim, nf = (int64_t)T * f->c.ffn_dim;
    /* gate, up (T, F); gate = act(gate) * up; x += gate Wdown^T, or y = gate Wdown^T */
    const void *in = typed_input(f, f->xn, n, l->w_gate.type);
    gemm(f, in, T, &l->w_gate, f->gate, false);
    if (l->w_up.type != l->w_gate.type) in = typed_input(f, f->xn, n, l->w_up.type);
    gemm(f, in, T, &l->w_up, f->up, false);
    em_cuda_glu(f->gate, f->up, nf, f->c.activation == EM_ACTIVATION_GELU_TANH);
    in = typed_input(f, f->gate, nf, l->w_down.type);
    gemm(f, in, T, &l->w_down, partial ? f->y : f->x, !partial);
}

/* post_norms (tp = 1, so all is NULL): x += RMSNorm(y) * the layer's post-norm. */
static void cuda_add_normed(void *b, int layer, bool ffn, const float *all, int parts, int T) {
    em_cuda_forward *f = (em_cuda_forward *)b;
    const cuda_layer *l = &f->layers[layer];
    em_cuda_rmsnorm(f->y, ffn ? l->ffn_post_norm : l->attn_post_norm, T, f->c.dim, f->c.rms_eps,
                    f->y);
    em_cuda_add(f->x, f->y, (int64_t)T * f->c.dim);
}

/* The logits of vocabulary rows row0 .. row0+rows for the n positions of xn (already of the
 * output's type in in), transposed: (rows, n). */
static void head_logits(em_cuda_forward *f, const void *in, int n, int64_t row0, int rows,
                        float *lt) {
    const em_dmat *w = &f->output;
    const char *rows_at =
        (const char *)w->data + (size_t)row0 * (size_t)w->cols * (w->type == CUDA_R_32F ? 4 : 2);
    float alpha = 1.0f, beta = 0.0f;
    cublasStatus_t s =
        cublasGemmEx(f->blas, CUBLAS_OP_T, CUBLAS_OP_N, n, rows, (int)w->cols, &alpha, in, w->type,
                     (int)w->cols, rows_at, w->type, (int)w->cols, &beta, lt, CUDA_R_32F, n,
                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS) note(f, "cublasGemmEx (head)", (int)s);
}

/* xn (n, D) = RMSNorm(x[from..from+n)) * output_norm, as the output's GEMM input. */
static const void *final_norm(em_cuda_forward *f, int from, int n) {
    em_cuda_rmsnorm(f->x + (size_t)from * f->c.dim, f->output_norm, n, f->c.dim, f->c.rms_eps,
                    f->xn);
    return typed_input(f, f->xn, (int64_t)n * f->c.dim, f->output.type);
}

static void cuda_head_tiles(void *b, int from, int n, const int32_t *target, em_head_tile *part,
                            float *target_logit) {
    em_cuda_forward *f = (em_cuda_forward *)b;
    const void *in = final_norm(f, from, n);
    /* the targets ride in ids (no longer needed) */
    cudaError_t e = cudaMemcpy(f->ids, target, (size_t)n * sizeof *target, cudaMemcpyHostToDevice);
    int64_t V = f->c.n_vocab, tiles = em_head_tiles(V);
    int stretch = head_rows_for(&f->c, n);
    for (int64_t row0 = 0; row0 < V && e == cudaSuccess; row0 += stretch) {
        int rows = (int)(V - row0 < stretch ? V - row0 : stretch);
        head_logits(f, in, n, row0, rows, f->logits);
        em_cuda_head_tiles(f->logits, row0, rows, n, f->c.final_softcap, f->ids,
                           f->part + (size_t)(row0 / EM_HEAD_TILE_ROWS) * n, f->target_logit);
    }
    if (e == cudaSuccess)
        e = cudaMemcpy(part, f->part, (size_t)tiles * n * sizeof *part, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess)
        e = cudaMemcpy(target_logit, f->target_logit, (size_t)n * sizeof *target_logit,
                       cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) note(f, cudaGetErrorString(e), (int)e);
}

static const em_llama_kernels cuda_kernels = {
    .begin = cuda_begin,
    .norm = cuda_norm,
    .qkv = cuda_qkv,
    .attention = cuda_attention,
    .local_kv = NULL,
    .attention_block = NULL,
    .attention_finish = NULL,
    .attn_out = cuda_attn_out,
    .mlp = cuda_mlp,
    .partial = NULL,
    .add_partials = NULL,
    .add_normed = cuda_add_normed,
    .head_tiles = cuda_head_tiles,
};

/* The window's failure, if any: a recorded one or the device's. */
static em_status window_status(em_cuda_forward *f) {
    cudaError_t e = cudaDeviceSynchronize();
    if (e == cudaSuccess) e = cudaGetLastError();
    if (f->fault[0]) {
        em_status err = em_error_new(EM_EXIT_RUNTIME, "cuda forward: %s", f->fault);
        f->fault[0] = 0;
        return err;
    }
    return e == cudaSuccess ? NULL : cuda_error(e, "forward");
}

static em_status check_ids(const int32_t *ids, int T, int n_vocab, const char *what) {
    for (int t = 0; t < T; t++)
        if (ids[t] < 0 || ids[t] >= n_vocab)
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "%s token id %d at position %d is outside the vocabulary (%d)",
                                what, ids[t], t, n_vocab);
    return NULL;
}

static em_status backend_score_batch(void *fp, const em_batch_window *windows, int count) {
    em_cuda_forward *f = (em_cuda_forward *)fp;
    int64_t rows = 0;
    em_status err = NULL;
    for (int w = 0; w < count && !err; w++) {
        const em_batch_window *win = &windows[w];
        if (win->T < 1 || win->score_from < 0 || win->score_from >= win->T)
            err = em_error_new(EM_EXIT_BAD_INPUT, "window of %d positions scored from %d is empty",
                               win->T, win->score_from);
        if (!err) err = check_ids(win->input, win->T, f->c.n_vocab, "input");
        if (!err)
            err = check_ids(win->target + win->score_from, win->T - win->score_from, f->c.n_vocab,
                            "target");
        if (err && count > 1) err = em_error_prefix(err, "window %d of the batch", w);
        rows += win->T;
    }
    if (!err && rows > INT32_MAX)
        err = em_error_new(EM_EXIT_BAD_INPUT, "a batch of %lld positions is too large",
                           (long long)rows);
    if (err) return err;
    em_forward_groups alone = {{0, 1, NULL, NULL, NULL}, {0, 1, NULL, NULL, NULL}};
    err = em_llama_compose(&cuda_kernels, f, f->c.n_layers, f->c.dim, f->c.post_norms, f->c.n_vocab,
                           &alone, f->threads, windows, count);
    em_status device = window_status(f);
    if (err) {
        em_error_free(device);
        return err;
    }
    return device;
}

/* KL(P_ref || P_cand) per scored position from both forwards' final-normed xn (n, D), left by
 * the windows just scored: the stretches of both heads, their paired tile partials, merged on
 * the host in tile order as pair_head.c does. */
static em_status pair_kl(em_cuda_forward *r, em_cuda_forward *c, int n, double *kl) {
    int64_t V = r->c.n_vocab, tiles = em_head_tiles(V);
    size_t count = (size_t)tiles * (size_t)n;
    em_pair_tile *dpart = NULL;
    em_status err = dev_alloc((void **)&dpart, count * sizeof *dpart, NULL);
    if (err) return err;
    const void *in_r = typed_input(r, r->xn, (int64_t)n * r->c.dim, r->output.type);
    const void *in_c = typed_input(c, c->xn, (int64_t)n * c->c.dim, c->output.type);
    int stretch = head_rows_for(&r->c, n);
    for (int64_t row0 = 0; row0 < V; row0 += stretch) {
        int rows = (int)(V - row0 < stretch ? V - row0 : stretch);
        head_logits(r, in_r, n, row0, rows, r->logits);
        head_logits(c, in_c, n, row0, rows, c->logits);
        em_cuda_pair_tiles(r->logits, c->logits, rows, n, r->c.final_softcap, c->c.final_softcap,
                           dpart + (size_t)(row0 / EM_HEAD_TILE_ROWS) * n);
    }
    em_pair_tile *part = (em_pair_tile *)em_xmalloc(count * sizeof *part);
    cudaError_t e = cudaMemcpy(part, dpart, count * sizeof *part, cudaMemcpyDeviceToHost);
    cudaFree(dpart);
    if (e == cudaSuccess) em_pair_merge(part, tiles, n, kl);
    free(part);
    em_status r_err = window_status(r), c_err = window_status(c);
    if (c_err && r_err) em_error_free(c_err);
    err = r_err ? r_err : c_err;
    return err ? err : e == cudaSuccess ? NULL : cuda_error(e, "paired head");
}

static em_status backend_score_pair(void *ref, void *cand, const int32_t *input,
                                    const int32_t *target, int T, int score_from, double *nll_ref,
                                    int32_t *argmax_ref, double *nll_cand, int32_t *argmax_cand,
                                    double *kl) {
    em_cuda_forward *r = (em_cuda_forward *)ref, *c = (em_cuda_forward *)cand;
    if (r->c.n_vocab != c->c.n_vocab)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "the reference has %d vocabulary rows, the candidate %d", r->c.n_vocab,
                            c->c.n_vocab);
    em_batch_window ref_window = {input, target, T, score_from, nll_ref, argmax_ref};
    em_batch_window cand_window = {input, target, T, score_from, nll_cand, argmax_cand};
    em_status err = backend_score_batch(r, &ref_window, 1);
    if (!err) err = backend_score_batch(c, &cand_window, 1);
    return err ? err : pair_kl(r, c, T - score_from, kl);
}

static size_t backend_memory(const void *fp) {
    return ((const em_cuda_forward *)fp)->activation_bytes;
}

static size_t backend_weight_bytes(const void *fp) {
    return ((const em_cuda_forward *)fp)->weight_bytes;
}

static void backend_free(void *fp) {
    em_cuda_forward *f = (em_cuda_forward *)fp;
    if (!f) return;
    free_activations(f);
    free(f->window_start);
    cudaFree(f->window_start_device);
    for (int i = 0; f->layers && i < f->c.n_layers; i++) {
        cuda_layer *l = &f->layers[i];
        void *bufs[] = {
            l->wq.data,      l->wk.data,     l->wv.data,   l->wo.data,  l->w_gate.data,
            l->w_up.data,    l->w_down.data, l->attn_norm, l->ffn_norm, l->bq,
            l->bk,           l->bv,          l->q_norm,    l->k_norm,   l->attn_post_norm,
            l->ffn_post_norm};
        for (size_t j = 0; j < sizeof bufs / sizeof *bufs; j++) cudaFree(bufs[j]);
    }
    free(f->layers);
    if (f->output.data != f->tok_embd.data) cudaFree(f->output.data);
    cudaFree(f->tok_embd.data);
    cudaFree(f->output_norm);
    cudaFree(f->workspace);
    if (f->blas) cublasDestroy(f->blas);
    free(f);
}

/* A forward without weights yet: device chosen, cuBLAS on stream 0 with a fixed workspace. */
static em_status forward_shell(const em_llama_config *c, int threads, em_cuda_forward **out) {
    *out = NULL;
    if (c->head_dim > MAX_HEAD_DIM)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "device cuda: head dimension %d is above the attention kernel's %d",
                            c->head_dim, MAX_HEAD_DIM);
    em_status err = select_device();
    if (err) return err;
    em_cuda_forward *f = (em_cuda_forward *)em_xcalloc(1, sizeof *f);
    f->c = *c;
    f->threads = threads < 1 ? 1 : threads;
    f->layers = (cuda_layer *)em_xcalloc((size_t)c->n_layers, sizeof *f->layers);
    cublasStatus_t s = cublasCreate(&f->blas);
    if (s != CUBLAS_STATUS_SUCCESS) {
        f->blas = NULL;
        backend_free(f);
        return em_error_new(EM_EXIT_RUNTIME, "cuda: cublasCreate failed (status %d)", (int)s);
    }
    err = dev_alloc(&f->workspace, WORKSPACE_BYTES, NULL);
    if (!err && cublasSetWorkspace(f->blas, f->workspace, WORKSPACE_BYTES) != CUBLAS_STATUS_SUCCESS)
        err = em_error_new(EM_EXIT_RUNTIME, "cuda: cublasSetWorkspace failed");
    if (err) {
        backend_free(f);
        return err;
    }
    *out = f;
    return NULL;
}

static em_status upload_model(em_cuda_forward *f, const em_model *m) {
    const em_llama_config *c = &m->config;
    int64_t D = c->dim, hd = c->head_dim;
    int64_t QD = (int64_t)c->n_heads * hd, KVD = (int64_t)c->n_kv_heads * hd;
    em_status err = upload_matrix(f, m->tok_embd, &f->tok_embd);
    if (!err) {
        if (m->output == m->tok_embd)
            f->output = f->tok_embd;
        else
            err = upload_matrix(f, m->output, &f->output);
    }
    if (!err) err = upload_vector(f, m->output_norm, D, &f->output_norm);
    for (int i = 0; i < c->n_layers && !err; i++) {
        const em_layer_weights *w = &m->layers[i];
        cuda_layer *l = &f->layers[i];
        const em_tensor *mats[] = {w->wq, w->wk, w->wv, w->wo, w->w_gate, w->w_up, w->w_down};
        em_dmat *dst[] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->w_gate, &l->w_up, &l->w_down};
        for (int j = 0; j < 7 && !err; j++) err = upload_matrix(f, mats[j], dst[j]);
        if (!err) err = upload_vector(f, w->attn_norm, D, &l->attn_norm);
        if (!err) err = upload_vector(f, w->ffn_norm, D, &l->ffn_norm);
        if (!err && c->has_qkv_bias) {
            err = upload_vector(f, w->bq, QD, &l->bq);
            if (!err) err = upload_vector(f, w->bk, KVD, &l->bk);
            if (!err) err = upload_vector(f, w->bv, KVD, &l->bv);
        }
        if (!err && c->qk_norm) {
            err = upload_vector(f, w->q_norm, hd, &l->q_norm);
            if (!err) err = upload_vector(f, w->k_norm, hd, &l->k_norm);
        }
        if (!err && c->post_norms) {
            err = upload_vector(f, w->attn_post_norm, D, &l->attn_post_norm);
            if (!err) err = upload_vector(f, w->ffn_post_norm, D, &l->ffn_post_norm);
        }
        if (err) err = em_error_prefix(err, "layer %d", i);
    }
    return err ? em_error_prefix(err, "model %s", m->path) : NULL;
}

static em_status backend_create(const em_model *model, const em_forward_groups *groups, int threads,
                                void **out) {
    *out = NULL;
    if (groups->tp.size > 1 || groups->cp.size > 1)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "device cuda runs tp = cp = 1 (this forward has tp %d, cp %d): use "
                            "dp for more GPUs",
                            groups->tp.size, groups->cp.size);
    /* the CPU forward's checks of shapes and types (cheap at tp = 1: views, no copies) */
    em_llama_forward *check = NULL;
    em_status err = em_llama_forward_new(model, 1, &check);
    em_llama_forward_free(check);
    if (err) return err;
    em_cuda_forward *f = NULL;
    if ((err = forward_shell(&model->config, threads, &f))) return err;
    f->model = model;
    if (!err) err = upload_model(f, model);
    if (err) {
        backend_free(f);
        return err;
    }
    *out = f;
    return NULL;
}

const em_forward_backend em_forward_backend_cuda = {
    .name = "cuda",
    /* 16384 positions (8 windows of 2048): GEMMs of that many rows run near the GPU's peak, and
     * an 8B model's activations for them take about 3.5 GiB */
    .batch_tokens = 16384,
    .gpu_buffers = false, /* tp = cp = 1: it hands its groups nothing */
    .available = em_cuda_available,
    .create = backend_create,
    .score_batch = backend_score_batch,
    .score_pair = backend_score_pair,
    .observe = NULL, /* calibrate runs on the cpu backend */
    .memory = backend_memory,
    .weight_bytes = backend_weight_bytes,
    .free = backend_free,
};

/* A BF16 matrix {cols, rows} of generated values in +-1/sqrt(cols). */
static em_status random_matrix(em_cuda_forward *f, int64_t cols, int64_t rows, uint64_t seed,
                               em_dmat *out) {
    *out = (em_dmat){CUDA_R_16BF, NULL, rows, cols};
    em_status err = dev_alloc(&out->data, (size_t)(rows * cols) * 2, &f->weight_bytes);
    if (!err)
        em_cuda_fill_bf16((__nv_bfloat16 *)out->data, rows * cols, seed, 1.0f / sqrtf((float)cols),
                          0.0f);
    return err;
}

static em_status ones(em_cuda_forward *f, int64_t n, float **out) {
    em_status err = dev_alloc((void **)out, (size_t)n * 4, &f->weight_bytes);
    if (!err) em_cuda_fill_f32(*out, n, 1.0f);
    return err;
}

em_status em_cuda_forward_new_random(const em_llama_config *c, uint64_t seed, int threads,
                                     void **out) {
    *out = NULL;
    em_cuda_forward *f = NULL;
    em_status err = forward_shell(c, threads, &f);
    if (err) return err;
    int64_t D = c->dim, F = c->ffn_dim, QD = (int64_t)c->n_heads * c->head_dim;
    int64_t KVD = (int64_t)c->n_kv_heads * c->head_dim;
    uint64_t s = seed * 1000;
    err = random_matrix(f, D, c->n_vocab, s++, &f->tok_embd);
    if (!err) err = random_matrix(f, D, c->n_vocab, s++, &f->output);
    if (!err) err = ones(f, D, &f->output_norm);
    for (int i = 0; i < c->n_layers && !err; i++) {
        cuda_layer *l = &f->layers[i];
        int64_t shapes[7][2] = {{D, QD}, {D, KVD}, {D, KVD}, {QD, D}, {D, F}, {D, F}, {F, D}};
        em_dmat *dst[] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->w_gate, &l->w_up, &l->w_down};
        for (int j = 0; j < 7 && !err; j++)
            err = random_matrix(f, shapes[j][0], shapes[j][1], s++, dst[j]);
        if (!err) err = ones(f, D, &l->attn_norm);
        if (!err) err = ones(f, D, &l->ffn_norm);
    }
    cudaError_t e = err ? cudaSuccess : cudaDeviceSynchronize();
    if (!err && e != cudaSuccess) err = cuda_error(e, "generating weights");
    if (err) {
        backend_free(f);
        return err;
    }
    *out = f;
    return NULL;
}

em_status em_cuda_gemm_tflops(int m, int n, int k, int reps, double *tflops) {
    em_status err = select_device();
    if (err) return err;
    void *a = NULL, *b = NULL, *c = NULL;
    cublasHandle_t h = NULL;
    cudaEvent_t start = NULL, stop = NULL;
    if (!(err = dev_alloc(&a, (size_t)m * k * 2, NULL)) &&
        !(err = dev_alloc(&b, (size_t)k * n * 2, NULL)) &&
        !(err = dev_alloc(&c, (size_t)m * n * 4, NULL))) {
        em_cuda_fill_bf16((__nv_bfloat16 *)a, (int64_t)m * k, 1, 0.1f, 0.0f);
        em_cuda_fill_bf16((__nv_bfloat16 *)b, (int64_t)k * n, 2, 0.1f, 0.0f);
        cublasStatus_t s = cublasCreate(&h);
        float alpha = 1.0f, beta = 0.0f, ms = 0.0f;
        cudaEventCreate(&start);
        cudaEventCreate(&stop);
        for (int i = 0; i <= reps && s == CUBLAS_STATUS_SUCCESS; i++) {
            if (i == 1) cudaEventRecord(start); /* the first product warms up */
            s = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, a, CUDA_R_16BF, k, b,
                             CUDA_R_16BF, k, &beta, c, CUDA_R_32F, m, CUBLAS_COMPUTE_32F,
                             CUBLAS_GEMM_DEFAULT);
        }
        cudaEventRecord(stop);
        cudaError_t e = cudaEventSynchronize(stop);
        cudaEventElapsedTime(&ms, start, stop);
        if (s != CUBLAS_STATUS_SUCCESS)
            err = em_error_new(EM_EXIT_RUNTIME, "cuda: GEMM benchmark: status %d", (int)s);
        else if (e != cudaSuccess)
            err = cuda_error(e, "GEMM benchmark");
        else
            *tflops = 2.0 * m * n * (double)k * reps / (ms * 1e-3) / 1e12;
    }
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    if (h) cublasDestroy(h);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    return err;
}

size_t em_cuda_device_used_bytes(void) {
    size_t free_b = 0, total = 0;
    return cudaMemGetInfo(&free_b, &total) == cudaSuccess ? total - free_b : 0;
}
