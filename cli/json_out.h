/* JSON output of the commands: every --json document is built with cJSON (so any string, such
 * as a run directory named with quotes or backslashes, comes out escaped) and printed here. */
#ifndef EVALMESH_JSON_OUT_H
#define EVALMESH_JSON_OUT_H

#include <cjson/cJSON.h>

/* Prints doc on stdout, indented, with a final newline, and deletes it. */
void em_print_json(cJSON *doc);

#endif
