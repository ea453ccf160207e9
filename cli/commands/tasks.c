/* `evalmesh tasks`: what `evalmesh eval --tasks` and a task stage's `tasks:` can name: the task
 * sources, the named groups with their members, and the BIG-bench tasks of the fetched sdist. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/command.h"
#include "cli/options.h"
#include "util/log.h"
#include "stages/kinds/support/task_sources.h"
#include "stages/tasks/bigbench_catalog.h"

static const char usage[] =
    "usage: evalmesh tasks\n"
    "\n"
    "Lists what a task may be: the task sources (lm-eval-style task YAMLs over local JSON\n"
    "Lines, BIG-bench task.json files or folders, BIG-bench tasks and groups by name), the\n"
    "groups with their members, and every BIG-bench JSON task in the folder tools/fetch-bigbench\n"
    "fills ($EVALMESH_CACHE, else ~/.cache/evalmesh, + /bigbench-1.0.0/benchmark_tasks);\n"
    "without it, says how to fetch them. Generative-only BIG-bench tasks are listed but refused\n"
    "when loaded (only multiple-choice tasks are scored).\n"
    "\n"
    "Exit statuses: 0 ok, 2 bad arguments.\n";

/* names (count) in columns of the terminal's usual 100 characters. */
static void print_columns(char *const *names, size_t count) {
    size_t width = 1;
    for (size_t i = 0; i < count; i++)
        if (strlen(names[i]) > width) width = strlen(names[i]);
    size_t per_line = 98 / (width + 2) ? 98 / (width + 2) : 1;
    for (size_t i = 0; i < count; i++) {
        bool last = (i + 1) % per_line == 0 || i + 1 == count;
        printf("%s%-*s", i % per_line ? "" : "  ", last ? 0 : (int)width + 2, names[i]);
        if (last) printf("\n");
    }
}

static int tasks_main(int argc, char **argv) {
    static const struct option options[] = {{0}};
    if (em_cli_option("tasks", argc, argv, "", options) != -1) return EM_EXIT_BAD_INPUT;
    if (optind < argc) return em_cli_unexpected("tasks", argv[optind]);
    printf("Task sources (the first that takes a name reads it):\n");
    for (size_t r = 0; r < em_task_source_count; r++) printf("  %s\n", em_task_sources[r].name);
    printf("\nGroups:\n");
    for (size_t g = 0; em_bigbench_group_name(g); g++) {
        const char *name = em_bigbench_group_name(g);
        printf("  %s:\n", name);
        size_t members = 0;
        while (em_bigbench_group(name)[members]) members++;
        print_columns((char *const *)em_bigbench_group(name), members);
    }
    char *dir = em_bigbench_tasks_dir();
    char **names = NULL;
    size_t count = 0;
    em_status err = em_bigbench_list(dir, &names, &count);
    if (err) {
        printf("\nBIG-bench tasks: none here (%s)\n", err->message);
        em_error_free(err);
    } else {
        printf("\nBIG-bench tasks in %s (%zu):\n", dir, count);
        print_columns(names, count);
    }
    for (size_t i = 0; i < count; i++) free(names[i]);
    free(names);
    free(dir);
    return EM_EXIT_OK;
}

const em_command em_command_tasks = {
    .name = "tasks",
    .summary = "list the benchmark tasks and groups `evalmesh eval --tasks` can name",
    .usage = usage,
    .main = tasks_main,
};
