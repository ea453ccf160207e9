/* quant_dump SCHEME N IN OUT [QW]: quantizes the float32 values of file IN, as rows of N, with a
 * scheme of the tensor-type table (stages/formats/ggml_types.h) and writes the blocks to OUT, for
 * the Python tests to compare with their references. QW: a file of N float32 importance weights
 * (one per column): the scheme's importance-weighted form. */
#include <stdio.h>
#include <stdlib.h>

#include "util/error.h"
#include "stages/quant/quantize_model.h"

/* The float32 values of path, *count of them; NULL when unreadable. */
static float *read_floats(const char *path, long long *count) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    *count = size / 4;
    float *x = em_xmalloc((size_t)(*count ? *count : 1) * sizeof *x);
    size_t got = fread(x, 4, (size_t)*count, f);
    fclose(f);
    if ((long long)got != *count) {
        free(x);
        return NULL;
    }
    return x;
}

int main(int argc, char **argv) {
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: quant_dump SCHEME N IN OUT [QW]\n");
        return 2;
    }
    const em_ggml_type_info *s = em_ggml_type_by_scheme(argv[1]);
    long long n = atoll(argv[2]);
    if (!s || n <= 0 || n % s->block_size != 0) {
        fprintf(stderr, "quant_dump: bad scheme %s or row length %s\n", argv[1], argv[2]);
        return 2;
    }
    long long count, qn = 0;
    float *x = read_floats(argv[3], &count);
    float *qw = argc == 6 ? read_floats(argv[5], &qn) : NULL;
    long long rows = x ? count / n : 0;
    if (!x || rows * n != count || (argc == 6 && (!qw || qn != n))) {
        fprintf(stderr, "quant_dump: %s is not rows of %lld floats (or %s not %lld weights)\n",
                argv[3], n, argc == 6 ? argv[5] : "-", n);
        return 2;
    }
    size_t bytes = (size_t)rows * em_tensor_type_row_bytes(s->id, n);
    void *out = em_xmalloc(bytes ? bytes : 1);
    em_quantize_rows(s, x, rows, n, qw, out);
    FILE *o = fopen(argv[4], "wb");
    if (!o || fwrite(out, 1, bytes, o) != bytes || fclose(o) != 0) return 2;
    free(x);
    free(qw);
    free(out);
    return 0;
}
