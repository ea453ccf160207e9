/* "Did you mean ...?": the known word closest to a mistyped one, by edit distance (insertions,
 * deletions, substitutions and swaps of two neighbouring letters each count 1) or, failing
 * that, by a shared prefix ("max" for "max_length"). */
#include "runner/recipe/schema.h"

#include <stdlib.h>
#include <string.h>

/* Optimal string alignment distance between a and b, or more than `limit` (then it stops). */
static size_t edit_distance(const char *a, const char *b, size_t limit) {
    size_t n = strlen(a), m = strlen(b);
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

static bool starts_with(const char *s, const char *prefix) {
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

const char *em_did_you_mean(const char *word, const char *const *candidates, size_t count) {
    /* Short words allow fewer edits, so "x" does not suggest "dp". */
    size_t len = strlen(word);
    size_t max_edits = len / 2 < 2 ? len / 2 : 2;
    const char *best = NULL;
    size_t best_score = (size_t)-1;
    for (size_t i = 0; i < count; i++) {
        const char *c = candidates[i];
        size_t dist = edit_distance(word, c, max_edits);
        size_t score = (size_t)-1;
        if (dist <= max_edits && dist > 0)
            score = dist;
        else if ((len >= 3 && starts_with(c, word)) || (strlen(c) >= 3 && starts_with(word, c)))
            score = max_edits + 1; /* a prefix is a weaker hint than a small typo */
        if (score < best_score) {
            best_score = score;
            best = c;
        }
    }
    return best;
}
