/* Causal GQA attention on tensor cores, FlashAttention-2 style (see attention_flash.cuh): the
 * host's tile planning, the kernel and its launcher. */
#include "stages/kernels/cuda/attention_flash.cuh"

#include <mma.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "util/error.h"
}

using namespace nvcuda;

#define FULL_MASK 0xffffffffu

/* ---- planning (host) ---- */

int64_t em_flash_tile_count(const int32_t *offsets, int count) {
    if (count < 0 || offsets[0] != 0) return -1;
    int64_t tiles = 0;
    for (int w = 0; w < count; w++) {
        int32_t len = offsets[w + 1] - offsets[w];
        if (len < 0) return -1;
        tiles += (len + EM_FLASH_QUERY_TILE - 1) / EM_FLASH_QUERY_TILE;
    }
    return tiles;
}

/* Keys a tile walks (its last query + 1), most first; then window (start) and q0 order. */
static int by_work(const void *pa, const void *pb) {
    const em_flash_tile *a = (const em_flash_tile *)pa, *b = (const em_flash_tile *)pb;
    int32_t wa = a->len - a->q0 < EM_FLASH_QUERY_TILE ? a->len : a->q0 + EM_FLASH_QUERY_TILE;
    int32_t wb = b->len - b->q0 < EM_FLASH_QUERY_TILE ? b->len : b->q0 + EM_FLASH_QUERY_TILE;
    if (wa != wb) return wa > wb ? -1 : 1;
    if (a->start != b->start) return a->start < b->start ? -1 : 1;
    return a->q0 < b->q0 ? -1 : a->q0 > b->q0;
}

void em_flash_plan(const int32_t *offsets, int count, em_flash_tile *tiles) {
    size_t n = 0;
    for (int w = 0; w < count; w++) {
        int32_t len = offsets[w + 1] - offsets[w];
        for (int32_t q0 = 0; q0 < len; q0 += EM_FLASH_QUERY_TILE)
            tiles[n++] = em_flash_tile{offsets[w], len, q0, 0};
    }
    qsort(tiles, n, sizeof *tiles, by_work);
}

int64_t em_flash_kept_tile_count(const int32_t *offsets, const int32_t *before, int count) {
    int64_t tiles = em_flash_tile_count(offsets, count);
    for (int w = 0; w < count && tiles >= 0; w++)
        if (before[w] < 0 || (int64_t)before[w] + offsets[w + 1] - offsets[w] > INT32_MAX)
            return -1;
    return tiles;
}

void em_flash_plan_kept(const int32_t *offsets, const int32_t *before, const int32_t *slot,
                        int count, em_flash_tile *tiles) {
    size_t n = 0;
    for (int w = 0; w < count; w++) {
        int32_t len = before[w] + offsets[w + 1] - offsets[w];
        for (int32_t q0 = before[w]; q0 < len; q0 += EM_FLASH_QUERY_TILE)
            tiles[n++] = em_flash_tile{offsets[w] - before[w], len, q0, slot[w]};
    }
    qsort(tiles, n, sizeof *tiles, by_work);
}

bool em_flash_supports(const em_cuda_attention_shape *shape) {
    int hd = shape->head_dim;
    return (hd == 64 || hd == 128 || hd == 256) && shape->n_kv_heads > 0 &&
           shape->n_heads % shape->n_kv_heads == 0;
}

/* A tile plan on the host and the device, and what it was planned for (its key: the batch's
 * offsets, and after kept rows also each window's before and slot). */
typedef struct flash_plan {
    int32_t *key;
    size_t key_len; /* 0: nothing planned */
    int64_t tiles, capacity;
    em_flash_tile *host, *device; /* (capacity) */
} flash_plan;

struct em_cuda_attention_work {
    flash_plan batch, kept; /* the tiles of the last batch, and of the last batch after kept rows */
    __nv_bfloat16 *kv;      /* (2, T, KV*hd): k and v rounded to BF16, kv_capacity values */
    size_t kv_capacity;
};

em_cuda_attention_work *em_cuda_attention_work_new(void) {
    return (em_cuda_attention_work *)em_xcalloc(1, sizeof(em_cuda_attention_work));
}

