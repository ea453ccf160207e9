/* The `forward` stage kind on the shared stories260K model with a hand-made dataset artifact:
 * the scores artifact has every scored token in window order (targets, per-window offsets,
 * words, bytes, provenance), its nll/argmax are bit-identical to running the kernels directly
 * and for 1 and 2 threads, and a token outside the vocabulary fails with exit status 2 and a
 * message naming the window and position. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/comm/backend_local.h"
#include "runner/comm/mesh_groups.h"
#include "runner/stage.h"
#include "stages/data/dataset.h"
#include "stages/kernels/cpu/llama_forward.h"
#include "stages/metrics/scores.h"
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

/* Runs the stage with `threads`; returns its scores (caller frees) or NULL with *err set. */
static em_scores *run_stage(em_model *model, em_dataset *ds, int threads, em_status *err) {
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
    em_stage self = {.name = "ppl", .kind = &em_stage_kind_forward, .options = options};
    self.inputs = inputs;
    self.input_count = 2;
    em_mesh *mesh; /* the runner's default mesh of one rank */
    CHECK(em_mesh_build_nodes(em_comm_local_new(0, 60), 0, 1, 1, 1, 1, &mesh) == NULL);
    em_run_context ctx = {.world_size = 1, .local_size = 1, .node_count = 1, .mesh = mesh};
    *err = em_stage_kind_forward.init(&self, &ctx);
    if (!*err) *err = em_stage_kind_forward.run(&self, &ctx);
    em_stage_kind_forward.destroy(&self);
    em_mesh_free(mesh);
    em_node_free(options);
    if (*err) return NULL;
    CHECK(self.output.data != NULL && self.output.free != NULL);
    return self.output.data;
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
    em_scores *s1 = run_stage(model, &ds, 1, &err);
    CHECK(err == NULL);
    em_scores *s2 = run_stage(model, &ds, 2, &err);
    CHECK(err == NULL);
    if (!s1 || !s2) return test_finish();

    /* layout: 35 + 33 + 1 scored tokens, windows in order */
    CHECK_INT_EQ(s1->token_count, 69);
    CHECK_INT_EQ(s1->window_count, 3);
    CHECK_INT_EQ(s1->windows[0].window, 15);
    CHECK_INT_EQ(s1->windows[0].first_token, 0);
    CHECK_INT_EQ(s1->windows[0].token_count, 35);
    CHECK_INT_EQ(s1->windows[1].first_token, 35);
    CHECK_INT_EQ(s1->windows[1].token_count, 33);
    CHECK_INT_EQ(s1->windows[2].window, 17);
    CHECK_INT_EQ(s1->windows[2].first_token, 68);
    CHECK_INT_EQ(s1->windows[2].token_count, 1);
    CHECK_INT_EQ(s1->windows[2].words, 30);
    CHECK_INT_EQ(s1->windows[2].bytes, 300);
    CHECK_INT_EQ(s1->target[0], tokens[0][36]);
    CHECK_INT_EQ(s1->target[35], tokens[1][1]);
    CHECK_INT_EQ(s1->target[68], tokens[2][12]);
    CHECK_STR_EQ(s1->model_path, path);
    CHECK_STR_EQ(s1->model_header_sha256, model->header_sha256);
    CHECK_STR_EQ(s1->dataset_path, "corpus.txt");
    CHECK_STR_EQ(s1->dataset_sha256, ds.sha256);
    CHECK(s1->seconds > 0);

    /* bit-identical for 1 and 2 threads, and to the kernels run on the window alone */
    CHECK(memcmp(s1->nll, s2->nll, s1->token_count * sizeof(double)) == 0);
    CHECK(memcmp(s1->argmax, s2->argmax, s1->token_count * sizeof(int32_t)) == 0);
    em_llama_forward *f;
    err = em_llama_forward_new(model, 1, &f);
    CHECK(err == NULL);
    double nll[33];
    int32_t argmax[33];
    err = em_llama_forward_window(f, tokens[1], tokens[1] + 1, 33, 0, nll, argmax);
    CHECK(err == NULL);
    CHECK(memcmp(nll, s1->nll + 35, sizeof nll) == 0);
    CHECK(memcmp(argmax, s1->argmax + 35, sizeof argmax) == 0);
    em_llama_forward_free(f);
    em_scores_free(s1);
    em_scores_free(s2);

    /* a token outside the vocabulary in the window numbered 17 */
    tokens[2][3] = 70000;
    em_scores *bad = run_stage(model, &ds, 2, &err);
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
