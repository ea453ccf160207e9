/* The dataset artifact: this rank's share of the scoring windows. A window is a run of input
 * tokens given to the model in one forward pass; position i predicts target[i], and positions
 * from score_from to length-1 are scored. Windows are numbered globally in corpus order, and each
 * rank holds one contiguous range of them. */
#ifndef EVALMESH_WINDOW_SET_H
#define EVALMESH_WINDOW_SET_H

#include <stddef.h>
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

typedef struct em_dataset {
    em_window *windows; /* this rank's windows, in global order */
    size_t count;
    int64_t first_window;        /* global index of windows[0] */
    int64_t total_windows;       /* over all ranks */
    int64_t total_scored_tokens; /* over all ranks */
    char *path;                  /* the input file */
    char sha256[65];             /* of the input file */
    char *protocol;              /* "chunked", "sliding" or "rolling" */
    int64_t documents;           /* documents read from the input (all ranks) */
    int64_t empty_documents;     /* of those, documents with no text or no tokens: skipped */
    void *storage;               /* token buffers the windows point into */
    void (*storage_free)(void *storage);
} em_dataset;

void em_dataset_free(em_dataset *ds);

#endif
