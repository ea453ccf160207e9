/* The gates of the Llama-family MLP: SwiGLU h = silu(gate) * up, silu(x) = x / (1 + exp(-x)), and
 * GeGLU (Gemma) h = gelu_tanh(gate) * up, gelu_tanh(x) = 0.5 x (1 + tanh(y)) = x / (1 + exp(-2y))
 * with y = sqrt(2/pi) (x + 0.044715 x^3). */
#ifndef EVALMESH_KERNELS_SWIGLU_H
#define EVALMESH_KERNELS_SWIGLU_H

#include <stddef.h>

/* gate and up are (n) floats; the result replaces gate. One thread: the caller spreads rows. */
void em_swiglu(float *gate, const float *up, size_t n);
void em_geglu(float *gate, const float *up, size_t n);

#endif
