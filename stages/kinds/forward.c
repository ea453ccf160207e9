/* Stage `forward`: runs the model over this rank's scoring windows on the forward backend named
 * by `device:` (stages/kernels/forward_backend.h) and produces the scores artifact
 * (stages/kinds/support/scores.h): exact sums over the scored tokens; per window its token count,
 * words, bytes and NLL sum; the time taken; and provenance copied from the model and dataset. Each
 * window's per-token -log p(target), argmax and target go to the run's window records as it
 * finishes and are then dropped, so memory holds one batch of tokens, not the rank's (a resume
 * reads a recorded window's scores back when it comes to that window). Consecutive
 * windows that still need computing are scored in batches of at most
 * `batch_tokens` positions (a longer window alone; cp > 1: one window per batch), each window's
 * numbers bit-identical to those it gets alone (forward_backend.h), so they are the same on any
 * rank, with any thread count and any batch_tokens. The mesh must be the dataset's (checked in
 * init); its tp group
 * splits each window's heads, MLP columns and vocabulary, its cp group each window's positions
 * (stages/kernels/llama_block.h), so every rank of a tp x cp group computes the same windows and
 * ends with the same scores. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/comm/backend_table.h"
#include "runner/comm/mesh_groups.h"
#include "runner/rank_state.h"
#include "runner/stage.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/stop.h"
#include "stages/data/dataset.h"
#include "stages/kernels/forward_backend.h"
#include "stages/kinds/support/forward_device.h"
#include "stages/kinds/support/forward_group.h"
#include "stages/kinds/support/mesh_checks.h"
#include "stages/kinds/support/stage_threads.h"
#include "stages/kinds/support/scores.h"
#include "stages/metrics/window_records.h"
#include "stages/model/gguf_runnable.h"
#include "stages/model/loaded_model.h"

typedef struct forward_state {
    int threads;
    double flush_s;       /* `records_flush_s`: the longest a finished window waits for fsync */
    int64_t batch_tokens; /* `batch_tokens`, else the backend's default */
    const em_forward_backend *backend; /* the `device:` row */
    em_forward_options options;        /* `f32_weights`, `quantized_weights`, `precision` */
} forward_state;

static const em_input_spec forward_inputs[] = {
    {"model", {"model"}, false, false},
    {"data", {"dataset"}, false, false},
    {"mesh", {"mesh"}, false, true},
    {0},
};

/* Context parallelism cuts a window into 2 cp blocks: the dataset's longest windows must have
 * that many tokens (shorter ones, a document's last, are computed whole). Checked when the mesh
 * gives cp as a number (an `auto` cp is known only once the world is). */
static em_status check_cp_fits(const em_stage *self) {
    const em_stage *mesh = em_stage_input_producer(self, "mesh", 0);
    const em_stage *data = em_stage_input_producer(self, "data", 0);
    const em_node *cp_node = mesh ? em_node_get(mesh->options, "cp") : NULL;
    if (!data || !cp_node || em_node_scalar_type(cp_node) != EM_SCALAR_INT) return NULL;
    int64_t cp = em_node_option_int(mesh->options, "cp");
    bool chunked = strcmp(em_node_option_string(data->options, "protocol"), "chunked") == 0;
    const char *key = chunked ? "n_ctx" : "max_length";
    int64_t tokens = em_node_option_int(data->options, key);
    if (2 * cp <= tokens) return NULL;
    const em_map_entry *e = em_node_get_entry(self->options, "mesh");
    return em_error_at(EM_EXIT_BAD_INPUT, e ? e->value->mark : self->mark,
                       "stage '%s': mesh '%s' has cp = %lld, but dataset '%s' makes windows of "
                       "%lld tokens (%s), fewer than the 2 x cp = %lld blocks context parallelism "
                       "cuts a window into",
                       self->name, mesh->name, (long long)cp, data->name, (long long)tokens, key,
                       (long long)(2 * cp));
}

/* The mesh's tp must divide the model's heads, KV heads and MLP width. Checked here, before
 * anything runs, when the mesh gives tp as a number and the model is a GGUF file that a model
 * stage names (directly or through quantize stages), from the configuration the model engine
 * reads from its metadata (a file it cannot read is the model stage's to report); the forward
 * checks again when it shards the loaded model, which covers the rest. */
