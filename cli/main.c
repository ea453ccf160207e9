/* evalmesh's entry point: global options, then dispatch to a command in cli/commands/. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build_info.h"
#include "cli/command.h"
#include "cli/options.h"
#include "cli/wait_policy.h"
#include "util/error.h"
#include "util/exit_status.h"
#include "util/log.h"

static void print_help(FILE *out) {
    fprintf(out, "usage: evalmesh [--version] [--log-level LEVEL] COMMAND [ARGS...]\n\n"
                 "Runs declarative LLM evaluation recipes across ranks and nodes.\n\ncommands:\n");
    for (const em_command *const *c = em_commands; *c; c++)
        fprintf(out, "  %-14s %s\n", (*c)->name, (*c)->summary);
    fprintf(out, "\n`evalmesh COMMAND --help` describes a command.\n\nexit statuses:\n");
    for (size_t i = 0; i < em_exit_status_count; i++)
        fprintf(out, "  %d  %s\n", em_exit_statuses[i].status, em_exit_statuses[i].meaning);
}

static void print_version(void) {
    printf("evalmesh %s (commit %s)\nbackends: %s\n", EVALMESH_VERSION, EVALMESH_GIT_COMMIT,
           EVALMESH_BACKENDS);
}

/* "unknown command", with the closest command name as a hint. */
static int unknown_command(const char *name) {
    const char *names[64];
    size_t count = 0;
    for (const em_command *const *c = em_commands; *c && count < 64; c++)
        names[count++] = (*c)->name;
    char hint[128];
    em_cli_hint(hint, sizeof hint, "", name, names, count);
    em_log_error("evalmesh: unknown command '%s'%s (see evalmesh --help)", name, hint);
    return EM_EXIT_BAD_INPUT;
}

int main(int argc, char **argv) {
    em_default_wait_policy(argv);
    em_log_init(0, 1);
    static const struct option options[] = {
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {"log-level", required_argument, NULL, 'l'},
        {0},
    };
    int c;
    /* "+": the global options end at the command's name */
    while ((c = em_cli_option(NULL, argc, argv, "+h", options)) != -1) {
        if (c == 'V') {
            print_version();
            return EM_EXIT_OK;
        } else if (c == 'h') {
            print_help(stdout);
            return EM_EXIT_OK;
        } else if (c == 'l') {
            int level = em_log_level_parse(optarg);
            if (level < 0) {
                em_log_error("evalmesh: unknown log level '%s' (error, warn, info, debug)", optarg);
                return EM_EXIT_BAD_INPUT;
            }
            em_log_set_level((em_log_level)level);
        } else {
            return EM_EXIT_BAD_INPUT;
        }
    }
    int i = optind;
    if (i >= argc) {
        print_help(stderr);
        return EM_EXIT_BAD_INPUT;
    }
    for (const em_command *const *cmd = em_commands; *cmd; cmd++) {
        if (strcmp((*cmd)->name, argv[i]) != 0) continue;
        for (int j = i + 1; j < argc; j++) {
            if (strcmp(argv[j], "--") == 0) break;
            if (strcmp(argv[j], "--help") == 0 || strcmp(argv[j], "-h") == 0) {
                printf("%s", (*cmd)->usage);
                return EM_EXIT_OK;
            }
        }
        optind = 0; /* the command parses its own arguments from the start */
        return (*cmd)->main(argc - i, argv + i);
    }
    return unknown_command(argv[i]);
}
