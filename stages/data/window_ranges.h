/* Window ranges: which rank scores which windows. Windows keep their global (corpus) order and each
 * rank gets one contiguous range of them, balanced by scored-token count. Nothing is padded,
 * repeated or dropped; a rank may get no window. The split depends only on the window sizes and
 * the world size, so every rank computes the same one. */
#ifndef EVALMESH_WINDOW_RANGES_H
#define EVALMESH_WINDOW_RANGES_H

#include <stddef.h>
#include <stdint.h>

/* scored[i] is the scored-token count of window i (all >= 0). Rank r gets windows
 * first[r] .. first[r+1]-1; first has world_size + 1 entries, first[0] = 0, first[world] = n.
 * A window goes to the rank whose share of the total holds its middle token:
 *   rank(i) = floor((2 * tokens_before(i) + scored[i]) * world_size / (2 * total)). */
void em_window_ranges(const int64_t *scored, size_t n, int world_size, int64_t *first);

#endif
