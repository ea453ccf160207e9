/* `evalmesh test-network [--ranks] [--size 16M] [--iters 20] [--json]`: every pair of nodes (one
 * rank per node), or of ranks with --ranks, exchanges messages through the CPU backend. Pairs are
 * scheduled in rounds (the circle method: each participant meets every other exactly once, all
 * pairs of a round at the same time); in each round a pair gets its own two-rank communicator from
 * a split and measures
 *   latency:   round trips of 8-byte broadcasts, first from one side then from the other;
 *   bandwidth: broadcasts of --size bytes in both directions.
 * Rank 0 prints the latency and bandwidth matrices and the slowest links. A pair that cannot talk
 * ends in the collective timeout with an error naming the ranks (exit status 5), not a hang. */
#include <float.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/comm/bootstrap.h"
#include "cli/command.h"
#include "cli/json_out.h"
#include "cli/options.h"
#include "runner/diag/bench_args.h"
#include "util/clock.h"
#include "util/log.h"

typedef struct link_result {
    double rtt_us;   /* round-trip latency */
    double bw_gbs;   /* one-way bandwidth, GB/s */
    double measured; /* 1 when this entry was measured */
} link_result;

typedef struct net_options {
    bool all_ranks;
    size_t bytes;
    int iters;
    double timeout_s;
    bool json;
} net_options;

/* Measures one link inside a two-rank communicator. */
static em_status measure_pair(em_comm *pair, const net_options *o, char *buf, link_result *out) {
    em_status err = em_barrier(pair);
    double start = em_clock_seconds();
    for (int i = 0; i < o->iters && !err; i++) {
        err = em_broadcast(pair, buf, 8, 0);
        if (!err) err = em_broadcast(pair, buf, 8, 1);
    }
    double rtt = (em_clock_seconds() - start) / o->iters;
    if (!err) err = em_barrier(pair);
    start = em_clock_seconds();
    for (int i = 0; i < o->iters && !err; i++) {
        err = em_broadcast(pair, buf, o->bytes, 0);
        if (!err) err = em_broadcast(pair, buf, o->bytes, 1);
    }
    double one_way = (em_clock_seconds() - start) / (2.0 * o->iters);
    if (err) return err;
    out->rtt_us = rtt * 1e6;
    out->bw_gbs = one_way > 0 ? (double)o->bytes / one_way / 1e9 : 0;
    out->measured = 1;
    return NULL;
}

/* The partner of participant index p in round r of the circle method over m (even) slots, or -1. */
static int partner_in_round(int p, int r, int m) {
    /* slot 0 stays; the others rotate */
    int pos = p == 0 ? 0 : (p - 1 + r) % (m - 1) + 1;
    int other_pos = m - 1 - pos;
    if (other_pos == 0) return 0;
    for (int q = 1; q < m; q++)
        if ((q - 1 + r) % (m - 1) + 1 == other_pos) return q;
    return -1;
}

static int parse_options(int argc, char **argv, net_options *o) {
    *o = (net_options){.bytes = 16u << 20, .iters = 20, .timeout_s = 60};
    static const struct option options[] = {
        {"ranks", no_argument, NULL, 'r'},         {"json", no_argument, NULL, 'j'},
        {"size", required_argument, NULL, 's'},    {"iters", required_argument, NULL, 'i'},
        {"timeout", required_argument, NULL, 't'}, {0},
    };
    int c;
    while ((c = em_cli_option("test-network", argc, argv, "", options)) != -1) {
        bool ok = true;
        if (c == 'r')
            o->all_ranks = true;
        else if (c == 'j')
            o->json = true;
        else if (c == 's')
            ok = em_parse_bytes(optarg, &o->bytes) && o->bytes >= 8;
        else if (c == 'i')
            ok = (o->iters = atoi(optarg)) >= 1;
        else if (c == 't')
            ok = (o->timeout_s = atof(optarg)) > 0;
        else
            return EM_EXIT_BAD_INPUT;
        if (!ok) {
            const struct option *bad = options;
            while (bad->val != c) bad++;
            em_log_error("evalmesh test-network: bad value '%s' for --%s (see evalmesh "
                         "test-network --help)",
                         optarg, bad->name);
            return EM_EXIT_BAD_INPUT;
        }
    }
    if (optind < argc) return em_cli_unexpected("test-network", argv[optind]);
    return 0;
}

