/* Contiguous, token-balanced window ranges per rank (see window_ranges.h). */
#include "stages/data/window_ranges.h"

/* 128-bit products: 2 * tokens * world_size overflows 64 bits for very large corpora. */
__extension__ typedef unsigned __int128 u128;

void em_window_ranges(const int64_t *scored, size_t n, int world_size, int64_t *first) {
    int64_t total = 0;
    for (size_t i = 0; i < n; i++) total += scored[i];
    /* owner[i] is nondecreasing in i, so the ranges are contiguous. */
    int rank = 0;
    first[0] = 0;
    int64_t before = 0;
    for (size_t i = 0; i < n; i++) {
        int owner;
        if (total == 0) {
            owner = (int)((u128)i * (u128)world_size / (u128)n); /* nothing scored: by count */
        } else {
            u128 mid = 2 * (u128)before + (u128)scored[i];
            owner = (int)(mid * (u128)world_size / (2 * (u128)total));
        }
        if (owner >= world_size) owner = world_size - 1;
        while (rank < owner) first[++rank] = (int64_t)i;
        before += scored[i];
    }
    while (rank < world_size) first[++rank] = (int64_t)n;
}
