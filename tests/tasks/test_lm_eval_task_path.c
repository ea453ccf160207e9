/* em_lm_eval_task_path: which task arguments name lm-eval task YAMLs (by their extension). */
#include "stages/kinds/support/lm_eval_task.h"
#include "test.h"

int main(void) {
    CHECK(em_lm_eval_task_path("my_task.yaml"));
    CHECK(em_lm_eval_task_path("tasks/arc.yml"));
    CHECK(!em_lm_eval_task_path("bigbench_lite"));
    CHECK(!em_lm_eval_task_path("task.json"));
    CHECK(!em_lm_eval_task_path("yaml"));
    CHECK(!em_lm_eval_task_path("notes.yaml.txt"));
    return test_finish();
}
