/* The threads of a stage on this rank (see stage_threads.h). */
#include "stages/kinds/support/stage_threads.h"

#include <omp.h>
#include <stdlib.h>
#include <unistd.h>

/* OMP_NUM_THREADS when it holds a positive number, else 0. */
static int omp_num_threads_env(void) {
    const char *v = getenv("OMP_NUM_THREADS");
    char *end;
    long n = v ? strtol(v, &end, 10) : 0;
    return v && end != v && n > 0 && n <= 4096 ? (int)n : 0;
}

int em_stage_threads(const em_stage *self, const em_run_context *ctx) {
    if (!em_node_is_null(em_node_get(self->options, "threads")))
        return (int)em_node_option_int(self->options, "threads");
    if (omp_num_threads_env() > 0) return omp_num_threads_env();
    int usable = omp_get_num_procs(); /* the CPUs this process may run on */
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int ranks = ctx->local_size > 0 ? ctx->local_size : 1;
    int threads = usable < online ? usable : usable / ranks;
    return threads < 1 ? 1 : threads;
}
