/* Soft-capping (see softcap.h). */
#include "stages/kernels/cpu/softcap.h"

#include <math.h>

void em_softcap(float *x, size_t n, float cap) {
    for (size_t i = 0; i < n; i++) x[i] = tanhf(x[i] / cap) * cap;
}
