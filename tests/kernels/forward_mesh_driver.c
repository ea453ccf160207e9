/* Test driver for the forward over a mesh: under mpirun (or alone) it builds a dp x tp x cp mesh of
 * the world, makes WINDOWS windows of T random tokens (seeded), gives each dp rank a contiguous
 * share, runs them through the forward backend BACKEND (cpu by default; cuda in the GPU tests)
 * with the mesh's tp and cp groups (or, with BACKEND = reference and one rank, through the plain
 * C reference forward) and has the tp rank 0 of each dp rank write "window position nll argmax"
 * lines (nll with 17 significant digits) to OUT.dp<dp rank>; every rank writes its shard's weight
 * bytes to OUT.weights.<world rank>. With BACKEND-batch (cpu-batch, cuda-batch) the dp rank's
 * windows go to the backend as one batch (score_batch); with BACKEND-prefix (cpu-prefix) as
 * continuations of their shared prefixes, every pair's prefix in one call (score_shared_prefixes);
 * with BACKEND-decode (cpu-decode)
 * they are decoded together with a key-value cache (decode_new, prefill, step): each window's
 * first SCORE_FROM + 1 ids prefilled, then its own next ids fed one step at a time, each
 * position's argmax the decoder's and its nll computed here from the decoder's logits (in double,
 * so close to the head's but not its bits). The windows come in pairs (2w, 2w + 1) whose first
 * SCORE_FROM ids are the same, the pair's shared prefix, in every mode.
 * Usage: forward_mesh_driver MODEL TP CP T SCORE_FROM WINDOWS SEED OUT
 *        [BACKEND[-batch|-prefix|-decode]|reference]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/comm/bootstrap.h"
#include "runner/comm/mesh_groups.h"
#include "stages/kernels/forward_backend.h"
#include "stages/kernels/reference/llama_reference.h"
#include "stages/kinds/support/forward_group.h"
#include "stages/model/loaded_model.h"

static int fail(em_status err) {
    fprintf(stderr, "error: %s\n", err->message);
    int code = err->exit_code;
    em_error_free(err);
    return code;
}

/* Windows first .. end-1 of ids (T + 1 each) decoded together (see above) into nll and argmax (n
 * = T - score_from each). */
static em_status decode_windows(const em_forward_backend *be, void *f, const int32_t *ids, int T,
                                int score_from, int first, int end, int64_t vocab, double *nll,
                                int32_t *argmax) {
    em_status err = em_forward_decoding(be);
    if (err) return err;
    int count = end - first, n = T - score_from;
    int *slots = malloc((size_t)count * sizeof *slots),
        *lengths = malloc((size_t)count * sizeof *lengths);
    const int32_t **prompts = malloc((size_t)count * sizeof *prompts);
    int32_t *next = malloc((size_t)count * sizeof *next),
            *tokens = malloc((size_t)count * sizeof *tokens);
    float *logits = malloc((size_t)count * (size_t)vocab * sizeof *logits);
    for (int i = 0; i < count; i++) {
        slots[i] = i;
        lengths[i] = score_from + 1;
        prompts[i] = ids + (size_t)(first + i) * (T + 1);
    }
    void *d = NULL;
    err = be->decode_new(f, count, T, &d);
    if (!err) err = be->prefill(d, slots, prompts, lengths, count, next, logits);
    for (int k = 0; k < n && !err; k++) {
        for (int i = 0; i < count; i++) {
            const float *l = logits + (size_t)i * (size_t)vocab;
            int32_t target = prompts[i][score_from + k + 1];
            double most = l[0], sum = 0;
            for (int64_t v = 1; v < vocab; v++) most = l[v] > most ? l[v] : most;
            for (int64_t v = 0; v < vocab; v++) sum += exp((double)l[v] - most);
            size_t at = (size_t)(first + i) * (size_t)n + (size_t)k;
            nll[at] = most + log(sum) - l[target];
            argmax[at] = next[i];
            tokens[i] = target;
        }
        if (k + 1 < n) err = be->step(d, slots, tokens, count, next, logits);
    }
    if (d) be->decode_free(d);
    free(slots);
    free(lengths);
    free(prompts);
    free(next);
    free(tokens);
    free(logits);
    return err;
}

