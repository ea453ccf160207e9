/* ggml's tensor types: the table of ggml_types.h (ids, block sizes and bytes as in ggml.h and
 * ggml-common.h; to_float from dequantize_*.c, from_float from quantize_*.c; ftypes as llama.h's
 * enum llama_ftype). */
#include "stages/formats/ggml_types.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "stages/formats/dequantize_rows.h"
#include "stages/formats/quantize_rows.h"
#include "stages/formats/torchao_types.h"

/* Indexed by id; ids ggml retired (4, 5: Q4_2, Q4_3; 31..33: Q4_0_4_4 and kin) have no row.
 * Columns: name, id, block values, block bytes, to_float, to_float_avx2, from_float,
 * from_float_imatrix, scheme, ftype, cuda (see ggml_types.h). */
static const em_ggml_type_info types[] = {
    [0] = {"F32", 0, 1, 4, em_f32_row, NULL, em_quantize_row_f32, NULL, NULL, 0, false},
    [1] = {"F16", 1, 1, 2, em_f16_row, NULL, em_quantize_row_f16, NULL, "F16", 1, false},
    [2] = {"Q4_0", 2, 32, 18, em_q4_0_row, em_q4_0_row_avx2, em_quantize_row_q4_0,
           em_quantize_row_q4_0_imatrix, "Q4_0", 2, true},
    [3] = {"Q4_1", 3, 32, 20, em_q4_1_row, em_q4_1_row_avx2, em_quantize_row_q4_1,
           em_quantize_row_q4_1_imatrix, "Q4_1", 3, true},
    [6] = {"Q5_0", 6, 32, 22, em_q5_0_row, NULL, em_quantize_row_q5_0, em_quantize_row_q5_0_imatrix,
           "Q5_0", 8, true},
    [7] = {"Q5_1", 7, 32, 24, em_q5_1_row, NULL, em_quantize_row_q5_1, em_quantize_row_q5_1_imatrix,
           "Q5_1", 9, true},
    [8] = {"Q8_0", 8, 32, 34, em_q8_0_row, NULL, em_quantize_row_q8_0, NULL, "Q8_0", 7, true},
    /* Q8_1 and Q8_K: ggml's scratch types for dot products, not stored weights */
    [9] = {"Q8_1", 9, 32, 36, NULL, NULL, NULL, NULL, NULL, -1, false},
    [10] = {"Q2_K", 10, 256, 84, em_q2_k_row, NULL, em_quantize_row_q2_k, NULL, NULL, 10, false},
    /* Q3_K, Q4_K, Q5_K: llama_ftype's small ("_S") mixes are the ones of one type */
    [11] = {"Q3_K", 11, 256, 110, em_q3_k_row, NULL, em_quantize_row_q3_k, NULL, NULL, 11, false},
    [12] = {"Q4_K", 12, 256, 144, em_q4_k_row, NULL, em_quantize_row_q4_k,
            em_quantize_row_q4_k_imatrix, "Q4_K", 14, true},
    [13] = {"Q5_K", 13, 256, 176, em_q5_k_row, NULL, em_quantize_row_q5_k,
            em_quantize_row_q5_k_imatrix, "Q5_K", 16, true},
    [14] = {"Q6_K", 14, 256, 210, em_q6_k_row, em_q6_k_row_avx2, em_quantize_row_q6_k,
            em_quantize_row_q6_k_imatrix, "Q6_K", 18, true},
    [15] = {"Q8_K", 15, 256, 292, NULL, NULL, NULL, NULL, NULL, -1, false},
    [16] = {"IQ2_XXS", 16, 256, 66, em_iq2_xxs_row, NULL, NULL, NULL, NULL, 19, false},
    [17] = {"IQ2_XS", 17, 256, 74, em_iq2_xs_row, NULL, NULL, NULL, NULL, 20, false},
    [18] = {"IQ3_XXS", 18, 256, 98, em_iq3_xxs_row, NULL, NULL, NULL, NULL, 23, false},
    [19] = {"IQ1_S", 19, 256, 50, em_iq1_s_row, NULL, NULL, NULL, NULL, 24, false},
    [20] = {"IQ4_NL", 20, 32, 18, em_iq4_nl_row, em_iq4_nl_row_avx2, em_quantize_row_iq4_nl, NULL,
            NULL, 25, false},
    [21] = {"IQ3_S", 21, 256, 110, em_iq3_s_row, NULL, NULL, NULL, NULL, 26, false},
    [22] = {"IQ2_S", 22, 256, 82, em_iq2_s_row, NULL, NULL, NULL, NULL, 28, false},
    [23] = {"IQ4_XS", 23, 256, 136, em_iq4_xs_row, em_iq4_xs_row_avx2, em_quantize_row_iq4_xs, NULL,
            NULL, 30, false},
    /* integer and F64 tensors: not weights */
    [24] = {"I8", 24, 1, 1, NULL, NULL, NULL, NULL, NULL, -1, false},
    [25] = {"I16", 25, 1, 2, NULL, NULL, NULL, NULL, NULL, -1, false},
    [26] = {"I32", 26, 1, 4, NULL, NULL, NULL, NULL, NULL, -1, false},
    [27] = {"I64", 27, 1, 8, NULL, NULL, NULL, NULL, NULL, -1, false},
    [28] = {"F64", 28, 1, 8, NULL, NULL, NULL, NULL, NULL, -1, false},
    [29] = {"IQ1_M", 29, 256, 56, em_iq1_m_row, NULL, NULL, NULL, NULL, 31, false},
    [30] = {"BF16", 30, 1, 2, em_bf16_row, NULL, em_quantize_row_bf16, NULL, NULL, 32, false},
    [34] = {"TQ1_0", 34, 256, 54, em_tq1_0_row, NULL, NULL, NULL, NULL, 36, false},
    [35] = {"TQ2_0", 35, 256, 66, em_tq2_0_row, NULL, em_quantize_row_tq2_0, NULL, NULL, 37, false},
    [39] = {"MXFP4", 39, 32, 17, em_mxfp4_row, NULL, NULL, NULL, NULL, 38, false}, /* MXFP4_MOE */
    [40] = {"NVFP4", 40, 64, 36, em_nvfp4_row, NULL, NULL, NULL, NULL, 39, false},
    [41] = {"Q1_0", 41, 128, 18, NULL, NULL, NULL, NULL, NULL, 40, false}, /* sized only */
    /* evalmesh's own: torchao's weight-only schemes (stages/formats/torchao_types.h); llama.cpp
     * has no file type for them */
    [200] = {"TORCHAO_I8", 200, 32, 36, em_torchao_i8_row, NULL, em_quantize_row_torchao_int8, NULL,
             "int8_weight_only", -1, true},
    [201] = {"TORCHAO_I4_G32", 201, 32, 20, em_torchao_i4_g32_row, NULL,
             em_quantize_row_torchao_int4_g32, em_quantize_row_torchao_int4_g32_imatrix,
             "int4_weight_only_g32", -1, true},
    [202] = {"TORCHAO_I4_G64", 202, 64, 36, em_torchao_i4_g64_row, NULL,
             em_quantize_row_torchao_int4_g64, em_quantize_row_torchao_int4_g64_imatrix,
             "int4_weight_only_g64", -1, true},
    [203] = {"TORCHAO_I4_G128", 203, 128, 68, em_torchao_i4_g128_row, NULL,
             em_quantize_row_torchao_int4_g128, em_quantize_row_torchao_int4_g128_imatrix,
             "int4_weight_only_g128", -1, true},
    [204] = {"TORCHAO_I4_G256", 204, 256, 132, em_torchao_i4_g256_row, NULL,
             em_quantize_row_torchao_int4_g256, em_quantize_row_torchao_int4_g256_imatrix,
             "int4_weight_only_g256", -1, true},
};

