/* Optimal string alignment distance (see edit_distance.h). */
#include "util/edit_distance.h"

#include <stdlib.h>

#include "util/error.h"

size_t em_edit_distance(const char *a, size_t n, const char *b, size_t m, size_t limit) {
    if ((n > m ? n - m : m - n) > limit) return limit + 1;
    /* d is (n+1, m+1): d[i][j] = distance between the first i letters of a and j of b */
    size_t *d = em_xmalloc((n + 1) * (m + 1) * sizeof *d);
#define D(i, j) d[(i) * (m + 1) + (j)]
    for (size_t i = 0; i <= n; i++) D(i, 0) = i;
    for (size_t j = 0; j <= m; j++) D(0, j) = j;
    for (size_t i = 1; i <= n; i++) {
        for (size_t j = 1; j <= m; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t best = D(i - 1, j - 1) + cost;
            if (D(i - 1, j) + 1 < best) best = D(i - 1, j) + 1;
            if (D(i, j - 1) + 1 < best) best = D(i, j - 1) + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                D(i - 2, j - 2) + 1 < best)
                best = D(i - 2, j - 2) + 1;
            D(i, j) = best;
        }
    }
    size_t result = D(n, m);
#undef D
    free(d);
    return result;
}
