/* The device kernels of the cuda forward (see kernels.cuh). */
#include "stages/kernels/cuda/kernels.cuh"

#include <math.h>

#include "stages/kernels/cuda/attention_stretch.cuh"
#include "stages/kernels/cuda/dequantize.cuh"

static unsigned blocks_for(int64_t n, int threads) {
    return (unsigned)((n + threads - 1) / threads);
}

/* One value of a device matrix as a float. */
static __device__ float load_weight(const void *data, cudaDataType_t type, int64_t i) {
    if (type == CUDA_R_32F) return ((const float *)data)[i];
    if (type == CUDA_R_16F) return __half2float(((const __half *)data)[i]);
    return __bfloat162float(((const __nv_bfloat16 *)data)[i]);
}

static __global__ void embed_kernel(const void *e, cudaDataType_t type, int64_t D,
                                    const int32_t *ids, int T, float scale, float *x) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)T * D) return;
    int64_t t = i / D, d = i % D;
    float v = load_weight(e, type, (int64_t)ids[t] * D + d);
    x[i] = scale != 1.0f ? v * scale : v;
}

void em_cuda_embed(const em_dmat *e, const int32_t *ids, int T, float scale, float *x) {
    int64_t n = (int64_t)T * e->cols;
    embed_kernel<<<blocks_for(n, 256), 256>>>(e->data, e->type, e->cols, ids, T, scale, x);
}

/* One block of 256 threads per row: strided sums of squares in double, a fixed tree. */
static __global__ void rmsnorm_kernel(const float *x, const float *w, int n, float eps, float *y) {
    __shared__ double part[256];
    const float *xr = x + (size_t)blockIdx.x * n;
    float *yr = y + (size_t)blockIdx.x * n;
    double ss = 0.0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) ss += (double)xr[i] * xr[i];
    part[threadIdx.x] = ss;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
        __syncthreads();
    }
    float scale = (float)(1.0 / sqrt(part[0] / n + (double)eps));
    for (int i = threadIdx.x; i < n; i += blockDim.x) yr[i] = __fmul_rn(xr[i], scale) * w[i];
}

void em_cuda_rmsnorm(const float *x, const float *w, int rows, int n, float eps, float *y) {
    if (rows > 0) rmsnorm_kernel<<<rows, 256>>>(x, w, n, eps, y);
}

static __global__ void add_bias_kernel(float *y, const float *b, int64_t total, int n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total) y[i] += b[i % n];
}

void em_cuda_add_bias(float *y, const float *b, int T, int n) {
    int64_t total = (int64_t)T * n;
    add_bias_kernel<<<blocks_for(total, 256), 256>>>(y, b, total, n);
}

/* One thread per (position, head, pair). */
static __global__ void rope_kernel(float *x, int T, int ld, int heads, int head_dim, int half,
                                   const float *cos_sin) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)T * heads * half) return;
    int p = (int)(i % half), h = (int)(i / half % heads), t = (int)(i / half / heads);
    float *v = x + (size_t)t * ld + (size_t)h * head_dim + 2 * p;
    float c = cos_sin[((size_t)t * half + p) * 2], s = cos_sin[((size_t)t * half + p) * 2 + 1];
    float a = v[0], b = v[1];
    v[0] = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
    v[1] = __fadd_rn(__fmul_rn(a, s), __fmul_rn(b, c));
}

void em_cuda_rope(float *x, int T, int ld, int heads, int head_dim, int rope_dim,
                  const float *cos_sin) {
    int64_t n = (int64_t)T * heads * (rope_dim / 2);
    rope_kernel<<<blocks_for(n, 256), 256>>>(x, T, ld, heads, head_dim, rope_dim / 2, cos_sin);
}

#define ATT_WARPS 4 /* warps per block, one (position, head) each */

