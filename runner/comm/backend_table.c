/* The table of collective backends (see backend_table.h). */
#include "runner/comm/backend_table.h"

#include <string.h>

#include "build_info.h"
#include "runner/comm/backend_local.h"
#include "runner/comm/backend_nccl.h"

static em_status create_local(em_comm *cpu_world, int local_rank, double timeout_s, em_comm **out) {
    (void)local_rank;
    *out = em_comm_local_new(cpu_world->world_ranks[cpu_world->rank], timeout_s);
    return NULL;
}

/* The mesh owns its world, so it gets a copy of the CPU world. */
static em_status create_mpi(em_comm *cpu_world, int local_rank, double timeout_s, em_comm **out) {
    (void)local_rank;
    em_status err = em_comm_split(cpu_world, 0, cpu_world->rank, out);
    if (!err) em_comm_set_timeout(*out, timeout_s);
    return err;
}

static const em_backend_row rows[] = {
    {"local", true, true, false, false, create_local},
    {"mpi", true, false, true, false, create_mpi},
    {"nccl", EVALMESH_HAVE_CUDA, false, false, true, em_comm_nccl_world},
};

const em_backend_row *em_backend_rows(size_t *count) {
    *count = sizeof rows / sizeof *rows;
    return rows;
}

const em_backend_row *em_backend_find(const char *name) {
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
        if (strcmp(rows[i].name, name) == 0) return &rows[i];
    return NULL;
}

char *em_backend_unavailable(const em_backend_row *row, int world_size, const char *cpu_backend) {
    if (!row->compiled)
        return em_xasprintf("backend %s: this evalmesh was built without CUDA and NCCL (its "
                            "backends: %s)",
                            row->name, EVALMESH_BACKENDS);
    if (row->one_rank && world_size > 1)
        return em_xasprintf("backend %s holds one rank, but the world has %d ranks (use mpi or "
                            "nccl)",
                            row->name, world_size);
    if (row->needs_launcher && cpu_backend && strcmp(cpu_backend, "mpi") != 0)
        return em_xasprintf("backend %s needs a launcher (mpirun, srun --mpi=pmix); this process "
                            "runs alone (use local or auto)",
                            row->name);
    return NULL;
}
