/* Resolving the paths a recipe names (see paths.h). */
#include "util/paths.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

void em_path_tidy(char *path) {
    bool absolute = path[0] == '/';
    char *copy = em_xstrdup(path);
    size_t max = strlen(path) / 2 + 1;
    char **segs = em_xcalloc(max, sizeof *segs);
    size_t n = 0;
    for (char *save = NULL, *s = strtok_r(copy, "/", &save); s; s = strtok_r(NULL, "/", &save)) {
        if (!strcmp(s, ".")) continue;
        if (!strcmp(s, "..") && n > 0 && strcmp(segs[n - 1], "..") != 0) {
            n--;
            continue;
        }
        if (!strcmp(s, "..") && absolute) continue; /* "/.." is "/" */
        segs[n++] = s;
    }
    char *out = path;
    if (absolute) *out++ = '/';
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(segs[i]);
        memmove(out, segs[i], len);
        out += len;
        if (i + 1 < n) *out++ = '/';
    }
    if (out == path) *out++ = '.';
    *out = '\0';
    free(segs);
    free(copy);
}

char *em_path_beside(const char *written_in, const char *path) {
    const char *slash = written_in && written_in[0] != '<' ? strrchr(written_in, '/') : NULL;
    char *joined = path[0] == '/' || !slash
                       ? em_xstrdup(path)
                       : em_xasprintf("%.*s/%s", (int)(slash - written_in), written_in, path);
    em_path_tidy(joined);
    return joined;
}
