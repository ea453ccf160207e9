/* HTTP push with retries, TLS and credentials (see push.h). */
#include "stages/report/push.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "util/log.h"
#include "util/redact.h"
#include "stages/report/base64.h"
#include "stages/report/strbuf.h"
#include "util/regular_file.h"

void em_push_request_free_fields(em_push_request *req) {
    free(req->target);
    free(req->url);
    free(req->method);
    free(req->content_type);
    free(req->auth_env);
    free(req->auth_file);
    free(req->ca_path);
}

const char *em_auth_type_name(em_auth_type auth) {
    return auth == EM_AUTH_BASIC ? "basic" : auth == EM_AUTH_BEARER ? "bearer" : "none";
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

em_status em_push_check_url(const char *raw_url) {
    pthread_once(&curl_once, curl_init_once);
    char *url = em_redact_urls(raw_url);
    CURLU *u = curl_url();
    CURLUcode rc = curl_url_set(u, CURLUPART_URL, raw_url, 0);
    em_status err = NULL;
    char *scheme = NULL, *host = NULL, *user = NULL;
    if (rc != CURLUE_OK) {
        err = em_error_new(EM_EXIT_BAD_INPUT, "malformed URL '%s': %s", url, curl_url_strerror(rc));
    } else if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
               (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0)) {
        err = em_error_new(EM_EXIT_BAD_INPUT,
                           "malformed URL '%s': the scheme must be http or https", url);
    } else if (curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !host[0]) {
        err = em_error_new(EM_EXIT_BAD_INPUT, "malformed URL '%s': no host", url);
    } else if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK) {
        err = em_error_new(EM_EXIT_BAD_INPUT,
                           "URL of host '%s' holds a user name or password; put credentials in "
                           "`auth` (an environment variable or a file) instead",
                           host);
    }
    curl_free(scheme);
    curl_free(host);
    curl_free(user);
    curl_url_cleanup(u);
    free(url);
    return err;
}

long em_push_timeout_ms(double timeout_s) {
    double ms = ceil(timeout_s * 1000);
    return !(ms >= 1) ? 1 : ms > 86400000 ? 86400000 : (long)ms;
}

/* The credential named by req (environment variable first, then file), trailing newline cut. */
static em_status read_credential(const em_push_request *req, char **out) {
    if (req->auth_env) {
        const char *v = getenv(req->auth_env);
        if (!v || !*v)
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "%s push: the credential variable %s is not set or empty",
                                req->target, req->auth_env);
        *out = em_xstrdup(v);
        return NULL;
    }
    if (!req->auth_file)
        return em_error_new(EM_EXIT_BAD_INPUT, "%s push: auth %s needs `env` or `file`",
                            req->target, em_auth_type_name(req->auth));
    char *text;
    em_status err =
        em_read_regular_file(req->auth_file, EM_RECIPE_MAX_BYTES, "a credential file", &text, NULL);
    if (err) return em_error_prefix(err, "%s push: credential file", req->target);
    text[strcspn(text, "\r\n")] = 0;
    if (!text[0]) {
        free(text);
        return em_error_new(EM_EXIT_BAD_INPUT, "%s push: credential file %s is empty", req->target,
                            req->auth_file);
    }
    *out = text;
    return NULL;
}

/* The response body, kept short: it goes into error messages. */
static size_t keep_response(char *data, size_t size, size_t nmemb, void *user) {
    em_strbuf *b = user;
    size_t n = size * nmemb;
    if (b->len < 300) em_strbuf_addn(b, data, n < 300 - b->len ? n : 300 - b->len);
    return n;
}

