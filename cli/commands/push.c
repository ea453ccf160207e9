/* `evalmesh push RUN_DIR`: sends again the pushes a run spooled in RUN_DIR/push-spool/ because
 * they still failed after their retries (see stages/report/spool.h). Credentials are read again
 * from the environment variable or file the recipe named. Delivered files are removed. */
#include <stdio.h>
#include <string.h>

#include "cli/command.h"
#include "cli/options.h"
#include "util/error.h"
#include "stages/report/spool.h"

static int push_main(int argc, char **argv) {
    static const struct option options[] = {{0}};
    if (em_cli_option("push", argc, argv, "", options) != -1) return EM_EXIT_BAD_INPUT;
    if (optind >= argc) {
        fprintf(stderr, "usage: evalmesh push RUN_DIR (see evalmesh push --help)\n");
        return EM_EXIT_BAD_INPUT;
    }
    if (optind + 1 < argc) return em_cli_unexpected("push", argv[optind + 1]);
    const char *run_dir = argv[optind];
    int sent = 0, failed = 0;
    em_status err = em_spool_resend(run_dir, &sent, &failed);
    if (sent + failed == 0 && !err) {
        printf("nothing to send: %s/push-spool/ holds no spooled push\n", run_dir);
        return EM_EXIT_OK;
    }
    printf("%d spooled push%s delivered, %d failed\n", sent, sent == 1 ? "" : "es", failed);
    if (err) {
        fprintf(stderr, "evalmesh push: %s\n", err->message);
        int code = err->exit_code;
        em_error_free(err);
        return code;
    }
    return EM_EXIT_OK;
}

const em_command em_command_push = {
    .name = "push",
    .summary = "send again the pushes a run spooled because they failed",
    .usage = "usage: evalmesh push RUN_DIR\n\n"
             "Sends every request spooled in RUN_DIR/push-spool/ (Pushgateway or webhook pushes\n"
             "that still failed after their retries), with the same retries, TLS settings and\n"
             "credentials source as the recipe gave, and removes each one that was delivered.\n"
             "Exit status: 0 when all were delivered (or none was spooled), 4 when one still\n"
             "fails (it stays spooled), 2 when RUN_DIR is not a directory.\n",
    .main = push_main,
};