static void plan_free(flash_plan *p) {
    cudaFree(p->device);
    free(p->host);
    free(p->key);
}

void em_cuda_attention_work_free(em_cuda_attention_work *w) {
    if (!w) return;
    plan_free(&w->batch);
    plan_free(&w->kept);
    cudaFree(w->kv);
    free(w);
}

size_t em_cuda_attention_work_bytes(const em_cuda_attention_work *w) {
    return (size_t)(w->batch.capacity + w->kept.capacity) * sizeof(em_flash_tile) +
           w->kv_capacity * sizeof *w->kv;
}

/* Whether p holds the tiles planned for key (n values). */
static bool plan_is(const flash_plan *p, const int32_t *key, size_t n) {
    return p->key_len == n && memcmp(p->key, key, n * sizeof *key) == 0;
}

/* Forgets p's plan and makes room for n tiles on the host and the device. */
static cudaError_t plan_reserve(flash_plan *p, int64_t n) {
    p->key_len = 0; /* until the new plan is complete */
    if (n <= p->capacity) return cudaSuccess;
    cudaFree(p->device);
    p->device = NULL;
    p->capacity = 0;
    cudaError_t e = cudaMalloc((void **)&p->device, (size_t)n * sizeof *p->device);
    if (e != cudaSuccess) return e;
    p->host = (em_flash_tile *)em_xrealloc(p->host, (size_t)n * sizeof *p->host);
    p->capacity = n;
    return cudaSuccess;
}

/* Uploads p's n host tiles, planned for key (key_len values). The upload is a cudaMemcpy on
 * stream 0, so kernels still reading the previous tiles finish first. */
static cudaError_t plan_upload(flash_plan *p, int64_t n, const int32_t *key, size_t key_len) {
    if (n > 0) {
        cudaError_t e =
            cudaMemcpy(p->device, p->host, (size_t)n * sizeof *p->host, cudaMemcpyHostToDevice);
        if (e != cudaSuccess) return e;
    }
    p->key = (int32_t *)em_xrealloc(p->key, key_len * sizeof *key);
    memcpy(p->key, key, key_len * sizeof *key);
    p->tiles = n;
    p->key_len = key_len;
    return cudaSuccess;
}

/* The tiles of seg on the device, planned when seg's offsets differ from the last call's. */
static cudaError_t plan_tiles(em_cuda_attention_work *w, const em_cuda_segments *seg) {
    if (seg->count < 0) return cudaErrorInvalidValue;
    size_t key_len = (size_t)seg->count + 1;
    if (plan_is(&w->batch, seg->host, key_len)) return cudaSuccess;
    int64_t n = em_flash_tile_count(seg->host, seg->count);
    if (n < 0) return cudaErrorInvalidValue;
    cudaError_t e = plan_reserve(&w->batch, n);
    if (e != cudaSuccess) return e;
    em_flash_plan(seg->host, seg->count, w->batch.host);
    return plan_upload(&w->batch, n, seg->host, key_len);
}

/* The tiles of seg's windows after kept rows (before, slot: host), planned when the batch
 * differs from the last call's. */
static cudaError_t plan_kept_tiles(em_cuda_attention_work *w, const em_cuda_segments *seg,
                                   const int32_t *before, const int32_t *slot) {
    if (seg->count < 0) return cudaErrorInvalidValue;
    size_t count = (size_t)seg->count, key_len = 3 * count + 1;
    int32_t *key = (int32_t *)em_xmalloc(key_len * sizeof *key);
    memcpy(key, seg->host, (count + 1) * sizeof *key);
    memcpy(key + count + 1, before, count * sizeof *key);
    memcpy(key + 2 * count + 1, slot, count * sizeof *key);
    cudaError_t e = cudaSuccess;
    if (!plan_is(&w->kept, key, key_len)) {
        int64_t n = em_flash_kept_tile_count(seg->host, before, seg->count);
        e = n < 0 ? cudaErrorInvalidValue : plan_reserve(&w->kept, n);
        if (e == cudaSuccess) {
            em_flash_plan_kept(seg->host, before, slot, seg->count, w->kept.host);
            e = plan_upload(&w->kept, n, key, key_len);
        }
    }
    free(key);
    return e;
}

