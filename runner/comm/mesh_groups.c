/* Building the mesh's groups and the hierarchical reduction (see mesh_groups.h). */
#include "runner/comm/mesh_groups.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/comm/backend_counting.h"

char *em_mesh_shape(int world_size, int *dp, int *tp, int *cp) {
    int *sizes[3] = {dp, tp, cp};
    const char *names[3] = {"dp", "tp", "cp"};
    int autos = 0, which = -1;
    for (int i = 0; i < 3; i++)
        if (*sizes[i] == 0) autos++, which = which < 0 ? i : which;
    if (autos > 1) {
        char list[32] = "";
        for (int i = 0, n = 0; i < 3; i++)
            if (*sizes[i] == 0)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
                         n++ ? (n == autos ? " and " : ", ") : "", names[i]);
        return em_xasprintf("at most one of dp, tp, cp may be auto, but %s are", list);
    }
    if (autos == 1) {
        int a = (which + 1) % 3, b = (which + 2) % 3;
        if (a > b) {
            int t = a;
            a = b;
            b = t;
        }
        int rest = *sizes[a] * *sizes[b];
        if (world_size % rest != 0)
            return em_xasprintf("%s*%s = %d does not divide the world size %d", names[a], names[b],
                                rest, world_size);
        *sizes[which] = world_size / rest;
        return NULL;
    }
    long product = (long)*dp * *tp * *cp;
    if (product != world_size)
        return em_xasprintf("dp*tp*cp = %d*%d*%d = %ld but the world has %d rank%s", *dp, *tp, *cp,
                            product, world_size, world_size == 1 ? "" : "s");
    return NULL;
}

/* node_count < 0: ask the node leaders (host-memory broadcast). */
static em_status build(em_comm *world, int node_id, int node_count, int dp, int tp, int cp,
                       em_mesh **out) {
    *out = NULL;
    if ((long)dp * tp * cp != world->size)
        return em_error_new(EM_EXIT_FAILURE, "mesh: %d*%d*%d is not the world size %d", dp, tp, cp,
                            world->size);
    em_mesh *m = em_xcalloc(1, sizeof *m);
    m->backend = world->backend->name;
    m->world = world;
    m->dp = dp;
    m->tp = tp;
    m->cp = cp;
    int r = world->rank;
    m->tp_rank = r % tp;
    m->cp_rank = (r / tp) % cp;
    m->dp_rank = r / (tp * cp);
    em_status err = em_comm_split(world, node_id, r, &m->node);
    if (!err) {
        m->local_rank = m->node->rank;
        m->local_size = m->node->size;
        err = em_comm_split(world, m->local_rank, r, &m->cross);
    }
    if (!err && node_count >= 0) {
        m->node_count = node_count;
        m->node_id = node_id;
    } else if (!err) {
        /* Node leaders count the nodes and tell their node. */
        int nodes = m->local_rank == 0 ? m->cross->size : 0;
        int index = m->local_rank == 0 ? m->cross->rank : 0;
        int info[2] = {nodes, index};
        err = em_broadcast(m->node, info, sizeof info, 0);
        m->node_count = info[0];
        m->node_id = info[1];
    }
    if (!err) err = em_comm_split(world, r / tp, m->tp_rank, &m->tp_group);
    if (!err) err = em_comm_split(world, m->dp_rank * tp + m->tp_rank, m->cp_rank, &m->cp_group);
    if (!err) err = em_comm_split(world, r % (tp * cp), m->dp_rank, &m->dp_group);
    if (!err) err = em_comm_split(m->dp_group, m->node_id, m->dp_rank, &m->dp_node);
    if (!err) err = em_comm_split(m->dp_group, m->dp_node->rank, m->dp_rank, &m->dp_cross);
    if (err) {
        em_mesh_free(m);
        return err;
    }
    *out = m;
    return NULL;
}

em_status em_mesh_build(em_comm *world, int node_id, int dp, int tp, int cp, em_mesh **out) {
    if (strcmp(world->backend->name, "nccl") == 0) {
        *out = NULL;
        return em_error_new(EM_EXIT_FAILURE, "mesh: em_mesh_build needs a CPU world; for nccl "
                                             "use em_mesh_build_nodes");
    }
    return build(world, node_id, -1, dp, tp, cp, out);
}

