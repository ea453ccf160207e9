/* `evalmesh bench-comm`: collective bandwidth sweeps in the manner of nccl-tests. For each size
 * from -b to -e (times -f) it runs all-reduce (sum of float32), all-gather and broadcast, prints
 * the time per call, the algorithm bandwidth (bytes / time) and the bus bandwidth (what each link
 * carried: all-reduce algbw * 2(n-1)/n, all-gather algbw * (n-1)/n, broadcast algbw), and a #wrong
 * column: inputs are small integers, so every result element is checked exactly.
 *
 * Sizes follow nccl-tests: for all-reduce and broadcast the buffer each rank holds, for
 * all-gather the gathered result (each rank sends size/n). Times are the slowest rank's. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/comm/backend_nccl.h"
#include "runner/comm/bootstrap.h"
#include "runner/comm/mesh_groups.h"
#include "cli/command.h"
#include "cli/json_out.h"
#include "cli/options.h"
#include "runner/diag/bench_args.h"
#include "runner/diag/bench_buffers.h"
#include "util/clock.h"
#include "util/log.h"

typedef enum bench_op { OP_ALLREDUCE, OP_ALLGATHER, OP_BROADCAST, OP_COUNT } bench_op;
static const char *op_names[OP_COUNT] = {"allreduce", "allgather", "broadcast"};

typedef struct bench_options {
    size_t min_bytes, max_bytes;
    int factor;
    int iters, warmup;
    bool ops[OP_COUNT];
    bool json;
    double timeout_s;
    const char *backend;
    bool hierarchical; /* all-reduce inside nodes, across node leaders, broadcast inside nodes */
} bench_options;

/* What the collectives run on: a flat communicator, or the mesh for --hierarchical. */
typedef struct bench_target {
    em_comm *comm;
    em_mesh *mesh; /* non-NULL with --hierarchical (all-reduce only) */
} bench_target;

typedef struct bench_row {
    bench_op op;
    size_t bytes;
    double seconds;      /* per call, slowest rank */
    double algbw, busbw; /* GB/s */
    long long wrong;
} bench_row;

/* Rank r's input element i: small integers whose sums stay exact in float32 for any world size
 * up to a few thousand ranks. */
static float input_value(int rank, size_t i) {
    return (float)((rank + 1) * (int)(i % 13 + 1));
}

static em_status run_op(const bench_target *t, bench_op op, float *send, float *recv,
                        size_t count) {
    em_comm *comm = t->comm;
    switch (op) {
    case OP_ALLREDUCE:
        if (t->mesh)
            return em_mesh_allreduce(t->mesh, send, recv, count, EM_DTYPE_FLOAT32, EM_OP_SUM);
        return em_allreduce(comm, send, recv, count, EM_DTYPE_FLOAT32, EM_OP_SUM);
    case OP_ALLGATHER:
        return em_allgather(comm, send, recv, count / (size_t)comm->size * sizeof(float));
    case OP_BROADCAST:
        return em_broadcast(comm, recv, count * sizeof(float), 0);
    default:
        return NULL;
    }
}

static void fill_inputs(em_comm *comm, bench_op op, float *send, float *recv, size_t count) {
    size_t n = op == OP_ALLGATHER ? count / (size_t)comm->size : count;
    for (size_t i = 0; i < n; i++) send[i] = input_value(comm->rank, i);
    if (op == OP_BROADCAST)
        for (size_t i = 0; i < count; i++) recv[i] = comm->rank == 0 ? input_value(0, i) : -1.0f;
}

static long long count_wrong(em_comm *comm, bench_op op, const float *recv, size_t count) {
    long long wrong = 0;
    int n = comm->size;
    size_t block = count / (size_t)n;
    for (size_t i = 0; i < count; i++) {
        float expect;
        if (op == OP_ALLREDUCE)
            expect = (float)((i % 13 + 1) * (size_t)n * (size_t)(n + 1) / 2);
        else if (op == OP_ALLGATHER)
            expect = input_value((int)(i / block), i % block);
        else
            expect = input_value(0, i);
        if (op == OP_ALLGATHER && i >= block * (size_t)n) break;
        if (recv[i] != expect) wrong++;
    }
    return wrong;
}

/* One size of one collective: a checked call, warmup, then timed iterations. The inputs are
 * made and checked in host memory and copied to and from the buffers the backend uses. */
