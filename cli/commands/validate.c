/* `evalmesh validate RECIPE [overrides]`: checks a recipe as `run` would before starting
 * anything: YAML, includes, overrides, schemas, stage references, cycles and every stage's own
 * option checks (its init, as rank 0 of 1). Writes nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/command.h"
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

static int validate_main(int argc, char **argv) {
    const char *recipe = NULL;
    const char **overrides = em_xcalloc((size_t)argc, sizeof *overrides);
    size_t override_count = 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-') {
            em_log_error("evalmesh validate: unknown option '%s' (see evalmesh validate --help)",
                         argv[i]);
            free(overrides);
            return EM_EXIT_BAD_INPUT;
        }
        if (!recipe)
            recipe = argv[i];
        else
            overrides[override_count++] = argv[i];
    }
    if (!recipe) {
        em_log_error("evalmesh validate: missing RECIPE (see evalmesh validate --help)");
        free(overrides);
        return EM_EXIT_BAD_INPUT;
    }
    em_pipeline *p;
    em_status err = em_pipeline_load(recipe, overrides, override_count, &p);
    free(overrides);
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
