/* Sending one HTTP request with libcurl the way a scheduled job needs: a timeout, retries with
 * exponential backoff and jitter, TLS verification on unless turned off, an optional CA file or
 * folder, and credentials read from an environment variable or a file at send time, so they are
 * never stored with the request (nor logged, nor spooled). Used for Pushgateway PUTs and JSON
 * webhook POSTs. */
#ifndef EVALMESH_REPORT_PUSH_H
#define EVALMESH_REPORT_PUSH_H

#include <stdbool.h>
#include <stddef.h>

#include "util/error.h"

typedef enum em_auth_type {
    EM_AUTH_NONE,
    EM_AUTH_BASIC,  /* the credential is "user:password" */
    EM_AUTH_BEARER, /* the credential is a token */
} em_auth_type;

/* Everything needed to send (again) except the body and the credential itself. */
typedef struct em_push_request {
    char *target; /* "pushgateway" or "webhook", for messages */
    char *url;
    char *method; /* "PUT" or "POST" */
    char *content_type;
    em_auth_type auth;
    char *auth_env;  /* name of the environment variable holding the credential, or NULL */
    char *auth_file; /* file holding the credential (one line), or NULL */
    char *ca_path;   /* CA bundle file or folder; NULL for the system's */
    bool verify_tls;
    double timeout_s; /* per attempt (see em_push_timeout_ms) */
    int retries;      /* attempts after the first */
    double backoff_s; /* wait before the first retry; doubled for each next one, with jitter */
} em_push_request;

void em_push_request_free_fields(em_push_request *req);
const char *em_auth_type_name(em_auth_type auth);

/* Checks that url is an absolute http(s) URL with a host and no user:password (credentials go in
 * `auth`). Errors are exit status 2 and quote the URL. */
em_status em_push_check_url(const char *url);

/* The per-attempt limit given to libcurl: timeout_s in milliseconds, rounded up and at least 1
 * (libcurl reads 0 as "no limit", so a tiny timeout must never become 0), at most a day. */
long em_push_timeout_ms(double timeout_s);

/* Sends body; on a connection error, a timeout, HTTP 408, 429 or 5xx it retries up to
 * req->retries times, logging a warning per failed attempt. Errors are exit status 4 (2 for a
 * missing credential) and say what the last attempt got. */
em_status em_push_send(const em_push_request *req, const char *body, size_t len);

#endif
