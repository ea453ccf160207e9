/* Greedy decoding and shared prefixes on the cuda forward (forward_backend.h's decode_new,
 * prefill, step and score_shared_prefixes: its device key-value cache), through the seam:
 *   cuda_decode_check MODEL fp32|bf16
 * the 8 prompts of test_decode_batchings.h (1 to 130 ids: inside the first attention tile, on its
 * edge, across tiles), each decoded for STEPS tokens, in its 5 batchings. Checks:
 *   every batching gives each sequence the same tokens and logits, bit for bit;
 *   those are the full forward's: at each step the argmax of the whole sequence so far through
 *   score_batch (its last position) and the logits of a fresh prefill of the whole sequence;
 *   fp32 (an F32 model, FP32 products): the cpu backend's decoded tokens agree wherever the cpu's
 *   top two logits are more than 1e-3 apart, and every logit within 1e-3 of the cpu's (bf16:
 *   reported only);
 *   every case of test_shared_prefix_cases.h through score_shared_prefixes, all prefixes in one
 *   call in both orders: each continuation's nll and argmax the bits of its whole window;
 *   a step on a slot never filled and a repeated slot are errors (exit status 2) naming them.
 * Exit 77 (skipped) when no CUDA device is usable. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/kernels/cuda/cuda_forward.h"
#include "stages/kernels/forward_backend.h"
#include "stages/model/loaded_model.h"
#include "test.h"
#include "kernels/test_decode_batchings.h"
#include "kernels/test_shared_prefix_cases.h"
#include "kernels/test_windows.h"

/* Whether want's tokens and logits are, at every step, the argmax of the whole sequence so far
 * through score_batch and the logits of a fresh prefill of it. */
static bool against_full_forward(const em_forward_backend *be, void *f, const window *prompts,
                                 const decoded *want, int V) {
    bool ok = true;
    float *logits = malloc((size_t)V * sizeof *logits);
    for (int s = 0; s < SEQUENCES; s++) {
        for (int step = 0; step < STEPS; step++) {
            int32_t seq[TEST_WINDOW_MAX_T + STEPS + 1];
            int T = sequence_so_far(prompts, want, s, step, seq);
            double nll;
            int32_t argmax, next;
            em_batch_window whole = {seq, NULL, T, T - 1, &nll, &argmax};
            decode_must(be->score_batch(f, &whole, 1), "score_batch");
            void *d;
            const int32_t *ids = seq;
            int slot = 0;
            decode_must(be->decode_new(f, 1, T, &d), "decode_new");
            decode_must(be->prefill(d, &slot, &ids, &T, 1, &next, logits), "prefill");
            be->decode_free(d);
            bool here = argmax == want->tokens[s][step] && next == argmax &&
                        memcmp(logits_at(want, s, step, V), logits, (size_t)V * 4) == 0;
            if (!here)
                printf("FAILED: sequence %d step %d: decoded %d, full forward %d, prefill %d\n", s,
                       step, want->tokens[s][step], argmax, next);
            ok = ok && here;
        }
    }
    free(logits);
    return ok;
}

/* The cuda tokens against the cpu's: agreeing wherever the cpu's top two logits are more than
 * 1e-3 apart, and the largest logit difference in *worst. Returns the disagreements. */
static int against_cpu(const decoded *cuda, const decoded *cpu, int V, double *worst) {
    int differ = 0;
    *worst = 0;
    for (int s = 0; s < SEQUENCES; s++) {
        for (int step = 0; step < STEPS; step++) {
            const float *a = logits_at(cuda, s, step, V), *b = logits_at(cpu, s, step, V);
            float top = -INFINITY, second = -INFINITY;
            for (int v = 0; v < V; v++) {
                double d = fabs((double)a[v] - b[v]);
                if (d > *worst || d != d) *worst = d;
                if (b[v] > top) {
                    second = top;
                    top = b[v];
                } else if (b[v] > second) {
                    second = b[v];
                }
            }
            if (cuda->tokens[s][step] != cpu->tokens[s][step]) {
                if (top - second > 1e-3f) differ++;
                break; /* the sequences part here: later steps continue different texts */
            }
        }
    }
    return differ;
}

/* Shared prefixes (score_shared_prefixes, the same device cache as decoding): every case of
 * test_shared_prefix_cases.h's continuations bit-identical to its whole window through
 * score_batch alone, with every case's prefix in one call, in both orders. Returns whether all
 * were. */
