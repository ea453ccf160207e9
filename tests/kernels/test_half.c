/* The scalar F16 -> F32 conversion used for quantization scales (and where the CPU lacks F16C):
 * known values, and every non-NaN half against the hardware conversion when the CPU has F16C. */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "stages/formats/dequantize_rows.h"
#include "test.h"

__attribute__((target("f16c"))) static float hardware(uint16_t h) {
    return _cvtsh_ss(h);
}

int main(void) {
    CHECK(em_f16_to_f32(0x3c00) == 1.0f);
    CHECK(em_f16_to_f32(0xc000) == -2.0f);
    CHECK(em_f16_to_f32(0x7bff) == 65504.0f);
    CHECK(em_f16_to_f32(0x0001) == ldexpf(1.0f, -24));    /* smallest subnormal */
    CHECK(em_f16_to_f32(0x03ff) == ldexpf(1023.0f, -24)); /* largest subnormal */
    CHECK(em_f16_to_f32(0x0400) == ldexpf(1.0f, -14));    /* smallest normal */
    CHECK(isinf(em_f16_to_f32(0xfc00)) && em_f16_to_f32(0xfc00) < 0);
    CHECK(isnan(em_f16_to_f32(0x7e00)));
    uint32_t neg_zero;
    float z = em_f16_to_f32(0x8000);
    memcpy(&neg_zero, &z, sizeof z);
    CHECK_INT_EQ(neg_zero, 0x80000000u);
    if (em_cpu_has_f16c()) {
        int mismatches = 0;
        for (uint32_t h = 0; h < 65536; h++) {
            if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue; /* NaN payloads */
            float a = em_f16_to_f32((uint16_t)h), b = hardware((uint16_t)h);
            if (memcmp(&a, &b, sizeof a) != 0) mismatches++;
        }
        CHECK_INT_EQ(mismatches, 0);
    } else {
        printf("no F16C on this CPU: the exhaustive comparison is skipped\n");
    }
    return test_finish();
}
