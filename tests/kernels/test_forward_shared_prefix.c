/* Shared prefixes on the CPU forward (em_llama_forward_shared_prefixes): each continuation of a
 * prefix must get nll and argmax bit-identical to its whole window (prefix then continuation)
 * scored alone by em_llama_forward_batch, on 1 and 2 threads, whatever other continuations share
 * its batch and in whatever order, whatever other prefixes share its call (every case's prefix in
 * one call, in both orders), and a forward that has scored shared prefixes must still give
 * whole windows (in a mixed batch) their bits alone, on the cases of test_shared_prefix_cases.h.
 * Uses the model given as argv[1],
 * else the shared stories260K.gguf. Also: a bad id in a continuation is an error (exit status 2)
 * naming it, and a forward with cp > 1 refuses shared prefixes (exit status 2). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/kernels/cpu/llama_forward.h"
#include "stages/model/loaded_model.h"
#include "test.h"
#include "kernels/test_forward_model.h"
#include "kernels/test_shared_prefix_cases.h"
#include "kernels/test_windows.h"

static void check_ok(em_status err) {
    CHECK(err == NULL);
    if (err) {
        fprintf(stderr, "%s\n", err->message);
        em_error_free(err);
    }
}

/* Scores case c's continuations order[0 .. count-1] as one shared-prefix batch into out[i]. */
static em_status run_shared(em_llama_forward *f, const prefix_case *c, const window *ws,
                            const int *order, int count, scores *out) {
    em_batch_window batch[MOST_CONTINUATIONS];
    em_shared_prefix p = shared(c, ws, order, count, out, batch);
    return em_llama_forward_shared_prefixes(f, &p, 1);
}

