/* The push spool: a push that still failed after its retries is saved as
 * <run_dir>/push-spool/<name>.json — the request (URL, method, content type, TLS and retry
 * settings, and *where* the credential comes from, never the credential) plus the body — so
 * `evalmesh push RUN_DIR` can send it again later. A file is removed once it was delivered. */
#ifndef EVALMESH_REPORT_SPOOL_H
#define EVALMESH_REPORT_SPOOL_H

#include "stages/report/push.h"

/* Writes the spool file; *path_out (heap, may be NULL) receives its path. */
em_status em_spool_write(const char *run_dir, const char *name, const em_push_request *req,
                         const char *body, char **path_out);

/* Sends every spooled request of run_dir again (in file name order), removing the delivered
 * ones. *sent and *failed count files. Returns the first failure (the others are logged); an
 * absent spool folder is not an error (nothing to send), an unreadable run_dir is (exit 2). */
em_status em_spool_resend(const char *run_dir, int *sent, int *failed);

#endif
