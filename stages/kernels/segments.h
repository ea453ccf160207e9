/* The windows of a batch as the kernels see them: the windows' positions are rows of one set of
 * activations, window w's positions 0 .. start[w+1]-start[w]-1 at rows start[w] .. start[w+1]-1.
 * Everything but attention works row by row; attention never crosses a window, so each window's
 * results are those it has alone. One window of T rows: count 1, start {0, T}. Backends keep
 * their own copy of it (the cuda backend's em_cuda_segments adds the offsets on the device). */
#ifndef EVALMESH_KERNELS_SEGMENTS_H
#define EVALMESH_KERNELS_SEGMENTS_H

#include <stdint.h>

typedef struct em_segments {
    int count;
    const int32_t *start; /* (count + 1) row offsets, start[0] = 0 and start[count] the rows */
} em_segments;

/* The rows of the longest window. */
static inline int em_segments_longest(const em_segments *s) {
    int longest = 0;
    for (int w = 0; w < s->count; w++)
        if (s->start[w + 1] - s->start[w] > longest) longest = s->start[w + 1] - s->start[w];
    return longest;
}

#endif
