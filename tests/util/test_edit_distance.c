/* util/edit_distance.h: optimal string alignment, where a swap of neighbours counts 1 (Levenshtein
 * counts 2), and the early answer when the lengths alone differ by more than the limit. */
#include <stdint.h>
#include <string.h>

#include "test.h"
#include "util/edit_distance.h"

static size_t distance(const char *a, const char *b, size_t limit) {
    return em_edit_distance(a, strlen(a), b, strlen(b), limit);
}

static void test_edit_distance(void) {
    CHECK_INT_EQ(distance("kitten", "sitting", SIZE_MAX), 3);
    CHECK_INT_EQ(distance("", "abc", SIZE_MAX), 3);
    CHECK_INT_EQ(distance("same", "same", SIZE_MAX), 0);
    CHECK_INT_EQ(distance("qwen3", "qwen2", SIZE_MAX), 1);
    CHECK_INT_EQ(distance("frowad", "forward", SIZE_MAX), 2); /* a swap and an insertion */
    CHECK_INT_EQ(distance("ab", "ba", SIZE_MAX), 1);          /* a swap counts 1 */
    CHECK_INT_EQ(distance("abc", "ca", SIZE_MAX), 3);         /* OSA: no edits inside a swap */
    /* the lengths alone differ by more than the limit: limit + 1 without computing */
    CHECK_INT_EQ(distance("x", "max_length", 2), 3);
    CHECK_INT_EQ(distance("n_ctx", "n_ctxx", 2), 1);
}

int main(void) {
    test_edit_distance();
    return test_finish();
}
