/* `evalmesh run RECIPE [overrides]`: prepares the recipe and runs it as one rank of the job (see
 * runner/session.h for what a run does and writes). */
#include <stdlib.h>

#include "cli/command.h"
#include "cli/options.h"
#include "cli/resume.h"
#include "runner/session.h"
#include "util/log.h"

static const char usage[] =
    "usage: evalmesh run RECIPE [KEY.PATH=VALUE | ~KEY.PATH ...] [--run-dir DIR] [--force]\n"
    "                    [--log-level LEVEL] [--quiet] [--collective-timeout S]\n"
    "       evalmesh run --resume RUN_DIR\n"
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
    "  --collective-timeout S  seconds a collective may wait for the other ranks\n"
    "                   before the run fails with exit status 5 (the recipe's\n"
    "                   collective_timeout_s; default 300)\n"
    "  --resume RUN_DIR run RUN_DIR's command again (run or perplexity, from the directory\n"
    "                   it was started in) into RUN_DIR, on this job's ranks (any number):\n"
    "                   windows finished before (RUN_DIR/records/) are not computed again,\n"
    "                   the metrics are bit-identical to an uninterrupted run; refused (2)\n"
    "                   when the model, dataset or resolved recipe changed\n"
    "\n"
    "Exit statuses: 0 ok, 2 bad recipe or arguments (nothing is written), 3 a gate failed\n"
    "(the other stages, reports included, finished), 4 a stage failed, 5 another rank failed\n"
    "or did not answer in time, 6 interrupted by SIGTERM, SIGINT or the pre-timeout signal\n"
    "(EVALMESH_STOP_SIGNAL, default USR1): the finished windows are kept, finish with --resume.\n";

enum { OPT_RUN_DIR = 256, OPT_FORCE, OPT_LEVEL, OPT_QUIET, OPT_RESUME, OPT_TIMEOUT };

static const struct option options[] = {
    {"run-dir", required_argument, NULL, OPT_RUN_DIR},
    {"force", no_argument, NULL, OPT_FORCE},
    {"log-level", required_argument, NULL, OPT_LEVEL},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"resume", required_argument, NULL, OPT_RESUME},
    {"collective-timeout", required_argument, NULL, OPT_TIMEOUT},
    {NULL, 0, NULL, 0},
};

static int run_main(int argc, char **argv) {
    em_session_options opts = {0};
    int level = -1, c;
    const char *resume = NULL, *timeout = NULL;
    while ((c = em_cli_option("run", argc, argv, "", options)) != -1) {
        if (c == '?') return EM_EXIT_BAD_INPUT;
        if (c == OPT_RUN_DIR) {
            opts.run_dir = optarg;
        } else if (c == OPT_FORCE) {
            opts.force = true;
        } else if (c == OPT_LEVEL) {
            level = em_log_level_parse(optarg);
            if (level < 0) {
                em_log_error("evalmesh run: unknown log level '%s' (error, warn, info, debug)",
                             optarg);
                return EM_EXIT_BAD_INPUT;
            }
        } else if (c == OPT_QUIET) {
            level = EM_LOG_WARN;
        } else if (c == OPT_RESUME) {
            resume = optarg;
        } else if (c == OPT_TIMEOUT) {
            timeout = optarg;
        }
    }
    if (level >= 0) em_log_set_level((em_log_level)level);
    if (resume && optind < argc) return em_cli_unexpected("run", argv[optind]);
    if (resume) return em_cli_resume(resume);
    if (optind >= argc) {
        em_log_error("evalmesh run: missing RECIPE (see evalmesh run --help)");
        return EM_EXIT_BAD_INPUT;
    }
    if (level >= 0) em_log_set_level((em_log_level)level);

    /* the operands: the recipe, then its overrides */
    const char *recipe = argv[optind];
    size_t count = (size_t)(argc - optind - 1);
    const char **overrides = em_xcalloc(count + 1, sizeof *overrides);
    for (size_t i = 0; i < count; i++) overrides[i] = argv[optind + 1 + i];
    char *timeout_override = timeout ? em_xasprintf("collective_timeout_s=%s", timeout) : NULL;
    if (timeout_override) overrides[count++] = timeout_override;
    em_pipeline *pipeline = NULL;
    em_status err = em_pipeline_load(recipe, overrides, count, &pipeline);
    free(overrides);
    free(timeout_override);
    /* The recipe's log_level counts only where neither the command line nor EVALMESH_LOG chose. */
    int recipe_level =
        pipeline && pipeline->log_level ? em_log_level_parse(pipeline->log_level) : -1;
    if (recipe_level >= 0) em_log_choose_level((em_log_level)recipe_level, EM_LOG_FROM_RECIPE);
    em_cli_session_options(&opts, argc, argv);
    return em_session_run(err, pipeline, &opts);
}

const em_command em_command_run = {
    .name = "run",
    .summary = "run a recipe (on every rank of an mpirun/srun job)",
    .usage = usage,
    .main = run_main,
};
