/* One rank's run from start-up to exit status (see session.h). */
#include "runner/session.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runner/comm/bootstrap.h"
#include "runner/comm/mesh_groups.h"
#include "runner/executor.h"
#include "runner/progress.h"
#include "runner/rank_state.h"
#include "runner/run_dir.h"
#include "util/clock.h"
#include "util/sha256.h"
#include "util/stop.h"
#include "util/log.h"

static int report(em_status err) {
    int code = err->exit_code;
    em_log_error("%s", err->message);
    em_error_free(err);
    return code;
}

/* All ranks learn every rank's outcome of a step, so they stop together. Rank 0 prints its own
 * error; another rank prints its error only when rank 0 had none (the same recipe fails the same
 * way everywhere, and one message is enough). Returns the exit status to stop with, or 0. */
static int agree(em_comm *world, em_status err, const char *step) {
    int32_t mine = err ? err->exit_code : 0;
    int32_t *codes = em_xcalloc((size_t)world->size, sizeof *codes);
    em_status gerr = em_allgather(world, &mine, codes, sizeof mine);
    if (gerr) {
        free(codes);
        em_error_free(err);
        return report(em_error_prefix(gerr, "%s", step));
    }
    int32_t first = 0;
    int failed = 0;
    for (int r = 0; r < world->size; r++) {
        if (codes[r] && !first) first = codes[r];
        failed += codes[r] != 0;
    }
    int32_t root = codes[0];
    free(codes);
    if (err && (world->rank == 0 || root == 0)) return report(err);
    em_error_free(err);
    if (mine) return mine;
    if (!failed) return 0;
    if (world->rank == 0)
        em_log_error("%s failed on %d rank%s (see their messages)", step, failed,
                     failed > 1 ? "s" : "");
    return root ? root : first;
}

/* The mesh stages use when their recipe names none: dp over the whole world, on a copy of it. */
static em_status default_mesh(const em_bootstrap *boot, em_mesh **out) {
    em_comm *world;
    em_status err = em_comm_split(boot->world, 0, boot->rank, &world);
    if (!err)
        err = em_mesh_build_nodes(world, boot->node_id, boot->node_count, boot->size, 1, 1, out);
    return err;
}

/* A launcher that sees a rank die (SIGKILL, a crash) stops the others with SIGTERM (mpirun) before
 * they can notice in a collective: they stop as if interrupted. When a peer on this node died
 * without a word (its state file still says running, its process is gone), that is the cause:
 * the error becomes a distributed one (exit 5) naming it. */
static em_status blame_dead_peer(em_status err, const char *dir, int world_size, int rank) {
    char *dead = em_rank_state_find_dead(dir, world_size, rank);
    if (!dead) return err;
    em_status blamed = em_error_new(
        EM_EXIT_DISTRIBUTED, "%s; the launcher then stopped this rank: %s", dead, err->message);
    free(dead);
    em_error_free(err);
    return blamed;
}

