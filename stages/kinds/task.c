/* Stage `task`: benchmark tasks scored from log-likelihoods, as lm-evaluation-harness scores
 * them, the same bits on any number of ranks. Every rank loads the tasks the `tasks:` option
 * names (support/task_sources.h) and splits their examples, in order, over the mesh's dp group:
 * one contiguous range per rank, balanced by the bytes of its requests. A rank turns each of its
 * examples' choices into a request (stages/tasks/requests.h: lm-eval's encoding and left
 * truncation) and scores the requests on the forward backend `device:` names, in batches of at
 * most `batch_tokens` positions, each request's numbers bit-identical to those it gets alone
 * (forward_backend.h); tp and cp split each request's work as the forward stage's windows. The
 * per-request sums and greedy flags are gathered over dp, and every rank folds every example's
 * outcome in document order (stages/tasks/task_scoring.h), so the metrics do not depend on the
 * split. Rank 0 prints lm-eval's table and writes lm_eval_results.json and, with log_samples,
 * samples_<task>.jsonl into the run directory, and every example's metric values with its identity
 * in examples_<stage>.json (stages/report/example_file.h), for a paired gate against this run.
 * Produces a "metrics" artifact: per task and metric "<stage>/<task>.<metric>" with its standard
 * error, and the per-example values (stages/metrics/example_values.h), for report and gate.
 * Where the backend scores shared prefixes and cp = 1, an example's requests that read the same
 * context (the same ids before the same score_from) are one group instead, the context computed
 * once and the choices its continuations, with the same bits as each request alone; consecutive
 * examples' groups share a call up to `batch_tokens` context positions (default: the backend's
 * prefix_batch_tokens).
 * `precision` (exact, ggml, bf16) rounds the products as the forward stage's does; it is recorded
 * in results.json and in the request records' key, so a resume or a gate refuses to mix precisions.
 * generate_until examples are one request each: its prompt (the context, encoded as a loglikelihood
 * request's context is), stop strings and max_gen_toks, decoded greedily (stages/tasks/generate.h)
 * by the rank whose range holds it, together with the rank's other prompts in batches of at most
 * `batch_tokens` positions of prompt and generated tokens (a sequence's text does not depend on
 * its batch); the texts are gathered over dp, and every rank scores every text
 * (stages/tasks/generation_scoring.h) in document order. A finished generation is recorded as a
 * request record at its request's index whose targets and argmaxes are the generated ids (nll 0;
 * words: why it stopped, em_generate_stop; bytes: the prompt ids kept): its text, filtered answer
 * and score follow from them, so a resume decodes and scores them again without the model.
 * A stop signal (util/stop.h) ends the scoring between batches, and a decoding after its step
 * under way, with exit status 6, every scored request and finished generation recorded. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/comm/backend_table.h"
#include "runner/comm/mesh_groups.h"
#include "runner/rank_state.h"
#include "runner/stage.h"
#include "util/atomic_file.h"
#include "util/sha256.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/stop.h"
#include "stages/data/window_ranges.h"
#include "stages/kernels/forward_backend.h"
#include "stages/kinds/support/forward_device.h"
#include "stages/kinds/support/forward_group.h"
#include "stages/kinds/support/stage_threads.h"
#include "stages/kinds/support/task_sources.h"
#include "stages/metrics/metrics.h"
#include "stages/metrics/window_records.h"
#include "stages/model/loaded_model.h"
#include "stages/report/example_file.h"
#include "stages/tasks/generate.h"
#include "stages/tasks/generation_scoring.h"
#include "stages/tasks/requests.h"
#include "stages/tasks/task_results.h"
#include "stages/tasks/task_scoring.h"

typedef struct task_state {
    int threads;
    int64_t batch_tokens;
    int64_t prefix_tokens; /* context positions per shared-prefix call (batch_tokens when set) */
    const em_forward_backend *backend;
    em_precision precision; /* `precision`: how the products are rounded */
    em_task **tasks;
    size_t task_count;
} task_state;

static const em_input_spec task_inputs[] = {
    {"model", {"model"}, false, false},
    {"mesh", {"mesh"}, false, true},
    {0},
};

/* One example among all the tasks' examples, in order, and where its requests are in the flat
 * request list: its choices, then (acc_mutual_info) their unconditional requests. */
typedef struct flat_example {
    const em_task *task;
    const em_task_example *example;
    size_t first_request, requests;
    int64_t cost; /* bytes of its requests' texts: the dp split's weight */
} flat_example;

/* A generated token weighs as many bytes of prompt in the dp split (a decoding step per token
 * against a prompt's bytes read in one pass): a typical token's bytes. */
enum { GENERATED_TOKEN_COST = 4 };

static bool mutual_info(const em_task *task) {
    return (task->metrics & EM_TASK_METRIC_ACC_MUTUAL_INFO) != 0;
}

static bool generative(const em_task *task) {
    return task->output == EM_TASK_GENERATE_UNTIL;
}

/* The context and continuation of request r (0 .. requests-1) of e. */
static void request_texts(const flat_example *e, size_t r, const char **context,
                          const char **continuation) {
    size_t n = e->example->choice_count;
    if (r < n) {
        *context = e->example->context;
        *continuation = e->example->continuations[r];
    } else { /* lm-eval's unconditional request: ("", choice) */
        *context = "";
        *continuation = e->example->choices[r - n];
    }
}

static flat_example *flatten(em_task **tasks, size_t task_count, size_t *count,
                             size_t *request_count) {
    size_t n = 0, at = 0;
    for (size_t t = 0; t < task_count; t++) n += tasks[t]->example_count;
    flat_example *flat = em_xcalloc(n ? n : 1, sizeof *flat);
    size_t i = 0;
    for (size_t t = 0; t < task_count; t++)
        for (size_t k = 0; k < tasks[t]->example_count; k++, i++) {
            flat_example *e = &flat[i];
            e->task = tasks[t];
            e->example = &tasks[t]->examples[k];
            e->first_request = at;
            if (generative(tasks[t])) { /* one generation request */
                e->requests = 1;
                e->cost = (int64_t)strlen(e->example->context) + 1 +
                          (int64_t)GENERATED_TOKEN_COST * tasks[t]->generation.max_gen_toks;
                at++;
                continue;
            }
            e->requests = e->example->choice_count * (mutual_info(tasks[t]) ? 2 : 1);
            for (size_t r = 0; r < e->requests; r++) {
                const char *context, *continuation;
                request_texts(e, r, &context, &continuation);
                e->cost += (int64_t)(strlen(context) + strlen(continuation)) + 1;
            }
            at += e->requests;
        }
    *count = n;
    *request_count = at;
    return flat;
}

