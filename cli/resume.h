/* `--resume RUN_DIR` of `evalmesh run` and `evalmesh perplexity`: runs the command saved in
 * RUN_DIR/invocation again, from the working directory it was started in, into RUN_DIR, with the
 * session told to resume (runner/session.h): the recipe must resolve as before, and the forward
 * stages compute only the windows no earlier attempt recorded. */
#ifndef EVALMESH_CLI_RESUME_H
#define EVALMESH_CLI_RESUME_H

#include "runner/session.h"

/* Runs the saved command; returns its exit status (2 when RUN_DIR holds no invocation). */
int em_cli_resume(const char *run_dir);

/* Fills the session options every running command sets the same way: its arguments (saved for a
 * later resume) and, inside em_cli_resume, the run directory and the resume flag. */
void em_cli_session_options(em_session_options *opts, int argc, char **argv);

#endif
