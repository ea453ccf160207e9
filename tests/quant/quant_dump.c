/* quant_dump SCHEME N IN OUT: quantizes the float32 values of file IN, as rows of N, with a scheme
 * of the table (stages/quant/quant_scheme.h) and writes the blocks to OUT, for the Python tests to
 * compare with their references. */
#include <stdio.h>
#include <stdlib.h>

#include "util/error.h"
#include "stages/quant/quantize_model.h"

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: quant_dump SCHEME N IN OUT\n");
        return 2;
    }
    const em_quant_scheme *s = em_quant_scheme_find(argv[1]);
    long long n = atoll(argv[2]);
    if (!s || n <= 0 || n % s->block_values != 0) {
        fprintf(stderr, "quant_dump: bad scheme %s or row length %s\n", argv[1], argv[2]);
        return 2;
    }
    FILE *f = fopen(argv[3], "rb");
    if (!f) return 2;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    long long count = size / 4, rows = count / n;
    float *x = em_xmalloc((size_t)(count ? count : 1) * sizeof *x);
    size_t got = fread(x, 4, (size_t)count, f);
    fclose(f);
    if ((long long)got != count || rows * n != count) {
        fprintf(stderr, "quant_dump: %s holds %lld floats, not rows of %lld\n", argv[3], count, n);
        return 2;
    }
    size_t bytes = (size_t)rows * em_quant_row_bytes(s, n);
    void *out = em_xmalloc(bytes ? bytes : 1);
    em_quantize_rows(s, x, rows, n, out);
    FILE *o = fopen(argv[4], "wb");
    if (!o || fwrite(out, 1, bytes, o) != bytes || fclose(o) != 0) return 2;
    free(x);
    free(out);
    return 0;
}
