/* The torchao tensor types (see torchao_types.h): their table rows and their dequantizer. */
#include "stages/model/torchao_types.h"

#include <string.h>

#include "stages/model/half.h"

static const em_ggml_type_info types[] = {
    {"TORCHAO_I8", 32, 36},       {"TORCHAO_I4_G32", 32, 20},    {"TORCHAO_I4_G64", 64, 36},
    {"TORCHAO_I4_G128", 128, 68}, {"TORCHAO_I4_G256", 256, 132},
};

const em_ggml_type_info *em_torchao_type_info(uint32_t type) {
    if (type < EM_TENSOR_TORCHAO_I8 || type > EM_TENSOR_TORCHAO_I4_G256) return NULL;
    return &types[type - EM_TENSOR_TORCHAO_I8];
}

void em_torchao_row_to_float(uint32_t type, const uint8_t *src, float *dst, int64_t n) {
    const em_ggml_type_info *info = em_torchao_type_info(type);
    int g = info->block_size;
    for (int64_t b = 0; b < n / g; b++, src += info->block_bytes, dst += g) {
        if (type == EM_TENSOR_TORCHAO_I8) {
            float s;
            memcpy(&s, src, 4);
            for (int j = 0; j < g; j++) dst[j] = s * (float)(int8_t)src[4 + j];
            continue;
        }
        uint16_t sh, zh;
        memcpy(&sh, src, 2);
        memcpy(&zh, src + 2, 2);
        float s = em_bf16_to_f32(sh), z = em_bf16_to_f32(zh);
        const uint8_t *qs = src + 4;
        for (int j = 0; j < g / 2; j++) {
            dst[j] = (float)((qs[j] & 0x0F) - 8) * s + z;
            dst[j + g / 2] = (float)((qs[j] >> 4) - 8) * s + z;
        }
    }
}
