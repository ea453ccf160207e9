/* `evalmesh run RECIPE [overrides]`: prepares the recipe and runs it as one rank of the job (see
 * runner/session.h for what a run does and writes). */
#include <stdlib.h>
#include <string.h>

#include "cli/command.h"
#include "runner/session.h"
#include "util/log.h"

static const char usage[] =
    "usage: evalmesh run RECIPE [KEY.PATH=VALUE | ~KEY.PATH ...] [--run-dir DIR] [--force]\n"
    "                    [--log-level LEVEL] [--quiet]\n"
    "\n"
    "Runs the recipe's stages on this rank. Started alone it is the only rank; under\n"
    "`mpirun` or `srun --mpi=pmix` every rank runs the same stages. The run directory gets\n"
    "recipe.resolved.yaml (after includes, overrides and defaults), evalmesh.log (other\n"
    "ranks: evalmesh.rank<R>.log), state/ and what the stages write. It is created only once\n"
    "the recipe and every stage's options checked out.\n"
    "\n"
    "  KEY.PATH=VALUE   set a recipe value, parsed as YAML: stages.wiki.max_length=4096\n"
    "  ~KEY.PATH        delete a recipe value: ~stages.gate\n"
    "  --run-dir DIR    write into DIR instead of runs/<name>-<UTC YYYYmmdd-HHMMSS>[-N];\n"
    "                   DIR must be absent or empty\n"
    "  --force          write into a --run-dir that is not empty\n"
    "  --log-level L    error, warn, info or debug (else EVALMESH_LOG, else the recipe's\n"
    "                   log_level, else info)\n"
    "  --quiet          print only warnings and errors\n"
    "\n"
    "Exit statuses: 0 ok, 2 bad recipe or arguments (nothing is written), 3 a gate failed\n"
    "(the other stages, reports included, finished), 4 a stage failed, 5 another rank failed\n"
    "or did not answer in time.\n";

static int run_main(int argc, char **argv) {
    const char *recipe = NULL;
    const char **overrides = em_xcalloc((size_t)argc, sizeof *overrides);
    size_t override_count = 0;
    em_session_options opts = {0};
    int level = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--run-dir") == 0 && i + 1 < argc) {
            opts.run_dir = argv[++i];
        } else if (strcmp(a, "--force") == 0) {
            opts.force = true;
        } else if (strcmp(a, "--log-level") == 0 && i + 1 < argc) {
            level = em_log_level_parse(argv[++i]);
            if (level < 0) {
                em_log_error("evalmesh run: unknown log level '%s' (error, warn, info, debug)",
                             argv[i]);
                free(overrides);
                return EM_EXIT_BAD_INPUT;
            }
        } else if (strcmp(a, "--quiet") == 0) {
            level = EM_LOG_WARN;
        } else if (a[0] == '-') {
            em_log_error("evalmesh run: unknown option '%s' (see evalmesh run --help)", a);
            free(overrides);
            return EM_EXIT_BAD_INPUT;
        } else if (!recipe) {
            recipe = a;
        } else {
            overrides[override_count++] = a;
        }
    }
    if (!recipe) {
        em_log_error("evalmesh run: missing RECIPE (see evalmesh run --help)");
        free(overrides);
        return EM_EXIT_BAD_INPUT;
    }
    if (level >= 0) em_log_set_level((em_log_level)level);

    em_pipeline *pipeline = NULL;
    em_status err = em_pipeline_load(recipe, overrides, override_count, &pipeline);
    free(overrides);
    /* The recipe's log_level counts only where neither the command line nor EVALMESH_LOG chose. */
    int recipe_level =
        pipeline && pipeline->log_level ? em_log_level_parse(pipeline->log_level) : -1;
    if (recipe_level >= 0) em_log_choose_level((em_log_level)recipe_level, EM_LOG_FROM_RECIPE);
    return em_session_run(err, pipeline, &opts);
}

const em_command em_command_run = {
    .name = "run",
    .summary = "run a recipe (on every rank of an mpirun/srun job)",
    .usage = usage,
    .main = run_main,
};
