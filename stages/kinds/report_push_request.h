/* What the `report` stage kind offers beyond its descriptor: the push request one of its outputs
 * describes, read from a recipe tree. `evalmesh push RUN_DIR` uses it to rebuild a spooled push
 * from the run's recipe.resolved.yaml (see stages/report/spool.h), through the same option
 * parsing the stage itself uses. */
#ifndef EVALMESH_STAGES_KINDS_REPORT_PUSH_REQUEST_H
#define EVALMESH_STAGES_KINDS_REPORT_PUSH_REQUEST_H

#include "runner/recipe/node.h"
#include "stages/report/push.h"

/* Fills *out for output `index` of report stage `stage` in recipe, which must be a `target`
 * (pushgateway or webhook) output; for a pushgateway, out->url is the base URL. Errors are exit
 * 2: no such stage or output, another output type, a URL whose secret was redacted. */
em_status em_report_push_request(const em_node *recipe, const char *stage, int index,
                                 const char *target, em_push_request *out);

#endif
