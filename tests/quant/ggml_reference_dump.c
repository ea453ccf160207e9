/* Built only by make_ggml_reference.sh, against llama.cpp's own ggml-quants.c: quantizes the
 * float32 rows of IN (rows of N values) with ggml's quantize_row_<type>_ref, or, given QW (N
 * float32 importance weights, one per column), with quantize_<type>(..., QW) as llama-quantize
 * --imatrix calls it, and writes the blocks to OUT. usage: ggml_reference_dump TYPE N IN OUT [QW]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-quants.h"

typedef struct ref {
    const char *name;
    enum ggml_type type;
    size_t block_bytes;
    int block_values;
    void (*row)(const float *x, void *y, int64_t k);
    size_t (*weighted)(const float *src, void *dst, int64_t nrow, int64_t n_per_row,
                       const float *imatrix);
} ref;

#define ROW(fn) ((void (*)(const float *, void *, int64_t))(fn))
static const ref refs[] = {
    {"Q8_0", GGML_TYPE_Q8_0, 34, 32, ROW(quantize_row_q8_0_ref), quantize_q8_0},
    {"Q4_0", GGML_TYPE_Q4_0, 18, 32, ROW(quantize_row_q4_0_ref), quantize_q4_0},
    {"Q4_1", GGML_TYPE_Q4_1, 20, 32, ROW(quantize_row_q4_1_ref), quantize_q4_1},
    {"Q5_0", GGML_TYPE_Q5_0, 22, 32, ROW(quantize_row_q5_0_ref), quantize_q5_0},
    {"Q5_1", GGML_TYPE_Q5_1, 24, 32, ROW(quantize_row_q5_1_ref), quantize_q5_1},
    {"Q4_K", GGML_TYPE_Q4_K, 144, 256, ROW(quantize_row_q4_K_ref), quantize_q4_K},
    {"Q5_K", GGML_TYPE_Q5_K, 176, 256, ROW(quantize_row_q5_K_ref), quantize_q5_K},
    {"Q6_K", GGML_TYPE_Q6_K, 210, 256, ROW(quantize_row_q6_K_ref), quantize_q6_K},
};

/* ggml.c's, which ggml-quants.c's quantize_<type> call (ggml.c itself is not linked in). */
size_t ggml_row_size(enum ggml_type type, int64_t ne) {
    for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++)
        if (refs[i].type == type) return (size_t)(ne / refs[i].block_values) * refs[i].block_bytes;
    abort();
}

static float *read_floats(const char *path, long *count) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *count = ftell(f) / 4;
    fseek(f, 0, SEEK_SET);
    float *x = malloc((size_t)*count * 4);
    if (fread(x, 4, (size_t)*count, f) != (size_t)*count) return NULL;
    fclose(f);
    return x;
}

int main(int argc, char **argv) {
    if (argc != 5 && argc != 6) return 2;
    const ref *r = NULL;
    for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++)
        if (strcmp(refs[i].name, argv[1]) == 0) r = &refs[i];
    long n = atol(argv[2]), count, qn = 0;
    float *x = read_floats(argv[3], &count);
    float *qw = argc == 6 ? read_floats(argv[5], &qn) : NULL;
    if (!r || !x || n % r->block_values || (argc == 6 && qn != n)) return 2;
    long rows = count / n;
    size_t row_bytes = (size_t)(n / r->block_values) * r->block_bytes;
    unsigned char *y = malloc(row_bytes * (size_t)rows);
    if (qw)
        r->weighted(x, y, rows, n, qw);
    else
        for (long i = 0; i < rows; i++) r->row(x + i * n, y + i * row_bytes, n);
    FILE *o = fopen(argv[4], "wb");
    if (!o || fwrite(y, 1, row_bytes * (size_t)rows, o) != row_bytes * (size_t)rows) return 2;
    fclose(o);
    return 0;
}
