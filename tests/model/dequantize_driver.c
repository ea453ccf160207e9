/* Test driver for the tensor-type table: reads raw blocks of one ggml type from stdin and writes
 * the floats its row function makes of them to stdout (native floats), for a NumPy comparison
 * with the gguf package's dequantizers. Usage: dequantize_driver TYPE_NAME c|avx2 (the row
 * function to_float or to_float_avx2); the input must be whole blocks. "dequantize_driver
 * --list" prints the table: name id block_size block_bytes computable avx2, one type a line
 * (avx2 is 1 when the type has an AVX2 row function and this CPU runs it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/formats/ggml_types.h"

static void list(void) {
    for (uint32_t id = 0; id < 256; id++) {
        const em_ggml_type_info *t = em_ggml_type_info_get(id);
        if (t)
            printf("%s %u %d %zu %d %d\n", t->name, t->id, t->block_size, t->block_bytes,
                   t->to_float != NULL, t->to_float_avx2 && em_ggml_row_function(t) != t->to_float);
    }
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        list();
        return 0;
    }
    if (argc != 3) {
        fprintf(stderr, "usage: %s TYPE_NAME c|avx2 | --list\n", argv[0]);
        return 2;
    }
    const em_ggml_type_info *t = em_ggml_type_by_name(argv[1]);
    em_ggml_row_fn *to_float = !t                             ? NULL
                               : strcmp(argv[2], "avx2") == 0 ? t->to_float_avx2
                                                              : t->to_float;
    if (!to_float) {
        fprintf(stderr, "no %s row function for type %s\n", argv[2], argv[1]);
        return 2;
    }
    size_t cap = 1 << 16, len = 0, got;
    unsigned char *raw = malloc(cap);
    while ((got = fread(raw + len, 1, cap - len, stdin)) > 0) {
        len += got;
        if (len == cap) raw = realloc(raw, cap *= 2);
    }
    if (len % t->block_bytes != 0) {
        fprintf(stderr, "%zu bytes are not whole %s blocks of %zu bytes\n", len, t->name,
                t->block_bytes);
        free(raw);
        return 2;
    }
    int64_t n = (int64_t)(len / t->block_bytes) * t->block_size;
    float *out = malloc((size_t)n * sizeof(float) + 1);
    to_float(raw, out, n);
    int ok = fwrite(out, sizeof(float), (size_t)n, stdout) == (size_t)n;
    free(raw);
    free(out);
    return ok ? 0 : 4;
}
