/* Example files: writing and reading (see example_file.h). */
#include "stages/report/example_file.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "util/atomic_file.h"
#include "util/regular_file.h"
#include "util/sha256.h"

#define FORMAT "evalmesh.task_examples/1"

char *em_example_file_text(const em_example_values *v) {
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "format", FORMAT);
    cJSON_AddStringToObject(doc, "stage", v->stage);
    cJSON *tasks = cJSON_AddArrayToObject(doc, "tasks");
    for (size_t s = 0; s < v->count; s++) {
        const em_example_set *set = &v->sets[s];
        cJSON *t = cJSON_CreateObject();
        cJSON_AddStringToObject(t, "key", set->key);
        cJSON *doc_ids = cJSON_AddArrayToObject(t, "doc");
        cJSON *shas = cJSON_AddArrayToObject(t, "sha256");
        for (size_t i = 0; i < set->count; i++) {
            cJSON_AddItemToArray(doc_ids, cJSON_CreateNumber((double)set->doc[i]));
            cJSON_AddItemToArray(shas, cJSON_CreateString(set->sha256[i]));
        }
        cJSON *binary = cJSON_AddArrayToObject(t, "binary");
        for (size_t c = 0; c < set->column_count; c++)
            if (set->columns[c].binary)
                cJSON_AddItemToArray(binary, cJSON_CreateString(set->columns[c].metric));
        cJSON *values = cJSON_AddObjectToObject(t, "values");
        for (size_t c = 0; c < set->column_count; c++) {
            cJSON *column = cJSON_AddArrayToObject(values, set->columns[c].metric);
            for (size_t i = 0; i < set->count; i++)
                cJSON_AddItemToArray(column, cJSON_CreateNumber(set->columns[c].values[i]));
        }
        cJSON_AddItemToArray(tasks, t);
    }
    char *text = cJSON_PrintUnformatted(doc);
    cJSON_Delete(doc);
    char *line = em_xasprintf("%s\n", text);
    cJSON_free(text);
    return line;
}

em_status em_example_file_write(const char *path, const em_example_values *v) {
    char *text = em_example_file_text(v);
    em_status err = em_atomic_write(path, text, strlen(text), 0644);
    free(text);
    return err;
}

static bool is_hex64(const char *s) {
    if (!s || strlen(s) != 64) return false;
    for (const char *c = s; *c; c++)
        if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f'))) return false;
    return true;
}

/* Reads one task entry into v; false (and *why) when it is malformed. */
static bool read_set(const cJSON *t, em_example_values *v, const char **why) {
    const char *key = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t, "key"));
    const cJSON *doc = cJSON_GetObjectItemCaseSensitive(t, "doc");
    const cJSON *shas = cJSON_GetObjectItemCaseSensitive(t, "sha256");
    const cJSON *binary = cJSON_GetObjectItemCaseSensitive(t, "binary");
    const cJSON *values = cJSON_GetObjectItemCaseSensitive(t, "values");
    if (!key || !cJSON_IsArray(doc) || !cJSON_IsArray(shas) || !cJSON_IsArray(binary) ||
        !cJSON_IsObject(values)) {
        *why = "a task without key, doc, sha256, binary or values";
        return false;
    }
    size_t n = (size_t)cJSON_GetArraySize(doc);
    if ((size_t)cJSON_GetArraySize(shas) != n) {
        *why = "a task whose doc and sha256 differ in length";
        return false;
    }
    em_example_set *set = em_example_values_add_set(v, key, n);
    size_t i = 0;
    for (const cJSON *d = doc->child, *h = shas->child; d && h; d = d->next, h = h->next, i++) {
        if (!cJSON_IsNumber(d) || d->valuedouble < 0 || !is_hex64(cJSON_GetStringValue(h))) {
            *why = "an example without a document index or sha256";
            return false;
        }
        set->doc[i] = (int64_t)d->valuedouble;
        memcpy(set->sha256[i], h->valuestring, 65);
    }
    for (const cJSON *column = values->child; column; column = column->next) {
        if (!cJSON_IsArray(column) || (size_t)cJSON_GetArraySize(column) != n) {
            *why = "a metric whose values are not one number per example";
            return false;
        }
        bool zero_one = false;
        for (const cJSON *b = binary->child; b; b = b->next)
            zero_one =
                zero_one || (cJSON_IsString(b) && strcmp(b->valuestring, column->string) == 0);
        double *out = em_example_set_add_column(set, column->string, zero_one)->values;
        i = 0;
        for (const cJSON *x = column->child; x; x = x->next, i++) {
            if (!cJSON_IsNumber(x)) {
                *why = "a metric value that is not a number";
                return false;
            }
            out[i] = x->valuedouble;
        }
    }
    return true;
}

em_status em_example_file_read(const char *path, const char *sha256_hex, em_example_values **out) {
    *out = NULL;
    char *data;
    size_t len;
    em_status err = em_read_regular_file(path, EM_TEXT_MAX_BYTES, "an example file", &data, &len);
    if (err) return err;
    char hex[65];
    em_sha256_hex(data, len, hex);
    cJSON *doc = NULL;
    const char *why = NULL;
    if (sha256_hex && strcmp(hex, sha256_hex) != 0) {
        err = em_error_new(EM_EXIT_BAD_INPUT,
                           "example file %s: its sha256 is %s, not %s as recorded (changed or "
                           "damaged since it was written)",
                           path, hex, sha256_hex);
    } else {
        doc = cJSON_ParseWithLength(data, len);
        const char *format = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(doc, "format"));
        const char *stage = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(doc, "stage"));
        const cJSON *tasks = cJSON_GetObjectItemCaseSensitive(doc, "tasks");
        if (!format || strcmp(format, FORMAT) != 0 || !stage || !cJSON_IsArray(tasks)) {
            why = "not an example file (no \"format\": \"" FORMAT "\", stage and tasks)";
        } else {
            *out = em_example_values_new(stage);
            for (const cJSON *t = tasks->child; t && !why; t = t->next)
                if (!read_set(t, *out, &why)) break;
        }
    }
    if (why) {
        err = em_error_new(EM_EXIT_BAD_INPUT, "example file %s: %s", path, why);
        em_example_values_free(*out);
        *out = NULL;
    }
    cJSON_Delete(doc);
    free(data);
    return err;
}
