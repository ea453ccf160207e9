/* The `cuda` forward backend: device weights, the composition's kernels over device buffers and
 * the row of the forward-backend table (see cuda_forward.h). */
#include "stages/kernels/cuda/cuda_forward.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/kernels/cuda/attention_block.cuh"
#include "stages/kernels/cuda/attention_table.cuh"
#include "stages/kernels/cuda/decode_cache.cuh"
#include "stages/kernels/cuda/gemm.cuh"
#include "stages/kernels/cuda/device_weights.cuh"
#include "stages/kernels/cuda/device_memory.cuh"
#include "stages/kernels/cuda/kernels.cuh"
#include "stages/kernels/cuda/partial_sums.cuh"
extern "C" { /* the C side: checks, RoPE tables, the composition, the shards, the type table */
#include "stages/kernels/cpu/dequantize.h"
#include "stages/kernels/cpu/llama_forward.h"
#include "stages/kernels/cpu/rope.h"
#include "stages/kernels/llama_block.h"
#include "stages/kernels/llama_shard.h"
#include "stages/formats/ggml_types.h"
}

#define HEAD_CHUNK_FLOATS ((size_t)1 << 26) /* logits of one vocabulary stretch (256 MiB) */

typedef struct cuda_layer {
    em_dmat wq, wk, wv, wo, w_gate, w_up, w_down;
    float *attn_norm, *ffn_norm;           /* (D) */
    float *bq, *bk, *bv;                   /* (QD), (KVD), (KVD) or NULL */
    float *q_norm, *k_norm;                /* (hd) with qk_norm */
    float *attn_post_norm, *ffn_post_norm; /* (D) with post_norms */
} cuda_layer;

/* A buffer of the tp/cp groups' traffic, grown as windows need: device or pinned host memory. */
typedef struct split_buffer {
    void *p;
    size_t bytes;
    bool host;
} split_buffer;

/* What a forward split over tp and cp needs beyond the tp = cp = 1 buffers. The composition's
 * collectives carry host memory (it gathers partial sums into host buffers and passes K/V blocks
 * around the cp ring in host buffers), so what crosses the groups is staged in pinned host
 * buffers: partial() and local_kv() copy out, add_partials() and attention_block() copy in. */
typedef struct cuda_split {
    em_forward_groups groups;       /* alone (size 1) for tp = cp = 1 */
    int64_t vocab_row0, vocab_rows; /* this rank's output-head rows (all of them at tp = 1) */
    int T;                          /* positions of the window in flight on this rank */
    size_t device_bytes;            /* of the device buffers below */
    split_buffer host_y;            /* (T, D) this rank's partial sum, for the tp gather */
    split_buffer all;               /* device (tp, T, D) the gathered partial sums */
    split_buffer host_k, host_v;    /* (T, KVD) this rank's K/V block, for the cp ring */
    split_buffer block_k, block_v;  /* device (nk, KVD) a block arrived from the ring */
    split_buffer qpos, kpos;        /* device (T), (nk) positions of the queries and of the block */
    split_buffer ring;              /* device (T, H, hd + 2) the online softmax state */
} cuda_split;

/* A batch whose windows continue sequences kept in a decoding cache (decode_cache.cuh): window w
 * follows before[w] rows of slot slot[w] (host arrays; view holds them on the device, layer 0). */
typedef struct cuda_kept_batch {
    em_cuda_kept view;
    const int32_t *before, *slot;
    size_t layer_floats; /* from one layer's rows of a slot to the next's */
} cuda_kept_batch;

typedef struct em_cuda_forward {
    /* the model's configuration with this rank's share of heads, KV heads and MLP columns (the
     * model's / tp); n_vocab stays the whole vocabulary */
    em_llama_config c;
    const em_model *model; /* NULL for a forward of generated weights */
    int threads;           /* host threads of the head's merge */
    em_gemm *gemm;         /* the matrix products: cuBLASLt, one fixed algorithm per shape */
    cuda_layer *layers;
    em_dmat tok_embd, output; /* output.data == tok_embd.data when tied */
    float *output_norm;       /* (D) */
    size_t weight_bytes;
    em_weight_store store; /* how the matrices are held; the scratch of those kept quantized */
    em_cuda_attention_work *attn_work; /* the tensor-core attention's BF16 K/V and tile plan */
    char fault[1024]; /* the first cuBLASLt or CUDA failure of the current window */
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
    cuda_split split;
    /* RoPE tables of positions 0 .. capacity-1; rope and rope_swa hold the batch's rows of them */
    float *rope_table, *rope_swa_table;
    /* the current batch's windows (begin): host and device offsets, room for window_slots */
    em_cuda_segments windows;
    int32_t *window_start, *window_start_device;
    int window_slots;
    const cuda_kept_batch *kept; /* the batch continues kept sequences (decoding), else NULL */
    /* shared prefixes' keys and values, one slot per continuation (score_shared_prefixes) */
    em_cuda_kv_cache *prefix_cache;
    int prefix_slots, prefix_positions;
} em_cuda_forward;

/* Records the first failure of a window (kernels of the composition return nothing). */
static void note(em_cuda_forward *f, const char *what, int code) {
    if (!f->fault[0]) snprintf(f->fault, sizeof f->fault, "%s failed (status %d)", what, code);
}

/* Records an error value as the window's failure if it is the first; frees it. */
static void note_error(em_cuda_forward *f, em_status err) {
    if (err && !f->fault[0]) snprintf(f->fault, sizeof f->fault, "%s", err->message);
    em_error_free(err);
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
    /* more local ranks than devices share them (two tp ranks on one GPU: separate contexts,
     * time-sliced), unless a device is in exclusive-process mode; the context is made here, so
     * that case fails now with its reason */
    int device = local % count, mode = cudaComputeModeDefault;
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess) e = cudaFree(NULL);
    if (e == cudaSuccess) return NULL;
    cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, device);
    if (mode == cudaComputeModeExclusiveProcess || mode == cudaComputeModeProhibited)
        return em_error_new(EM_EXIT_RUNTIME,
                            "cuda: local rank %d cannot use device %d of %d (%s): the device is in "
                            "%s compute mode; ranks share a device when a node runs more ranks "
                            "than it has GPUs, which needs the default mode (nvidia-smi -c 0)",
                            local, device, count, cudaGetErrorString(e),
                            mode == cudaComputeModeProhibited ? "prohibited" : "exclusive-process");
    return em_cuda_error(e, "cudaSetDevice");
}

