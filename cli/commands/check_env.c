/* `evalmesh check-env [--distributed] [--json]`: the environment, line by line with pass, warn or
 * fail and the reason. With --distributed (under a launcher) every rank checks itself and rank 0
 * reports per node, flagging ranks whose environment differs from rank 0's. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/command.h"
#include "cli/json_out.h"
#include "cli/options.h"
#include "runner/comm/bootstrap.h"
#include "runner/diag/env_probe.h"
#include "util/log.h"

/* What each rank sends to rank 0 with --distributed. */
typedef struct rank_summary {
    char hostname[64];
    int rank;
    int node_id;
    int failures;
    int warnings;
    unsigned long long fingerprint;
    char kernel[64];
    char nccl[32];
    char cuda_driver[32];
    int gpu_count;
} rank_summary;

static int report_distributed(const em_env_report *report, bool json) {
    em_bootstrap boot;
    em_status err = em_bootstrap_init(180.0, &boot);
    if (err) {
        fprintf(stderr, "check-env: %s\n", err->message);
        int code = err->exit_code;
        em_error_free(err);
        return code;
    }
    em_log_set_rank(boot.rank, boot.size);
    rank_summary mine = {0};
    snprintf(mine.hostname, sizeof mine.hostname, "%s", report->facts.hostname);
    mine.rank = boot.rank;
    mine.node_id = boot.node_id;
    mine.failures = report->failures;
    mine.warnings = report->warnings;
    mine.fingerprint = em_env_fingerprint(&report->facts);
    snprintf(mine.kernel, sizeof mine.kernel, "%s", report->facts.kernel);
    snprintf(mine.nccl, sizeof mine.nccl, "%s", report->facts.nccl);
    snprintf(mine.cuda_driver, sizeof mine.cuda_driver, "%s", report->facts.cuda_driver);
    mine.gpu_count = report->facts.gpu_count;

    rank_summary *all = em_xcalloc((size_t)boot.size, sizeof *all);
    err = em_allgather(boot.world, &mine, all, sizeof mine);
    int status = 0;
    if (err) {
        fprintf(stderr, "check-env: %s\n", err->message);
        status = err->exit_code;
        em_error_free(err);
    } else if (boot.rank == 0) {
        int differing = 0, failing = 0;
        for (int r = 0; r < boot.size; r++) {
            if (all[r].fingerprint != all[0].fingerprint) differing++;
            if (all[r].failures) failing++;
        }
        if (json) {
            cJSON *doc = cJSON_CreateObject();
            cJSON_AddNumberToObject(doc, "ranks", boot.size);
            cJSON_AddNumberToObject(doc, "nodes", boot.node_count);
            cJSON_AddNumberToObject(doc, "differing", differing);
            cJSON_AddNumberToObject(doc, "failing", failing);
            cJSON_AddItemToObject(doc, "rank0", em_env_report_json(report));
            cJSON *per_rank = cJSON_AddArrayToObject(doc, "per_rank");
            for (int r = 0; r < boot.size; r++) {
                cJSON *item = cJSON_CreateObject();
                cJSON_AddNumberToObject(item, "rank", all[r].rank);
                cJSON_AddNumberToObject(item, "node", all[r].node_id);
                cJSON_AddStringToObject(item, "host", all[r].hostname);
                cJSON_AddNumberToObject(item, "failures", all[r].failures);
                cJSON_AddBoolToObject(item, "same_as_rank0",
                                      all[r].fingerprint == all[0].fingerprint);
                cJSON_AddItemToArray(per_rank, item);
            }
            em_print_json(doc);
        } else {
            printf("rank 0 (%s):\n", all[0].hostname);
            em_env_print_text(report, stdout);
            printf("\n%d ranks on %d nodes\n", boot.size, boot.node_count);
            for (int node = 0; node < boot.node_count; node++) {
                printf("node %d:", node);
                for (int r = 0; r < boot.size; r++) {
                    if (all[r].node_id != node) continue;
                    printf(" r%d(%s%s)", r, all[r].hostname,
                           all[r].failures   ? ", FAIL"
                           : all[r].warnings ? ", warn"
                                             : "");
                }
                printf("\n");
            }
            for (int r = 0; r < boot.size; r++)
                if (all[r].fingerprint != all[0].fingerprint)
                    printf("differs: rank %d on %s: kernel %s, nccl %s, cuda %s, %d GPUs (rank 0: "
                           "kernel %s, nccl %s, cuda %s, %d GPUs)\n",
                           r, all[r].hostname, all[r].kernel, all[r].nccl[0] ? all[r].nccl : "-",
                           all[r].cuda_driver[0] ? all[r].cuda_driver : "-", all[r].gpu_count,
                           all[0].kernel, all[0].nccl[0] ? all[0].nccl : "-",
                           all[0].cuda_driver[0] ? all[0].cuda_driver : "-", all[0].gpu_count);
            printf("%d ranks differ from rank 0, %d ranks fail a check\n", differing, failing);
        }
        if (failing) status = EM_EXIT_RUNTIME;
    }
    if (!err) {
        /* every rank returns the same status */
        long long s = status;
        long long agreed = 0;
        em_status e2 = em_allreduce(boot.world, &s, &agreed, 1, EM_DTYPE_INT64, EM_OP_MAX);
        if (e2)
            em_error_free(e2);
        else
            status = (int)agreed;
    }
    free(all);
    em_bootstrap_finalize(&boot);
    return status;
}

