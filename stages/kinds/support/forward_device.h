/* The forward backend a stage kind computes on: the row of the forward-backend table
 * (stages/kernels/forward_backend.h) that its `device` option names, checked in init, before any
 * work: a backend this machine cannot run (cuda without a GPU) gives its own reason, a name
 * without a row, or a row without what the stage uses, the list of this build's backends. Both
 * exit status 2 at the place of `device`. And its `precision`, which the backend must run. */
#ifndef EVALMESH_FORWARD_DEVICE_H
#define EVALMESH_FORWARD_DEVICE_H

#include "runner/stage.h"
#include "stages/kernels/forward_backend.h"

/* What a stage does with its backend, beyond scoring windows. */
typedef enum em_forward_use {
    EM_FORWARD_SCORE,   /* score_batch (every backend) */
    EM_FORWARD_PAIRS,   /* score_pair: two models over the same windows */
    EM_FORWARD_OBSERVE, /* observe: the linear layers' inputs */
} em_forward_use;

em_status em_stage_forward_backend(const em_stage *self, em_forward_use use,
                                   const em_forward_backend **out);

/* The stage's `precision` option (exact, ggml, bf16) on backend be: ggml and bf16 only where be
 * runs them (its ggml_precision, bf16_precision), else refused (exit 2) at the place of
 * `precision`. */
em_status em_stage_precision(const em_stage *self, const em_forward_backend *be, em_precision *out);

#endif
