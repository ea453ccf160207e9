/* The cuda forward against the cpu forward on one model, through the forward-backend seam:
 *   cuda_forward_check MODEL fp32|bf16 [OTHER_MODEL] [--quantize SCHEME] [--f32-weights-bf16]
 *                      [--kept-quantized]
 * Scores four windows of pseudo-random ids (lengths 200, 128, 64 and 17, some scored from the
 * middle) on both backends and checks, with the tolerance of the mode (fp32: the model's matrices
 * are F32 and the GPU computes in FP32; bf16: they are rounded to BF16 on the GPU):
 *   per-token |nll_cuda - nll_cpu| <= 1e-3 (fp32) or 0.25 (bf16: a trained model's logits of
 *   20-30 move by a few hundredths with BF16 activations);
 *   perplexity over the windows within 1e-4 relative (fp32) or 1e-2 (bf16);
 *   fp32: the argmax the same on >= 99% of positions (bf16: reported only, as random models
 *   have near-ties that BF16 rounding flips);
 *   each window's results bit-identical whether run first or last, after longer or shorter
 *   windows, in a second pass, and in batches (score_batch) of every composition tried: all four
 *   windows in one batch, in the reverse order, in two batches of two, and those again (the
 *   results depend on the window alone);
 *   score_pair of two cuda forwards of the same model gives KL exactly 0, and with OTHER_MODEL
 *   the KL of the cuda pair within the tolerance of the cpu pair's.
 * The cuda forward holds its weights as the options say (device_weights.cuh):
 *   --quantize SCHEME  the models' block matrices quantized first, in memory, with a scheme of
 *                      the quantize table (int8_weight_only, int4_weight_only_g128: the torchao
 *                      types, which no GGUF file holds);
 *   --f32-weights-bf16 f32_weights bfloat16: an F32 model's matrices rounded to BF16 (use bf16);
 *   --kept-quantized   quantized_weights quantized: the quantized matrices kept in their blocks
 *                      and dequantized before each product; then also each window's nll and
 *                      argmax bit-identical to those of a forward with quantized_weights
 *                      bfloat16 (resident BF16 copies), fewer weight bytes, and the memory beyond
 *                      that forward's exactly the BF16 scratch of the largest layer matrix.
 * Prints one summary line per model. Exit 77 (skipped) when no CUDA device is usable;
 * `cuda_forward_check --probe` only says whether one is (0, or 77 with the reason). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/kernels/cuda/cuda_forward.h"
#include "stages/kernels/forward_backend.h"
#include "stages/model/loaded_model.h"
#include "stages/quant/quantize_model.h"
#include "test.h"
#include "kernels/test_windows.h"

#define WINDOWS 4

static void *must_create(const em_forward_backend *be, const em_model *m,
                         const em_forward_options *options) {
    em_forward_groups alone = {.tp = {.rank = 0, .size = 1}, .cp = {.rank = 0, .size = 1}};
    void *f = NULL;
    em_status err = be->create(m, &alone, 4, options, &f);
    if (err) {
        fprintf(stderr, "%s: create: %s\n", be->name, err->message);
        exit(1);
    }
    return f;
}

/* Runs the windows in the order given by `order`, one at a time, into out[window]. */
static void run(const em_forward_backend *be, void *f, const window *ws, const int *order,
                scores *out) {
    for (int i = 0; i < WINDOWS; i++) {
        const window *w = &ws[order[i]];
        em_status err = em_forward_score_window(be, f, w->ids, w->ids + 1, w->T, w->score_from,
                                                out[order[i]].nll, out[order[i]].argmax);
        if (err) {
            fprintf(stderr, "%s: window %d: %s\n", be->name, order[i], err->message);
            exit(1);
        }
    }
}

/* Runs windows order[0 .. count-1] as one batch into out[window]. */
static void run_batch(const em_forward_backend *be, void *f, const window *ws, const int *order,
                      int count, scores *out) {
    em_batch_window batch[WINDOWS];
    for (int i = 0; i < count; i++) {
        const window *w = &ws[order[i]];
        batch[i] = (em_batch_window){w->ids,        w->ids + 1,        w->T,
                                     w->score_from, out[order[i]].nll, out[order[i]].argmax};
    }
    em_status err = be->score_batch(f, batch, count);
    if (err) {
        fprintf(stderr, "%s: batch of %d: %s\n", be->name, count, err->message);
        exit(1);
    }
}

/* Whether every window's results in a are bit-identical to those in b. */
static bool same_scores(const window *ws, const scores *a, const scores *b) {
    for (int i = 0; i < WINDOWS; i++) {
        int n = ws[i].T - ws[i].score_from;
        if (memcmp(a[i].nll, b[i].nll, (size_t)n * sizeof(double)) != 0 ||
            memcmp(a[i].argmax, b[i].argmax, (size_t)n * sizeof(int32_t)) != 0)
            return false;
    }
    return true;
}

