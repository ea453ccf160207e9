/* The scheme table (see quant_scheme.h). */
#include "stages/quant/quant_scheme.h"

#include <string.h>

#include "stages/model/loaded_model.h"
#include "stages/model/torchao_types.h"
#include "stages/quant/quant_rows.h"

/* ggml type ids of the types em_tensor_type does not name (yet). */
enum { Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q4_K = 12, Q5_K = 13, Q6_K = 14 };

static const em_quant_scheme schemes[] = {
    {"Q8_0", EM_TENSOR_Q8_0, 32, 34, em_quantize_row_q8_0, NULL},
    {"F16", EM_TENSOR_F16, 1, 2, em_quantize_row_f16, NULL},
    {"Q4_0", EM_TENSOR_Q4_0, 32, 18, em_quantize_row_q4_0, em_quantize_row_q4_0_imatrix},
    {"Q4_1", Q4_1, 32, 20, em_quantize_row_q4_1, em_quantize_row_q4_1_imatrix},
    {"Q5_0", Q5_0, 32, 22, em_quantize_row_q5_0, em_quantize_row_q5_0_imatrix},
    {"Q5_1", Q5_1, 32, 24, em_quantize_row_q5_1, em_quantize_row_q5_1_imatrix},
    {"Q4_K", Q4_K, 256, 144, em_quantize_row_q4_k, em_quantize_row_q4_k_imatrix},
    {"Q5_K", Q5_K, 256, 176, em_quantize_row_q5_k, em_quantize_row_q5_k_imatrix},
    {"Q6_K", Q6_K, 256, 210, em_quantize_row_q6_k, em_quantize_row_q6_k_imatrix},
    {"int8_weight_only", EM_TENSOR_TORCHAO_I8, 32, 36, em_quantize_row_torchao_int8, NULL},
    {"int4_weight_only_g32", EM_TENSOR_TORCHAO_I4_G32, 32, 20, em_quantize_row_torchao_int4_g32,
     em_quantize_row_torchao_int4_g32_imatrix},
    {"int4_weight_only_g64", EM_TENSOR_TORCHAO_I4_G64, 64, 36, em_quantize_row_torchao_int4_g64,
     em_quantize_row_torchao_int4_g64_imatrix},
    {"int4_weight_only_g128", EM_TENSOR_TORCHAO_I4_G128, 128, 68, em_quantize_row_torchao_int4_g128,
     em_quantize_row_torchao_int4_g128_imatrix},
    {"int4_weight_only_g256", EM_TENSOR_TORCHAO_I4_G256, 256, 132,
     em_quantize_row_torchao_int4_g256, em_quantize_row_torchao_int4_g256_imatrix},
};

const em_quant_scheme *em_quant_scheme_find(const char *name) {
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++)
        if (strcmp(schemes[i].name, name) == 0) return &schemes[i];
    return NULL;
}

const em_quant_scheme *em_quant_scheme_for_type(int type) {
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++)
        if (schemes[i].type == type) return &schemes[i];
    return NULL;
}

size_t em_quant_row_bytes(const em_quant_scheme *s, int64_t n) {
    return (size_t)(n / s->block_values) * s->block_bytes;
}
