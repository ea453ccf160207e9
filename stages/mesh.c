/* Stage `mesh`: builds the communicators of the run (runner/comm/mesh.h) from the options dp, tp,
 * cp (integers >= 1, at most one "auto") and backend (auto, local, mpi, nccl). init checks what
 * it can without running collectives: two autos, a shape that does not fit the world size, a
 * backend this build or this launch cannot give (all exit status 2). `evalmesh validate` knows no
 * world, so there only the world-independent checks run. run splits the world into the groups on
 * every rank; its artifact is an em_mesh. */
#include <stdlib.h>
#include <string.h>

#include "build_info.h"
#include "runner/comm/backend_local.h"
#include "runner/comm/backend_nccl.h"
#include "runner/comm/mesh_groups.h"
#include "runner/stage.h"
#include "util/log.h"

typedef struct mesh_state {
    int dp, tp, cp; /* 0 = auto until init completes them */
    const char *backend;
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
    const em_node *backend_node = em_node_get(self->options, "backend");
    em_mark backend_mark = backend_node ? backend_node->mark : self->mark;
    if (strcmp(st->backend, "auto") == 0) st->backend = ctx->world_size > 1 ? "mpi" : "local";

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

    if (strcmp(st->backend, "nccl") == 0 && !EVALMESH_HAVE_CUDA)
        return em_error_at(EM_EXIT_BAD_INPUT, backend_mark,
                           "stage '%s': backend nccl: this evalmesh was built without CUDA and "
                           "NCCL (its backends: %s)",
                           self->name, EVALMESH_BACKENDS);
    if (strcmp(st->backend, "local") == 0 && ctx->world_size > 1)
        return em_error_at(EM_EXIT_BAD_INPUT, backend_mark,
                           "stage '%s': backend local holds one rank, but the world has %d ranks "
                           "(use mpi or nccl)",
                           self->name, ctx->world_size);
    if (strcmp(st->backend, "mpi") == 0 && ctx->world &&
        strcmp(ctx->world->backend->name, "mpi") != 0)
        return em_error_at(EM_EXIT_BAD_INPUT, backend_mark,
                           "stage '%s': backend mpi needs a launcher (mpirun, srun --mpi=pmix); "
                           "this process runs alone (use local or auto)",
                           self->name);
    return NULL;
}

static void free_mesh(void *data) {
    em_mesh_free(data);
}

static em_status mesh_run(em_stage *self, const em_run_context *ctx) {
    mesh_state *st = self->state;
    em_comm *world = NULL;
    em_status err = NULL;
    if (strcmp(st->backend, "local") == 0)
        world = em_comm_local_new(ctx->rank, ctx->collective_timeout_s);
    else if (strcmp(st->backend, "mpi") == 0)
        err = em_comm_split(ctx->world, 0, ctx->rank, &world);
    else
        err = em_comm_nccl_world(ctx->world, ctx->local_rank, ctx->collective_timeout_s, &world);
    if (err) return err;
    em_mesh *m = NULL;
    err = em_mesh_build_nodes(world, ctx->node_id, ctx->node_count, st->dp, st->tp, st->cp, &m);
    if (err) return err;
    em_log_info("mesh: dp %d x tp %d x cp %d over %d rank%s on %d node%s, backend %s; this rank: "
                "dp %d tp %d cp %d, local rank %d of %d",
                m->dp, m->tp, m->cp, ctx->world_size, ctx->world_size == 1 ? "" : "s",
                m->node_count, m->node_count == 1 ? "" : "s", m->backend, m->dp_rank, m->tp_rank,
                m->cp_rank, m->local_rank, m->local_size);
    self->output = (em_artifact){.type = EM_ARTIFACT_MESH, .data = m, .free = free_mesh};
    return NULL;
}

static void mesh_destroy(em_stage *self) {
    free(self->state);
    self->state = NULL;
}

const em_stage_kind em_stage_kind_mesh = {
    .name = "mesh",
    .summary = "communicators: world, node-local, cross-node, dp/tp/cp groups (dp*tp*cp = world)",
    .produces = EM_ARTIFACT_MESH,
    .inputs = NULL,
    .collective = true,
    .init = mesh_init,
    .run = mesh_run,
    .destroy = mesh_destroy,
};
