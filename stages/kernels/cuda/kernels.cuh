/* The device kernels of the cuda forward (kernels.cu), each behind a host launcher on stream 0.
 * Activations are FP32, row-major: (T, n) means T rows of n values. Every reduction has a fixed
 * order, so a kernel's results depend only on its inputs. */
#ifndef EVALMESH_KERNELS_CUDA_KERNELS_CUH
#define EVALMESH_KERNELS_CUDA_KERNELS_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <library_types.h>
#include <stdint.h>

extern "C" {
#include "stages/kernels/vocab_head.h"
}

/* A weight matrix on the device: rows (n_out) of cols (n_in) values of type (CUDA_R_32F,
 * CUDA_R_16F or CUDA_R_16BF), row-major; or, when blocks_type is not 0, data holds the rows in
 * blocks of that tensor type, kept quantized and dequantized to `type` (BF16) before each product
 * (device_weights.cuh). */
typedef struct em_dmat {
    cudaDataType_t type;
    void *data;
    int64_t rows, cols;
    uint32_t blocks_type; /* 0 (values as they are), or a type of dequantize.cuh's table */
} em_dmat;

/* x (T, D) = scale * rows ids[t] of the embedding e (e->cols == D), as FP32. */
void em_cuda_embed(const em_dmat *e, const int32_t *ids, int T, float scale, float *x);

/* y (rows, n) = RMSNorm(x) * w: sum of squares in double, 1 / sqrt(ss / n + eps) in double. */
void em_cuda_rmsnorm(const float *x, const float *w, int rows, int n, float eps, float *y);

/* y (T, n) += b (n) on every row. */
void em_cuda_add_bias(float *y, const float *b, int T, int n);

/* x (T, ld) of heads of head_dim: rotates pairs (2i, 2i+1), i < rope_dim/2, by cos_sin
 * (T, rope_dim/2, 2) (rope.h's table). */
void em_cuda_rope(float *x, int T, int ld, int heads, int head_dim, int rope_dim,
                  const float *cos_sin);

/* How attention scores are scaled, capped and windowed (the CPU's em_attention_mask). */
typedef struct em_cuda_mask {
    float scale;   /* scores are q.k * scale */
    float softcap; /* > 0: score = softcap tanh(score / softcap) */
    int window;    /* > 0: query i sees keys j with i - j < window */
} em_cuda_mask;

/* The windows of a batch (many windows per launch): rows start[w] .. start[w+1]-1 of the
 * activations are window w's positions 0 .. start[w+1]-start[w]-1, and attention never crosses a
 * window, so each window's results are those it has alone. One window of T rows: count 1,
 * start {0, T}. */
typedef struct em_cuda_segments {
    int count;
    const int32_t *host;   /* (count + 1) row offsets, host memory */
    const int32_t *device; /* the same offsets on the device */
} em_cuda_segments;

/* The largest head_dim the FP32 attention kernels take (em_cuda_attention and the block kernel
 * of attention_block.cuh: one warp per query and head, 8 values per lane). */
#define EM_CUDA_ATTENTION_MAX_HEAD_DIM 256

/* att (T, H*hd) = causal attention of q (T, H*hd) over k, v (T, KV*hd) within each window of
 * windows (T = windows->host[windows->count]), query head h reading KV head h / (H / KV); online
 * softmax over blocks of 32 keys counted from the window's first, one warp per (row, head). */
void em_cuda_attention(const float *q, const float *k, const float *v,
                       const em_cuda_segments *windows, int H, int KV, int hd,
                       const em_cuda_mask *mask, float *att);

/* Keys and values kept on the device across calls (decoding's cache, decode_cache.cuh): window w
 * of a batch follows before[w] rows kept in slot slot[w], and its own rows are written after them
 * (em_cuda_keep_rows) before attention, so its keys are rows 0 .. before[w] + T_w - 1 of the
 * slot. A slot's rows of this layer start at k[slot] + layer_offset (v likewise), KV*hd floats a
 * row. Every pointer is device memory. */
