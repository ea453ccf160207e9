/* Path helpers for reports: create folders, place paths relative to the recipe or the run
 * directory. Files are read with util/regular_file.h and written with util/atomic_file.h. */
#ifndef EVALMESH_REPORT_TEXTFILE_H
#define EVALMESH_REPORT_TEXTFILE_H

#include "util/error.h"

/* Creates a folder and its parents (mode 0755) when missing. */
em_status em_textfile_mkdirs(const char *path);
/* A path written in a recipe: relative ones are relative to the recipe file's folder (as model
 * and dataset paths are); absolute ones, or any when recipe_path is NULL, stay as they are. */
char *em_textfile_from_recipe(const char *recipe_path, const char *path);
/* "dir/name", or name itself when it is absolute or dir is NULL (heap string). */
char *em_textfile_join(const char *dir, const char *name);

#endif