/* The model at path, its block matrices quantized with `scheme` when it is not NULL. */
static em_model *must_load(const char *path, const char *scheme) {
    em_model *m = NULL, *q = NULL;
    em_status err = em_model_load(path, &m);
    if (!err && scheme) {
        em_quantize_options opt = {.plan = {.scheme = scheme}, .threads = 4};
        em_quantize_summary summary;
        err = em_quantize_model(m, &opt, &q, &summary);
        em_model_free(m);
        m = q;
    }
    if (err) {
        fprintf(stderr, "%s\n", err->message);
        exit(1);
    }
    return m;
}

/* Values of the largest matrix of m's layers. */
static int64_t largest_layer_matrix(const em_model *m) {
    int64_t most = 0;
    for (int i = 0; i < m->config.n_layers; i++) {
        const em_layer_weights *w = &m->layers[i];
        const em_tensor *mats[] = {w->wq, w->wk, w->wv, w->wo, w->w_gate, w->w_up, w->w_down};
        for (int j = 0; j < 7; j++)
            if (em_tensor_numel(mats[j]) > most) most = em_tensor_numel(mats[j]);
    }
    return most;
}

/* KL per position of the pair (ref, cand) on backend be over window w. */
static void pair(const em_forward_backend *be, void *ref, void *cand, const window *w, double *kl) {
    scores a, b;
    em_status err = be->score_pair(ref, cand, w->ids, w->ids + 1, w->T, w->score_from, a.nll,
                                   a.argmax, b.nll, b.argmax, kl);
    if (err) {
        fprintf(stderr, "%s: score_pair: %s\n", be->name, err->message);
        exit(1);
    }
}

