/* `evalmesh stages`: the stage kinds this build knows, with what each reads and produces. */
#include <stdio.h>
#include <string.h>

#include "cli/command.h"
#include "cli/options.h"
#include "runner/stage.h"
#include "util/log.h"

static const char usage[] =
    "usage: evalmesh stages\n"
    "\n"
    "Lists the stage kinds a recipe's `kind:` may name, each with a one-line description,\n"
    "the artifact it produces and the options that name other stages (with the artifact\n"
    "types they accept). Options are described in schemas/stages/<kind>.schema.json.\n"
    "\n"
    "Exit statuses: 0 ok, 2 bad arguments.\n";

static int stages_main(int argc, char **argv) {
    static const struct option options[] = {{0}};
    if (em_cli_option("stages", argc, argv, "", options) != -1) return EM_EXIT_BAD_INPUT;
    if (optind < argc) return em_cli_unexpected("stages", argv[optind]);
    int width = 4;
    for (const em_stage_kind *const *k = em_stage_kinds; *k; k++)
        if ((int)strlen((*k)->name) > width) width = (int)strlen((*k)->name);
    char type[128];
    for (const em_stage_kind *const *k = em_stage_kinds; *k; k++) {
        const em_stage_kind *kind = *k;
        printf("%-*s  %s\n", width, kind->name, kind->summary);
        printf("%-*s  produces %s%s", width, "", kind->produces,
               kind->collective ? "; calls collectives" : "");
        const char *sep = "; reads ";
        for (const em_input_spec *in = kind->inputs; in && in->option; in++) {
            printf("%s%s (%s%s%s)", sep, in->option, in->is_list ? "list of " : "",
                   em_input_accepts_text(in, type, sizeof type), in->optional ? ", optional" : "");
            sep = ", ";
        }
        printf("\n");
    }
    return EM_EXIT_OK;
}

const em_command em_command_stages = {
    .name = "stages",
    .summary = "list the stage kinds a recipe can use",
    .usage = usage,
    .main = stages_main,
};
