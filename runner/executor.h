/* Running a stage graph on this rank. Every stage is initialised first (in topological order);
 * then a small pool of threads runs the stages: a stage starts once every stage it depends on
 * has finished, so stages with no path between them may overlap. Stages whose kind calls
 * collectives run one at a time, in the graph's topological order, so every rank issues its
 * collectives in the same order; other stages may overlap them. Each artifact is freed as soon as
 * the last stage reading it has finished, the rest at the end.
 *
 * Failures: a stage that fails stops the run: no further stage starts, running ones are awaited,
 * and the error comes back as "rank R, stage 'name' (kind): ..." with exit status 4 (a stage's
 * own 2 or 5 is kept). A stage whose kind gives verdicts (em_stage_kind.verdict: a gate) and
 * records a failed one does not stop anything: its artifact is kept, every other stage runs, and
 * its message comes back with exit status 3 after everything else finished (a failure that stops
 * the run wins over it). */
#ifndef EVALMESH_EXECUTOR_H
#define EVALMESH_EXECUTOR_H

#include "runner/dag.h"
#include "runner/rank_state.h"

/* Calls init on every stage in topological order. On error (exit status 2 unless the stage said
 * 5), the stages already initialised are destroyed again. */
em_status em_executor_init(em_dag *dag, const em_run_context *ctx);

/* Runs the initialised stages with `threads` workers (0: min(4, stages)). Records each stage's
 * seconds; reports "running"/"done"/"failed" to rank_state when it is not NULL. */
em_status em_executor_run(em_dag *dag, const em_run_context *ctx, int threads,
                          em_rank_state *rank_state);

/* Frees the artifacts still held and destroys every stage's state. */
void em_executor_finish(em_dag *dag);

#endif
