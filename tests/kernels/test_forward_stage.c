/* The `forward` stage kind on the shared stories260K model with a hand-made dataset artifact:
 * the scores artifact has every window in order (token counts, words, bytes, NLL sums) and the
 * exact sums of its scored tokens, provenance; the window records it writes hold every scored
 * token (targets, nll, argmax) bit-identical to running the kernels directly and for 1 and 2
 * threads, and the artifact's sums are those of the recorded tokens; a token outside the
 * vocabulary fails with exit status 2 and a message naming the window and position. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runner/comm/backend_local.h"
#include "runner/comm/mesh_groups.h"
#include "runner/stage.h"
#include "stages/data/dataset.h"
#include "stages/kernels/cpu/llama_forward.h"
#include "stages/kinds/support/scores.h"
#include "stages/metrics/window_records.h"
#include "stages/model/loaded_model.h"
#include "test.h"

extern const em_stage_kind em_stage_kind_forward;

#define WINDOWS 3
#define MAX_LEN 70

static int32_t tokens[WINDOWS][MAX_LEN + 1];

/* Three windows of the dataset: lengths 70, 33, 12, scored from 35, 0, 11. */
static void make_dataset(em_dataset *ds, em_window *w) {
    static const int length[WINDOWS] = {70, 33, 12}, score_from[WINDOWS] = {35, 0, 11};
    uint32_t seed = 99;
    for (int i = 0; i < WINDOWS; i++) {
        for (int t = 0; t <= length[i]; t++) {
            seed = seed * 1664525u + 1013904223u;
            tokens[i][t] = (int32_t)((seed >> 8) % 512u);
        }
        w[i] = (em_window){.index = 15 + i,
                           .document = i,
                           .length = length[i],
                           .score_from = score_from[i],
                           .input = tokens[i],
                           .target = tokens[i] + 1,
                           .words = 10 * (i + 1),
                           .bytes = 100 * (i + 1)};
    }
    *ds = (em_dataset){.windows = w, .count = WINDOWS, .first_window = 15, .total_windows = 40};
    ds->path = "corpus.txt";
    snprintf(ds->sha256, sizeof ds->sha256, "%064d", 7);
}

#define RECIPE_SHA256 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* Runs the stage with `threads`, its window records in run_dir; returns its scores (caller
 * frees) or NULL with *err set. */
static em_scores *run_stage(em_model *model, em_dataset *ds, int threads, const char *run_dir,
                            em_status *err) {
    em_mark mark = {0};
    em_stage producer_model = {.name = "model"}, producer_data = {.name = "wiki"};
    producer_model.output = (em_artifact){"model", model, NULL};
    producer_data.output = (em_artifact){"dataset", ds, NULL};
    em_stage_input inputs[2] = {{"model", 0, &producer_model}, {"data", 0, &producer_data}};
    char text[16];
    snprintf(text, sizeof text, "%d", threads);
    em_node *options = em_node_new_map(mark);
    em_node_map_set(options, "threads", mark, em_node_new_scalar(text, false, mark));
    /* the schema defaults a validated recipe would fill in */
    em_node_map_set(options, "device", mark, em_node_new_scalar("cpu", false, mark));
    em_node_map_set(options, "records_flush_s", mark, em_node_new_scalar("10", false, mark));
    em_node_map_set(options, "f32_weights", mark, em_node_new_scalar("float32", false, mark));
    em_node_map_set(options, "quantized_weights", mark, em_node_new_scalar("auto", false, mark));
    em_node_map_set(options, "precision", mark, em_node_new_scalar("exact", false, mark));
    em_stage self = {.name = "ppl", .kind = &em_stage_kind_forward, .options = options};
    self.inputs = inputs;
    self.input_count = 2;
    em_mesh *mesh; /* the runner's default mesh of one rank */
    CHECK(em_mesh_build_nodes(em_comm_local_new(0, 60), 0, 1, 1, 1, 1, &mesh) == NULL);
    em_run_context ctx = {.world_size = 1,
                          .local_size = 1,
                          .node_count = 1,
                          .mesh = mesh,
                          .run_dir = run_dir,
                          .recipe_sha256 = RECIPE_SHA256};
    *err = em_stage_kind_forward.init(&self, &ctx);
    if (!*err) *err = em_stage_kind_forward.run(&self, &ctx);
    em_stage_kind_forward.destroy(&self);
    em_mesh_free(mesh);
    em_node_free(options);
    if (*err) return NULL;
    CHECK(self.output.data != NULL && self.output.free != NULL);
    return self.output.data;
}

/* The window records run_dir holds for stage "ppl" (found->by_window[15 .. 17]). */
static void read_records(const em_model *model, const em_dataset *ds, const char *run_dir,
                         em_records_found *found) {
    em_records_key key = em_records_key_of(model->digest, ds->sha256, RECIPE_SHA256, "exact");
    CHECK(em_records_read(run_dir, "ppl", &key, 18, found) == NULL);
    CHECK_INT_EQ(found->records, WINDOWS);
    for (int w = 15; w < 18; w++) CHECK(found->by_window[w] != NULL);
}

/* A fresh directory for one run's records (removed with `rm -rf` at the end). */
static char *new_run_dir(void) {
    char *dir = strdup("/tmp/evalmesh_forward_stage_XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    return dir;
}

static void remove_dir(char *dir) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    free(dir);
}

