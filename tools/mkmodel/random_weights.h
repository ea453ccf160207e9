/* Deterministic random weights. Each tensor has its own stream, seeded from the model seed and
 * the tensor's GGUF name, so a value does not depend on the file format, the tensor type or the
 * order tensors are written in. The generator is splitmix64; a uniform u in [0, 1) is the top 24
 * bits of a draw divided by 2^24, and
 *   matrices and embeddings:  (2u - 1) * sqrt(3 / fan_in)   (mean 0, std 1/sqrt(fan_in))
 *   norms:                    1 + (2u - 1) / 16             (near 1)
 *   biases:                   (2u - 1) / 16                                                    */
#ifndef EVALMESH_MKMODEL_RANDOM_WEIGHTS_H
#define EVALMESH_MKMODEL_RANDOM_WEIGHTS_H

#include <stdint.h>

typedef enum weight_kind {
    WEIGHT_MATRIX,
    WEIGHT_NORM,
    WEIGHT_BIAS,
} weight_kind;

/* Fills out[0..n) with values start..start+n-1 of the tensor `name` (GGUF order: shape[0]
 * fastest). Any range can be generated on its own: draw i uses state seed ^ hash(name) + (i+1)
 * times splitmix64's increment. */
void random_weights(uint64_t seed, const char *name, weight_kind kind, int64_t fan_in,
                    int64_t start, float *out, int64_t n);

#endif
