/* The cuda forward's weight storage (see device_weights.cuh). */
#include "stages/kernels/cuda/device_weights.cuh"

#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>

#include "stages/kernels/cuda/device_memory.cuh"

extern "C" {
#include "util/log.h"
#include "stages/kernels/cpu/dequantize.h"
#include "stages/formats/ggml_types.h"
}

#define STAGE_BYTES ((size_t)64 << 20) /* upload staging: raw blocks or floats per chunk */

/* Device bytes of matrix t held as s says with nothing kept quantized. */
static size_t resident_bytes(const em_weight_store *s, const em_tensor *t) {
    size_t n = (size_t)t->shape[0] * (size_t)t->shape[1];
    if (t->type == EM_TENSOR_F32) return n * (s->f32_to_bf16 ? 2 : 4);
    return n * 2; /* F16, BF16, and every quantized type dequantized to BF16 */
}

em_status em_weights_init(em_weight_store *s, const em_forward_options *options,
                          const em_model *m) {
    *s = em_weight_store{};
    s->f32_to_bf16 = options->f32_weights == EM_F32_WEIGHTS_BFLOAT16;
    size_t bytes = resident_bytes(s, m->tok_embd);
    if (m->output != m->tok_embd) bytes += resident_bytes(s, m->output);
    for (int i = 0; i < m->config.n_layers; i++) {
        const em_layer_weights *w = &m->layers[i];
        const em_tensor *mats[] = {w->wq, w->wk, w->wv, w->wo, w->w_gate, w->w_up, w->w_down};
        for (int j = 0; j < 7; j++) bytes += resident_bytes(s, mats[j]);
    }
    size_t free_b = 0, total = 0;
    cudaError_t e = cudaMemGetInfo(&free_b, &total);
    if (e != cudaSuccess) return em_cuda_error(e, "cudaMemGetInfo");
    s->keep_quantized = em_weights_keep_quantized(options->quantized_weights, bytes, free_b);
    if (s->keep_quantized && options->quantized_weights == EM_QUANTIZED_WEIGHTS_AUTO)
        em_log_info("device cuda, quantized_weights auto: the model's %.2f GiB of BF16 weights "
                    "do not fit in %.2f GiB of free device memory (less %.0f GiB for activations): "
                    "its quantized matrices stay in their blocks",
                    (double)bytes / (1 << 30), (double)free_b / (1 << 30),
                    (double)EM_WEIGHTS_HEADROOM_BYTES / (1 << 30));
    return NULL;
}

/* n floats at host onto the device through stage, rounded to BF16 at dst. */
static cudaError_t floats_to_bf16(const float *host, int64_t n, void *stage, __nv_bfloat16 *dst) {
    cudaError_t e = cudaMemcpy(stage, host, (size_t)n * sizeof(float), cudaMemcpyHostToDevice);
    if (e == cudaSuccess) em_cuda_f32_to_bf16((const float *)stage, dst, n);
    return e;
}

em_status em_weights_upload(em_weight_store *s, const em_tensor *t, bool per_use, em_dmat *out,
                            size_t *weight_bytes) {
    int64_t cols = t->shape[0], rows = t->shape[1];
    uint32_t type = (uint32_t)t->type;
    size_t row_bytes = em_tensor_type_row_bytes(t->type, cols);
    int values = em_cuda_block_values(type);
    *out = (em_dmat){CUDA_R_16BF, NULL, rows, cols, 0};
    em_status err;
    cudaError_t e = cudaSuccess;
    bool as_stored = type == EM_TENSOR_F16 || type == EM_TENSOR_BF16 ||
                     (type == EM_TENSOR_F32 && !s->f32_to_bf16);
    if (as_stored || (values && per_use && s->keep_quantized)) {
        if (type == EM_TENSOR_F32) out->type = CUDA_R_32F;
        if (type == EM_TENSOR_F16) out->type = CUDA_R_16F;
        if (values) { /* kept in its blocks: its products take BF16 from the scratch */
            out->blocks_type = type;
            if (rows * cols > s->scratch_values) s->scratch_values = rows * cols;
        }
        if ((err = em_cuda_alloc(&out->data, row_bytes * (size_t)rows, weight_bytes))) return err;
        e = cudaMemcpy(out->data, t->data, row_bytes * (size_t)rows, cudaMemcpyHostToDevice);
        return e == cudaSuccess ? NULL : em_error_prefix(em_cuda_error(e, "upload"), "%s", t->name);
    }
    /* BF16 on the device: dequantized there from raw blocks, or rounded there from host floats
     * (F32 rows, or a type the host dequantizes through the type table), a stretch at a time */
    if ((err = em_cuda_alloc(&out->data, (size_t)(rows * cols) * 2, weight_bytes))) return err;
    __nv_bfloat16 *dst = (__nv_bfloat16 *)out->data;
    void *stage = NULL;
    if ((err = em_cuda_alloc(&stage, STAGE_BYTES, NULL))) return err;
    if (values) {
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
            e = floats_to_bf16(host, nr * cols, stage, dst + (size_t)r0 * cols);
        }
        free(host);
    }
    if (e == cudaSuccess) e = cudaDeviceSynchronize(); /* the staging buffer is freed next */
    cudaFree(stage);
    return e == cudaSuccess ? NULL : em_error_prefix(em_cuda_error(e, "upload"), "%s", t->name);
}

