# tests/support: the test programs' own machinery. cuda_skip_test.py checks, on CTest's list of
# entries, that a [cuda] entry reads "Skipped" and not "Passed" when no GPU is visible.
find_program(SONOPIPE_SUPPORT_PYTHON NAMES python3)
if(SONOPIPE_SUPPORT_PYTHON)
  add_test(NAME cuda_skip_test COMMAND ${SONOPIPE_SUPPORT_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/cuda_skip_test.py
                                       ${CMAKE_CTEST_COMMAND} ${PROJECT_BINARY_DIR})
  set_tests_properties(cuda_skip_test PROPERTIES TIMEOUT 600)
else()
  add_test(NAME cuda_skip_test_python_found COMMAND ${CMAKE_COMMAND} -E echo "no python3 for tests/support")
  set_tests_properties(cuda_skip_test_python_found PROPERTIES WILL_FAIL ON)
endif()
