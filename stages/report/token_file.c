/* Token files: building them from window records, writing, reading, comparing (see
 * token_file.h). */
#include "stages/report/token_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "util/atomic_file.h"
#include "util/regular_file.h"
#include "util/sha256.h"

#define MAGIC "EMTOKS01\n"

void em_token_set_free(em_token_set *set) {
    free(set->stage);
    free(set->window_spec);
    free(set->window_tokens);
    free(set->target);
    free(set->correct);
    free(set->nll);
    memset(set, 0, sizeof *set);
}

static void alloc_tokens(em_token_set *set, size_t windows, size_t tokens) {
    set->window_count = windows;
    set->window_tokens = em_xcalloc(windows ? windows : 1, sizeof *set->window_tokens);
    set->token_count = tokens;
    set->target = em_xcalloc(tokens ? tokens : 1, sizeof *set->target);
    set->correct = em_xcalloc(tokens ? tokens : 1, sizeof *set->correct);
    set->nll = em_xcalloc(tokens ? tokens : 1, sizeof *set->nll);
}

em_status em_token_set_from_records(const char *run_dir, const char *stage,
                                    const em_records_key *key, const char *window_spec,
                                    size_t window_count, em_token_set *out, bool *complete,
                                    char **why) {
    memset(out, 0, sizeof *out);
    *complete = false;
    *why = NULL;
    em_records_found found;
    em_status err = em_records_read(run_dir, stage, key, window_count, &found);
    if (err) {
        em_records_found_free(&found);
        return err;
    }
    size_t tokens = 0, missing = 0;
    for (size_t w = 0; w < window_count; w++) {
        if (found.by_window[w])
            tokens += (size_t)found.by_window[w]->token_count;
        else
            missing++;
    }
    if (window_count == 0 || missing) {
        *why = em_xasprintf("%zu of %zu windows of '%s' have no record in %s/records", missing,
                            window_count, stage, run_dir);
        em_records_found_free(&found);
        return NULL;
    }
    out->stage = em_xstrdup(stage);
    out->window_spec = em_xstrdup(window_spec ? window_spec : "{}");
    memcpy(out->model_digest, key->model_digest, sizeof out->model_digest);
    memcpy(out->dataset_sha256, key->dataset_sha256, sizeof out->dataset_sha256);
    alloc_tokens(out, window_count, tokens);
    size_t at = 0;
    for (size_t w = 0; w < window_count; w++) {
        const em_window_record *r = found.by_window[w];
        out->window_tokens[w] = r->token_count;
        for (int32_t k = 0; k < r->token_count; k++, at++) {
            out->target[at] = r->target[k];
            out->correct[at] = r->argmax[k] == r->target[k];
            out->nll[at] = r->nll[k];
        }
    }
    em_records_found_free(&found);
    *complete = true;
    return NULL;
}

/* The header's JSON line (heap, no newline). */
static char *header_line(const char *stage, const em_records_key *key, const char *window_spec,
                         size_t window_count, size_t token_count) {
    cJSON *head = cJSON_CreateObject();
    cJSON_AddStringToObject(head, "stage", stage);
    cJSON_AddStringToObject(head, "model_sha256", key->model_digest);
    cJSON_AddStringToObject(head, "dataset_sha256", key->dataset_sha256);
    cJSON *spec = cJSON_Parse(window_spec ? window_spec : "{}");
    cJSON_AddItemToObject(head, "windows", spec ? spec : cJSON_CreateObject());
    cJSON_AddNumberToObject(head, "window_count", (double)window_count);
    cJSON_AddNumberToObject(head, "token_count", (double)token_count);
    char *text = cJSON_PrintUnformatted(head);
    cJSON_Delete(head);
    char *line = em_xstrdup(text);
    cJSON_free(text);
    return line;
}

/* The token file being written: its bytes go through a buffer to the file and the digest. */
typedef struct token_writer {
    em_atomic_file *file;
    em_sha256 digest;
    char buf[1 << 16];
    size_t used;
    em_status err;
} token_writer;

static void flush_out(token_writer *w) {
    em_sha256_update(&w->digest, w->buf, w->used);
    if (!w->err) w->err = em_atomic_file_write(w->file, w->buf, w->used);
    w->used = 0;
}

