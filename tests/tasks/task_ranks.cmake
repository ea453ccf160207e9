# The task stage across ranks, tp, batches, threads and resume on the real tiny model.
em_py_test(task_ranks ${CMAKE_CURRENT_SOURCE_DIR}/test_task_ranks.py)
set_tests_properties(task_ranks PROPERTIES TIMEOUT 600)
