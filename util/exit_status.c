/* The exit-status table (see exit_status.h). */
#include "util/exit_status.h"

#include "util/error.h"

const em_exit_status_info em_exit_statuses[] = {
    {EM_EXIT_OK, "ok"},
    {EM_EXIT_FAILURE, "internal error (a bug in evalmesh)"},
    {EM_EXIT_BAD_INPUT, "bad recipe, arguments or input file"},
    {EM_EXIT_GATE, "a gate check failed"},
    {EM_EXIT_RUNTIME, "a stage failed at run time"},
    {EM_EXIT_DISTRIBUTED, "distributed failure"},
    {EM_EXIT_INTERRUPTED, "interrupted by SIGTERM, SIGINT or the pre-timeout signal"},
};

const size_t em_exit_status_count = sizeof em_exit_statuses / sizeof em_exit_statuses[0];
