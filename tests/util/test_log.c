/* util/log.h: the exact text of an error and a warning line on stderr and in the log file (the
 * level is said once: "error: " on stderr, the level's name in the file), and the level's
 * precedence by source (command line > EVALMESH_LOG > recipe > default). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "util/log.h"

/* The contents of f from the start, into buf. */
static void read_back(FILE *f, char *buf, size_t size) {
    fflush(f);
    rewind(f);
    size_t n = fread(buf, 1, size - 1, f);
    buf[n] = 0;
}

int main(void) {
    FILE *err = tmpfile(), *file = tmpfile();
    CHECK(err && file);
    if (!err || !file) return test_finish();
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(fileno(err), STDERR_FILENO);

    em_log_set_rank(1, 2);
    em_log_set_file(file);
    em_log_error("stage '%s' failed", "fwd");
    em_log_warn("history %s has no run yet", "h.jsonl");
    em_log_set_file(NULL);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);

    char text[1024];
    read_back(err, text, sizeof text);
    CHECK_STR_EQ(text, "[r1] error: stage 'fwd' failed\n[r1] warning: history h.jsonl has no run "
                       "yet\n");
    /* the file: "YYYY-mm-ddTHH:MM:SS.mmmZ " then the level and the line */
    read_back(file, text, sizeof text);
    char *second = strchr(text, '\n');
    CHECK(second != NULL && strlen(text) > 25);
    if (second && strlen(text) > 25) {
        *second++ = 0;
        CHECK_INT_EQ(text[23], 'Z');
        CHECK_STR_EQ(text + 25, "error [r1] stage 'fwd' failed");
        CHECK_INT_EQ(second[23], 'Z');
        CHECK_STR_EQ(second + 25, "warn [r1] history h.jsonl has no run yet\n");
    }
    fclose(err);
    fclose(file);

    /* precedence: a lower source never overrides a higher one, an equal or higher one does */
    em_log_choose_level(EM_LOG_DEBUG, EM_LOG_FROM_RECIPE);
    CHECK_INT_EQ(em_log_get_level(), EM_LOG_DEBUG);
    em_log_choose_level(EM_LOG_ERROR, EM_LOG_FROM_ENV);
    em_log_choose_level(EM_LOG_WARN, EM_LOG_FROM_RECIPE);
    CHECK_INT_EQ(em_log_get_level(), EM_LOG_ERROR);
    em_log_set_level(EM_LOG_INFO); /* the command line */
    em_log_choose_level(EM_LOG_WARN, EM_LOG_FROM_ENV);
    em_log_choose_level(EM_LOG_ERROR, EM_LOG_FROM_RECIPE);
    CHECK_INT_EQ(em_log_get_level(), EM_LOG_INFO);
    em_log_set_level(EM_LOG_WARN);
    CHECK_INT_EQ(em_log_get_level(), EM_LOG_WARN);
    return test_finish();
}
