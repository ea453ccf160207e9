/* BIG-bench's tasks by name and its groups. */
#include "stages/tasks/bigbench_catalog.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/edit_distance.h"

/* BIG-bench Lite v1 (bigbench/bbseqio/bigbench_lite.py): its 16 multiple-choice tasks and the
 * 2 that are scored both ways (emoji_movie, strategyqa), whose multiple-choice part evalmesh
 * scores. Its generative tasks are not members here: auto_debugging, conlang_translation,
 * linguistics_puzzles, operators, parsinlu_reading_comprehension, repeat_copy_logic. */
static const char *const BIGBENCH_LITE[] = {
    "bbq_lite_json",
    "code_line_description",
    "conceptual_combinations",
    "emoji_movie",
    "formal_fallacies_syllogisms_negation",
    "hindu_knowledge",
    "known_unknowns",
    "language_identification",
    "logic_grid_puzzle",
    "logical_deduction",
    "misconceptions_russian",
    "novel_concepts",
    "play_dialog_same_or_different",
    "strange_stories",
    "strategyqa",
    "symbol_interpretation",
    "vitaminc_fact_verification",
    "winowhy",
    NULL,
};

/* The groups, one row each. */
static const struct {
    const char *name;
    const char *const *tasks;
} GROUPS[] = {
    {"bigbench_lite", BIGBENCH_LITE},
};

const char *const *em_bigbench_group(const char *name) {
    for (size_t i = 0; i < sizeof GROUPS / sizeof *GROUPS; i++)
        if (strcmp(GROUPS[i].name, name) == 0) return GROUPS[i].tasks;
    return NULL;
}

const char *em_bigbench_group_name(size_t i) {
    return i < sizeof GROUPS / sizeof *GROUPS ? GROUPS[i].name : NULL;
}

char *em_bigbench_tasks_dir(void) {
    const char *cache = getenv("EVALMESH_CACHE");
    if (cache && *cache) return em_xasprintf("%s/bigbench-1.0.0/benchmark_tasks", cache);
    const char *home = getenv("HOME");
    return em_xasprintf("%s/.cache/evalmesh/bigbench-1.0.0/benchmark_tasks", home ? home : ".");
}

/* tasks_dir/name/task.json is there (a programmatic task, task.py only, is no JSON task). */
static bool is_task(const char *tasks_dir, const char *name) {
    char *file = em_xasprintf("%s/%s/task.json", tasks_dir, name);
    struct stat st;
    bool found = stat(file, &st) == 0 && S_ISREG(st.st_mode);
    free(file);
    return found;
}

em_status em_bigbench_find(const char *tasks_dir, const char *name, char **path) {
    *path = NULL;
    DIR *d = opendir(tasks_dir);
    if (!d)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "BIG-bench task '%s': no tasks in '%s' (run "
                            "tools/fetch-bigbench, which unpacks them there)",
                            name, tasks_dir);
    if (!strchr(name, '/') && strcmp(name, ".") != 0 && strcmp(name, "..") != 0 &&
        is_task(tasks_dir, name)) {
        closedir(d);
        *path = em_xasprintf("%s/%s", tasks_dir, name);
        return NULL;
    }
    char *closest = NULL;
    size_t best = SIZE_MAX;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.' || !is_task(tasks_dir, e->d_name)) continue;
        size_t dist = em_edit_distance(name, strlen(name), e->d_name, strlen(e->d_name), SIZE_MAX);
        if (dist < best || (dist == best && strcmp(e->d_name, closest) < 0)) {
            free(closest);
            closest = em_xstrdup(e->d_name);
            best = dist;
        }
    }
    closedir(d);
    em_status err =
        closest ? em_error_new(EM_EXIT_BAD_INPUT, "unknown BIG-bench task '%s' (the closest: '%s')",
                               name, closest)
                : em_error_new(EM_EXIT_BAD_INPUT,
                               "unknown BIG-bench task '%s' (no "
                               "tasks in '%s')",
                               name, tasks_dir);
    free(closest);
    return err;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

em_status em_bigbench_list(const char *tasks_dir, char ***names, size_t *count) {
    *names = NULL;
    *count = 0;
    DIR *d = opendir(tasks_dir);
    if (!d)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "no BIG-bench tasks in '%s' (run tools/fetch-bigbench, which unpacks "
                            "them there)",
                            tasks_dir);
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.' || !is_task(tasks_dir, e->d_name)) continue;
        *names = em_xrealloc(*names, (*count + 1) * sizeof **names);
        (*names)[(*count)++] = em_xstrdup(e->d_name);
    }
    closedir(d);
    if (*count) qsort(*names, *count, sizeof **names, by_name);
    return NULL;
}
