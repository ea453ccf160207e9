/* `evalmesh check-state RUN_DIR [--silent-after S] [--json]`: reads the per-rank state files that
 * a running (or finished, or failed) evaluation keeps in RUN_DIR/state/ (see runner/rank_state.h)
 * and lists each rank's stage, progress and heartbeat age, naming the ranks that are behind (in an
 * earlier stage, or far less progress in the same stage, than the most advanced rank) and the ranks
 * that are silent (no heartbeat for longer than the threshold while still running). The stage
 * order comes from the run's recipe.resolved.yaml. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/command.h"
#include "cli/json_out.h"
#include "cli/options.h"
#include "runner/pipeline.h"
#include "runner/rank_state.h"
#include "util/error.h"
#include "util/log.h"
#include "util/regular_file.h"

typedef struct rank_entry {
    bool present;
    char stage[128];
    char status[16];
    long long done, total, tokens;
    double heartbeat;
    int world_size;
    int stage_order; /* position of the stage among all ranks' stages, by first heartbeat */
    long pid;        /* the rank's process, 0 when the file does not say */
    char host[256];  /* the node it runs on */
} rank_entry;

/* A rank whose state file says it runs on this host under a pid that no longer exists has died
 * (it could not write "failed"). Ranks on other hosts cannot be checked from here. */
static bool dead_here(const rank_entry *e) {
    return em_rank_state_gone(e->pid, e->host);
}

static char *read_file(const char *path) {
    char *text = NULL;
    em_status err = em_read_regular_file(path, 1 << 20, "a rank state file", &text, NULL);
    em_error_free(err);
    return text;
}

static bool parse_entry(const char *path, rank_entry *e, int *rank) {
    char *text = read_file(path);
    if (!text) return false;
    cJSON *doc = cJSON_Parse(text);
    free(text);
    if (!doc) return false;
    const cJSON *r = cJSON_GetObjectItem(doc, "rank");
    const cJSON *stage = cJSON_GetObjectItem(doc, "stage");
    const cJSON *status = cJSON_GetObjectItem(doc, "status");
    bool ok = cJSON_IsNumber(r) && cJSON_IsString(stage) && cJSON_IsString(status);
    if (ok) {
        *rank = r->valueint;
        e->present = true;
        snprintf(e->stage, sizeof e->stage, "%s", stage->valuestring);
        snprintf(e->status, sizeof e->status, "%s", status->valuestring);
        const cJSON *v;
        if ((v = cJSON_GetObjectItem(doc, "done")) && cJSON_IsNumber(v))
            e->done = (long long)v->valuedouble;
        if ((v = cJSON_GetObjectItem(doc, "total")) && cJSON_IsNumber(v))
            e->total = (long long)v->valuedouble;
        if ((v = cJSON_GetObjectItem(doc, "tokens")) && cJSON_IsNumber(v))
            e->tokens = (long long)v->valuedouble;
        if ((v = cJSON_GetObjectItem(doc, "heartbeat")) && cJSON_IsNumber(v))
            e->heartbeat = v->valuedouble;
        if ((v = cJSON_GetObjectItem(doc, "world_size")) && cJSON_IsNumber(v))
            e->world_size = v->valueint;
        if ((v = cJSON_GetObjectItem(doc, "pid")) && cJSON_IsNumber(v))
            e->pid = (long)v->valuedouble;
        if ((v = cJSON_GetObjectItem(doc, "host")) && cJSON_IsString(v))
            snprintf(e->host, sizeof e->host, "%s", v->valuestring);
    }
    cJSON_Delete(doc);
    return ok;
}

static int stage_index(char stages[][128], int count, const char *stage) {
    for (int i = 0; i < count; i++)
        if (strcmp(stages[i], stage) == 0) return i;
    return -1;
}

/* The order of stages is the run's topological order, which the state files do not carry: it
 * comes from preparing the run's resolved recipe again (the same order every rank walked).
 * Returns how many stage names were stored; 0 when the recipe cannot be read. */
