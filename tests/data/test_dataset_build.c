/* em_dataset_build: every window's input and target against the token stream as it was (the
 * replacement token first where the plan says so), for chunked, sliding and rolling plans over
 * one rank and over a rank's share; chunked windows read their input from the stream itself (the
 * BOS written over a token no other window reads), with no copy. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "stages/data/protocol.h"
#include "stages/data/dataset_build.h"

#define BOS 1

/* Builds windows first .. last-1 of plan over a copy of stream and checks each one. */
static void check_build(const char *label, const em_window_plan *plan, const int32_t *stream,
                        int64_t n_tokens, int64_t first, int64_t last, bool expect_in_place) {
    int32_t *copy = malloc((size_t)n_tokens * sizeof *copy);
    memcpy(copy, stream, (size_t)n_tokens * sizeof *copy);
    em_dataset *ds = em_dataset_build(plan, copy, first, last, "x.txt", "", EM_PROTOCOL_CHUNKED);
    CHECK_INT_EQ(ds->count, last - first);
    for (int64_t i = first; i < last; i++) {
        const em_window_spec *spec = &plan->windows[i];
        const em_window *w = &ds->windows[i - first];
        CHECK_INT_EQ(w->index, i);
        CHECK_INT_EQ(w->length, spec->length);
        bool ok = true;
        for (int32_t k = 0; k < spec->length; k++) {
            int32_t want_input =
                k == 0 && spec->first_input >= 0 ? spec->first_input : stream[spec->start + k];
            ok = ok && w->input[k] == want_input && w->target[k] == stream[spec->start + 1 + k];
        }
        if (!ok) fprintf(stderr, "%s: window %lld differs\n", label, (long long)i);
        CHECK(ok);
        if (expect_in_place) CHECK(w->input + 1 == w->target);
    }
    em_dataset_free(ds);
}

int main(void) {
    enum { N = 200 };
    int32_t stream[N];
    for (int i = 0; i < N; i++) stream[i] = 1000 + i;
    em_window_plan plan;
    CHECK(em_plan_chunked(N, 16, BOS, 0, &plan) == NULL);
    check_build("chunked", &plan, stream, N, 0, (int64_t)plan.count, true);
    check_build("chunked, a share", &plan, stream, N, 3, 7, true);
    em_window_plan_free(&plan);
    CHECK(em_plan_sliding(N, 16, 5, 0, &plan) == NULL);
    check_build("sliding", &plan, stream, N, 0, (int64_t)plan.count, false);
    em_window_plan_free(&plan);
    /* documents of 1, 7, 30 and 100 tokens and one of 62: first windows start on the previous
     * document's last token (or before the stream), which other windows read */
    em_document_tokens docs[] = {
        {0, 1, 1, 1}, {1, 7, 1, 1}, {8, 30, 1, 1}, {38, 100, 1, 1}, {138, 62, 1, 1}};
    CHECK(em_plan_rolling(docs, 5, 16, BOS, 0, &plan) == NULL);
    check_build("rolling", &plan, stream, N, 0, (int64_t)plan.count, false);
    check_build("rolling, a share", &plan, stream, N, 2, 9, false);
    em_window_plan_free(&plan);
    return test_finish();
}