static void put(token_writer *w, const void *data, size_t len) {
    const char *p = data;
    while (len > 0) {
        size_t n = sizeof w->buf - w->used < len ? sizeof w->buf - w->used : len;
        memcpy(w->buf + w->used, p, n);
        w->used += n, p += n, len -= n;
        if (w->used == sizeof w->buf) flush_out(w);
    }
}

/* The sections of the layout after the window counts, in order. */
enum { SECTION_TARGET, SECTION_CORRECT, SECTION_NLL, SECTIONS };

/* One section of every window, window by window from the records. */
static em_status put_section(token_writer *w, const em_records_index *ix, size_t window_count,
                             int section) {
    void *buf = NULL;
    size_t cap = 0;
    em_status err = NULL;
    for (size_t i = 0; i < window_count && !err; i++) {
        em_window_record r;
        err = em_records_index_load(ix, i, &r, &buf, &cap);
        if (err) break;
        size_t n = (size_t)r.token_count;
        if (section == SECTION_TARGET) put(w, r.target, 4 * n);
        if (section == SECTION_NLL) put(w, r.nll, 8 * n);
        for (size_t k = 0; section == SECTION_CORRECT && k < n; k++) {
            uint8_t c = r.argmax[k] == r.target[k];
            put(w, &c, 1);
        }
    }
    free(buf);
    return err;
}

em_status em_token_file_write_from_records(const char *path, const char *run_dir, const char *stage,
                                           const em_records_key *key, const char *window_spec,
                                           size_t window_count, char sha256_hex[65], bool *complete,
                                           char **why) {
    *complete = false;
    *why = NULL;
    em_records_index ix;
    em_status err = em_records_index_read(run_dir, stage, key, window_count, &ix);
    size_t tokens = 0, missing = 0;
    for (size_t i = 0; i < window_count && !err; i++) {
        if (ix.by_window[i].file >= 0)
            tokens += (size_t)ix.by_window[i].token_count;
        else
            missing++;
    }
    if (!err && (window_count == 0 || missing)) {
        *why = em_xasprintf("%zu of %zu windows of '%s' have no record in %s/records", missing,
                            window_count, stage, run_dir);
        em_records_index_free(&ix);
        return NULL;
    }
    token_writer *w = em_xcalloc(1, sizeof *w);
    if (!err) err = em_atomic_file_begin(path, 0644, &w->file);
    if (!err) {
        em_sha256_init(&w->digest);
        char *line = header_line(stage, key, window_spec, window_count, tokens);
        put(w, MAGIC, strlen(MAGIC));
        put(w, line, strlen(line));
        put(w, "\n", 1);
        free(line);
        for (size_t i = 0; i < window_count; i++) put(w, &ix.by_window[i].token_count, 4);
        for (int section = 0; section < SECTIONS && !err; section++)
            err = put_section(w, &ix, window_count, section);
        flush_out(w);
        uint8_t digest[32];
        em_sha256_final(&w->digest, digest);
        em_sha256_to_hex(digest, sha256_hex);
        if (!err) err = w->err;
        if (err)
            em_atomic_file_abandon(w->file);
        else
            err = em_atomic_file_commit(w->file);
    }
    free(w);
    em_records_index_free(&ix);
    if (!err) *complete = true;
    return err;
}

static em_status bad_file(const char *path, const char *what) {
    return em_error_new(EM_EXIT_BAD_INPUT, "token file %s: %s", path, what);
}

