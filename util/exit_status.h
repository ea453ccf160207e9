/* The table of evalmesh's exit statuses, one row per status: the number and a short meaning.
 * `evalmesh --help` prints it; README's "Exit statuses" table gives each meaning at length and
 * starts each with the short one (tests/runner/test_exit_statuses.py compares the two). */
#ifndef EVALMESH_EXIT_STATUS_H
#define EVALMESH_EXIT_STATUS_H

#include <stddef.h>

typedef struct em_exit_status_info {
    int status;          /* an EM_EXIT_* value (error.h) */
    const char *meaning; /* "ok", "a gate check failed", ... */
} em_exit_status_info;

extern const em_exit_status_info em_exit_statuses[];
extern const size_t em_exit_status_count;

#endif
