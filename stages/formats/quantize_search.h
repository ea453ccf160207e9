/* ggml's scale searches, shared by the row quantizers (quantize_q.c, quantize_k.c): the same
 * float operations in the same order as ggml-quants.c's helpers of the same names, so the blocks
 * come out bit for bit equal. All fit a group of n values x. */
#ifndef EVALMESH_QUANTIZE_SEARCH_H
#define EVALMESH_QUANTIZE_SEARCH_H

#include <stdint.h>

#define EM_GROUP_MAX_EPS 1e-15f

/* Round to nearest (ties to even) through the float adder: |f| <= 2^22 - 1. */
int em_nearest_int(float f);

/* Symmetric fit x[i] ~ scale * (L[i] - nmax), L in [0, 2 nmax - 1], minimising
 * sum w[i] (x[i] - scale (L[i] - nmax))^2 with w = qw, or x^2 when qw is NULL (ggml's rmse_type 1),
 * over 19 scales around -nmax / max (max: the x of largest |x|). Returns the scale. */
float em_make_qx_quants(int n, int nmax, const float *x, int8_t *L, const float *qw);

/* Asymmetric fit x[i] ~ scale * L[i] - *the_min, L in [0, nmax], min <= 0, minimising the
 * weights-weighted squared error: the plain range fit, then nstep + 1 least-squares refits from
 * the roundings at iscale = (rmin + rdelta * is + nmax) / (max - min) (make_qkx2_quants, and
 * make_qkx3_quants with use_mad false: they differ only in max == min vs max <= min, equal here).
 */
float em_make_qkx_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                         float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep);

/* Non-negative x[i] ~ scale * L[i], L in [0, nmax], weighted by quant_weights: the best of 9
 * scales around nmax / max, then up to 5 passes of per-element refinement. Returns the scale. */
float em_make_qp_quants(int n, int nmax, const float *x, uint8_t *L, const float *quant_weights);

#endif
