/* The forward-backend seam. A forward backend (`cpu`; `cuda` in builds with the CUDA toolkit)
 * fills one table: whether it can run here, create for a model and the forward's groups, score
 * a batch of windows (one window is a batch of one), memory used, free. The stage picks a row by
 * the forward's `device:` option; whatever else depends on the backend (its default batch, what
 * it needs, what it offers) is a field of its row, never a comparison of names. Every backend runs
 * the same composition of a Llama-family block (llama_block.h) over its own kernels, so backends
 * cannot drift apart in what they compute.
 *
 * The forward's groups (tp, cp) come from the mesh as callbacks, so this layer needs no
 * communicator type: the stage fills them from the mesh's tp and cp groups. */
#ifndef EVALMESH_KERNELS_FORWARD_BACKEND_H
#define EVALMESH_KERNELS_FORWARD_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"
#include "stages/kernels/linear_inputs.h"
#include "stages/model/loaded_model.h"

/* A group of ranks that split one window's work: size 1 means alone (allgather is a copy). */
typedef struct em_forward_group {
    int rank, size;
    void *comm; /* the communicator behind the callbacks */
    /* recv holds size * bytes, rank r's block at r * bytes; all ranks call it in the same order */
    em_status (*allgather)(void *comm, const void *send, void *recv, size_t bytes);
    /* one ring step: send to rank dest and receive from rank source, `bytes` each way */
    em_status (*sendrecv)(void *comm, const void *send, int dest, void *recv, int source,
                          size_t bytes);
} em_forward_group;

/* The groups of one forward: tp splits heads, MLP columns and the vocabulary; cp splits the
 * window's positions into blocks (ring attention). */
typedef struct em_forward_groups {
    em_forward_group tp, cp;
} em_forward_groups;

/* Gathers through g (a copy when g is alone). */
em_status em_forward_allgather(const em_forward_group *g, const void *send, void *recv,
                               size_t bytes);
/* Passes `bytes` to the next rank of g's ring and receives the previous rank's. */
em_status em_forward_ring_step(const em_forward_group *g, const void *send, void *recv,
                               size_t bytes);

/* How a forward holds its weights on the device (the forward stage's `f32_weights` and
 * `quantized_weights`, documented in schemas/stages/forward.schema.json). Zero is every default;
 * a backend without `weight_storage` runs only the defaults (the stage refuses others). */
typedef enum em_f32_weights {
    EM_F32_WEIGHTS_FLOAT32,  /* F32 matrices kept F32, products in FP32: the exact mode */
    EM_F32_WEIGHTS_BFLOAT16, /* F32 matrices rounded to BF16 at load */
} em_f32_weights;
typedef enum em_quantized_weights {
    EM_QUANTIZED_WEIGHTS_AUTO,      /* bfloat16 when the copies fit in free device memory */
    EM_QUANTIZED_WEIGHTS_BFLOAT16,  /* dequantized once at load into resident BF16 copies */
    EM_QUANTIZED_WEIGHTS_QUANTIZED, /* kept in their blocks, dequantized before each product */
} em_quantized_weights;
/* How the products are rounded (the forward stage's `precision`). */
typedef enum em_precision {
    EM_PRECISION_EXACT, /* every product in FP32 from the file's exact weights */
    EM_PRECISION_GGML,  /* as llama.cpp's CPU backend: activations rounded to 8 bits per block,
                         * integer dot products (cpu only: stages/kernels/cpu/ggml_dot.h) */
    EM_PRECISION_BF16,  /* weights and activations rounded to BF16, FP32 sums in a fixed order
                         * (cpu only: stages/kernels/cpu/bf16_dot.h) */
} em_precision;
typedef struct em_forward_options {
    em_f32_weights f32_weights;
    em_quantized_weights quantized_weights;
    em_precision precision;
} em_forward_options;

/* One window of a batch: input and target (T) ids; positions score_from .. T-1 are scored into
 * nll and argmax (T - score_from). target NULL (a decoding step): argmax alone, nll not computed
 * (its values unspecified), so the head skips the softmax's exp over the vocabulary. */
