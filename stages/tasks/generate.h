/* Greedy generation, as lm-evaluation-harness's generate_until with do_sample false: every
 * request's prompt is prefilled and then all unfinished sequences step together, one token each,
 * through a forward backend's decoding entry points (forward_backend.h), until each stops:
 *   - at EOS (the tokenizer's; not part of the output),
 *   - when the decoded text of its generated tokens (em_tokenizer_decode, special tokens skipped)
 *     holds any of its non-empty `until` strings, or
 *   - after max_gen_toks tokens.
 * The text is then cut as lm-eval does (s = s.split(term)[0] for each term): before the first
 * occurrence of any stop string. A prompt longer than max_length - max_gen_toks keeps its last
 * ids (truncated from the left, as lm-eval's Hugging Face backend does), so prompt plus generated
 * tokens fit max_length positions. As each decoding step's argmax is the full forward's, a
 * sequence's tokens do not depend on the other requests, their order or the thread count.
 * A stop signal (util/stop.h) ends the decoding after the step under way: the sequences finished
 * by then are kept (em_generation.finished), the others are dropped. */
#ifndef EVALMESH_TASKS_GENERATE_H
#define EVALMESH_TASKS_GENERATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"
#include "stages/kernels/forward_backend.h"
#include "stages/tokenizer/tokenizer.h"

typedef struct em_generate_request {
    const int32_t *prompt; /* ids, BOS included when the model wants it (at least one id) */
    int prompt_length;
    const char *const *until; /* stop strings (empty ones are ignored) */
    int until_count;
    int max_gen_toks; /* >= 1 */
} em_generate_request;

/* Why a sequence stopped. */
typedef enum em_generate_stop {
    EM_GENERATE_EOS,
    EM_GENERATE_UNTIL,
    EM_GENERATE_MAX_TOKENS,
} em_generate_stop;

typedef struct em_generation {
    int32_t *ids; /* the generated ids (those that make up a stop string included; EOS not) */
    int count;
    char *text;      /* their decoded text cut before the first stop string (NUL-terminated) */
    size_t length;   /* of text */
    int prompt_used; /* the prompt's ids that were kept (the last ones) */
    em_generate_stop stop;
    bool finished; /* it stopped (EOS, a stop string, max_gen_toks); false only after a signal */
} em_generation;

/* Generates for count requests together on forward f of backend be (a backend without decoding
 * is refused, exit status 2; every rank of the forward's tp group calls it with the same
 * arguments), with tok the model's tokenizer and max_length the most positions a sequence may
 * hold (max_gen_toks >= max_length is an error, exit status 2, naming the request). out
 * (count) gets each request's generation: free each with em_generation_free, whatever comes
 * back. After a stop signal the status is EM_EXIT_INTERRUPTED and only the finished ones hold
 * their generation; after any other error none does. */
em_status em_generate(const em_forward_backend *be, void *f, const em_tokenizer *tok,
                      int max_length, const em_generate_request *requests, int count,
                      em_generation *out);

void em_generation_free(em_generation *g);

/* The text of generated ids (count) for a request with stop strings until (until_count): their
 * decoded text (special tokens skipped) cut before the first stop string, as em_generate cuts it;
 * *stopped says whether one was there. *text (malloc'd, NUL-terminated) of *length bytes. */
em_status em_generation_text(const em_tokenizer *tok, const int32_t *ids, int count,
                             const char *const *until, int until_count, char **text, size_t *length,
                             bool *stopped);

#endif