static int check_env_main(int argc, char **argv) {
    static const struct option options[] = {
        {"json", no_argument, NULL, 'j'},
        {"distributed", no_argument, NULL, 'd'},
        {"gpus", required_argument, NULL, 'g'},
        {0},
    };
    bool json = false, distributed = false;
    int c, gpus = 0;
    while ((c = em_cli_option("check-env", argc, argv, "", options)) != -1) {
        if (c == 'j') {
            json = true;
        } else if (c == 'd') {
            distributed = true;
        } else if (c == 'g') {
            char *end;
            long n = strtol(optarg, &end, 10);
            if (*optarg == 0 || *end != 0 || n < 0 || n > 4096) {
                fprintf(stderr,
                        "error: evalmesh check-env: --gpus takes a count of GPUs, not '%s'\n",
                        optarg);
                return EM_EXIT_BAD_INPUT;
            }
            gpus = (int)n;
        } else {
            return EM_EXIT_BAD_INPUT;
        }
    }
    if (optind < argc) return em_cli_unexpected("check-env", argv[optind]);
    em_env_facts facts;
    em_env_collect(&facts);
    em_env_requirements req = em_env_default_requirements();
    req.gpus = gpus;
    em_env_report report;
    em_status err = em_env_judge(&facts, &req, &report);
    if (err) {
        fprintf(stderr, "check-env: %s\n", err->message);
        em_error_free(err);
        return EM_EXIT_FAILURE;
    }
    if (distributed) return report_distributed(&report, json);
    if (json)
        em_print_json(em_env_report_json(&report));
    else
        em_env_print_text(&report, stdout);
    return report.failures ? EM_EXIT_RUNTIME : EM_EXIT_OK;
}

const em_command em_command_check_env = {
    .name = "check-env",
    .summary = "check this machine (or every rank) for what an evaluation needs",
    .usage = "usage: evalmesh check-env [--distributed] [--json] [--gpus N]\n\n"
             "Checks OS and kernel (>= 4.15), CPU and cores, memory, OpenMP (+ OpenBLAS) threads,\n"
             "CUDA driver/runtime and GPUs with their memory and links (nvidia-smi topo -m), NCCL\n"
             "(>= 2.14 when present), PMIx and whether a PMIx\n"
             "server is reachable, the MPI library and network interfaces. Each line says pass,\n"
             "warn, FAIL or info and why.\n\n"
             "  --distributed  run under a launcher (srun --mpi=pmix, mpirun): every rank checks\n"
             "                 itself; rank 0 prints per node and flags ranks that differ\n"
             "  --json         machine-readable output\n"
             "  --gpus N       fail unless this node has at least N GPUs (as the env_check\n"
             "                 stage's require: {gpus: N})\n\n"
             "Exit status: 0 all checks passed, 4 a check failed, 5 a rank did not answer.\n",
    .main = check_env_main,
};
