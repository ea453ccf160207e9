/* Stage `forward`: runs the model over this rank's scoring windows on the CPU and produces the
 * scores artifact (stages/metrics/scores.h): per scored token -log p(target), the argmax and the
 * target; per window its token range, words and bytes; the time taken; and provenance copied from
 * the model and dataset. Windows are computed one at a time with shapes that depend only on the
 * window (stages/kernels/cpu/llama_forward.h), so each window's numbers are bit-identical on any
 * rank, with any thread count. No collectives. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runner/rank_state.h"
#include "runner/stage.h"
#include "util/log.h"
#include "stages/data/window_set.h"
#include "stages/kernels/cpu/llama_forward.h"
#include "stages/metrics/scores.h"
#include "stages/model/loaded_model.h"

typedef struct forward_state {
    int threads;
} forward_state;

static const em_input_spec forward_inputs[] = {
    {"model", {"model"}, false, false},
    {"data", {"dataset"}, false, false},
    {"mesh", {"mesh"}, false, true},
    {0},
};

/* threads: the option, else this node's cores shared evenly by its ranks. When the launcher
 * already bound the rank to some of the cores (mpirun --bind-to, srun --cpu-bind), those are the
 * rank's share as they are. */
static em_status forward_init(em_stage *self, const em_run_context *ctx) {
    forward_state *st = em_xcalloc(1, sizeof *st);
    self->state = st;
    const em_node *threads = em_node_get(self->options, "threads");
    if (!em_node_is_null(threads)) {
        int64_t n;
        em_status err = em_node_as_int(threads, &n);
        if (err) return err;
        st->threads = (int)n;
    } else {
        int usable = omp_get_num_procs(); /* the CPUs this process may run on */
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        int ranks = ctx->local_size > 0 ? ctx->local_size : 1;
        st->threads = usable < online ? usable : usable / ranks;
        if (st->threads < 1) st->threads = 1;
    }
    return NULL;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void free_scores(void *data) {
    em_scores_free(data);
}

/* The scores artifact sized for ds: token arrays for every scored token, one entry per window. */
static em_scores *new_scores(const em_model *model, const em_dataset *ds) {
    em_scores *s = em_xcalloc(1, sizeof *s);
    for (size_t i = 0; i < ds->count; i++) {
        s->token_count += (size_t)(ds->windows[i].length - ds->windows[i].score_from);
    }
    size_t n = s->token_count ? s->token_count : 1;
    s->nll = em_xmalloc(n * sizeof *s->nll);
    s->argmax = em_xmalloc(n * sizeof *s->argmax);
    s->target = em_xmalloc(n * sizeof *s->target);
    s->windows = em_xcalloc(ds->count ? ds->count : 1, sizeof *s->windows);
    s->window_count = ds->count;
    s->model_path = em_xstrdup(model->path ? model->path : "");
    s->model_header_sha256 = em_xstrdup(model->header_sha256);
    s->dataset_path = em_xstrdup(ds->path ? ds->path : "");
    s->dataset_sha256 = em_xstrdup(ds->sha256);
    return s;
}

static em_status forward_run(em_stage *self, const em_run_context *ctx) {
    forward_state *st = self->state;
    const em_model *model = em_stage_input_artifact(self, "model", 0)->data;
    const em_dataset *ds = em_stage_input_artifact(self, "data", 0)->data;
    double start = now_seconds();

    em_llama_forward *f;
    em_status err = em_llama_forward_new(model, st->threads, &f);
    if (err) return err;
    em_scores *s = new_scores(model, ds);
    em_rank_state *state = em_rank_state_current();
    size_t offset = 0;
    for (size_t i = 0; i < ds->count && !err; i++) {
        const em_window *w = &ds->windows[i];
        if (w->score_from < 0 || w->score_from >= w->length) {
            err = em_error_new(EM_EXIT_BAD_INPUT, "window %lld: scored from %d of %d positions",
                               (long long)w->index, w->score_from, w->length);
            break;
        }
        size_t n = (size_t)(w->length - w->score_from);
        err = em_llama_forward_window(f, w->input, w->target, w->length, w->score_from,
                                      s->nll + offset, s->argmax + offset);
        if (err) {
            err = em_error_prefix(err, "window %lld", (long long)w->index);
            break;
        }
        memcpy(s->target + offset, w->target + w->score_from, n * sizeof *s->target);
        s->windows[i] = (em_window_score){w->index, offset, (int32_t)n, w->words, w->bytes};
        offset += n;
        if (state)
            em_rank_state_progress(state, (int64_t)i + 1, (int64_t)ds->count, (int64_t)offset);
    }
    em_llama_forward_free(f);
    if (err) {
        em_scores_free(s);
        return err;
    }
    s->seconds = now_seconds() - start;
    em_log_info("forward %s: %zu windows, %zu scored tokens in %.2f s (%.1f tokens/s, %d threads)",
                self->name, ds->count, s->token_count, s->seconds,
                s->seconds > 0 ? (double)s->token_count / s->seconds : 0.0, st->threads);
    self->output = (em_artifact){.data = s, .free = free_scores};
    return NULL;
}

static void forward_destroy(em_stage *self) {
    free(self->state);
}

const em_stage_kind em_stage_kind_forward = {
    .name = "forward",
    .summary = "run the model over this rank's windows on the CPU: per-token NLL and argmax",
    .produces = "scores",
    .inputs = forward_inputs,
    .collective = false,
    .init = forward_init,
    .run = forward_run,
    .destroy = forward_destroy,
};
