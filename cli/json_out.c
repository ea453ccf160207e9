/* Printing a command's JSON document (see json_out.h). */
#include "cli/json_out.h"

#include <stdio.h>
#include <stdlib.h>

void em_print_json(cJSON *doc) {
    char *text = cJSON_Print(doc);
    printf("%s\n", text);
    fflush(stdout);
    free(text);
    cJSON_Delete(doc);
}
