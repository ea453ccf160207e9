/* The heartbeat hook: long computations (the forward's layer loop) call em_heartbeat() often, so
 * whoever watches this process (the runner's rank state file, read by `evalmesh check-state`) can
 * tell a rank busy inside one long step from a silent one. The layer that keeps the state sets
 * the hook; without one em_heartbeat() does nothing. The hook is called from the thread that
 * calls em_heartbeat() and must be cheap (it rate-limits itself). */
#ifndef EVALMESH_HEARTBEAT_H
#define EVALMESH_HEARTBEAT_H

typedef void (*em_heartbeat_fn)(void *arg);

/* Sets the hook (fn NULL: none). */
void em_heartbeat_set(em_heartbeat_fn fn, void *arg);
/* Calls the hook, if any. */
void em_heartbeat(void);

#endif
