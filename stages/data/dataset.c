/* The dataset artifact (see dataset.h) and how a rank's share of it is built (dataset_build.h). */
#include "stages/data/dataset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "stages/data/dataset_build.h"

/* What the windows point into: the token stream and one block of inputs that start with a
 * replacement token. */
typedef struct dataset_storage {
    int32_t *stream;
    int32_t *inputs;
} dataset_storage;

static void storage_free(void *p) {
    dataset_storage *st = p;
    free(st->stream);
    free(st->inputs);
    free(st);
}

em_dataset *em_dataset_build(const em_window_plan *plan, int32_t *stream, int64_t first,
                             int64_t last, const char *path, const char *sha256,
                             em_protocol protocol) {
    em_dataset *ds = em_xcalloc(1, sizeof *ds);
    dataset_storage *st = em_xcalloc(1, sizeof *st);
    st->stream = stream;
    ds->storage = st;
    ds->storage_free = storage_free;
    ds->count = (size_t)(last - first);
    ds->first_window = first;
    ds->total_windows = (int64_t)plan->count;
    ds->total_scored_tokens = plan->scored_tokens;
    ds->path = em_xstrdup(path);
    snprintf(ds->sha256, sizeof ds->sha256, "%s", sha256);
    ds->protocol = em_xstrdup(em_protocol_name(protocol));
    ds->windows = em_xcalloc(ds->count, sizeof *ds->windows);

    /* Windows whose first input is a replacement token (BOS, the rolling prefix) get their own
     * copy of the input; the others read it straight from the stream. */
    size_t copied = 0;
    for (int64_t i = first; i < last; i++)
        if (plan->windows[i].first_input >= 0) copied += (size_t)plan->windows[i].length;
    st->inputs = em_xmalloc((copied ? copied : 1) * sizeof *st->inputs);
    int32_t *next = st->inputs;
    for (int64_t i = first; i < last; i++) {
        const em_window_spec *spec = &plan->windows[i];
        em_window *w = &ds->windows[i - first];
        if (spec->first_input >= 0) {
            next[0] = spec->first_input;
            memcpy(next + 1, stream + spec->start + 1, (size_t)(spec->length - 1) * sizeof *next);
            w->input = next;
            next += spec->length;
        } else {
            w->input = stream + spec->start;
        }
        w->index = i;
        w->document = spec->document;
        w->length = spec->length;
        w->score_from = spec->score_from;
        w->target = stream + spec->start + 1;
        w->words = spec->words;
        w->bytes = spec->bytes;
    }
    return ds;
}

void em_dataset_free(em_dataset *ds) {
    if (!ds) return;
    if (ds->storage_free) ds->storage_free(ds->storage);
    free(ds->windows);
    free(ds->path);
    free(ds->protocol);
    free(ds);
}
