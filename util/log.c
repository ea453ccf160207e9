/* Rank-prefixed, levelled logging to stderr and the run directory's log file (see log.h). */
#include "util/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/redact.h"

static em_log_level current_level = EM_LOG_INFO;
static em_log_source level_source = EM_LOG_FROM_DEFAULT;
static int log_rank = 0;
static int log_world = 1;
static int all_ranks_summary = 0;
static FILE *log_file = NULL;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *level_names[] = {"error", "warn", "info", "debug"};

int em_log_level_parse(const char *name) {
    for (int i = 0; i < 4; i++)
        if (strcmp(name, level_names[i]) == 0) return i;
    if (strcmp(name, "warning") == 0) return EM_LOG_WARN;
    return -1;
}

void em_log_init(int rank, int world_size) {
    em_log_set_rank(rank, world_size);
    const char *env = getenv("EVALMESH_LOG");
    if (env && *env) {
        int level = em_log_level_parse(env);
        if (level >= 0) em_log_choose_level((em_log_level)level, EM_LOG_FROM_ENV);
    }
    const char *all = getenv("EVALMESH_LOG_ALL_RANKS");
    all_ranks_summary = all && *all && strcmp(all, "0") != 0;
}

void em_log_set_rank(int rank, int world_size) {
    log_rank = rank;
    log_world = world_size;
}

void em_log_choose_level(em_log_level level, em_log_source source) {
    if (source < level_source) return;
    current_level = level;
    level_source = source;
}

void em_log_set_level(em_log_level level) {
    em_log_choose_level(level, EM_LOG_FROM_COMMAND_LINE);
}

em_log_level em_log_get_level(void) {
    return current_level;
}

int em_log_rank(void) {
    return log_rank;
}

void em_log_set_file(FILE *file) {
    pthread_mutex_lock(&log_lock);
    log_file = file;
    pthread_mutex_unlock(&log_lock);
}

void em_log(em_log_level level, const char *fmt, ...) {
    if (level > current_level) return;
    char text[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    size_t n = strlen(text);
    while (n > 0 && text[n - 1] == '\n') text[--n] = 0;
    if (strstr(text, "://")) { /* no URL secret reaches a terminal or a log file */
        char *clean = em_redact_urls(text);
        snprintf(text, sizeof text, "%s", clean);
        free(clean);
    }

    char prefix[64] = "";
    if (log_world > 1) snprintf(prefix, sizeof prefix, "[r%d] ", log_rank);
    const char *tag = level == EM_LOG_ERROR ? "error: " : level == EM_LOG_WARN ? "warning: " : "";

    pthread_mutex_lock(&log_lock);
    fprintf(stderr, "%s%s%s\n", prefix, tag, text);
    if (log_file) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        struct tm tm;
        gmtime_r(&ts.tv_sec, &tm);
        char when[32];
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
        /* the level's name stands where stderr has the tag ("error: ", "warning: ") */
        fprintf(log_file, "%s.%03ldZ %s %s%s\n", when, ts.tv_nsec / 1000000, level_names[level],
                prefix, text);
        fflush(log_file);
    }
    pthread_mutex_unlock(&log_lock);
}

void em_log_summary(const char *fmt, ...) {
    if (log_rank != 0 && !all_ranks_summary) return;
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&log_lock);
    vfprintf(stdout, fmt, ap);
    fflush(stdout);
    pthread_mutex_unlock(&log_lock);
    va_end(ap);
}
