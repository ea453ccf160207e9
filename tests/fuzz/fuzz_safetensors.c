/* libFuzzer target: the safetensors header parser on arbitrary bytes. Any input must give a
 * parsed file or an error value, never a crash, a leak or an out-of-bounds read. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stages/formats/safetensors.h"

/* Reading the last byte of each tensor proves the data range lies inside the input. */
static volatile uint8_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    memcpy(copy, data, size);
    em_safetensors *st = NULL;
    em_status err = em_safetensors_parse(copy, size, "fuzz.safetensors", &st);
    if (err) {
        em_error_free(err);
    } else {
        for (size_t i = 0; i < st->count; i++)
            if (st->tensors[i].nbytes)
                sink ^= ((const uint8_t *)st->tensors[i].data)[st->tensors[i].nbytes - 1];
        em_safetensors_close(st);
    }
    free(copy);
    return 0;
}
