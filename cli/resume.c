/* Resuming a run by running its saved command again (see resume.h). */
#include "cli/resume.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/command.h"
#include "cli/options.h"
#include "runner/run_dir.h"
#include "util/log.h"

static char *resume_dir; /* set while em_cli_resume runs the saved command */

void em_cli_session_options(em_session_options *opts, int argc, char **argv) {
    opts->argc = argc;
    opts->argv = argv;
    if (!resume_dir) return;
    opts->run_dir = resume_dir;
    opts->force = true;
    opts->resume = true;
}

int em_cli_resume(const char *run_dir) {
    char *cwd, **argv;
    int argc;
    em_status err = em_run_dir_read_invocation(run_dir, &cwd, &argc, &argv);
    if (err) {
        int code = err->exit_code;
        em_log_error("%s", err->message);
        em_error_free(err);
        return code;
    }
    char *dir = realpath(run_dir, NULL);
    const em_command *command = NULL;
    for (const em_command *const *c = em_commands; *c && argc > 0; c++)
        if (strcmp((*c)->name, argv[0]) == 0) command = *c;
    int code = EM_EXIT_BAD_INPUT;
    if (!dir || !command) {
        em_log_error("cannot resume %s: %s", run_dir,
                     !dir ? strerror(errno) : "its invocation names no command of this evalmesh");
    } else if (chdir(cwd) != 0) {
        em_log_error("cannot resume %s: it was started in %s: %s", run_dir, cwd, strerror(errno));
    } else {
        em_log_info("resuming %s: evalmesh %s ... (from %s)", dir, argv[0], cwd);
        resume_dir = dir;
        optind = 0;
        code = command->main(argc, argv);
        resume_dir = NULL;
    }
    free(dir);
    free(cwd);
    for (int i = 0; i < argc; i++) free(argv[i]);
    free(argv);
    return code;
}