#define N_TYPES (sizeof types / sizeof types[0])

const em_ggml_type_info *em_ggml_type_info_get(uint32_t type) {
    if (type >= N_TYPES || !types[type].name) return NULL;
    return &types[type];
}

const em_ggml_type_info *em_ggml_type_by_name(const char *name) {
    for (size_t i = 0; i < N_TYPES; i++)
        if (types[i].name && strcasecmp(types[i].name, name) == 0) return &types[i];
    return NULL;
}

const em_ggml_type_info *em_ggml_type_by_scheme(const char *scheme) {
    for (size_t i = 0; i < N_TYPES; i++)
        if (types[i].scheme && strcmp(types[i].scheme, scheme) == 0) return &types[i];
    return NULL;
}

bool em_ggml_type_is_ggml(const em_ggml_type_info *type) {
    return type->id < EM_TENSOR_TORCHAO_I8;
}

em_ggml_row_fn *em_ggml_row_function(const em_ggml_type_info *type) {
    return type->to_float_avx2 && em_cpu_has_avx2() ? type->to_float_avx2 : type->to_float;
}

bool em_ggml_type_supported(uint32_t type) {
    const em_ggml_type_info *info = em_ggml_type_info_get(type);
    return info && info->to_float;
}

const char *em_ggml_supported_names(void) {
    static _Thread_local char names[512];
    size_t len = 0;
    for (size_t i = 0; i < N_TYPES; i++)
        if (types[i].to_float)
            len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", len ? ", " : "",
                                    types[i].name);
    return names;
}

const char *em_tensor_type_name(int type) {
    static _Thread_local char unknown[24];
    const em_ggml_type_info *info = type >= 0 ? em_ggml_type_info_get((uint32_t)type) : NULL;
    if (info) return info->name;
    snprintf(unknown, sizeof unknown, "type %d", type);
    return unknown;
}

size_t em_tensor_type_row_bytes(em_tensor_type type, int64_t n) {
    const em_ggml_type_info *info = em_ggml_type_info_get((uint32_t)type);
    return (size_t)(n / info->block_size) * info->block_bytes;
}
