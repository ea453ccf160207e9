/* Spooling failed pushes and sending them again (see spool.h). */
#include "stages/report/spool.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>

#include "util/atomic_file.h"
#include "util/log.h"
#include "util/regular_file.h"
#include "stages/report/textfile.h"

#define SPOOL_DIR "push-spool"

em_status em_spool_write(const char *run_dir, const em_spool_entry *e, char **path_out) {
    char *dir = em_textfile_join(run_dir, SPOOL_DIR);
    em_status err = em_textfile_mkdirs(dir);
    if (err) {
        free(dir);
        return err;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "stage", e->stage);
    cJSON_AddNumberToObject(o, "output", e->output);
    cJSON_AddStringToObject(o, "target", e->target);
    if (e->job) {
        cJSON_AddStringToObject(o, "job", e->job);
        cJSON *labels = cJSON_AddArrayToObject(o, "labels");
        for (size_t i = 0; i < e->label_count; i++) {
            cJSON *pair = cJSON_CreateArray();
            cJSON_AddItemToArray(pair, cJSON_CreateString(e->labels[i].name));
            cJSON_AddItemToArray(pair, cJSON_CreateString(e->labels[i].value));
            cJSON_AddItemToArray(labels, pair);
        }
    }
    cJSON_AddStringToObject(o, "body", e->body);
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    char *path = em_xasprintf("%s/%s-%d-%s.json", dir, e->stage, e->output, e->target);
    free(dir);
    err = em_atomic_write(path, text, strlen(text), 0600);
    free(text);
    if (err || !path_out)
        free(path);
    else
        *path_out = path;
    return err;
}

static const char *string_of(const cJSON *o, const char *key) {
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, key));
}

/* Reads one spool file and sends it, with the request the recipe gives for its output. */
static em_status resend_one(const char *path, em_spool_resolve resolve, void *user) {
    em_status err = em_check_private_file(path, "a push spool file");
    char *text = NULL;
    if (!err) err = em_read_regular_file(path, EM_TEXT_MAX_BYTES, "a push spool file", &text, NULL);
    if (err) return err;
    cJSON *o = cJSON_Parse(text);
    free(text);
    const cJSON *output = cJSON_GetObjectItemCaseSensitive(o, "output");
    const cJSON *labels = cJSON_GetObjectItemCaseSensitive(o, "labels");
    const char *stage = string_of(o, "stage"), *target = string_of(o, "target");
    const char *job = string_of(o, "job"), *body = string_of(o, "body");
    bool pushgateway = target && strcmp(target, "pushgateway") == 0;
    if (!o || !stage || !target || !body || !cJSON_IsNumber(output) ||
        (pushgateway && (!job || !cJSON_IsArray(labels)))) {
        cJSON_Delete(o);
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: not a push spool file", path);
    }
    size_t n = pushgateway ? (size_t)cJSON_GetArraySize(labels) : 0;
    em_prom_label *grouping = em_xcalloc(n ? n : 1, sizeof *grouping);
    for (size_t i = 0; i < n && !err; i++) {
        const cJSON *pair = cJSON_GetArrayItem(labels, (int)i);
        grouping[i].name = cJSON_GetStringValue(cJSON_GetArrayItem(pair, 0));
        grouping[i].value = cJSON_GetStringValue(cJSON_GetArrayItem(pair, 1));
        if (!grouping[i].name || !grouping[i].value)
            err = em_error_new(EM_EXIT_BAD_INPUT, "%s: label %zu is not a [name, value] pair", path,
                               i + 1);
    }
    em_push_request req = {0};
    if (!err) err = resolve(stage, output->valueint, target, user, &req);
    if (!err && pushgateway) {
        char *base = req.url;
        req.url = em_prometheus_group_url(base, job, grouping, n);
        free(base);
    }
    if (!err) err = em_push_send(&req, body, strlen(body));
    em_push_request_free_fields(&req);
    free(grouping);
    cJSON_Delete(o);
    return err;
}

static int compare_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

em_status em_spool_resend(const char *run_dir, em_spool_resolve resolve, void *user, int *sent,
                          int *failed) {
    *sent = *failed = 0;
    struct stat st;
    if (stat(run_dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: not a run directory", run_dir);
    char *dir = em_textfile_join(run_dir, SPOOL_DIR);
    DIR *d = opendir(dir);
    if (!d) {
        int e = errno;
        free(dir);
        if (e == ENOENT) return NULL;
        return em_error_new(EM_EXIT_BAD_INPUT, "%s/%s: cannot read: %s", run_dir, SPOOL_DIR,
                            strerror(e));
    }
    char **names = NULL;
    size_t count = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (n < 6 || e->d_name[0] == '.' || strcmp(e->d_name + n - 5, ".json") != 0) continue;
        names = em_xrealloc(names, (count + 1) * sizeof *names);
        names[count++] = em_xstrdup(e->d_name);
    }
    closedir(d);
    if (count) qsort(names, count, sizeof *names, compare_names);
    em_status first = NULL;
    for (size_t i = 0; i < count; i++) {
        char *path = em_xasprintf("%s/%s", dir, names[i]);
        em_status err = resend_one(path, resolve, user);
        if (err) {
            (*failed)++;
            if (first) {
                em_log_error("%s", err->message);
                em_error_free(err);
            } else {
                first = err;
            }
        } else {
            (*sent)++;
            unlink(path);
        }
        free(path);
        free(names[i]);
    }
    free(names);
    free(dir);
    return first;
}