/* The window of row t: the last w < count with start[w] <= t. */
static __device__ int window_of(const int32_t *start, int count, int t) {
    int lo = 0, hi = count - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (start[mid] <= t)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* One warp's (query, head): the query at position t, its head's dims at qh, attends to keys
 * 0 .. t (rows of KVD floats from position 0, the head's dims from kv_offset), and out gets its
 * head's dims of the result. Lanes hold dims lane, lane + 32, ... of q and of the output; each
 * stretch of 32 keys, from the first the query sees, joins the running softmax
 * (attention_stretch.cuh). Memory: registers only, whatever t. */
static __device__ void attend_query(const float *qh, const float *k, const float *v, int t, int KVD,
                                    size_t kv_offset, int hd, const em_cuda_mask &mask,
                                    float *out) {
    int lane = threadIdx.x % 32;
    float qr[EM_CUDA_ATTENTION_PER_LANE], acc[EM_CUDA_ATTENTION_PER_LANE];
    for (int i = 0; i < EM_CUDA_ATTENTION_PER_LANE; i++) {
        int d = lane + 32 * i;
        qr[i] = d < hd ? qh[d] : 0.0f;
        acc[i] = 0.0f;
    }
    int first = mask.window > 0 && t - mask.window + 1 > 0 ? t - mask.window + 1 : 0;
    float m = -INFINITY, l = 0.0f;
    for (int j0 = first - first % 32; j0 <= t; j0 += 32) {
        int j = j0 + lane;
        bool valid = j >= first && j <= t;
        unsigned seen = __ballot_sync(EM_CUDA_FULL_MASK, valid); /* never 0: key j0 or first */
        em_attention_stretch(qr, k, v, (size_t)KVD, kv_offset, j0, seen, valid, lane, hd, mask, m,
                             l, acc);
    }
    for (int i = 0; i < EM_CUDA_ATTENTION_PER_LANE; i++) {
        int d = lane + 32 * i;
        if (d < hd) out[d] = acc[i] / l;
    }
}

/* Warp (row, h) of the batch: the row is position t of its window, whose rows start at row0, so
 * its keys are the window's rows from row0 on and a window's numbers are those it has alone. */
static __global__ void attention_kernel(const float *q, const float *k, const float *v,
                                        const int32_t *start, int count, int T, int H, int KV,
                                        int hd, em_cuda_mask mask, float *att) {
    int64_t item = (int64_t)blockIdx.x * ATT_WARPS + threadIdx.x / 32;
    if (item >= (int64_t)T * H) return; /* whole warps leave together */
    int row = (int)(item / H), h = (int)(item % H), kvh = h / (H / KV);
    int QD = H * hd, KVD = KV * hd;
    int row0 = start[window_of(start, count, row)];
    size_t at = (size_t)row * QD + (size_t)h * hd;
    attend_query(q + at, k + (size_t)row0 * KVD, v + (size_t)row0 * KVD, row - row0, KVD,
                 (size_t)kvh * hd, hd, mask, att + at);
}

void em_cuda_attention(const float *q, const float *k, const float *v,
                       const em_cuda_segments *windows, int H, int KV, int hd,
                       const em_cuda_mask *mask, float *att) {
    int T = windows->host[windows->count];
    int64_t items = (int64_t)T * H;
    attention_kernel<<<blocks_for(items, ATT_WARPS), ATT_WARPS * 32>>>(
        q, k, v, windows->device, windows->count, T, H, KV, hd, *mask, att);
}

/* Warp (row, h) of a batch after kept rows: the row is position before[w] + t of window w's
 * sequence, whose keys are its slot's rows from position 0. */
static __global__ void attention_kept_kernel(const float *q, em_cuda_kept kept,
                                             const int32_t *start, int count, int T, int H, int KV,
                                             int hd, em_cuda_mask mask, float *att) {
    int64_t item = (int64_t)blockIdx.x * ATT_WARPS + threadIdx.x / 32;
    if (item >= (int64_t)T * H) return; /* whole warps leave together */
    int row = (int)(item / H), h = (int)(item % H), kvh = h / (H / KV);
    int QD = H * hd, KVD = KV * hd, w = window_of(start, count, row);
    int slot = kept.slot[w];
    size_t at = (size_t)row * QD + (size_t)h * hd;
    attend_query(q + at, kept.k[slot] + kept.layer_offset, kept.v[slot] + kept.layer_offset,
                 kept.before[w] + row - start[w], KVD, (size_t)kvh * hd, hd, mask, att + at);
}

void em_cuda_attention_kept(const float *q, const em_cuda_kept *kept,
                            const em_cuda_segments *windows, int H, int KV, int hd,
                            const em_cuda_mask *mask, float *att) {
    int T = windows->host[windows->count];
    int64_t items = (int64_t)T * H;
    if (items == 0) return;
    attention_kept_kernel<<<blocks_for(items, ATT_WARPS), ATT_WARPS * 32>>>(
        q, *kept, windows->device, windows->count, T, H, KV, hd, *mask, att);
}

/* One thread per value of a row: value i is (row i / KVD, dim i % KVD) of the batch. */
static __global__ void keep_rows_kernel(const float *k, const float *v, const int32_t *start,
                                        int count, int64_t n, int KVD, em_cuda_kept kept) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int row = (int)(i / KVD), d = (int)(i % KVD), w = window_of(start, count, row);
    size_t to = kept.layer_offset + (size_t)(kept.before[w] + row - start[w]) * KVD + d;
    kept.k[kept.slot[w]][to] = k[i];
    kept.v[kept.slot[w]][to] = v[i];
}

void em_cuda_keep_rows(const float *k, const float *v, const em_cuda_segments *windows,
                       int kv_width, const em_cuda_kept *kept) {
    int64_t n = (int64_t)windows->host[windows->count] * kv_width;
    if (n == 0) return;
    keep_rows_kernel<<<blocks_for(n, 256), 256>>>(k, v, windows->device, windows->count, n,
                                                  kv_width, *kept);
}

/* The CPU's formulas (swiglu.c): g / (1 + exp(-g)) u and GeGLU's tanh form as a logistic. */
static __global__ void glu_kernel(float *gate, const float *up, int64_t n, bool gelu) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float g = gate[i];
    float e = gelu ? expf(-1.5957691216f * (g + 0.044715f * g * g * g)) : expf(-g);
    gate[i] = g / (1.0f + e) * up[i];
}

