/* The mesh: the communicators a distributed evaluation needs, built from the world by splits.
 *
 *   world   every rank
 *   node    the ranks on this rank's node, in world-rank order (local rank 0 is the node leader)
 *   cross   the ranks with this rank's local index, one per node (for local rank 0: the leaders)
 *   dp, tp, cp   data-, tensor- and context-parallel groups, dp * tp * cp == world size
 *
 * Rank order: tp is innermost, then cp, then dp:
 *     world rank = (dp_rank * cp + cp_rank) * tp + tp_rank
 * so a tp group is tp consecutive world ranks, a cp group strides by tp, a dp group by tp * cp.
 *
 * Hierarchical reduction sums inside each node, then across nodes among the node leaders, then
 * broadcasts inside each node. It only ever sums (never averages), so nodes of unequal size give
 * the same integer and exact-sum totals as a flat all-reduce. The dp group has the same two
 * levels (dp_node: this dp group's ranks on this node; dp_cross: one per node with this rank's
 * index in dp_node), so stages reduce over dp hierarchically too. */
#ifndef EVALMESH_MESH_GROUPS_H
#define EVALMESH_MESH_GROUPS_H

#include "runner/comm/comm.h"
#include "runner/comm/exact_sum.h"

typedef struct em_mesh {
    const char *backend; /* "local", "mpi" or "nccl" */
    int dp, tp, cp;      /* group sizes */
    int dp_rank, tp_rank, cp_rank;
    int node_id, node_count, local_rank, local_size;
    em_comm *world; /* all owned by the mesh */
    em_comm *node;
    em_comm *cross;
    em_comm *dp_group;
    em_comm *tp_group;
    em_comm *cp_group;
    em_comm *dp_node;  /* the dp group's ranks on this node */
    em_comm *dp_cross; /* the dp group's ranks with this rank's dp_node index, one per node */
    int64_t *calls;    /* collectives per group (EM_MESH_GROUPS) once counted, else NULL */
} em_mesh;

enum { EM_MESH_GROUPS = 8 }; /* world, node, cross, dp, dp_node, dp_cross, tp, cp */

/* Completes a shape for a world of `world_size` ranks: a size of 0 means `auto` (at most one).
 * On failure returns a new message without location, e.g.
 * "dp*tp*cp = 2*3*1 = 6 but the world has 4 ranks". */
char *em_mesh_shape(int world_size, int *dp, int *tp, int *cp);

/* Builds every group from `world` (the mesh takes it) on a node numbered node_id (equal for
 * ranks that share a node; the bootstrap's node id, or an emulated one in tests). The shape must
 * already be complete (em_mesh_shape). Collective over world; the node leaders tell their node
 * the node count and index through a host-memory broadcast, so world must be a CPU (local or mpi)
 * communicator. */
em_status em_mesh_build(em_comm *world, int node_id, int dp, int tp, int cp, em_mesh **out);
/* The same for any backend (nccl included) when node ids are already 0..node_count-1 and the
 * count is known (the bootstrap's node_id and node_count): only splits, no data moves. */
em_status em_mesh_build_nodes(em_comm *world, int node_id, int node_count, int dp, int tp, int cp,
                              em_mesh **out);
void em_mesh_free(em_mesh *mesh);

/* Wraps every group in the counting backend (backend_counting.h): from now on mesh->calls counts
 * the collectives called on each group. */
void em_mesh_count_calls(em_mesh *mesh);
/* "world 1, node 0, cross 0, dp 0, dp_node 2, dp_cross 2, tp 0, cp 0" (a new string). */
char *em_mesh_calls_text(const em_mesh *mesh);

/* The hierarchical all-reduce (node, then leaders, then node broadcast). Buffers are where the
 * mesh's backend wants them: device memory for nccl. */
em_status em_mesh_allreduce(em_mesh *mesh, const void *send, void *recv, size_t count,
                            em_dtype dtype, em_reduce_op op);
/* Exact sums reduced hierarchically; host memory, so a CPU mesh only (an error for nccl). */
em_status em_mesh_exact_sum_allreduce(em_mesh *mesh, em_exact_sum *sums, size_t n);
/* The same two over the dp group (dp_node, then dp_cross, then dp_node broadcast): what stages
 * use to total their per-rank results. */
em_status em_mesh_dp_allreduce(em_mesh *mesh, const void *send, void *recv, size_t count,
                               em_dtype dtype, em_reduce_op op);
em_status em_mesh_dp_exact_sum_allreduce(em_mesh *mesh, em_exact_sum *sums, size_t n);

#endif