/* One m x m table of the links: latency, or bandwidth when `bandwidth`. */
static void print_matrix(const char *title, const char *who, const link_result *matrix,
                         const int *labels, int m, bool bandwidth) {
    printf("\n%s\n%8s", title, who);
    for (int b = 0; b < m; b++) printf(" %9d", labels[b]);
    printf("\n");
    for (int a = 0; a < m; a++) {
        printf("%8d", labels[a]);
        for (int b = 0; b < m; b++) {
            const link_result *l = &matrix[a * m + b];
            if (a == b)
                printf(" %9s", "-");
            else if (bandwidth)
                printf(" %9.3f", l->bw_gbs);
            else
                printf(" %9.1f", l->rtt_us);
        }
        printf("\n");
    }
}

static void print_report(const net_options *o, const link_result *matrix, const int *labels, int m,
                         bool by_rank) {
    const char *who = by_rank ? "rank" : "node";
    if (o->json) {
        cJSON *doc = cJSON_CreateObject();
        cJSON_AddStringToObject(doc, "by", who);
        cJSON_AddNumberToObject(doc, "bytes", (double)o->bytes);
        cJSON_AddNumberToObject(doc, "iters", o->iters);
        cJSON *links = cJSON_AddArrayToObject(doc, "links");
        for (int a = 0; a < m; a++)
            for (int b = a + 1; b < m; b++) {
                const link_result *l = &matrix[a * m + b];
                cJSON *link = cJSON_CreateObject();
                cJSON_AddNumberToObject(link, "a", labels[a]);
                cJSON_AddNumberToObject(link, "b", labels[b]);
                cJSON_AddNumberToObject(link, "rtt_us", l->rtt_us);
                cJSON_AddNumberToObject(link, "bw_gbs", l->bw_gbs);
                cJSON_AddItemToArray(links, link);
            }
        em_print_json(doc);
        return;
    }
    printf("# evalmesh test-network: %d %ss, %zu-byte messages, %d iterations per link\n", m, who,
           o->bytes, o->iters);
    if (m <= 16) {
        print_matrix("round-trip latency (us)", who, matrix, labels, m, false);
        print_matrix("bandwidth (GB/s)", who, matrix, labels, m, true);
    }
    printf("\nslowest links:\n");
    int links = m * (m - 1) / 2;
    bool *shown = em_xcalloc((size_t)m * (size_t)m, sizeof *shown);
    for (int k = 0; k < links && k < 5; k++) {
        int best_a = -1, best_b = -1;
        double worst = DBL_MAX;
        for (int a = 0; a < m; a++)
            for (int b = a + 1; b < m; b++)
                if (!shown[a * m + b] && matrix[a * m + b].bw_gbs < worst) {
                    worst = matrix[a * m + b].bw_gbs;
                    best_a = a;
                    best_b = b;
                }
        shown[best_a * m + best_b] = true;
        printf("  %s %d <-> %s %d: %.3f GB/s, %.1f us round trip\n", who, labels[best_a], who,
               labels[best_b], worst, matrix[best_a * m + best_b].rtt_us);
    }
    free(shown);
}

