/* A tiny test harness: CHECK* macros count failures and print file:line and the values;
 * a test program returns test_finish() (0 when all passed, 1 otherwise, 77 when skipped). */
#ifndef EVALMESH_TEST_H
#define EVALMESH_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_failures = 0;
static int test_checks = 0;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        test_checks++;                                                                             \
        if (!(cond)) {                                                                             \
            test_failures++;                                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
        }                                                                                          \
    } while (0)

#define CHECK_INT_EQ(a, b)                                                                         \
    do {                                                                                           \
        long long va_ = (long long)(a), vb_ = (long long)(b);                                      \
        test_checks++;                                                                             \
        if (va_ != vb_) {                                                                          \
            test_failures++;                                                                       \
            fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", __FILE__, __LINE__, #a, #b,  \
                    va_, vb_);                                                                     \
        }                                                                                          \
    } while (0)

#define CHECK_STR_EQ(a, b)                                                                         \
    do {                                                                                           \
        const char *sa_ = (a), *sb_ = (b);                                                         \
        test_checks++;                                                                             \
        if (!sa_ || !sb_ || strcmp(sa_, sb_) != 0) {                                               \
            test_failures++;                                                                       \
            fprintf(stderr, "%s:%d: %s == %s failed: \"%s\" != \"%s\"\n", __FILE__, __LINE__, #a,  \
                    #b, sa_ ? sa_ : "(null)", sb_ ? sb_ : "(null)");                               \
        }                                                                                          \
    } while (0)

/* The string a contains b. */
#define CHECK_CONTAINS(a, b)                                                                       \
    do {                                                                                           \
        const char *sa_ = (a), *sb_ = (b);                                                         \
        test_checks++;                                                                             \
        if (!sa_ || !sb_ || !strstr(sa_, sb_)) {                                                   \
            test_failures++;                                                                       \
            fprintf(stderr, "%s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, __LINE__,         \
                    sa_ ? sa_ : "(null)", sb_ ? sb_ : "(null)");                                   \
        }                                                                                          \
    } while (0)

static inline int test_finish(void) {
    printf("%d checks, %d failed\n", test_checks, test_failures);
    return test_failures ? 1 : 0;
}

#define TEST_SKIP(...)                                                                             \
    do {                                                                                           \
        printf("SKIPPED: ");                                                                       \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
        exit(77);                                                                                  \
    } while (0)

/* path (size bytes) = the shared test data's file rel (under EVALMESH_SHARED_DATA, else
 * ../shared/data); skips the test when it is not there. */
static inline void test_shared_file(const char *rel, char *path, size_t size) {
    const char *shared = getenv("EVALMESH_SHARED_DATA");
    snprintf(path, size, "%s/%s", shared ? shared : "../shared/data", rel);
    FILE *probe = fopen(path, "rb");
    if (!probe) TEST_SKIP("%s not found (set EVALMESH_SHARED_DATA)", path);
    fclose(probe);
}

#endif