/* n floats in host memory onto the device. */
static em_status upload_floats(em_cuda_forward *f, const float *host, int64_t n, float **out) {
    em_status err = em_cuda_alloc((void **)out, (size_t)n * sizeof(float), &f->weight_bytes);
    if (!err) {
        cudaError_t e = cudaMemcpy(*out, host, (size_t)n * sizeof(float), cudaMemcpyHostToDevice);
        if (e != cudaSuccess) err = em_cuda_error(e, "uploading a vector");
    }
    return err;
}

/* A 1-D tensor (norm weight or bias) of n values, as floats on the device. */
static em_status upload_vector(em_cuda_forward *f, const em_tensor *t, int64_t n, float **out) {
    em_tensor row = *t;
    row.shape[0] = n;
    row.shape[1] = 1;
    float *host = (float *)em_xmalloc((size_t)n * sizeof *host);
    em_rows_to_float(&row, 0, 1, host, n);
    em_status err = upload_floats(f, host, n, out);
    free(host);
    return err;
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

/* The RoPE tables of the CPU path (rope.h), computed in double on the host, for T positions
 * (NULL: 0 .. T-1), into rope and rope_swa (device, at least T rows; rope_swa NULL when the
 * model has no sliding layers' base). */
static em_status upload_rope(em_cuda_forward *f, const int32_t *positions, int T, float *rope,
                             float *rope_swa) {
    const em_llama_config *c = &f->c;
    size_t bytes = (size_t)T * (size_t)(c->rope_dim / 2) * 2 * sizeof(float);
    float *table = (float *)em_xmalloc(bytes);
    const float *factors =
        f->model && f->model->rope_freqs ? (const float *)f->model->rope_freqs->data : NULL;
    em_rope_table(c, factors, positions, T, table);
    cudaError_t e = cudaMemcpy(rope, table, bytes, cudaMemcpyHostToDevice);
    if (e == cudaSuccess && rope_swa) {
        em_llama_config local = em_rope_config_swa(c);
        em_rope_table(&local, NULL, positions, T, table);
        e = cudaMemcpy(rope_swa, table, bytes, cudaMemcpyHostToDevice);
    }
    free(table);
    return e == cudaSuccess ? NULL : em_cuda_error(e, "uploading the RoPE table");
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
        {(void **)&f->y, c->post_norms || f->split.groups.tp.size > 1 ? t * D * 4 : 0},
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
        if (want[i].bytes) err = em_cuda_alloc(want[i].p, want[i].bytes, bytes);
    if (err) {
        free_activations(f);
        return em_error_prefix(err, "activations of %d positions", T);
    }
    if ((err = upload_rope(f, NULL, T, f->rope_table, f->rope_swa_table))) {
        free_activations(f);
        return err;
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
 * (typed_input). FP32 accumulation and results, the shape's one cuBLASLt algorithm (gemm.cuh). */
static void gemm(em_cuda_forward *f, const void *in, int T, const em_dmat *w, float *out,
                 bool accumulate) {
    w = em_weights_in_use(&f->store, w); /* a matrix kept quantized: its BF16 values */
    note_error(f, em_gemm_project(f->gemm, w, in, T, out, accumulate));
}

/* The kernels of the composition (llama_block.h); b is the em_cuda_forward. local_kv,
 * attention_block and attention_finish run for cp > 1, partial and add_partials for tp > 1. */

/* The batch's windows kept as em_cuda_segments (host and device offsets) for attention. */
static em_status keep_windows(em_cuda_forward *f, const em_segments *windows) {
    int n = windows->count + 1;
    if (n > f->window_slots) {
        cudaFree(f->window_start_device);
        f->window_start_device = NULL;
        f->window_slots = 0;
        f->window_start = (int32_t *)em_xrealloc(f->window_start, (size_t)n * sizeof(int32_t));
        em_status err =
            em_cuda_alloc((void **)&f->window_start_device, (size_t)n * sizeof(int32_t), NULL);
        if (err) return err;
        f->window_slots = n;
    }
    memcpy(f->window_start, windows->start, (size_t)n * sizeof(int32_t));
    f->windows = em_cuda_segments{windows->count, f->window_start, f->window_start_device};
    cudaError_t e = cudaMemcpy(f->window_start_device, f->window_start, (size_t)n * sizeof(int32_t),
                               cudaMemcpyHostToDevice);
    return e == cudaSuccess ? NULL : em_cuda_error(e, "uploading the batch's windows");
}

/* Positions (T) restart at 0 in every window of a batch (NULL: one window, 0 .. T-1), so the
 * batch's RoPE rows of window w are rows 0 .. T_w-1 of the tables of positions: copied on the
 * device for one window, the same bits as alone. A cp rank's one window holds positions from the
 * middle of it, a batch's windows are uploaded as given, and a window after kept rows holds
 * positions from before[w] on: their own rows, computed as the table's are. */
static em_status cuda_begin(void *b, const int32_t *input, const int32_t *positions,
                            const em_segments *windows) {
    em_cuda_forward *f = (em_cuda_forward *)b;
    int T = windows->start[windows->count];
    em_status err = reserve(f, T);
    if (!err) err = keep_windows(f, windows);
    if (err) return err;
    cudaError_t e = cudaMemcpy(f->ids, input, (size_t)T * sizeof *input, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) return em_cuda_error(e, "uploading the batch");
    bool from_table = !positions && !f->kept;
    if (!from_table) {
        int32_t *after = NULL; /* windows after kept rows: their positions moved past those */
        if (f->kept) {
            after = (int32_t *)em_xmalloc((size_t)T * sizeof *after);
            for (int w = 0; w < windows->count; w++)
                for (int t = windows->start[w]; t < windows->start[w + 1]; t++)
                    after[t] = f->kept->before[w] + (positions ? positions[t] : t);
        }
        err = upload_rope(f, after ? after : positions, T, f->rope, f->rope_swa);
        free(after);
        if (err) return err;
    }
    size_t row = (size_t)f->c.rope_dim / 2 * 2 * sizeof(float);
    for (int w = 0; w < windows->count && from_table && e == cudaSuccess; w++) {
        size_t at = (size_t)windows->start[w] * row / sizeof(float);
        size_t bytes = (size_t)(windows->start[w + 1] - windows->start[w]) * row;
        e = cudaMemcpyAsync(f->rope + at, f->rope_table, bytes, cudaMemcpyDeviceToDevice, 0);
        if (e == cudaSuccess && f->rope_swa)
            e = cudaMemcpyAsync(f->rope_swa + at, f->rope_swa_table, bytes,
                                cudaMemcpyDeviceToDevice, 0);
    }
    if (e != cudaSuccess) return em_cuda_error(e, "the batch's RoPE rows");
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

/* How the layer's scores are scaled, soft-capped and windowed. */
static em_cuda_mask layer_mask(const em_llama_config *c, int layer) {
    return em_cuda_mask{1.0f / sqrtf((float)c->attn_scale_base), c->attn_softcap,
                        em_layer_is_sliding(c, layer) ? c->sliding_window : 0};
}

static void cuda_attention(void *b, int layer, int T) {
    em_cuda_forward *f = (em_cuda_forward *)b;
    const em_llama_config *c = &f->c;
    em_cuda_mask mask = layer_mask(c, layer);
    /* att (T, QD) within each window of the batch, by the table's kernel for the weights' mode */
    em_cuda_attention_shape shape = {c->n_heads, c->n_kv_heads, c->head_dim};
    const em_cuda_attention_kernel *kernel =
        em_cuda_attention_kernel_for(em_cuda_compute_of(f->layers[layer].wq.type), &shape);
    em_cuda_attention_args a = {f->q, f->k,   f->v, &f->windows, shape,
                                mask, f->att, NULL, NULL,        NULL};
    em_cuda_kept kept;
    if (f->kept) { /* the windows' own rows after their slots', then their keys from there */
        kept = f->kept->view;
        kept.layer_offset = (size_t)layer * f->kept->layer_floats;
        em_cuda_keep_rows(f->k, f->v, &f->windows, c->n_kv_heads * c->head_dim, &kept);
        a.kept = &kept;
        a.kept_before = f->kept->before;
        a.kept_slot = f->kept->slot;
    }
    cudaError_t e = kernel->run(f->attn_work, &a);
    if (e != cudaSuccess) note(f, kernel->name, (int)e);
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

/* Grows a buffer of the split to `bytes` (its contents are not kept). */
static cudaError_t grow(em_cuda_forward *f, split_buffer *sb, size_t bytes) {
    if (bytes <= sb->bytes) return cudaSuccess;
    if (sb->host)
        cudaFreeHost(sb->p);
    else
        cudaFree(sb->p);
    if (!sb->host) f->split.device_bytes -= sb->bytes;
    sb->p = NULL;
    sb->bytes = 0;
    cudaError_t e = sb->host ? cudaMallocHost(&sb->p, bytes) : cudaMalloc(&sb->p, bytes);
    if (e != cudaSuccess) {
        sb->p = NULL;
        return e;
    }
    sb->bytes = bytes;
    if (!sb->host) f->split.device_bytes += bytes;
    return cudaSuccess;
}

/* The gathered partial sums all (parts, T, D) in host memory onto the device: the split's `all`. */
static const float *upload_partials(em_cuda_forward *f, const float *all, int parts, int T) {
    size_t bytes = (size_t)parts * (size_t)T * (size_t)f->c.dim * sizeof(float);
    cudaError_t e = grow(f, &f->split.all, bytes);
    if (e == cudaSuccess) e = cudaMemcpy(f->split.all.p, all, bytes, cudaMemcpyHostToDevice);
    if (e == cudaSuccess) return (const float *)f->split.all.p;
    note(f, cudaGetErrorString(e), (int)e);
    return NULL;
}

/* post_norms: x += RMSNorm(y) * the layer's post-norm, y the sum of the gathered parts (tp > 1)
 * or this rank's own product (all NULL). */
static void cuda_add_normed(void *b, int layer, bool ffn, const float *all, int parts, int T) {
    em_cuda_forward *f = (em_cuda_forward *)b;
    const cuda_layer *l = &f->layers[layer];
    if (all) {
        const float *parts_d = upload_partials(f, all, parts, T);
        if (!parts_d) return;
        em_cuda_sum_partials(f->y, parts_d, parts, (int64_t)T * f->c.dim, false);
    }
    em_cuda_rmsnorm(f->y, ffn ? l->ffn_post_norm : l->attn_post_norm, T, f->c.dim, f->c.rms_eps,
                    f->y);
    em_cuda_add(f->x, f->y, (int64_t)T * f->c.dim);
}

/* The logits of vocabulary rows row0 .. row0+rows for the n positions of xn (already of the
 * output's type in in), transposed: (rows, n). */
static void head_logits(em_cuda_forward *f, const void *in, int n, int64_t row0, int rows,
                        float *lt) {
    note_error(f, em_gemm_head(f->gemm, &f->output, row0, rows, in, n, lt));
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
    /* the targets ride in ids (no longer needed); none (the argmax alone): id 0, whose logit
     * and the tiles' sums nobody reads */
    cudaError_t e =
        target ? cudaMemcpy(f->ids, target, (size_t)n * sizeof *target, cudaMemcpyHostToDevice)
               : cudaMemset(f->ids, 0, (size_t)n * sizeof *target);
    /* this rank's vocabulary rows (all of them at tp = 1): f->output holds just those */
    int64_t V = f->split.vocab_rows, tiles = em_head_tiles(V);
    int stretch = head_rows_for(&f->c, n);
    for (int64_t row0 = 0; row0 < V && e == cudaSuccess; row0 += stretch) {
        int rows = (int)(V - row0 < stretch ? V - row0 : stretch);
        head_logits(f, in, n, row0, rows, f->logits);
        em_cuda_head_tiles(f->logits, f->split.vocab_row0 + row0, rows, n, f->c.final_softcap,
                           f->ids, f->part + (size_t)(row0 / EM_HEAD_TILE_ROWS) * n,
                           f->target_logit);
    }
    if (e == cudaSuccess)
        e = cudaMemcpy(part, f->part, (size_t)tiles * n * sizeof *part, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess)
        e = cudaMemcpy(target_logit, f->target_logit, (size_t)n * sizeof *target_logit,
                       cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) note(f, cudaGetErrorString(e), (int)e);
}

/* The staging buffers of the split for a window of T positions on this rank: partial sums
 * (tp > 1), K/V, positions and the ring's state (cp > 1). */
static cudaError_t reserve_split(em_cuda_forward *f, int T) {
    const em_llama_config *c = &f->c;
    cuda_split *s = &f->split;
    size_t t = (size_t)T, D = (size_t)c->dim, KVD = (size_t)c->n_kv_heads * c->head_dim;
    cudaError_t e = cudaSuccess;
    if (s->groups.tp.size > 1) {
        e = grow(f, &s->host_y, t * D * sizeof(float));
        if (e == cudaSuccess)
            e = grow(f, &s->all, (size_t)s->groups.tp.size * t * D * sizeof(float));
    }
    if (e == cudaSuccess && s->groups.cp.size > 1) {
        size_t state = t * (size_t)c->n_heads * (size_t)(c->head_dim + 2);
        e = grow(f, &s->host_k, t * KVD * sizeof(float));
        if (e == cudaSuccess) e = grow(f, &s->host_v, t * KVD * sizeof(float));
        if (e == cudaSuccess) e = grow(f, &s->qpos, t * sizeof(int32_t));
        if (e == cudaSuccess) e = grow(f, &s->ring, state * sizeof(float));
    }
    return e;
}

/* begin, then for a split forward its staging buffers. */
static em_status cuda_begin_split(void *b, const int32_t *input, const int32_t *positions,
                                  const em_segments *windows) {
    em_cuda_forward *f = (em_cuda_forward *)b;
    em_status err = cuda_begin(b, input, positions, windows);
    if (err) return err;
    int T = windows->start[windows->count];
    f->split.T = T;
    cudaError_t e = reserve_split(f, T);
    return e == cudaSuccess ? NULL : em_cuda_error(e, "the buffers of the tp and cp groups");
}

/* This rank's k and v (T, KVD) after RoPE, copied to host memory for the cp ring. */
static void cuda_local_kv(void *b, float **k, float **v, int *kv_width) {
    em_cuda_forward *f = (em_cuda_forward *)b;
    cuda_split *s = &f->split;
    *kv_width = f->c.n_kv_heads * f->c.head_dim;
    *k = (float *)s->host_k.p;
    *v = (float *)s->host_v.p;
    size_t bytes = (size_t)s->T * (size_t)*kv_width * sizeof(float);
    cudaError_t e = cudaMemcpy(*k, f->k, bytes, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess) e = cudaMemcpy(*v, f->v, bytes, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) note(f, cudaGetErrorString(e), (int)e);
}

/* One block of the cp ring into the online-softmax state. k and v are host memory: this rank's
 * own block comes as local_kv's copies of f->k and f->v, whose device originals are used; a
 * block from another rank is uploaded. */
static void cuda_attention_block(void *b, int layer, int T, const int32_t *qpos, const float *k,
                                 const float *v, const int32_t *kpos, int nk, bool first) {
    em_cuda_forward *f = (em_cuda_forward *)b;
    const em_llama_config *c = &f->c;
    cuda_split *s = &f->split;
    size_t kv_bytes = (size_t)nk * (size_t)c->n_kv_heads * c->head_dim * sizeof(float);
    const float *dk = f->k, *dv = f->v;
    cudaError_t e = cudaSuccess;
    if (k != s->host_k.p || v != s->host_v.p) {
        e = grow(f, &s->block_k, kv_bytes);
        if (e == cudaSuccess) e = grow(f, &s->block_v, kv_bytes);
        if (e == cudaSuccess) e = cudaMemcpy(s->block_k.p, k, kv_bytes, cudaMemcpyHostToDevice);
        if (e == cudaSuccess) e = cudaMemcpy(s->block_v.p, v, kv_bytes, cudaMemcpyHostToDevice);
        dk = (const float *)s->block_k.p;
        dv = (const float *)s->block_v.p;
    }
    if (e == cudaSuccess) e = grow(f, &s->kpos, (size_t)nk * sizeof *kpos);
    if (e == cudaSuccess)
        e = cudaMemcpy(s->kpos.p, kpos, (size_t)nk * sizeof *kpos, cudaMemcpyHostToDevice);
    if (e == cudaSuccess && first)
        e = cudaMemcpy(s->qpos.p, qpos, (size_t)T * sizeof *qpos, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
        note(f, cudaGetErrorString(e), (int)e);
        return;
    }
    em_cuda_mask mask = layer_mask(c, layer);
    em_cuda_attention_block(f->q, (const int32_t *)s->qpos.p, T, dk, dv, (const int32_t *)s->kpos.p,
                            nk, c->n_heads, c->n_kv_heads, c->head_dim, &mask, (float *)s->ring.p,
                            first);
}

/* att (T, QD) from the ring's state. */
static void cuda_attention_finish(void *b, int T) {
    em_cuda_forward *f = (em_cuda_forward *)b;
    em_cuda_attention_finish((const float *)f->split.ring.p, T, f->c.n_heads, f->c.head_dim,
                             f->att);
}

/* y (T, D), this rank's partial sum, copied to host memory for the tp gather. */
static float *cuda_partial(void *b) {
    em_cuda_forward *f = (em_cuda_forward *)b;
    float *host = (float *)f->split.host_y.p;
    cudaError_t e = cudaMemcpy(host, f->y, (size_t)f->split.T * f->c.dim * sizeof(float),
                               cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) note(f, cudaGetErrorString(e), (int)e);
    return host;
}

/* x += all[0] + ... + all[parts-1], the gathered partial sums in rank order. */
static void cuda_add_partials(void *b, const float *all, int parts, int T) {
    em_cuda_forward *f = (em_cuda_forward *)b;
    const float *parts_d = upload_partials(f, all, parts, T);
    if (parts_d) em_cuda_sum_partials(f->x, parts_d, parts, (int64_t)T * f->c.dim, true);
}

static const em_llama_kernels cuda_kernels = {
    .begin = cuda_begin_split,
    .norm = cuda_norm,
    .qkv = cuda_qkv,
    .attention = cuda_attention,
    .local_kv = cuda_local_kv,
    .attention_block = cuda_attention_block,
    .attention_finish = cuda_attention_finish,
    .attn_out = cuda_attn_out,
    .mlp = cuda_mlp,
    .partial = cuda_partial,
    .add_partials = cuda_add_partials,
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
    return e == cudaSuccess ? NULL : em_cuda_error(e, "forward");
}

static em_status backend_score_batch(void *fp, const em_batch_window *windows, int count) {
    em_cuda_forward *f = (em_cuda_forward *)fp;
    em_status err = em_llama_compose(&cuda_kernels, f, f->c.n_layers, f->c.dim, f->c.post_norms,
                                     f->c.n_vocab, &f->split.groups, f->threads, windows, count);
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
    em_status err = em_cuda_alloc((void **)&dpart, count * sizeof *dpart, NULL);
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
    return err ? err : e == cudaSuccess ? NULL : em_cuda_error(e, "paired head");
}

static em_status backend_score_pair(void *ref, void *cand, const int32_t *input,
                                    const int32_t *target, int T, int score_from, double *nll_ref,
                                    int32_t *argmax_ref, double *nll_cand, int32_t *argmax_cand,
                                    double *kl) {
    em_cuda_forward *r = (em_cuda_forward *)ref, *c = (em_cuda_forward *)cand;
    if (r->split.groups.tp.size > 1 || r->split.groups.cp.size > 1 || c->split.groups.tp.size > 1 ||
        c->split.groups.cp.size > 1)
        return em_error_new(EM_EXIT_BAD_INPUT, "paired scoring needs tp = cp = 1");
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
    const em_cuda_forward *f = (const em_cuda_forward *)fp;
    return f->activation_bytes + f->split.device_bytes + em_weights_scratch_bytes(&f->store) +
           em_cuda_attention_work_bytes(f->attn_work) +
           (f->prefix_cache ? em_cuda_kv_cache_bytes(f->prefix_cache) : 0);
}

static size_t backend_weight_bytes(const void *fp) {
    return ((const em_cuda_forward *)fp)->weight_bytes;
}

static void backend_free(void *fp) {
    em_cuda_forward *f = (em_cuda_forward *)fp;
    if (!f) return;
    free_activations(f);
    cuda_split *s = &f->split;
    split_buffer *bufs[] = {&s->host_y,  &s->all,  &s->host_k, &s->host_v, &s->block_k,
                            &s->block_v, &s->qpos, &s->kpos,   &s->ring};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) {
        if (bufs[i]->host)
            cudaFreeHost(bufs[i]->p);
        else
            cudaFree(bufs[i]->p);
    }
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
    em_gemm_free(f->gemm);
    em_weights_free(&f->store);
    em_cuda_attention_work_free(f->attn_work);
    em_cuda_kv_cache_free(f->prefix_cache);
    free(f);
}

/* A forward without weights yet: device chosen, its matrix products' cuBLASLt context on stream 0
 * (the stream of its kernels) with a fixed workspace. */
static em_status forward_shell(const em_llama_config *c, int threads, em_cuda_forward **out) {
    *out = NULL;
    /* the FP32 row serves every mode, so a shape it runs has a kernel in every mode */
    em_cuda_attention_shape shape = {c->n_heads, c->n_kv_heads, c->head_dim};
    if (!em_cuda_attention_kernel_for(EM_CUDA_COMPUTE_FP32, &shape) ||
        c->head_dim > EM_CUDA_ATTENTION_MAX_HEAD_DIM)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "device cuda: no attention kernel runs %d heads of %d over %d KV heads "
                            "(head dimension at most %d)",
                            c->n_heads, c->head_dim, c->n_kv_heads, EM_CUDA_ATTENTION_MAX_HEAD_DIM);
    em_status err = select_device();
    if (err) return err;
    em_cuda_forward *f = (em_cuda_forward *)em_xcalloc(1, sizeof *f);
    f->c = *c;
    f->threads = threads < 1 ? 1 : threads;
    f->split.groups.tp = f->split.groups.cp = em_forward_group{0, 1, NULL, NULL, NULL};
    f->split.vocab_rows = c->n_vocab;
    f->split.host_y.host = f->split.host_k.host = f->split.host_v.host = true;
    f->layers = (cuda_layer *)em_xcalloc((size_t)c->n_layers, sizeof *f->layers);
    err = em_gemm_new(0, &f->gemm);
    if (!err && !(f->attn_work = em_cuda_attention_work_new()))
        err = em_error_new(EM_EXIT_RUNTIME, "cuda: the attention's work space");
    if (err) {
        backend_free(f);
        return err;
    }
    *out = f;
    return NULL;
}

/* This rank's share of the model (llama_shard.h, the cpu backend's split) onto the device: the
 * token embedding whole (the window's rows are looked up on the device), the output head's rows
 * of this rank (tied at tp = 1: the embedding itself), each layer's shard, the norms. */
static em_status upload_model(em_cuda_forward *f, const em_model *m, const em_llama_shard *sh) {
    const em_llama_config *c = &m->config;
    int64_t D = c->dim, hd = c->head_dim;
    int64_t QD = (int64_t)sh->n_heads * hd, KVD = (int64_t)sh->n_kv_heads * hd;
    em_status err =
        em_weights_upload(&f->store, m->tok_embd, false, &f->tok_embd, &f->weight_bytes);
    if (!err) {
        if (m->output == m->tok_embd && sh->tp == 1)
            f->output = f->tok_embd;
        else
            err = em_weights_upload(&f->store, &sh->output, false, &f->output, &f->weight_bytes);
    }
    if (!err) err = upload_vector(f, m->output_norm, D, &f->output_norm);
    for (int i = 0; i < c->n_layers && !err; i++) {
        const em_layer_weights *w = &m->layers[i];
        const em_llama_shard_layer *s = &sh->layers[i];
        cuda_layer *l = &f->layers[i];
        const em_tensor *mats[] = {&s->wq,     &s->wk,   &s->wv,    &s->wo,
                                   &s->w_gate, &s->w_up, &s->w_down};
        em_dmat *dst[] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->w_gate, &l->w_up, &l->w_down};
        for (int j = 0; j < 7 && !err; j++)
            err = em_weights_upload(&f->store, mats[j], true, dst[j], &f->weight_bytes);
        if (!err) err = upload_vector(f, w->attn_norm, D, &l->attn_norm);
        if (!err) err = upload_vector(f, w->ffn_norm, D, &l->ffn_norm);
        if (!err && c->has_qkv_bias) {
            err = upload_floats(f, s->bq, QD, &l->bq);
            if (!err) err = upload_floats(f, s->bk, KVD, &l->bk);
            if (!err) err = upload_floats(f, s->bv, KVD, &l->bv);
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
                                const em_forward_options *options, void **out) {
    *out = NULL;
    /* the CPU forward's checks of shapes and types (cheap at tp = 1: views, no copies) */
    em_llama_forward *check = NULL;
    em_status err = em_llama_forward_new(model, 1, &check);
    em_llama_forward_free(check);
    if (err) return err;
    /* this rank's share, as the cpu backend splits it: a tp that does not fit the model is
     * refused here, before any device is touched */
    em_llama_shard shard;
    if ((err = em_llama_shard_new(model, groups->tp.size, groups->tp.rank, &shard)))
        return em_error_prefix(err, "model %s", model->path);
    em_llama_config mine = model->config;
    mine.n_heads = shard.n_heads;
    mine.n_kv_heads = shard.n_kv_heads;
    mine.ffn_dim = shard.ffn_dim;
    em_cuda_forward *f = NULL;
    err = forward_shell(&mine, threads, &f);
    if (!err) {
        f->model = model;
        f->split.groups = *groups;
        f->split.vocab_row0 = shard.vocab_row0;
        f->split.vocab_rows = shard.vocab_rows;
        err = em_weights_init(&f->store, options, model);
        if (!err) err = upload_model(f, model, &shard);
        if (!err) err = em_weights_ready(&f->store);
    }
    em_llama_shard_free(&shard, model->config.n_layers); /* uploaded: the host copies go */
    if (err) {
        backend_free(f);
        return err;
    }
    *out = f;
    return NULL;
}

/* ---- greedy decoding (forward_backend.h's decode_new, prefill and step) ---- */

typedef struct cuda_decode {
    em_cuda_forward *f;
    em_cuda_kv_cache *cache;
    int sequences, positions;
} cuda_decode;

static em_status backend_decode_new(void *fp, int sequences, int positions, void **out) {
    em_cuda_forward *f = (em_cuda_forward *)fp;
    *out = NULL;
    em_status err = em_decode_check_cache(sequences, positions);
    if (err) return err;
    if (f->split.groups.cp.size > 1)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "a forward with cp = %d does not decode (decoding needs cp = 1)",
                            f->split.groups.cp.size);
    /* a step's one row per sequence must get the bits its row gets in the whole sequence */
    char why[512];
    if (!em_cuda_gemm_row_invariant(f, why, sizeof why))
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "device cuda: decoding needs matrix products whose rows do not depend "
                            "on the batch, and %s",
                            why);
    em_cuda_kv_cache *cache = NULL;
    err = em_cuda_kv_cache_new(f->c.n_layers, f->c.n_kv_heads * f->c.head_dim, sequences, positions,
                               &cache);
    if (err) return err;
    cuda_decode *d = (cuda_decode *)em_xcalloc(1, sizeof *d);
    *d = cuda_decode{f, cache, sequences, positions};
    *out = d;
    return NULL;
}

/* logits (n_vocab) of row `row` of the batch run last, from its residual left in x: its final
 * norm, the head's products over this rank's vocabulary rows in the stretches the head uses for
 * one position, the cap, gathered over tp. The numbers whose tiles gave the row's argmax. */
static em_status row_logits(em_cuda_forward *f, int row, float *logits) {
    const em_forward_group *tp = &f->split.groups.tp;
    int64_t V = f->split.vocab_rows;
    float *mine =
        tp->size > 1 ? (float *)em_xcalloc((size_t)f->c.n_vocab + 1, sizeof *mine) : logits;
    const void *in = final_norm(f, row, 1);
    int stretch = head_rows_for(&f->c, 1);
    cudaError_t e = cudaSuccess;
    for (int64_t row0 = 0; row0 < V && e == cudaSuccess; row0 += stretch) {
        int rows = (int)(V - row0 < stretch ? V - row0 : stretch);
        head_logits(f, in, 1, row0, rows, f->logits); /* (rows, 1): one row's logits */
        if (f->c.final_softcap > 0.0f) em_cuda_softcap(f->logits, rows, f->c.final_softcap);
        e = cudaMemcpy(mine + row0, f->logits, (size_t)rows * sizeof *mine, cudaMemcpyDeviceToHost);
    }
    em_status err = window_status(f);
    if (!err && e != cudaSuccess) err = em_cuda_error(e, "copying the logits");
    if (!err) err = em_forward_gather_vocab(tp, f->c.n_vocab, mine, logits);
    if (mine != logits) free(mine);
    return err;
}

/* Runs windows (count) after the rows of their slots of cache, the windows' own rows kept after
 * them, and gives each window's last row's logits when asked. */
static em_status run_after_kept(em_cuda_forward *f, em_cuda_kv_cache *cache, const int *slots,
                                const em_batch_window *windows, int count, float *logits) {
    cuda_kept_batch batch;
    batch.layer_floats = em_cuda_kv_cache_layer_floats(cache);
    em_status err =
        em_cuda_kv_cache_batch(cache, slots, count, &batch.view, &batch.before, &batch.slot);
    if (err) return err;
    f->kept = &batch;
    err = backend_score_batch(f, windows, count);
    f->kept = NULL;
    size_t vocab = (size_t)f->c.n_vocab;
    for (int i = 0, row = 0; i < count && !err; i++) {
        row += windows[i].T;
        if (logits) err = row_logits(f, row - 1, logits + (size_t)i * vocab);
    }
    if (!err) em_cuda_kv_cache_advance(cache, windows, count);
    return err;
}

static em_status backend_prefill(void *dp, const int *slots, const int32_t *const *prompts,
                                 const int *lengths, int count, int32_t *next, float *logits) {
    cuda_decode *d = (cuda_decode *)dp;
    em_status err = em_decode_check_prefill(d->sequences, d->positions, slots, lengths, count);
    if (!err) err = em_cuda_kv_cache_reset(d->cache, slots, count);
    if (err) return err;
    double *nll = (double *)em_xmalloc((size_t)count * sizeof *nll);
    em_batch_window *windows = (em_batch_window *)em_xcalloc((size_t)count, sizeof *windows);
    for (int i = 0; i < count; i++)
        windows[i] =
            em_batch_window{prompts[i], NULL, lengths[i], lengths[i] - 1, nll + i, next + i};
    err = run_after_kept(d->f, d->cache, slots, windows, count, logits);
    free(nll);
    free(windows);
    return err ? em_error_prefix(err, "prefill") : NULL;
}

static em_status backend_step(void *dp, const int *slots, const int32_t *tokens, int count,
                              int32_t *next, float *logits) {
    cuda_decode *d = (cuda_decode *)dp;
    em_status err = em_decode_check_step(d->sequences, d->positions,
                                         em_cuda_kv_cache_lengths(d->cache), slots, count);
    if (err) return err;
    double *nll = (double *)em_xmalloc((size_t)count * sizeof *nll);
    em_batch_window *windows = (em_batch_window *)em_xcalloc((size_t)count, sizeof *windows);
    for (int i = 0; i < count; i++)
        windows[i] = em_batch_window{tokens + i, NULL, 1, 0, nll + i, next + i};
    err = run_after_kept(d->f, d->cache, slots, windows, count, logits);
    free(nll);
    free(windows);
    return err ? em_error_prefix(err, "decoding step") : NULL;
}

/* ---- shared prefixes (forward_backend.h's score_shared_prefixes) ---- */

/* The continuation c of prefix p as one whole window through score_batch: what products that are
 * not row-invariant score instead (the bits of the whole window, as the seam promises). */
static em_status score_whole(em_cuda_forward *f, const em_shared_prefix *p,
                             const em_batch_window *c) {
    int T = p->P + c->T;
    int32_t *input = (int32_t *)em_xmalloc((size_t)T * sizeof *input);
    int32_t *target = (int32_t *)em_xcalloc((size_t)T, sizeof *target); /* 0 where not scored */
    memcpy(input, p->ids, (size_t)p->P * sizeof *input);
    memcpy(input + p->P, c->input, (size_t)c->T * sizeof *input);
    if (c->target)
        memcpy(target + p->P + c->score_from, c->target + c->score_from,
               (size_t)(c->T - c->score_from) * sizeof *target);
    em_batch_window whole = {input,    c->target ? target : NULL, T, p->P + c->score_from, c->nll,
                             c->argmax};
    em_status err = backend_score_batch(f, &whole, 1);
    free(input);
    free(target);
    return err;
}

/* Room for `slots` sequences of `positions` positions in the forward's prefix cache. */
static em_status reserve_prefix_cache(em_cuda_forward *f, int slots, int positions) {
    if (f->prefix_cache && slots <= f->prefix_slots && positions <= f->prefix_positions)
        return NULL;
    slots = slots > f->prefix_slots ? slots : f->prefix_slots;
    positions = positions > f->prefix_positions ? positions : f->prefix_positions;
    em_cuda_kv_cache_free(f->prefix_cache);
    f->prefix_cache = NULL;
    f->prefix_slots = f->prefix_positions = 0;
    em_status err = em_cuda_kv_cache_new(f->c.n_layers, f->c.n_kv_heads * f->c.head_dim, slots,
                                         positions, &f->prefix_cache);
    if (err) return err;
    f->prefix_slots = slots;
    f->prefix_positions = positions;
    return NULL;
}

/* The prefixes (with continuations) in one batch, their keys and values kept in the slot of each
 * one's first continuation and copied to the slots of its others; then every continuation in one
 * batch after its slot's rows. */
static em_status backend_score_shared_prefixes(void *fp, const em_shared_prefix *prefixes,
                                               int count) {
    em_cuda_forward *f = (em_cuda_forward *)fp;
    if (f->split.groups.cp.size > 1)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "a forward with cp = %d does not score shared prefixes (score the "
                            "whole windows)",
                            f->split.groups.cp.size);
    int continuations = 0, positions = 1, used = 0;
    for (int g = 0; g < count; g++) {
        const em_shared_prefix *p = &prefixes[g];
        if (p->P < 1)
            return em_error_new(EM_EXIT_BAD_INPUT, "a shared prefix of %d positions", p->P);
        for (int c = 0; c < p->count; c++)
            if (p->P + p->continuations[c].T > positions) positions = p->P + p->continuations[c].T;
        continuations += p->count;
        used += p->count > 0;
    }
    if (continuations == 0) return NULL;
    em_status err = NULL;
    if (!em_cuda_gemm_row_invariant(f, NULL, 0)) {
        for (int g = 0; g < count && !err; g++)
            for (int c = 0; c < prefixes[g].count && !err; c++)
                err = score_whole(f, &prefixes[g], &prefixes[g].continuations[c]);
        return err;
    }
    if ((err = reserve_prefix_cache(f, continuations, positions))) return err;
    em_cuda_kv_cache *cache = f->prefix_cache;
    int *slots = (int *)em_xmalloc((size_t)continuations * sizeof *slots);
    int *first = (int *)em_xmalloc((size_t)used * sizeof *first);
    em_batch_window *windows =
        (em_batch_window *)em_xmalloc((size_t)continuations * sizeof *windows);
    /* the prefixes' layers only (nll NULL: no head), their ids standing as targets for the check
     * of the window's ids; prefix g's rows kept in the slot of its first continuation */
    for (int g = 0, w = 0, slot = 0; g < count; slot += prefixes[g].count, g++) {
        const em_shared_prefix *p = &prefixes[g];
        if (p->count == 0) continue;
        windows[w] = em_batch_window{p->ids, p->ids, p->P, p->P - 1, NULL, NULL};
        first[w++] = slot;
    }
    err = em_cuda_kv_cache_reset(cache, first, used);
    if (!err) err = run_after_kept(f, cache, first, windows, used, NULL);
    if (err) err = em_error_prefix(err, "shared prefix");
    /* every continuation in its own slot, after a copy of its prefix's rows */
    for (int g = 0, w = 0; g < count && !err; g++) {
        const em_shared_prefix *p = &prefixes[g];
        for (int c = 0; c < p->count && !err; c++, w++) {
            windows[w] = p->continuations[c];
            slots[w] = w;
            if (c > 0) err = em_cuda_kv_cache_copy(cache, w - c, w, p->P);
        }
    }
    if (!err) err = run_after_kept(f, cache, slots, windows, continuations, NULL);
    free(slots);
    free(first);
    free(windows);
    return err;
}

static size_t backend_decode_memory(const void *dp) {
    return em_cuda_kv_cache_bytes(((const cuda_decode *)dp)->cache);
}

static void backend_decode_free(void *dp) {
    cuda_decode *d = (cuda_decode *)dp;
    if (!d) return;
    em_cuda_kv_cache_free(d->cache);
    free(d);
}

const em_forward_backend em_forward_backend_cuda = {
    .name = "cuda",
    /* 16384 positions (8 windows of 2048): GEMMs of that many rows run near the GPU's peak, and
     * an 8B model's activations for them take about 3.5 GiB */
    .batch_tokens = 16384,
    /* what it hands its tp and cp groups is host memory (pinned staging, cuda_split), as the
     * composition's gathers and ring blocks are host buffers: any mesh backend carries it, mpi
     * as it is and nccl through its host staging */
    .gpu_buffers = false,
    .weight_storage = true,
    .ggml_precision = false, /* exact only: the ggml precision's kernels are the CPU's */
    .bf16_precision = false, /* nor bf16: its kernels are the CPU's (bf16_dot.h) */
    .needs_gpu = true,
    .available = em_cuda_available,
    .create = backend_create,
    .score_batch = backend_score_batch,
    .score_shared_prefixes = backend_score_shared_prefixes,
    /* 8192 prefix positions a call: the prefixes' and the continuations' products run with
     * thousands of rows, near the GPU's peak */
    .prefix_batch_tokens = 8192,
    .score_pair = backend_score_pair,
    .decode_new = backend_decode_new,
    .prefill = backend_prefill,
    .step = backend_step,
    .decode_memory = backend_decode_memory,
    .decode_free = backend_decode_free,
    .observe = NULL, /* calibrate runs on the cpu backend */
    .kernel = NULL,
    .memory = backend_memory,
    .weight_bytes = backend_weight_bytes,
    .free = backend_free,
};

static em_status ones(em_cuda_forward *f, int64_t n, float **out) {
    em_status err = em_cuda_alloc((void **)out, (size_t)n * 4, &f->weight_bytes);
    if (!err) em_cuda_fill_f32(*out, n, 1.0f);
    return err;
}

em_status em_cuda_forward_new_random(const em_llama_config *c, uint64_t seed, uint32_t layer_type,
                                     int threads, void **out) {
    *out = NULL;
    em_cuda_forward *f = NULL;
    em_status err = forward_shell(c, threads, &f);
    if (err) return err;
    em_weight_store *store = &f->store; /* zeroed: generated blocks stay in their blocks */
    int64_t D = c->dim, F = c->ffn_dim, QD = (int64_t)c->n_heads * c->head_dim;
    int64_t KVD = (int64_t)c->n_kv_heads * c->head_dim;
    uint64_t s = seed * 1000;
    size_t *bytes = &f->weight_bytes;
    err = em_weights_random(store, EM_TENSOR_BF16, D, c->n_vocab, s++, &f->tok_embd, bytes);
    if (!err) err = em_weights_random(store, EM_TENSOR_BF16, D, c->n_vocab, s++, &f->output, bytes);
    if (!err) err = ones(f, D, &f->output_norm);
    for (int i = 0; i < c->n_layers && !err; i++) {
        cuda_layer *l = &f->layers[i];
        int64_t shapes[7][2] = {{D, QD}, {D, KVD}, {D, KVD}, {QD, D}, {D, F}, {D, F}, {F, D}};
        em_dmat *dst[] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->w_gate, &l->w_up, &l->w_down};
        for (int j = 0; j < 7 && !err; j++)
            err = em_weights_random(store, layer_type, shapes[j][0], shapes[j][1], s++, dst[j],
                                    bytes);
        if (!err) err = ones(f, D, &l->attn_norm);
        if (!err) err = ones(f, D, &l->ffn_norm);
    }
    if (!err) err = em_weights_ready(store);
    cudaError_t e = err ? cudaSuccess : cudaDeviceSynchronize();
    if (!err && e != cudaSuccess) err = em_cuda_error(e, "generating weights");
    if (err) {
        backend_free(f);
        return err;
    }
    *out = f;
    return NULL;
}

