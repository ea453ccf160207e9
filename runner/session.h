/* One rank's part of a run, from start-up to exit status: bootstrap (PMIx or alone), agreement of
 * all ranks that the recipe is good, stage init, the run directory (created only once everything
 * checked out, so a bad recipe leaves nothing behind), the resolved recipe and the logs, the rank
 * state file, execution, and the exit status (2 bad recipe, 3 gate, 4 runtime, 5 distributed).
 * `evalmesh run` and commands that build their recipe in memory both end here. */
#ifndef EVALMESH_SESSION_H
#define EVALMESH_SESSION_H

#include <stdbool.h>

#include "runner/pipeline.h"

typedef struct em_session_options {
    const char *run_dir; /* --run-dir, or NULL for runs/<name>-<UTC time> */
    bool force;          /* --force: write into a --run-dir that is not empty */
    int threads;         /* stage threads per rank; 0: min(4, stages) */
    /* The command's arguments (argv[0] its name), saved in the run directory as `invocation`
     * so `--resume` can run it again; argc 0: nothing saved. */
    int argc;
    char *const *argv;
    /* --resume: run_dir is an earlier run's; its recipe must resolve the same (else exit 2),
     * and stages reuse what it recorded. */
    bool resume;
} em_session_options;

/* `prepared` is the outcome of preparing the pipeline on this rank (an error leaves pipeline
 * NULL): every rank still starts up and learns whether all ranks prepared it, so a bad recipe
 * ends the whole job at once, reported once, instead of leaving ranks waiting. Takes ownership of
 * prepared and pipeline. Returns the process exit status. */
int em_session_run(em_status prepared, em_pipeline *pipeline, const em_session_options *opts);

#endif
