# evalmesh eval against lm-evaluation-harness 0.4.13: the task files and expected values of
# lm_eval_ref/ (written by tools/lm-eval-expected), on a model evalmesh-mkmodel rebuilds; exit 77
# (skipped) without the shared data's Llama 3 tokenizer. Included by tests/tasks/CMakeLists.txt.
em_py_test(lm_eval_reference ${CMAKE_CURRENT_LIST_DIR}/test_lm_eval_reference.py
           ARGS $<TARGET_FILE:evalmesh> $<TARGET_FILE:evalmesh-mkmodel>)
set_tests_properties(lm_eval_reference PROPERTIES TIMEOUT 300)
