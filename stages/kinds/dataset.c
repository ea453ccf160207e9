/* Stage `dataset`: turns an input file into scoring windows and gives this rank its share.
 *
 * Only rank 0 reads and tokenizes the file; it broadcasts the token stream and the document
 * table to the other ranks through the mesh's world group (so the stage is collective). Every
 * rank then builds the same window plan from the stream (cheap: offsets only), computes the same
 * token-balanced contiguous split over the mesh's dp group, and keeps its dp rank's windows: the
 * ranks of one tp x cp group share their windows. The mesh is the `mesh` option's stage, else
 * the run's default world mesh (dp = world size). The price is one copy of the
 * corpus's token ids per rank (4 bytes a token: 1.2 MB for WikiText-2's test split); the
 * tokenizer runs once for the whole run, never once per rank. An error on rank 0 (missing file,
 * invalid UTF-8, ids outside the vocabulary) is broadcast too, so every rank stops with it.
 * Meanwhile the other ranks wait in the broadcast, so reading and tokenizing must fit in the
 * recipe's collective_timeout_s (WikiText-2's test split, 1.3 MB, takes under a second). With
 * max_windows only the tokens (chunked, sliding) or documents (rolling) those windows need are
 * tokenized, and a one-document text is read in blocks (streamed_text.h): memory does not grow
 * with the rest of the file.
 *
 * Produces a "dataset" artifact (em_dataset, stages/data/dataset.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/comm/comm.h"
#include "runner/comm/mesh_groups.h"
#include "runner/stage.h"
#include "util/log.h"
#include "stages/data/corpus.h"
#include "stages/data/dataset_build.h"
#include "stages/data/window_ranges.h"
#include "stages/model/loaded_model.h"
#include "stages/tokenizer/tokenizer.h"

typedef struct dataset_state {
    char *path; /* resolved against the recipe's folder */
    em_corpus_options corpus;
    bool add_bos_set; /* add_bos given in the recipe (else the tokenizer's choice) */
    em_protocol protocol;
    int window_tokens; /* the protocol's n_ctx or max_length (em_protocol_window_option) */
    int stride;
    int64_t max_windows;
} dataset_state;

static em_status option_error(const em_stage *self, const char *key, const char *fmt,
                              const char *arg) {
    const em_map_entry *e = em_node_get_entry(self->options, key);
    em_mark mark = e ? e->value->mark : self->mark;
    return em_error_at(EM_EXIT_BAD_INPUT, mark, fmt, arg);
}

static em_status dataset_init(em_stage *self, const em_run_context *ctx) {
    dataset_state *st = em_xcalloc(1, sizeof *st);
    self->state = st;
    const em_node *o = self->options;
    em_status err = em_stage_input_file(self, "path", false, &st->path);
    if (err) return err;
    const char *format = em_node_option_string(o, "format");
    st->corpus.format = strcmp(format, "auto") == 0
                            ? em_input_format_from_path(st->path)
                            : (em_input_format)em_input_format_parse(format);
    st->corpus.text_field = em_node_option_string(o, "text_field");
    st->corpus.split = (em_split_rule)em_split_rule_parse(em_node_option_string(o, "split"));
    st->corpus.separator = em_node_get_string(o, "separator", NULL);
    st->corpus.max_documents = em_node_option_int(o, "max_documents");
    st->corpus.wikitext_detokenize =
        strcmp(em_node_option_string(o, "detokenize"), "wikitext") == 0;
    st->add_bos_set = em_node_get(o, "add_bos") != NULL;
    st->corpus.add_bos = em_node_get_bool(o, "add_bos", false);
    st->protocol = (em_protocol)em_protocol_parse(em_node_option_string(o, "protocol"));
    st->window_tokens = (int)em_node_option_int(o, em_protocol_window_option(st->protocol));
    st->stride = (int)em_node_option_int(o, "stride");
    st->max_windows = em_node_option_int(o, "max_windows");

    if (st->corpus.split == EM_SPLIT_SEPARATOR && !st->corpus.separator)
        return option_error(self, "split", "split: %s needs a `separator:` string", "separator");
    if (st->protocol != EM_PROTOCOL_ROLLING) {
        if (st->corpus.split != EM_SPLIT_NONE)
            return option_error(self, "split",
                                "protocol %s reads the whole file as one text: split must be none",
                                em_protocol_name(st->protocol));
        if (st->corpus.format == EM_FORMAT_JSONL)
            return option_error(self, "path",
                                "protocol %s reads the whole file as one text: JSONL documents "
                                "need protocol rolling",
                                em_protocol_name(st->protocol));
    }
    if (st->protocol == EM_PROTOCOL_SLIDING && st->window_tokens > 0 &&
        st->stride >= st->window_tokens) {
        char text[96];
        snprintf(text, sizeof text, "stride = %d must be less than max_length = %d", st->stride,
                 st->window_tokens);
        return option_error(self, "stride", "%s", text);
    }
    return NULL;
}