/* The options `max_gen_toks` and `until` (lm-eval's --gen_kwargs), when set, in place of every
 * generate_until task's own. */
static void generation_overrides(const em_node *options, em_task **tasks, size_t count) {
    const em_node *max = em_node_get(options, "max_gen_toks");
    const em_node *until = em_node_get(options, "until");
    for (size_t t = 0; t < count; t++) {
        em_task_generation *g = &tasks[t]->generation;
        if (!generative(tasks[t])) continue;
        if (!em_node_is_null(max))
            g->max_gen_toks = (int)em_node_option_int(options, "max_gen_toks");
        if (em_node_is_null(until)) continue;
        for (size_t u = 0; u < g->until_count; u++) free(g->until[u]);
        free(g->until);
        g->until_count = until->count;
        g->until = em_xcalloc(until->count ? until->count : 1, sizeof *g->until);
        for (size_t u = 0; u < until->count; u++) g->until[u] = em_xstrdup(until->items[u]->text);
    }
}

static em_status task_init(em_stage *self, const em_run_context *ctx) {
    task_state *st = em_xcalloc(1, sizeof *st);
    self->state = st;
    em_status err = em_stage_forward_backend(self, EM_FORWARD_SCORE, &st->backend);
    if (!err) err = em_stage_precision(self, st->backend, &st->precision);
    if (err) return err;
    st->batch_tokens = em_node_is_null(em_node_get(self->options, "batch_tokens"))
                           ? st->backend->batch_tokens
                           : em_node_option_int(self->options, "batch_tokens");
    st->prefix_tokens = em_node_is_null(em_node_get(self->options, "batch_tokens"))
                            ? st->backend->prefix_batch_tokens
                            : st->batch_tokens;
    st->threads = em_stage_threads(self, ctx);
    /* the tasks are read here, before anything runs, so a bad task file is a bad recipe */
    const em_node *list = em_node_get(self->options, "tasks");
    /* a file or folder is relative to the recipe that names it (util/paths.h); a name is a name */
    char **specs = em_xcalloc(list->count ? list->count : 1, sizeof *specs);
    for (size_t i = 0; i < list->count; i++)
        specs[i] = em_task_spec_is_path(list->items[i]->text) ? em_node_path(list->items[i])
                                                              : em_xstrdup(list->items[i]->text);
    const em_node *shots = em_node_get(self->options, "num_fewshot");
    const em_node *limit = em_node_get(self->options, "limit");
    em_task_load_options options = {
        .num_fewshot =
            em_node_is_null(shots) ? -1 : (int)em_node_option_int(self->options, "num_fewshot"),
        .fewshot_seed = (uint64_t)em_node_option_int(self->options, "fewshot_seed"),
        .limit = em_node_is_null(limit) ? 0 : (size_t)em_node_option_int(self->options, "limit"),
        .generative = em_node_option_bool(self->options, "bigbench_generative"),
    };
    err = em_tasks_load((const char *const *)specs, list->count, &options, &st->tasks,
                        &st->task_count);
    if (!err) generation_overrides(self->options, st->tasks, st->task_count);
    /* generate_until tasks are decoded greedily: the backend must decode */
    for (size_t i = 0; !err && i < st->task_count; i++)
        if (generative(st->tasks[i])) {
            err = em_forward_decoding(st->backend);
            if (err) err = em_error_prefix(err, "task '%s' is generate_until", st->tasks[i]->name);
            break;
        }
    if (err) {
        const em_map_entry *e = em_node_get_entry(self->options, "tasks");
        err = em_error_prefix_at(err, e ? e->value->mark : self->mark, "stage '%s'", self->name);
    }
    for (size_t i = 0; i < list->count; i++) free(specs[i]);
    free(specs);
    return err;
}

/* This rank's requests, scored: loglik and greedy (as 0/1) at each request's flat index. */
typedef struct scoring {
    const em_forward_backend *be;
    void *forward;
    const em_tokenizer *tok;
    em_request_options request;
    int64_t limit;        /* positions per batch */
    bool share_prefix;    /* the requests of an example sharing their context are scored as
                             continuations of it (the backend's score_shared_prefixes, cp = 1) */
    int64_t prefix_limit; /* context positions per score_shared_prefixes call */
    const char *run_dir;  /* for the message of an interruption; NULL: none */
    double *loglik, *greedy;
    char **texts;             /* generate_until: the generated text at its request's index */
    int max_length;           /* the most positions of a generation's prompt and tokens */
    int64_t generated_tokens; /* tokens generated (prompts in computed_tokens) */
    int64_t computed_tokens;  /* positions run through the model */
    int64_t request_tokens;   /* positions of the requests scored, each counted whole */
    size_t reused;            /* requests taken from an earlier attempt's records */
    /* the run's request records (stages/metrics/window_records.h, a request as a window whose
     * index is its place among all the tasks' requests): an earlier attempt's, when resuming,
     * and this attempt's writer (on the first rank of each tp x cp group) */
    em_records_index found;
    void *buf;
    size_t cap;
    em_records_writer *writer;
} scoring;

/* Records help a later resume, never stop this evaluation: a failure to write them is warned
 * about and recording stops. */
static void keep_recording(scoring *s, em_status err) {
    if (!err) return;
    em_log_warn("%s; no further request records are written (a resume computes those requests)",
                err->message);
    em_error_free(err);
    if (s->writer) em_error_free(em_records_writer_close(s->writer));
    s->writer = NULL;
}

/* Whether request `index` (q) has a record with its continuation's targets: then *r is it (its
 * arrays in s->buf until the next). */