static em_status bench_one(const bench_target *t, const bench_options *o, bench_op op, size_t bytes,
                           em_bench_buffer *send_buf, em_bench_buffer *recv_buf, bench_row *row) {
    em_comm *comm = t->comm;
    float *send = send_buf->device, *recv = recv_buf->device;
    size_t count = bytes / sizeof(float);
    if (op == OP_ALLGATHER) { /* whole float32 elements per rank, at least one */
        count -= count % (size_t)comm->size;
        if (count == 0) count = (size_t)comm->size;
    }
    row->op = op;
    row->bytes = count * sizeof(float);
    fill_inputs(comm, op, send_buf->host, recv_buf->host, count);
    em_status err = em_bench_buffer_upload(send_buf, count * sizeof(float));
    if (!err) err = em_bench_buffer_upload(recv_buf, count * sizeof(float));
    if (!err) err = run_op(t, op, send, recv, count);
    if (!err) err = em_bench_buffer_download(recv_buf, count * sizeof(float));
    if (err) return err;
    long long wrong = count_wrong(comm, op, recv_buf->host, count);
    for (int i = 0; i < o->warmup && !err; i++) err = run_op(t, op, send, recv, count);
    if (!err) err = em_barrier(comm);
    if (err) return err;
    double start = em_clock_seconds();
    for (int i = 0; i < o->iters && !err; i++) err = run_op(t, op, send, recv, count);
    double mine = (em_clock_seconds() - start) / o->iters;
    if (err) return err;
    double slowest = 0;
    long long total_wrong = 0;
    if ((err = em_allreduce(comm, &mine, &slowest, 1, EM_DTYPE_FLOAT64, EM_OP_MAX))) return err;
    if ((err = em_allreduce(comm, &wrong, &total_wrong, 1, EM_DTYPE_INT64, EM_OP_SUM))) return err;
    int n = comm->size;
    row->seconds = slowest;
    row->wrong = total_wrong;
    row->algbw = slowest > 0 ? (double)row->bytes / slowest / 1e9 : 0;
    double factor = op == OP_ALLREDUCE   ? 2.0 * (n - 1) / n
                    : op == OP_ALLGATHER ? (double)(n - 1) / n
                                         : 1.0;
    row->busbw = row->algbw * factor;
    return NULL;
}

static int usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "bench-comm: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see evalmesh bench-comm --help)\n");
    return EM_EXIT_BAD_INPUT;
}

static int parse_options(int argc, char **argv, bench_options *o) {
    *o = (bench_options){.min_bytes = 8,
                         .max_bytes = 32u << 20,
                         .factor = 2,
                         .iters = 20,
                         .warmup = 5,
                         .timeout_s = 60,
                         .backend = "mpi"};
    static const struct option options[] = {
        {"iters", required_argument, NULL, 'i'},   {"warmup", required_argument, NULL, 'w'},
        {"backend", required_argument, NULL, 'B'}, {"op", required_argument, NULL, 'o'},
        {"timeout", required_argument, NULL, 't'}, {"json", no_argument, NULL, 'j'},
        {"hierarchical", no_argument, NULL, 'H'},  {0},
    };
    bool any_op = false;
    int c;
    while ((c = em_cli_option("bench-comm", argc, argv, "b:e:f:", options)) != -1) {
        const char *v = optarg;
        if (c == 'b' || c == 'e') {
            if (!em_parse_bytes(v, c == 'b' ? &o->min_bytes : &o->max_bytes))
                return usage_error("'%s' is not a size like 8, 64K or 256M", v);
        } else if (c == 'f') {
            o->factor = atoi(v);
            if (o->factor < 2) return usage_error("-f must be an integer >= 2, got '%s'", v);
        } else if (c == 'i' || c == 'w') {
            int n = atoi(v);
            if (n < (c == 'i' ? 1 : 0)) return usage_error("'%s' is not a valid count", v);
            *(c == 'i' ? &o->iters : &o->warmup) = n;
        } else if (c == 't') {
            o->timeout_s = atof(v);
            if (o->timeout_s <= 0) return usage_error("--timeout must be positive, got '%s'", v);
        } else if (c == 'B') {
            if (strcmp(v, "mpi") != 0 && strcmp(v, "nccl") != 0)
                return usage_error("unknown backend '%s' (mpi or nccl)", v);
            o->backend = v;
        } else if (c == 'o') {
            bool known = false;
            for (int k = 0; k < OP_COUNT; k++)
                if (strcmp(v, op_names[k]) == 0 || strcmp(v, "all") == 0) {
                    o->ops[k] = true;
                    known = true;
                }
            if (!known)
                return usage_error("unknown --op '%s' (allreduce, allgather, broadcast, all)", v);
            any_op = true;
        } else if (c == 'j') {
            o->json = true;
        } else if (c == 'H') {
            o->hierarchical = true;
        } else {
            return EM_EXIT_BAD_INPUT;
        }
    }
    if (optind < argc) return usage_error("unexpected argument '%s'", argv[optind]);
    if (o->hierarchical && any_op && (o->ops[OP_ALLGATHER] || o->ops[OP_BROADCAST]))
        return usage_error("--hierarchical measures all-reduce only%s", "");
    if (!any_op)
        for (int k = 0; k < OP_COUNT; k++) o->ops[k] = !o->hierarchical || k == OP_ALLREDUCE;
    if (o->min_bytes < sizeof(float)) o->min_bytes = sizeof(float);
    if (o->max_bytes < o->min_bytes) return usage_error("-e is smaller than -b%s", "");
    return 0;
}

