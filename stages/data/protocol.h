/* Scoring protocols: how a token stream becomes scoring windows. Every window is described by
 * offsets into the stream (all documents' tokens end to end), so a plan of the whole corpus is
 * small and every rank can build the same one. window_tokens, the tokens per window, is the
 * recipe's n_ctx for chunked and its max_length for sliding and rolling.
 *
 *   chunked  llama.cpp's perplexity tool: the stream (tokenized once, with BOS when the
 *            tokenizer adds one) is cut into n_tokens / window_tokens chunks of window_tokens
 *            tokens; the first token of each chunk is replaced by BOS and positions
 *            window_tokens/2 .. window_tokens-2 are scored, predicting tokens
 *            window_tokens/2+1 .. window_tokens-1 of the chunk. (llama.cpp refuses text of fewer
 *            than 2 * window_tokens tokens; here one chunk is enough. The chunks and the scored
 *            tokens are the same whenever llama.cpp accepts the text.)
 *   sliding  Hugging Face's perplexity guide: windows of window_tokens tokens starting every
 *            stride tokens; each window scores the tokens the previous window did not reach, so
 *            every token after the first is scored exactly once, with the longest context
 *            available.
 *   rolling  lm-evaluation-harness loglikelihood_rolling (get_rolling_token_windows with
 *            context_len 1, then make_disjoint_window): per document, disjoint runs of up to
 *            window_tokens predicted tokens; the first window is the prefix token (BOS, or EOS
 *            when there is no BOS) followed by the document, later windows take window_tokens
 *            tokens of context ending just before the last predicted token. */
#ifndef EVALMESH_PROTOCOL_H
#define EVALMESH_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef enum em_protocol {
    EM_PROTOCOL_CHUNKED,
    EM_PROTOCOL_SLIDING,
    EM_PROTOCOL_ROLLING,
} em_protocol;

/* "chunked", "sliding", "rolling"; -1 when unknown. */
int em_protocol_parse(const char *name);
const char *em_protocol_name(em_protocol protocol);
/* The recipe option that gives a protocol's window_tokens: "n_ctx" (chunked), "max_length". */
const char *em_protocol_window_option(em_protocol protocol);

/* One window: input[i] = stream[start + i] (input[0] = first_input when that is >= 0),
 * target[i] = stream[start + 1 + i], for i in 0 .. length-1; positions score_from .. length-1
 * are scored. */
typedef struct em_window_spec {
    int64_t document;
    int64_t start;
    int32_t first_input; /* BOS or prefix token replacing input[0], or -1 */
    int32_t length;
    int32_t score_from;
    int64_t words; /* the document's counts on its first window, 0 elsewhere */
    int64_t bytes;
} em_window_spec;

typedef struct em_window_plan {
    em_window_spec *windows; /* in corpus order */
    size_t count;
    int64_t scored_tokens;
} em_window_plan;

/* A document's tokens in the stream and its original text's counts. */
typedef struct em_document_tokens {
    int64_t start;
    int64_t count;
    int64_t words;
    int64_t bytes;
} em_document_tokens;

/* max_windows <= 0 means no cap. bos < 0: no BOS replacement (tokenizers that add none).
 * Errors (exit 2) when the stream holds less than one chunk. */
em_status em_plan_chunked(int64_t n_tokens, int window_tokens, int32_t bos, int64_t max_windows,
                          em_window_plan *out);
/* Needs 1 <= stride < window_tokens. Errors (exit 2) when the stream has fewer than 2 tokens. */
em_status em_plan_sliding(int64_t n_tokens, int window_tokens, int stride, int64_t max_windows,
                          em_window_plan *out);
/* The rolling windows of a document of n_tokens (> 0): 1 + ceil((n - min(n, window_tokens)) /
 * window_tokens). */
int64_t em_rolling_window_count(int64_t n_tokens, int window_tokens);
/* Documents with no tokens get no window. max_windows keeps whole documents only: it stops
 * before the first document whose windows would pass the cap (error when that is the first). */
em_status em_plan_rolling(const em_document_tokens *docs, size_t n_docs, int window_tokens,
                          int32_t prefix, int64_t max_windows, em_window_plan *out);

void em_window_plan_free(em_window_plan *plan);

#endif