static bool recorded(scoring *s, size_t index, const em_request *q, em_window_record *r) {
    const em_records_index *ix = &s->found;
    if (!ix->by_window || index >= ix->window_limit) return false;
    const em_record_place *at = &ix->by_window[index];
    if (at->file < 0 || at->token_count != q->continuation_tokens) return false;
    em_status err = em_records_index_load(ix, index, r, &s->buf, &s->cap);
    if (err) {
        em_log_warn("%s; the request is computed again", err->message);
        em_error_free(err);
        return false;
    }
    return memcmp(r->target, q->target + q->score_from,
                  (size_t)q->continuation_tokens * sizeof *r->target) == 0;
}

/* Request `index`'s sum (its continuation's tokens in order, no -0) and greedy flag from its
 * per-token nll, argmax and target (n). */
static void fold_request(scoring *s, size_t index, const double *nll, const int32_t *argmax,
                         const int32_t *target, int n) {
    double sum = 0;
    bool greedy = true;
    for (int j = 0; j < n; j++) {
        sum -= nll[j];
        greedy = greedy && argmax[j] == target[j];
    }
    s->loglik[index] = sum == 0 ? 0.0 : sum;
    s->greedy[index] = greedy;
}

/* Folds scored request `index` (q) from its continuation's nll and argmax and records it. */
static void keep_scored(scoring *s, size_t index, const em_request *q, const double *nll,
                        const int32_t *argmax) {
    const int32_t *target = q->target + q->score_from;
    fold_request(s, index, nll, argmax, target, q->continuation_tokens);
    if (s->writer)
        keep_recording(s, em_records_append(s->writer, &(em_window_record){
                                                           .window = (int64_t)index,
                                                           .token_count = q->continuation_tokens,
                                                           .target = target,
                                                           .argmax = argmax,
                                                           .nll = nll,
                                                       }));
}

/* Whether b reads the same context as a: the same ids before the same score_from > 0. */
static bool same_context(const em_request *a, const em_request *b) {
    return a->score_from > 0 && a->score_from == b->score_from &&
           memcmp(a->input, b->input, (size_t)a->score_from * sizeof *a->input) == 0;
}

/* Scores the `groups` runs of requests bounds[g] .. bounds[g + 1] - 1 (their flat indices in
 * index), each run reading one context, in one call: each run's context computed once and its
 * requests as continuations of it; requests taken from records are folded from them. */
static em_status score_groups(scoring *s, const em_request *reqs, const size_t *index,
                              const size_t *bounds, size_t groups) {
    size_t n = bounds[groups] - bounds[0], tokens = 0;
    em_batch_window *batch = em_xmalloc(n * sizeof *batch);
    em_shared_prefix *prefixes = em_xmalloc(groups * sizeof *prefixes);
    size_t *members = em_xmalloc(n * sizeof *members);
    for (size_t k = bounds[0]; k < bounds[groups]; k++)
        tokens += (size_t)reqs[k].continuation_tokens;
    double *nll = em_xmalloc((tokens ? tokens : 1) * sizeof *nll);
    int32_t *argmax = em_xmalloc((tokens ? tokens : 1) * sizeof *argmax);
    int count = 0, used = 0;
    size_t at = 0;
    for (size_t g = 0; g < groups; g++) {
        int from = count;
        for (size_t k = bounds[g]; k < bounds[g + 1]; k++) {
            const em_request *q = &reqs[k];
            em_window_record r;
            if (recorded(s, index[k], q, &r)) {
                fold_request(s, index[k], r.nll, r.argmax, r.target, r.token_count);
                s->reused++;
                continue;
            }
            int P = q->score_from;
            members[count] = k;
            batch[count++] = (em_batch_window){
                q->input + P, q->target + P, q->continuation_tokens, 0, nll + at, argmax + at};
            at += (size_t)q->continuation_tokens;
            s->request_tokens += q->T;
        }
        if (count == from) continue; /* every request of the run recorded */
        const em_request *first = &reqs[members[from]];
        prefixes[used++] =
            (em_shared_prefix){first->input, first->score_from, batch + from, count - from};
        s->computed_tokens += first->score_from;
    }
    em_status err = NULL;
    if (used > 0) {
        err = s->be->score_shared_prefixes(s->forward, prefixes, used);
        s->computed_tokens += (int64_t)at;
    }
    for (int b = 0; b < count && !err; b++)
        keep_scored(s, index[members[b]], &reqs[members[b]], batch[b].nll, batch[b].argmax);
    free(batch);
    free(prefixes);
    free(members);
    free(nll);
    free(argmax);
    return err;
}

/* Scores requests [first, end) of flat (their requests made and batched here; with
 * share_prefix, each run of an example's requests reading the same context as one group). */