static void print_rows(const bench_options *o, const bench_row *rows, int count, int ranks,
                       int nodes, double avg_busbw) {
    if (o->json) {
        cJSON *doc = cJSON_CreateObject();
        cJSON_AddStringToObject(doc, "backend", o->backend);
        cJSON_AddBoolToObject(doc, "hierarchical", o->hierarchical);
        cJSON_AddNumberToObject(doc, "ranks", ranks);
        cJSON_AddNumberToObject(doc, "nodes", nodes);
        cJSON_AddNumberToObject(doc, "iters", o->iters);
        cJSON_AddNumberToObject(doc, "warmup", o->warmup);
        cJSON *results = cJSON_AddArrayToObject(doc, "results");
        for (int i = 0; i < count; i++) {
            cJSON *row = cJSON_CreateObject();
            cJSON_AddStringToObject(row, "op", op_names[rows[i].op]);
            cJSON_AddNumberToObject(row, "bytes", (double)rows[i].bytes);
            cJSON_AddNumberToObject(row, "time_us", rows[i].seconds * 1e6);
            cJSON_AddNumberToObject(row, "algbw_gbs", rows[i].algbw);
            cJSON_AddNumberToObject(row, "busbw_gbs", rows[i].busbw);
            cJSON_AddNumberToObject(row, "wrong", (double)rows[i].wrong);
            cJSON_AddItemToArray(results, row);
        }
        cJSON_AddNumberToObject(doc, "avg_busbw_gbs", avg_busbw);
        em_print_json(doc);
        return;
    }
    printf("# evalmesh bench-comm: backend %s%s, %d ranks on %d nodes, float32, %d iters after %d "
           "warmup\n#\n",
           o->backend, o->hierarchical ? " (hierarchical)" : "", ranks, nodes, o->iters, o->warmup);
    printf("# %12s %12s %10s %12s %12s %12s %8s\n", "size(B)", "count", "op", "time(us)",
           "algbw(GB/s)", "busbw(GB/s)", "#wrong");
    for (int i = 0; i < count; i++)
        printf("  %12zu %12zu %10s %12.2f %12.4f %12.4f %8lld\n", rows[i].bytes,
               rows[i].bytes / sizeof(float), op_names[rows[i].op], rows[i].seconds * 1e6,
               rows[i].algbw, rows[i].busbw, rows[i].wrong);
    printf("# Avg bus bandwidth    : %.4f GB/s\n", avg_busbw);
}

/* The communicator (and mesh) the sweep runs on; NULL target.comm when it cannot be made. */
static em_status make_target(const bench_options *o, const em_bootstrap *boot, bench_target *t) {
    *t = (bench_target){0};
    em_comm *comm = NULL;
    em_status err;
    if (strcmp(o->backend, "nccl") == 0)
        err = em_comm_nccl_world(boot->world, boot->local_rank, o->timeout_s, &comm);
    else
        err = em_comm_split(boot->world, 0, boot->rank, &comm); /* a private copy of the world */
    if (err) return err;
    em_comm_set_timeout(comm, o->timeout_s);
    if (!o->hierarchical) {
        t->comm = comm;
        return NULL;
    }
    err = em_mesh_build_nodes(comm, boot->node_id, boot->node_count, boot->size, 1, 1, &t->mesh);
    if (err) return err;
    t->comm = t->mesh->world;
    return NULL;
}