/* One attempt. Returns 0 on success, else fills why and sets *retryable. */
static int attempt(const em_push_request *req, struct curl_slist *headers, const char *body,
                   size_t len, char *why, size_t why_size, bool *retryable) {
    CURL *curl = curl_easy_init();
    char curl_err[CURL_ERROR_SIZE] = {0};
    em_strbuf response = {0};
    curl_easy_setopt(curl, CURLOPT_URL, req->url);
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, req->method);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, em_push_timeout_ms(req->timeout_s));
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, curl_err);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, keep_response);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, req->verify_tls ? 1L : 0L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, req->verify_tls ? 2L : 0L);
    if (req->ca_path) {
        struct stat st;
        bool is_dir = stat(req->ca_path, &st) == 0 && S_ISDIR(st.st_mode);
        curl_easy_setopt(curl, is_dir ? CURLOPT_CAPATH : CURLOPT_CAINFO, req->ca_path);
    }
    CURLcode rc = curl_easy_perform(curl);
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(curl);
    char *text = em_strbuf_take(&response);
    text[strcspn(text, "\r\n")] = 0;
    int failed = 1;
    const char *curl_why = curl_err[0] ? curl_err : curl_easy_strerror(rc);
    if (rc == CURLE_OPERATION_TIMEDOUT) {
        /* libcurl words a timeout by the phase it hit (resolve, connect, transfer): one
         * message for all of them, with the recipe's limit. */
        snprintf(why, why_size, "timed out after %g s (%s)", req->timeout_s, curl_why);
        *retryable = true;
    } else if (rc != CURLE_OK) {
        snprintf(why, why_size, "%s", curl_why);
        *retryable = true;
    } else if (status >= 200 && status < 300) {
        failed = 0;
    } else {
        snprintf(why, why_size, "HTTP %ld%s%s", status, text[0] ? ": " : "", text);
        *retryable = status == 408 || status == 429 || status >= 500;
    }
    free(text);
    return failed;
}

/* Sleeps backoff * 2^i with "equal jitter": half fixed, half uniformly random. */
static void backoff_sleep(double backoff_s, int i, unsigned *seed) {
    double d = backoff_s * pow(2.0, i);
    d = d / 2 + d / 2 * ((double)rand_r(seed) / RAND_MAX);
    struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

em_status em_push_send(const em_push_request *req, const char *body, size_t len) {
    pthread_once(&curl_once, curl_init_once);
    em_status err = em_push_check_url(req->url);
    if (err) return err;
    struct curl_slist *headers = NULL;
    char *h = em_xasprintf("Content-Type: %s", req->content_type);
    headers = curl_slist_append(headers, h);
    free(h);
    headers = curl_slist_append(headers, "Expect:"); /* no 100-continue round trip */
    if (req->auth != EM_AUTH_NONE) {
        char *cred = NULL;
        if ((err = read_credential(req, &cred))) {
            curl_slist_free_all(headers);
            return err;
        }
        char *value = req->auth == EM_AUTH_BASIC ? em_base64_encode(cred, strlen(cred), false)
                                                 : em_xstrdup(cred);
        h = em_xasprintf("Authorization: %s %s", req->auth == EM_AUTH_BASIC ? "Basic" : "Bearer",
                         value);
        headers = curl_slist_append(headers, h);
        free(h);
        free(cred);
        free(value);
    }
    char *shown = em_redact_urls(req->url); /* for messages: no secret from the URL */
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    char why[512] = {0};
    int attempts = req->retries + 1, done = 0, failed = 1;
    for (int i = 0; i < attempts; i++) {
        bool retryable = false;
        done = i + 1;
        failed = attempt(req, headers, body, len, why, sizeof why, &retryable);
        if (!failed) break;
        em_log_warn("%s push to %s: attempt %d of %d failed: %s", req->target, shown, i + 1,
                    attempts, why);
        if (!retryable) break;
        if (i + 1 < attempts) backoff_sleep(req->backoff_s, i, &seed);
    }
    curl_slist_free_all(headers);
    if (!failed) em_log_info("%s push to %s: delivered (attempt %d)", req->target, shown, done);
    em_status result = failed ? em_error_new(EM_EXIT_RUNTIME,
                                             "%s push to %s failed after %d "
                                             "attempt%s: %s",
                                             req->target, shown, done, done == 1 ? "" : "s", why)
                              : NULL;
    free(shown);
    return result;
}
