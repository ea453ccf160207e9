/* The tensor element types a loaded model holds, named by their ggml type ids, and the helpers
 * the tensor-type table (ggml_types.c) answers for them. */
#ifndef EVALMESH_TENSOR_TYPE_H
#define EVALMESH_TENSOR_TYPE_H

#include <stddef.h>
#include <stdint.h>

/* Tensor element types; the values are ggml's type ids. */
typedef enum em_tensor_type {
    EM_TENSOR_F32 = 0,
    EM_TENSOR_F16 = 1,
    EM_TENSOR_Q4_0 = 2,
    EM_TENSOR_Q8_0 = 8,
    EM_TENSOR_BF16 = 30,
} em_tensor_type;

const char *em_tensor_type_name(int type); /* "F32", ...; "type N" for unknown ids */
/* Bytes for n values of type (n a multiple of the type's block size, ggml_types.h). */
size_t em_tensor_type_row_bytes(em_tensor_type type, int64_t n);

#endif
