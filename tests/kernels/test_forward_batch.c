/* Batches of windows on the CPU forward (em_llama_forward_batch): every window's per-token results
 * (nll and argmax) must be bit-identical to those it gets alone, whatever windows share its batch,
 * in whatever order, on 1 or 2 threads. The windows have different lengths: a 1-position window,
 * windows scored at their last position only, stride-protocol windows scored from the middle
 * (score_from > 0), and windows longer than an attention query block, their last blocks of every
 * kind (whole panels of 16 queries, an odd number of them, and a part of one). Uses the model given
 * as argv[1], else the shared stories260K.gguf; argv[2] `ggml` runs precision ggml. Also: a bad
 * token id in a batch is an error (exit status 2) naming the window of the batch. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/kernels/cpu/llama_forward.h"
#include "stages/model/loaded_model.h"
#include "test.h"
#include "kernels/test_forward_model.h"
#include "kernels/test_windows.h"

#define WINDOWS 8

static em_precision precision = EM_PRECISION_EXACT;

/* Scores windows order[0 .. count-1] as one batch into out[window]. */
static void run_batch(em_llama_forward *f, const window *ws, const int *order, int count,
                      scores *out) {
    em_batch_window batch[WINDOWS];
    for (int i = 0; i < count; i++) {
        const window *w = &ws[order[i]];
        batch[i] = (em_batch_window){w->ids,        w->ids + 1,        w->T,
                                     w->score_from, out[order[i]].nll, out[order[i]].argmax};
    }
    em_status err = em_llama_forward_batch(f, batch, count);
    CHECK(err == NULL);
    if (err) {
        fprintf(stderr, "%s\n", err->message);
        em_error_free(err);
    }
}

/* The windows of `order` (count in all) cut into batches of sizes[0], sizes[1], ... */
static void run_batches(em_llama_forward *f, const window *ws, const int *order, const int *sizes,
                        scores *out) {
    int done = 0;
    for (int b = 0; done < WINDOWS; b++) {
        run_batch(f, ws, order + done, sizes[b], out);
        done += sizes[b];
    }
}

/* Counts the windows whose results in got differ from want. */
static int differing(const window *ws, const scores *want, const scores *got) {
    int n = 0;
    for (int i = 0; i < WINDOWS; i++) {
        size_t k = (size_t)(ws[i].T - ws[i].score_from);
        n += memcmp(want[i].nll, got[i].nll, k * sizeof(double)) != 0 ||
             memcmp(want[i].argmax, got[i].argmax, k * sizeof(int32_t)) != 0;
    }
    return n;
}

int main(int argc, char **argv) {
    em_model *m = test_forward_model(argc, argv);
    precision = test_forward_precision(argc, argv);
    int V = m->config.n_vocab;
    static window ws[WINDOWS];
    make_window(&ws[0], 300, 100, 1, V); /* stride protocol: scored from the middle */
    make_window(&ws[1], 1, 0, 2, V);     /* one position */
    make_window(&ws[2], 64, 63, 3, V);   /* only its last position scored */
    make_window(&ws[3], 130, 0, 4, V);   /* three query blocks, the last a short one */
    make_window(&ws[4], 48, 5, 5, V);    /* a block of 48 queries: three panels */
    make_window(&ws[5], 96, 56, 6, V);   /* sliding: max_length 96, stride 40 */
    make_window(&ws[6], 80, 79, 7, V);   /* two blocks, the second of one panel */
    make_window(&ws[7], 200, 0, 8, V);

    /* each window alone, on a fresh forward */
    static scores alone[WINDOWS];
    for (int i = 0; i < WINDOWS; i++) {
        em_llama_forward *f = test_forward_new(m, 1, precision);
        run_batch(f, ws, &i, 1, alone);
        em_llama_forward_free(f);
    }
    const int in_order[WINDOWS] = {0, 1, 2, 3, 4, 5, 6, 7};
    const int reversed[WINDOWS] = {7, 6, 5, 4, 3, 2, 1, 0};
    const int shuffled[WINDOWS] = {4, 1, 7, 2, 0, 6, 3, 5};
    const int all[] = {WINDOWS}, pairs[] = {2, 2, 2, 2}, uneven[] = {3, 1, 4},
              ones[] = {1, 1, 1, 1, 1, 1, 1, 1};
    struct {
        const char *name;
        const int *order, *sizes;
    } cases[] = {
        {"one batch of all, in order", in_order, all},
        {"one batch of all, reversed", reversed, all},
        {"one batch of all, shuffled", shuffled, all},
        {"batches of two", in_order, pairs},
        {"batches of two, shuffled", shuffled, pairs},
        {"batches of 3, 1 and 4, reversed", reversed, uneven},
        {"one at a time after batches", shuffled, ones},
    };
    for (int threads = 1; threads <= 2; threads++) {
        em_llama_forward *f =
            test_forward_new(m, threads, precision); /* reused: buffers grow and shrink */
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
            static scores got[WINDOWS];
            memset(got, 0xff, sizeof got);
            run_batches(f, ws, cases[c].order, cases[c].sizes, got);
            int bad = differing(ws, alone, got);
            CHECK(bad == 0);
            printf("%d thread%s, %s: %s\n", threads, threads > 1 ? "s" : "", cases[c].name,
                   bad ? "DIFFERENT" : "bit-identical to alone");
        }
        em_llama_forward_free(f);
    }

    /* a window twice in one batch gets the same bits both times */
    {
        em_llama_forward *f = test_forward_new(m, 2, precision);
        static scores three[3];
        em_batch_window batch[3] = {
            {ws[5].ids, ws[5].ids + 1, ws[5].T, ws[5].score_from, three[0].nll, three[0].argmax},
            {ws[1].ids, ws[1].ids + 1, ws[1].T, ws[1].score_from, three[1].nll, three[1].argmax},
            {ws[5].ids, ws[5].ids + 1, ws[5].T, ws[5].score_from, three[2].nll, three[2].argmax},
        };
        CHECK(em_llama_forward_batch(f, batch, 3) == NULL);
        size_t k = (size_t)(ws[5].T - ws[5].score_from);
        CHECK(memcmp(three[0].nll, alone[5].nll, k * sizeof(double)) == 0);
        CHECK(memcmp(three[2].nll, alone[5].nll, k * sizeof(double)) == 0);
        CHECK(memcmp(three[2].argmax, alone[5].argmax, k * sizeof(int32_t)) == 0);

        /* a bad input id in the batch's third window: exit status 2 naming it */
        static window bad;
        bad = ws[4];
        bad.ids[16] = V;
        batch[2] = (em_batch_window){bad.ids,        bad.ids + 1,  bad.T,
                                     bad.score_from, three[2].nll, three[2].argmax};
        em_status err = em_llama_forward_batch(f, batch, 3);
        CHECK(err != NULL);
        if (err) {
            printf("bad id: %s\n", err->message);
            CHECK(err->exit_code == EM_EXIT_BAD_INPUT);
            CHECK(strstr(err->message, "window 2 of the batch") != NULL);
            CHECK(strstr(err->message, "position 16") != NULL);
            em_error_free(err);
        }
        em_llama_forward_free(f);
    }

    /* the results are real numbers, not a constant: finite, varied */
    int distinct = 0;
    for (int t = 0; t < 200; t++) {
        CHECK(alone[7].nll[t] > 0 && alone[7].nll[t] < 100);
        distinct += alone[7].nll[t] != alone[7].nll[0];
    }
    CHECK(distinct > 100);
    em_model_free(m);
    return test_finish();
}
