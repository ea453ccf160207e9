/* The dataset artifact (see dataset.h) and how a rank's share of it is built (dataset_build.h). */
#include "stages/data/dataset.h"

#include <stdbool.h>
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

    /* A window whose first input is a replacement token (BOS, the rolling prefix) writes it over
     * stream[start] when no other window of this rank reads that token (chunked windows are
     * disjoint, so none do: no copy of the stream); otherwise it gets its own copy of the input.
     * Windows are in stream order, so a token is read by an earlier window only when it lies
     * before the furthest end so far, and by a later one only when that window starts there. */
    bool *in_place = em_xcalloc((size_t)(last - first) + 1, sizeof *in_place);
    size_t copied = 0;
    int64_t furthest = -1; /* the last stream position an earlier window reads */
    for (int64_t i = first; i < last; i++) {
        const em_window_spec *spec = &plan->windows[i];
        if (spec->first_input >= 0) {
            bool later_reads = i + 1 < last && plan->windows[i + 1].start <= spec->start;
            in_place[i - first] = spec->start >= 0 && spec->start > furthest && !later_reads;
            if (!in_place[i - first]) copied += (size_t)spec->length;
        }
        if (spec->start + spec->length > furthest) furthest = spec->start + spec->length;
    }
    st->inputs = em_xmalloc((copied ? copied : 1) * sizeof *st->inputs);
    int32_t *next = st->inputs;
    for (int64_t i = first; i < last; i++) {
        const em_window_spec *spec = &plan->windows[i];
        em_window *w = &ds->windows[i - first];
        if (spec->first_input >= 0 && in_place[i - first]) {
            stream[spec->start] = spec->first_input;
            w->input = stream + spec->start;
        } else if (spec->first_input >= 0) {
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
    free(in_place);
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