static em_status check_tp_divides(const em_stage *self) {
    const em_stage *mesh = em_stage_input_producer(self, "mesh", 0);
    const em_map_entry *tp_entry = mesh ? em_node_get_entry(mesh->options, "tp") : NULL;
    if (!tp_entry || em_node_scalar_type(tp_entry->value) != EM_SCALAR_INT) return NULL;
    int64_t tp = em_node_option_int(mesh->options, "tp");
    if (tp <= 1) return NULL; /* "auto" is settled by the mesh at run time */
    const em_stage *source = em_stage_input_producer(self, "model", 0);
    while (source && strcmp(source->kind->name, "model") != 0)
        source = em_stage_input_producer(source, "model", 0);
    const em_node *path_node = source ? em_node_get(source->options, "path") : NULL;
    if (!path_node) return NULL;
    char *path = em_node_path(path_node);
    em_llama_config c = {0};
    em_status unreadable = NULL;
    bool readable = em_path_is_gguf(path) && !(unreadable = em_model_read_gguf_config(path, &c));
    em_error_free(unreadable);
    em_status err = NULL;
    const struct {
        int n;
        const char *what;
    } sizes[] = {
        {c.n_heads, "attention heads"}, {c.n_kv_heads, "KV heads"}, {c.ffn_dim, "MLP columns"}};
    for (size_t i = 0; readable && i < sizeof sizes / sizeof *sizes && !err; i++)
        if (sizes[i].n % tp != 0)
            err = em_error_at(EM_EXIT_BAD_INPUT, tp_entry->value->mark,
                              "stage '%s': tp = %lld does not divide the %d %s of model %s "
                              "(stage '%s')",
                              mesh->name, (long long)tp, sizes[i].n, sizes[i].what, path,
                              source->name);
    free(path);
    return err;
}

/* The position of `value` in `names` (NULL-terminated), which the schema's enum guarantees. */
static int value_index(const char *value, const char *const *names) {
    int i = 0;
    while (names[i + 1] && strcmp(names[i], value) != 0) i++;
    return i;
}

static bool stores_weights(const em_forward_backend *be) {
    return be->weight_storage;
}

/* The weight-storage options into st->options; a backend without weight_storage takes only their
 * defaults (the first value of each), so another is refused here, at its place in the recipe. */
static em_status weight_options(const em_stage *self, forward_state *st) {
    static const char *const f32[] = {"float32", "bfloat16", NULL};
    static const char *const quantized[] = {"auto", "bfloat16", "quantized", NULL};
    int f32_index = 0, quantized_index = 0;
    const struct {
        const char *key;
        const char *const *names;
        int *index;
    } rows[] = {{"f32_weights", f32, &f32_index},
                {"quantized_weights", quantized, &quantized_index}};
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        const char *value = em_node_option_string(self->options, rows[i].key);
        *rows[i].index = value_index(value, rows[i].names);
        if (*rows[i].index == 0 || st->backend->weight_storage) continue;
        const em_map_entry *e = em_node_get_entry(self->options, rows[i].key);
        char storing[128];
        em_forward_backend_names_where(stores_weights, storing, sizeof storing);
        return em_error_at(EM_EXIT_BAD_INPUT, e ? e->value->mark : self->mark,
                           "stage '%s': %s: %s needs device %s (device %s computes F32 matrices "
                           "in FP32 and quantized ones from their blocks: leave %s out)",
                           self->name, rows[i].key, value, storing, st->backend->name, rows[i].key);
    }
    st->options.f32_weights = f32_index ? EM_F32_WEIGHTS_BFLOAT16 : EM_F32_WEIGHTS_FLOAT32;
    st->options.quantized_weights = quantized_index == 1   ? EM_QUANTIZED_WEIGHTS_BFLOAT16
                                    : quantized_index == 2 ? EM_QUANTIZED_WEIGHTS_QUANTIZED
                                                           : EM_QUANTIZED_WEIGHTS_AUTO;
    return NULL;
}

