/* Choosing, creating and sharing the run directory; its resolved recipe and log files (see
 * run_dir.h). The directory is made 0750 and never used through a symbolic link; the resolved
 * recipe is written atomically with URL secrets redacted; the log is opened with O_NOFOLLOW. */
#include "runner/run_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/atomic_file.h"
#include "util/redact.h"

#define RUN_DIR_MODE 0750

/* What rank 0 broadcasts: 0 and the path, or the exit status of its failure. */
typedef struct run_dir_message {
    int32_t exit_code;
    char path[4092];
} run_dir_message;

/* mkdir -p: creates dir (RUN_DIR_MODE) and its missing parents. */
static int make_dirs(const char *dir) {
    char *path = em_xstrdup(dir);
    int rc = 0;
    for (char *p = path + 1; *p && rc == 0; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(path, 0777) != 0 && errno != EEXIST) rc = -1;
        *p = '/';
    }
    if (rc == 0 && mkdir(path, RUN_DIR_MODE) != 0 && errno != EEXIST) rc = -1;
    free(path);
    return rc;
}

/* 1 when dir has entries besides . and .., 0 when empty, -1 when it cannot be read. */
static int has_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int found = 0;
    for (struct dirent *e; !found && (e = readdir(d));)
        found = strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return found;
}

/* --force: the previous run's rank state files go, so check-state never reads them as this run's.
 */
static em_status clear_state(const char *dir) {
    char *state = em_xasprintf("%s/state", dir);
    DIR *d = opendir(state);
    em_status err = NULL;
    for (struct dirent *e; d && !err && (e = readdir(d));) {
        if (strncmp(e->d_name, "rank-", 5) != 0 && strncmp(e->d_name, ".rank-", 6) != 0) continue;
        if (unlinkat(dirfd(d), e->d_name, 0) != 0 && errno != ENOENT)
            err = em_error_new(EM_EXIT_RUNTIME, "--force: cannot remove %s/%s: %s", state,
                               e->d_name, strerror(errno));
    }
    if (d) closedir(d);
    free(state);
    return err;
}

static em_status use_requested(const char *dir, bool force) {
    struct stat st;
    if (lstat(dir, &st) == 0 && S_ISLNK(st.st_mode))
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "run directory '%s' is a symbolic link; give the directory itself "
                            "(a run directory is never used through a link)",
                            dir);
    if (stat(dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode))
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "run directory '%s' exists and is not a directory", dir);
        int entries = has_entries(dir);
        if (entries < 0)
            return em_error_new(EM_EXIT_BAD_INPUT, "run directory '%s' cannot be read: %s", dir,
                                strerror(errno));
        if (entries && !force)
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "run directory '%s' exists and is not empty (--force writes into "
                                "it anyway)",
                                dir);
        return entries ? clear_state(dir) : NULL;
    }
    if (make_dirs(dir) != 0)
        return em_error_new(EM_EXIT_RUNTIME, "cannot create run directory '%s': %s", dir,
                            strerror(errno));
    return NULL;
}

/* runs/<name>-<timestamp>, then -2, -3, ...: mkdir fails when it exists, so two runs started in
 * the same second still get different directories. */
static em_status make_default(const char *recipe_name, char *path, size_t size) {
    if (make_dirs("runs") != 0)
        return em_error_new(EM_EXIT_RUNTIME, "cannot create directory 'runs': %s", strerror(errno));
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    for (int n = 1;; n++) {
        if (n == 1)
            snprintf(path, size, "runs/%s-%s", recipe_name, stamp);
        else
            snprintf(path, size, "runs/%s-%s-%d", recipe_name, stamp, n);
        if (mkdir(path, RUN_DIR_MODE) == 0) return NULL;
        if (errno != EEXIST)
            return em_error_new(EM_EXIT_RUNTIME, "cannot create run directory '%s': %s", path,
                                strerror(errno));
    }
}

em_status em_run_dir_create(em_comm *world, const char *recipe_name, const char *requested,
                            bool force, char **out) {
    *out = NULL;
    int rank = world ? world->rank : 0;
    run_dir_message msg;
    memset(&msg, 0, sizeof msg);
    em_status err = NULL;
    if (rank == 0) {
        if (requested && strlen(requested) >= sizeof msg.path)
            err = em_error_new(EM_EXIT_BAD_INPUT, "run directory path is too long");
        else if (requested)
            err = use_requested(requested, force);
        else
            err = make_default(recipe_name, msg.path, sizeof msg.path);
        if (!err && requested) snprintf(msg.path, sizeof msg.path, "%s", requested);
        msg.exit_code = err ? err->exit_code : 0;
    }
    if (world) {
        em_status berr = em_broadcast(world, &msg, sizeof msg, 0);
        if (berr) {
            em_error_free(err);
            return em_error_prefix(berr, "sharing the run directory");
        }
    }
    if (err) return err;
    if (msg.exit_code)
        return em_error_new(msg.exit_code, "rank 0 could not create the run directory");
    /* Ranks on other nodes may not share rank 0's file system: make it there too. */
    if (rank != 0 && make_dirs(msg.path) != 0)
        return em_error_new(EM_EXIT_RUNTIME, "rank %d: cannot create run directory '%s': %s", rank,
                            msg.path, strerror(errno));
    *out = em_xstrdup(msg.path);
    return NULL;
}