static int load_stage_order(const char *run_dir, char stages[][128], int max) {
    char path[4096];
    snprintf(path, sizeof path, "%s/recipe.resolved.yaml", run_dir);
    em_pipeline *pipeline = NULL;
    em_status err = em_pipeline_load(path, NULL, 0, &pipeline);
    if (err) {
        fprintf(stderr, "check-state: %s (stage order unknown: only silent ranks are flagged)\n",
                err->message);
        em_error_free(err);
        return 0;
    }
    int n = 0;
    for (size_t i = 0; i < pipeline->dag->count && n < max; i++)
        snprintf(stages[n++], 128, "%s", pipeline->dag->stages[pipeline->dag->order[i]].name);
    em_pipeline_free(pipeline);
    return n;
}

static int check_state_main(int argc, char **argv) {
    static const struct option options[] = {
        {"json", no_argument, NULL, 'j'},
        {"silent-after", required_argument, NULL, 's'},
        {0},
    };
    double silent_after = 60.0;
    bool json = false;
    int c;
    while ((c = em_cli_option("check-state", argc, argv, "", options)) != -1) {
        if (c == 'j')
            json = true;
        else if (c == 's')
            silent_after = atof(optarg);
        else
            return EM_EXIT_BAD_INPUT;
    }
    if (optind >= argc) {
        em_log_error("evalmesh check-state: no run directory (usage: evalmesh check-state "
                     "RUN_DIR)");
        return EM_EXIT_BAD_INPUT;
    }
    if (optind + 1 < argc) return em_cli_unexpected("check-state", argv[optind + 1]);
    const char *run_dir = argv[optind];
    char state_dir[4096];
    snprintf(state_dir, sizeof state_dir, "%s/state", run_dir);
    DIR *dir = opendir(state_dir);
    if (!dir) {
        fprintf(stderr, "check-state: %s: no state directory (is this a run directory?)\n",
                state_dir);
        return EM_EXIT_BAD_INPUT;
    }
    int capacity = 64, world = 0;
    rank_entry *ranks = em_xcalloc((size_t)capacity, sizeof *ranks);
    struct dirent *de;
    while ((de = readdir(dir))) {
        int rank = -1;
        if (sscanf(de->d_name, "rank-%d.json", &rank) != 1 || rank < 0 || rank > 1000000) continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", state_dir, de->d_name);
        rank_entry e = {0};
        if (!parse_entry(path, &e, &rank)) {
            fprintf(stderr, "check-state: %s: not a rank state file (ignored)\n", path);
            continue;
        }
        if (rank >= capacity) {
            int grown = rank * 2 + 1;
            ranks = em_xrealloc(ranks, (size_t)grown * sizeof *ranks);
            memset(ranks + capacity, 0, (size_t)(grown - capacity) * sizeof *ranks);
            capacity = grown;
        }
        ranks[rank] = e;
        if (rank + 1 > world) world = rank + 1;
        if (e.world_size > world) world = e.world_size;
    }
    closedir(dir);
    if (world > capacity) {
        ranks = em_xrealloc(ranks, (size_t)world * sizeof *ranks);
        memset(ranks + capacity, 0, (size_t)(world - capacity) * sizeof *ranks);
    }
    if (world == 0) {
        fprintf(stderr, "check-state: %s holds no rank state files\n", state_dir);
        free(ranks);
        return EM_EXIT_BAD_INPUT;
    }

    static char stages[256][128];
    int stage_count = load_stage_order(run_dir, stages, 256);
    int most_advanced = -1;
    long long best_done = 0;
    for (int r = 0; r < world; r++) {
        ranks[r].stage_order =
            ranks[r].present ? stage_index(stages, stage_count, ranks[r].stage) : -1;
        if (ranks[r].stage_order > most_advanced) most_advanced = ranks[r].stage_order;
    }
    for (int r = 0; r < world; r++)
        if (ranks[r].stage_order == most_advanced && ranks[r].done > best_done)
            best_done = ranks[r].done;

    struct timespec now_ts;
    clock_gettime(CLOCK_REALTIME, &now_ts);
    double now = (double)now_ts.tv_sec + (double)now_ts.tv_nsec * 1e-9;
    int silent = 0, behind = 0, failed = 0, dead = 0;
    cJSON *doc = NULL, *rank_list = NULL;
    if (json) {
        doc = cJSON_CreateObject();
        cJSON_AddStringToObject(doc, "run_dir", run_dir);
        rank_list = cJSON_AddArrayToObject(doc, "ranks");
    } else {
        printf("%-6s %-20s %-8s %-16s %-10s %s\n", "rank", "stage", "status", "progress",
               "heartbeat", "note");
    }
    for (int r = 0; r < world; r++) {
        rank_entry *e = &ranks[r];
        char note[160] = "";
        double age = e->present ? now - e->heartbeat : -1;
        bool running = e->present && strcmp(e->status, "running") == 0;
        if (!e->present) {
            snprintf(note, sizeof note, "SILENT: no state file (never started)");
            silent++;
        } else if (strcmp(e->status, "failed") == 0) {
            snprintf(note, sizeof note, "FAILED in this stage");
            failed++;
        } else if (running && dead_here(e)) {
            snprintf(note, sizeof note, "DEAD: process %ld no longer exists on %s", e->pid,
                     e->host);
            dead++;
        } else if (running && age > silent_after) {
            snprintf(note, sizeof note, "SILENT for %.0f s", age);
            silent++;
        } else if (running && e->stage_order >= 0 && e->stage_order < most_advanced) {
            snprintf(note, sizeof note, "BEHIND: others are in '%s'", stages[most_advanced]);
            behind++;
        } else if (running && e->stage_order == most_advanced && best_done > 0 &&
                   e->done * 2 < best_done) {
            snprintf(note, sizeof note, "BEHIND: %lld done, fastest rank %lld", e->done, best_done);
            behind++;
        }
        char progress[32] = "-";
        if (e->total > 0) snprintf(progress, sizeof progress, "%lld/%lld", e->done, e->total);
        if (json) {
            cJSON *item = cJSON_CreateObject();
            cJSON_AddNumberToObject(item, "rank", r);
            cJSON_AddBoolToObject(item, "present", e->present);
            cJSON_AddStringToObject(item, "stage", e->stage);
            cJSON_AddStringToObject(item, "status", e->status);
            cJSON_AddNumberToObject(item, "done", (double)e->done);
            cJSON_AddNumberToObject(item, "total", (double)e->total);
            cJSON_AddNumberToObject(item, "tokens", (double)e->tokens);
            cJSON_AddNumberToObject(item, "heartbeat_age_s", round(age * 10) / 10);
            cJSON_AddStringToObject(item, "note", note);
            cJSON_AddItemToArray(rank_list, item);
        } else {
            char age_text[32] = "-";
            if (e->present) snprintf(age_text, sizeof age_text, "%.0f s ago", age);
            printf("%-6d %-20s %-8s %-16s %-10s %s\n", r, e->present ? e->stage : "-",
                   e->present ? e->status : "-", progress, age_text, note);
        }
    }
    if (json) {
        cJSON_AddNumberToObject(doc, "silent", silent);
        cJSON_AddNumberToObject(doc, "behind", behind);
        cJSON_AddNumberToObject(doc, "failed", failed);
        cJSON_AddNumberToObject(doc, "dead", dead);
        em_print_json(doc);
    } else if (dead) {
        printf("%d ranks: %d silent, %d behind, %d failed, %d dead\n", world, silent, behind,
               failed, dead);
    } else {
        printf("%d ranks: %d silent, %d behind, %d failed\n", world, silent, behind, failed);
    }
    free(ranks);
    return silent || behind || failed || dead ? EM_EXIT_DISTRIBUTED : EM_EXIT_OK;
}

const em_command em_command_check_state = {
    .name = "check-state",
    .summary = "show each rank's stage, progress and heartbeat in a run directory",
    .usage = "usage: evalmesh check-state RUN_DIR [--silent-after SECONDS] [--json]\n\n"
             "Reads RUN_DIR/state/rank-*.json, which every rank of a run keeps up to date, and\n"
             "lists each rank's stage, status, progress and heartbeat age. Ranks that are\n"
             "running but have not written for --silent-after seconds (default 60) are SILENT,\n"
             "ranks in an earlier stage (or with less than half the progress of the fastest rank\n"
             "in the same stage) are BEHIND. A running rank whose process no longer exists on\n"
             "this host (the state file records pid and host) is DEAD at once.\n\n"
             "Exit status: 0 all ranks fine, 2 no such run directory, 5 some rank silent,\n"
             "behind, failed or dead.\n",
    .main = check_state_main,
};
