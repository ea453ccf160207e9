/* A loglikelihood request as lm-evaluation-harness makes it (lm_eval/models/huggingface.py,
 * _encode_pair and _loglikelihood_tokens): the context's trailing whitespace moves to the front
 * of the continuation; context + continuation is encoded whole and the context's own length is
 * sliced off, so a token that straddles the boundary belongs to the continuation; an empty
 * context is the prefix token (BOS, else EOS); the pair keeps its last max_length + 1 tokens
 * (left truncation), and the model reads all but the last and is scored on the continuation's
 * tokens. With `apart` (BIG-bench's tasks) the two texts are encoded each alone and joined,
 * nothing moved between them. */
#ifndef EVALMESH_TASKS_REQUESTS_H
#define EVALMESH_TASKS_REQUESTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"
#include "stages/tokenizer/tokenizer.h"

typedef struct em_request_options {
    int max_length; /* the most tokens the model reads (lm-eval's max_length) */
    int add_bos;    /* -1: the tokenizer's own choice, none before a text that starts with the
                       BOS token's text (lm-eval's default); 0 or 1: lm-eval's add_bos_token */
    bool apart;     /* BIG-bench: the context and the continuation are each encoded alone and
                       their ids joined (its Hugging Face model's cond_log_prob), not the pair */
} em_request_options;

/* One request as the forward scores it: input and target (T), scored from score_from. */
typedef struct em_request {
    int32_t *input, *target; /* one allocation: target is input + 1 of the same ids */
    int T, score_from;
    int continuation_tokens; /* T - score_from */
    bool truncated;          /* the context lost tokens on the left */
} em_request;

/* How lm-eval encodes a context (text; "" for none) under options->add_bos: the tokenizer's
 * default options, BOS as add_bos says or, at -1, none before a text that starts with the BOS
 * token's text; no EOS. A generate_until prompt is encoded with them too. */
em_encode_options em_request_encode_options(const em_tokenizer *tok, const char *text,
                                            const em_request_options *options);

em_status em_request_make(const em_tokenizer *tok, const char *context, const char *continuation,
                          const em_request_options *options, em_request *out);
void em_request_clear(em_request *r);

#endif
