/* Freeing a report stage's artifact (see report_artifact.h). */
#include "stages/report/report_artifact.h"

#include <stdlib.h>

void em_report_artifact_free(void *artifact) {
    em_report_artifact *a = artifact;
    if (!a) return;
    free(a->results_path);
    free(a->history_path);
    free(a->html_path);
    free(a);
}
