/* The collective backends a mesh can be built on, one row each: its name, what it needs (checked
 * before anything runs, each failure a message for the user) and `create`, which makes the world
 * communicator of the mesh from the bootstrap's CPU world. The mesh stage looks a backend up here
 * by name; adding a backend is adding a row. */
#ifndef EVALMESH_BACKEND_TABLE_H
#define EVALMESH_BACKEND_TABLE_H

#include <stdbool.h>

#include "runner/comm/comm.h"

typedef struct em_backend_row {
    const char *name;
    bool compiled;       /* this build has it */
    bool one_rank;       /* it holds one rank only */
    bool needs_launcher; /* its ranks come from a launcher (the CPU world is mpi) */
    bool gpu_buffers;    /* its collectives take GPU memory */
    /* The backend's world over the ranks of cpu_world (collective over cpu_world). */
    em_status (*create)(em_comm *cpu_world, int local_rank, double timeout_s, em_comm **out);
} em_backend_row;

/* The row named `name`, or NULL. */
const em_backend_row *em_backend_find(const char *name);
/* Every row, in table order: *count of them. */
const em_backend_row *em_backend_rows(size_t *count);

/* Why `row` cannot serve a world of world_size ranks whose CPU world has backend cpu_backend
 * (NULL when unknown, as in `evalmesh validate`), as a new message; NULL when it can. */
char *em_backend_unavailable(const em_backend_row *row, int world_size, const char *cpu_backend);

#endif
