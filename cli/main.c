/* evalmesh's entry point: global options, then dispatch to a command in cli/commands/. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build_info.h"
#include "cli/command.h"
#include "util/error.h"
#include "util/log.h"

static void print_help(FILE *out) {
    fprintf(out, "usage: evalmesh [--version] [--log-level LEVEL] COMMAND [ARGS...]\n\n"
                 "Runs declarative LLM evaluation recipes across ranks and nodes.\n\ncommands:\n");
    for (const em_command *const *c = em_commands; *c; c++)
        fprintf(out, "  %-14s %s\n", (*c)->name, (*c)->summary);
    fprintf(out, "\n`evalmesh COMMAND --help` describes a command.\n"
                 "Exit statuses: 0 ok, 2 bad recipe or arguments, 3 a gate failed,\n"
                 "4 runtime failure, 5 distributed failure.\n");
}

static void print_version(void) {
    printf("evalmesh %s (commit %s)\nbackends: %s\n", EVALMESH_VERSION, EVALMESH_GIT_COMMIT,
           EVALMESH_BACKENDS);
}

int main(int argc, char **argv) {
    em_log_init(0, 1);
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--version") == 0) {
            print_version();
            return EM_EXIT_OK;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            print_help(stdout);
            return EM_EXIT_OK;
        } else if (strcmp(argv[i], "--log-level") == 0 && i + 1 < argc) {
            int level = em_log_level_parse(argv[++i]);
            if (level < 0) {
                fprintf(stderr, "evalmesh: unknown log level '%s' (error, warn, info, debug)\n",
                        argv[i]);
                return EM_EXIT_BAD_INPUT;
            }
            em_log_set_level((em_log_level)level);
        } else {
            fprintf(stderr, "evalmesh: unknown option '%s' (see evalmesh --help)\n", argv[i]);
            return EM_EXIT_BAD_INPUT;
        }
    }
    if (i >= argc) {
        print_help(stderr);
        return EM_EXIT_BAD_INPUT;
    }
    for (const em_command *const *c = em_commands; *c; c++) {
        if (strcmp((*c)->name, argv[i]) != 0) continue;
        for (int j = i + 1; j < argc; j++) {
            if (strcmp(argv[j], "--") == 0) break;
            if (strcmp(argv[j], "--help") == 0 || strcmp(argv[j], "-h") == 0) {
                printf("%s", (*c)->usage);
                return EM_EXIT_OK;
            }
        }
        return (*c)->main(argc - i, argv + i);
    }
    fprintf(stderr, "evalmesh: unknown command '%s' (see evalmesh --help)\n", argv[i]);
    return EM_EXIT_BAD_INPUT;
}
