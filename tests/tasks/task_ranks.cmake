# The task stage across ranks, tp, batches, threads and resume on the real tiny model.
em_py_test(task_ranks ${CMAKE_CURRENT_SOURCE_DIR}/test_task_ranks.py)
set_tests_properties(task_ranks PROPERTIES TIMEOUT 600)
# evalmesh eval and evalmesh tasks on BIG-bench tasks by name (a folder of the committed tasks).
em_py_test(eval_cli_tasks ${CMAKE_CURRENT_SOURCE_DIR}/test_eval_cli.py)