int main(void) {
    char path[4096];
    test_shared_file("models/stories260K.gguf", path, sizeof path);
    em_model *model;
    em_status err = em_model_load(path, &model);
    CHECK(err == NULL);
    if (err) return 1;

    em_dataset ds;
    em_window w[WINDOWS];
    make_dataset(&ds, w);
    char *dir1 = new_run_dir(), *dir2 = new_run_dir();
    em_scores *s1 = run_stage(model, &ds, 1, dir1, &err);
    CHECK(err == NULL);
    em_scores *s2 = run_stage(model, &ds, 2, dir2, &err);
    CHECK(err == NULL);
    if (!s1 || !s2) return test_finish();
    em_records_found r1 = {0}, r2 = {0};
    read_records(model, &ds, dir1, &r1);
    read_records(model, &ds, dir2, &r2);
    if (r1.records != WINDOWS || r2.records != WINDOWS) return test_finish();
    const em_window_record *const *rec1 = (const em_window_record *const *)r1.by_window;
    const em_window_record *const *rec2 = (const em_window_record *const *)r2.by_window;

    /* layout: 35 + 33 + 1 scored tokens, windows in order */
    CHECK_INT_EQ(s1->token_count, 69);
    CHECK_INT_EQ(s1->window_count, 3);
    CHECK_INT_EQ(s1->windows[0].window, 15);
    CHECK_INT_EQ(s1->windows[0].token_count, 35);
    CHECK_INT_EQ(s1->windows[1].token_count, 33);
    CHECK_INT_EQ(s1->windows[2].window, 17);
    CHECK_INT_EQ(s1->windows[2].token_count, 1);
    CHECK_INT_EQ(s1->windows[2].words, 30);
    CHECK_INT_EQ(s1->windows[2].bytes, 300);
    CHECK_INT_EQ(rec1[15]->token_count, 35);
    CHECK_INT_EQ(rec1[16]->token_count, 33);
    CHECK_INT_EQ(rec1[17]->token_count, 1);
    CHECK_INT_EQ(rec1[15]->target[0], tokens[0][36]);
    CHECK_INT_EQ(rec1[16]->target[0], tokens[1][1]);
    CHECK_INT_EQ(rec1[17]->target[0], tokens[2][12]);
    CHECK_STR_EQ(s1->model_path, path);
    CHECK_STR_EQ(s1->model_header_sha256, model->header_sha256);
    CHECK_STR_EQ(s1->dataset_path, "corpus.txt");
    CHECK_STR_EQ(s1->dataset_sha256, ds.sha256);
    CHECK(s1->seconds > 0);

    /* the artifact's sums are those of the recorded tokens: exact sums over all, the NLL of each
     * window added in position order */
    em_exact_sum nll, nll2;
    em_exact_sum_init(&nll);
    em_exact_sum_init(&nll2);
    int64_t correct = 0;
    for (int w = 0; w < WINDOWS; w++) {
        const em_window_record *r = rec1[15 + w];
        double sum = 0;
        for (int32_t k = 0; k < r->token_count; k++) {
            em_exact_sum_add(&nll, r->nll[k]);
            em_exact_sum_add(&nll2, r->nll[k] * r->nll[k]);
            correct += r->argmax[k] == r->target[k];
            sum += r->nll[k];
        }
        CHECK(memcmp(&sum, &s1->windows[w].nll_sum, sizeof sum) == 0);
    }
    double total = em_exact_sum_value(&nll), total2 = em_exact_sum_value(&nll2);
    double got = em_exact_sum_value(&s1->nll), got2 = em_exact_sum_value(&s1->nll2);
    CHECK(memcmp(&total, &got, sizeof total) == 0);
    CHECK(memcmp(&total2, &got2, sizeof total2) == 0);
    CHECK_INT_EQ(s1->correct, correct);

    /* bit-identical for 1 and 2 threads, and to the kernels run on the window alone */
    for (int w = 15; w < 18; w++) {
        size_t n = (size_t)rec1[w]->token_count;
        CHECK(memcmp(rec1[w]->nll, rec2[w]->nll, n * sizeof(double)) == 0);
        CHECK(memcmp(rec1[w]->argmax, rec2[w]->argmax, n * sizeof(int32_t)) == 0);
    }
    got = em_exact_sum_value(&s2->nll);
    CHECK(memcmp(&total, &got, sizeof total) == 0);
    em_llama_forward *f;
    err = em_llama_forward_new(model, 1, &f);
    CHECK(err == NULL);
    double nll33[33];
    int32_t argmax[33];
    err = em_llama_forward_window(f, tokens[1], tokens[1] + 1, 33, 0, nll33, argmax);
    CHECK(err == NULL);
    CHECK(memcmp(nll33, rec1[16]->nll, sizeof nll33) == 0);
    CHECK(memcmp(argmax, rec1[16]->argmax, sizeof argmax) == 0);
    em_llama_forward_free(f);
    em_records_found_free(&r1);
    em_records_found_free(&r2);
    em_scores_free(s1);
    em_scores_free(s2);
    remove_dir(dir1);
    remove_dir(dir2);

    /* a token outside the vocabulary in the window numbered 17 */
    tokens[2][3] = 70000;
    em_scores *bad = run_stage(model, &ds, 2, NULL, &err);
    CHECK(bad == NULL);
    CHECK(err != NULL);
    if (err) {
        CHECK_INT_EQ(err->exit_code, 2);
        CHECK_STR_EQ(err->message,
                     "window 17: input token id 70000 at position 3 is outside the vocabulary "
                     "(512)");
        em_error_free(err);
    }
    em_model_free(model);
    return test_finish();
}
