/* Stage `mesh`: builds the communicators of the run (runner/comm/mesh_groups.h) from the options
 * dp, tp, cp (integers >= 1, at most one "auto") and backend (auto, local, mpi, nccl). init checks
 * what it can without running collectives: two autos, a shape that does not fit the world size, a
 * backend this build or this launch cannot give (all exit status 2; backends are rows of
 * runner/comm/backend_table.h). `evalmesh validate` knows no world, so there only the
 * world-independent checks run. run makes the backend's world and splits it into the groups on
 * every rank; its artifact is an em_mesh. With count_calls every group counts its collectives and
 * each rank logs the counts when the mesh is freed (how tests see which group a stage uses). */
#include <stdlib.h>
#include <string.h>

#include "runner/comm/backend_nccl.h"
#include "runner/comm/backend_table.h"
#include "runner/comm/mesh_groups.h"
#include "runner/stage.h"
#include "util/log.h"

typedef struct mesh_state {
    int dp, tp, cp; /* 0 = auto until init completes them */
    const char *backend;
    const em_backend_row *row;
    bool count_calls;
} mesh_state;

/* Reads dp/tp/cp (validated by the schema: an integer >= 1 or "auto"); auto is 0. */
static int read_size(const em_stage *self, const char *key) {
    const em_node *n = em_node_get(self->options, key);
    if (!n || em_node_scalar_type(n) != EM_SCALAR_INT) return 0;
    return (int)em_node_option_int(self->options, key);
}

static em_status mesh_init(em_stage *self, const em_run_context *ctx) {
    mesh_state *st = em_xcalloc(1, sizeof *st);
    self->state = st;
    st->dp = read_size(self, "dp");
    st->tp = read_size(self, "tp");
    st->cp = read_size(self, "cp");
    st->backend = em_node_option_string(self->options, "backend");
    st->count_calls = em_node_option_bool(self->options, "count_calls");
    const em_node *backend_node = em_node_get(self->options, "backend");
    em_mark backend_mark = backend_node ? backend_node->mark : self->mark;
    if (strcmp(st->backend, "auto") == 0) {
        /* nccl when the world has several ranks and every one sees a GPU (asked of all ranks
         * together when the world exists; validation alone cannot know), else mpi or local */
        bool gpus = false;
        if (ctx->world && ctx->world_size > 1) {
            em_status err = em_comm_nccl_everywhere(ctx->world, &gpus);
            if (err) return em_error_prefix(err, "stage '%s': backend auto", self->name);
        }
        st->backend = gpus ? "nccl" : ctx->world_size > 1 ? "mpi" : "local";
    }

    /* Without a world (validate) the size is unknown: then only two autos are an error. */
    int autos = (st->dp == 0) + (st->tp == 0) + (st->cp == 0);
    if (ctx->world || autos > 1) {
        char *why = em_mesh_shape(ctx->world_size, &st->dp, &st->tp, &st->cp);
        if (why) {
            em_status err =
                em_error_at(EM_EXIT_BAD_INPUT, self->mark, "stage '%s': %s", self->name, why);
            free(why);
            return err;
        }
    }

    st->row = em_backend_find(st->backend);
    if (!st->row)
        return em_error_at(EM_EXIT_BAD_INPUT, backend_mark, "stage '%s': unknown backend '%s'",
                           self->name, st->backend);
    char *why = em_backend_unavailable(st->row, ctx->world_size,
                                       ctx->world ? ctx->world->backend->name : NULL);
    if (why) {
        em_status err =
            em_error_at(EM_EXIT_BAD_INPUT, backend_mark, "stage '%s': %s", self->name, why);
        free(why);
        return err;
    }
    return NULL;
}

/* With count_calls, each rank logs the collectives its stages called on each group. */
static void free_mesh(void *data) {
    em_mesh *m = data;
    if (m->calls) {
        char *text = em_mesh_calls_text(m);
        em_log_info("mesh collectives: %s", text);
        free(text);
    }
    em_mesh_free(m);
}

static em_status mesh_run(em_stage *self, const em_run_context *ctx) {
    mesh_state *st = self->state;
    em_comm *world = NULL;
    em_status err = st->row->create(ctx->world, ctx->local_rank, ctx->collective_timeout_s, &world);
    if (err) return err;
    em_mesh *m = NULL;
    err = em_mesh_build_nodes(world, ctx->node_id, ctx->node_count, st->dp, st->tp, st->cp, &m);
    if (err) return err;
    em_log_info("mesh: dp %d x tp %d x cp %d over %d rank%s on %d node%s, backend %s; this rank: "
                "dp %d tp %d cp %d, local rank %d of %d",
                m->dp, m->tp, m->cp, ctx->world_size, ctx->world_size == 1 ? "" : "s",
                m->node_count, m->node_count == 1 ? "" : "s", m->backend, m->dp_rank, m->tp_rank,
                m->cp_rank, m->local_rank, m->local_size);
    if (st->count_calls) em_mesh_count_calls(m);
    self->output = (em_artifact){.data = m, .free = free_mesh};
    return NULL;
}

static void mesh_destroy(em_stage *self) {
    free(self->state);
    self->state = NULL;
}

const em_stage_kind em_stage_kind_mesh = {
    .name = "mesh",
    .summary = "communicators: world, node-local, cross-node, dp/tp/cp groups (dp*tp*cp = world)",
    .produces = "mesh",
    .inputs = NULL,
    .collective = true,
    .init = mesh_init,
    .run = mesh_run,
    .destroy = mesh_destroy,
};
