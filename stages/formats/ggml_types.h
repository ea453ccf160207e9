/* The table of tensor types, one row per type a GGUF file (or evalmesh's torchao checkpoints) may
 * hold, as ggml's type_traits[] (ggml.c): name, type id, values per block, bytes per block, the
 * function that turns a row of blocks into floats (to_float), the one that turns floats into
 * blocks (from_float) and its importance-weighted form, the llama_ftype a file of that type
 * records, and whether the CUDA forward decodes it. The GGUF reader sizes (and skips) tensors
 * through it, the model loader and the forward ask it which types they can use, the GEMM converts
 * weight tiles through to_float, and the quantize stage and the model maker (tools/mkmodel) write
 * weights through from_float.
 *
 * to_float is exact: every value it produces equals, bit for bit, what ggml's reference
 * dequantize_row_* functions produce (the same float operations in the same order, no fused
 * multiply-adds), whichever vector or scalar code path the CPU runs. from_float reproduces ggml's
 * reference quantizer (quantize_row_*_ref, what llama-quantize runs without an importance matrix)
 * or torchao's bit for bit where the row names a scheme; elsewhere it picks scales simply (valid
 * blocks close to the floats, not the best llama-quantize would find; see quantize_simple.c). */
#ifndef EVALMESH_GGML_TYPES_H
#define EVALMESH_GGML_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Tensor element types: ggml's type ids (ggml.h, enum ggml_type), and above them evalmesh's
 * torchao weight-only types (torchao_types.h). */
typedef enum em_tensor_type {
    EM_TENSOR_F32 = 0,
    EM_TENSOR_F16 = 1,
    EM_TENSOR_Q4_0 = 2,
    EM_TENSOR_Q4_1 = 3,
    EM_TENSOR_Q5_0 = 6,
    EM_TENSOR_Q5_1 = 7,
    EM_TENSOR_Q8_0 = 8,
    EM_TENSOR_Q8_1 = 9,
    EM_TENSOR_Q2_K = 10,
    EM_TENSOR_Q3_K = 11,
    EM_TENSOR_Q4_K = 12,
    EM_TENSOR_Q5_K = 13,
    EM_TENSOR_Q6_K = 14,
    EM_TENSOR_Q8_K = 15,
    EM_TENSOR_IQ2_XXS = 16,
    EM_TENSOR_IQ2_XS = 17,
    EM_TENSOR_IQ3_XXS = 18,
    EM_TENSOR_IQ1_S = 19,
    EM_TENSOR_IQ4_NL = 20,
    EM_TENSOR_IQ3_S = 21,
    EM_TENSOR_IQ2_S = 22,
    EM_TENSOR_IQ4_XS = 23,
    EM_TENSOR_I8 = 24,
    EM_TENSOR_I16 = 25,
    EM_TENSOR_I32 = 26,
    EM_TENSOR_I64 = 27,
    EM_TENSOR_F64 = 28,
    EM_TENSOR_IQ1_M = 29,
    EM_TENSOR_BF16 = 30,
    EM_TENSOR_TQ1_0 = 34,
    EM_TENSOR_TQ2_0 = 35,
    EM_TENSOR_MXFP4 = 39,
    EM_TENSOR_NVFP4 = 40,
    EM_TENSOR_Q1_0 = 41,
    /* evalmesh's own (no ggml type holds them) */
    EM_TENSOR_TORCHAO_I8 = 200,
    EM_TENSOR_TORCHAO_I4_G32 = 201,
    EM_TENSOR_TORCHAO_I4_G64 = 202,
    EM_TENSOR_TORCHAO_I4_G128 = 203,
    EM_TENSOR_TORCHAO_I4_G256 = 204,
} em_tensor_type;

/* dst receives n floats from src, n values of the type (a multiple of its block size). */
typedef void em_ggml_row_fn(const void *src, float *dst, int64_t n);
/* out receives the blocks of the n floats x (n a multiple of the block size). */
typedef void em_ggml_from_float_fn(const float *x, int64_t n, void *out);
/* The same with importance weights qw[n], one per column (llama-quantize --imatrix: the
 * calibration's mean x^2 per input column), the same for every row of a tensor. */
typedef void em_ggml_from_float_imatrix_fn(const float *x, int64_t n, const float *qw, void *out);

typedef struct em_ggml_type_info {
    const char *name;         /* ggml's name: "Q4_K" */
    em_tensor_type id;        /* ggml's type id */
    int block_size;           /* values per block (1 for plain types) */
    size_t block_bytes;       /* bytes per block */
    em_ggml_row_fn *to_float; /* NULL: a type evalmesh does not compute with (Q8_K, I32, ...) */
    em_ggml_row_fn *to_float_avx2;     /* the same floats with AVX2 intrinsics, NULL when to_float
                                          is all there is (its loops may still be vectorized) */
    em_ggml_from_float_fn *from_float; /* NULL: a type evalmesh does not write */
    /* NULL: no weighted form (Q8_0, int8: ggml and torchao ignore the weights) */
    em_ggml_from_float_imatrix_fn *from_float_imatrix;
    /* The quantize stage's name for the type ("Q4_K", "int8_weight_only"), set exactly where
     * from_float reproduces the reference quantizer (ggml's quantize_row_*_ref, torchao's) bit
     * for bit; NULL: the stage does not offer it. */
    const char *scheme;
    int ftype; /* llama_ftype (llama.h) of a file of this type, general.file_type; -1: none */
    bool cuda; /* the CUDA forward decodes its blocks (stages/kernels/cuda/dequantize.cuh) */
} em_ggml_type_info;

/* NULL for ids ggml does not (or no longer) define. */
const em_ggml_type_info *em_ggml_type_info_get(uint32_t type);
/* By name, any case ("q4_k" or "Q4_K"); NULL when no type has that name. */
const em_ggml_type_info *em_ggml_type_by_name(const char *name);
/* By the quantize stage's scheme name, exact case ("Q8_0", "int4_weight_only_g128"); NULL when
 * no row offers that scheme. */
const em_ggml_type_info *em_ggml_type_by_scheme(const char *scheme);
/* Whether ggml defines the type (llama.cpp can read it), as opposed to evalmesh's own. */
bool em_ggml_type_is_ggml(const em_ggml_type_info *type);
/* The fastest row function of a supported type this CPU runs: to_float_avx2 or to_float. */
em_ggml_row_fn *em_ggml_row_function(const em_ggml_type_info *type);
/* Whether weights of this type can be turned into floats (its row has a to_float). */
bool em_ggml_type_supported(uint32_t type);
/* The names of the supported types, comma-separated ("F32, F16, ..."), for messages. */
const char *em_ggml_supported_names(void);

const char *em_tensor_type_name(int type); /* "F32", ...; "type N" for unknown ids */
/* Bytes for n values of type (n a multiple of the type's block size). */
size_t em_tensor_type_row_bytes(em_tensor_type type, int64_t n);

#endif
