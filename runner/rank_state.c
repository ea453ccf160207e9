/* Per-rank state files under <run_dir>/state/ (see rank_state.h). Each update rewrites the whole
 * small JSON document with em_atomic_write (temporary file, checked writes, rename), so a reader
 * never sees a half-written file, and a full disk leaves the previous state in place. */
#include "runner/rank_state.h"
#include "util/clock.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/atomic_file.h"
#include "util/heartbeat.h"
#include "util/log.h"
#include "util/regular_file.h"

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
    double heartbeat_s;  /* EVALMESH_HEARTBEAT_S: the longest a busy rank goes without a write */
    int64_t beats;       /* writes made by heartbeats (em_heartbeat) */
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
        "\"stage_seconds\": %.3f, \"heartbeat\": %.3f, \"beats\": %lld%s%s%s}\n",
        st->rank, st->world_size, (long)getpid(), st->host, st->stage, st->status,
        (long long)st->done, (long long)st->total, (long long)st->tokens,
        em_clock_seconds() - st->started, heartbeat, (long long)st->beats,
        st->reason[0] ? ", \"reason\": \"" : "", st->reason, st->reason[0] ? "\"" : "");
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

/* EVALMESH_HEARTBEAT_S: seconds, 0 (a write on every heartbeat) to 86400; 10 when unset. */
static em_status heartbeat_interval(double *out) {
    const char *v = getenv("EVALMESH_HEARTBEAT_S");
    *out = 10.0;
    if (!v || !*v) return NULL;
    char *end;
    double s = strtod(v, &end);
    if (end == v || *end || !(s >= 0 && s <= 86400))
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "EVALMESH_HEARTBEAT_S '%s' is not a number of seconds from 0 to 86400",
                            v);
    *out = s;
    return NULL;
}

/* The heartbeat hook (util/heartbeat.h): rewrites the file when nothing was written for
 * heartbeat_s seconds, so a rank inside a long window stays visibly alive. */
static void on_heartbeat(void *arg) {
    em_rank_state *st = arg;
    pthread_mutex_lock(&st->lock);
    if (em_clock_seconds() - st->last_written >= st->heartbeat_s) {
        st->beats++;
        write_state(st);
    }
    pthread_mutex_unlock(&st->lock);
}

em_status em_rank_state_open(const char *run_dir, int rank, int world_size, em_rank_state **out) {
    double heartbeat_s;
    em_status bad = heartbeat_interval(&heartbeat_s);
    if (bad) return bad;
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
    st->heartbeat_s = heartbeat_s;
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
    if (current_state == st) em_rank_state_set_current(NULL);
    pthread_mutex_destroy(&st->lock);
    free(st->path);
    free(st);
}

em_rank_state *em_rank_state_current(void) {
    return current_state;
}

void em_rank_state_set_current(em_rank_state *st) {
    current_state = st;
    em_heartbeat_set(st ? on_heartbeat : NULL, st);
}

bool em_rank_state_gone(long pid, const char *host) {
    char here[256];
    if (pid <= 0 || !host || !host[0] || gethostname(here, sizeof here) != 0) return false;
    here[sizeof here - 1] = 0;
    return strcmp(here, host) == 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* The description of rank's death when its state file says "running" under a pid on this host
 * that is gone, else NULL. */
static char *dead_rank(const char *run_dir, int rank) {
    char *path = em_xasprintf("%s/state/rank-%d.json", run_dir, rank), *text = NULL, *out = NULL;
    em_error_free(em_read_regular_file(path, 1 << 20, "a rank state file", &text, NULL));
    free(path);
    cJSON *doc = text ? cJSON_Parse(text) : NULL;
    free(text);
    const cJSON *status = cJSON_GetObjectItem(doc, "status"),
                *pid = cJSON_GetObjectItem(doc, "pid");
    const cJSON *host = cJSON_GetObjectItem(doc, "host"),
                *stage = cJSON_GetObjectItem(doc, "stage");
    if (cJSON_IsString(status) && strcmp(status->valuestring, "running") == 0 &&
        cJSON_IsNumber(pid) && cJSON_IsString(host) && cJSON_IsString(stage) &&
        em_rank_state_gone((long)pid->valuedouble, host->valuestring))
        out = em_xasprintf("rank %d (pid %ld on %s) died in stage '%s' without a word (killed?)",
                           rank, (long)pid->valuedouble, host->valuestring, stage->valuestring);
    cJSON_Delete(doc);
    return out;
}

char *em_rank_state_find_dead(const char *run_dir, int world_size, int self) {
    for (int r = 0; r < world_size; r++) {
        char *dead = r != self ? dead_rank(run_dir, r) : NULL;
        if (dead) return dead;
    }
    return NULL;
}
