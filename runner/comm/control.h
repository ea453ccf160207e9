/* The control plane: small byte blobs exchanged between ranks outside the collectives, through
 * PMIx put/commit/fence/get (the NCCL unique id, per-rank metadata such as host names). Without a
 * launcher the process is rank 0 of 1 and the blobs stay in this process, so callers need no
 * special case. Calls are collective where marked: every rank of the job must make them. */
#ifndef EVALMESH_CONTROL_H
#define EVALMESH_CONTROL_H

#include <stdbool.h>
#include <stddef.h>

#include "util/error.h"

/* Connects to the PMIx server when `launched`, giving this rank and the job size. */
em_status em_control_init(bool launched, int *rank, int *size);
void em_control_finalize(void);
/* PMIx_Abort of the whole job with status (when PMIx is up; else nothing). */
void em_control_abort(int status, const char *reason);

/* Publishes this rank's blob under key (put + commit). Keys are short ASCII names. */
em_status em_control_put(const char *key, const void *data, size_t bytes);
/* Collective over the whole job: waits until every rank has published what it put before, or
 * fails after timeout_s with EM_EXIT_DISTRIBUTED naming the ranks that did not answer (probed
 * by their `probe_key`, the key every rank puts before this fence; NULL to skip probing). */
em_status em_control_fence(double timeout_s, const char *probe_key);
/* Reads rank's blob under key (after a fence); its size must be exactly `bytes`. */
em_status em_control_get(int rank, const char *key, void *data, size_t bytes);

/* A number the launcher knows about this process or job (PMIX_LOCAL_RANK, PMIX_NODEID, ...);
 * false when it does not say. `job_level` asks about the job rather than this process. */
bool em_control_query_u32(const char *pmix_key, bool job_level, unsigned *out);

#endif