/* What rank 0 tells the others before the data. */
typedef struct corpus_header {
    int64_t exit_code; /* 0: the data follows; else the error message does */
    int64_t n_tokens;
    int64_t n_docs;
    int64_t documents;
    int64_t empty_documents;
    int64_t stopped_early;
    int64_t message_bytes;
    char sha256[72];
} corpus_header;

/* The tokens max_windows chunked or sliding windows need: the stream is tokenized no further
 * (the windows are the same as the whole text's). 0: all (no cap, or rolling, which stops after
 * the document that passes the cap: corpus.h's rolling_max_windows). */
static int64_t tokens_needed(const dataset_state *st) {
    if (st->max_windows <= 0) return 0;
    if (st->protocol == EM_PROTOCOL_CHUNKED) return st->max_windows * st->window_tokens;
    if (st->protocol == EM_PROTOCOL_SLIDING)
        return (st->max_windows - 1) * st->stride + st->window_tokens;
    return 0;
}

/* Rank 0 reads the corpus; every rank ends with the same em_corpus (or the same error). */
static em_status share_corpus(const dataset_state *st, const em_tokenizer *tok, em_comm *world,
                              em_corpus *corpus) {
    corpus_header h = {0};
    em_status err = NULL;
    if (world->rank == 0) {
        em_corpus_options opt = st->corpus;
        if (st->protocol == EM_PROTOCOL_ROLLING)
            opt.add_bos = false;
        else if (!st->add_bos_set)
            opt.add_bos = em_tokenizer_default_options(tok).add_bos;
        opt.max_tokens = tokens_needed(st);
        if (st->protocol == EM_PROTOCOL_ROLLING) {
            opt.rolling_max_windows = st->max_windows;
            opt.rolling_max_length = st->window_tokens;
        }
        err = em_corpus_read(st->path, &opt, tok, corpus);
        if (err) {
            h.exit_code = err->exit_code;
            h.message_bytes = (int64_t)strlen(err->message) + 1;
        } else {
            h.n_tokens = corpus->n_tokens;
            h.n_docs = (int64_t)corpus->n_docs;
            h.documents = corpus->documents;
            h.empty_documents = corpus->empty_documents;
            h.stopped_early = corpus->stopped_early;
            memcpy(h.sha256, corpus->sha256, sizeof corpus->sha256);
        }
    }
    if (world->size == 1) return err;
    em_status cerr = em_broadcast(world, &h, sizeof h, 0);
    if (cerr) {
        em_error_free(err);
        if (world->rank == 0) em_corpus_free(corpus);
        return cerr;
    }
    if (h.exit_code) {
        if (world->rank == 0) {
            cerr = em_broadcast(world, err->message, (size_t)h.message_bytes, 0);
            if (cerr) em_error_free(cerr);
            return err;
        }
        char *message = em_xmalloc((size_t)h.message_bytes);
        cerr = em_broadcast(world, message, (size_t)h.message_bytes, 0);
        if (cerr) {
            free(message);
            return cerr;
        }
        err = em_error_new((int)h.exit_code, "rank 0 could not read the dataset: %s", message);
        free(message);
        return err;
    }
    if (world->rank != 0) {
        corpus->n_tokens = h.n_tokens;
        corpus->n_docs = (size_t)h.n_docs;
        corpus->documents = h.documents;
        corpus->empty_documents = h.empty_documents;
        corpus->stopped_early = h.stopped_early != 0;
        memcpy(corpus->sha256, h.sha256, sizeof corpus->sha256);
        corpus->stream = em_xmalloc((size_t)(h.n_tokens ? h.n_tokens : 1) * sizeof(int32_t));
        corpus->docs = em_xmalloc((size_t)(h.n_docs ? h.n_docs : 1) * sizeof *corpus->docs);
    }
    cerr = em_broadcast(world, corpus->stream, (size_t)h.n_tokens * sizeof(int32_t), 0);
    if (!cerr) cerr = em_broadcast(world, corpus->docs, (size_t)h.n_docs * sizeof *corpus->docs, 0);
    if (cerr) em_corpus_free(corpus);
    return cerr;
}

static em_status make_plan(const dataset_state *st, const em_tokenizer *tok,
                           const em_corpus *corpus, em_window_plan *plan) {
    switch (st->protocol) {
    case EM_PROTOCOL_CHUNKED: {
        bool add_bos =
            st->add_bos_set ? st->corpus.add_bos : em_tokenizer_default_options(tok).add_bos;
        return em_plan_chunked(corpus->n_tokens, st->window_tokens,
                               add_bos ? em_tokenizer_bos(tok) : -1, st->max_windows, plan);
    }
    case EM_PROTOCOL_SLIDING:
        return em_plan_sliding(corpus->n_tokens, st->window_tokens, st->stride, st->max_windows,
                               plan);
    case EM_PROTOCOL_ROLLING: {
        int32_t prefix = em_tokenizer_bos(tok) >= 0 ? em_tokenizer_bos(tok) : em_tokenizer_eos(tok);
        if (prefix < 0)
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "protocol rolling needs a BOS or EOS token as the first window's "
                                "prefix, and the tokenizer has neither");
        em_status err = em_plan_rolling(corpus->docs, corpus->n_docs, st->window_tokens, prefix,
                                        st->max_windows, plan);
        if (!err && plan->count == 0)
            err = em_error_new(EM_EXIT_BAD_INPUT, "no document has any text (%lld empty)",
                               (long long)corpus->empty_documents);
        return err;
    }
    }
    return NULL;
}