void em_cuda_glu(float *gate, const float *up, int64_t n, bool gelu) {
    glu_kernel<<<blocks_for(n, 256), 256>>>(gate, up, n, gelu);
}

static __global__ void add_kernel(float *x, const float *y, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += y[i];
}

void em_cuda_add(float *x, const float *y, int64_t n) {
    add_kernel<<<blocks_for(n, 256), 256>>>(x, y, n);
}

static __global__ void convert_kernel(const float *src, void *dst, bool bf16, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (bf16)
        ((__nv_bfloat16 *)dst)[i] = __float2bfloat16_rn(src[i]);
    else
        ((__half *)dst)[i] = __float2half_rn(src[i]);
}

void em_cuda_convert(const float *src, void *dst, cudaDataType_t type, int64_t n) {
    convert_kernel<<<blocks_for(n, 256), 256>>>(src, dst, type == CUDA_R_16BF, n);
}

void em_cuda_f32_to_bf16(const float *src, __nv_bfloat16 *dst, int64_t n) {
    convert_kernel<<<blocks_for(n, 256), 256>>>(src, dst, true, n);
}

static __device__ float cap(float l, float softcap) {
    return softcap > 0.0f ? softcap * tanhf(l / softcap) : l;
}

static __global__ void softcap_kernel(float *x, int64_t n, float softcap) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = cap(x[i], softcap);
}

void em_cuda_softcap(float *x, int64_t n, float softcap) {
    if (n > 0) softcap_kernel<<<blocks_for(n, 256), 256>>>(x, n, softcap);
}

/* Thread (t, tile): the tile's max and first argmax, then its sum of exp(l - max) in double in
 * row order (the CPU's order). Reads of consecutive t are consecutive in lt. */
static __global__ void head_tiles_kernel(const float *lt, int64_t row0, int rows, int n,
                                         float softcap, const int32_t *target, em_head_tile *part,
                                         float *target_logit) {
    int t = blockIdx.x * blockDim.x + threadIdx.x, v = blockIdx.y;
    if (t >= n) return;
    int r0 = v * EM_HEAD_TILE_ROWS;
    int count = rows - r0 < EM_HEAD_TILE_ROWS ? rows - r0 : EM_HEAD_TILE_ROWS;
    const float *col = lt + (size_t)r0 * n + t;
    float max = cap(col[0], softcap);
    int best = 0;
    for (int j = 1; j < count; j++) {
        float l = cap(col[(size_t)j * n], softcap);
        if (l > max) max = l, best = j;
    }
    double sum = 0.0;
    for (int j = 0; j < count; j++) sum += expf(cap(col[(size_t)j * n], softcap) - max);
    part[(size_t)v * n + t] = em_head_tile{sum, max, (int32_t)(row0 + r0 + best)};
    int64_t tg = target[t] - (row0 + r0);
    if (tg >= 0 && tg < count) target_logit[t] = cap(col[(size_t)tg * n], softcap);
}

void em_cuda_head_tiles(const float *lt, int64_t row0, int rows, int n, float softcap,
                        const int32_t *target, em_head_tile *part, float *target_logit) {
    dim3 grid(blocks_for(n, 128), (unsigned)((rows + EM_HEAD_TILE_ROWS - 1) / EM_HEAD_TILE_ROWS));
    head_tiles_kernel<<<grid, 128>>>(lt, row0, rows, n, softcap, target, part, target_logit);
}

/* As head_tiles_kernel for both heads; exponentials and products in double (pair_head.c). */
static __global__ void pair_tiles_kernel(const float *lr, const float *lc, int rows, int n,
                                         float cap_ref, float cap_cand, em_pair_tile *part) {
    int t = blockIdx.x * blockDim.x + threadIdx.x, v = blockIdx.y;
    if (t >= n) return;
    int r0 = v * EM_HEAD_TILE_ROWS;
    int count = rows - r0 < EM_HEAD_TILE_ROWS ? rows - r0 : EM_HEAD_TILE_ROWS;
    const float *cr = lr + (size_t)r0 * n + t, *cc = lc + (size_t)r0 * n + t;
    float mr = cap(cr[0], cap_ref), mc = cap(cc[0], cap_cand);
    for (int j = 1; j < count; j++) {
        mr = fmaxf(mr, cap(cr[(size_t)j * n], cap_ref));
        mc = fmaxf(mc, cap(cc[(size_t)j * n], cap_cand));
    }
    double sr = 0.0, sc = 0.0, a = 0.0;
    for (int j = 0; j < count; j++) {
        double r = cap(cr[(size_t)j * n], cap_ref), c = cap(cc[(size_t)j * n], cap_cand);
        double e = exp(r - (double)mr);
        sr += e;
        a += e * (r - c);
        sc += exp(c - (double)mc);
    }
    part[(size_t)v * n + t] = em_pair_tile{sr, sc, a, mr, mc};
}

