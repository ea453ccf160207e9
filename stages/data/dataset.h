/* The dataset artifact: this rank's share of the scoring windows (window.h). Windows are
 * numbered globally in corpus order, and each rank holds one contiguous range of them
 * (window_ranges.h). */
#ifndef EVALMESH_DATASET_H
#define EVALMESH_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "stages/data/window.h"

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