static em_status score_range(scoring *s, const flat_example *flat, size_t first, size_t end) {
    size_t total = 0;
    for (size_t i = first; i < end; i++)
        if (!generative(flat[i].task)) total += flat[i].requests;
    em_request *reqs = em_xcalloc(total ? total : 1, sizeof *reqs);
    size_t *index = em_xcalloc(total ? total : 1, sizeof *index); /* each request's flat index */
    size_t *owner = em_xcalloc(total ? total : 1, sizeof *owner); /* its example in flat */
    em_status err = NULL;
    size_t made = 0;
    for (size_t i = first; i < end && !err; i++)
        for (size_t r = 0; r < flat[i].requests && !generative(flat[i].task) && !err; r++) {
            const char *context, *continuation;
            request_texts(&flat[i], r, &context, &continuation);
            em_request_options options = s->request;
            options.apart = flat[i].task->format == EM_TASK_FORMAT_BIGBENCH;
            err = em_request_make(s->tok, context, continuation, &options, &reqs[made]);
            if (err)
                err = em_error_prefix(err, "task %s, document %zu, request %zu", flat[i].task->name,
                                      flat[i].example->doc_index, r);
            owner[made] = i;
            index[made++] = flat[i].first_request + r;
        }
    size_t most = 1;
    for (size_t k = 0; k < made; k++)
        if ((size_t)reqs[k].continuation_tokens > most) most = (size_t)reqs[k].continuation_tokens;
    em_batch_window *batch = em_xmalloc((made ? made : 1) * sizeof *batch);
    size_t capacity = (size_t)(s->limit > 0 ? s->limit : 1) + most;
    double *nll = em_xmalloc(capacity * sizeof *nll);
    int32_t *argmax = em_xmalloc(capacity * sizeof *argmax);
    size_t *members = em_xmalloc((made ? made : 1) * sizeof *members); /* a batch's reqs */
    size_t *bounds = em_xmalloc((made + 1) * sizeof *bounds);          /* score_groups' runs */
    for (size_t done = 0; done < made && !err;) {
        if (em_stop_signal()) { /* stop between batches: the scored requests are recorded */
            err = em_error_new(EM_EXIT_INTERRUPTED,
                               "interrupted by signal %d (%s) after %zu of this rank's %zu "
                               "requests; the scored ones are recorded: finish with `evalmesh "
                               "run --resume %s`",
                               em_stop_signal(), strsignal(em_stop_signal()), done, made,
                               s->run_dir ? s->run_dir : "RUN_DIR");
            break;
        }
        if (s->share_prefix && reqs[done].score_from > 0) {
            /* consecutive runs of an example's requests reading one context, up to
             * prefix_limit context positions (one run at least) */
            size_t groups = 0;
            int64_t positions = 0;
            bounds[0] = done;
            while (done < made && reqs[done].score_from > 0 &&
                   (groups == 0 || positions + reqs[done].score_from <= s->prefix_limit)) {
                size_t end = done + 1;
                while (end < made && owner[end] == owner[done] &&
                       same_context(&reqs[done], &reqs[end]))
                    end++;
                positions += reqs[done].score_from;
                bounds[++groups] = done = end;
            }
            err = score_groups(s, reqs, index, bounds, groups);
            continue;
        }
        size_t at = 0;
        int64_t tokens = 0;
        int count = 0;
        while (done < made) {
            const em_request *q = &reqs[done];
            if (s->share_prefix && q->score_from > 0) break; /* a group's first */
            em_window_record r;
            if (recorded(s, index[done], q, &r)) {
                fold_request(s, index[done], r.nll, r.argmax, r.target, r.token_count);
                s->reused++;
                done++;
                continue;
            }
            if (count > 0 &&
                (tokens + q->T > s->limit || at + (size_t)q->continuation_tokens > capacity))
                break;
            members[count] = done;
            batch[count++] =
                (em_batch_window){q->input, q->target, q->T, q->score_from, nll + at, argmax + at};
            at += (size_t)q->continuation_tokens;
            tokens += q->T;
            done++;
        }
        if (count == 0) continue; /* the rest taken from records, or a group next */
        err = s->be->score_batch(s->forward, batch, count);
        s->computed_tokens += tokens;
        s->request_tokens += tokens;
        for (int b = 0; b < count && !err; b++)
            keep_scored(s, index[members[b]], &reqs[members[b]], batch[b].nll, batch[b].argmax);
    }
    free(members);
    free(bounds);
    free(owner);
    for (size_t k = 0; k < made; k++) em_request_clear(&reqs[k]);
    free(reqs);
    free(index);
    free(batch);
    free(nll);
    free(argmax);
    return err;
}

/* Whether generation request `index` (q, prompt_used of its prompt ids kept) has a record: then
 * *text is its text (malloc'd), decoded from the recorded ids and cut at q's stop strings. */
static bool recorded_generation(scoring *s, size_t index, const em_generate_request *q,
                                int prompt_used, char **text) {
    const em_records_index *ix = &s->found;
    if (!ix->by_window || index >= ix->window_limit) return false;
    const em_record_place *at = &ix->by_window[index];
    if (at->file < 0 || at->token_count > q->max_gen_toks) return false;
    em_window_record r;
    em_status err = em_records_index_load(ix, index, &r, &s->buf, &s->cap);
    if (!err && (r.bytes != prompt_used ||
                 memcmp(r.target, r.argmax, (size_t)r.token_count * sizeof *r.target) != 0))
        return false;
    size_t length;
    bool stopped;
    if (!err)
        err = em_generation_text(s->tok, r.target, r.token_count, q->until, q->until_count, text,
                                 &length, &stopped);
    if (err) {
        em_log_warn("%s; the generation is computed again", err->message);
        em_error_free(err);
        return false;
    }
    return true;
}

/* Keeps finished generation g of request `index`: its text, and its record (the generated ids as
 * targets and argmaxes, nll 0, words its em_generate_stop, bytes the prompt ids kept). */
static void keep_generated(scoring *s, size_t index, const em_generation *g) {
    s->texts[index] = em_xstrdup(g->text);
    s->generated_tokens += g->count;
    if (!s->writer) return;
    double *nll = em_xcalloc(g->count ? (size_t)g->count : 1, sizeof *nll);
    keep_recording(s, em_records_append(s->writer, &(em_window_record){
                                                       .window = (int64_t)index,
                                                       .token_count = g->count,
                                                       .words = g->stop,
                                                       .bytes = g->prompt_used,
                                                       .target = g->ids,
                                                       .argmax = g->ids,
                                                       .nll = nll,
                                                   }));
    free(nll);
}

/* The positions generation request q takes in a batch: its prompt ids kept and max_gen_toks. */
static int64_t generation_positions(const scoring *s, const em_generate_request *q) {
    int room = s->max_length - q->max_gen_toks;
    return (int64_t)(q->prompt_length < room ? q->prompt_length : room) + q->max_gen_toks;
}

/* Generates the texts of the generate_until examples among flat[first, end): those with records
 * are taken from them, the others decoded in batches of at most s->limit positions (one
 * sequence at least), in order; each finished one is kept and recorded. */
