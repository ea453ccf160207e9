/* The stage graph of a recipe. Every entry of the recipe's `stages:` map becomes an em_stage
 * whose kind is looked up in a registry passed in by the caller (the generated em_stage_kinds in
 * the program, test-only kinds in unit tests). The options a kind lists as inputs (one stage name
 * or a list of them) and `after:` (the same, ordering only) are the edges. Building the graph
 * checks every reference (it names a stage, that stage produces an accepted artifact type) and
 * rejects cycles, naming the whole path; then it fixes one topological order, ties broken by
 * recipe order, so every rank walks the stages the same way. */
#ifndef EVALMESH_DAG_H
#define EVALMESH_DAG_H

#include <stddef.h>

#include "runner/stage.h"

/* What the graph knows about one stage besides its em_stage. Indices refer to em_dag.stages. */
typedef struct em_dag_vertex {
    size_t *deps; /* stages that must finish first (inputs and `after:`): unique, ascending */
    size_t dep_count;
    size_t *reads; /* stages whose artifacts this one reads (inputs only): unique, ascending */
    size_t read_count;
    size_t *after; /* the `after:` names, in recipe order (may repeat deps) */
    size_t after_count;
    size_t reader_count; /* how many stages read this stage's artifact */
    size_t position;     /* index of this stage in em_dag.order */
} em_dag_vertex;

typedef struct em_dag {
    em_stage *stages; /* in recipe order; options point into the recipe tree (not owned) */
    em_dag_vertex *vertices;
    size_t count;
    size_t *order; /* topological: stages[order[0]] first; ties broken by recipe order */
} em_dag;

/* Checks one entry of the `stages:` map: a valid name (^[A-Za-z_][A-Za-z0-9_]*$), a map as value,
 * and a `kind:` found in the NULL-terminated registry `kinds` (set in *kind). Errors (exit 2) name
 * the place; an unknown kind gets a "did you mean" or the list of known kinds. */
em_status em_dag_check_stage(const em_stage_kind *const *kinds, const em_map_entry *entry,
                             const em_stage_kind **kind);

/* Builds the graph of `stages_map` (the recipe's `stages:` map, which must outlive the graph).
 * Errors have exit status 2 and name the place (file:line:col) and the stages involved. */
em_status em_dag_build(em_node *stages_map, const em_stage_kind *const *kinds, em_dag **out);
/* Frees the graph (not the stages' state or artifacts: see executor.h). */
void em_dag_free(em_dag *dag);

/* The index of the stage called name, or -1. */
long em_dag_find(const em_dag *dag, const char *name);

#endif
