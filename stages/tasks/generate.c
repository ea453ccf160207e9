/* Greedy generation until stop strings, EOS or max_gen_toks (see generate.h). */
#include "stages/tasks/generate.h"

#include <stdlib.h>
#include <string.h>

#include "util/stop.h"

/* The first occurrence in text (len bytes) of any non-empty stop string, or len. */
static size_t first_stop(const char *text, size_t len, const char *const *until, int count) {
    size_t cut = len;
    for (int u = 0; u < count; u++) {
        size_t n = strlen(until[u]);
        if (n == 0 || n > len) continue;
        for (size_t i = 0; i + n <= cut && i + n <= len; i++) {
            if (memcmp(text + i, until[u], n) == 0) {
                cut = i;
                break;
            }
        }
    }
    return cut;
}

em_status em_generation_text(const em_tokenizer *tok, const int32_t *ids, int count,
                             const char *const *until, int until_count, char **text, size_t *length,
                             bool *stopped) {
    *text = NULL;
    em_status err = em_tokenizer_decode(tok, ids, (size_t)count, false, text, length);
    if (err) return err;
    size_t cut = first_stop(*text, *length, until, until_count);
    *stopped = cut < *length;
    *length = cut;
    (*text)[cut] = '\0';
    return NULL;
}

/* Decodes g's ids into g->text; *stopped tells whether it holds a stop string, and the text is
 * cut before the first one. */
static em_status decode_text(const em_tokenizer *tok, const em_generate_request *r,
                             em_generation *g, bool *stopped) {
    free(g->text);
    return em_generation_text(tok, g->ids, g->count, r->until, r->until_count, &g->text, &g->length,
                              stopped);
}

static em_status check_request(const em_generate_request *r, int max_length) {
    if (r->prompt_length < 1)
        return em_error_new(EM_EXIT_BAD_INPUT, "the prompt has no ids (give at least BOS)");
    if (r->max_gen_toks < 1 || r->max_gen_toks >= max_length)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "max_gen_toks %d does not leave room for a prompt in %d positions "
                            "(1 to %d)",
                            r->max_gen_toks, max_length, max_length - 1);
    return NULL;
}

/* The decoding loop over d: prefill every request, then step the unfinished ones together. */
static em_status decode_all(const em_forward_backend *be, void *d, const em_tokenizer *tok,
                            const em_generate_request *requests, int count, em_generation *out) {
    int32_t eos = em_tokenizer_eos(tok);
    int *slots = em_xmalloc((size_t)count * sizeof *slots);
    int *lengths = em_xmalloc((size_t)count * sizeof *lengths);
    const int32_t **prompts = em_xmalloc((size_t)count * sizeof *prompts);
    int32_t *next = em_xmalloc((size_t)count * sizeof *next);
    int32_t *tokens = em_xmalloc((size_t)count * sizeof *tokens);
    int *active = em_xmalloc((size_t)count * sizeof *active); /* request of each slot stepped */
    for (int i = 0; i < count; i++) {
        slots[i] = i;
        lengths[i] = out[i].prompt_used;
        prompts[i] = requests[i].prompt + (requests[i].prompt_length - out[i].prompt_used);
    }
    em_status err = be->prefill(d, slots, prompts, lengths, count, next, NULL);
    int running = count;
    bool *done = em_xcalloc((size_t)count, sizeof *done);
    while (!err && running > 0) {
        /* each unfinished request takes its argmax, then stops or goes on */
        int n = 0;
        for (int i = 0; i < count && !err; i++) {
            if (done[i]) continue;
            em_generation *g = &out[i];
            bool stopped = false;
            if (next[i] == eos) {
                g->stop = EM_GENERATE_EOS;
                stopped = true;
            } else {
                g->ids[g->count++] = next[i];
                err = decode_text(tok, &requests[i], g, &stopped);
                if (stopped) g->stop = EM_GENERATE_UNTIL;
                if (!stopped && g->count == requests[i].max_gen_toks) {
                    g->stop = EM_GENERATE_MAX_TOKENS;
                    stopped = true;
                }
            }
            if (stopped) {
                done[i] = g->finished = true;
                running--;
            } else {
                active[n] = i;
                tokens[n++] = next[i];
            }
        }
        if (err || n == 0) break;
        if (em_stop_signal()) { /* after the step under way: the finished sequences are kept */
            err =
                em_error_new(EM_EXIT_INTERRUPTED,
                             "interrupted by signal %d (%s) with %d of %d sequences finished",
                             em_stop_signal(), strsignal(em_stop_signal()), count - running, count);
            break;
        }
        int32_t *step_next = em_xmalloc((size_t)n * sizeof *step_next);
        err = be->step(d, active, tokens, n, step_next, NULL);
        for (int j = 0; j < n && !err; j++) next[active[j]] = step_next[j];
        free(step_next);
    }
    free(done);
    free(slots);
    free(lengths);
    free(prompts);
    free(next);
    free(tokens);
    free(active);
    return err;
}

em_status em_generate(const em_forward_backend *be, void *f, const em_tokenizer *tok,
                      int max_length, const em_generate_request *requests, int count,
                      em_generation *out) {
    memset(out, 0, (size_t)count * sizeof *out);
    em_status err = em_forward_decoding(be);
    if (err || count < 1) return err;
    for (int i = 0; i < count; i++) {
        err = check_request(&requests[i], max_length);
        if (err) return count > 1 ? em_error_prefix(err, "generation request %d", i) : err;
    }
    for (int i = 0; i < count; i++) {
        int room = max_length - requests[i].max_gen_toks;
        out[i].prompt_used = requests[i].prompt_length < room ? requests[i].prompt_length : room;
        out[i].ids = em_xmalloc((size_t)requests[i].max_gen_toks * sizeof *out[i].ids);
        out[i].text = em_xcalloc(1, 1);
    }
    int positions = 0; /* the longest sequence: what each slot of the cache holds */
    for (int i = 0; i < count; i++)
        if (out[i].prompt_used + requests[i].max_gen_toks > positions)
            positions = out[i].prompt_used + requests[i].max_gen_toks;
    void *d = NULL;
    err = be->decode_new(f, count, positions, &d);
    if (!err) err = decode_all(be, d, tok, requests, count, out);
    if (d) be->decode_free(d);
    if (err) {
        bool keep = err->exit_code == EM_EXIT_INTERRUPTED;
        for (int i = 0; i < count; i++)
            if (!keep || !out[i].finished) em_generation_free(&out[i]);
        return em_error_prefix(err, "generation");
    }
    return NULL;
}

void em_generation_free(em_generation *g) {
    free(g->ids);
    free(g->text);
    memset(g, 0, sizeof *g);
}
