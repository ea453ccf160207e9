/* exp over float arrays in plain C that compilers vectorize (libm's expf is a scalar call): the
 * softmax of attention and of the output head and the SwiGLU gate call it for every element.
 * Range reduction x = n ln2 + r with ln2 split in two parts, a degree-6 polynomial for e^r
 * (Cephes' coefficients; relative error below 1e-7), 2^n built from its exponent bits. Inputs are
 * first clamped to [-87, 88] in a separate pass (a clamp feeding arithmetic in the same loop keeps
 * GCC from vectorizing), so results are never 0 or inf. Vectorized or not, the result is the same:
 * only float +, * and conversions in a fixed order (the build passes -ffp-contract=off, so no
 * instruction set contracts them to FMAs). */
#ifndef EVALMESH_KERNELS_FAST_EXP_H
#define EVALMESH_KERNELS_FAST_EXP_H

#include <stddef.h>

/* x[i] = exp(x[i]) for i < n. */
void em_exp_inplace(float *x, size_t n);

#endif
