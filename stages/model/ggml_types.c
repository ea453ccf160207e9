/* ggml's tensor types (ids, block sizes and bytes as in ggml.h / ggml-common.h), and the
 * em_tensor_type helpers declared in model.h. */
#include "stages/model/ggml_types.h"

#include <stdio.h>

#include "stages/model/loaded_model.h"
#include "stages/model/torchao_types.h"

static const em_ggml_type_info types[] = {
    [0] = {"F32", 1, 4},         [1] = {"F16", 1, 2},         [2] = {"Q4_0", 32, 18},
    [3] = {"Q4_1", 32, 20},      [6] = {"Q5_0", 32, 22},      [7] = {"Q5_1", 32, 24},
    [8] = {"Q8_0", 32, 34},      [9] = {"Q8_1", 32, 36},      [10] = {"Q2_K", 256, 84},
    [11] = {"Q3_K", 256, 110},   [12] = {"Q4_K", 256, 144},   [13] = {"Q5_K", 256, 176},
    [14] = {"Q6_K", 256, 210},   [15] = {"Q8_K", 256, 292},   [16] = {"IQ2_XXS", 256, 66},
    [17] = {"IQ2_XS", 256, 74},  [18] = {"IQ3_XXS", 256, 98}, [19] = {"IQ1_S", 256, 50},
    [20] = {"IQ4_NL", 32, 18},   [21] = {"IQ3_S", 256, 110},  [22] = {"IQ2_S", 256, 82},
    [23] = {"IQ4_XS", 256, 136}, [24] = {"I8", 1, 1},         [25] = {"I16", 1, 2},
    [26] = {"I32", 1, 4},        [27] = {"I64", 1, 8},        [28] = {"F64", 1, 8},
    [29] = {"IQ1_M", 256, 56},   [30] = {"BF16", 1, 2},       [34] = {"TQ1_0", 256, 54},
    [35] = {"TQ2_0", 256, 66},
};

const em_ggml_type_info *em_ggml_type_info_get(uint32_t type) {
    if (em_torchao_type_info(type)) return em_torchao_type_info(type);
    if (type >= sizeof types / sizeof types[0] || !types[type].name) return NULL;
    return &types[type];
}

bool em_ggml_type_supported(uint32_t type) {
    return type == EM_TENSOR_F32 || type == EM_TENSOR_F16 || type == EM_TENSOR_BF16 ||
           type == EM_TENSOR_Q8_0 || type == EM_TENSOR_Q4_0;
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
