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

em_status em_plan_chunked(int64_t n_tokens, int n_ctx, int32_t bos, int64_t max_windows,
                          em_window_plan *out) {
    memset(out, 0, sizeof *out);
    int64_t n_chunks = n_tokens / n_ctx;
    if (n_chunks < 1)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "the text has %lld tokens: fewer than one chunk of n_ctx = %d tokens",
                            (long long)n_tokens, n_ctx);
    if (max_windows > 0 && n_chunks > max_windows) n_chunks = max_windows;
    size_t cap = 0;
    for (int64_t c = 0; c < n_chunks; c++) {
        /* The chunk is stream[c*n_ctx .. c*n_ctx + n_ctx-1]; its last token is only a target. */
        em_window_spec w = {.document = 0,
                            .start = c * n_ctx,
                            .first_input = bos,
                            .length = n_ctx - 1,
                            .score_from = n_ctx / 2};
        plan_add(out, &cap, w);
    }
    return NULL;
}

em_status em_plan_sliding(int64_t n_tokens, int max_length, int stride, int64_t max_windows,
                          em_window_plan *out) {
    memset(out, 0, sizeof *out);
    if (stride < 1 || stride >= max_length)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "stride = %d must be at least 1 and less than max_length = %d (for "
                            "disjoint windows use the chunked or rolling protocol)",
                            stride, max_length);
    if (n_tokens < 2)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "the text has %lld tokens: the sliding protocol needs at least 2",
                            (long long)n_tokens);
    size_t cap = 0;
    int64_t prev_end = 0; /* tokens before prev_end are scored (token 0 has no context) */
    for (int64_t begin = 0; begin < n_tokens; begin += stride) {
        if (max_windows > 0 && (int64_t)out->count == max_windows) break;
        int64_t end = begin + max_length < n_tokens ? begin + max_length : n_tokens;
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

int64_t em_rolling_window_count(int64_t n_tokens, int max_length) {
    int64_t first = n_tokens < max_length ? n_tokens : max_length;
    return 1 + (n_tokens - first + max_length - 1) / max_length;
}

em_status em_plan_rolling(const em_document_tokens *docs, size_t n_docs, int max_length,
                          int32_t prefix, int64_t max_windows, em_window_plan *out) {
    memset(out, 0, sizeof *out);
    size_t cap = 0;
    for (size_t d = 0; d < n_docs; d++) {
        int64_t n = docs[d].count, s = docs[d].start;
        if (n == 0) continue;
        int64_t first = n < max_length ? n : max_length;
        int64_t n_windows = em_rolling_window_count(n, max_length);
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
            int64_t pred_len = n - predicted < max_length ? n - predicted : max_length;
            int64_t window_end = predicted + pred_len;
            /* Input t(window_end-max_length-1) .. t(window_end-2), predicting the tokens
             * t(window_end-max_length) .. t(window_end-1), of which the last pred_len count. */
            em_window_spec next = {.document = (int64_t)d,
                                   .start = s + window_end - max_length - 1,
                                   .first_input = -1,
                                   .length = max_length,
                                   .score_from = (int32_t)(max_length - pred_len)};
            plan_add(out, &cap, next);
            predicted = window_end;
        }
    }
    return NULL;
}

void em_window_plan_free(em_window_plan *plan) {
    free(plan->windows);
    memset(plan, 0, sizeof *plan);
}
