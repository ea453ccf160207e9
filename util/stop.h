/* Graceful stop on signals. SIGTERM, SIGINT and the pre-timeout signal (EVALMESH_STOP_SIGNAL:
 * a name such as USR1 or USR2, or "none"; SIGUSR1 when unset, for `sbatch --signal=B:USR1@120`)
 * only set a flag: long-running loops (the forward, between windows) see it, stop, flush what
 * they finished and return an "interrupted" error (exit status EM_EXIT_INTERRUPTED). The first
 * SIGINT says so on stderr; a second SIGINT ends the process at once with status 130. */
#ifndef EVALMESH_STOP_H
#define EVALMESH_STOP_H

#include "util/error.h"

/* Installs the handlers. Exit 2 when EVALMESH_STOP_SIGNAL names no signal. */
em_status em_stop_install(void);
/* The signal that asked for a stop, or 0. Safe to call from any thread, often. */
int em_stop_signal(void);

#endif
