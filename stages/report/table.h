/* The plain-text metrics table the report stage prints on rank 0's stdout:
 *   metric                    value        ± error
 * one row per metric, timing metrics marked, numbers aligned. */
#ifndef EVALMESH_REPORT_TABLE_H
#define EVALMESH_REPORT_TABLE_H

#include "stages/metrics/metrics.h"

/* The table as a heap string (ends with a newline). */
char *em_report_table(const em_metrics *metrics);

#endif
