/* A rank fails on purpose; run under a launcher. Usage: comm_fail MODE RANK [SECONDS]
 *   exit   rank RANK leaves abruptly before the first collective (_exit(4), as a crash would);
 *   sleep  rank RANK sleeps SECONDS before it;
 *   late   rank RANK sleeps SECONDS before the bootstrap, whose timeout is 3 s;
 * every other rank calls an allreduce with a 3 s timeout, prints its error on stderr and exits
 * with the error's status (5 expected). When COMM_FAIL_DIR is set each rank that gets to the end
 * also writes "STATUS MESSAGE" to COMM_FAIL_DIR/rank-R.txt, so the test script can check every
 * rank's status even where the launcher reports only one. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runner/comm/bootstrap.h"

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: comm_fail exit|sleep RANK [SECONDS]\n");
        return 2;
    }
    bool late = strcmp(argv[1], "late") == 0;
    const char *pmix_rank = getenv("PMIX_RANK");
    if (late && pmix_rank && atoi(pmix_rank) == atoi(argv[2]))
        sleep((unsigned)(argc > 3 ? atoi(argv[3]) : 30));
    em_bootstrap boot;
    em_status err = em_bootstrap_init(late ? 3 : 30, &boot);
    if (err) {
        fprintf(stderr, "rank %s: bootstrap: %s\n", pmix_rank ? pmix_rank : "?", err->message);
        int rc = err->exit_code;
        em_error_free(err);
        return rc;
    }
    em_comm_set_timeout(boot.world, 3);
    err = em_barrier(boot.world);
    if (!err && boot.rank == atoi(argv[2])) {
        if (strcmp(argv[1], "exit") == 0) {
            fprintf(stderr, "rank %d: leaving early on purpose\n", boot.rank);
            _exit(4); /* like a crash: no cleanup, no MPI_Finalize */
        }
        sleep((unsigned)(argc > 3 ? atoi(argv[3]) : 30));
    }
    int64_t one = 1, sum = 0;
    if (!err) err = em_allreduce(boot.world, &one, &sum, 1, EM_DTYPE_INT64, EM_OP_SUM);
    int rc = 0;
    if (err) {
        fprintf(stderr, "rank %d: error: %s\n", boot.rank, err->message);
        rc = err->exit_code;
    } else {
        printf("rank %d: sum %lld\n", boot.rank, (long long)sum);
    }
    const char *dir = getenv("COMM_FAIL_DIR");
    if (dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/rank-%d.txt", dir, boot.rank);
        FILE *f = fopen(path, "w");
        if (f) {
            fprintf(f, "%d %s\n", rc, err ? err->message : "ok");
            fclose(f);
        }
    }
    em_error_free(err);
    em_bootstrap_finalize(&boot);
    return rc;
}
