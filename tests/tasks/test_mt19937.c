/* MT19937 as NumPy and CPython draw from it: RandomState(seed).permutation(n) (one and two in a
 * row), random.Random(seed)'s getrandbits(32), sample(range(n), k) through both of its branches
 * and shuffle, all equal to mt19937_expected.json (written by mt19937_reference.py from NumPy
 * 1.24 and CPython 3.11 themselves), for seeds 0, 1, 42, 2^32 - 1 and a two-word 2^40 + 5. */
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "expected_json.h"
#include "stages/tasks/mt19937.h"
#include "test.h"
#include "util/error.h"

/* The list `values` equals out (n). */
static bool equal_list(const cJSON *values, const size_t *out, size_t n) {
    if (cJSON_GetArraySize(values) != (int)n) return false;
    size_t i = 0;
    for (const cJSON *v = values ? values->child : NULL; v; v = v->next, i++)
        if ((double)out[i] != v->valuedouble) return false;
    return true;
}

static double number(const cJSON *c, const char *key) {
    return cJSON_GetObjectItemCaseSensitive(c, key)->valuedouble;
}

static void check_numpy(const cJSON *c) {
    uint32_t seed = (uint32_t)number(c, "seed");
    size_t n = (size_t)number(c, "n");
    size_t *out = em_xmalloc(n * sizeof *out);
    em_mt19937 mt;
    em_mt19937_seed_numpy(&mt, seed);
    if (cJSON_HasObjectItem(c, "after")) {
        size_t first = (size_t)number(c, "after");
        size_t *before = em_xmalloc(first * sizeof *before);
        em_numpy_permutation(&mt, first, before);
        CHECK(equal_list(cJSON_GetObjectItemCaseSensitive(c, "first"), before, first));
        free(before);
    }
    em_numpy_permutation(&mt, n, out);
    bool same = equal_list(cJSON_GetObjectItemCaseSensitive(c, "permutation"), out, n);
    if (!same) fprintf(stderr, "numpy seed %u n %zu differs\n", seed, n);
    CHECK(same);
    free(out);
}

static void check_python(const cJSON *c) {
    uint64_t seed = (uint64_t)number(c, "seed");
    em_mt19937 mt;
    em_mt19937_seed_python(&mt, seed);
    const cJSON *words = cJSON_GetObjectItemCaseSensitive(c, "words");
    if (words) {
        size_t got[4];
        for (int i = 0; i < 4; i++) got[i] = em_mt19937_next(&mt);
        CHECK(equal_list(words, got, 4));
        return;
    }
    size_t n = (size_t)number(c, "n");
    size_t *out = em_xmalloc(n * sizeof *out);
    const cJSON *sample = cJSON_GetObjectItemCaseSensitive(c, "sample");
    bool same;
    if (sample) {
        size_t k = (size_t)number(c, "k");
        em_python_sample(&mt, n, k, out);
        same = equal_list(sample, out, k);
    } else {
        for (size_t i = 0; i < n; i++) out[i] = i;
        em_python_shuffle(&mt, out, n);
        same = equal_list(cJSON_GetObjectItemCaseSensitive(c, "shuffle"), out, n);
    }
    if (!same) fprintf(stderr, "python seed %llu n %zu differs\n", (unsigned long long)seed, n);
    CHECK(same);
    free(out);
}

int main(void) {
    cJSON *expected = expected_json("mt19937_expected.json");
    int numpy_cases = 0, python_cases = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(expected, "numpy_cases")) {
        check_numpy(c);
        numpy_cases++;
    }
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(expected, "python_cases")) {
        check_python(c);
        python_cases++;
    }
    CHECK_INT_EQ(numpy_cases, 28);
    CHECK_INT_EQ(python_cases, 80);
    cJSON_Delete(expected);
    return test_finish();
}