/* The run itself, once every rank has prepared and initialised the pipeline. */
static int run_initialised(em_pipeline *p, em_run_context *ctx, const em_session_options *opts) {
    char *dir;
    em_status err = em_run_dir_create(ctx->world, p->name, opts->run_dir, opts->force, &dir);
    if (err) {
        if (ctx->rank == 0) return report(err);
        int code = err->exit_code; /* rank 0 has said why */
        em_error_free(err);
        return code;
    }
    char *recipe_text = em_run_dir_recipe_text(p->recipe), recipe_sha[65];
    em_sha256_hex(recipe_text, strlen(recipe_text), recipe_sha);
    ctx->recipe_sha256 = recipe_sha;
    ctx->resume = opts->resume;
    /* every rank reads the same file and finds the same; rank 0 says so */
    if (opts->resume) err = em_run_dir_check_recipe(dir, recipe_text);
    free(recipe_text);
    if (err) {
        free(dir);
        ctx->recipe_sha256 = NULL;
        if (ctx->rank == 0) return report(err);
        int code = err->exit_code;
        em_error_free(err);
        return code;
    }
    FILE *log_file = NULL;
    if (ctx->rank == 0 && !opts->resume) {
        err = em_run_dir_write_recipe(dir, p->recipe);
        if (!err && opts->argc > 0) err = em_run_dir_write_invocation(dir, opts->argc, opts->argv);
    }
    if (!err) err = em_run_dir_open_log(dir, ctx->rank, &log_file);
    if (log_file) em_log_set_file(log_file);
    em_rank_state *state = NULL;
    if (!err) err = em_rank_state_open(dir, ctx->rank, ctx->world_size, &state);
    em_rank_state_set_current(state);
    ctx->run_dir = dir;

    double start = em_clock_seconds();
    if (!err && ctx->rank == 0) em_pipeline_warn_without_results(p);
    if (!err) {
        if (ctx->rank == 0)
            em_log_info("%s: %zu stages on %d rank%s, run directory %s", p->path, p->dag->count,
                        ctx->world_size, ctx->world_size > 1 ? "s" : "", dir);
        /* rank 0 shows the progress of all ranks, read from their state files */
        em_progress *progress = ctx->rank == 0 ? em_progress_start(dir, ctx->world_size) : NULL;
        err = em_executor_run(p->dag, ctx, opts->threads, state);
        em_progress_stop(progress);
    }
    int code = 0;
    bool end_job = false;
    if (err && err->exit_code == EM_EXIT_INTERRUPTED && ctx->world_size > 1)
        err = blame_dead_peer(err, dir, ctx->world_size, ctx->rank);
    if (err) {
        /* A dead or silent peer: say which in the state file, then end the job (below) so the
         * launcher stops every rank now instead of each waiting for its own timeout. */
        end_job = err->exit_code == EM_EXIT_DISTRIBUTED && ctx->world_size > 1;
        if (end_job) em_rank_state_fail(state, err->message);
        /* Let the other ranks stop waiting for this one (a gate fails the same on every rank),
         * once the message is out: a launcher may kill this rank as soon as a peer has exited. */
        bool abort_peers = err->exit_code != EM_EXIT_GATE && ctx->world_size > 1;
        char *reason = abort_peers ? em_xstrdup(err->message) : NULL;
        code = report(err);
        if (abort_peers) em_comm_abort(ctx->world, reason);
        free(reason);
    } else if (ctx->rank == 0) {
        em_log_info("%s: done in %.2f s, run directory %s", p->path, em_clock_seconds() - start,
                    dir);
    }
    em_rank_state_set_current(NULL);
    if (state) em_rank_state_close(state);
    em_log_set_file(NULL);
    if (log_file) fclose(log_file);
    if (end_job)
        em_bootstrap_abort_job(code, "evalmesh: a rank found the job broken (see its message)");
    free(dir);
    ctx->recipe_sha256 = NULL;
    return code;
}

int em_session_run(em_status prepared, em_pipeline *p, const em_session_options *opts) {
    em_bootstrap boot;
    em_status err =
        em_bootstrap_init(p ? p->init_timeout_s : em_pipeline_default_init_timeout(), &boot);
    if (err) {
        em_error_free(prepared);
        em_pipeline_free(p);
        return report(err);
    }
    em_log_set_rank(boot.rank, boot.size);
    if (!prepared) prepared = em_stop_install();
    int code = agree(boot.world, prepared, "preparing the recipe");
    if (code == 0) {
        em_comm_set_timeout(boot.world, p->collective_timeout_s);
        em_run_context ctx = em_pipeline_context(p, &boot);
        em_status init_err = em_executor_init(p->dag, &ctx);
        int initialised = init_err == NULL;
        code = agree(boot.world, init_err, "initialising the stages");
        if (code == 0)
            code = agree(boot.world, default_mesh(&boot, &ctx.mesh), "building the mesh");
        if (code == 0) code = run_initialised(p, &ctx, opts);
        if (initialised) em_executor_finish(p->dag);
        em_mesh_free(ctx.mesh);
    }
    em_bootstrap_finalize(&boot);
    em_pipeline_free(p);
    return code;
}