int main(int argc, char **argv) {
    em_model *m = test_forward_model(argc, argv);
    int V = m->config.n_vocab;
    static window ws[CASES][MOST_CONTINUATIONS];
    static scores alone[CASES][MOST_CONTINUATIONS];
    for (int c = 0; c < CASES; c++) {
        make_windows(&cases[c], (uint32_t)(c + 1), V, ws[c]);
        /* each whole window alone, on a fresh forward */
        for (int i = 0; i < cases[c].count; i++) {
            em_llama_forward *f = test_forward_new(m, 1, EM_PRECISION_EXACT);
            const window *w = &ws[c][i];
            check_ok(em_llama_forward_window(f, w->ids, w->ids + 1, w->T, w->score_from,
                                             alone[c][i].nll, alone[c][i].argmax));
            em_llama_forward_free(f);
        }
    }
    const int in_order[MOST_CONTINUATIONS] = {0, 1, 2, 3},
              reversed[MOST_CONTINUATIONS] = {3, 2, 1, 0};
    for (int threads = 1; threads <= 2; threads++) {
        em_llama_forward *f =
            test_forward_new(m, threads, EM_PRECISION_EXACT); /* reused: buffers grow and shrink */
        for (int c = 0; c < CASES; c++) {
            const prefix_case *pc = &cases[c];
            static scores got[MOST_CONTINUATIONS];
            /* all continuations in order, then in reverse, then each alone */
            memset(got, 0xff, sizeof got);
            check_ok(run_shared(f, pc, ws[c], in_order, pc->count, got));
            bool together = same(pc, alone[c], got);
            memset(got, 0xff, sizeof got);
            check_ok(run_shared(f, pc, ws[c], reversed + MOST_CONTINUATIONS - pc->count, pc->count,
                                got));
            bool backwards = same(pc, alone[c], got);
            memset(got, 0xff, sizeof got);
            for (int i = 0; i < pc->count; i++) check_ok(run_shared(f, pc, ws[c], &i, 1, got));
            bool each = same(pc, alone[c], got);
            CHECK(together && backwards && each);
            printf("%d thread%s, prefix of %d, %d continuation%s: %s\n", threads,
                   threads > 1 ? "s" : "", pc->P, pc->count, pc->count > 1 ? "s" : "",
                   together && backwards && each ? "bit-identical to alone" : "DIFFERENT");
        }
        /* every case's prefix and continuations in one call, the cases in order and reversed */
        for (int backwards = 0; backwards <= 1; backwards++) {
            static em_batch_window batches[CASES][MOST_CONTINUATIONS];
            static scores got[CASES][MOST_CONTINUATIONS];
            em_shared_prefix prefixes[CASES];
            memset(got, 0xff, sizeof got);
            for (int k = 0; k < CASES; k++) {
                int c = backwards ? CASES - 1 - k : k;
                prefixes[k] =
                    shared(&cases[c], ws[c], in_order, cases[c].count, got[c], batches[c]);
            }
            check_ok(em_llama_forward_shared_prefixes(f, prefixes, CASES));
            bool all = true;
            for (int c = 0; c < CASES; c++) all = all && same(&cases[c], alone[c], got[c]);
            CHECK(all);
            printf("%d thread%s, the %d prefixes in one call%s: %s\n", threads,
                   threads > 1 ? "s" : "", CASES, backwards ? ", reversed" : "",
                   all ? "bit-identical to alone" : "DIFFERENT");
        }
        /* whole windows of every case in one mixed batch on the same forward */
        em_batch_window batch[CASES * MOST_CONTINUATIONS];
        static scores mixed[CASES][MOST_CONTINUATIONS];
        memset(mixed, 0xff, sizeof mixed);
        int n = 0;
        for (int c = CASES - 1; c >= 0; c--)
            for (int i = 0; i < cases[c].count; i++) {
                const window *w = &ws[c][i];
                batch[n++] = (em_batch_window){w->ids,        w->ids + 1,      w->T,
                                               w->score_from, mixed[c][i].nll, mixed[c][i].argmax};
            }
        check_ok(em_llama_forward_batch(f, batch, n));
        bool all = true;
        for (int c = 0; c < CASES; c++) all = all && same(&cases[c], alone[c], mixed[c]);
        CHECK(all);
        printf("%d thread%s, whole windows in one batch after shared prefixes: %s\n", threads,
               threads > 1 ? "s" : "", all ? "bit-identical to alone" : "DIFFERENT");
        em_llama_forward_free(f);
    }

    em_llama_forward *f = test_forward_new(m, 2, EM_PRECISION_EXACT);
    /* a bad id in the second continuation: exit status 2 naming it and the position */
    {
        static window bad[MOST_CONTINUATIONS];
        memcpy(bad, ws[3], sizeof bad);
        bad[1].ids[cases[3].P + 10] = V;
        static scores got[MOST_CONTINUATIONS];
        em_status err = run_shared(f, &cases[3], bad, in_order, cases[3].count, got);
        CHECK(err != NULL);
        if (err) {
            printf("bad id: %s\n", err->message);
            CHECK(err->exit_code == EM_EXIT_BAD_INPUT);
            CHECK(strstr(err->message, "window 1 of the batch") != NULL);
            CHECK(strstr(err->message, "position 10") != NULL);
            em_error_free(err);
        }
        /* and the forward goes on scoring windows alone with their bits */
        scores one;
        const window *w = &ws[5][1];
        check_ok(em_llama_forward_window(f, w->ids, w->ids + 1, w->T, w->score_from, one.nll,
                                         one.argmax));
        CHECK(memcmp(one.nll, alone[5][1].nll, (size_t)(w->T - w->score_from) * sizeof(double)) ==
              0);
    }
    em_llama_forward_free(f);

    /* a forward with cp = 2 refuses shared prefixes before any collective */
    {
        em_forward_groups groups = {.tp = {.rank = 0, .size = 1}, .cp = {.rank = 0, .size = 2}};
        em_llama_forward *split = NULL;
        check_ok(em_llama_forward_new_split(m, &groups, 1, &split));
        static scores got[MOST_CONTINUATIONS];
        em_status err =
            split ? run_shared(split, &cases[2], ws[2], in_order, cases[2].count, got) : NULL;
        CHECK(err != NULL);
        if (err) {
            printf("cp 2: %s\n", err->message);
            CHECK(err->exit_code == EM_EXIT_BAD_INPUT);
            CHECK(strstr(err->message, "cp = 2 does not score shared prefixes") != NULL);
            em_error_free(err);
        }
        em_llama_forward_free(split);
    }

    /* the results are real numbers, not a constant: finite, varied */
    int distinct = 0;
    for (int t = 0; t < 80; t++) {
        CHECK(alone[5][1].nll[t] > 0 && alone[5][1].nll[t] < 100);
        distinct += alone[5][1].nll[t] != alone[5][1].nll[0];
    }
    CHECK(distinct > 40);
    em_model_free(m);
    return test_finish();
}
