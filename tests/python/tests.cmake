# Python tests (tests/python/test_*.py, unittest), one CTest test per file, run through the
# sonopipe-python launcher of tools/python (the interpreter CMake found with numpy, zmq,
# google.protobuf, h5py and matplotlib, and the generated protobuf modules).
# The tools they drive are passed by path: SONOPIPE_DAEMON, SONOPIPE_SIM, SONOPIPE_RECORD, ...
# recording_interop_test.cpp (a C++ test, globbed by tests/CMakeLists.txt) runs the Python half
# recording_interop.py through the same launcher.
set(sonopipe_test_links_python sonopipe_tools_common)
if(NOT SONOPIPE_PYTHON_EXECUTABLE)
  # Fail loudly rather than skip: the suite must not pass without its Python half.
  add_test(NAME python_interpreter_found
           COMMAND ${CMAKE_COMMAND} -E echo "no Python with numpy, zmq, google.protobuf, h5py, matplotlib:"
                   "run tools/install-deps.sh and re-run cmake")
  set_tests_properties(python_interpreter_found PROPERTIES WILL_FAIL ON)  # echo succeeds -> test fails
  return()
endif()

set(sonopipe_python_test_env "SONOPIPE_VIEW=${SONOPIPE_VIEW_LAUNCHER}" "SONOPIPE_WEB=${SONOPIPE_WEB_LAUNCHER}"
                             "SONOPIPE_SOURCE_DIR=${PROJECT_SOURCE_DIR}"
                             "SONOPIPE_OCTAVE_MEX=${SONOPIPE_OCTAVE_MEX}")  # tools/clients/matlab; "" without Octave
# One environment variable per program or library the Python tests drive (SONOPIPE_<NAME>).
foreach(pair IN ITEMS DAEMON:sonopiped SIM:sonopipe-sim RECORD:sonopipe-record REPLAY:sonopipe-replay
                     CTL:sonopipe-ctl CLIENT_LIBRARY:sonopipe_client
                     IMPORT:sonopipe-import EXPORT:sonopipe-export RUN:sonopipe-run KEYGEN:sonopipe-keygen
                     IGTL:sonopipe-igtl BENCH:sonopipe-bench PERFUSION:sonopipe-perfusion)
  string(REPLACE ":" ";" pair "${pair}")
  list(GET pair 0 variable)
  list(GET pair 1 target)
  if(TARGET ${target})
    list(APPEND sonopipe_python_test_env "SONOPIPE_${variable}=$<TARGET_FILE:${target}>")
  endif()
endforeach()

# run_module.py is `python -m unittest -v <module>` that exits 77, reported as skipped, when every
# case of the module skipped (a tool or browser missing).
file(GLOB sonopipe_python_tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/test_*.py)
foreach(test_file IN LISTS sonopipe_python_tests)
  get_filename_component(name ${test_file} NAME_WE)
  add_test(NAME python_${name}
           COMMAND ${SONOPIPE_PYTHON_LAUNCHER} ${CMAKE_CURRENT_LIST_DIR}/run_module.py ${name}
           WORKING_DIRECTORY ${CMAKE_CURRENT_LIST_DIR})
  set_tests_properties(python_${name} PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77 ENVIRONMENT "${sonopipe_python_test_env}")
endforeach()