/* splitmix64 of z, the counter-based hash of the generated weights (as kernels.cu's fills). */
static __device__ uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Q4_0's fields besides its quants: d (half) = scale. */
static __device__ void scales_q4_0(uint8_t *b, float scale) {
    uint16_t d = __half_as_ushort(__float2half_rn(scale));
    b[0] = (uint8_t)d, b[1] = (uint8_t)(d >> 8);
}

/* TORCHAO_I4_G*'s fields besides its quants: s (BF16) = scale, z = 0. */
static __device__ void scales_torchao_i4(uint8_t *b, float scale) {
    uint16_t s = __bfloat16_as_ushort(__float2bfloat16_rn(scale));
    b[0] = (uint8_t)s, b[1] = (uint8_t)(s >> 8), b[2] = 0, b[3] = 0;
}

/* The types em_weights_random generates, one row each: X(type id, bytes per block, bytes of
 * scale fields before the quants, the writer of those fields). */
#define EM_RANDOM_BLOCK_TYPES                                                                      \
    X(2, 18, 2, scales_q4_0)                                                                       \
    X(203, 68, 4, scales_torchao_i4)

/* One thread per block: random quant bytes from (seed, block, byte), then the scale fields. */
template <int BYTES, int HEAD, void (*SCALES)(uint8_t *, float)>
static __global__ void random_blocks_kernel(uint8_t *dst, int64_t blocks, uint64_t seed,
                                            float scale) {
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < blocks;
         k += (int64_t)gridDim.x * blockDim.x) {
        uint8_t *b = dst + (size_t)k * BYTES;
        for (int i = HEAD; i < BYTES; i += 8) {
            uint64_t r = mix64(seed + 0x9e3779b97f4a7c15ull * (uint64_t)(k * BYTES + i));
            for (int j = 0; j < 8 && i + j < BYTES; j++) b[i + j] = (uint8_t)(r >> (8 * j));
        }
        SCALES(b, scale);
    }
}

em_status em_weights_random(em_weight_store *s, uint32_t type, int64_t cols, int64_t rows,
                            uint64_t seed, em_dmat *out, size_t *weight_bytes) {
    *out = (em_dmat){CUDA_R_16BF, NULL, rows, cols, 0};
    float bound = 1.0f / sqrtf((float)cols);
    em_status err;
    if (type == EM_TENSOR_BF16) {
        if ((err = em_cuda_alloc(&out->data, (size_t)(rows * cols) * 2, weight_bytes))) return err;
        em_cuda_fill_bf16((__nv_bfloat16 *)out->data, rows * cols, seed, bound, 0.0f);
        return NULL;
    }
#define X(id, bytes, head, scales)                                                                 \
    if (type == id) {                                                                              \
        int64_t blocks = rows * cols / em_cuda_block_values(id);                                   \
        if ((err = em_cuda_alloc(&out->data, (size_t)blocks * bytes, weight_bytes))) return err;   \
        random_blocks_kernel<bytes, head, scales>                                                  \
            <<<4096, 256>>>((uint8_t *)out->data, blocks, seed, bound / 8.0f);                     \
        out->blocks_type = id;                                                                     \
        if (rows * cols > s->scratch_values) s->scratch_values = rows * cols;                      \
        return NULL;                                                                               \
    }
    EM_RANDOM_BLOCK_TYPES
#undef X
    const em_ggml_type_info *info = em_ggml_type_info_get(type);
    return em_error_new(EM_EXIT_BAD_INPUT,
                        "generated weights: type %s is not one the device generates (BF16, Q4_0, "
                        "TORCHAO_I4_G128)",
                        info ? info->name : "unknown");
}

em_status em_weights_ready(em_weight_store *s) {
    if (!s->scratch_values) return NULL;
    return em_cuda_alloc((void **)&s->scratch, (size_t)s->scratch_values * 2, NULL);
}

const em_dmat *em_weights_in_use(em_weight_store *s, const em_dmat *w) {
    if (!w->blocks_type) return w;
    int64_t blocks = w->rows * w->cols / em_cuda_block_values(w->blocks_type);
    em_cuda_dequantize_bf16(w->blocks_type, (const uint8_t *)w->data, blocks, s->scratch);
    s->in_use = (em_dmat){CUDA_R_16BF, s->scratch, w->rows, w->cols, 0};
    return &s->in_use;
}

size_t em_weights_scratch_bytes(const em_weight_store *s) {
    return s->scratch ? (size_t)s->scratch_values * 2 : 0;
}

void em_weights_free(em_weight_store *s) {
    cudaFree(s->scratch);
    s->scratch = NULL;
}