em_status em_cuda_gemm_tflops(int m, int n, int k, int reps, double *tflops, char *algo,
                              size_t algo_size) {
    em_status err = select_device();
    if (err) return err;
    em_dmat w = {CUDA_R_16BF, NULL, m, k, 0};
    void *in = NULL;
    float *out = NULL;
    em_gemm *g = NULL;
    const em_gemm_plan *plan = NULL;
    cudaEvent_t start = NULL, stop = NULL;
    if (!(err = em_cuda_alloc(&w.data, (size_t)m * k * 2, NULL)) &&
        !(err = em_cuda_alloc(&in, (size_t)k * n * 2, NULL)) &&
        !(err = em_cuda_alloc((void **)&out, (size_t)m * n * 4, NULL)) &&
        !(err = em_gemm_new(0, &g))) {
        em_gemm_shape shape = {EM_GEMM_PROJECTION, CUDA_R_16BF, m, k, false};
        err = em_gemm_plan_for(g, &shape, &plan);
    }
    if (!err) {
        em_gemm_plan_describe(plan, algo, algo_size);
        em_cuda_fill_bf16((__nv_bfloat16 *)w.data, (int64_t)m * k, 1, 0.1f, 0.0f);
        em_cuda_fill_bf16((__nv_bfloat16 *)in, (int64_t)k * n, 2, 0.1f, 0.0f);
        float ms = 0.0f;
        cudaEventCreate(&start);
        cudaEventCreate(&stop);
        for (int i = 0; i <= reps && !err; i++) {
            if (i == 1) cudaEventRecord(start); /* the first product warms up */
            err = em_gemm_project(g, &w, in, n, out, false);
        }
        cudaEventRecord(stop);
        cudaError_t e = cudaEventSynchronize(stop);
        cudaEventElapsedTime(&ms, start, stop);
        if (!err && e != cudaSuccess) err = em_cuda_error(e, "GEMM benchmark");
        if (!err) *tflops = 2.0 * m * n * (double)k * reps / (ms * 1e-3) / 1e12;
    }
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    em_gemm_free(g);
    cudaFree(w.data);
    cudaFree(in);
    cudaFree(out);
    return err ? em_error_prefix(err, "GEMM benchmark") : NULL;
}

