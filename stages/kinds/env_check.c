/* Stage `env_check`: the checks of `evalmesh check-env` inside a recipe, with `require:`
 * thresholds. Every rank checks itself, then the ranks exchange their failures (and, with
 * same_environment, their environment fingerprints), so all of them stop together with one
 * message naming each failing rank and check (exit status 4) before any model is loaded.
 * The exchange goes over the world group of the run's default mesh (it runs before any mesh stage
 * needs to). Produces the environment report (em_env_report) of this rank. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/comm/comm.h"
#include "runner/comm/mesh_groups.h"
#include "runner/diag/env_probe.h"
#include "runner/stage.h"
#include "util/log.h"

#define FAILURE_TEXT 480

typedef struct env_check_state {
    em_env_requirements req;
    char kernel[32], nccl[32], cuda[32], pmix[32];
    bool same_environment;
} env_check_state;

/* What every rank sends to the others. */
typedef struct rank_verdict {
    unsigned long long fingerprint;
    int failures;
    char text[FAILURE_TEXT]; /* "kernel 4.10 does not satisfy >=4.15; ..." */
} rank_verdict;

static void copy_option(const em_node *require, const char *key, char *dst, size_t size,
                        const char **field) {
    const char *v = em_node_get_string(require, key, NULL);
    if (!v) return;
    snprintf(dst, size, "%s", v);
    *field = dst;
}

static em_status env_check_init(em_stage *self, const em_run_context *ctx) {
    env_check_state *st = em_xcalloc(1, sizeof *st);
    self->state = st;
    const em_node *require = em_node_get(self->options, "require");
    st->req = (em_env_requirements){0};
    st->req.local_size = ctx->local_size > 0 ? ctx->local_size : 1;
    copy_option(require, "kernel", st->kernel, sizeof st->kernel, &st->req.kernel);
    copy_option(require, "nccl", st->nccl, sizeof st->nccl, &st->req.nccl);
    copy_option(require, "cuda", st->cuda, sizeof st->cuda, &st->req.cuda_driver);
    copy_option(require, "pmix", st->pmix, sizeof st->pmix, &st->req.pmix);
    st->req.min_memory_gb = em_node_get_double(require, "min_memory_gb", 0);
    st->req.gpus_per_rank = (int)em_node_get_int(require, "gpus_per_rank", 0);
    st->req.gpus = (int)em_node_get_int(require, "gpus", 0);
    st->same_environment = em_node_option_bool(require, "same_environment");
    return NULL;
}

static void free_report(void *data) {
    free(data);
}

static em_status env_check_run(em_stage *self, const em_run_context *ctx) {
    env_check_state *st = self->state;
    em_env_facts facts;
    em_env_collect(&facts);
    em_env_report *report = em_xmalloc(sizeof *report);
    em_status err = em_env_judge(&facts, &st->req, report);
    if (err) {
        free(report);
        return err;
    }
    self->output = (em_artifact){.data = report, .free = free_report};

    rank_verdict mine = {0};
    mine.fingerprint = em_env_fingerprint(&facts);
    size_t used = 0;
    for (int i = 0; i < report->check_count; i++) {
        const em_env_check *c = &report->checks[i];
        if (c->status != EM_CHECK_FAIL) continue;
        mine.failures++;
        int n = snprintf(mine.text + used, sizeof mine.text - used, "%s%s: %s", used ? "; " : "",
                         c->name, c->reason);
        if (n > 0)
            used += (size_t)n < sizeof mine.text - used ? (size_t)n : sizeof mine.text - used - 1;
    }

    em_comm *group = em_stage_mesh(self, ctx)->world;
    int world = group->size;
    rank_verdict *all = em_xcalloc((size_t)world, sizeof *all);
    err = em_allgather(group, &mine, all, sizeof mine);
    if (err) {
        free(all);
        return err;
    }
    char *message = NULL;
    for (int r = 0; r < world; r++) {
        char line[FAILURE_TEXT + 128] = "";
        if (all[r].failures)
            snprintf(line, sizeof line, "rank %d: %s", r, all[r].text);
        else if (st->same_environment && all[r].fingerprint != all[0].fingerprint)
            snprintf(line, sizeof line,
                     "rank %d: environment differs from rank 0's (OS, kernel, CPU, BLAS, CUDA, "
                     "NCCL, PMIx or MPI; run `evalmesh check-env --distributed` to see which)",
                     r);
        if (!line[0]) continue;
        char *joined =
            message ? em_xasprintf("%s\n  %s", message, line) : em_xasprintf("  %s", line);
        free(message);
        message = joined;
    }
    free(all);
    if (message) {
        err = em_error_new(EM_EXIT_RUNTIME, "environment requirements not met:\n%s", message);
        free(message);
        return err;
    }
    em_log_info("env_check: %d checks passed on %d ranks", report->check_count, world);
    return NULL;
}

static void env_check_destroy(em_stage *self) {
    free(self->state);
}

const em_stage_kind em_stage_kind_env_check = {
    .name = "env_check",
    .summary = "check every rank's environment against requirements before anything heavy runs",
    .produces = "env",
    .inputs = NULL,
    .collective = true,
    .init = env_check_init,
    .run = env_check_run,
    .destroy = env_check_destroy,
};
