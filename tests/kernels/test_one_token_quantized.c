/* The exact precision's one-token products straight from quantized or half rows
 * (stages/kernels/cpu/one_token_quantized.h): for each weight type with a kernel on this CPU
 * (Q4_1, Q8_0, F16 with AVX-512 VBMI), random blocks (every quant byte, random fp16 scales and
 * minima) or halves (random, and zeros of both signs, subnormals and the largest) give, bit for
 * bit, the chain acc = fmaf(x[k], w[k], acc) over k in order from 0 with w the row as
 * em_rows_to_float converts it: for row counts that are not multiples of the 16-row groups (and
 * several groups, each prefetching the next), widths of 1 to 48 blocks (F16: 1 to 600 values,
 * ragged 16-value steps too), x read at a stride and the results written at one. A CPU without the
 * instructions has no kernel: the test says so and checks that every type then has none. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/formats/half.h"
#include "stages/kernels/cpu/dequantize.h"
#include "stages/kernels/cpu/one_token_quantized.h"
#include "test.h"

static uint32_t seed = 5;

static uint32_t random_u32(void) {
    seed = seed * 1664525u + 1013904223u;
    return seed;
}

static float random_float(void) { /* [-1, 1) */
    return (float)((int32_t)(random_u32() >> 8) - (1 << 23)) / (float)(1 << 23);
}

static void put_half(uint8_t *p, float f) {
    uint16_t h = em_f32_to_f16(f);
    memcpy(p, &h, 2);
}

static const struct {
    em_tensor_type type;
    const char *name;
    int bytes, has_min;
} types[] = {{EM_TENSOR_Q4_1, "Q4_1", 20, 1}, {EM_TENSOR_Q8_0, "Q8_0", 34, 0}};

/* Whether direct gives, for each of the rows of w (K values as em_rows_to_float converts them
 * from the type), the chain over x. */
static bool chains_match(em_one_token_quantized *direct, em_tensor_type type, const uint8_t *w,
                         size_t row_bytes, int rows, int K) {
    size_t x_stride = 16, ldc = 3;
    float *x = malloc((size_t)K * x_stride * sizeof(float));
    for (size_t k = 0; k < (size_t)K * x_stride; k++) x[k] = 4.0f * random_float();
    float *c = malloc((size_t)rows * ldc * sizeof(float));
    float *wf = malloc((size_t)rows * K * sizeof(float));
    em_tensor t = {.type = type, .data = (void *)w, .shape = {K, rows, 1, 1}};
    em_rows_to_float(&t, 0, rows, wf, K);
    direct(K, x, x_stride, w, row_bytes, rows, c, ldc);
    bool same = true;
    for (int j = 0; j < rows; j++) {
        float acc = 0.0f;
        for (int k = 0; k < K; k++) acc = fmaf(x[(size_t)k * x_stride], wf[(size_t)j * K + k], acc);
        same = same && memcmp(&acc, &c[(size_t)j * ldc], sizeof acc) == 0;
    }
    free(x);
    free(c);
    free(wf);
    return same;
}

/* F16 rows of K random halves, with the special ones sprinkled in. */
static int check_f16(em_one_token_quantized *direct) {
    static const uint16_t special[] = {0x0000, 0x8000, 0x0001, 0x83ff, 0x0400, 0x7bff, 0xfbff};
    int row_counts[] = {1, 3, 16, 17, 40, 64, 75}, widths[] = {1, 7, 16, 17, 33, 576, 600};
    int shapes = 0;
    for (int a = 0; a < 7; a++) {
        for (int b = 0; b < 7; b++) {
            int rows = row_counts[a], K = widths[b];
            size_t row_bytes = 2 * (size_t)K;
            uint8_t *w = malloc((size_t)rows * row_bytes);
            for (size_t v = 0; v < (size_t)rows * K; v++) {
                uint32_t r = random_u32();
                if (r % 13 == 0)
                    memcpy(w + 2 * v, &special[(r >> 8) % 7], 2);
                else
                    put_half(w + 2 * v, 2.0f * random_float());
            }
            bool same = chains_match(direct, EM_TENSOR_F16, w, row_bytes, rows, K);
            if (!same) fprintf(stderr, "F16 rows %d K %d: not the chain's bits\n", rows, K);
            CHECK(same);
            shapes++;
            free(w);
        }
    }
    return shapes;
}

int main(void) {
    int kernels = 0;
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        em_one_token_quantized *direct = em_one_token_quantized_for(types[i].type);
        if (!direct) continue;
        kernels++;
        int row_counts[] = {1, 3, 16, 17, 40, 64, 75}, block_counts[] = {1, 2, 18, 48};
        int shapes = 0;
        for (int a = 0; a < 7; a++) {
            for (int b = 0; b < 4; b++) {
                int rows = row_counts[a], blocks = block_counts[b], K = 32 * blocks;
                size_t row_bytes = (size_t)blocks * types[i].bytes;
                uint8_t *w = malloc((size_t)rows * row_bytes);
                for (size_t k = 0; k < (size_t)rows * row_bytes; k++)
                    w[k] = (uint8_t)(random_u32() >> 24);
                for (int blk = 0; blk < rows * blocks; blk++) {
                    put_half(w + (size_t)blk * types[i].bytes, 0.05f * random_float());
                    if (types[i].has_min)
                        put_half(w + (size_t)blk * types[i].bytes + 2, random_float());
                }
                bool same = chains_match(direct, types[i].type, w, row_bytes, rows, K);
                if (!same)
                    fprintf(stderr, "%s rows %d K %d: not the chain's bits\n", types[i].name, rows,
                            K);
                CHECK(same);
                shapes++;
                free(w);
            }
        }
        printf("%s: %d shapes bit-identical to the conversion and the fma chain\n", types[i].name,
               shapes);
    }
    em_one_token_quantized *f16 = em_one_token_quantized_for(EM_TENSOR_F16);
    if (f16) {
        kernels++;
        printf("F16: %d shapes bit-identical to the conversion and the fma chain\n",
               check_f16(f16));
    }
    if (!kernels) {
        printf("no one-token quantized kernel on this CPU (needs AVX-512 VBMI): skipped\n");
        CHECK(em_one_token_quantized_for(EM_TENSOR_Q4_1) == NULL &&
              em_one_token_quantized_for(EM_TENSOR_Q8_0) == NULL &&
              em_one_token_quantized_for(EM_TENSOR_F16) == NULL);
    }
    CHECK(em_one_token_quantized_for(EM_TENSOR_F32) == NULL); /* no row: the GEMM's path */
    return test_finish();
}
