/* Reference Q8_0 / Q4_0 quantizers (see quantize_blocks.h). */
#include "quantize_blocks.h"

#include <math.h>
#include <string.h>

#include "stages/model/half.h"
#include "stages/model/loaded_model.h"

void quantize_q8_0(const float *x, int64_t n, void *out) {
    uint8_t *block = out;
    for (int64_t b = 0; b < n / EM_QK; b++, block += 34) {
        const float *v = x + b * EM_QK;
        float amax = 0;
        for (int j = 0; j < EM_QK; j++) amax = fmaxf(amax, fabsf(v[j]));
        float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
        uint16_t dh = em_f32_to_f16(d);
        memcpy(block, &dh, 2);
        for (int j = 0; j < EM_QK; j++) block[2 + j] = (uint8_t)(int8_t)roundf(v[j] * id);
    }
}

void quantize_q4_0(const float *x, int64_t n, void *out) {
    uint8_t *block = out;
    for (int64_t b = 0; b < n / EM_QK; b++, block += 18) {
        const float *v = x + b * EM_QK;
        float amax = 0, max = 0;
        for (int j = 0; j < EM_QK; j++)
            if (fabsf(v[j]) > amax) {
                amax = fabsf(v[j]);
                max = v[j];
            }
        float d = max / -8.0f, id = d ? 1.0f / d : 0.0f;
        uint16_t dh = em_f32_to_f16(d);
        memcpy(block, &dh, 2);
        for (int j = 0; j < EM_QK / 2; j++) {
            int lo = (int)(v[j] * id + 8.5f), hi = (int)(v[j + EM_QK / 2] * id + 8.5f);
            lo = lo > 15 ? 15 : lo;
            hi = hi > 15 ? 15 : hi;
            block[2 + j] = (uint8_t)(lo | (hi << 4));
        }
    }
}