void em_cuda_pair_tiles(const float *lr, const float *lc, int rows, int n, float cap_ref,
                        float cap_cand, em_pair_tile *part) {
    dim3 grid(blocks_for(n, 128), (unsigned)((rows + EM_HEAD_TILE_ROWS - 1) / EM_HEAD_TILE_ROWS));
    pair_tiles_kernel<<<grid, 128>>>(lr, lc, rows, n, cap_ref, cap_cand, part);
}

/* splitmix64 of (seed, i): a counter-based generator, so any launch shape gives the same values. */
static __device__ uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static __global__ void fill_bf16_kernel(__nv_bfloat16 *w, int64_t n, uint64_t seed, float bound,
                                        float fill) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float u = (float)(mix64(seed + 0x9e3779b97f4a7c15ull * (uint64_t)i) >> 40) * 0x1p-24f;
        w[i] = __float2bfloat16_rn(bound > 0.0f ? (2.0f * u - 1.0f) * bound : fill);
    }
}

void em_cuda_fill_bf16(__nv_bfloat16 *w, int64_t n, uint64_t seed, float bound, float fill) {
    fill_bf16_kernel<<<4096, 256>>>(w, n, seed, bound, fill);
}

static __global__ void fill_f32_kernel(float *w, int64_t n, float fill) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) w[i] = fill;
}

void em_cuda_fill_f32(float *w, int64_t n, float fill) {
    fill_f32_kernel<<<blocks_for(n, 256), 256>>>(w, n, fill);
}

#define DEQUANTIZE_VALUES 4096 /* values per thread block of dequantize_kernel */
#define DEQUANTIZE_THREADS 256

/* Thread block k: the quantized blocks of values k DEQUANTIZE_VALUES onwards. Thread j < their
 * count decodes block j (dequantize.cuh) into shared memory (a row of VALUES + 1 floats each, so
 * the threads' stores fall in different banks), then all threads round the values to BF16 and
 * store them in order, consecutive threads to consecutive addresses. */
template <int VALUES, int BYTES, void (*DECODE)(const uint8_t *, float *)>
static __global__ void dequantize_kernel(const uint8_t *src, int64_t blocks, __nv_bfloat16 *dst) {
    constexpr int PER = DEQUANTIZE_VALUES / VALUES; /* quantized blocks per thread block */
    __shared__ float y[PER * (VALUES + 1)];
    int64_t first = (int64_t)blockIdx.x * PER;
    int count = blocks - first < PER ? (int)(blocks - first) : PER;
    if ((int)threadIdx.x < count)
        DECODE(src + (size_t)(first + threadIdx.x) * BYTES, y + threadIdx.x * (VALUES + 1));
    __syncthreads();
    __nv_bfloat16 *out = dst + (size_t)first * VALUES;
    for (int v = threadIdx.x; v < count * VALUES; v += DEQUANTIZE_THREADS)
        out[v] = __float2bfloat16_rn(y[(v / VALUES) * (VALUES + 1) + v % VALUES]);
}

bool em_cuda_dequantize_bf16(uint32_t type, const uint8_t *src, int64_t blocks,
                             __nv_bfloat16 *dst) {
#define X(id, values, bytes, decode)                                                               \
    if (type == id) {                                                                              \
        int64_t per = DEQUANTIZE_VALUES / values;                                                  \
        dequantize_kernel<values, bytes, decode>                                                   \
            <<<(unsigned)((blocks + per - 1) / per), DEQUANTIZE_THREADS>>>(src, blocks, dst);      \
        return true;                                                                               \
    }
    EM_CUDA_BLOCK_TYPES
#undef X
    return false;
}

int em_cuda_block_values(uint32_t type) {
#define X(id, values, bytes, decode)                                                               \
    if (type == id) return values;
    EM_CUDA_BLOCK_TYPES
#undef X
    return 0;
}

int em_cuda_block_bytes(uint32_t type) {
#define X(id, values, bytes, decode)                                                               \
    if (type == id) return bytes;
    EM_CUDA_BLOCK_TYPES
#undef X
    return 0;
}
