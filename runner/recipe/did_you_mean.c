/* "Did you mean ...?": the known word closest to a mistyped one, by edit distance (insertions,
 * deletions, substitutions and swaps of two neighbouring letters each count 1) or, failing
 * that, by a shared prefix ("max" for "max_length"). */
#include "runner/recipe/schema.h"

#include <stdlib.h>
#include <string.h>

#include "util/edit_distance.h"

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
        size_t dist = em_edit_distance(word, len, c, strlen(c), max_edits);
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
