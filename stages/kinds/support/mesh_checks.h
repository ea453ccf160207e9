/* What stage kinds check about the mesh they run on, in init (before anything runs, from the
 * recipe) and in run (once `auto` sizes are settled):
 *   - the windows of a dataset were split over its mesh's dp group, so a stage computing them,
 *     and one reducing what was computed from them, must run on the same mesh (another would
 *     count some windows twice or not at all);
 *   - a stage that computes whole windows on each rank (compare, calibrate) needs tp = cp = 1.
 * Each failure is exit status 2 naming the stage and the place of its `mesh:` (else of the
 * input option). */
#ifndef EVALMESH_MESH_CHECKS_H
#define EVALMESH_MESH_CHECKS_H

#include "runner/comm/mesh_groups.h"
#include "runner/stage.h"

/* The dataset of self's `data` input (when it has one) split its windows over self's mesh. */
em_status em_stage_check_dataset_mesh(const em_stage *self);
/* Every stage that `option` of self names ran on self's mesh, over whose dp group self reduces
 * their results. */
em_status em_stage_check_inputs_mesh(const em_stage *self, const char *option);

/* Init: self's mesh, where its tp or cp is a number, has tp = cp = 1; `why` says what self does
 * ("compare scores both models of a window on one rank"). */
em_status em_stage_check_whole_windows(const em_stage *self, const char *why);
/* Run: the same of the settled mesh. */
em_status em_stage_mesh_whole_windows(const em_stage *self, const em_mesh *mesh, const char *why);

#endif
