/* libFuzzer target: the GGUF reader on arbitrary bytes. Any input must give a parsed file or an
 * error value, never a crash, a leak or an out-of-bounds read (ASan/UBSan are on). Parsed files
 * also go through the typed lookups. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stages/formats/gguf.h"

/* Reading the last byte of each tensor proves the data range lies inside the input. */
static volatile uint8_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* a private copy, exactly size bytes, so reads past the end are caught */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    memcpy(copy, data, size);
    em_gguf *g = NULL;
    em_status err = em_gguf_parse(copy, size, "fuzz.gguf", &g);
    if (err) {
        em_error_free(err);
    } else {
        for (uint64_t i = 0; i < g->kv_count; i++) {
            uint64_t u;
            double d;
            bool found;
            em_error_free(em_gguf_get_u64(g, g->kvs[i].key, &u, &found));
            em_error_free(em_gguf_get_f64(g, g->kvs[i].key, &d, &found));
        }
        for (uint64_t i = 0; i < g->tensor_count; i++)
            if (g->tensors[i].nbytes)
                sink ^= ((const uint8_t *)g->tensors[i].data)[g->tensors[i].nbytes - 1];
        em_gguf_close(g);
    }
    free(copy);
    return 0;
}
