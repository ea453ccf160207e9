/* Causal grouped-query attention on tensor cores, FlashAttention-2 style (attention_flash.cu), for
 * the forwards whose weights are BF16/F16: q (T, H*hd), k, v (T, KV*hd) are the forward's FP32
 * activations, rounded to nearest BF16: q as its tiles are loaded into shared memory, k and v once
 * per call into a BF16 copy (2 (T, KV*hd) values in em_cuda_attention_work), which every query
 * tile then reads at half the bytes. Products run on tensor cores (WMMA 16x16x16, BF16 in, FP32
 * accumulation); scores, the softmax state and the output accumulators are FP32. Query head h
 * reads KV head h / (H / KV).
 *
 * Work: one CTA per (tile of EM_FLASH_QUERY_TILE queries of one window, head), the tiles listed on
 * the host (em_flash_plan) relative to their window's first row. A CTA walks the window's key
 * blocks of EM_FLASH_KEY_BLOCK keys in ascending order from the first one any of its queries sees,
 * keeping per query the running max m and sum l of the online softmax and the unnormalized output
 * O in shared memory: per block S = Q K^T, scores scaled and capped (em_flash_score), masked
 * (em_flash_key_visible), m' = max(m, max S), P = exp(S - m'), l = l exp(m - m') + sum P,
 * O = O exp(m - m') + P V; at the end att = O / l. Rows and keys past the window are loaded as
 * zeros. Memory: shared memory per CTA and the O(T) BF16 copy of k and v: no (T, T) scores.
 *
 * A window's numbers depend only on the window: its tiles, blocks, zero padding and key order are
 * the same whatever batch holds it and wherever; no atomics, every sum has a fixed order. */
#ifndef EVALMESH_KERNELS_CUDA_ATTENTION_FLASH_CUH
#define EVALMESH_KERNELS_CUDA_ATTENTION_FLASH_CUH

#include <cuda_runtime.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "stages/kernels/cuda/kernels.cuh"

#define EM_FLASH_WARPS 4                          /* warps per CTA, 16 query rows each */
#define EM_FLASH_QUERY_TILE (16 * EM_FLASH_WARPS) /* queries per CTA */
#define EM_FLASH_KEY_BLOCK 64                     /* keys per step of the online softmax */

#define EM_FLASH_HD __host__ __device__ static inline

/* Query `query` sees key `key` (both relative to their window): causal, and with window > 0 only
 * the `window` latest keys (query - key < window), as em_cuda_mask defines it. */
EM_FLASH_HD bool em_flash_key_visible(int query, int key, int window) {
    return key <= query && (window <= 0 || query - key < window);
}

/* The score of a dot product q.k: scaled, then with softcap > 0 softcap * tanh(s / softcap). */
EM_FLASH_HD float em_flash_score(float dot, float scale, float softcap) {
    float s = dot * scale;
    return softcap > 0.0f ? softcap * tanhf(s / softcap) : s;
}

/* The factor exp(m_old - m_new) that rescales a row's sum and output when its running max moves
 * from m_old to m_new >= m_old: 0 when the row had seen no key (m_old = -inf), 1 while it still
 * sees none (both -inf), so rows without visible keys stay exact zeros rather than NaN. */
EM_FLASH_HD float em_flash_rescale(float m_old, float m_new) {
    return m_new == -INFINITY ? 1.0f : expf(m_old - m_new);
}

/* The probability of one score against the row's running max m (finite when the key is visible):
 * 0 for a key the query does not see. */
EM_FLASH_HD float em_flash_probability(float score, float m, bool visible) {
    return visible ? expf(score - m) : 0.0f;
}

/* Some query of first..last (first <= last) sees some key of key_first..key_last. */
EM_FLASH_HD bool em_flash_block_visible(int first, int last, int key_first, int key_last,
                                        int window) {
    if (key_first > last) return false;                   /* all keys after the queries */
    return window <= 0 || key_last >= first - window + 1; /* the latest key is in reach */
}

/* The key blocks queries first..last of a window walk: [*begin, *end) in units of
 * EM_FLASH_KEY_BLOCK keys, from the block of the first key the first query sees to the block of
 * the last query (the diagonal). */
EM_FLASH_HD void em_flash_key_blocks(int first, int last, int window, int *begin, int *end) {
    int key0 = window > 0 && first - window + 1 > 0 ? first - window + 1 : 0;
    *begin = key0 / EM_FLASH_KEY_BLOCK;
    *end = last / EM_FLASH_KEY_BLOCK + 1;
}

