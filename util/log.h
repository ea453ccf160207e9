/* Logging: levels, lines prefixed with the rank ("[r3] "), written to stderr ("[r3] warning: text")
 * and, once a run directory exists, also to its log file ("2026-01-02T03:04:05.678Z warn [r3]
 * text"). The level (error, warn, info, debug) comes from --log-level, else EVALMESH_LOG, else
 * the recipe's log_level, else it is info. Summaries meant for a person go through
 * em_log_summary, which prints on rank 0 only unless EVALMESH_LOG_ALL_RANKS is set. */
#ifndef EVALMESH_LOG_H
#define EVALMESH_LOG_H

#include <stdio.h>

typedef enum em_log_level {
    EM_LOG_ERROR = 0,
    EM_LOG_WARN = 1,
    EM_LOG_INFO = 2,
    EM_LOG_DEBUG = 3,
} em_log_level;

/* Where a level was chosen, from the lowest priority to the highest: a source cannot change a
 * level that a higher one chose (--log-level info beats EVALMESH_LOG=warn beats the recipe's
 * log_level: error beats the default, info). */
typedef enum em_log_source {
    EM_LOG_FROM_DEFAULT = 0,
    EM_LOG_FROM_RECIPE = 1,
    EM_LOG_FROM_ENV = 2,
    EM_LOG_FROM_COMMAND_LINE = 3,
} em_log_source;

/* Reads EVALMESH_LOG; call once at start (before threads). rank/world_size prefix every line. */
void em_log_init(int rank, int world_size);
void em_log_set_rank(int rank, int world_size);
/* Sets the level unless a source of higher priority chose it already. */
void em_log_choose_level(em_log_level level, em_log_source source);
/* The level chosen on the command line (--log-level, --quiet): em_log_choose_level with the
 * highest priority. */
void em_log_set_level(em_log_level level);
em_log_level em_log_get_level(void);
/* Parses "error", "warn", "info", "debug"; returns -1 when the name is unknown. */
int em_log_level_parse(const char *name);
/* Also append every line to this file (NULL stops it). The file is not closed by the logger. */
void em_log_set_file(FILE *file);

void em_log(em_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define em_log_error(...) em_log(EM_LOG_ERROR, __VA_ARGS__)
#define em_log_warn(...) em_log(EM_LOG_WARN, __VA_ARGS__)
#define em_log_info(...) em_log(EM_LOG_INFO, __VA_ARGS__)
#define em_log_debug(...) em_log(EM_LOG_DEBUG, __VA_ARGS__)

/* Text for people (tables, summaries) on stdout: rank 0 only, no prefix. */
void em_log_summary(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int em_log_rank(void);

#endif