em_status em_token_file_read(const char *path, const char *sha256_hex, em_token_set *out) {
    memset(out, 0, sizeof *out);
    char *data;
    size_t len;
    em_status err = em_read_regular_file(path, (size_t)1 << 34, "a token file", &data, &len);
    if (err) return err;
    char hex[65];
    em_sha256_hex(data, len, hex);
    const char *nl =
        len > strlen(MAGIC) ? memchr(data + strlen(MAGIC), '\n', len - strlen(MAGIC)) : NULL;
    cJSON *head = NULL;
    if (sha256_hex && strcmp(hex, sha256_hex) != 0)
        err = em_error_new(EM_EXIT_BAD_INPUT,
                           "token file %s: its sha256 is %s, not %s as recorded (changed or "
                           "damaged since it was written)",
                           path, hex, sha256_hex);
    else if (memcmp(data, MAGIC, strlen(MAGIC)) != 0 || !nl)
        err = bad_file(path, "not a token file (no EMTOKS01 header)");
    if (!err) {
        head = cJSON_ParseWithLength(data + strlen(MAGIC), (size_t)(nl - data) - strlen(MAGIC));
        const cJSON *wc = cJSON_GetObjectItemCaseSensitive(head, "window_count");
        const cJSON *tc = cJSON_GetObjectItemCaseSensitive(head, "token_count");
        const char *stage = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(head, "stage"));
        const char *ms =
            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(head, "model_sha256"));
        const char *ds =
            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(head, "dataset_sha256"));
        const cJSON *spec = cJSON_GetObjectItemCaseSensitive(head, "windows");
        if (!cJSON_IsNumber(wc) || !cJSON_IsNumber(tc) || !stage || !ms || !ds ||
            !cJSON_IsObject(spec) || wc->valuedouble < 0 || tc->valuedouble < 0) {
            err = bad_file(path, "damaged header");
        } else {
            size_t w = (size_t)wc->valuedouble, n = (size_t)tc->valuedouble;
            const char *p = nl + 1;
            if ((size_t)(data + len - p) != 4 * w + 13 * n) {
                err = bad_file(path, "its size does not match its header");
            } else {
                alloc_tokens(out, w, n);
                out->stage = em_xstrdup(stage);
                char *text = cJSON_PrintUnformatted(spec);
                out->window_spec = em_xstrdup(text);
                cJSON_free(text);
                snprintf(out->model_digest, sizeof out->model_digest, "%s", ms);
                snprintf(out->dataset_sha256, sizeof out->dataset_sha256, "%s", ds);
                memcpy(out->window_tokens, p, 4 * w), p += 4 * w;
                memcpy(out->target, p, 4 * n), p += 4 * n;
                memcpy(out->correct, p, n), p += n;
                memcpy(out->nll, p, 8 * n);
                size_t sum = 0;
                for (size_t i = 0; i < w; i++) sum += (size_t)out->window_tokens[i];
                if (sum != n) {
                    em_token_set_free(out);
                    err = bad_file(path, "its windows' token counts do not add up");
                }
            }
        }
    }
    cJSON_Delete(head);
    free(data);
    return err;
}

/* The first window option whose value differs (or is present in one only), in words. */
static char *spec_difference(const char *base_text, const char *cand_text) {
    cJSON *base = cJSON_Parse(base_text), *cand = cJSON_Parse(cand_text);
    char *diff = NULL;
    for (int pass = 0; pass < 2 && !diff; pass++) {
        const cJSON *from = pass == 0 ? base : cand, *other = pass == 0 ? cand : base;
        const cJSON *item;
        cJSON_ArrayForEach(item, from) {
            const char *mine = cJSON_GetStringValue(item);
            const char *theirs =
                cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(other, item->string));
            if (theirs && mine && strcmp(mine, theirs) == 0) continue;
            const char *b = pass == 0 ? mine : theirs, *c = pass == 0 ? theirs : mine;
            diff = em_xasprintf("the dataset's %s is %s in the baseline, %s in this run",
                                item->string, b ? b : "not set", c ? c : "not set");
            break;
        }
    }
    cJSON_Delete(base);
    cJSON_Delete(cand);
    return diff;
}

char *em_token_set_difference(const em_token_set *base, const em_token_set *cand) {
    if (strcmp(base->dataset_sha256, cand->dataset_sha256) != 0)
        return em_xasprintf("the dataset file differs (sha256 %.12s in the baseline, %.12s in this "
                            "run)",
                            base->dataset_sha256, cand->dataset_sha256);
    char *spec = spec_difference(base->window_spec, cand->window_spec);
    if (spec) return spec;
    if (base->window_count != cand->window_count)
        return em_xasprintf("the baseline scored %zu windows, this run %zu", base->window_count,
                            cand->window_count);
    size_t at = 0;
    for (size_t w = 0; w < base->window_count; w++) {
        if (base->window_tokens[w] != cand->window_tokens[w])
            return em_xasprintf("window %zu has %d scored tokens in the baseline, %d in this run",
                                w, base->window_tokens[w], cand->window_tokens[w]);
        for (int32_t k = 0; k < base->window_tokens[w]; k++, at++)
            if (base->target[at] != cand->target[at])
                return em_xasprintf("window %zu, scored token %d: token %d in the baseline, %d in "
                                    "this run (another tokenizer?)",
                                    w, k, base->target[at], cand->target[at]);
    }
    return NULL;
}