/* w->kv = k, v (T, KVD) rounded to BF16 (the tiles then load half the bytes of FP32). */
static cudaError_t round_kv(em_cuda_attention_work *w, const float *k, const float *v, size_t T,
                            size_t KVD) {
    if (2 * T * KVD > w->kv_capacity) {
        cudaFree(w->kv);
        w->kv = NULL;
        w->kv_capacity = 0;
        cudaError_t e = cudaMalloc((void **)&w->kv, 2 * T * KVD * sizeof *w->kv);
        if (e != cudaSuccess) return e;
        w->kv_capacity = 2 * T * KVD;
    }
    em_cuda_f32_to_bf16(k, w->kv, (int64_t)(T * KVD));
    em_cuda_f32_to_bf16(v, w->kv + T * KVD, (int64_t)(T * KVD));
    return cudaSuccess;
}

/* ---- the kernel ---- */

#define BM EM_FLASH_QUERY_TILE
#define BN EM_FLASH_KEY_BLOCK

/* Shared memory of a CTA for head_dim HD, each array's row stride padded by 16 bytes (8 BF16, 4
 * floats) against bank conflicts, every WMMA tile's address a multiple of 32 bytes:
 *   q (BM, HD + 8), k and v (BN, HD + 8): BF16 tiles
 *   s (BM, BN + 4): FP32 scores, then masked scores
 *   p (BM, BN + 8): BF16 probabilities
 *   o (BM, HD + 4): FP32 unnormalized outputs
 *   l (BM): each query's sum, for the write-out */
template <int HD> struct flash_layout {
    static constexpr int LDH = HD + 8, LDS = BN + 4, LDP = BN + 8, LDO = HD + 4;
    static constexpr size_t Q = 0;
    static constexpr size_t K = Q + (size_t)BM * LDH * 2;
    static constexpr size_t V = K + (size_t)BN * LDH * 2;
    static constexpr size_t S = V + (size_t)BN * LDH * 2;
    static constexpr size_t P = S + (size_t)BM * LDS * 4;
    static constexpr size_t O = P + (size_t)BM * LDP * 2;
    static constexpr size_t L = O + (size_t)BM * LDO * 4;
    static constexpr size_t BYTES = L + (size_t)BM * 4;
    static_assert(K % 128 == 0 && V % 128 == 0 && S % 128 == 0 && P % 128 == 0 && O % 128 == 0 &&
                      L % 128 == 0,
                  "arrays on 128-byte boundaries");
    static_assert(BYTES <= 227 * 1024, "fits one CTA's shared memory on sm_90");
};

/* dst (ROWS, HD + 8) BF16 = rows 0..valid-1 of src (row stride ld floats, 16-byte aligned)
 * rounded to nearest, zeros for rows valid..ROWS-1. All threads of the CTA take part. */
template <int HD, int ROWS>
static __device__ void load_tile(const float *src, size_t ld, int valid, __nv_bfloat16 *dst) {
    constexpr int LDH = HD + 8, PER_ROW = HD / 4;
    for (int i = threadIdx.x; i < ROWS * PER_ROW; i += blockDim.x) {
        int r = i / PER_ROW, c = (i % PER_ROW) * 4;
        float4 x = r < valid ? *(const float4 *)(src + (size_t)r * ld + c)
                             : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        __nv_bfloat162 *d = (__nv_bfloat162 *)(dst + r * LDH + c);
        d[0] = __floats2bfloat162_rn(x.x, x.y);
        d[1] = __floats2bfloat162_rn(x.z, x.w);
    }
}

/* The same from BF16 rows (row stride ld values, 16-byte aligned), 8 values per load. */
template <int HD, int ROWS>
static __device__ void load_tile(const __nv_bfloat16 *src, size_t ld, int valid,
                                 __nv_bfloat16 *dst) {
    constexpr int LDH = HD + 8, PER_ROW = HD / 8;
    for (int i = threadIdx.x; i < ROWS * PER_ROW; i += blockDim.x) {
        int r = i / PER_ROW, c = (i % PER_ROW) * 8;
        uint4 x = r < valid ? *(const uint4 *)(src + (size_t)r * ld + c) : make_uint4(0, 0, 0, 0);
        *(uint4 *)(dst + r * LDH + c) = x; /* zero bits are BF16 +0 */
    }
}

typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc_frag;
typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a_frag;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> bt_frag;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> b_frag;

/* One warp's step over one key block: its 16 queries qw (16, HD + 8) against the block's keys ks
 * and values vs (BN, HD + 8) of window keys key0 .., with sw, pw, ow the warp's rows of s, p, o.
 * Lane (r, half) = (lane / 2, lane % 2) owns query row r, columns half, half + 2, ... of s, p and
 * o, and keeps the row's m and l (both lanes of a row hold the same values). */
template <int HD>
static __device__ void warp_step(const __nv_bfloat16 *qw, const __nv_bfloat16 *ks,
                                 const __nv_bfloat16 *vs, float *sw, __nv_bfloat16 *pw, float *ow,
                                 int query, bool row_valid, int key0, const em_cuda_mask &mask,
                                 float &m, float &l) {
    typedef flash_layout<HD> lay;
    int lane = threadIdx.x % 32, r = lane / 2, half = lane % 2;

    /* sw (16, BN) = Q K^T: K's rows are the columns of K^T, a column-major matrix_b */
    acc_frag s[BN / 16];
#pragma unroll
    for (int n = 0; n < BN / 16; n++) wmma::fill_fragment(s[n], 0.0f);
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++) {
        a_frag a;
        wmma::load_matrix_sync(a, qw + kk * 16, lay::LDH);
#pragma unroll
        for (int n = 0; n < BN / 16; n++) {
            bt_frag b;
            wmma::load_matrix_sync(b, ks + n * 16 * lay::LDH + kk * 16, lay::LDH);
            wmma::mma_sync(s[n], a, b, s[n]);
        }
    }
#pragma unroll
    for (int n = 0; n < BN / 16; n++)
        wmma::store_matrix_sync(sw + n * 16, s[n], lay::LDS, wmma::mem_row_major);
    __syncwarp();

    /* the online softmax of row r over this block; the row's two lanes take alternate columns
     * (fewer shared-memory bank conflicts than halves) */
    float *srow = sw + r * lay::LDS;
    __nv_bfloat16 *prow = pw + r * lay::LDP;
    float block_max = -INFINITY;
    for (int c = half; c < BN; c += 2) {
        bool visible = row_valid && em_flash_key_visible(query, key0 + c, mask.window);
        float score = visible ? em_flash_score(srow[c], mask.scale, mask.softcap) : -INFINITY;
        srow[c] = score;
        block_max = fmaxf(block_max, score);
    }
    block_max = fmaxf(block_max, __shfl_xor_sync(FULL_MASK, block_max, 1));
    float m_new = fmaxf(m, block_max);
    float corr = em_flash_rescale(m, m_new);
    float sum = 0.0f; /* of the BF16 probabilities P V uses, so weights and sum agree */
    for (int c = half; c < BN; c += 2) {
        bool visible = row_valid && em_flash_key_visible(query, key0 + c, mask.window);
        __nv_bfloat16 p = __float2bfloat16_rn(em_flash_probability(srow[c], m_new, visible));
        prow[c] = p;
        sum += __bfloat162float(p);
    }
    sum += __shfl_xor_sync(FULL_MASK, sum, 1); /* a + b on one lane, b + a on the other: equal */
    l = l * corr + sum;
    m = m_new;
    if (corr != 1.0f) {
        float *orow = ow + r * lay::LDO;
        for (int c = half; c < HD; c += 2) orow[c] *= corr;
    }
    __syncwarp();

    /* ow (16, HD) += P V */
    a_frag p[BN / 16];