bool em_cuda_gemm_row_invariant(void *forward, char *reason, size_t size) {
    em_cuda_forward *f = (em_cuda_forward *)forward;
    /* the plans of every product the windows make: projections (Wo and Wdown accumulate onto x
     * unless post-norms put them in y) and the head */
    bool into_x = !f->c.post_norms;
    em_status err = NULL;
    for (int i = 0; i < f->c.n_layers && !err; i++) {
        const cuda_layer *l = &f->layers[i];
        const em_dmat *mats[] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->w_gate, &l->w_up, &l->w_down};
        const bool accumulate[] = {false, false, false, into_x, false, false, into_x};
        for (int j = 0; j < 7 && !err; j++) {
            em_gemm_shape shape = {EM_GEMM_PROJECTION, mats[j]->type, mats[j]->rows, mats[j]->cols,
                                   accumulate[j]};
            const em_gemm_plan *plan = NULL;
            err = em_gemm_plan_for(f->gemm, &shape, &plan);
        }
    }
    if (!err) {
        em_gemm_shape head = {EM_GEMM_HEAD, f->output.type, 0, f->output.cols, false};
        const em_gemm_plan *plan = NULL;
        err = em_gemm_plan_for(f->gemm, &head, &plan);
    }
    if (err) {
        if (reason) snprintf(reason, size, "%s", err->message);
        em_error_free(err);
        return false;
    }
    return em_gemm_row_invariant(f->gemm, reason, size);
}

size_t em_cuda_device_used_bytes(void) {
    size_t free_b = 0, total = 0;
    return cudaMemGetInfo(&free_b, &total) == cudaSuccess ? total - free_b : 0;
}
