/* A prepared pipeline: a recipe loaded (or built in memory by a command), command-line overrides
 * applied in order, the top level checked against schemas/recipe.schema.json, every stage's
 * options checked against schemas/stages/<kind>.schema.json with defaults filled in, and the
 * stage graph built. The resulting tree is the fully resolved recipe a run directory records.
 * Nothing here touches the file system beyond reading the recipe and its includes. */
#ifndef EVALMESH_PIPELINE_H
#define EVALMESH_PIPELINE_H

#include <stddef.h>

#include "runner/comm/bootstrap.h"
#include "runner/dag.h"

typedef struct em_pipeline {
    em_node *recipe;             /* resolved: includes, overrides and defaults applied */
    const char *path;            /* the recipe file (or the name given to an in-memory tree) */
    const char *name;            /* the recipe's `name:` (inside recipe) */
    long long seed;              /* `seed:` */
    double init_timeout_s;       /* `init_timeout_s:`: limit for starting up all ranks */
    double collective_timeout_s; /* `collective_timeout_s:`: limit for each collective */
    const char *log_level;       /* `log_level:` or NULL */
    em_dag *dag;
} em_pipeline;

/* Loads the recipe file at path (with its includes) and prepares it. Errors have exit status 2
 * and name file:line:col. */
em_status em_pipeline_load(const char *path, const char *const *overrides, size_t override_count,
                           em_pipeline **out);
/* Prepares a tree built in memory; takes ownership of recipe (freed on error too). `path` names
 * the recipe in messages and in the run context. */
em_status em_pipeline_from_tree(em_node *recipe, const char *path, const char *const *overrides,
                                size_t override_count, em_pipeline **out);
void em_pipeline_free(em_pipeline *pipeline);

/* Warns (on the log, so call it on one rank) when no stage of the pipeline writes results: the
 * run would compute and keep nothing. */
void em_pipeline_warn_without_results(const em_pipeline *pipeline);

/* The run context of this rank for the pipeline: where the rank sits (from boot; NULL: alone,
 * rank 0 of 1 without a world communicator, as `evalmesh validate` checks a recipe) and what the
 * recipe says. run_dir is NULL: the run directory is made once every stage accepted its options. */
em_run_context em_pipeline_context(const em_pipeline *pipeline, const em_bootstrap *boot);

/* The recipe schema's default of init_timeout_s: the start-up limit when no recipe could be
 * prepared (every rank still starts up to learn that). */
double em_pipeline_default_init_timeout(void);

#endif
