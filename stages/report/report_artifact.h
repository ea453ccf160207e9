/* The artifact of a `report` stage: where it wrote (on rank 0; empty on the others), so a later
 * stage or a test can find the files. */
#ifndef EVALMESH_REPORT_ARTIFACT_H
#define EVALMESH_REPORT_ARTIFACT_H

typedef struct em_report_artifact {
    char *results_path; /* the first json output, or NULL */
    char *history_path; /* the first history output, or NULL */
    char *html_path;    /* the first html output, or NULL */
    int pushes_failed;  /* pushes that were spooled */
} em_report_artifact;

void em_report_artifact_free(void *artifact);

#endif