#pragma unroll
    for (int kk = 0; kk < BN / 16; kk++) wmma::load_matrix_sync(p[kk], pw + kk * 16, lay::LDP);
    for (int n = 0; n < HD / 16; n++) {
        acc_frag o;
        wmma::load_matrix_sync(o, ow + n * 16, lay::LDO, wmma::mem_row_major);
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) {
            b_frag b;
            wmma::load_matrix_sync(b, vs + kk * 16 * lay::LDH + n * 16, lay::LDH);
            wmma::mma_sync(o, p[kk], b, o);
        }
        wmma::store_matrix_sync(ow + n * 16, o, lay::LDO, wmma::mem_row_major);
    }
    __syncwarp();
}

/* Where a tile's keys come from (the kernel's source), row `key` of its window (KVD values a row):
 * the batch's own rows, rounded to BF16 once per call (round_kv), from row start... */
struct batch_keys {
    const __nv_bfloat16 *k, *v;
    __device__ const __nv_bfloat16 *k_at(const em_flash_tile &t, int key, size_t KVD) const {
        return k + (size_t)(t.start + key) * KVD;
    }
    __device__ const __nv_bfloat16 *v_at(const em_flash_tile &t, int key, size_t KVD) const {
        return v + (size_t)(t.start + key) * KVD;
    }
};

/* ... or the FP32 rows kept in the tile's slot, rounded to BF16 as they load (the same values). */
struct kept_keys {
    em_cuda_kept kept;
    __device__ const float *k_at(const em_flash_tile &t, int key, size_t KVD) const {
        return kept.k[t.slot] + kept.layer_offset + (size_t)key * KVD;
    }
    __device__ const float *v_at(const em_flash_tile &t, int key, size_t KVD) const {
        return kept.v[t.slot] + kept.layer_offset + (size_t)key * KVD;
    }
};

/* CTA (tile, head) = blockIdx.x / H, blockIdx.x % H; warp w takes the tile's queries q0 + 16 w ..
 * q0 + 16 w + 15. Which blocks a warp computes depends only on window positions, so a window's
 * numbers do not depend on its batch. */
template <int HD, typename Keys>
static __global__ void __launch_bounds__(EM_FLASH_WARPS * 32)
    flash_kernel(const float *q, Keys source, const em_flash_tile *tiles, int H, int KV,
                 em_cuda_mask mask, float *att) {
    typedef flash_layout<HD> lay;
    extern __shared__ __align__(128) unsigned char smem[];
    __nv_bfloat16 *qs = (__nv_bfloat16 *)(smem + lay::Q);
    __nv_bfloat16 *ks = (__nv_bfloat16 *)(smem + lay::K);
    __nv_bfloat16 *vs = (__nv_bfloat16 *)(smem + lay::V);
    float *ss = (float *)(smem + lay::S);
    __nv_bfloat16 *ps = (__nv_bfloat16 *)(smem + lay::P);
    float *os = (float *)(smem + lay::O);
    float *ls = (float *)(smem + lay::L);

    em_flash_tile tile = tiles[blockIdx.x / H];
    int h = (int)(blockIdx.x % H), kvh = h / (H / KV);
    size_t QD = (size_t)H * HD, KVD = (size_t)KV * HD;
    int rows = tile.len - tile.q0 < BM ? tile.len - tile.q0 : BM;

    load_tile<HD, BM>(q + (size_t)(tile.start + tile.q0) * QD + (size_t)h * HD, QD, rows, qs);
    for (int i = threadIdx.x; i < BM * lay::LDO; i += blockDim.x) os[i] = 0.0f;

    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int warp_first = tile.q0 + 16 * warp; /* the warp's queries: warp_first .. warp_last */
    int warp_last = warp_first + 15 < tile.len - 1 ? warp_first + 15 : tile.len - 1;
    int query = warp_first + lane / 2;
    float m = -INFINITY, l = 0.0f;

    int begin, end;
    em_flash_key_blocks(tile.q0, tile.q0 + rows - 1, mask.window, &begin, &end);
    for (int b = begin; b < end; b++) {
        int key0 = b * BN;
        int keys = tile.len - key0 < BN ? tile.len - key0 : BN;
        const auto *kb = source.k_at(tile, key0, KVD) + (size_t)kvh * HD;
        const auto *vb = source.v_at(tile, key0, KVD) + (size_t)kvh * HD;
        __syncthreads(); /* the previous block's k, v are no longer read */
        load_tile<HD, BN>(kb, KVD, keys, ks);
        load_tile<HD, BN>(vb, KVD, keys, vs);
        __syncthreads();
        if (warp_first <= warp_last &&
            em_flash_block_visible(warp_first, warp_last, key0, key0 + BN - 1, mask.window))
            warp_step<HD>(qs + 16 * warp * lay::LDH, ks, vs, ss + 16 * warp * lay::LDS,
                          ps + 16 * warp * lay::LDP, os + 16 * warp * lay::LDO, query,
                          query < tile.len, key0, mask, m, l);
    }

    /* att rows = o / l, a warp per row for coalesced stores */
    if (lane % 2 == 0) ls[16 * warp + lane / 2] = l;
    __syncwarp();
    for (int r = 0; r < 16 && warp_first + r <= warp_last; r++) {
        const float *orow = os + (16 * warp + r) * lay::LDO;
        float lr = ls[16 * warp + r];
        float *dst = att + (size_t)(tile.start + warp_first + r) * QD + (size_t)h * HD;
        for (int c = lane; c < HD; c += 32) dst[c] = orow[c] / lr;
    }
}