static void free_target(bench_target *t) {
    if (t->mesh)
        em_mesh_free(t->mesh);
    else
        em_comm_destroy(t->comm);
}

static int bench_comm_main(int argc, char **argv) {
    bench_options o;
    int bad = parse_options(argc, argv, &o);
    if (bad) return bad;
    em_bootstrap boot;
    em_status err = em_bootstrap_init(o.timeout_s, &boot);
    if (err) {
        fprintf(stderr, "bench-comm: %s\n", err->message);
        int code = err->exit_code;
        em_error_free(err);
        return code;
    }
    em_log_set_rank(boot.rank, boot.size);
    em_comm_set_timeout(boot.world, o.timeout_s);
    bench_target target;
    err = make_target(&o, &boot, &target);

    bool on_device = strcmp(o.backend, "nccl") == 0;
    size_t max_bytes = (o.max_bytes / sizeof(float) + (size_t)boot.size) * sizeof(float);
    em_bench_buffer send = {0}, recv = {0};
    if (!err) err = em_bench_buffer_alloc(&send, max_bytes, on_device);
    if (!err) err = em_bench_buffer_alloc(&recv, max_bytes, on_device);

    int capacity = 256, count = 0;
    bench_row *rows = em_xcalloc((size_t)capacity, sizeof *rows);
    double busbw_sum = 0;
    long long wrong = 0;
    for (size_t bytes = o.min_bytes; !err && bytes <= o.max_bytes; bytes *= (size_t)o.factor) {
        for (int op = 0; op < OP_COUNT && !err; op++) {
            if (!o.ops[op] || count >= capacity) continue;
            err = bench_one(&target, &o, (bench_op)op, bytes, &send, &recv, &rows[count]);
            if (err) {
                err = em_error_prefix(err, "%s of %zu bytes", op_names[op], bytes);
                break;
            }
            busbw_sum += rows[count].busbw;
            wrong += rows[count].wrong;
            count++;
        }
        if (bytes > o.max_bytes / (size_t)o.factor) break;
    }
    int status = EM_EXIT_OK;
    if (err) {
        fprintf(stderr, "bench-comm: rank %d: %s\n", boot.rank, err->message);
        status = err->exit_code;
        em_error_free(err);
    } else {
        if (boot.rank == 0)
            print_rows(&o, rows, count, boot.size, boot.node_count, count ? busbw_sum / count : 0);
        if (wrong) status = EM_EXIT_RUNTIME;
    }
    free(rows);
    em_bench_buffer_free(&send);
    em_bench_buffer_free(&recv);
    if (target.comm) free_target(&target);
    em_bootstrap_finalize(&boot);
    return status;
}

const em_command em_command_bench_comm = {
    .name = "bench-comm",
    .summary = "measure collective bandwidth (all-reduce, all-gather, broadcast) like nccl-tests",
    .usage =
        "usage: evalmesh bench-comm [--backend mpi|nccl] [-b 8] [-e 32M] [-f 2] [--iters 20]\n"
        "                           [--warmup 5] [--op allreduce|allgather|broadcast|all]\n"
        "                           [--hierarchical] [--timeout S] [--json]\n\n"
        "Run it under a launcher (mpirun -np N, srun --mpi=pmix -n N). For each size from -b to\n"
        "-e, multiplied by -f, prints time per call, algbw = size / time and busbw (all-reduce:\n"
        "algbw * 2(n-1)/n, all-gather: algbw * (n-1)/n, broadcast: algbw) in GB/s, and #wrong:\n"
        "result elements that differ from the exactly known answer. Ends with the average bus\n"
        "bandwidth. Sizes take K, M, G suffixes (powers of 1024).\n\n"
        "  --backend nccl   GPU buffers through NCCL (a build with CUDA, one GPU per local rank)\n"
        "  --hierarchical   all-reduce as the mesh does it: sum inside each node, across the\n"
        "                   node leaders, broadcast inside each node\n\n"
        "Exit status: 0 ok, 2 bad arguments, 4 a result was wrong, 5 a rank failed or timed out.\n",
    .main = bench_comm_main,
};