static void free_dataset(void *data) {
    em_dataset_free(data);
}

static em_status dataset_run(em_stage *self, const em_run_context *ctx) {
    dataset_state *st = self->state;
    const em_artifact *a = em_stage_input_artifact(self, "tokenizer", 0);
    const em_model *model = a ? a->data : NULL;
    if (!model || !model->tokenizer)
        return em_error_new(EM_EXIT_BAD_INPUT, "model stage '%s' has no tokenizer",
                            em_stage_input_producer(self, "tokenizer", 0)->name);
    const em_tokenizer *tok = model->tokenizer;

    /* n_ctx or max_length 0: the model's context length (llama-perplexity's -c 0) */
    if (st->window_tokens == 0) st->window_tokens = model->config.n_ctx_train;
    if (st->window_tokens <= 0)
        return em_error_at(EM_EXIT_BAD_INPUT, self->mark,
                           "stage '%s': %s is 0 but model stage '%s' does not say its context "
                           "length: give it",
                           self->name, em_protocol_window_option(st->protocol),
                           em_stage_input_producer(self, "tokenizer", 0)->name);

    em_corpus corpus;
    memset(&corpus, 0, sizeof corpus);
    em_mesh *mesh = em_stage_mesh(self, ctx);
    em_status err = share_corpus(st, tok, mesh->world, &corpus);
    if (err) return err;
    em_window_plan plan;
    err = make_plan(st, tok, &corpus, &plan);
    if (err) {
        em_corpus_free(&corpus);
        return em_error_prefix(err, "%s", st->path);
    }

    /* Every rank computes the same split and keeps its range. */
    int64_t *scored = em_xmalloc((plan.count ? plan.count : 1) * sizeof *scored);
    for (size_t i = 0; i < plan.count; i++)
        scored[i] = plan.windows[i].length - plan.windows[i].score_from;
    int64_t *first = em_xmalloc((size_t)(mesh->dp + 1) * sizeof *first);
    em_window_ranges(scored, plan.count, mesh->dp, first);
    int part = mesh->dp_rank;
    em_dataset *ds = em_dataset_build(&plan, corpus.stream, first[part], first[part + 1], st->path,
                                      corpus.sha256, st->protocol);
    ds->documents = corpus.documents;
    ds->empty_documents = corpus.empty_documents;
    corpus.stream = NULL; /* the dataset owns it now */

    if (model->config.n_ctx_train > 0 && st->window_tokens > model->config.n_ctx_train)
        em_log_warn("dataset '%s': windows of %d tokens are longer than the model's training "
                    "context of %d",
                    self->name, st->window_tokens, model->config.n_ctx_train);
    if (ctx->rank == 0)
        em_log_info("dataset '%s': %s, %lld documents (%lld empty, skipped), %lld tokens%s, %zu "
                    "%s windows, %lld scored tokens",
                    self->name, st->path, (long long)corpus.documents,
                    (long long)corpus.empty_documents, (long long)corpus.n_tokens,
                    corpus.stopped_early ? " (tokenized as far as max_windows needs)" : "",
                    plan.count, em_protocol_name(st->protocol), (long long)plan.scored_tokens);
    em_log_debug("dataset '%s': this rank (dp %d of %d, %s) has windows %lld .. %lld", self->name,
                 part, mesh->dp, em_stage_mesh_name(self), (long long)first[part],
                 (long long)first[part + 1] - 1);
    free(first);
    free(scored);
    em_window_plan_free(&plan);
    em_corpus_free(&corpus);
    self->output = (em_artifact){.data = ds, .free = free_dataset};
    return NULL;
}

static void dataset_destroy(em_stage *self) {
    dataset_state *st = self->state;
    if (!st) return;
    free(st->path);
    free(st);
    self->state = NULL;
}

static const em_input_spec dataset_inputs[] = {
    {"tokenizer", {"model"}, false, false},
    {"mesh", {"mesh"}, false, true},
    {0},
};

const em_stage_kind em_stage_kind_dataset = {
    .name = "dataset",
    .summary = "Reads text, JSONL or token ids into scoring windows; each rank gets its share",
    .produces = "dataset",
    .inputs = dataset_inputs,
    .collective = true,
    .init = dataset_init,
    .run = dataset_run,
    .destroy = dataset_destroy,
};
