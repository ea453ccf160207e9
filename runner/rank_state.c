/* Per-rank state files under <run_dir>/state/ (see rank_state.h). Each update rewrites the whole
 * small JSON document with em_atomic_write (temporary file, checked writes, rename), so a reader
 * never sees a half-written file, and a full disk leaves the previous state in place. */
#include "runner/rank_state.h"
#include "util/clock.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/atomic_file.h"
#include "util/log.h"

struct em_rank_state {
    char *path; /* state/rank-<R>.json */
    char host[256];
    bool warned; /* a failed write was reported */
    int rank;
    int world_size;
    char stage[128];
    char status[16];
    char reason[512]; /* why it failed, "" when it did not */
    int64_t done, total, tokens;
    double started;      /* when the current stage began (monotonic seconds) */
    double last_written; /* monotonic seconds of the last write */
    pthread_mutex_t lock;
};

static em_rank_state *current_state;

/* Writes the JSON document; called with st->lock held. A failure is warned about once: the state
 * file is a diagnostic aid and must never stop an evaluation. */
static void write_state(em_rank_state *st) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    double heartbeat = (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
    char *text = em_xasprintf(
        "{\"rank\": %d, \"world_size\": %d, \"pid\": %ld, \"host\": \"%s\", \"stage\": \"%s\", "
        "\"status\": \"%s\", \"done\": %lld, \"total\": %lld, \"tokens\": %lld, "
        "\"stage_seconds\": %.3f, \"heartbeat\": %.3f%s%s%s}\n",
        st->rank, st->world_size, (long)getpid(), st->host, st->stage, st->status,
        (long long)st->done, (long long)st->total, (long long)st->tokens,
        em_clock_seconds() - st->started, heartbeat, st->reason[0] ? ", \"reason\": \"" : "",
        st->reason, st->reason[0] ? "\"" : "");
    em_status err = em_atomic_write(st->path, text, strlen(text), 0644);
    free(text);
    if (err && !st->warned)
        em_log_warn("rank state: %s (later failures are not reported)", err->message);
    st->warned |= err != NULL;
    em_error_free(err);
    st->last_written = em_clock_seconds();
}

/* Copies a stage name, dropping characters that would need escaping in JSON. */
static void copy_plain(char *dst, size_t size, const char *src) {
    size_t n = 0;
    for (; src && *src && n + 1 < size; src++)
        if (*src != '"' && *src != '\\' && (unsigned char)*src >= 0x20) dst[n++] = *src;
    dst[n] = 0;
}

em_status em_rank_state_open(const char *run_dir, int rank, int world_size, em_rank_state **out) {
    char *dir = em_xasprintf("%s/state", run_dir);
    struct stat sb;
    em_status err = NULL;
    if (mkdir(dir, 0750) != 0 && errno != EEXIST)
        err = em_error_new(EM_EXIT_RUNTIME, "cannot create %s: %s", dir, strerror(errno));
    else if (lstat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) /* never through a planted link */
        err = em_error_new(EM_EXIT_BAD_INPUT, "%s is not a directory (a symbolic link?)", dir);
    if (err) {
        free(dir);
        return err;
    }
    em_rank_state *st = em_xcalloc(1, sizeof *st);
    st->path = em_xasprintf("%s/rank-%d.json", dir, rank);
    free(dir);
    if (gethostname(st->host, sizeof st->host) != 0) snprintf(st->host, sizeof st->host, "?");
    st->host[sizeof st->host - 1] = 0;
    copy_plain(st->host, sizeof st->host, st->host);
    st->rank = rank;
    st->world_size = world_size;
    snprintf(st->stage, sizeof st->stage, "%s", "(start)");
    snprintf(st->status, sizeof st->status, "%s", "running");
    st->started = em_clock_seconds();
    pthread_mutex_init(&st->lock, NULL);
    write_state(st);
    *out = st;
    return NULL;
}

void em_rank_state_stage(em_rank_state *st, const char *stage, const char *status) {
    if (!st) return;
    pthread_mutex_lock(&st->lock);
    if (strcmp(st->stage, stage) != 0) {
        st->started = em_clock_seconds();
        st->done = st->total = st->tokens = 0;
    }
    copy_plain(st->stage, sizeof st->stage, stage);
    copy_plain(st->status, sizeof st->status, status);
    write_state(st);
    pthread_mutex_unlock(&st->lock);
}

void em_rank_state_fail(em_rank_state *st, const char *reason) {
    if (!st) return;
    pthread_mutex_lock(&st->lock);
    copy_plain(st->status, sizeof st->status, "failed");
    copy_plain(st->reason, sizeof st->reason, reason);
    write_state(st);
    pthread_mutex_unlock(&st->lock);
}

void em_rank_state_progress(em_rank_state *st, int64_t done, int64_t total, int64_t tokens) {
    if (!st) return;
    pthread_mutex_lock(&st->lock);
    st->done = done;
    st->total = total;
    st->tokens = tokens;
    if (done == total || em_clock_seconds() - st->last_written >= 0.5) write_state(st);
    pthread_mutex_unlock(&st->lock);
}

void em_rank_state_close(em_rank_state *st) {
    if (!st) return;
    if (current_state == st) current_state = NULL;
    pthread_mutex_destroy(&st->lock);
    free(st->path);
    free(st);
}

em_rank_state *em_rank_state_current(void) {
    return current_state;
}

void em_rank_state_set_current(em_rank_state *st) {
    current_state = st;
}