static bool check_shared_prefixes(const em_forward_backend *be, void *f, int V) {
    static window ws[CASES][MOST_CONTINUATIONS];
    static scores alone[CASES][MOST_CONTINUATIONS], got[CASES][MOST_CONTINUATIONS];
    static em_batch_window batches[CASES][MOST_CONTINUATIONS];
    const int in_order[MOST_CONTINUATIONS] = {0, 1, 2, 3};
    for (int c = 0; c < CASES; c++) {
        make_windows(&cases[c], (uint32_t)(c + 1), V, ws[c]);
        for (int i = 0; i < cases[c].count; i++) {
            const window *w = &ws[c][i];
            decode_must(em_forward_score_window(be, f, w->ids, w->ids + 1, w->T, w->score_from,
                                                alone[c][i].nll, alone[c][i].argmax),
                        "whole window");
        }
    }
    bool all = true;
    for (int backwards = 0; backwards <= 1; backwards++) {
        em_shared_prefix prefixes[CASES];
        memset(got, 0xff, sizeof got);
        for (int k = 0; k < CASES; k++) {
            int c = backwards ? CASES - 1 - k : k;
            prefixes[k] = shared(&cases[c], ws[c], in_order, cases[c].count, got[c], batches[c]);
        }
        decode_must(be->score_shared_prefixes(f, prefixes, CASES), "score_shared_prefixes");
        for (int c = 0; c < CASES; c++) all = all && same(&cases[c], alone[c], got[c]);
    }
    printf("%s: %d shared prefixes in one call, both orders: continuations %s their whole "
           "windows\n",
           all ? "ok" : "FAILED", CASES, all ? "bit-identical to" : "DIFFERENT from");
    return all;
}

static void check_refusals(const em_forward_backend *be, void *f) {
    void *d;
    decode_must(be->decode_new(f, 2, 3, &d), "decode_new");
    int32_t next[2], tokens[2] = {1, 1};
    int slot = 0, both[2] = {1, 1};
    em_status err = be->step(d, &slot, tokens, 1, next, NULL);
    CHECK(err && err->exit_code == EM_EXIT_BAD_INPUT &&
          strstr(err->message, "(slot 0) holds 0 positions"));
    em_error_free(err);
    err = be->step(d, both, tokens, 2, next, NULL);
    CHECK(err && err->exit_code == EM_EXIT_BAD_INPUT &&
          strstr(err->message, "sequences 0 and 1 of the batch name the same slot 1"));
    em_error_free(err);
    be->decode_free(d);
}

int main(int argc, char **argv) {
    if (argc != 3 || (strcmp(argv[2], "fp32") != 0 && strcmp(argv[2], "bf16") != 0)) {
        fprintf(stderr, "usage: cuda_decode_check MODEL fp32|bf16\n");
        return 2;
    }
    em_status err = em_cuda_available();
    if (err) {
        printf("skipped: %s\n", err->message);
        em_error_free(err);
        return 77;
    }
    bool fp32 = strcmp(argv[2], "fp32") == 0;
    em_model *m = NULL;
    decode_must(em_model_load(argv[1], &m), argv[1]);
    int V = (int)m->config.n_vocab;
    static window prompts[SEQUENCES];
    make_prompts(prompts, V);
    em_forward_groups alone = {.tp = {.rank = 0, .size = 1}, .cp = {.rank = 0, .size = 1}};
    em_forward_options options = {0};
    const em_forward_backend *cuda = em_forward_backend_find("cuda");
    const em_forward_backend *cpu = em_forward_backend_find("cpu");
    void *f, *c;
    decode_must(cuda->create(m, &alone, 4, &options, &f), "cuda create");
    size_t bytes = (size_t)SEQUENCES * STEPS * V * sizeof(float);
    decoded first = {.logits = malloc(bytes)}, got = {.logits = malloc(bytes)};
    decoded on_cpu = {.logits = malloc(bytes)};
    size_t bytes_cache = decode_batching(cuda, f, prompts, 0, V, &first);
    printf("cuda: the cache of %d sequences of %d positions holds %zu bytes\n", SEQUENCES,
           DECODE_POSITIONS, bytes_cache);
    for (int b = 1; b < BATCHINGS; b++) {
        decode_batching(cuda, f, prompts, b, V, &got);
        bool same_bits = decoded_same(&first, &got, V);
        printf("%s: batching %d %s batching 0\n", same_bits ? "ok" : "FAILED", b,
               same_bits ? "matches" : "differs from");
        CHECK(same_bits);
    }
    bool full = against_full_forward(cuda, f, prompts, &first, V);
    printf("%s: every step equals the full forward's argmax and a fresh prefill's logits\n",
           full ? "ok" : "FAILED");
    CHECK(full);
    CHECK(check_shared_prefixes(cuda, f, V));
    decode_must(cpu->create(m, &alone, 2, &options, &c), "cpu create");
    decode_batching(cpu, c, prompts, 0, V, &on_cpu);
    double worst;
    int differ = against_cpu(&first, &on_cpu, V, &worst);
    printf("%s (%s): cuda against cpu: %d tokens differ without a near-tie, logits within %.2e\n",
           argv[1], argv[2], differ, worst);
    if (fp32) {
        CHECK_INT_EQ(differ, 0);
        CHECK(worst <= 1e-3);
    }
    check_refusals(cuda, f);
    cpu->free(c);
    cuda->free(f);
    free(first.logits);
    free(got.logits);
    free(on_cpu.logits);
    em_model_free(m);
    return test_finish();
}
