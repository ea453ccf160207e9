/* Requests as lm-evaluation-harness makes them (requests.h). */
#include "stages/tasks/requests.h"

#include <stdlib.h>
#include <string.h>

/* Python's str.isspace for the characters that can end a context: ASCII whitespace, the
 * information separators 0x1c-0x1f, and the Unicode spaces encoded in two or three bytes. The
 * width of the whitespace ending text[0..len) in *bytes. */
static size_t trailing_space(const char *text, size_t len) {
    static const char *const wide[] = {
        "\xc2\x85",     "\xc2\xa0",     "\xe1\x9a\x80", "\xe2\x80\x80", "\xe2\x80\x81",
        "\xe2\x80\x82", "\xe2\x80\x83", "\xe2\x80\x84", "\xe2\x80\x85", "\xe2\x80\x86",
        "\xe2\x80\x87", "\xe2\x80\x88", "\xe2\x80\x89", "\xe2\x80\x8a", "\xe2\x80\xa8",
        "\xe2\x80\xa9", "\xe2\x80\xaf", "\xe2\x81\x9f", "\xe3\x80\x80"};
    size_t end = len;
    for (;;) {
        unsigned char c = end ? (unsigned char)text[end - 1] : 0;
        if (end && ((c >= 0x09 && c <= 0x0d) || c == ' ' || (c >= 0x1c && c <= 0x1f))) {
            end--;
            continue;
        }
        size_t width = 0;
        for (size_t i = 0; i < sizeof wide / sizeof *wide && !width; i++) {
            size_t n = strlen(wide[i]);
            if (end >= n && memcmp(text + end - n, wide[i], n) == 0) width = n;
        }
        if (!width) return len - end;
        end -= width;
    }
}

/* ids (count) followed by more (more_count), in one new allocation. */
static int32_t *joined(const int32_t *ids, size_t count, const int32_t *more, size_t more_count) {
    int32_t *out = em_xmalloc((count + more_count + 1) * sizeof *out);
    if (count) memcpy(out, ids, count * sizeof *ids);
    if (more_count) memcpy(out + count, more, more_count * sizeof *more);
    return out;
}

em_encode_options em_request_encode_options(const em_tokenizer *tok, const char *text,
                                            const em_request_options *options) {
    em_encode_options enc = em_tokenizer_default_options(tok);
    if (options->add_bos >= 0) {
        enc.add_bos = options->add_bos;
    } else if (em_tokenizer_bos(tok) >= 0) { /* lm-eval: no BOS before a BOS already there */
        const char *bos = em_tokenizer_token_text(tok, em_tokenizer_bos(tok));
        if (bos && *bos && strncmp(text, bos, strlen(bos)) == 0) enc.add_bos = false;
    }
    enc.add_eos = false;
    return enc;
}

em_status em_request_make(const em_tokenizer *tok, const char *context, const char *continuation,
                          const em_request_options *options, em_request *out) {
    memset(out, 0, sizeof *out);
    size_t context_len = strlen(context), continuation_len = strlen(continuation);
    em_encode_options enc =
        em_request_encode_options(tok, context_len ? context : continuation, options);
    /* all = the context's ids, then the continuation's: lm-eval's context_enc + continuation_enc */
    int32_t *all = NULL, *context_ids = NULL, *whole = NULL;
    size_t context_count = 0, whole_count = 0, count = 0;
    em_status err = NULL;
    if (context_len == 0) { /* lm-eval: an empty context is the prefix token, BOS else EOS */
        int32_t prefix = em_tokenizer_bos(tok) >= 0 ? em_tokenizer_bos(tok) : em_tokenizer_eos(tok);
        if (prefix < 0)
            return em_error_new(EM_EXIT_BAD_INPUT, "an empty context needs a BOS or EOS token, "
                                                   "and the tokenizer has neither");
        err = em_tokenizer_encode(tok, continuation, continuation_len, enc, &whole, &whole_count);
        if (err) return err;
        context_count = 1;
        all = joined(&prefix, 1, whole, whole_count);
        count = whole_count + 1;
    } else if (options->apart) {
        err = em_tokenizer_encode(tok, context, context_len, enc, &context_ids, &context_count);
        enc.add_bos = false;
        if (!err)
            err =
                em_tokenizer_encode(tok, continuation, continuation_len, enc, &whole, &whole_count);
        if (!err) {
            all = joined(context_ids, context_count, whole, whole_count);
            count = context_count + whole_count;
        }
        free(context_ids);
    } else {
        /* the trailing whitespace belongs to the continuation: the pair is encoded whole and the
         * context without it is encoded alone for its length */
        size_t kept = context_len - trailing_space(context, context_len);
        char *pair = em_xmalloc(context_len + continuation_len + 1);
        memcpy(pair, context, context_len);
        memcpy(pair + context_len, continuation, continuation_len + 1);
        err = em_tokenizer_encode(tok, pair, context_len + continuation_len, enc, &whole,
                                  &whole_count);
        free(pair);
        if (!err) err = em_tokenizer_encode(tok, context, kept, enc, &context_ids, &context_count);
        if (!err && context_count == 0)
            err = em_error_new(EM_EXIT_BAD_INPUT, "the context \"%.40s\" encodes to no tokens",
                               context);
        if (!err) {
            size_t rest = whole_count > context_count ? whole_count - context_count : 0;
            all = joined(context_ids, context_count, whole + context_count, rest);
            count = context_count + rest;
        }
        free(context_ids);
    }
    free(whole);
    if (err) return err;
    size_t continuation_count = count - context_count;
    size_t limit = (size_t)options->max_length + 1;
    if (continuation_count == 0 || continuation_count >= limit) {
        free(all);
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "the continuation \"%.40s\" encodes to %zu tokens after its context: "
                            "it needs 1 to %d (the most the model reads)",
                            continuation, continuation_count, options->max_length);
    }
    /* the last max_length + 1 ids: input = all[first .. count-1), target = all[first+1 .. count) */
    size_t first = count > limit ? count - limit : 0;
    size_t T = count - first - 1;
    out->input = em_xmalloc((T + 1) * sizeof *out->input);
    memcpy(out->input, all + first, (T + 1) * sizeof *all);
    free(all);
    out->target = out->input + 1;
    out->T = (int)T;
    out->continuation_tokens = (int)continuation_count;
    out->score_from = (int)(T - continuation_count);
    out->truncated = first > 0;
    return NULL;
}

void em_request_clear(em_request *r) {
    free(r->input);
    memset(r, 0, sizeof *r);
}
