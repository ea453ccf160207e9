/* Single-process checks of the collective seam: dtype helpers and the local backend. */
#include "runner/comm/backend_local.h"
#include "test.h"

int main(void) {
    CHECK_INT_EQ(em_dtype_size(EM_DTYPE_FLOAT32), 4);
    CHECK_INT_EQ(em_dtype_size(EM_DTYPE_UINT64), 8);
    CHECK_STR_EQ(em_dtype_name(EM_DTYPE_FLOAT64), "float64");
    return test_finish();
}
