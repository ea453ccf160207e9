/* A scoring window: a run of input tokens given to the model in one forward pass; position i
 * predicts target[i], and positions from score_from to length-1 are scored. */
#ifndef EVALMESH_WINDOW_H
#define EVALMESH_WINDOW_H

#include <stdint.h>

typedef struct em_window {
    int64_t index;         /* global window number, 0-based */
    int64_t document;      /* which document it comes from */
    int32_t length;        /* input positions */
    int32_t score_from;    /* first scored position */
    const int32_t *input;  /* (length) token ids fed to the model */
    const int32_t *target; /* (length) the token that should follow input[0..i] */
    int64_t words;         /* whitespace-separated words of the document, counted on the window
                              that holds the document's first scored token, else 0 */
    int64_t bytes;         /* UTF-8 bytes of the document, counted the same way */
} em_window;

#endif
