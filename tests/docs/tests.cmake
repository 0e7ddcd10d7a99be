# Every repository path named in README.md, docs/, comments and help text exists
# (tests/docs/doc_paths.py; the standard library only, so any python3 runs it).
find_program(SONOPIPE_DOCS_PYTHON NAMES python3)
if(SONOPIPE_DOCS_PYTHON)
  add_test(NAME docs_paths_test COMMAND ${SONOPIPE_DOCS_PYTHON} -m unittest -v doc_paths_test
           WORKING_DIRECTORY ${CMAKE_CURRENT_LIST_DIR})
  set_tests_properties(docs_paths_test PROPERTIES TIMEOUT 120)
else()
  add_test(NAME docs_paths_test_python_found COMMAND ${CMAKE_COMMAND} -E echo "no python3 for tests/docs")
  set_tests_properties(docs_paths_test_python_found PROPERTIES WILL_FAIL ON)
endif()