char *em_run_dir_recipe_text(const em_node *recipe) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) abort();
    em_node_write_yaml(recipe, f);
    fclose(f);
    char *clean = em_redact_urls(text);
    free(text);
    return clean;
}

em_status em_run_dir_write_recipe(const char *dir, const em_node *recipe) {
    char *path = em_xasprintf("%s/recipe.resolved.yaml", dir);
    char *text = em_run_dir_recipe_text(recipe);
    em_status err = em_atomic_write(path, text, strlen(text), 0640);
    free(text);
    free(path);
    return err;
}

/* The whole of a small file into *out (NUL-terminated; *len without it). */
static em_status slurp(const char *path, char **out, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return em_error_new(EM_EXIT_BAD_INPUT, "cannot resume: %s: %s", path, strerror(errno));
    char *text = NULL;
    size_t size = 0, cap = 0, n;
    char buf[4096];
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        if (size + n + 1 > cap) {
            cap = 2 * (size + n + 1);
            text = realloc(text, cap);
            if (!text) abort();
        }
        memcpy(text + size, buf, n);
        size += n;
    }
    fclose(f);
    if (!text) text = em_xcalloc(1, 1);
    text[size] = 0;
    *out = text;
    *len = size;
    return NULL;
}

em_status em_run_dir_check_recipe(const char *dir, const char *text) {
    char *path = em_xasprintf("%s/recipe.resolved.yaml", dir), *old;
    size_t len;
    em_status err = slurp(path, &old, &len);
    if (err) {
        free(path);
        return err;
    }
    if (strcmp(old, text) != 0) {
        int line = 1;
        size_t i = 0, start = 0; /* the first differing line starts at start in both */
        for (; old[i] && old[i] == text[i]; i++)
            if (old[i] == '\n') line++, start = i + 1;
        const char *then = old + start, *now = text + start;
        while (*then == ' ' && *now == ' ') then++, now++; /* the same indentation */
        err =
            em_error_new(EM_EXIT_BAD_INPUT,
                         "resume refused: the recipe changed: it now resolves to something "
                         "other than %s (first difference at line %d: `%.*s` then, `%.*s` "
                         "now); resume only with the same recipe, or start a new run",
                         path, line, (int)strcspn(then, "\n"), then, (int)strcspn(now, "\n"), now);
    }
    free(old);
    free(path);
    return err;
}

em_status em_run_dir_write_invocation(const char *dir, int argc, char *const *argv) {
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd))
        return em_error_new(EM_EXIT_RUNTIME, "getcwd: %s", strerror(errno));
    size_t len = strlen(cwd) + 1;
    for (int i = 0; i < argc; i++) len += strlen(argv[i]) + 1;
    char *buf = em_xmalloc(len), *p = buf;
    p = stpcpy(p, cwd) + 1;
    for (int i = 0; i < argc; i++) p = stpcpy(p, argv[i]) + 1;
    char *path = em_xasprintf("%s/invocation", dir);
    em_status err = em_atomic_write(path, buf, len, 0640);
    free(path);
    free(buf);
    return err;
}

em_status em_run_dir_read_invocation(const char *dir, char **cwd, int *argc, char ***argv) {
    char *path = em_xasprintf("%s/invocation", dir), *text;
    size_t len;
    em_status err = slurp(path, &text, &len);
    free(path);
    if (err) return em_error_prefix(err, "%s is not a run directory written by this evalmesh", dir);
    if (len == 0 || text[len - 1] != 0) {
        free(text);
        return em_error_new(EM_EXIT_BAD_INPUT, "cannot resume: %s/invocation is damaged", dir);
    }
    int n = 0;
    for (size_t i = 0; i < len; i++) n += text[i] == 0;
    char **args = em_xcalloc((size_t)n + 1, sizeof *args);
    char *p = text;
    *cwd = em_xstrdup(p);
    p += strlen(p) + 1;
    for (int i = 0; i < n - 1; i++, p += strlen(p) + 1) args[i] = em_xstrdup(p);
    free(text);
    *argc = n - 1;
    *argv = args;
    return NULL;
}

em_status em_run_dir_open_log(const char *dir, int rank, FILE **out) {
    char *path = rank == 0 ? em_xasprintf("%s/evalmesh.log", dir)
                           : em_xasprintf("%s/evalmesh.rank%d.log", dir, rank);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0640);
    *out = fd >= 0 ? fdopen(fd, "a") : NULL;
    em_status err = NULL;
    if (!*out) {
        err = em_error_new(EM_EXIT_RUNTIME, "cannot open log '%s': %s", path, strerror(errno));
        if (fd >= 0) close(fd);
    }
    free(path);
    return err;
}
