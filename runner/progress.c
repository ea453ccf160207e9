/* Rank 0's progress line from the per-rank state files (see progress.h). */
#include "runner/progress.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/error.h"
#include "util/log.h"
#include "util/regular_file.h"

static cJSON *read_state(const char *run_dir, int rank) {
    char path[4096];
    snprintf(path, sizeof path, "%s/state/rank-%d.json", run_dir, rank);
    char *text = NULL; /* a regular file only: a planted FIFO must not block the progress line */
    em_status err = em_read_regular_file(path, 1 << 16, "a rank state file", &text, NULL);
    em_error_free(err);
    cJSON *doc = text ? cJSON_Parse(text) : NULL;
    free(text);
    return doc;
}

static double number(const cJSON *doc, const char *key) {
    return cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(doc, key));
}

void em_progress_read(const char *run_dir, int world_size, em_progress_totals *t) {
    memset(t, 0, sizeof *t);
    t->eta_seconds = -1;
    t->slowest_rank = -1;
    for (int r = 0; r < world_size; r++) {
        cJSON *doc = read_state(run_dir, r);
        const char *status = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(doc, "status"));
        double done = number(doc, "done"), total = number(doc, "total");
        double tokens = number(doc, "tokens"), seconds = number(doc, "stage_seconds");
        if (!doc || !status || strcmp(status, "running") != 0 || !(total > 0) || isnan(done)) {
            cJSON_Delete(doc);
            continue;
        }
        if (t->ranks++ == 0) {
            const char *stage =
                cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(doc, "stage"));
            snprintf(t->stage, sizeof t->stage, "%s", stage ? stage : "?");
        }
        t->done += (int64_t)done;
        t->total += (int64_t)total;
        if (seconds > 0 && tokens > 0) t->tokens_per_second += tokens / seconds;
        /* this rank's estimate at its own pace; a rank with nothing done yet has none */
        double eta = done > 0 && seconds > 0 ? (total - done) * seconds / done : INFINITY;
        if (t->slowest_rank < 0 || eta > t->eta_seconds) {
            t->eta_seconds = eta;
            t->slowest_rank = r;
            t->slowest_fraction = done / total;
        }
        cJSON_Delete(doc);
    }
    if (isinf(t->eta_seconds)) t->eta_seconds = -1;
}

void em_progress_format(const em_progress_totals *t, char *buf, size_t size) {
    if (t->ranks == 0) {
        snprintf(buf, size, "waiting for progress");
        return;
    }
    char eta[32] = "?";
    if (t->eta_seconds >= 0) {
        long s = lround(t->eta_seconds);
        if (s >= 3600)
            snprintf(eta, sizeof eta, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
        else
            snprintf(eta, sizeof eta, "%ld:%02ld", s / 60, s % 60);
    }
    snprintf(buf, size,
             "[%s] %lld/%lld windows (%.1f%%), %.0f tokens/s, ETA %s, slowest rank %d (%.0f%%)",
             t->stage, (long long)t->done, (long long)t->total,
             100.0 * (double)t->done / (double)t->total, t->tokens_per_second, eta, t->slowest_rank,
             100.0 * t->slowest_fraction);
}

struct em_progress {
    char *run_dir;
    int world_size;
    bool tty;
    bool drawn; /* a terminal line is on screen */
    bool stop;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t thread;
};

static void *progress_main(void *arg) {
    em_progress *p = arg;
    double interval = p->tty ? 0.5 : 10.0;
    pthread_mutex_lock(&p->lock);
    while (!p->stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += (time_t)interval;
        until.tv_nsec += (long)((interval - floor(interval)) * 1e9);
        if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
        while (!p->stop && pthread_cond_timedwait(&p->wake, &p->lock, &until) != ETIMEDOUT) {
        }
        if (p->stop) break;
        pthread_mutex_unlock(&p->lock);
        em_progress_totals t;
        em_progress_read(p->run_dir, p->world_size, &t);
        char line[256];
        em_progress_format(&t, line, sizeof line);
        if (t.ranks > 0 && p->tty) {
            fprintf(stderr, "\r\033[K%s", line);
            fflush(stderr);
            p->drawn = true;
        } else if (t.ranks > 0) {
            em_log_info("progress: %s", line);
        }
        pthread_mutex_lock(&p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

em_progress *em_progress_start(const char *run_dir, int world_size) {
    if (em_log_get_level() < EM_LOG_INFO) return NULL;
    em_progress *p = em_xcalloc(1, sizeof *p);
    p->run_dir = em_xstrdup(run_dir);
    p->world_size = world_size;
    p->tty = isatty(STDERR_FILENO);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    if (pthread_create(&p->thread, NULL, progress_main, p) != 0) {
        em_log_warn("progress display not started (no thread)");
        free(p->run_dir);
        free(p);
        return NULL;
    }
    return p;
}

void em_progress_stop(em_progress *p) {
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    if (p->drawn) fprintf(stderr, "\r\033[K");
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->wake);
    free(p->run_dir);
    free(p);
}
