/* The table of ggml tensor types, one row per type a GGUF file may hold: name, ggml type id,
 * values per block, bytes per block and, for the types evalmesh computes with, the function that
 * turns a row of blocks into floats. The GGUF reader sizes (and skips) tensors through it, the
 * model loader and the forward ask it which types they can use, the GEMM converts weight tiles
 * through its row functions and the model maker names its --type values after it.
 *
 * Row functions are exact: every value they produce equals, bit for bit, what ggml's reference
 * dequantize_row_* functions produce (the same float operations in the same order, no fused
 * multiply-adds), whichever vector or scalar code path the CPU runs. */
#ifndef EVALMESH_GGML_TYPES_H
#define EVALMESH_GGML_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* dst receives n floats from src, n values of the type (a multiple of its block size). */
typedef void em_ggml_row_fn(const void *src, float *dst, int64_t n);

typedef struct em_ggml_type_info {
    const char *name;         /* ggml's name: "Q4_K" */
    uint32_t id;              /* ggml's type id */
    int block_size;           /* values per block (1 for plain types) */
    size_t block_bytes;       /* bytes per block */
    em_ggml_row_fn *to_float; /* NULL: a type evalmesh does not compute with (Q8_K, I32, ...) */
    em_ggml_row_fn *to_float_avx2; /* the same floats with AVX2 intrinsics, NULL when to_float
                                      is all there is (its loops may still be vectorized) */
} em_ggml_type_info;

/* NULL for ids ggml does not (or no longer) define. */
const em_ggml_type_info *em_ggml_type_info_get(uint32_t type);
/* By name, any case ("q4_k" or "Q4_K"); NULL when no type has that name. */
const em_ggml_type_info *em_ggml_type_by_name(const char *name);
/* The fastest row function of a supported type this CPU runs: to_float_avx2 or to_float. */
em_ggml_row_fn *em_ggml_row_function(const em_ggml_type_info *type);
/* Whether weights of this type can be turned into floats (its row has a to_float). */
bool em_ggml_type_supported(uint32_t type);
/* The names of the supported types, comma-separated ("F32, F16, ..."), for messages. */
const char *em_ggml_supported_names(void);

#endif
