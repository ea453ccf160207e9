/* The progress summary read from per-rank state files: sums over ranks, tokens/s, the estimate of
 * the latest rank, ranks that are done or have no total left out, and the formatted line. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runner/progress.h"
#include "runner/rank_state.h"
#include "util/log.h"
#include "test.h"

/* A state file as runner/rank_state.c writes it. */
static void state(const char *dir, int rank, const char *stage, const char *status, long long done,
                  long long total, long long tokens, double seconds) {
    char path[512];
    snprintf(path, sizeof path, "%s/state/rank-%d.json", dir, rank);
    FILE *f = fopen(path, "w");
    fprintf(f,
            "{\"rank\": %d, \"world_size\": 4, \"pid\": 1, \"stage\": \"%s\", \"status\": \"%s\", "
            "\"done\": %lld, \"total\": %lld, \"tokens\": %lld, \"stage_seconds\": %.3f, "
            "\"heartbeat\": 1.0}\n",
            rank, stage, status, done, total, tokens, seconds);
    fclose(f);
}

int main(void) {
    char dir[] = "/tmp/em-progress-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char sub[512];
    snprintf(sub, sizeof sub, "%s/state", dir);
    mkdir(sub, 0755);

    em_progress_totals t;
    em_progress_read(dir, 4, &t);
    CHECK_INT_EQ(t.ranks, 0);
    char line[256];
    em_progress_format(&t, line, sizeof line);
    CHECK_STR_EQ(line, "waiting for progress");

    /* rank 0: 5 of 10 windows in 2 s (ETA 2 s); rank 1: 2 of 10 in 2 s (ETA 8 s); rank 2 done;
     * rank 3 has no state file */
    state(dir, 0, "fwd", "running", 5, 10, 500, 2.0);
    state(dir, 1, "fwd", "running", 2, 10, 200, 2.0);
    state(dir, 2, "fwd", "done", 10, 10, 1000, 3.0);
    em_progress_read(dir, 4, &t);
    CHECK_INT_EQ(t.ranks, 2);
    CHECK_INT_EQ(t.done, 7);
    CHECK_INT_EQ(t.total, 20);
    CHECK(t.tokens_per_second == 350.0);
    CHECK(t.eta_seconds == 8.0);
    CHECK_INT_EQ(t.slowest_rank, 1);
    em_progress_format(&t, line, sizeof line);
    CHECK_STR_EQ(line, "[fwd] 7/20 windows (35.0%), 350 tokens/s, ETA 0:08, slowest rank 1 (20%)");

    /* a rank that has done nothing yet has no estimate: it is the slowest, the ETA is unknown */
    state(dir, 3, "fwd", "running", 0, 10, 0, 1.0);
    em_progress_read(dir, 4, &t);
    CHECK_INT_EQ(t.slowest_rank, 3);
    CHECK(t.eta_seconds < 0);
    em_progress_format(&t, line, sizeof line);
    CHECK_STR_EQ(line, "[fwd] 7/30 windows (23.3%), 350 tokens/s, ETA ?, slowest rank 3 (0%)");

    /* hours, and a file written by the real rank state writer */
    state(dir, 3, "fwd", "running", 1, 10, 100, 1000.0);
    em_progress_read(dir, 4, &t);
    em_progress_format(&t, line, sizeof line);
    CHECK_CONTAINS(line, "ETA 2:30:00, slowest rank 3 (10%)");
    em_rank_state *st = NULL;
    CHECK(em_rank_state_open(dir, 3, 4, &st) == NULL);
    em_rank_state_stage(st, "wiki", "done");
    em_rank_state_close(st);
    em_progress_read(dir, 4, &t);
    CHECK_INT_EQ(t.ranks, 2);

    /* the display thread: none below info (--quiet), and it stops at once when asked */
    em_log_set_level(EM_LOG_WARN);
    CHECK(em_progress_start(dir, 4) == NULL);
    em_log_set_level(EM_LOG_INFO);
    em_progress *p = em_progress_start(dir, 4);
    CHECK(p != NULL);
    em_progress_stop(p);
    em_progress_stop(NULL);

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return test_finish();
}