/* Runs the tiles of plan over keys, one CTA per (tile, head). */
template <int HD, typename Keys>
static cudaError_t launch(const flash_plan *plan, const float *q, Keys keys, int H, int KV,
                          const em_cuda_mask *mask, float *att) {
    size_t bytes = flash_layout<HD>::BYTES;
    cudaError_t e = cudaFuncSetAttribute(flash_kernel<HD, Keys>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
    if (e != cudaSuccess) return e;
    flash_kernel<HD, Keys><<<(unsigned)(plan->tiles * H), EM_FLASH_WARPS * 32, bytes>>>(
        q, keys, plan->device, H, KV, *mask, att);
    return cudaGetLastError();
}

template <typename Keys>
static cudaError_t launch_for(int hd, const flash_plan *plan, const float *q, Keys keys, int H,
                              int KV, const em_cuda_mask *mask, float *att) {
    if ((int64_t)plan->tiles * H > 0x7fffffff) return cudaErrorInvalidConfiguration;
    if (hd == 64) return launch<64>(plan, q, keys, H, KV, mask, att);
    if (hd == 128) return launch<128>(plan, q, keys, H, KV, mask, att);
    return launch<256>(plan, q, keys, H, KV, mask, att);
}

cudaError_t em_cuda_flash_attention(em_cuda_attention_work *w, const float *q, const float *k,
                                    const float *v, const em_cuda_segments *seg, int H, int KV,
                                    int hd, const em_cuda_mask *mask, float *att) {
    em_cuda_attention_shape shape = {H, KV, hd};
    if (!em_flash_supports(&shape)) return cudaErrorInvalidValue;
    cudaError_t e = plan_tiles(w, seg);
    if (e != cudaSuccess || w->batch.tiles == 0) return e;
    size_t T = (size_t)seg->host[seg->count], KVD = (size_t)KV * hd;
    if ((e = round_kv(w, k, v, T, KVD)) != cudaSuccess) return e;
    return launch_for(hd, &w->batch, q, batch_keys{w->kv, w->kv + T * KVD}, H, KV, mask, att);
}

cudaError_t em_cuda_flash_attention_kept(em_cuda_attention_work *w, const float *q,
                                         const em_cuda_kept *kept, const int32_t *before_host,
                                         const int32_t *slot_host, const em_cuda_segments *seg,
                                         int H, int KV, int hd, const em_cuda_mask *mask,
                                         float *att) {
    em_cuda_attention_shape shape = {H, KV, hd};
    if (!em_flash_supports(&shape)) return cudaErrorInvalidValue;
    cudaError_t e = plan_kept_tiles(w, seg, before_host, slot_host);
    if (e != cudaSuccess || w->kept.tiles == 0) return e;
    return launch_for(hd, &w->kept, q, kept_keys{*kept}, H, KV, mask, att);
}
