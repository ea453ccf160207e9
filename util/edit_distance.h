/* The edit distance between two words, for "did you mean ...?" hints: insertions, deletions,
 * substitutions and swaps of two neighbouring letters each count 1 (optimal string alignment). */
#ifndef EVALMESH_EDIT_DISTANCE_H
#define EVALMESH_EDIT_DISTANCE_H

#include <stddef.h>

/* The distance between a[0..n) and b[0..m), or limit + 1 when it is certainly more than limit
 * (the lengths alone differ by more); SIZE_MAX as limit: always the exact distance. */
size_t em_edit_distance(const char *a, size_t n, const char *b, size_t m, size_t limit);

#endif
