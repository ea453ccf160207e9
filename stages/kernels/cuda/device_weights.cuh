/* How the cuda forward holds its weight matrices on the device (the forward's `f32_weights` and
 * `quantized_weights`, forward_backend.h):
 *   - F16 and BF16 matrices as they are; F32 ones as they are (products in FP32, the exact mode)
 *     or rounded to BF16 at load;
 *   - quantized ones with a device decoder (dequantize.cuh's table) either dequantized once at
 *     load into a resident BF16 copy, or, for the layers' matrices, kept in their blocks and
 *     dequantized into one BF16 scratch matrix right before each product (em_weights_in_use): a
 *     4-bit model then holds about a quarter of its BF16 bytes plus the largest matrix once. Both
 *     ways run the same dequantize kernel, so a product sees the same BF16 values either way;
 *   - quantized ones without a device decoder dequantized on the host through the type table and
 *     rounded to BF16 on the device, at load.
 * Everything runs on stream 0, the stream of the forward's products, so the scratch is rewritten
 * only after the product that read it. */
#ifndef EVALMESH_KERNELS_CUDA_DEVICE_WEIGHTS_CUH
#define EVALMESH_KERNELS_CUDA_DEVICE_WEIGHTS_CUH

#include <stddef.h>
#include <stdint.h>

#include "stages/kernels/cuda/kernels.cuh"
extern "C" {
#include "util/error.h"
#include "stages/kernels/forward_backend.h"
#include "stages/model/loaded_model.h"
}

/* Free device memory `quantized_weights: auto` leaves to activations and scratch when it decides
 * whether the BF16 copies fit. */
#define EM_WEIGHTS_HEADROOM_BYTES ((size_t)2 << 30)

/* The weight storage of one forward: the options as resolved for its model and device, and the
 * BF16 scratch of the matrices kept quantized. */
typedef struct em_weight_store {
    bool f32_to_bf16;       /* F32 matrices rounded to BF16 at load */
    bool keep_quantized;    /* layer matrices with a device decoder stay in their blocks */
    int64_t scratch_values; /* values of the largest matrix kept quantized (0: none) */
    __nv_bfloat16 *scratch; /* (scratch_values) BF16, allocated by em_weights_ready */
    em_dmat in_use;         /* the matrix em_weights_in_use last dequantized into scratch */
} em_weight_store;

/* Whether `quantized_weights: mode` keeps quantized matrices in their blocks when their BF16
 * copies and the other weights take bf16_bytes and the device has free_bytes free. */
static inline bool em_weights_keep_quantized(em_quantized_weights mode, size_t bf16_bytes,
                                             size_t free_bytes) {
    if (mode != EM_QUANTIZED_WEIGHTS_AUTO) return mode == EM_QUANTIZED_WEIGHTS_QUANTIZED;
    return bf16_bytes + EM_WEIGHTS_HEADROOM_BYTES > free_bytes;
}

/* Resolves options for model m on the current device (a zeroed store generates weights,
 * em_weights_random). */
em_status em_weights_init(em_weight_store *s, const em_forward_options *options, const em_model *m);

/* Matrix t {cols, rows} onto the device as s says; a layer matrix (per_use true) may stay in its
 * blocks. Adds the device bytes it holds to *weight_bytes. */
em_status em_weights_upload(em_weight_store *s, const em_tensor *t, bool per_use, em_dmat *out,
                            size_t *weight_bytes);

/* A layer matrix {cols, rows} of `type` generated on the device from seed, values in about
 * +-1/sqrt(cols): BF16 (uniform), or Q4_0 or TORCHAO_I4_G128 blocks (uniform 4-bit quants, one
 * scale of 1/(8 sqrt(cols)), zero 0) kept in their blocks, for benchmarks. Adds its bytes to
 * *weight_bytes; exit status 2 for another type. */
em_status em_weights_random(em_weight_store *s, uint32_t type, int64_t cols, int64_t rows,
                            uint64_t seed, em_dmat *out, size_t *weight_bytes);

/* Allocates the scratch once every matrix is on the device. */
em_status em_weights_ready(em_weight_store *s);

/* w with its values ready for a product: itself, or (a matrix kept quantized) its blocks
 * dequantized into the scratch, valid until the next call. */
const em_dmat *em_weights_in_use(em_weight_store *s, const em_dmat *w);

/* Bytes of the scratch. */
size_t em_weights_scratch_bytes(const em_weight_store *s);

void em_weights_free(em_weight_store *s);

#endif