static em_status forward_init(em_stage *self, const em_run_context *ctx) {
    forward_state *st = em_xcalloc(1, sizeof *st);
    self->state = st;
    em_status err = em_stage_check_dataset_mesh(self);
    if (!err) err = check_cp_fits(self);
    if (!err) err = check_tp_divides(self);
    if (!err) err = em_stage_forward_backend(self, EM_FORWARD_SCORE, &st->backend);
    if (!err) err = weight_options(self, st);
    if (!err) err = em_stage_precision(self, st->backend, &st->options.precision);
    if (err) return err;
    st->flush_s = em_node_option_double(self->options, "records_flush_s");
    st->batch_tokens = em_node_is_null(em_node_get(self->options, "batch_tokens"))
                           ? st->backend->batch_tokens
                           : em_node_option_int(self->options, "batch_tokens");
    st->threads = em_stage_threads(self, ctx);
    return NULL;
}

static void free_scores(void *data) {
    em_scores_free(data);
}

/* The scores artifact for ds: one entry per window, the sums empty. */
static em_scores *new_scores(const em_model *model, const em_dataset *ds, em_precision precision) {
    em_scores *s = em_xcalloc(1, sizeof *s);
    em_exact_sum_init(&s->nll);
    em_exact_sum_init(&s->nll2);
    s->windows = em_xcalloc(ds->count ? ds->count : 1, sizeof *s->windows);
    s->window_count = ds->count;
    s->model_path = em_xstrdup(model->path ? model->path : "");
    s->model_header_sha256 = em_xstrdup(model->header_sha256);
    s->model_digest = em_xstrdup(model->digest);
    s->dataset_path = em_xstrdup(ds->path ? ds->path : "");
    s->dataset_sha256 = em_xstrdup(ds->sha256);
    s->precision = em_precision_name(precision);
    return s;
}

/* The most scored tokens one batch can hold: `limit` positions of several windows, or one
 * longer window alone, and never more than ds scores. */
static size_t batch_capacity(const em_dataset *ds, int64_t limit) {
    size_t total = 0, longest = 0;
    for (size_t i = 0; i < ds->count; i++) {
        int32_t n = ds->windows[i].length - ds->windows[i].score_from;
        if (n <= 0) continue;
        total += (size_t)n;
        if ((size_t)n > longest) longest = (size_t)n;
    }
    size_t most = limit > 0 && (uint64_t)limit < total ? (size_t)limit : total;
    if (longest > most) most = longest;
    return most ? most : 1;
}

/* The window records of this stage: those an earlier attempt left (when resuming) and the
 * writer for this attempt's (on the first rank of each tp x cp group; its peers compute the same
 * numbers). */
typedef struct records {
    em_records_index found; /* where the earlier records are; each is read when its window comes */
    void *buf;              /* the record read last */
    size_t cap;
    em_records_writer *writer;
} records;

/* Records are a help for a later resume, never a reason to stop this evaluation: a failure to
 * write them (a full disk) is warned about and recording stops. */
static void keep_recording(records *io, em_status err) {
    if (!err) return;
    em_log_warn("%s; no further window records are written (a resume computes those windows)",
                err->message);
    em_error_free(err);
    if (io->writer) em_error_free(em_records_writer_close(io->writer));
    io->writer = NULL;
}

static em_status open_records(const em_stage *self, const em_run_context *ctx, const em_mesh *mesh,
                              const em_model *model, const em_dataset *ds, records *io) {
    if (!ctx->run_dir || !ctx->recipe_sha256) return NULL;
    const forward_state *st = self->state;
    em_records_key key = em_records_key_of(model->digest, ds->sha256, ctx->recipe_sha256,
                                           em_precision_name(st->options.precision));
    size_t limit = 0;
    for (size_t i = 0; i < ds->count; i++)
        if ((size_t)ds->windows[i].index + 1 > limit) limit = (size_t)ds->windows[i].index + 1;
    em_status err = NULL;
    if (ctx->resume) {
        err = em_records_index_read(ctx->run_dir, self->name, &key, limit, &io->found);
        if (!err && io->found.damaged)
            em_log_warn("forward %s: %zu torn or damaged window records skipped", self->name,
                        io->found.damaged);
        /* every rank has read the earlier records before any rank writes new ones, so the
         * ranks of a tp x cp group take the same windows from them */
        if (!err && ctx->world_size > 1) err = em_barrier(ctx->world);
    }
    if (!err && mesh->tp_rank == 0 && mesh->cp_rank == 0)
        keep_recording(io, em_records_writer_open(ctx->run_dir, self->name, ctx->rank, &key,
                                                  st->flush_s, &io->writer));
    return err;
}

