/* The run directory: where one run writes its resolved recipe, its logs and what the stages
 * write. Rank 0 chooses and creates it, then tells every rank its path through the world
 * communicator, so all ranks write into the same place. The default is
 * runs/<recipe name>-<UTC YYYYmmdd-HHMMSS>, with -2, -3, ... added when that exists, so a later
 * run never overwrites an earlier one; a directory asked for with --run-dir must be absent or
 * empty unless `force` is set. */
#ifndef EVALMESH_RUN_DIR_H
#define EVALMESH_RUN_DIR_H

#include <stdbool.h>
#include <stdio.h>

#include "runner/comm/comm.h"
#include "runner/recipe/node.h"

/* Collective over world (NULL: this process alone). `requested` is --run-dir or NULL. On success
 * *out is the path (caller frees). Errors (exit 2 for a directory that may not be used, 4 when it
 * cannot be created) come back on every rank; rank 0's names the reason. */
em_status em_run_dir_create(em_comm *world, const char *recipe_name, const char *requested,
                            bool force, char **out);

/* The resolved recipe as YAML, URL secrets redacted: what recipe.resolved.yaml holds (and what
 * its sha256 keys the window records with). The caller frees it. */
char *em_run_dir_recipe_text(const em_node *recipe);
/* Writes that text to <dir>/recipe.resolved.yaml. */
em_status em_run_dir_write_recipe(const char *dir, const em_node *recipe);
/* For a resume: a refusal (exit 2) naming the first differing line (its number, and its text then
 * and now) when <dir>/recipe.resolved.yaml is not text. */
em_status em_run_dir_check_recipe(const char *dir, const char *text);

/* <dir>/invocation: the working directory and the command's arguments (argv[0] the command name),
 * NUL-separated, so `evalmesh run --resume DIR` can run the same command again. */
em_status em_run_dir_write_invocation(const char *dir, int argc, char *const *argv);
/* Reads it back; the caller frees cwd, each argv[i] and argv (NULL-terminated). Exit 2 when
 * missing or damaged. */
em_status em_run_dir_read_invocation(const char *dir, char **cwd, int *argc, char ***argv);

/* Opens this rank's log: <dir>/evalmesh.log on rank 0, <dir>/evalmesh.rank<R>.log on others. */
em_status em_run_dir_open_log(const char *dir, int rank, FILE **out);

#endif