typedef struct em_batch_window {
    const int32_t *input, *target;
    int T, score_from;
    double *nll;
    int32_t *argmax;
} em_batch_window;

/* A prefix of P ids and the `count` continuations that follow it (score_shared_prefixes). */
typedef struct em_shared_prefix {
    const int32_t *ids; /* (P) */
    int P;
    const em_batch_window *continuations; /* (count) */
    int count;
} em_shared_prefix;

typedef struct em_forward_backend {
    const char *name; /* the forward's `device:` */
    /* the forward's default `batch_tokens` (most positions scored in one batch) */
    int64_t batch_tokens;
    bool gpu_buffers;    /* what it hands its groups' collectives lives in GPU memory */
    bool weight_storage; /* it honours every weight-storage value (else only the defaults) */
    bool ggml_precision; /* it runs precision ggml */
    bool bf16_precision; /* it runs precision bf16 (without either: only exact) */
    bool needs_gpu;      /* each rank running it needs a GPU of its own (`evalmesh gpus`) */
    /* NULL, or whether this process can run it at all (a `cuda` forward without a GPU): an
     * error (exit status 2) the forward stage reports at validation. */
    em_status (*available)(void);
    /* Checks the model and the split (exit status 2 naming what does not fit) and prepares a
     * forward with `threads` CPU threads holding only this rank's share of the weights, as
     * options say (never NULL). */
    em_status (*create)(const em_model *model, const em_forward_groups *groups, int threads,
                        const em_forward_options *options, void **out);
    /* Scores `count` windows in one pass (their positions are the rows of one set of
     * activations, segments.h): each window's nll and argmax are bit-identical to those it gets
     * alone (count 1), whatever other windows share its batch, in any order. Every rank of the
     * groups calls it with the same windows and gets the same results. A forward with cp > 1
     * scores one window per call (count > 1 is refused, exit status 2). */
    em_status (*score_batch)(void *f, const em_batch_window *windows, int count);
    /* NULL, or scores `count` shared prefixes, each with its continuations, in two batches: every
     * prefix's keys and values (P >= 1 ids at positions 0 .. P-1) computed once, in one batch of
     * the prefixes, then every continuation of every prefix in one batch, its positions (its T ids
     * at positions P .. P+T-1, scored from score_from as in score_batch) attending to its own
     * prefix's keys and to its own. Each continuation's nll and argmax are bit-identical to those
     * of its whole window (prefix then continuation, scored from P + score_from) through
     * score_batch, whatever else shares its batches. Every rank of the tp group calls it with the
     * same arguments; a forward with cp > 1 refuses it (exit status 2). */
    em_status (*score_shared_prefixes)(void *f, const em_shared_prefix *prefixes, int count);
    /* with score_shared_prefixes: the most prefix positions a caller puts in one call */
    int64_t prefix_batch_tokens;
    /* Two forwards of this backend (made by create with tp = cp = 1 and the same threads) over
     * the same window, for the compare stage: each model's nll and argmax as score_batch gives
     * them, and kl (T - score_from), per scored position KL(P_ref || P_cand) over the whole
     * vocabulary, never holding a (T, vocab) array. The models must share the vocabulary. */
    em_status (*score_pair)(void *ref, void *cand, const int32_t *input, const int32_t *target,
                            int T, int score_from, double *nll_ref, int32_t *argmax_ref,
                            double *nll_cand, int32_t *argmax_cand, double *kl);
    /* Greedy decoding with a key-value cache: NULL in a backend that does not decode (callers
     * refuse it through em_forward_decoding, exit status 2). decode_new makes, over forward f
     * (which outlives it), a cache of `sequences` slots of at most `positions` positions each:
     * a slot holds n_layers x 2 x (this rank's KV heads x head_dim) x positions floats of 4
     * bytes, allocated at its first prefill (decode_memory: the bytes so far); cp > 1 is refused
     * (exit status 2). prefill fills slots[i] (distinct; a filled slot starts over) with
     * prompts[i] (lengths[i] ids, 1 .. positions) for i < count, in one batch, keeping every
     * layer's keys and values after RoPE; step appends tokens[i] to the filled slots[i]
     * (distinct, shorter than positions) in one batch of sequences of any lengths. Both give
     * next[i], the argmax after the sequence's last position (the lowest id among equal logits),
     * and, when logits is not NULL, its logits at logits + i * n_vocab: the bits a full forward
     * of the whole sequence gives at that position, whatever else shares the batch and with any
     * number of threads. Every rank of the tp group calls them with the same arguments. */
    em_status (*decode_new)(void *f, int sequences, int positions, void **out);
    em_status (*prefill)(void *decode, const int *slots, const int32_t *const *prompts,
                         const int *lengths, int count, int32_t *next, float *logits);
    em_status (*step)(void *decode, const int *slots, const int32_t *tokens, int count,
                      int32_t *next, float *logits);
    size_t (*decode_memory)(const void *decode);
    void (*decode_free)(void *decode);
    /* Sets (NULL: clears) the observer of the linear layers' inputs (linear_inputs.h) for the
     * windows computed from now on; NULL when the backend offers no such look. */
    void (*observe)(void *f, const em_linear_observer *observer);
    /* NULL, or the name of the CPU kernel its products run on (for the log line). */
    const char *(*kernel)(const void *f);
    /* Bytes of activations and scratch for the largest batch so far. */
    size_t (*memory)(const void *f);
    /* Bytes of weights this rank holds and touches (its shard). */
    size_t (*weight_bytes)(const void *f);
    void (*free)(void *f);
} em_forward_backend;

