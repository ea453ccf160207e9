# lm-evaluation-harness-style task YAMLs (stages/kinds/support/lm_eval_task.c): contexts and
# continuations against lm-eval 0.4.13's (expected JSON made by make_lm_eval_contexts.py), and
# the bad inputs with their messages. Included by tests/tasks/CMakeLists.txt.
add_executable(lm_eval_task_dump ${CMAKE_CURRENT_LIST_DIR}/lm_eval_task_dump.c)
target_link_libraries(lm_eval_task_dump PRIVATE em_runner)
em_py_test(tasks_lm_eval_contexts ${CMAKE_CURRENT_LIST_DIR}/test_lm_eval_tasks.py
           ARGS $<TARGET_FILE:lm_eval_task_dump> contexts)
em_py_test(tasks_lm_eval_bad_input ${CMAKE_CURRENT_LIST_DIR}/test_lm_eval_tasks.py
           ARGS $<TARGET_FILE:lm_eval_task_dump> bad_input)
em_c_test(tasks_doc_template SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_doc_template.c LIBS em_tasks
          ARGS ${CMAKE_CURRENT_LIST_DIR}/data/doc_template_cases.json)
em_c_test(tasks_lm_eval_path SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_lm_eval_task_path.c
          LIBS em_runner)
