/* Early checks of output paths (see writable.h). */
#include "stages/report/writable.h"

#include <errno.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"

bool em_path_writable(const char *path, const char **why) {
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            *why = "it is a directory";
            return false;
        }
        if (access(path, W_OK) != 0) {
            *why = "the file is not writable";
            return false;
        }
        return true;
    }
    char *dir = em_xstrdup(path);
    for (;;) {
        char *parent = em_xstrdup(dirname(dir));
        free(dir);
        dir = parent;
        if (stat(dir, &st) == 0) break;
        if (strcmp(dir, "/") == 0 || strcmp(dir, ".") == 0) break;
    }
    bool ok = true;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        *why = "a folder on its path is a file";
        ok = false;
    } else if (access(dir, W_OK | X_OK) != 0) {
        *why = "its folder is not writable";
        ok = false;
    }
    free(dir);
    return ok;
}