static em_status generate_range(scoring *s, const flat_example *flat, size_t first, size_t end) {
    size_t total = 0;
    for (size_t i = first; i < end; i++) total += generative(flat[i].task);
    if (total == 0) return NULL;
    em_generate_request *reqs = em_xcalloc(total, sizeof *reqs);
    size_t *index = em_xcalloc(total, sizeof *index); /* each request's flat request index */
    int32_t **ids = em_xcalloc(total, sizeof *ids);
    em_status err = NULL;
    size_t made = 0;
    for (size_t i = first; i < end && !err; i++) {
        if (!generative(flat[i].task)) continue;
        em_generation_request g;
        em_generation_request_of(flat[i].task, flat[i].example, &g);
        size_t length = 0;
        err = em_tokenizer_encode(s->tok, g.context, strlen(g.context),
                                  em_request_encode_options(s->tok, g.context, &s->request),
                                  &ids[made], &length);
        if (!err && length == 0)
            err = em_error_new(EM_EXIT_BAD_INPUT,
                               "the prompt encodes to no ids and the tokenizer adds no BOS: "
                               "nothing to generate from");
        if (!err && g.max_gen_toks >= s->max_length)
            err = em_error_new(EM_EXIT_BAD_INPUT,
                               "max_gen_toks %d does not leave room for a prompt in max_length %d",
                               g.max_gen_toks, s->max_length);
        if (err) {
            err = em_error_prefix(err, "task %s, document %zu", flat[i].task->name,
                                  flat[i].example->doc_index);
            made++; /* its ids are freed with the others */
            break;
        }
        reqs[made] = (em_generate_request){ids[made], (int)length, (const char *const *)g.until,
                                           (int)g.until_count, g.max_gen_toks};
        index[made] = flat[i].first_request;
        int64_t positions = generation_positions(s, &reqs[made]);
        char *text = NULL;
        if (recorded_generation(s, index[made], &reqs[made], (int)(positions - g.max_gen_toks),
                                &text)) {
            s->texts[index[made]] = text;
            s->reused++;
            free(ids[made]);
            ids[made] = NULL;
            continue;
        }
        made++;
    }
    for (size_t done = 0; done < made && !err;) {
        if (em_stop_signal()) {
            err = em_error_new(EM_EXIT_INTERRUPTED,
                               "interrupted by signal %d (%s) after %zu of this rank's %zu "
                               "generations; the finished ones are recorded: finish with "
                               "`evalmesh run --resume %s`",
                               em_stop_signal(), strsignal(em_stop_signal()), done, made,
                               s->run_dir ? s->run_dir : "RUN_DIR");
            break;
        }
        size_t count = 0;
        int64_t positions = 0;
        while (done + count < made) {
            int64_t p = generation_positions(s, &reqs[done + count]);
            if (count > 0 && positions + p > s->limit) break;
            positions += p;
            count++;
        }
        em_generation *out = em_xcalloc(count, sizeof *out);
        err = em_generate(s->be, s->forward, s->tok, s->max_length, reqs + done, (int)count, out);
        for (size_t j = 0; j < count; j++) {
            if (out[j].finished) {
                keep_generated(s, index[done + j], &out[j]);
                s->computed_tokens += out[j].prompt_used;
                s->request_tokens += out[j].prompt_used;
            }
            em_generation_free(&out[j]);
        }
        free(out);
        if (err && err->exit_code == EM_EXIT_INTERRUPTED) {
            em_status stopped = em_error_new(EM_EXIT_INTERRUPTED,
                                             "%s; the finished ones are recorded: finish with "
                                             "`evalmesh run --resume %s`",
                                             err->message, s->run_dir ? s->run_dir : "RUN_DIR");
            em_error_free(err);
            err = stopped;
        }
        done += count;
    }
    for (size_t k = 0; k < total; k++) free(ids[k]);
    free(ids);
    free(reqs);
    free(index);
    return err;
}

/* The flat request indices [*from, *to) of examples [a, b). */
static void request_span(const flat_example *flat, size_t a, size_t b, size_t *from, size_t *to) {
    *from = *to = 0;
    if (a >= b) return;
    *from = flat[a].first_request;
    *to = flat[b - 1].first_request + flat[b - 1].requests;
}

/* Gathers every rank's sums and flags over dp: rank r's requests are those of examples
 * first[r] .. first[r+1]-1, contiguous in the request list, and land at their own indices. */
static em_status gather_scores(em_comm *dp, int dp_size, int dp_rank, const flat_example *flat,
                               const int64_t *first, double *loglik, double *greedy) {
    if (dp_size == 1) return NULL;
    size_t cap = 1, from, to;
    for (int r = 0; r < dp_size; r++) {
        request_span(flat, (size_t)first[r], (size_t)first[r + 1], &from, &to);
        if (to - from > cap) cap = to - from;
    }
    /* each rank's block: [loglik (cap), greedy (cap)] */
    double *send = em_xcalloc(2 * cap, sizeof *send);
    double *recv = em_xmalloc((size_t)dp_size * 2 * cap * sizeof *recv);
    request_span(flat, (size_t)first[dp_rank], (size_t)first[dp_rank + 1], &from, &to);
    memcpy(send, loglik + from, (to - from) * sizeof *send);
    memcpy(send + cap, greedy + from, (to - from) * sizeof *send);
    em_status err = em_allgather(dp, send, recv, 2 * cap * sizeof *send);
    for (int r = 0; r < dp_size && !err; r++) {
        request_span(flat, (size_t)first[r], (size_t)first[r + 1], &from, &to);
        const double *block = recv + (size_t)r * 2 * cap;
        memcpy(loglik + from, block, (to - from) * sizeof *loglik);
        memcpy(greedy + from, block + cap, (to - from) * sizeof *greedy);
    }
    free(send);
    free(recv);
    return err;
}

/* Gathers every rank's generated texts over dp: rank r's are those of the generate_until examples
 * among first[r] .. first[r+1]-1, sent one after another, each with its NUL, and land at their
 * requests' indices. */
