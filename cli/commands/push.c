/* `evalmesh push RUN_DIR`: sends again the pushes a run spooled in RUN_DIR/push-spool/ because
 * they still failed after their retries (see stages/report/spool.h). A spool file says only which
 * output of which report stage it belongs to and what to send; the URL, TLS settings and the
 * credential's source are read again from RUN_DIR/recipe.resolved.yaml, and the credential
 * itself from that environment variable or file. Both files must belong to the current user and
 * be writable by nobody else. Delivered files are removed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/command.h"
#include "cli/options.h"
#include "runner/recipe/recipe.h"
#include "util/error.h"
#include "util/regular_file.h"
#include "stages/kinds/report_push_request.h"
#include "stages/report/spool.h"

static em_status resolve(const char *stage, int output, const char *target, void *user,
                         em_push_request *req) {
    return em_report_push_request(user, stage, output, target, req);
}

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
    char *recipe_path = em_xasprintf("%s/recipe.resolved.yaml", run_dir);
    em_node *recipe = NULL;
    em_status err = NULL;
    char *spool = em_xasprintf("%s/push-spool", run_dir);
    if (access(spool, F_OK) == 0) {
        err = em_check_private_file(recipe_path, "the run's recipe");
        if (!err) err = em_recipe_load(recipe_path, &recipe);
    }
    if (!err) err = em_spool_resend(run_dir, resolve, recipe, &sent, &failed);
    em_node_free(recipe);
    free(recipe_path);
    free(spool);
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
             "that still failed after their retries) and removes each one that was delivered.\n"
             "The URL, TLS settings, retries and credential source come from the run's\n"
             "RUN_DIR/recipe.resolved.yaml, never from the spool file; both must belong to you\n"
             "and be writable by you alone. Exit status: 0 when all were delivered (or none was\n"
             "spooled), 4 when one still fails (it stays spooled), 2 when RUN_DIR is not a\n"
             "directory or a spool file or the recipe is refused.\n",
    .main = push_main,
};
