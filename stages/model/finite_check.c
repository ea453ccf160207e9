/* em_tensors_check_finite (see finite_check.h). */
#include "stages/model/finite_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "stages/formats/ggml_types.h"

static em_status non_finite(const em_tensor *t, const em_ggml_type_info *info, int64_t row,
                            int64_t index, float value, int exit_code) {
    int64_t blocks_per_row = t->shape[0] / info->block_size;
    int64_t in_row = index / info->block_size;
    int64_t first = in_row * info->block_size, last = first + info->block_size - 1;
    char values[64];
    if (first == last)
        snprintf(values, sizeof values, "value %lld", (long long)first);
    else
        snprintf(values, sizeof values, "values %lld..%lld", (long long)first, (long long)last);
    return em_error_new(exit_code,
                        "tensor '%s' (%s): block %lld (row %lld, %s) holds a non-finite "
                        "value (%s)",
                        t->name, info->name, (long long)(row * blocks_per_row + in_row),
                        (long long)row, values,
                        isnan(value) ? "nan"
                        : value > 0  ? "inf"
                                     : "-inf");
}

/* The first non-finite value of t, or NULL. */
static em_status check_tensor(const em_tensor *t, float *row_buf, int exit_code) {
    const em_ggml_type_info *info = em_ggml_type_info_get((uint32_t)t->type);
    if (!info || !info->to_float || !t->data || t->shape[0] % info->block_size != 0) return NULL;
    em_ggml_row_fn *to_float = em_ggml_row_function(info);
    int64_t n = t->shape[0], rows = n ? em_tensor_numel(t) / n : 0;
    size_t row_bytes = (size_t)(n / info->block_size) * info->block_bytes;
    if ((size_t)rows * row_bytes > t->nbytes) return NULL; /* the loader names a short tensor */
    for (int64_t r = 0; r < rows; r++) {
        to_float((const uint8_t *)t->data + (size_t)r * row_bytes, row_buf, n);
        for (int64_t i = 0; i < n; i++)
            if (!isfinite(row_buf[i])) return non_finite(t, info, r, i, row_buf[i], exit_code);
    }
    return NULL;
}

em_status em_tensors_check_finite(const em_tensor *tensors, size_t count, int exit_code) {
    int64_t longest = 1;
    for (size_t i = 0; i < count; i++)
        if (tensors[i].shape[0] > longest) longest = tensors[i].shape[0];
    float *row_buf = malloc((size_t)longest * sizeof *row_buf);
    if (!row_buf)
        return em_error_new(EM_EXIT_RUNTIME, "out of memory for a row of %lld values",
                            (long long)longest);
    em_status err = NULL;
    for (size_t i = 0; i < count && !err; i++) err = check_tensor(&tensors[i], row_buf, exit_code);
    free(row_buf);
    return err;
}
