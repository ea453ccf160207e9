/* A kernel's GEMM peak: see gemm_peak.h. */
#include "gemm_peak.h"

#include <stdlib.h>

#include "stages/kernels/cpu/ggml_dot.h"
#include "stages/kernels/cpu/ggml_dot_iq.h"
#include "stages/kernels/cpu/matmul.h"
#include "stages/kernels/cpu/scratch.h"
#include "util/clock.h"

#define WARMUP 1
#define TIMED 3

/* n values of a fixed pseudo-random sequence in [-1, 1): weights and activations alike. */
static float *random_floats(size_t count, uint32_t seed) {
    float *v = malloc(count * sizeof *v);
    for (size_t i = 0; i < count; i++) {
        seed = seed * 1664525u + 1013904223u;
        v[i] = (float)(seed >> 8) / 8388608.0f - 1.0f;
    }
    return v;
}

/* Random blocks of a type evalmesh does not quantize to (the lattice IQ types, TQ1_0, MXFP4; any
 * bytes are a valid block), their scale 2^-10: an fp16 at byte 0, IQ1_M's in its scale words' top
 * nibbles, TQ1_0's at byte 52, MXFP4's E8M0 exponent at byte 0. */
static bool random_blocks(em_tensor_type type, uint8_t *data, size_t bytes) {
    const em_ggml_type_info *info = em_ggml_type_info_get(type);
    int column = em_ggml_dot_type_of(type);
    if (!em_ggml_dot_is_decoded(column) && type != EM_TENSOR_MXFP4) return false;
    uint32_t seed = 5;
    for (size_t i = 0; i < bytes; i++)
        data[i] = (uint8_t)((seed = seed * 1664525u + 1013904223u) >> 24);
    const uint16_t d = 0x1400;
    for (size_t b = 0; b < bytes / info->block_bytes; b++) {
        uint8_t *blk = data + b * info->block_bytes;
        if (type == EM_TENSOR_IQ1_M) {
            for (int k = 0; k < 4; k++)
                blk[49 + 2 * k] = (uint8_t)((blk[49 + 2 * k] & 15) | ((d >> (4 * k)) & 15) << 4);
        } else if (type == EM_TENSOR_MXFP4) {
            blk[0] = 118; /* 2^(118 - 128) */
        } else if (type == EM_TENSOR_TQ1_0) {
            blk[52] = d & 255, blk[53] = d >> 8;
        } else {
            blk[0] = d & 255, blk[1] = d >> 8;
        }
    }
    return true;
}

/* W (n rows of n values) in `type`, written by the type's own quantizer (ggml_types.h), or random
 * blocks where it has none. */
static em_status make_weight(em_tensor_type type, int n, em_tensor *w) {
    const em_ggml_type_info *info = em_ggml_type_info_get(type);
    size_t row_bytes = em_tensor_type_row_bytes(type, n);
    uint8_t *data = malloc(row_bytes * n);
    if (!info || (!info->from_float && !random_blocks(type, data, row_bytes * n))) {
        free(data);
        return em_error_new(EM_EXIT_BAD_INPUT, "gemm peak: no quantizer for %s",
                            em_tensor_type_name(type));
    }
    float *values = info->from_float ? random_floats((size_t)n * n, 7) : NULL;
    for (int r = 0; values && r < n; r++)
        info->from_float(values + (size_t)r * n, n, data + row_bytes * r);
    free(values);
    *w = (em_tensor){.name = "gemm_peak.weight",
                     .type = type,
                     .n_dims = 2,
                     .shape = {n, n, 1, 1},
                     .data = data,
                     .nbytes = row_bytes * n};
    return NULL;
}

em_status gemm_peak_gflops(const char *kernel, em_precision precision, em_tensor_type type, int n,
                           int threads, double *gflops, const char **kernel_used) {
    bool ggml = precision == EM_PRECISION_GGML, bf16 = precision == EM_PRECISION_BF16;
    if (ggml && em_ggml_dot_type_of(type) < 0)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "gemm peak: the ggml precision has no dot product for %s",
                            em_tensor_type_name(type));
    if (kernel) setenv("EVALMESH_CPU_KERNEL", kernel, 1);
    em_scratch s;
    em_status err = em_scratch_init(&s, threads);
    if (!err && ggml) err = em_scratch_use_ggml(&s);
    if (!err && bf16) err = em_scratch_use_bf16(&s);
    if (kernel) unsetenv("EVALMESH_CPU_KERNEL");
    em_tensor w = {0};
    if (!err) err = make_weight(type, n, &w);
    if (!err)
        err = em_scratch_reserve(&s, em_matmul_tile_floats(n, n, EM_MATMUL_TILE_ROWS),
                                 em_gemm_packed_floats(n, n));
    if (!err && ggml) err = em_q8_reserve(&s.q8, n, n);
    if (!err && ggml && s.ggml->prepare_k) err = em_q8_reserve_k_lanes(&s.q8, n, n, true, true);
    if (!err && ggml && type == EM_TENSOR_F16) err = em_q8_reserve_f16(&s.q8, n, n);
    if (!err && bf16) err = em_scratch_reserve_bf16(&s, em_bf16_packed_words(s.bf16, n, n));
    if (err) {
        free((void *)w.data);
        em_scratch_free(&s);
        return err;
    }
    *kernel_used = ggml ? s.ggml->name : bf16 ? s.bf16->name : s.kernel_name;
    float *x = random_floats((size_t)n * n, 11);  /* x (n, n) */
    float *y = malloc((size_t)n * n * sizeof *y); /* y (n, n) */
    const em_tensor *weights[1] = {&w};
    float *outputs[1] = {y};
    double best = 1e30;
    for (int run = 0; run < WARMUP + TIMED; run++) {
        double t0 = em_clock_seconds();
        em_matmul_pack(x, n, n, s.packed, &s);
        em_matmul_packed(s.packed, n, 1, weights, outputs, false, &s);
        double dt = em_clock_seconds() - t0;
        if (run >= WARMUP && dt < best) best = dt;
    }
    *gflops = 2.0 * n * n * (double)n / best / 1e9;
    free(x);
    free(y);
    free((void *)w.data);
    em_scratch_free(&s);
    return NULL;
}
