/* The device dequantizers' block decoders (stages/kernels/cuda/dequantize.cuh), run on the host,
 * against the tensor-type table's row functions (the CPU path's, themselves checked against the
 * gguf package): for every type of the decoder table, ggml's and the torchao weight-only ones, 64
 * blocks of random bytes (with scale fields set to finite halves, BF16s or floats of both signs)
 * must decode to the same floats bit for bit. Needs no GPU. Where a CUDA device is usable (tools/
 * gpu-check), the same blocks also go through the device's dequantize kernel
 * (em_cuda_dequantize_bf16, several thread blocks, the last one partial), which must give the
 * type table's floats rounded to BF16, bit for bit: the device compiles the decoders itself (and
 * would fuse a multiply-add the host rounds twice). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime.h>

#include "stages/kernels/cuda/dequantize.cuh"
#include "stages/kernels/cuda/kernels.cuh"
extern "C" {
#include "stages/formats/ggml_types.h"
#include "test.h"
}

#define BLOCKS 200 /* two thread blocks of the 32-value types, 13 of the 256-value ones */

/* The encodings of scale fields. */
enum field { HALF, BF16, F32 };

/* Offsets of the scale fields of each type's block, and their encoding. */
static int scale_offsets(uint32_t type, int *off, enum field *kind) {
    *kind = HALF;
    switch (type) {
    case 3:
    case 7:
    case 12:
    case 13: /* Q4_1, Q5_1, Q4_K, Q5_K: d, m or dmin */
        off[0] = 0, off[1] = 2;
        return 2;
    case 14: /* Q6_K: d last */
        off[0] = 208;
        return 1;
    case 200: /* TORCHAO_I8: a float scale */
        *kind = F32;
        off[0] = 0;
        return 1;
    case 201:
    case 202:
    case 203:
    case 204: /* TORCHAO_I4_G*: BF16 scale and zero */
        *kind = BF16;
        off[0] = 0, off[1] = 2;
        return 2;
    default: /* Q8_0, Q4_0, Q5_0: d first */
        off[0] = 0;
        return 1;
    }
}

/* A finite scale of 0.0999 .. 0.25 (of both signs, from b) in the field's encoding at p. */
static void set_scale(uint8_t *p, enum field kind, int b) {
    float v = (0.0999f + 0.15f * (float)((b * 37) % 700) / 700.0f) * (b % 3 == 0 ? -1.0f : 1.0f);
    uint32_t bits;
    memcpy(&bits, &v, 4);
    uint16_t h = (uint16_t)(0x2e66 + (b * 37) % 700) | (uint16_t)(b % 3 == 0 ? 0x8000 : 0);
    if (kind == BF16) h = (uint16_t)(bits >> 16);
    if (kind == F32) {
        memcpy(p, &bits, 4);
        return;
    }
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

static bool device; /* a CUDA device is usable */

/* The blocks raw (BLOCKS of type id) dequantized on the device against want rounded to BF16. */
static void check_device(uint32_t id, int values, int bytes, const uint8_t *raw, const float *want,
                         const char *name) {
    size_t n = (size_t)BLOCKS * values;
    uint8_t *src = NULL;
    __nv_bfloat16 *dst = NULL;
    static __nv_bfloat16 got[BLOCKS * 256];
    cudaError_t e = cudaMalloc((void **)&src, (size_t)BLOCKS * bytes);
    if (e == cudaSuccess) e = cudaMalloc((void **)&dst, n * sizeof *dst);
    if (e == cudaSuccess) e = cudaMemcpy(src, raw, (size_t)BLOCKS * bytes, cudaMemcpyHostToDevice);
    if (e == cudaSuccess) CHECK(em_cuda_dequantize_bf16(id, src, BLOCKS, dst));
    if (e == cudaSuccess) e = cudaMemcpy(got, dst, n * sizeof *dst, cudaMemcpyDeviceToHost);
    cudaFree(src);
    cudaFree(dst);
    if (e != cudaSuccess) fprintf(stderr, "%s on the device: %s\n", name, cudaGetErrorString(e));
    CHECK(e == cudaSuccess);
    int mismatches = 0;
    for (size_t i = 0; i < n && e == cudaSuccess; i++) {
        __nv_bfloat16 w = __float2bfloat16_rn(want[i]);
        mismatches += memcmp(&w, &got[i], sizeof w) != 0;
    }
    if (mismatches)
        fprintf(stderr, "%s on the device: %d of %zu values differ\n", name, mismatches, n);
    CHECK_INT_EQ(mismatches, 0);
    printf("%s: %d blocks dequantize on the device as the type table does, rounded to BF16\n", name,
           BLOCKS);
}

static void check_type(uint32_t id, int values, int bytes,
                       void (*decode)(const uint8_t *, float *)) {
    const em_ggml_type_info *info = em_ggml_type_info_get(id);
    CHECK(info && info->to_float);
    if (!info || !info->to_float) return;
    CHECK_INT_EQ(info->block_size, values);
    CHECK_INT_EQ(info->block_bytes, bytes);
    static uint8_t raw[BLOCKS * 256];
    static float want[BLOCKS * 256], got[BLOCKS * 256];
    uint32_t seed = id * 2654435761u;
    for (int i = 0; i < BLOCKS * bytes; i++) {
        seed = seed * 1664525u + 1013904223u;
        raw[i] = (uint8_t)(seed >> 24);
    }
    int off[2];
    enum field kind;
    int n = scale_offsets(id, off, &kind);
    for (int b = 0; b < BLOCKS; b++)
        for (int k = 0; k < n; k++) set_scale(raw + b * bytes + off[k], kind, b + 5 * k);
    info->to_float(raw, want, (int64_t)BLOCKS * values);
    for (int b = 0; b < BLOCKS; b++) decode(raw + b * bytes, got + b * values);
    int mismatches = 0;
    for (int i = 0; i < BLOCKS * values; i++) mismatches += memcmp(&want[i], &got[i], 4) != 0;
    if (mismatches)
        fprintf(stderr, "%s: %d of %d values differ\n", info->name, mismatches, BLOCKS * values);
    CHECK_INT_EQ(mismatches, 0);
    printf("%s: %d blocks decode as the type table does\n", info->name, BLOCKS);
    if (device) check_device(id, values, bytes, raw, want, info->name);
}

/* Every half bit pattern converts as the type table's F16 row does. */
static void check_halves(void) {
    static uint16_t all[65536];
    static float want[65536];
    for (int i = 0; i < 65536; i++) all[i] = (uint16_t)i;
    em_ggml_type_info_get(1)->to_float(all, want, 65536);
    int mismatches = 0;
    for (int i = 0; i < 65536; i++) {
        float got = em_half_bits_to_float(all[i]);
        mismatches += memcmp(&got, &want[i], 4) != 0 && !(got != got && want[i] != want[i]);
    }
    CHECK_INT_EQ(mismatches, 0);
}

int main(void) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    device = e == cudaSuccess && count > 0;
    if (!device)
        printf("the device part is skipped: no CUDA device (cudaGetDeviceCount: %s)\n",
               e == cudaSuccess ? "0" : cudaGetErrorString(e));
    check_halves();
#define X(id, values, bytes, decode) check_type(id, values, bytes, decode);
    EM_CUDA_BLOCK_TYPES
#undef X
    return test_finish();
}
