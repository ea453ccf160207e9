/* Greedy decoding with a key-value cache on the CPU forward (stages/kernels/cpu/decode.h): 8
 * sequences with prompts of 1 to 130 ids (inside the first attention query block, on its edge,
 * across blocks), each decoded for STEPS tokens (its own argmax fed back), in 5 batchings (all
 * together, each alone, reversed, groups of three, other groups; the groups' steps interleaved in
 * one cache), on 1 and 2 threads. Every batching and thread count must give each sequence the
 * same tokens and the same logits bit for bit, and those must be the full forward's: at each
 * step the argmax of the whole sequence so far through em_llama_forward_window (its last
 * position) and the logits of a fresh prefill of the whole sequence (no cache). Also: a step on
 * a slot never filled, a full slot, a repeated slot and a token outside the vocabulary are errors
 * (exit status 2) naming them, and cp > 1 is refused. Uses the model given as argv[1], else the
 * shared stories260K.gguf, in the precision argv[2] names (ggml; else exact). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/kernels/cpu/decode.h"
#include "stages/kernels/cpu/llama_forward.h"
#include "stages/model/loaded_model.h"
#include "test.h"
#include "kernels/test_forward_model.h"
#include "kernels/test_decode_batchings.h"
#include "kernels/test_windows.h"

static void check_ok(em_status err) {
    CHECK(err == NULL);
    if (err) {
        fprintf(stderr, "%s\n", err->message);
        em_error_free(err);
    }
}

/* Compares want (decoded) with the full forward of each sequence so far at each step; returns
 * whether every argmax and logit matched, and the largest logit difference in *worst. */
static bool against_full_forward(const em_model *m, em_precision precision, const window *prompts,
                                 const decoded *want, int V, double *worst) {
    em_llama_forward *f = test_forward_new(m, 1, precision);
    bool ok = true;
    *worst = 0;
    float *logits = malloc((size_t)V * sizeof *logits);
    for (int s = 0; s < SEQUENCES; s++) {
        for (int step = 0; step < STEPS; step++) {
            int32_t seq[TEST_WINDOW_MAX_T + STEPS + 1];
            int T = sequence_so_far(prompts, want, s, step, seq);
            static scores full;
            check_ok(em_llama_forward_window(f, seq, seq + 1, T, 0, full.nll, full.argmax));
            ok = ok && full.argmax[T - 1] == want->tokens[s][step];
            /* the logits of the whole sequence without a cache */
            em_cpu_decode *d;
            int32_t next;
            const int32_t *ids = seq;
            int slot = 0;
            check_ok(em_cpu_decode_new(f, 1, T, &d));
            check_ok(em_cpu_decode_prefill(d, &slot, &ids, &T, 1, &next, logits));
            em_cpu_decode_free(d);
            ok = ok && next == want->tokens[s][step];
            const float *got = logits_at(want, s, step, V);
            for (int v = 0; v < V; v++) {
                double diff = (double)got[v] - (double)logits[v];
                if (diff < 0) diff = -diff;
                if (diff > *worst) *worst = diff;
            }
            ok = ok && memcmp(got, logits, (size_t)V * sizeof *logits) == 0;
        }
    }
    free(logits);
    em_llama_forward_free(f);
    return ok;
}

/* err is an error of exit status code and exactly the message want (freed). */
static void check_error(em_status err, int code, const char *want) {
    CHECK(err != NULL);
    if (!err) return;
    CHECK_INT_EQ(err->exit_code, code);
    CHECK_STR_EQ(err->message, want);
    em_error_free(err);
}

/* The errors a cache gives for steps it cannot take. */
static void check_refusals(const em_model *m) {
    em_llama_forward *f = test_forward_new(m, 1, EM_PRECISION_EXACT);
    em_cpu_decode *d;
    check_ok(em_cpu_decode_new(f, 2, 3, &d));
    int32_t next[2], prompt[3] = {1, 2, 3}, tokens[2] = {1, 1};
    const int32_t *ids = prompt;
    int slot = 0, both[2] = {1, 1}, three = 3;
    em_status err = em_cpu_decode_step(d, &slot, tokens, 1, next, NULL);
    check_error(err, EM_EXIT_BAD_INPUT,
                "decoding step: sequence 0 of the batch (slot 0) holds 0 positions (1 to 3 - 1 "
                "can take one more)");
    check_ok(em_cpu_decode_prefill(d, &slot, &ids, &three, 1, next, NULL));
    err = em_cpu_decode_step(d, &slot, tokens, 1, next, NULL);
    check_error(err, EM_EXIT_BAD_INPUT,
                "decoding step: sequence 0 of the batch (slot 0) holds 3 positions (1 to 3 - 1 "
                "can take one more)");
    err = em_cpu_decode_step(d, both, tokens, 2, next, NULL);
    check_error(err, EM_EXIT_BAD_INPUT,
                "decoding step: sequences 0 and 1 of the batch name the same slot 1");
    int32_t bad = m->config.n_vocab, one = 1;
    const int32_t *bad_ids = &bad;
    err = em_cpu_decode_prefill(d, &slot, &bad_ids, &one, 1, next, NULL);
    char want[160];
    snprintf(want, sizeof want,
             "prefill: input token id %d at position 0 is outside the vocabulary (%d)", bad,
             m->config.n_vocab);
    check_error(err, EM_EXIT_BAD_INPUT, want);
    em_cpu_decode_free(d);
    em_llama_forward_free(f);
    em_forward_groups split = {.tp = {.rank = 0, .size = 1}, .cp = {.rank = 0, .size = 2}};
    check_ok(em_llama_forward_new_split(m, &split, 1, &f));
    check_error(em_cpu_decode_new(f, 1, 8, &d), EM_EXIT_BAD_INPUT,
                "a forward with cp = 2 does not decode (decoding needs cp = 1)");
    em_llama_forward_free(f);
}

int main(int argc, char **argv) {
    em_model *m = test_forward_model(argc, argv);
    int V = m->config.n_vocab;
    static window prompts[SEQUENCES];
    make_prompts(prompts, V);
    decoded first = {.logits = malloc((size_t)SEQUENCES * STEPS * V * sizeof(float))};
    decoded got = {.logits = malloc((size_t)SEQUENCES * STEPS * V * sizeof(float))};
    em_precision precision = test_forward_precision(argc, argv);
    em_llama_forward *one = test_forward_new(m, 1, precision);
    const em_forward_backend *cpu = em_forward_backend_find("cpu");
    decode_batching(cpu, one, prompts, 0, V, &first);
    em_llama_forward_free(one);
    double worst;
    bool full = against_full_forward(m, precision, prompts, &first, V, &worst);
    CHECK(full);
    printf("8 sequences, %d steps each: tokens and logits %s (largest logit difference %g)\n",
           STEPS, full ? "bit-identical to the full forward" : "DIFFERENT from the full forward",
           worst);
    for (int threads = 1; threads <= 2; threads++) {
        em_llama_forward *f = test_forward_new(m, threads, precision);
        for (int b = 0; b < BATCHINGS; b++) {
            memset(got.logits, 0xff, (size_t)SEQUENCES * STEPS * V * sizeof(float));
            decode_batching(cpu, f, prompts, b, V, &got);
            bool ok = decoded_same(&first, &got, V);
            CHECK(ok);
            printf("%d thread%s, batching %d: %s\n", threads, threads > 1 ? "s" : "", b,
                   ok ? "bit-identical to alone" : "DIFFERENT");
        }
        em_llama_forward_free(f);
    }
    check_refusals(m);
    free(first.logits);
    free(got.logits);
    em_model_free(m);
    return test_finish();
}
