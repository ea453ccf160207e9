/* The table of quantization schemes: one row per scheme, naming the tensor type it produces, its
 * block layout and the function that quantizes a row. A row of n values (n a multiple of
 * block_values) becomes n / block_values blocks of block_bytes each, in the layout of the type
 * (ggml's block structs for the ggml types, see stages/model/loaded_model.h).
 *
 * The ggml schemes reproduce ggml's reference quantizers (ggml-quants.c, quantize_row_*_ref, which
 * is what llama-quantize runs without an importance matrix) bit for bit: same float operations in
 * the same order (the build uses -ffp-contract=off, so no fused multiply-adds either). */
#ifndef EVALMESH_QUANT_SCHEME_H
#define EVALMESH_QUANT_SCHEME_H

#include <stddef.h>
#include <stdint.h>

/* x: n floats (a multiple of the scheme's block_values); out: n / block_values blocks. */
typedef void (*em_quant_row_fn)(const float *x, int64_t n, void *out);
/* The same with importance weights qw[n], one per column (see quant_rows.h). */
typedef void (*em_quant_row_imatrix_fn)(const float *x, int64_t n, const float *qw, void *out);

typedef struct em_quant_scheme {
    const char *name;   /* as recipes spell it: "Q8_0", "Q4_K", "int8_weight_only", ... */
    int type;           /* the em_tensor_type (ggml type id) of the quantized tensor */
    int block_values;   /* values per block */
    size_t block_bytes; /* bytes per block */
    em_quant_row_fn quantize_row;
    /* with importance weights; NULL: the scheme has no weighted form (Q8_0, int8, as ggml) */
    em_quant_row_imatrix_fn quantize_row_imatrix;
} em_quant_scheme;

/* NULL when no scheme has this name. */
const em_quant_scheme *em_quant_scheme_find(const char *name);
/* The scheme producing this tensor type, or NULL. */
const em_quant_scheme *em_quant_scheme_for_type(int type);
/* Bytes of a row of n values (n a multiple of block_values). */
size_t em_quant_row_bytes(const em_quant_scheme *s, int64_t n);

#endif