static em_status gather_texts(em_comm *dp, int dp_size, int dp_rank, const flat_example *flat,
                              const int64_t *first, char **texts) {
    bool any = false;
    for (int64_t i = 0; i < first[dp_size] && !any; i++) any = generative(flat[i].task);
    if (dp_size == 1 || !any) return NULL;
    uint64_t mine = 0;
    for (int64_t i = first[dp_rank]; i < first[dp_rank + 1]; i++)
        if (generative(flat[i].task)) mine += strlen(texts[flat[i].first_request]) + 1;
    uint64_t *sizes = em_xmalloc((size_t)dp_size * sizeof *sizes);
    em_status err = em_allgather(dp, &mine, sizes, sizeof mine);
    size_t cap = 1;
    for (int r = 0; r < dp_size && !err; r++)
        if (sizes[r] > cap) cap = (size_t)sizes[r];
    char *send = em_xcalloc(cap, 1), *recv = em_xmalloc((size_t)dp_size * cap);
    char *p = send;
    for (int64_t i = first[dp_rank]; i < first[dp_rank + 1] && !err; i++)
        if (generative(flat[i].task)) {
            size_t n = strlen(texts[flat[i].first_request]) + 1;
            memcpy(p, texts[flat[i].first_request], n);
            p += n;
        }
    if (!err) err = em_allgather(dp, send, recv, cap);
    for (int r = 0; r < dp_size && !err; r++) {
        if (r == dp_rank) continue;
        const char *q = recv + (size_t)r * cap;
        for (int64_t i = first[r]; i < first[r + 1]; i++)
            if (generative(flat[i].task)) {
                texts[flat[i].first_request] = em_xstrdup(q);
                q += strlen(q) + 1;
            }
    }
    free(sizes);
    free(send);
    free(recv);
    return err;
}

/* "<task>" with every '.' made '_', so that "<stage>/<task>.<metric>" splits at its metric. */
static char *key_stage(const char *stage, const char *task) {
    char *key = em_xasprintf("%s/%s", stage, task);
    for (char *c = key + strlen(stage) + 1; *c; c++)
        if (*c == '.') *c = '_';
    return key;
}

/* Adds e's requests' texts (each context and continuation with its NUL) to h. */
static void hash_requests(em_sha256 *h, const flat_example *e) {
    if (generative(e->task)) { /* its prompt, stop strings and max_gen_toks */
        em_generation_request g;
        em_generation_request_of(e->task, e->example, &g);
        char max[48];
        snprintf(max, sizeof max, "generate_until max_gen_toks %d", g.max_gen_toks);
        em_sha256_update(h, g.context, strlen(g.context) + 1);
        for (size_t u = 0; u < g.until_count; u++)
            em_sha256_update(h, g.until[u], strlen(g.until[u]) + 1);
        em_sha256_update(h, max, strlen(max) + 1);
        return;
    }
    for (size_t r = 0; r < e->requests; r++) {
        const char *context, *continuation;
        request_texts(e, r, &context, &continuation);
        em_sha256_update(h, context, strlen(context) + 1);
        em_sha256_update(h, continuation, strlen(continuation) + 1);
    }
}

/* Whether every example's value of row is 0 or 1 by its definition: not the log-likelihood, and
 * multiple_choice_grade only when no target score gives partial credit. */
static bool zero_one_metric(const em_task *task, const em_task_metric_row *row) {
    if (row->flag == EM_TASK_METRIC_LOGLIKELIHOOD) return false;
    if (row->flag != EM_TASK_METRIC_MULTIPLE_CHOICE_GRADE) return true;
    for (size_t k = 0; k < task->example_count; k++) {
        const em_task_example *e = &task->examples[k];
        for (size_t c = 0; e->target_scores && c < e->choice_count; c++)
            if (e->target_scores[c] != 0 && e->target_scores[c] != 1) return false;
    }
    return true;
}

/* Task task's examples (flat, its n outcomes) into values under key: each one's document index,
 * the sha256 of its requests' texts, and its value of every metric that is a mean over the
 * examples (not perplexity). */
static void add_example_set(em_example_values *values, const char *key, const em_task *task,
                            const flat_example *flat, const em_example_outcome *outcomes) {
    size_t n = task->example_count;
    em_example_set *set = em_example_values_add_set(values, key, n);
    for (size_t k = 0; k < n; k++) {
        em_sha256 h;
        em_sha256_init(&h);
        hash_requests(&h, &flat[k]);
        uint8_t digest[32];
        em_sha256_final(&h, digest);
        em_sha256_to_hex(digest, set->sha256[k]);
        set->doc[k] = (int64_t)flat[k].example->doc_index;
    }
    for (size_t r = 0; r < em_task_metric_row_count; r++) {
        const em_task_metric_row *row = &em_task_metric_rows[r];
        if (!(task->metrics & row->flag) || row->exp_of_negative_mean) continue;
        double *column =
            em_example_set_add_column(set, row->name, zero_one_metric(task, row))->values;
        for (size_t k = 0; k < n; k++) column[k] = row->value(&outcomes[k]);
    }
}

/* A group's examples into values under key: its member tasks' sets (values->sets[t] is task t's)
 * one after another, with the group's metrics (a size-weighted mean of its members' is the mean
 * over these examples). */
static void add_group_set(em_example_values *values, const char *key,
                          const em_task_group_result *group, em_task *const *tasks,
                          size_t task_count) {
    size_t *members = em_xcalloc(task_count ? task_count : 1, sizeof *members), count = 0;
    for (size_t t = 0; t < task_count; t++)
        if (tasks[t]->group && !strcmp(tasks[t]->group, group->name)) members[count++] = t;
    const char *metrics[8];
    for (size_t i = 0; i < group->metric_count; i++) metrics[i] = group->metrics[i].row->name;
    em_example_values_add_concatenation(values, key, members, count, metrics, group->metric_count);
    free(members);
}

/* Scores the text generated for generate_until example e into *out and, with samples, writes its
 * samples line (the generated text and the filtered answer). */
static em_status score_generation(const em_task *task, const flat_example *e, const char *text,
                                  em_atomic_file *samples, em_example_outcome *out) {
    char *answer = NULL;
    em_status err = em_generation_score(task, e->example, text, &answer, out);
    if (err) err = em_error_prefix(err, "task %s, document %zu", task->name, e->example->doc_index);
    if (!err && samples) {
        char *line = em_task_generation_sample_json(task, e->example, text, answer, out);
        err = em_atomic_file_write(samples, line, strlen(line));
        if (!err) err = em_atomic_file_write(samples, "\n", 1);
        free(line);
    }
    free(answer);
    return err;
}

/* Every example's outcome, each task's metrics into m and results (task_count), every example's
 * values into m->examples (each task's, then each group's), and on rank 0 the table,
 * lm_eval_results.json, the example file (examples_<stage>.json, stages/report/example_file.h) and
 * the samples files. */
