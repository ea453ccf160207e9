/* Files that cannot half-happen and URLs that keep their secrets (util/atomic_file.h,
 * util/regular_file.h, util/redact.h): whole-file replacement with no temporary file left, even on
 * failure; a line appended after a torn one starts a new line; non-regular and oversized inputs
 * refused before reading; the secret parts of URLs redacted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/redact.h"
#include "util/regular_file.h"

static char *slurp(const char *path) {
    char *text = NULL;
    em_status err = em_read_regular_file(path, 1 << 20, "a test file", &text, NULL);
    em_error_free(err);
    return text;
}

/* The atomic writer replaces whole files and leaves no temporary file behind, even when it fails;
 * an append after a torn last line (no '\n') starts a new line instead of continuing it. */
static void test_atomic_files(const char *dir) {
    char *path = em_xasprintf("%s/a.json", dir);
    CHECK(em_atomic_write(path, "old\n", 4, 0644) == NULL);
    CHECK(em_atomic_write(path, "new!\n", 5, 0600) == NULL);
    char *text = slurp(path);
    CHECK_STR_EQ(text, "new!\n");
    free(text);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
    char *missing = em_xasprintf("%s/no/such/b.json", dir);
    em_status err = em_atomic_write(missing, "x", 1, 0644);
    CHECK(err && err->exit_code == EM_EXIT_RUNTIME);
    if (err) CHECK_CONTAINS(err->message, "/no/such/b.json': No such file or directory");
    em_error_free(err);
    free(missing);
    char *cmd = em_xasprintf("test $(ls -A '%s' | wc -l) -eq 1", dir);
    CHECK(system(cmd) == 0); /* a.json alone: no temporary file left */
    free(cmd);

    char *hist = em_xasprintf("%s/torn.jsonl", dir);
    CHECK(em_atomic_write(hist, "{\"a\":1}\n{\"sche", 14, 0644) == NULL);
    CHECK(em_atomic_append_line(hist, "{\"b\":2}") == NULL);
    CHECK(em_atomic_append_line(hist, "{\"c\":3}") == NULL);
    text = slurp(hist);
    CHECK_STR_EQ(text, "{\"a\":1}\n{\"sche\n{\"b\":2}\n{\"c\":3}\n");
    free(text);
    unlink(hist);
    unlink(path);
    free(hist);
    free(path);
}

/* URL secrets: user-info passwords and query values whose names say secret, in any text. */
static void test_redact(void) {
    static const char *const cases[][2] = {
        {"push to https://u:pw@h.example/x?a=1 failed",
         "push to https://u:REDACTED@h.example/x?a=1 failed"},
        {"url: 'http://h/p?x=1&access_token=abc&X-Amz-Signature=f00#frag'",
         "url: 'http://h/p?x=1&access_token=REDACTED&X-Amz-Signature=REDACTED#frag'"},
        {"http://h/?apiKey=k;sig=s&page=2", "http://h/?apiKey=REDACTED;sig=REDACTED&page=2"},
        {"no url here: token=abc", "no url here: token=abc"},
        {"http://127.0.0.1:9091/metrics/job/n", "http://127.0.0.1:9091/metrics/job/n"},
        {"http://h/?token=", "http://h/?token="},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *got = em_redact_urls(cases[i][0]);
        CHECK_STR_EQ(got, cases[i][1]);
        CHECK(em_has_url_secret(cases[i][0]) == (strcmp(cases[i][0], cases[i][1]) != 0));
        free(got);
    }
}

/* Reads what is not a regular file, or is too big, refuses it before reading. */
static void test_regular_only(const char *dir) {
    char *text = NULL;
    em_status err = em_read_regular_file("/dev/zero", 1 << 20, "a test input", &text, NULL);
    CHECK(err && err->exit_code == EM_EXIT_BAD_INPUT && !text);
    if (err)
        CHECK_STR_EQ(err->message,
                     "cannot read '/dev/zero': it is a character device, not a regular "
                     "file (a test input must be one)");
    em_error_free(err);
    err = em_read_regular_file(dir, 1 << 20, "a test input", &text, NULL);
    CHECK(err && strstr(err->message, "it is a directory, not a regular file"));
    em_error_free(err);
    char *path = em_xasprintf("%s/ten", dir);
    CHECK(em_atomic_write(path, "0123456789", 10, 0644) == NULL);
    err = em_read_regular_file(path, 9, "a test input", &text, NULL);
    CHECK(err && strstr(err->message, "it is 10 bytes, more than the limit of 9 bytes for a test "
                                      "input"));
    em_error_free(err);
    size_t len = 0;
    CHECK(em_read_regular_file(path, 10, "a test input", &text, &len) == NULL);
    CHECK(len == 10 && text && strcmp(text, "0123456789") == 0);
    free(text);
    chmod(path, 0664);
    err = em_check_private_file(path, "a test input");
    CHECK(err && strstr(err->message, "others may write it (mode 0664)"));
    em_error_free(err);
    chmod(path, 0600);
    CHECK(em_check_private_file(path, "a test input") == NULL);
    unlink(path);
    free(path);
}

int main(void) {
    char dir[] = "/tmp/em-util-files-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    test_atomic_files(dir);
    test_regular_only(dir);
    test_redact();
    rmdir(dir);
    return test_finish();
}
