/* Path helpers for reports (see textfile.h). */
#include "stages/report/textfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

em_status em_textfile_mkdirs(const char *path) {
    char *p = em_xstrdup(path);
    for (char *s = p + 1;; s++) {
        char c = *s;
        if (c != '/' && c != 0) continue;
        *s = 0;
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            em_status err =
                em_error_new(EM_EXIT_RUNTIME, "%s: cannot create folder: %s", p, strerror(errno));
            free(p);
            return err;
        }
        *s = c;
        if (c == 0) break;
    }
    free(p);
    return NULL;
}

char *em_textfile_join(const char *dir, const char *name) {
    if (!dir || name[0] == '/') return em_xstrdup(name);
    return em_xasprintf("%s/%s", dir, name);
}
