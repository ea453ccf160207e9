/* The push spool: a push that still failed after its retries is saved as
 * <run_dir>/push-spool/<stage>-<output>-<target>.json so `evalmesh push RUN_DIR` can send it again
 * later. The file holds what the run computed — which report stage and output it came from, the
 * Pushgateway grouping (job and labels) and the body — and nothing a forged file could use to
 * redirect a push or reach a credential: no URL, no credential source, no TLS setting. Those are
 * read again, at resend time, from the run's recipe.resolved.yaml through the `resolve` callback.
 * Spool files and the recipe must be regular files owned by the current user and writable by
 * nobody else; others are refused. A file is removed once it was delivered. */
#ifndef EVALMESH_REPORT_SPOOL_H
#define EVALMESH_REPORT_SPOOL_H

#include <stddef.h>

#include "stages/report/prometheus.h"
#include "stages/report/push.h"

/* One spooled push. */
typedef struct em_spool_entry {
    const char *stage;           /* the report stage's instance name */
    int output;                  /* the index of the output in its `outputs` list */
    const char *target;          /* "pushgateway" or "webhook" */
    const char *job;             /* pushgateway: the grouping's job; NULL for a webhook */
    const em_prom_label *labels; /* pushgateway: the other grouping labels */
    size_t label_count;
    const char *body;
} em_spool_entry;

/* Writes the spool file (mode 0600); *path_out (heap, may be NULL) receives its path. */
em_status em_spool_write(const char *run_dir, const em_spool_entry *entry, char **path_out);

/* Fills *req (all but the URL's grouping path) for stage `stage`, output `output` of the run's
 * recipe, checking that it is a `target` output; user is em_spool_resend's. */
typedef em_status (*em_spool_resolve)(const char *stage, int output, const char *target, void *user,
                                      em_push_request *req);

/* Sends every spooled request of run_dir again (in file name order), removing the delivered
 * ones. *sent and *failed count files. Returns the first failure (the others are logged); an
 * absent spool folder is not an error (nothing to send), an unreadable run_dir is (exit 2), and
 * so is a spool file that is not a regular file owned by this user and writable only by them. */
em_status em_spool_resend(const char *run_dir, em_spool_resolve resolve, void *user, int *sent,
                          int *failed);

#endif
