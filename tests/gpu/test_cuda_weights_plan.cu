/* The cuda forward's choice of weight storage (stages/kernels/cuda/device_weights.cuh), run on the
 * host: `quantized_weights: bfloat16` and `quantized` are what they say whatever the memory;
 * `auto` keeps quantized matrices in their blocks exactly when their BF16 copies and the other
 * weights, plus the headroom left to activations, exceed the device's free memory. Needs no
 * GPU. */
#include "stages/kernels/cuda/device_weights.cuh"
extern "C" {
#include "test.h"
}

#define GIB ((size_t)1 << 30)

int main(void) {
    size_t sizes[] = {0, GIB, 16 * GIB, 140 * GIB};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        CHECK(!em_weights_keep_quantized(EM_QUANTIZED_WEIGHTS_BFLOAT16, 16 * GIB, sizes[i]));
        CHECK(em_weights_keep_quantized(EM_QUANTIZED_WEIGHTS_QUANTIZED, 16 * GIB, sizes[i]));
    }
    /* an 8B model's 16 GiB of BF16 weights on an H200 (140 GiB free) and on a 16 GiB GPU */
    CHECK(!em_weights_keep_quantized(EM_QUANTIZED_WEIGHTS_AUTO, 16 * GIB, 140 * GIB));
    CHECK(em_weights_keep_quantized(EM_QUANTIZED_WEIGHTS_AUTO, 16 * GIB, 16 * GIB));
    /* the edge: copies + headroom exactly the free memory fit; one byte more does not */
    size_t edge = 16 * GIB + EM_WEIGHTS_HEADROOM_BYTES;
    CHECK(!em_weights_keep_quantized(EM_QUANTIZED_WEIGHTS_AUTO, 16 * GIB, edge));
    CHECK(em_weights_keep_quantized(EM_QUANTIZED_WEIGHTS_AUTO, 16 * GIB + 1, edge));
    return test_finish();
}