static em_status fold_results(const em_stage *self, const em_run_context *ctx, const task_state *st,
                              const flat_example *flat, size_t count, const double *loglik,
                              const double *greedy, char *const *texts, bool print, em_metrics *m) {
    em_task_result *results = em_xcalloc(st->task_count ? st->task_count : 1, sizeof *results);
    m->examples = em_example_values_new(self->name);
    bool log_samples = em_node_option_bool(self->options, "log_samples");
    em_status err = NULL;
    size_t at = 0; /* the first flat example of task t */
    for (size_t t = 0; t < st->task_count && !err; t++) {
        const em_task *task = st->tasks[t];
        size_t n = task->example_count;
        em_example_outcome *outcomes = em_xcalloc(n ? n : 1, sizeof *outcomes);
        char *path = log_samples && ctx->run_dir && ctx->rank == 0
                         ? em_xasprintf("%s/samples_%s.jsonl", ctx->run_dir, task->name)
                         : NULL;
        em_atomic_file *samples = NULL;
        if (path) err = em_atomic_file_begin(path, 0644, &samples);
        for (size_t k = 0; k < n && !err; k++) {
            const flat_example *e = &flat[at + k];
            size_t choices = e->example->choice_count, q = e->first_request;
            if (generative(task)) {
                err = score_generation(task, e, texts[q], samples, &outcomes[k]);
                continue;
            }
            bool *flags = em_xmalloc(choices * sizeof *flags);
            for (size_t c = 0; c < choices; c++) flags[c] = greedy[q + c] != 0;
            em_example_scores scores = {loglik + q, flags,
                                        mutual_info(task) ? loglik + q + choices : NULL};
            em_example_outcome_of(task, e->example, &scores, &outcomes[k]);
            if (samples) {
                char *line = em_task_sample_json(task, e->example, &scores, &outcomes[k]);
                err = em_atomic_file_write(samples, line, strlen(line));
                if (!err) err = em_atomic_file_write(samples, "\n", 1);
                free(line);
            }
            free(flags);
        }
        if (samples)
            err = err ? (em_atomic_file_abandon(samples), err) : em_atomic_file_commit(samples);
        free(path);
        em_task_result_of(task, outcomes, &results[t]);
        char *stage = key_stage(self->name, task->name);
        add_example_set(m->examples, stage, task, flat + at, outcomes);
        free(outcomes);
        for (size_t i = 0; i < results[t].metric_count; i++) {
            const em_task_metric_value *v = &results[t].metrics[i];
            if (isnan(v->stderr_value))
                em_metrics_put(m, stage, v->row->name, v->value);
            else
                em_metrics_put_with_error(m, stage, v->row->name, v->value, v->stderr_value);
        }
        em_metrics_put(m, stage, "examples", (double)n);
        free(stage);
        at += n;
    }
    em_task_group_result *groups = NULL;
    size_t group_count = 0;
    if (!err) em_task_groups_of(results, st->task_count, &groups, &group_count);
    for (size_t g = 0; g < group_count; g++) {
        char *stage = key_stage(self->name, groups[g].name);
        for (size_t i = 0; i < groups[g].metric_count; i++) {
            const em_task_metric_value *v = &groups[g].metrics[i];
            if (isnan(v->stderr_value))
                em_metrics_put(m, stage, v->row->name, v->value);
            else
                em_metrics_put_with_error(m, stage, v->row->name, v->value, v->stderr_value);
        }
        em_metrics_put(m, stage, "examples", (double)groups[g].example_count);
        add_group_set(m->examples, stage, &groups[g], st->tasks, st->task_count);
        free(stage);
    }
    if (!err && ctx->rank == 0 && ctx->run_dir) {
        char *json = em_task_results_json(results, st->task_count, groups, group_count);
        char *path = em_xasprintf("%s/lm_eval_results.json", ctx->run_dir);
        err = em_atomic_write(path, json, strlen(json), 0644);
        free(path);
        free(json);
    }
    if (!err && ctx->run_dir) {
        m->examples_file = em_xasprintf("examples_%s.json", self->name);
        if (ctx->rank == 0) {
            char *path = em_xasprintf("%s/%s", ctx->run_dir, m->examples_file);
            err = em_example_file_write(path, m->examples);
            free(path);
        }
    }
    if (!err && print && ctx->rank == 0)
        em_task_results_print(results, st->task_count, groups, group_count, stdout);
    free(groups);
    free(results);
    return err;
}

/* The sha256 of every request's texts, in order: what the request records were written for (in
 * the records key's dataset place), so a resume refuses records of other tasks or prompts. */
static void requests_sha256(const flat_example *flat, size_t count, char hex[65]) {
    em_sha256 h;
    em_sha256_init(&h);
    for (size_t i = 0; i < count; i++) hash_requests(&h, &flat[i]);
    uint8_t digest[32];
    em_sha256_final(&h, digest);
    em_sha256_to_hex(digest, hex);
}

/* The request records of an earlier attempt (when resuming) and this attempt's writer. */
static em_status open_records(const em_stage *self, const em_run_context *ctx, const em_mesh *mesh,
                              const em_model *model, const flat_example *flat, size_t count,
                              size_t request_count, scoring *s) {
    if (!ctx->run_dir || !ctx->recipe_sha256) return NULL;
    char tasks_hex[65];
    requests_sha256(flat, count, tasks_hex);
    const task_state *st = self->state;
    em_records_key key = em_records_key_of(model->digest, tasks_hex, ctx->recipe_sha256,
                                           em_precision_name(st->precision));
    em_status err = NULL;
    if (ctx->resume) {
        err = em_records_index_read(ctx->run_dir, self->name, &key, request_count, &s->found);
        if (!err && s->found.damaged)
            em_log_warn("task %s: %zu torn or damaged request records skipped", self->name,
                        s->found.damaged);
        /* every rank has read the earlier records before any rank writes new ones */
        if (!err && ctx->world_size > 1) err = em_barrier(ctx->world);
    }
    if (!err && mesh->tp_rank == 0 && mesh->cp_rank == 0)
        keep_recording(s, em_records_writer_open(
                              ctx->run_dir, self->name, ctx->rank, &key,
                              em_node_option_double(self->options, "records_flush_s"), &s->writer));
    return err;
}

