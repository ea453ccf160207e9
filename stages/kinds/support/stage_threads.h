/* The CPU threads a stage kind computes with on this rank (its `threads` option, which the
 * schemas of forward, compare, calibrate and quantize document alike): the option when the recipe
 * gives it, else OMP_NUM_THREADS when it holds a positive number, else this node's cores shared
 * evenly by its ranks. When the launcher already bound the rank to some of the cores (mpirun
 * --bind-to, srun --cpu-bind), those are the rank's share as they are. At least 1. */
#ifndef EVALMESH_STAGE_THREADS_H
#define EVALMESH_STAGE_THREADS_H

#include "runner/stage.h"

int em_stage_threads(const em_stage *self, const em_run_context *ctx);

#endif