/* One window through be->score_batch (a batch of one): input and target (T) ids, nll and
 * argmax (T - score_from). */
em_status em_forward_score_window(const em_forward_backend *be, void *f, const int32_t *input,
                                  const int32_t *target, int T, int score_from, double *nll,
                                  int32_t *argmax);

/* NULL when be decodes (its decode_new is set), else an error (exit status 2) naming the
 * backends that do. */
em_status em_forward_decoding(const em_forward_backend *be);

/* The decoding entry points' argument checks, the same for every backend (exit status 2 naming
 * what is wrong): a cache of at least one sequence and position; a batch's slots distinct and in
 * the cache (`what` names the call); a prefill's prompts of 1 .. positions ids; a step's
 * sequences filled (length, per slot, the positions each holds) and not full. */
em_status em_decode_check_cache(int sequences, int positions);
em_status em_decode_check_slots(int sequences, const int *slots, int count, const char *what);
em_status em_decode_check_prefill(int sequences, int positions, const int *slots,
                                  const int *lengths, int count);
em_status em_decode_check_step(int sequences, int positions, const int32_t *length,
                               const int *slots, int count);

/* logits (n_vocab) of one row from the tp group's ranks, each holding its own vocabulary rows
 * (em_vocab_shard) from mine[0] (room for n_vocab + 1 floats): gathered in rank order (a copy
 * when tp is alone). Every rank of tp calls it. */
em_status em_forward_gather_vocab(const em_forward_group *tp, int64_t n_vocab, const float *mine,
                                  float *logits);

/* "exact", "ggml" or "bf16": the forward stage's `precision` value. */
const char *em_precision_name(em_precision precision);
/* The precision named `name` (em_precision_name's inverse): false when it names none. */
bool em_precision_parse(const char *name, em_precision *out);

/* The backend named `name`, or NULL. */
const em_forward_backend *em_forward_backend_find(const char *name);
/* The names of every backend, space-separated, for messages. */
const char *em_forward_backend_names(void);
/* The names of the backends `keep` says yes to, space-separated, into buf (returned). */
const char *em_forward_backend_names_where(bool (*keep)(const em_forward_backend *be), char *buf,
                                           size_t size);

#endif