typedef struct em_cuda_kept {
    float *const *k, *const *v;   /* (slots) each slot's rows of layer 0 */
    size_t layer_offset;          /* floats from a slot's rows of layer 0 to this layer's */
    const int32_t *slot, *before; /* (windows) */
} em_cuda_kept;

/* Writes k, v (T, KV*hd), the batch's own rows after RoPE, after their windows' kept rows:
 * row t of window w (windows' offsets on the device) to row before[w] + t of its slot. */
void em_cuda_keep_rows(const float *k, const float *v, const em_cuda_segments *windows,
                       int kv_width, const em_cuda_kept *kept);

/* em_cuda_attention for windows that follow kept rows: row t of window w is the query at position
 * before[w] + t and attends to keys 0 .. before[w] + t of its slot (em_cuda_keep_rows has written
 * the window's own). A query's keys, stretches and sums are those of em_cuda_attention over the
 * whole sequence in one window, so its bits are too. */
void em_cuda_attention_kept(const float *q, const em_cuda_kept *kept,
                            const em_cuda_segments *windows, int H, int KV, int hd,
                            const em_cuda_mask *mask, float *att);

/* x (n) = softcap tanh(x / softcap), the head's cap of em_cuda_head_tiles (softcap > 0). */
void em_cuda_softcap(float *x, int64_t n, float softcap);

/* gate (n) = silu(gate) * up (gelu false) or gelu_tanh(gate) * up (gelu true). */
void em_cuda_glu(float *gate, const float *up, int64_t n, bool gelu);

/* x (n) += y (n). */
void em_cuda_add(float *x, const float *y, int64_t n);

/* dst (n) of type (CUDA_R_16BF or CUDA_R_16F) = src (n) rounded to nearest. */
void em_cuda_convert(const float *src, void *dst, cudaDataType_t type, int64_t n);

/* The head tiles of the logits lt (rows, n) (transposed: row r of the vocabulary at lt + r n)
 * of vocabulary rows row0 .. row0 + rows (row0 a multiple of EM_HEAD_TILE_ROWS) for positions
 * 0..n-1: part (tiles of these rows, n) and target_logit[t] where target[t] lies in them;
 * softcap > 0 caps the logits first. */
void em_cuda_head_tiles(const float *lt, int64_t row0, int rows, int n, float softcap,
                        const int32_t *target, em_head_tile *part, float *target_logit);

/* The paired partials of one stretch of both heads' transposed logits (rows, n), see
 * pair_head.h: per tile and position each side's max and sum of exp(l - m) and the reference's
 * sum of exp(l_ref - m_ref) (l_ref - l_cand). */
void em_cuda_pair_tiles(const float *lr, const float *lc, int rows, int n, float cap_ref,
                        float cap_cand, em_pair_tile *part);

/* Fills a device matrix of type CUDA_R_16BF with values uniform in (-bound, bound) from a
 * counter-based hash of (seed, index), or with `fill` when bound is 0. */
void em_cuda_fill_bf16(__nv_bfloat16 *w, int64_t n, uint64_t seed, float bound, float fill);
void em_cuda_fill_f32(float *w, int64_t n, float fill);

/* dst (n) of type CUDA_R_16BF = src (n) floats. */
void em_cuda_f32_to_bf16(const float *src, __nv_bfloat16 *dst, int64_t n);

/* Dequantizes `blocks` blocks of ggml type `type` (a row of dequantize.cuh's table) at src into
 * BF16 values at dst; false when the type has no device decoder. */
bool em_cuda_dequantize_bf16(uint32_t type, const uint8_t *src, int64_t blocks, __nv_bfloat16 *dst);
/* Values per block of a device-dequantized type, 0 for others. */
int em_cuda_block_values(uint32_t type);
/* Bytes per block of a device-dequantized type, 0 for others. */
int em_cuda_block_bytes(uint32_t type);

#endif
