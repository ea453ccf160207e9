/* RMSNorm: each row of x scaled to unit root-mean-square, then by a learned weight. */
#ifndef EVALMESH_KERNELS_RMSNORM_H
#define EVALMESH_KERNELS_RMSNORM_H

/* x and y are (T, D), w is (D): y[t] = x[t] / sqrt(mean(x[t]^2) + eps) * w. The sum of squares
 * is accumulated in double, in index order. */
void em_rmsnorm(const float *x, const float *w, int T, int D, float eps, float *y, int threads);

#endif
