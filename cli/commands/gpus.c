/* `evalmesh gpus RECIPE [overrides]`: how many GPUs each rank of the recipe needs, for job
 * scripts (tools/slurm/submit asks Slurm for GPUs only when this says 1): 1 when some stage runs
 * on a forward backend whose row needs a GPU (`device: cuda`) or a mesh uses a collective backend
 * whose row takes GPU memory (`backend: nccl`), else 0 (`backend: auto` uses GPUs only where they
 * are, so it needs none). Reads the resolved recipe only: it runs on a login node without a
 * GPU. */
#include <stdio.h>

#include "cli/command.h"
#include "cli/options.h"
#include "runner/comm/backend_table.h"
#include "runner/pipeline.h"
#include "util/log.h"
#include "stages/kernels/forward_backend.h"

static const char usage[] =
    "usage: evalmesh gpus RECIPE [KEY.PATH=VALUE | ~KEY.PATH ...]\n"
    "\n"
    "Prints the GPUs each rank needs for the recipe with the overrides applied: 1 when a stage\n"
    "has `device: cuda` or `backend: nccl`, else 0 (a job script asks for GPUs by it).\n"
    "\n"
    "Exit statuses: 0 ok, 2 bad recipe or arguments.\n";

static const struct option options[] = {{NULL, 0, NULL, 0}};

static int gpus_main(int argc, char **argv) {
    int c;
    while ((c = em_cli_option("gpus", argc, argv, "", options)) != -1)
        if (c == '?') return EM_EXIT_BAD_INPUT;
    if (optind >= argc) {
        em_log_error("evalmesh gpus: missing RECIPE (see evalmesh gpus --help)");
        return EM_EXIT_BAD_INPUT;
    }
    em_pipeline *p;
    em_status err = em_pipeline_load(argv[optind], (const char *const *)argv + optind + 1,
                                     (size_t)(argc - optind - 1), &p);
    if (err) {
        int code = err->exit_code;
        em_log_error("%s", err->message);
        em_error_free(err);
        return code;
    }
    int need = 0;
    for (size_t i = 0; i < p->dag->count; i++) {
        const em_node *o = p->dag->stages[i].options;
        const em_forward_backend *device =
            em_forward_backend_find(em_node_get_string(o, "device", ""));
        const em_backend_row *backend = em_backend_find(em_node_get_string(o, "backend", ""));
        need |= (device && device->needs_gpu) || (backend && backend->gpu_buffers);
    }
    printf("%d\n", need);
    em_pipeline_free(p);
    return EM_EXIT_OK;
}

const em_command em_command_gpus = {
    .name = "gpus",
    .summary = "print the GPUs each rank of a recipe needs (0 or 1), for job scripts",
    .usage = usage,
    .main = gpus_main,
};
