/* Soft-capping (Gemma 2): x becomes cap * tanh(x / cap), smoothly bounded by +-cap. Applied to
 * attention scores (after the scale, before the mask) and to the output logits. */
#ifndef EVALMESH_KERNELS_SOFTCAP_H
#define EVALMESH_KERNELS_SOFTCAP_H

#include <stddef.h>

/* x (n) in place; cap > 0. */
void em_softcap(float *x, size_t n, float cap);

#endif
