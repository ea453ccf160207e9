/* `evalmesh validate RECIPE [overrides]`: checks a recipe as `run` would before starting
 * anything: YAML, includes, overrides, schemas, stage references, cycles and every stage's own
 * option checks (its init, as rank 0 of 1). Writes nothing. */
#include <stdio.h>

#include "cli/command.h"
#include "cli/options.h"
#include "runner/executor.h"
#include "runner/pipeline.h"
#include "util/log.h"

static const char usage[] =
    "usage: evalmesh validate RECIPE [KEY.PATH=VALUE | ~KEY.PATH ...]\n"
    "\n"
    "Checks the recipe with the overrides applied, as `evalmesh run` would, and prints\n"
    "\"RECIPE: ok (N stages)\". Nothing is written and no other rank is contacted.\n"
    "\n"
    "Exit statuses: 0 the recipe is good, 2 it is not (the message names file:line:col).\n";

static const struct option options[] = {{NULL, 0, NULL, 0}};

static int validate_main(int argc, char **argv) {
    int c;
    while ((c = em_cli_option("validate", argc, argv, "", options)) != -1)
        if (c == '?') return EM_EXIT_BAD_INPUT;
    if (optind >= argc) {
        em_log_error("evalmesh validate: missing RECIPE (see evalmesh validate --help)");
        return EM_EXIT_BAD_INPUT;
    }
    /* the operands: the recipe, then its overrides */
    const char *recipe = argv[optind];
    em_pipeline *p;
    em_status err = em_pipeline_load(recipe, (const char *const *)argv + optind + 1,
                                     (size_t)(argc - optind - 1), &p);
    if (!err) {
        em_run_context ctx = em_pipeline_context(p, NULL);
        err = em_executor_init(p->dag, &ctx);
        if (!err) {
            em_pipeline_warn_without_results(p);
            printf("%s: ok (%zu stage%s)\n", recipe, p->dag->count, p->dag->count == 1 ? "" : "s");
            em_executor_finish(p->dag);
        }
        em_pipeline_free(p);
    }
    if (!err) return EM_EXIT_OK;
    int code = err->exit_code;
    em_log_error("%s", err->message);
    em_error_free(err);
    return code;
}

const em_command em_command_validate = {
    .name = "validate",
    .summary = "check a recipe (schemas, references, cycles, stage options) without running it",
    .usage = usage,
    .main = validate_main,
};
