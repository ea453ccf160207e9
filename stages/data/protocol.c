/* Window plans for the chunked, sliding and rolling protocols (see protocol.h). */
#include "stages/data/protocol.h"

#include <stdlib.h>
#include <string.h>

static const char *protocol_names[] = {"chunked", "sliding", "rolling"};

int em_protocol_parse(const char *name) {
    for (int i = 0; i < 3; i++)
        if (strcmp(protocol_names[i], name) == 0) return i;
    return -1;
}

const char *em_protocol_name(em_protocol protocol) {
    return protocol_names[protocol];
}

static void plan_add(em_window_plan *plan, size_t *cap, em_window_spec w) {
    if (plan->count == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        plan->windows = em_xrealloc(plan->windows, *cap * sizeof *plan->windows);
    }
    plan->windows[plan->count++] = w;
    plan->scored_tokens += w.length - w.score_from;
}

em_status em_plan_chunked(int64_t n_tokens, int window_tokens, int32_t bos, int64_t max_windows,
                          em_window_plan *out) {
    memset(out, 0, sizeof *out);
    int64_t n_chunks = n_tokens / window_tokens;
    if (n_chunks < 1)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "the text has %lld tokens: fewer than one chunk of n_ctx = %d tokens",
                            (long long)n_tokens, window_tokens);
    if (max_windows > 0 && n_chunks > max_windows) n_chunks = max_windows;
    size_t cap = 0;
    for (int64_t c = 0; c < n_chunks; c++) {
        /* The chunk is stream[c*window_tokens .. c*window_tokens + window_tokens-1]; its last token
         * is only a target. */
        em_window_spec w = {.document = 0,
                            .start = c * window_tokens,
                            .first_input = bos,
                            .length = window_tokens - 1,
                            .score_from = window_tokens / 2};
        plan_add(out, &cap, w);
    }
    return NULL;
}

em_status em_plan_sliding(int64_t n_tokens, int window_tokens, int stride, int64_t max_windows,
                          em_window_plan *out) {
    memset(out, 0, sizeof *out);
    if (stride < 1 || stride >= window_tokens)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "stride = %d must be at least 1 and less than max_length = %d (for "
                            "disjoint windows use the chunked or rolling protocol)",
                            stride, window_tokens);
    if (n_tokens < 2)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "the text has %lld tokens: the sliding protocol needs at least 2",
                            (long long)n_tokens);
    size_t cap = 0;
    int64_t prev_end = 0; /* tokens before prev_end are scored (token 0 has no context) */
    for (int64_t begin = 0; begin < n_tokens; begin += stride) {
        if (max_windows > 0 && (int64_t)out->count == max_windows) break;
        int64_t end = begin + window_tokens < n_tokens ? begin + window_tokens : n_tokens;
        /* Tokens begin .. end-1 are seen; tokens max(prev_end, begin+1) .. end-1 are scored. */
        int64_t first_scored = prev_end > begin + 1 ? prev_end : begin + 1;
        em_window_spec w = {.document = 0,
                            .start = begin,
                            .first_input = -1,
                            .length = (int32_t)(end - 1 - begin),
                            .score_from = (int32_t)(first_scored - (begin + 1))};
        plan_add(out, &cap, w);
        prev_end = end;
        if (end == n_tokens) break;
    }
    return NULL;
}

int64_t em_rolling_window_count(int64_t n_tokens, int window_tokens) {
    int64_t first = n_tokens < window_tokens ? n_tokens : window_tokens;
    return 1 + (n_tokens - first + window_tokens - 1) / window_tokens;
}

em_status em_plan_rolling(const em_document_tokens *docs, size_t n_docs, int window_tokens,
                          int32_t prefix, int64_t max_windows, em_window_plan *out) {
    memset(out, 0, sizeof *out);
    size_t cap = 0;
    for (size_t d = 0; d < n_docs; d++) {
        int64_t n = docs[d].count, s = docs[d].start;
        if (n == 0) continue;
        int64_t first = n < window_tokens ? n : window_tokens;
        int64_t n_windows = em_rolling_window_count(n, window_tokens);
        if (max_windows > 0 && (int64_t)out->count + n_windows > max_windows) {
            if (out->count == 0)
                return em_error_new(EM_EXIT_BAD_INPUT,
                                    "max_windows = %lld is smaller than the %lld windows of the "
                                    "first document",
                                    (long long)max_windows, (long long)n_windows);
            break;
        }
        /* First window: input [prefix, t0 .. t(first-2)], predicting t0 .. t(first-1). */
        em_window_spec w = {.document = (int64_t)d,
                            .start = s - 1,
                            .first_input = prefix,
                            .length = (int32_t)first,
                            .score_from = 0,
                            .words = docs[d].words,
                            .bytes = docs[d].bytes};
        plan_add(out, &cap, w);
        for (int64_t predicted = first; predicted < n;) {
            int64_t pred_len = n - predicted < window_tokens ? n - predicted : window_tokens;
            int64_t window_end = predicted + pred_len;
            /* Input t(window_end-window_tokens-1) .. t(window_end-2), predicting the tokens
             * t(window_end-window_tokens) .. t(window_end-1), of which the last pred_len count. */
            em_window_spec next = {.document = (int64_t)d,
                                   .start = s + window_end - window_tokens - 1,
                                   .first_input = -1,
                                   .length = window_tokens,
                                   .score_from = (int32_t)(window_tokens - pred_len)};
            plan_add(out, &cap, next);
            predicted = window_end;
        }
    }
    return NULL;
}

const char *em_protocol_window_option(em_protocol protocol) {
    return protocol == EM_PROTOCOL_CHUNKED ? "n_ctx" : "max_length";
}

void em_window_plan_free(em_window_plan *plan) {
    free(plan->windows);
    memset(plan, 0, sizeof *plan);
}