static void free_metrics(void *data) {
    em_metrics_free(data);
}

static em_status task_run(em_stage *self, const em_run_context *ctx) {
    task_state *st = self->state;
    const em_model *model = em_stage_input_artifact(self, "model", 0)->data;
    em_mesh *mesh = em_stage_mesh(self, ctx);
    const em_forward_backend *be = st->backend;
    if (!model->tokenizer)
        return em_error_new(EM_EXIT_BAD_INPUT, "model %s has no tokenizer: tasks are text",
                            model->path ? model->path : "");
    bool split = mesh->tp > 1 || mesh->cp > 1;
    if (split && be->gpu_buffers && !em_backend_find(mesh->backend)->gpu_buffers)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "device %s splits requests through buffers in GPU memory, but %s has "
                            "backend %s, whose collectives take host memory (use backend nccl)",
                            be->name, em_stage_mesh_name(self), mesh->backend);
    double start = em_clock_seconds();
    size_t count = 0, request_count = 0;
    flat_example *flat = flatten(st->tasks, st->task_count, &count, &request_count);
    int64_t *cost = em_xmalloc((count ? count : 1) * sizeof *cost);
    for (size_t i = 0; i < count; i++) cost[i] = flat[i].cost;
    int64_t *first = em_xmalloc(((size_t)mesh->dp + 1) * sizeof *first);
    em_window_ranges(cost, count, mesh->dp, first);
    free(cost);

    em_forward_link tp = {mesh->tp_group, 0}, cp = {mesh->cp_group, 0};
    em_forward_groups groups = {.tp = em_forward_group_of(&tp), .cp = em_forward_group_of(&cp)};
    const em_node *max_length = em_node_get(self->options, "max_length");
    scoring s = {
        .be = be,
        .tok = model->tokenizer,
        .request = {.max_length = em_node_is_null(max_length)
                                      ? model->config.n_ctx_train
                                      : (int)em_node_option_int(self->options, "max_length"),
                    .add_bos = em_node_is_null(em_node_get(self->options, "add_bos"))
                                   ? -1
                                   : em_node_option_bool(self->options, "add_bos")},
        .limit = mesh->cp > 1 ? 1 : st->batch_tokens,
        .share_prefix = be->score_shared_prefixes && mesh->cp == 1,
        .prefix_limit = st->prefix_tokens,
        .run_dir = ctx->run_dir,
        .loglik = em_xcalloc(request_count ? request_count : 1, sizeof(double)),
        .greedy = em_xcalloc(request_count ? request_count : 1, sizeof(double)),
        .texts = em_xcalloc(request_count ? request_count : 1, sizeof(char *)),
    };
    s.max_length = s.request.max_length;
    em_status err = be->create(model, &groups, st->threads,
                               &(em_forward_options){.precision = st->precision}, &s.forward);
    if (err) {
        free(flat);
        free(first);
        free(s.loglik);
        free(s.greedy);
        free(s.texts);
        return err;
    }
    err = open_records(self, ctx, mesh, model, flat, count, request_count, &s);
    if (!err)
        err = score_range(&s, flat, (size_t)first[mesh->dp_rank], (size_t)first[mesh->dp_rank + 1]);
    if (!err)
        err = generate_range(&s, flat, (size_t)first[mesh->dp_rank],
                             (size_t)first[mesh->dp_rank + 1]);
    const char *kernel = be->kernel ? be->kernel(s.forward) : be->name; /* static names */
    be->free(s.forward);
    em_records_writer *writer = s.writer;
    s.writer = NULL; /* closed here, whatever comes back */
    keep_recording(&s, em_records_writer_close(writer));
    em_records_index_free(&s.found);
    free(s.buf);
    if (ctx->resume && !err)
        em_log_info("task %s: %zu requests taken from the run's records", self->name, s.reused);
    double seconds = em_clock_seconds() - start;
    if (!err)
        err =
            gather_scores(mesh->dp_group, mesh->dp, mesh->dp_rank, flat, first, s.loglik, s.greedy);
    if (!err) err = gather_texts(mesh->dp_group, mesh->dp, mesh->dp_rank, flat, first, s.texts);
    em_metrics *m = em_metrics_new();
    m->model_path = em_xstrdup(model->path ? model->path : "");
    m->model_header_sha256 = em_xstrdup(model->header_sha256);
    m->model_digest = em_xstrdup(model->digest);
    m->precision = em_precision_name(st->precision);
    if (!err) {
        size_t own = (size_t)(first[mesh->dp_rank + 1] - first[mesh->dp_rank]);
        em_log_info("task %s: %zu of %zu examples on this rank, %lld positions computed for "
                    "requests of %lld positions in %.2f s (%d threads, precision %s, kernel %s)",
                    self->name, own, count, (long long)s.computed_tokens,
                    (long long)s.request_tokens, seconds, st->threads,
                    em_precision_name(st->precision), kernel);
        if (s.generated_tokens > 0)
            em_log_info("task %s: %lld tokens generated on this rank", self->name,
                        (long long)s.generated_tokens);
        err = fold_results(self, ctx, st, flat, count, s.loglik, s.greedy, s.texts,
                           em_node_option_bool(self->options, "print_table"), m);
    }
    free(flat);
    free(first);
    free(s.loglik);
    free(s.greedy);
    for (size_t i = 0; i < request_count; i++) free(s.texts[i]);
    free(s.texts);
    if (err) {
        em_metrics_free(m);
        return err;
    }
    self->output = (em_artifact){.data = m, .free = free_metrics};
    return NULL;
}

static void task_destroy(em_stage *self) {
    task_state *st = self->state;
    if (!st) return;
    em_tasks_free(st->tasks, st->task_count);
    free(st);
}

const em_stage_kind em_stage_kind_task = {
    .name = "task",
    .summary = "benchmark tasks (lm-eval YAML, BIG-bench) scored from log-likelihoods (acc, "
               "acc_norm, multiple_choice_grade) or greedy generation (exact_match), the same "
               "bits on any number of ranks",
    .produces = "metrics",
    .inputs = task_inputs,
    .collective = true, /* over the mesh's dp, tp and cp groups */
    .init = task_init,
    .run = task_run,
    .destroy = task_destroy,
};