int main(int argc, char **argv) {
    em_status why = em_cuda_available();
    if (why) {
        printf("skipped: %s\n", why->message);
        em_error_free(why);
        return 77;
    }
    if (argc == 2 && strcmp(argv[1], "--probe") == 0) return 0;
    const char *other_path = NULL, *scheme = NULL;
    em_forward_options options = {0};
    bool usage = argc < 3 || (strcmp(argv[2], "fp32") != 0 && strcmp(argv[2], "bf16") != 0);
    for (int i = 3; i < argc && !usage; i++) {
        if (strcmp(argv[i], "--quantize") == 0 && i + 1 < argc)
            scheme = argv[++i];
        else if (strcmp(argv[i], "--f32-weights-bf16") == 0)
            options.f32_weights = EM_F32_WEIGHTS_BFLOAT16;
        else if (strcmp(argv[i], "--kept-quantized") == 0)
            options.quantized_weights = EM_QUANTIZED_WEIGHTS_QUANTIZED;
        else if (argv[i][0] != '-' && !other_path)
            other_path = argv[i];
        else
            usage = true;
    }
    if (usage) {
        fprintf(stderr,
                "usage: %s MODEL fp32|bf16 [OTHER_MODEL] [--quantize SCHEME] "
                "[--f32-weights-bf16] [--kept-quantized]\n",
                argv[0]);
        return 2;
    }
    bool fp32 = strcmp(argv[2], "fp32") == 0;
    bool kept = options.quantized_weights == EM_QUANTIZED_WEIGHTS_QUANTIZED;
    double tol_nll = fp32 ? 1e-3 : 0.25, tol_ppl = fp32 ? 1e-4 : 1e-2;
    const em_forward_backend *cpu = em_forward_backend_find("cpu");
    const em_forward_backend *cuda = em_forward_backend_find("cuda");
    em_model *m = must_load(argv[1], scheme);
    int V = m->config.n_vocab;
    window ws[WINDOWS];
    make_window(&ws[0], 200, 0, 11, V);
    make_window(&ws[1], 128, 64, 12, V);
    make_window(&ws[2], 64, 63, 13, V);
    make_window(&ws[3], 17, 0, 14, V);
    const int forward[WINDOWS] = {0, 1, 2, 3}, backward[WINDOWS] = {3, 2, 1, 0};
    static scores ref[WINDOWS], got[WINDOWS], again[WINDOWS], reordered[WINDOWS];
    static scores batched[WINDOWS], batched_reverse[WINDOWS], pairs[WINDOWS], pairs_again[WINDOWS];
    const int pair_a[2] = {2, 0}, pair_b[2] = {3, 1};

    const em_forward_options defaults = {0};
    void *fc = must_create(cpu, m, &defaults), *fg = must_create(cuda, m, &options);
    run(cpu, fc, ws, forward, ref);
    run(cuda, fg, ws, forward, got);
    run(cuda, fg, ws, backward, reordered);
    run(cuda, fg, ws, forward, again);
    run_batch(cuda, fg, ws, forward, WINDOWS, batched);
    run_batch(cuda, fg, ws, backward, WINDOWS, batched_reverse);
    run_batch(cuda, fg, ws, pair_a, 2, pairs);
    run_batch(cuda, fg, ws, pair_b, 2, pairs);
    run_batch(cuda, fg, ws, pair_b, 2, pairs_again);
    run_batch(cuda, fg, ws, pair_a, 2, pairs_again);
    bool batches_identical = same_scores(ws, got, batched) &&
                             same_scores(ws, got, batched_reverse) && same_scores(ws, got, pairs) &&
                             same_scores(ws, got, pairs_again);
    CHECK(batches_identical);

    /* kept quantized: the same numbers as with resident BF16 copies, in fewer weight bytes */
    bool same_as_resident = true;
    if (kept) {
        em_forward_options resident_options = options;
        resident_options.quantized_weights = EM_QUANTIZED_WEIGHTS_BFLOAT16;
        void *fr = must_create(cuda, m, &resident_options);
        static scores resident[WINDOWS], resident_batched[WINDOWS];
        run(cuda, fr, ws, forward, resident);
        /* the largest batch fg ran, so both hold activations of the same size */
        run_batch(cuda, fr, ws, forward, WINDOWS, resident_batched);
        for (int i = 0; i < WINDOWS; i++) {
            size_t n = (size_t)(ws[i].T - ws[i].score_from);
            same_as_resident &= memcmp(got[i].nll, resident[i].nll, n * sizeof(double)) == 0 &&
                                memcmp(got[i].argmax, resident[i].argmax, n * sizeof(int32_t)) == 0;
        }
        CHECK(same_as_resident);
        CHECK(cuda->weight_bytes(fg) < cuda->weight_bytes(fr));
        CHECK(cuda->memory(fg) - cuda->memory(fr) == (size_t)largest_layer_matrix(m) * 2);
        cuda->free(fr);
    }

    double max_diff = 0.0, sum_cpu = 0.0, sum_cuda = 0.0;
    long tokens = 0, agree = 0;
    for (int i = 0; i < WINDOWS; i++) {
        int n = ws[i].T - ws[i].score_from;
        CHECK(memcmp(got[i].nll, again[i].nll, (size_t)n * sizeof(double)) == 0);
        CHECK(memcmp(got[i].nll, reordered[i].nll, (size_t)n * sizeof(double)) == 0);
        CHECK(memcmp(got[i].argmax, reordered[i].argmax, (size_t)n * sizeof(int32_t)) == 0);
        for (int t = 0; t < n; t++) {
            double d = fabs(got[i].nll[t] - ref[i].nll[t]);
            if (!(d <= max_diff)) max_diff = d; /* a NaN sticks */
            sum_cpu += ref[i].nll[t];
            sum_cuda += got[i].nll[t];
            agree += got[i].argmax[t] == ref[i].argmax[t];
            tokens++;
        }
    }
    double ppl_cpu = exp(sum_cpu / tokens), ppl_cuda = exp(sum_cuda / tokens);
    double rel = fabs(ppl_cuda - ppl_cpu) / ppl_cpu;
    CHECK(max_diff <= tol_nll);
    CHECK(rel <= tol_ppl);
    if (fp32) CHECK(agree >= tokens * 99 / 100);

    /* paired scoring: two cuda forwards of one model agree exactly */
    void *fg2 = must_create(cuda, m, &options);
    double kl[TEST_WINDOW_MAX_T], kl_cpu[TEST_WINDOW_MAX_T], max_self = 0.0, max_kl_diff = 0.0;
    pair(cuda, fg, fg2, &ws[0], kl);
    for (int t = 0; t < ws[0].T - ws[0].score_from; t++)
        if (!(fabs(kl[t]) <= max_self)) max_self = fabs(kl[t]);
    CHECK(max_self == 0.0);
    cuda->free(fg2);
    if (other_path) {
        em_model *other = must_load(other_path, scheme);
        void *oc = must_create(cpu, other, &defaults), *og = must_create(cuda, other, &options);
        pair(cpu, fc, oc, &ws[1], kl_cpu);
        pair(cuda, fg, og, &ws[1], kl);
        for (int t = 0; t < ws[1].T - ws[1].score_from; t++) {
            double d = fabs(kl[t] - kl_cpu[t]);
            if (!(d <= max_kl_diff)) max_kl_diff = d;
        }
        CHECK(max_kl_diff <= tol_nll);
        cpu->free(oc);
        cuda->free(og);
        em_model_free(other);
    }
    printf("%s (%s): %ld tokens, max |dnll| %.3g (tol %.0e), ppl cpu %.9g cuda %.9g rel %.3g "
           "(tol %.0e), argmax agree %.2f%%, bit-identical across orders and runs: %s, across "
           "batch compositions: %s, self KL %.3g, max |dKL| %.3g, cuda weights %.1f MiB "
           "activations %.1f MiB%s%s%s%s\n",
           argv[1], argv[2], tokens, max_diff, tol_nll, ppl_cpu, ppl_cuda, rel, tol_ppl,
           100.0 * agree / tokens, test_failures ? "see failures" : "yes",
           batches_identical ? "yes" : "NO", max_self, max_kl_diff,
           cuda->weight_bytes(fg) / 1048576.0, cuda->memory(fg) / 1048576.0,
           scheme ? ", quantized in memory to " : "", scheme ? scheme : "",
           options.f32_weights == EM_F32_WEIGHTS_BFLOAT16 ? ", f32_weights bfloat16" : "",
           !kept              ? ""
           : same_as_resident ? ", kept quantized: bit-identical to resident BF16"
                              : ", kept quantized: DIFFERS from resident BF16");
    cpu->free(fc);
    cuda->free(fg);
    em_model_free(m);
    return test_finish();
}
