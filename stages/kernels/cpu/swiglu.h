/* The SwiGLU gate of the Llama MLP: h = silu(gate) * up, silu(x) = x / (1 + exp(-x)). */
#ifndef EVALMESH_KERNELS_SWIGLU_H
#define EVALMESH_KERNELS_SWIGLU_H

#include <stddef.h>

/* gate and up are (n) floats; the result replaces gate. One thread: the caller spreads rows. */
void em_swiglu(float *gate, const float *up, size_t n);

#endif