static int test_network_main(int argc, char **argv) {
    net_options o;
    int bad = parse_options(argc, argv, &o);
    if (bad) return bad;
    em_bootstrap boot;
    em_status err = em_bootstrap_init(o.timeout_s, &boot);
    if (err) {
        fprintf(stderr, "test-network: %s\n", err->message);
        int code = err->exit_code;
        em_error_free(err);
        return code;
    }
    em_log_set_rank(boot.rank, boot.size);
    em_comm_set_timeout(boot.world, o.timeout_s);

    /* Participants: every rank, or the first rank of every node. */
    bool by_rank = o.all_ranks || boot.node_count <= 1;
    int mine[2] = {by_rank ? 1 : (boot.local_rank == 0), boot.node_id}; /* take part, node */
    int *flags = em_xcalloc((size_t)boot.size * 2, sizeof *flags);
    int status = EM_EXIT_OK;
    err = em_allgather(boot.world, mine, flags, sizeof mine);
    int m = 0, my_index = -1;
    int *members = em_xcalloc((size_t)boot.size, sizeof *members); /* world rank of each */
    int *labels = em_xcalloc((size_t)boot.size, sizeof *labels);   /* rank or node, for people */
    for (int r = 0; !err && r < boot.size; r++)
        if (flags[2 * r]) {
            if (r == boot.rank) my_index = m;
            labels[m] = by_rank ? r : flags[2 * r + 1];
            members[m++] = r;
        }
    if (!err && m < 2) {
        if (boot.rank == 0)
            fprintf(stderr, "test-network: %d %s: nothing to test (run with 2 or more ranks)\n", m,
                    by_rank ? "rank" : "node");
        status = EM_EXIT_BAD_INPUT;
    }
    int slots = m % 2 ? m + 1 : m;
    link_result *row = em_xcalloc((size_t)(m > 0 ? m : 1), sizeof *row);
    char *buf = status == EM_EXIT_OK && !err ? malloc(o.bytes) : NULL;
    if (!err && status == EM_EXIT_OK && !buf) {
        fprintf(stderr, "test-network: cannot allocate %zu bytes\n", o.bytes);
        status = EM_EXIT_RUNTIME;
    }
    if (buf) memset(buf, boot.rank & 0xff, o.bytes);
    for (int round = 0; !err && status == EM_EXIT_OK && round < slots - 1; round++) {
        int partner = my_index >= 0 ? partner_in_round(my_index, round, slots) : -1;
        if (partner >= m) partner = -1; /* the empty slot when m is odd */
        int low = partner < 0 ? -1 : (my_index < partner ? my_index : partner);
        em_comm *pair = NULL;
        err = em_comm_split(boot.world, low < 0 ? 0 : low + 1, boot.rank, &pair);
        if (!err && partner >= 0) {
            err = measure_pair(pair, &o, buf, &row[partner]);
            if (err)
                err =
                    em_error_prefix(err, "link between %s %d and %s %d", by_rank ? "rank" : "node",
                                    members[my_index], by_rank ? "rank" : "node", members[partner]);
        }
        em_comm_destroy(pair);
    }
    link_result *matrix = NULL;
    if (!err && status == EM_EXIT_OK) {
        link_result *all = em_xcalloc((size_t)boot.size * (size_t)m, sizeof *all);
        err = em_allgather(boot.world, row, all, (size_t)m * sizeof *row);
        if (!err) {
            matrix = em_xcalloc((size_t)m * (size_t)m, sizeof *matrix);
            for (int a = 0; a < m; a++)
                memcpy(&matrix[a * m], &all[(size_t)members[a] * (size_t)m],
                       (size_t)m * sizeof *row);
        }
        free(all);
    }
    if (err) {
        fprintf(stderr, "test-network: rank %d: %s\n", boot.rank, err->message);
        status = err->exit_code;
        em_error_free(err);
    } else if (status == EM_EXIT_OK && boot.rank == 0) {
        print_report(&o, matrix, labels, m, by_rank);
    }
    free(matrix);
    free(buf);
    free(row);
    free(members);
    free(labels);
    free(flags);
    em_bootstrap_finalize(&boot);
    return status;
}

const em_command em_command_test_network = {
    .name = "test-network",
    .summary = "measure latency and bandwidth between every pair of nodes (or ranks)",
    .usage =
        "usage: evalmesh test-network [--ranks] [--size 16M] [--iters 20] [--timeout S] "
        "[--json]\n\n"
        "Run it under a launcher. Every pair of nodes (the first rank of each), or of ranks\n"
        "with --ranks (the default on a single node), exchanges messages through the CPU\n"
        "backend: 8-byte round trips for latency and --size messages both ways for\n"
        "bandwidth. Rank 0 prints the latency and bandwidth matrices and the slowest links.\n\n"
        "Exit status: 0 ok, 2 bad arguments or fewer than 2 participants, 5 a link failed or\n"
        "timed out (the message names both ends).\n",
    .main = test_network_main,
};
