/* splitmix64-based weights (see random_weights.h). */
#include "random_weights.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* FNV-1a of the name, to give every tensor its own stream. */
static uint64_t name_hash(const char *s) {
    uint64_t h = 14695981039346656037ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

void random_weights(uint64_t seed, const char *name, weight_kind kind, int64_t fan_in,
                    int64_t start, float *out, int64_t n) {
    uint64_t state = (seed ^ name_hash(name)) + (uint64_t)start * 0x9e3779b97f4a7c15ull;
    float scale = kind == WEIGHT_MATRIX ? sqrtf(3.0f / (float)fan_in) : 1.0f / 16.0f;
    float offset = kind == WEIGHT_NORM ? 1.0f : 0.0f;
    for (int64_t i = 0; i < n; i++) {
        float u = (float)(splitmix64(&state) >> 40) / 16777216.0f;
        out[i] = offset + (2.0f * u - 1.0f) * scale;
    }
}
