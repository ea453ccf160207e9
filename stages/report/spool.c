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

static void add_opt_string(cJSON *o, const char *key, const char *s) {
    if (s)
        cJSON_AddStringToObject(o, key, s);
    else
        cJSON_AddNullToObject(o, key);
}

em_status em_spool_write(const char *run_dir, const char *name, const em_push_request *req,
                         const char *body, char **path_out) {
    char *dir = em_textfile_join(run_dir, SPOOL_DIR);
    em_status err = em_textfile_mkdirs(dir);
    if (err) {
        free(dir);
        return err;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "target", req->target);
    cJSON_AddStringToObject(o, "url", req->url);
    cJSON_AddStringToObject(o, "method", req->method);
    cJSON_AddStringToObject(o, "content_type", req->content_type);
    cJSON *auth = cJSON_AddObjectToObject(o, "auth");
    cJSON_AddStringToObject(auth, "type", em_auth_type_name(req->auth));
    add_opt_string(auth, "env", req->auth_env);
    add_opt_string(auth, "file", req->auth_file);
    add_opt_string(o, "ca_path", req->ca_path);
    cJSON_AddBoolToObject(o, "verify_tls", req->verify_tls);
    cJSON_AddNumberToObject(o, "timeout_s", req->timeout_s);
    cJSON_AddNumberToObject(o, "retries", req->retries);
    cJSON_AddNumberToObject(o, "backoff_s", req->backoff_s);
    cJSON_AddStringToObject(o, "body", body);
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    char *path = em_xasprintf("%s/%s.json", dir, name);
    free(dir);
    err = em_atomic_write(path, text, strlen(text), 0600);
    free(text);
    if (err || !path_out)
        free(path);
    else
        *path_out = path;
    return err;
}

static char *opt_string(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? em_xstrdup(v->valuestring) : NULL;
}

/* Reads a spool file back into a request and its body. */
static em_status read_spool(const char *path, em_push_request *req, char **body) {
    char *text;
    em_status err = em_read_regular_file(path, EM_RECIPE_MAX_BYTES, "a spool file", &text, NULL);
    if (err) return err;
    cJSON *o = cJSON_Parse(text);
    free(text);
    const cJSON *auth = cJSON_GetObjectItemCaseSensitive(o, "auth");
    const char *auth_type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(auth, "type"));
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(o, "body");
    memset(req, 0, sizeof *req);
    req->target = opt_string(o, "target");
    req->url = opt_string(o, "url");
    req->method = opt_string(o, "method");
    req->content_type = opt_string(o, "content_type");
    if (!o || !cJSON_IsString(b) || !req->target || !req->url || !req->method ||
        !req->content_type || !auth_type) {
        em_push_request_free_fields(req);
        cJSON_Delete(o);
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: not a push spool file", path);
    }
    req->auth = strcmp(auth_type, "basic") == 0    ? EM_AUTH_BASIC
                : strcmp(auth_type, "bearer") == 0 ? EM_AUTH_BEARER
                                                   : EM_AUTH_NONE;
    req->auth_env = opt_string(auth, "env");
    req->auth_file = opt_string(auth, "file");
    req->ca_path = opt_string(o, "ca_path");
    req->verify_tls = !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(o, "verify_tls"));
    req->timeout_s = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, "timeout_s"));
    req->retries = (int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, "retries"));
    req->backoff_s = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, "backoff_s"));
    *body = em_xstrdup(b->valuestring);
    cJSON_Delete(o);
    return NULL;
}

static int compare_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

em_status em_spool_resend(const char *run_dir, int *sent, int *failed) {
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
        if (n < 6 || strcmp(e->d_name + n - 5, ".json") != 0) continue;
        names = em_xrealloc(names, (count + 1) * sizeof *names);
        names[count++] = em_xstrdup(e->d_name);
    }
    closedir(d);
    if (count) qsort(names, count, sizeof *names, compare_names);
    em_status first = NULL;
    for (size_t i = 0; i < count; i++) {
        char *path = em_xasprintf("%s/%s", dir, names[i]);
        em_push_request req;
        char *body = NULL;
        em_status err = read_spool(path, &req, &body);
        if (!err) {
            err = em_push_send(&req, body, strlen(body));
            em_push_request_free_fields(&req);
            free(body);
        }
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
