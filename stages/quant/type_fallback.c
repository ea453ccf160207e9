/* em_quant_type_fallback (see type_fallback.h). */
#include "stages/quant/type_fallback.h"

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* One row per scheme that has a fallback: the scheme's name and the type it falls back to. */
static const char *const fallbacks[][2] = {
    {"Q4_K", "Q5_0"}, {"Q5_K", "Q5_1"}, {"Q6_K", "Q8_0"}, {"Q4_0", "F16"},
    {"Q4_1", "F16"},  {"Q5_0", "F16"},  {"Q5_1", "F16"},  {"Q8_0", "F16"},
};

static bool fits(const em_ggml_type_info *s, int64_t row_values) {
    return row_values % s->block_size == 0;
}

const em_ggml_type_info *em_quant_type_fallback(const em_ggml_type_info *wanted,
                                                int64_t row_values) {
    if (fits(wanted, row_values)) return wanted;
    for (size_t i = 0; i < sizeof fallbacks / sizeof fallbacks[0]; i++) {
        if (strcmp(fallbacks[i][0], wanted->scheme) != 0) continue;
        const em_ggml_type_info *s = em_ggml_type_by_scheme(fallbacks[i][1]);
        return fits(s, row_values) ? s : em_ggml_type_by_scheme("F16");
    }
    return NULL;
}
