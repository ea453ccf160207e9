/* Appending to and reading history files (see history.h). */
#include "stages/report/history.h"

#include <errno.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/atomic_file.h"
#include "util/log.h"
#include "util/regular_file.h"
#include "stages/report/results.h"
#include "stages/report/textfile.h"

em_status em_history_append(const char *path, const cJSON *results) {
    char *copy = em_xstrdup(path);
    em_status err = em_textfile_mkdirs(dirname(copy));
    free(copy);
    if (err) return err;
    cJSON *line = cJSON_Duplicate(results, true);
    cJSON_DeleteItemFromObjectCaseSensitive(line, "ranks");
    char *text = em_results_print(line, false);
    cJSON_Delete(line);
    err = em_atomic_append_line(path, text);
    free(text);
    return err;
}

/* A line glued to a torn one: an append cut short (a full disk, a killed writer) left a line
 * without its '\n', and an older writer's next append continued it. Every line starts with the
 * results document's first key, so the last start of one that parses to the end of the line is the
 * complete run; the torn part before it is reported. NULL when there is none. */
static cJSON *after_torn_line(const char *line, const char *where) {
    static const char start[] = "{\"schema\"";
    const char *found = NULL;
    for (const char *p = strstr(line + 1, start); p; p = strstr(p + 1, start)) found = p;
    cJSON *doc = found ? cJSON_Parse(found) : NULL;
    if (doc)
        em_log_warn("%s: %zu bytes of a torn line (an append that did not finish) skipped before a "
                    "complete results document",
                    where, (size_t)(found - line));
    return doc;
}

em_status em_history_load(const char *path, bool missing_ok, em_history *out) {
    memset(out, 0, sizeof *out);
    struct stat st;
    if (missing_ok && stat(path, &st) != 0 && errno == ENOENT) return NULL;
    char *text;
    em_status err = em_read_regular_file(path, EM_TEXT_MAX_BYTES, "a history file", &text, NULL);
    if (err) return err;
    int line_no = 0;
    for (char *line = text; line && *line;) {
        char *next = strchr(line, '\n');
        if (next) *next++ = 0;
        line_no++;
        if (line[strspn(line, " \t\r")] == 0) { /* blank lines are allowed */
            line = next;
            continue;
        }
        char *where = em_xasprintf("%s:%d", path, line_no);
        cJSON *doc = cJSON_Parse(line);
        if (!doc) doc = after_torn_line(line, where);
        em_status bad = doc ? em_results_check(doc, where)
                            : em_error_new(EM_EXIT_BAD_INPUT,
                                           "%s: not a results document (not valid JSON)", where);
        free(where);
        if (bad) {
            em_log_warn("%s (line skipped)", bad->message);
            em_error_free(bad);
            cJSON_Delete(doc);
            out->skipped++;
        } else {
            out->entries = em_xrealloc(out->entries, (out->count + 1) * sizeof *out->entries);
            out->line_numbers =
                em_xrealloc(out->line_numbers, (out->count + 1) * sizeof *out->line_numbers);
            out->entries[out->count] = doc;
            out->line_numbers[out->count++] = line_no;
        }
        line = next;
    }
    free(text);
    return NULL;
}

void em_history_free(em_history *h) {
    for (size_t i = 0; i < h->count; i++) cJSON_Delete(h->entries[i]);
    free(h->entries);
    free(h->line_numbers);
    memset(h, 0, sizeof *h);
}

const char *em_history_verdict(const cJSON *entry) {
    const cJSON *gate = cJSON_GetObjectItemCaseSensitive(entry, "gate");
    if (!cJSON_IsObject(gate)) return "no gate";
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(gate, "passed")) ? "passed" : "failed";
}

long em_history_baseline(const em_history *h) {
    for (size_t i = h->count; i-- > 0;)
        if (strcmp(em_history_verdict(h->entries[i]), "failed") != 0) return (long)i;
    return -1;
}
