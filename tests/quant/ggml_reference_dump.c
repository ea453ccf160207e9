/* Built only by make_ggml_reference.sh, against llama.cpp's own ggml-quants.c: quantizes the
 * float32 rows of IN (rows of N values) with ggml's quantize_row_<type>_ref and writes the blocks
 * to OUT. usage: ggml_reference_dump TYPE N IN OUT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-quants.h"

typedef struct ref {
    const char *name;
    size_t block_bytes;
    int block_values;
    void (*row)(const float *x, void *y, int64_t k);
} ref;

#define ROW(fn) ((void (*)(const float *, void *, int64_t))(fn))
static const ref refs[] = {
    {"Q8_0", 34, 32, ROW(quantize_row_q8_0_ref)},   {"Q4_0", 18, 32, ROW(quantize_row_q4_0_ref)},
    {"Q4_1", 20, 32, ROW(quantize_row_q4_1_ref)},   {"Q5_0", 22, 32, ROW(quantize_row_q5_0_ref)},
    {"Q5_1", 24, 32, ROW(quantize_row_q5_1_ref)},   {"Q4_K", 144, 256, ROW(quantize_row_q4_K_ref)},
    {"Q5_K", 176, 256, ROW(quantize_row_q5_K_ref)}, {"Q6_K", 210, 256, ROW(quantize_row_q6_K_ref)},
};

int main(int argc, char **argv) {
    if (argc != 5) return 2;
    const ref *r = NULL;
    for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++)
        if (strcmp(refs[i].name, argv[1]) == 0) r = &refs[i];
    long n = atol(argv[2]);
    FILE *f = fopen(argv[3], "rb");
    if (!r || !f || n % r->block_values) return 2;
    fseek(f, 0, SEEK_END);
    long count = ftell(f) / 4, rows = count / n;
    fseek(f, 0, SEEK_SET);
    float *x = malloc((size_t)count * 4);
    if (fread(x, 4, (size_t)count, f) != (size_t)count) return 2;
    size_t row_bytes = (size_t)(n / r->block_values) * r->block_bytes;
    unsigned char *y = malloc(row_bytes * (size_t)rows);
    for (long i = 0; i < rows; i++) r->row(x + i * n, y + i * row_bytes, n);
    FILE *o = fopen(argv[4], "wb");
    if (!o || fwrite(y, 1, row_bytes * (size_t)rows, o) != row_bytes * (size_t)rows) return 2;
    fclose(o);
    return 0;
}