int main(int argc, char **argv) {
    if (argc < 9) {
        fprintf(stderr,
                "usage: %s MODEL TP CP T SCORE_FROM WINDOWS SEED OUT "
                "[BACKEND[-batch|-prefix|-decode]|reference]\n",
                argv[0]);
        return 2;
    }
    int tp = atoi(argv[2]), cp = atoi(argv[3]), T = atoi(argv[4]), score_from = atoi(argv[5]);
    int windows = atoi(argv[6]);
    unsigned seed = (unsigned)atoi(argv[7]);
    const char *out = argv[8];
    const char *arg = argc > 9 ? argv[9] : "cpu";
    int reference = strcmp(arg, "reference") == 0;
    size_t len = strlen(arg);
    int batched = len > 6 && strcmp(arg + len - 6, "-batch") == 0;
    int prefixed = len > 7 && strcmp(arg + len - 7, "-prefix") == 0;
    int decoding = len > 7 && strcmp(arg + len - 7, "-decode") == 0;
    char backend[64];
    snprintf(backend, sizeof backend, "%.*s",
             (int)(batched                ? len - 6
                   : prefixed || decoding ? len - 7
                                          : len),
             arg);
    const em_forward_backend *be = em_forward_backend_find(reference ? "cpu" : backend);
    if (!be) {
        fprintf(stderr, "error: no forward backend '%s' (%s)\n", backend,
                em_forward_backend_names());
        return 2;
    }
    em_bootstrap boot;
    em_status err = em_bootstrap_init(60, &boot);
    if (err) return fail(err);
    em_comm *world;
    em_mesh *mesh = NULL;
    err = em_comm_split(boot.world, 0, boot.rank, &world);
    if (!err)
        err = em_mesh_build_nodes(world, boot.node_id, boot.node_count, boot.size / (tp * cp), tp,
                                  cp, &mesh);
    em_model *model = NULL;
    if (!err) err = em_model_load(argv[1], &model);
    void *f = NULL;
    em_forward_groups groups;
    em_forward_link tp_link, cp_link;
    if (!err) {
        tp_link = (em_forward_link){mesh->tp_group, 0};
        cp_link = (em_forward_link){mesh->cp_group, 0};
        groups.tp = em_forward_group_of(&tp_link);
        groups.cp = em_forward_group_of(&cp_link);
        err = be->create(model, &groups, 1, &(em_forward_options){0}, &f);
    }
    int n = T - score_from;
    /* every window's ids (T + 1 each), nll and argmax (n each) */
    int32_t *ids = malloc((size_t)windows * (size_t)(T + 1) * sizeof *ids);
    double *nll = malloc((size_t)windows * (size_t)n * sizeof *nll);
    int32_t *argmax = malloc((size_t)windows * (size_t)n * sizeof *argmax);
    em_batch_window *batch = malloc((size_t)windows * sizeof *batch);
    FILE *file = NULL;
    if (!err && mesh->tp_rank == 0 && mesh->cp_rank == 0) {
        char path[4096];
        snprintf(path, sizeof path, "%s.dp%d", out, mesh->dp_rank);
        file = fopen(path, "w");
    }
    int first = err ? 0 : windows * mesh->dp_rank / mesh->dp;
    int end = err ? 0 : windows * (mesh->dp_rank + 1) / mesh->dp;
    for (int w = 0; w < windows && !err; w++) {
        unsigned s = seed * 7919u + (unsigned)w;
        int32_t *wi = ids + (size_t)w * (T + 1);
        for (int t = 0; t <= T; t++) {
            s = s * 1664525u + 1013904223u;
            wi[t] = w % 2 && t < score_from ? wi[t - (T + 1)]
                                            : (int32_t)((s >> 8) % (unsigned)model->config.n_vocab);
        }
        double *wn = nll + (size_t)w * n;
        int32_t *wa = argmax + (size_t)w * n;
        batch[w] =
            prefixed
                ? (em_batch_window){wi + score_from, wi + score_from + 1, T - score_from, 0, wn, wa}
                : (em_batch_window){wi, wi + 1, T, score_from, wn, wa};
        if (w < first || w >= end || batched || prefixed || decoding) continue;
        err = reference ? em_llama_reference_window(model, wi, wi + 1, T, score_from, wn, wa)
                        : em_forward_score_window(be, f, wi, wi + 1, T, score_from, wn, wa);
    }
    if (!err && batched && end > first) err = be->score_batch(f, batch + first, end - first);
    if (!err && prefixed && end > first) { /* each pair of the rank's share: one prefix */
        em_shared_prefix *prefixes = calloc((size_t)(end - first), sizeof *prefixes);
        int count = 0;
        for (int w = first; w < end; w++) {
            if (count == 0 || w % 2 == 0)
                prefixes[count++] =
                    (em_shared_prefix){ids + (size_t)w * (T + 1), score_from, batch + w, 0};
            prefixes[count - 1].count++;
        }
        err = be->score_shared_prefixes(f, prefixes, count);
        free(prefixes);
    }
    if (!err && decoding && end > first)
        err = decode_windows(be, f, ids, T, score_from, first, end, model->config.n_vocab, nll,
                             argmax);
    for (int w = first; w < end && !err && file; w++)
        for (int i = 0; i < n; i++)
            fprintf(file, "%d %d %.17g %d\n", w, score_from + i, nll[(size_t)w * n + i],
                    argmax[(size_t)w * n + i]);
    if (!err) {
        char path[4096];
        snprintf(path, sizeof path, "%s.weights.%d", out, boot.rank);
        FILE *wf = fopen(path, "w");
        if (wf) {
            fprintf(wf, "%zu\n", be->weight_bytes(f));
            fclose(wf);
        }
    }
    if (file) fclose(file);
    if (f) be->free(f);
    free(ids);
    free(nll);
    free(argmax);
    free(batch);
    em_model_free(model);
    em_mesh_free(mesh);
    em_bootstrap_finalize(&boot);
    return err ? fail(err) : 0;
}
