/* multiple_choice_grade as BIG-bench scores it: for each vector of log-likelihood sums in
 * bigbench_expected.json (bigbench_reference.py: NumPy's np.array(x) - logsumexp(x) and
 * task_metrics.argmax, copied), the scores bit for bit and the chosen choice, ties included
 * (two and three tied, broken by the sha256 of the scores); then the grade is the chosen
 * choice's target score, partial credit included. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <string.h>

#include "expected_json.h"
#include "stages/tasks/bigbench_scoring.h"
#include "test.h"

static void check_case(const cJSON *c) {
    const cJSON *sums = cJSON_GetObjectItemCaseSensitive(c, "sums");
    const cJSON *want = cJSON_GetObjectItemCaseSensitive(c, "scores");
    bool absolute = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "absolute_normalization"));
    size_t n = (size_t)cJSON_GetArraySize(sums);
    double in[16], scores[16];
    for (size_t i = 0; i < n; i++) in[i] = cJSON_GetArrayItem(sums, (int)i)->valuedouble;
    em_bigbench_scores(in, n, absolute, scores);
    for (size_t i = 0; i < n; i++) {
        double w = cJSON_GetArrayItem(want, (int)i)->valuedouble;
        if (memcmp(&scores[i], &w, sizeof w) != 0)
            fprintf(stderr, "score %zu: %.17g, expected %.17g\n", i, scores[i], w);
        CHECK(memcmp(&scores[i], &w, sizeof w) == 0);
    }
    size_t chosen = em_bigbench_argmax(scores, n);
    CHECK_INT_EQ(chosen, cJSON_GetObjectItemCaseSensitive(c, "chosen")->valueint);

    /* the grade: target_scores[chosen], through em_bigbench_grade */
    double targets[16];
    for (size_t i = 0; i < n; i++) targets[i] = i == chosen ? 0.75 : (double)i;
    em_task_example example = {.choice_count = n, .target_scores = targets};
    size_t picked = SIZE_MAX;
    CHECK(em_bigbench_grade(&example, in, absolute, &picked) == 0.75);
    CHECK_INT_EQ(picked, chosen);
}

int main(void) {
    cJSON *expected = expected_json("bigbench_expected.json");
    int cases = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(expected, "scoring")) {
        check_case(c);
        cases++;
    }
    CHECK_INT_EQ(cases, 12);
    cJSON_Delete(expected);
    return test_finish();
}
