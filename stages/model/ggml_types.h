/* The table of ggml tensor types: name, values per block and bytes per block, for every type a
 * GGUF file may hold, so the reader can size (and skip) tensors of types evalmesh cannot compute
 * with. Only F32, F16, BF16, Q8_0 and Q4_0 are supported for computation (em_tensor_type). */
#ifndef EVALMESH_GGML_TYPES_H
#define EVALMESH_GGML_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct em_ggml_type_info {
    const char *name;
    int block_size;     /* values per block (1 for plain types) */
    size_t block_bytes; /* bytes per block */
} em_ggml_type_info;

/* NULL for ids ggml does not (or no longer) define. */
const em_ggml_type_info *em_ggml_type_info_get(uint32_t type);
/* F32, F16, BF16, Q8_0, Q4_0. */
bool em_ggml_type_supported(uint32_t type);

#endif