/* Whether window w has a record that agrees with the dataset (token count, words, bytes and every
 * target): then *r is it (its arrays in io->buf until the next). A record that cannot be read
 * back is warned about and its window computed. */
static bool recorded(records *io, const em_window *w, em_window_record *r) {
    const em_records_index *ix = &io->found;
    int32_t n = w->length - w->score_from;
    if (!ix->by_window || (size_t)w->index >= ix->window_limit) return false;
    const em_record_place *at = &ix->by_window[w->index];
    if (at->file < 0 || at->token_count != n) return false;
    em_status err = em_records_index_load(ix, (size_t)w->index, r, &io->buf, &io->cap);
    if (err) {
        em_log_warn("%s; the window is computed again", err->message);
        em_error_free(err);
        return false;
    }
    return r->words == w->words && r->bytes == w->bytes &&
           memcmp(r->target, w->target + w->score_from, (size_t)n * sizeof *r->target) == 0;
}

static em_status forward_run(em_stage *self, const em_run_context *ctx) {
    forward_state *st = self->state;
    const em_model *model = em_stage_input_artifact(self, "model", 0)->data;
    const em_dataset *ds = em_stage_input_artifact(self, "data", 0)->data;
    em_mesh *mesh = em_stage_mesh(self, ctx);
    const em_forward_backend *be = st->backend;
    bool split = mesh->tp > 1 || mesh->cp > 1;
    /* a backend of GPU buffers stages host ones (nccl), not the reverse */
    if (split && be->gpu_buffers && !em_backend_find(mesh->backend)->gpu_buffers)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "device %s splits windows through buffers in GPU memory, but %s has "
                            "backend %s, whose collectives take host memory (use backend nccl)",
                            be->name, em_stage_mesh_name(self), mesh->backend);
    double start = em_clock_seconds();

    em_forward_link tp = {mesh->tp_group, 0}, cp = {mesh->cp_group, 0};
    em_forward_groups groups = {.tp = em_forward_group_of(&tp), .cp = em_forward_group_of(&cp)};
    void *f;
    em_status err = be->create(model, &groups, st->threads, &st->options, &f);
    if (err && split)
        err = em_error_prefix(err, "device %s, %s (tp %d, this rank's tp rank %d)", be->name,
                              em_stage_mesh_name(self), mesh->tp, mesh->tp_rank);
    if (err) return err;
    em_scores *s = new_scores(model, ds, st->options.precision);
    records io = {0};
    err = open_records(self, ctx, mesh, model, ds, &io);
    em_rank_state *state = em_rank_state_current();
    size_t reused = 0, done = 0;
    int64_t processed = 0; /* positions run through the model, scored or not */
    int64_t limit = mesh->cp > 1 ? 1 : st->batch_tokens; /* cp > 1: one window per batch */
    /* one batch's NLL and argmax, folded into s and recorded once the batch is done */
    size_t capacity = batch_capacity(ds, limit);
    double *nll = em_xmalloc(capacity * sizeof *nll);
    int32_t *argmax = em_xmalloc(capacity * sizeof *argmax);
    em_batch_window *batch = em_xmalloc((ds->count ? ds->count : 1) * sizeof *batch);
    bool *taken = em_xcalloc(ds->count ? ds->count : 1, sizeof *taken); /* from a record */
    size_t scored = 0; /* tokens of the windows done, for the progress */
    while (done < ds->count && !err) {
        if (em_stop_signal()) { /* stop between batches: the finished windows are recorded */
            err = em_error_new(EM_EXIT_INTERRUPTED,
                               "interrupted by signal %d (%s) after %zu of %zu windows; the "
                               "finished ones are recorded: finish with `evalmesh run --resume "
                               "%s`",
                               em_stop_signal(), strsignal(em_stop_signal()), done, ds->count,
                               ctx->run_dir ? ctx->run_dir : "RUN_DIR");
            break;
        }
        /* windows done .. end-1: those with a record are taken from it, the others (at most
         * `limit` positions together, or one longer window) are computed as one batch */
        size_t end = done, at = 0;
        int count = 0;
        int64_t tokens = 0, first = 0, last = 0; /* the computed windows' indices */
        for (; end < ds->count; end++) {
            const em_window *w = &ds->windows[end];
            if (w->score_from < 0 || w->score_from >= w->length) {
                err = em_error_new(EM_EXIT_BAD_INPUT, "window %lld: scored from %d of %d positions",
                                   (long long)w->index, w->score_from, w->length);
                break;
            }
            size_t n = (size_t)(w->length - w->score_from);
            em_window_record r;
            taken[end] = recorded(&io, w, &r);
            if (taken[end]) { /* folded now: its arrays last until the next record is read */
                double sum = em_scores_fold(s, r.nll, r.argmax, r.target, (int32_t)n);
                s->windows[end] = (em_window_score){w->index, (int32_t)n, w->words, w->bytes, sum};
                continue;
            }
            if (count > 0 && tokens + w->length > limit) break;
            batch[count++] = (em_batch_window){w->input,      w->target, w->length,
                                               w->score_from, nll + at,  argmax + at};
            at += n;
            tokens += w->length;
            if (count == 1) first = w->index;
            last = w->index;
        }
        if (!err && count > 0) {
            err = be->score_batch(f, batch, count);
            if (err && count == 1)
                err = em_error_prefix(err, "window %lld", (long long)first);
            else if (err)
                err =
                    em_error_prefix(err, "windows %lld .. %lld", (long long)first, (long long)last);
            processed += tokens;
        }
        for (size_t j = done, k = 0; j < end && !err; j++) {
            const em_window *w = &ds->windows[j];
            const int32_t n = w->length - w->score_from;
            if (taken[j]) {
                reused++;
            } else {
                const em_batch_window *b = &batch[k++];
                em_window_record rec = {
                    w->index, n, w->words, w->bytes, w->target + w->score_from, b->argmax, b->nll};
                if (io.writer) keep_recording(&io, em_records_append(io.writer, &rec));
                double sum = em_scores_fold(s, rec.nll, rec.argmax, rec.target, n);
                s->windows[j] = (em_window_score){w->index, n, w->words, w->bytes, sum};
            }
            scored += (size_t)n;
            if (state)
                em_rank_state_progress(state, (int64_t)j + 1, (int64_t)ds->count, (int64_t)scored);
        }
        done = end;
    }
    free(nll);
    free(argmax);
    free(batch);
    free(taken);
    em_records_writer *writer = io.writer;
    io.writer = NULL; /* closed here, whatever comes back */
    keep_recording(&io, em_records_writer_close(writer));
    em_records_index_free(&io.found);
    free(io.buf);
    if (ctx->resume && !err)
        em_log_info("forward %s: %zu of %zu windows taken from the run's records, %zu computed",
                    self->name, reused, ds->count, ds->count - reused);
    size_t weight_bytes = be->weight_bytes(f), memory = be->memory(f);
    const char *kernel = be->kernel ? be->kernel(f) : be->name; /* static names: outlive f */
    be->free(f);
    if (err) {
        em_scores_free(s);
        return err;
    }
    s->seconds = em_clock_seconds() - start;
    double per_s = s->seconds > 0 ? 1.0 / s->seconds : 0.0;
    em_log_info("forward %s: %zu windows, %lld processed and %zu scored tokens in %.2f s (%.1f "
                "processed and %.1f scored tokens/s, %d threads, precision %s, kernel %s)",
                self->name, ds->count, (long long)processed, s->token_count, s->seconds,
                (double)processed * per_s, (double)s->token_count * per_s, st->threads,
                em_precision_name(st->options.precision), kernel);
    em_log_info("forward %s memory: %.2f MiB of weights in this rank's tp shard (tp %d), %.2f MiB "
                "of activations and scratch (cp %d); %.3f s in tp and %.3f s in cp collectives",
                self->name, (double)weight_bytes / 1048576.0, mesh->tp, (double)memory / 1048576.0,
                mesh->cp, tp.seconds, cp.seconds);
    self->output = (em_artifact){.data = s, .free = free_scores};
    return NULL;
}

static void forward_destroy(em_stage *self) {
    free(self->state);
}

const em_stage_kind em_stage_kind_forward = {
    .name = "forward",
    .summary = "run the model over this rank's windows (device cpu; tp splits each window): "
               "per-token NLL and argmax",
    .produces = "scores",
    .inputs = forward_inputs,
    .collective = true, /* over the mesh's tp and cp groups */
    .init = forward_init,
    .run = forward_run,
    .destroy = forward_destroy,
};