/* One CTA's queries: window positions q0 .. min(q0 + EM_FLASH_QUERY_TILE, len) - 1 of a window
 * of `len` positions whose position p is row start + p of the batch's queries. Its keys are
 * positions 0 .. len - 1: rows start .. of the batch's keys, or, after kept rows, rows 0 .. of
 * slot `slot` (em_cuda_kept), where start may be negative (the kept positions have no query row).
 */
typedef struct em_flash_tile {
    int32_t start, len, q0, slot;
} em_flash_tile;

/* Tiles of the windows of a batch given by its (count + 1) row offsets; -1 when the offsets are
 * not a non-decreasing list from 0. */
int64_t em_flash_tile_count(const int32_t *offsets, int count);

/* Writes em_flash_tile_count tiles: every window's tiles at q0 = 0, EM_FLASH_QUERY_TILE, ...,
 * ordered by the keys they walk, most first (so the longest CTAs start first), ties in window
 * then q0 order. Windows of length 0 have none. The order decides only when a tile runs, never
 * its numbers. */
void em_flash_plan(const int32_t *offsets, int count, em_flash_tile *tiles);

/* Tiles of the windows of a batch after kept rows (em_cuda_kept): window w, of offsets[w+1] -
 * offsets[w] rows, follows before[w] kept rows. */
int64_t em_flash_kept_tile_count(const int32_t *offsets, const int32_t *before, int count);

/* Writes em_flash_kept_tile_count tiles: window w's sequence has len = before[w] + its rows
 * positions, start = offsets[w] - before[w] and slot[w]; its tiles' q0 are before[w],
 * before[w] + EM_FLASH_QUERY_TILE, ... (its own rows); ordered as em_flash_plan orders them. A
 * query's keys, key blocks and sums are those of the whole sequence in one window through
 * em_flash_plan's tiles, as a row's numbers do not depend on the other rows of its tile. */
void em_flash_plan_kept(const int32_t *offsets, const int32_t *before, const int32_t *slot,
                        int count, em_flash_tile *tiles);

/* The shape of an attention call. */
typedef struct em_cuda_attention_shape {
    int n_heads, n_kv_heads, head_dim;
} em_cuda_attention_shape;

/* The tensor-core kernel runs this shape: head_dim 64, 128 or 256 (shared memory per CTA: about
 * 70, 110 and 190 KiB) and n_heads a multiple of n_kv_heads. */
bool em_flash_supports(const em_cuda_attention_shape *shape);

/* What the attention kernels keep between calls of one forward: the tile lists of the current
 * batch (and of the current batch after kept rows) on the host and the device, rebuilt when the
 * batch changes, and the BF16 copy of k and v, grown to the largest T seen. */
typedef struct em_cuda_attention_work em_cuda_attention_work;

em_cuda_attention_work *em_cuda_attention_work_new(void);
void em_cuda_attention_work_free(em_cuda_attention_work *w);
/* Device bytes the work holds (for the forward's memory report). */
size_t em_cuda_attention_work_bytes(const em_cuda_attention_work *w);

/* att (T, H*hd) = attention of q (T, H*hd) over k, v (T, KV*hd) for the windows of seg (T =
 * seg->host[seg->count]; seg->device is not read), on stream 0; the shape must be
 * em_flash_supports'd and the buffers 16-byte aligned (cudaMalloc'd). Returns the failure of the
 * work's buffers (cudaMalloc, cudaMemcpy) or of the launch, cudaSuccess otherwise;
 * cudaErrorInvalidValue for bad offsets or shape. */
cudaError_t em_cuda_flash_attention(em_cuda_attention_work *w, const float *q, const float *k,
                                    const float *v, const em_cuda_segments *seg, int H, int KV,
                                    int hd, const em_cuda_mask *mask, float *att);

/* em_cuda_flash_attention for windows that follow kept rows (kept: device, before and slot also
 * on the host in before_host and slot_host, for the plan): q (T, H*hd) are the windows' own
 * rows, whose keys em_cuda_keep_rows has written to their slots; the kept FP32 rows are rounded
 * to BF16 as the tiles load them, the values em_cuda_flash_attention's copy holds. */
cudaError_t em_cuda_flash_attention_kept(em_cuda_attention_work *w, const float *q,
                                         const em_cuda_kept *kept, const int32_t *before_host,
                                         const int32_t *slot_host, const em_cuda_segments *seg,
                                         int H, int KV, int hd, const em_cuda_mask *mask,
                                         float *att);

#endif