em_status em_mesh_build_nodes(em_comm *world, int node_id, int node_count, int dp, int tp, int cp,
                              em_mesh **out) {
    if (node_id < 0 || node_id >= node_count) {
        *out = NULL;
        return em_error_new(EM_EXIT_FAILURE, "mesh: node id %d is not below the node count %d",
                            node_id, node_count);
    }
    return build(world, node_id, node_count, dp, tp, cp, out);
}

void em_mesh_free(em_mesh *m) {
    if (!m) return;
    em_comm_destroy(m->dp_cross);
    em_comm_destroy(m->dp_node);
    em_comm_destroy(m->dp_group);
    em_comm_destroy(m->cp_group);
    em_comm_destroy(m->tp_group);
    em_comm_destroy(m->cross);
    em_comm_destroy(m->node);
    em_comm_destroy(m->world);
    free(m->calls);
    free(m);
}

/* The groups in the order of EM_MESH_GROUPS, and their names. */
static void group_slots(em_mesh *m, em_comm **slots[EM_MESH_GROUPS]) {
    em_comm **all[EM_MESH_GROUPS] = {&m->world,   &m->node,     &m->cross,    &m->dp_group,
                                     &m->dp_node, &m->dp_cross, &m->tp_group, &m->cp_group};
    memcpy(slots, all, sizeof all);
}
static const char *const group_names[EM_MESH_GROUPS] = {"world",   "node",     "cross", "dp",
                                                        "dp_node", "dp_cross", "tp",    "cp"};

void em_mesh_count_calls(em_mesh *m) {
    if (m->calls) return;
    m->calls = em_xcalloc(EM_MESH_GROUPS, sizeof *m->calls);
    em_comm **slots[EM_MESH_GROUPS];
    group_slots(m, slots);
    for (int g = 0; g < EM_MESH_GROUPS; g++)
        *slots[g] = em_comm_counting_wrap(*slots[g], &m->calls[g]);
}

char *em_mesh_calls_text(const em_mesh *m) {
    char text[256] = "";
    for (int g = 0; g < EM_MESH_GROUPS && m->calls; g++)
        snprintf(text + strlen(text), sizeof text - strlen(text), "%s%s %lld", g ? ", " : "",
                 group_names[g], (long long)m->calls[g]);
    return em_xstrdup(text);
}

/* Sums inside `node`, then among the node leaders over `cross`, then broadcasts inside `node`. */
static em_status hierarchical(em_comm *node, em_comm *cross, const void *send, void *recv,
                              size_t count, em_dtype dtype, em_reduce_op op) {
    em_status err = em_allreduce(node, send, recv, count, dtype, op);
    if (!err && node->rank == 0) err = em_allreduce(cross, recv, recv, count, dtype, op);
    if (!err) err = em_broadcast(node, recv, count * em_dtype_size(dtype), 0);
    return err ? em_error_prefix(err, "hierarchical all-reduce") : NULL;
}

/* Exact sums as int64 limbs through one hierarchical all-reduce. */
static em_status hierarchical_exact(const em_mesh *m, em_comm *node, em_comm *cross,
                                    em_exact_sum *sums, size_t n) {
    if (strcmp(m->backend, "nccl") == 0)
        return em_error_new(EM_EXIT_FAILURE, "exact sums need a CPU mesh (local or mpi), not nccl");
    if (n == 0) return NULL;
    int64_t *flat = em_xmalloc(n * 4 * sizeof *flat);
    em_exact_sum_pack(sums, n, flat);
    em_status err = hierarchical(node, cross, flat, flat, 4 * n, EM_DTYPE_INT64, EM_OP_SUM);
    if (!err) em_exact_sum_unpack(flat, n, sums);
    free(flat);
    return err;
}

em_status em_mesh_allreduce(em_mesh *m, const void *send, void *recv, size_t count, em_dtype dtype,
                            em_reduce_op op) {
    return hierarchical(m->node, m->cross, send, recv, count, dtype, op);
}

em_status em_mesh_exact_sum_allreduce(em_mesh *m, em_exact_sum *sums, size_t n) {
    return hierarchical_exact(m, m->node, m->cross, sums, n);
}

em_status em_mesh_dp_allreduce(em_mesh *m, const void *send, void *recv, size_t count,
                               em_dtype dtype, em_reduce_op op) {
    return hierarchical(m->dp_node, m->dp_cross, send, recv, count, dtype, op);
}

em_status em_mesh_dp_exact_sum_allreduce(em_mesh *m, em_exact_sum *sums, size_t n) {
    return hierarchical_exact(m, m->dp_node, m->dp_cross, sums, n);
}
