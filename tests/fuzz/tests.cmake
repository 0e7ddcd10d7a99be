# Fuzz harnesses (libFuzzer) for every parser that takes outside bytes; how to run and add
# them: docs/development.md, "Fuzzing". One harness = one source defining LLVMFuzzerTestOneInput and one line:
#   sonopipe_add_fuzzer(<name> <source> <libraries...>)
# - With -DSONOPIPE_FUZZ=ON (clang; every library instrumented by the top-level option) it builds the
#   libFuzzer program fuzz_<name>; tests/fuzz/run-fuzzers.sh runs them all.
# - In every build it also builds fuzz_<name>_replay (the same harness with replay_main.cpp) and a
#   CTest test that runs it over the seed corpus tests/fuzz/corpus/<name>/ and every input that once
#   crashed, tests/fuzz/regressions/<name>/: what the fuzzer found stays fixed in the normal suite.
# - In a normal build with clang++ present (CI), CTest's fuzz_harnesses_build builds every harness
#   in a separate clang tree (build/fuzz-build, tests/fuzz/run-fuzzers.sh --build-only) and
#   fuzz_harnesses_<name>_<seconds>s runs one harness for SONOPIPE_FUZZ_SMOKE_SECONDS there: a
#   smoke run (the long runs are run-fuzzers.sh's). That tree is built at -O0 without debug
#   information: it compiles in less than half the CPU time of -O1 with line tables, and a smoke
#   run needs no speed; a finding's input is kept and replays in an -O1 tree (run-fuzzers.sh).
#   They are no RUN_SERIAL: the build starts first (COST) and overlaps the other tests, and the
#   harnesses share the cores with them.
set(SONOPIPE_FUZZ_DIR ${CMAKE_CURRENT_LIST_DIR})
set(SONOPIPE_FUZZ_SMOKE_SECONDS 10 CACHE STRING "Seconds each libFuzzer harness runs under CTest")
if(NOT SONOPIPE_FUZZ)
  find_program(SONOPIPE_FUZZ_CLANG NAMES clang++-14 clang++)
endif()
if(SONOPIPE_FUZZ_CLANG)
  set(sonopipe_fuzz_env "SONOPIPE_FUZZ_BUILD_DIR=${PROJECT_BINARY_DIR}/fuzz-build;SONOPIPE_FUZZ_CXX=${SONOPIPE_FUZZ_CLANG}"
                        "SONOPIPE_FUZZ_FLAGS=-O0 -g0")
  add_test(NAME fuzz_harnesses_build COMMAND bash ${SONOPIPE_FUZZ_DIR}/run-fuzzers.sh --build-only)
  # The limit covers a cold clang build on a busy 2-core runner; COST: the longest entry, so -j
  # starts it first.
  set_tests_properties(fuzz_harnesses_build PROPERTIES TIMEOUT 1800 COST 10000 LABELS fuzz
                       FIXTURES_SETUP sonopipe_fuzz_tree ENVIRONMENT "${sonopipe_fuzz_env}")
endif()

function(sonopipe_add_fuzzer name source)
  set(libraries ${ARGN})
  set(source ${SONOPIPE_FUZZ_DIR}/${source})
  add_executable(fuzz_${name}_replay ${source} ${SONOPIPE_FUZZ_DIR}/replay_main.cpp)
  target_include_directories(fuzz_${name}_replay PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(fuzz_${name}_replay PRIVATE ${libraries})
  add_test(NAME fuzz_${name}_replay
           COMMAND fuzz_${name}_replay ${SONOPIPE_FUZZ_DIR}/corpus/${name} ${SONOPIPE_FUZZ_DIR}/regressions/${name})
  set_tests_properties(fuzz_${name}_replay PROPERTIES TIMEOUT 300)
  # The mat harness's reader steps (mat_fuzzer.cpp): 1 s for the replay, 2 s for the smoke run, so
  # a file on which libmatio loops costs 5 or 10 s instead of 25 s.
  set(reader_env)
  if(name STREQUAL "mat")
    set_tests_properties(fuzz_${name}_replay PROPERTIES ENVIRONMENT SONOPIPE_READER_SECONDS_PER_STEP=1)
    set(reader_env ";SONOPIPE_READER_SECONDS_PER_STEP=2")
  endif()
  if(SONOPIPE_FUZZ)
    add_executable(fuzz_${name} ${source})
    target_include_directories(fuzz_${name} PRIVATE ${PROJECT_SOURCE_DIR})
    target_link_libraries(fuzz_${name} PRIVATE ${libraries})
    target_link_options(fuzz_${name} PRIVATE -fsanitize=fuzzer)
    set_target_properties(fuzz_${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/fuzz)
    set_property(GLOBAL APPEND PROPERTY SONOPIPE_FUZZERS fuzz_${name})
  endif()
  if(SONOPIPE_FUZZ_CLANG)
    set(entry fuzz_harnesses_${name}_${SONOPIPE_FUZZ_SMOKE_SECONDS}s)
    add_test(NAME ${entry} COMMAND bash ${SONOPIPE_FUZZ_DIR}/run-fuzzers.sh --no-build ${SONOPIPE_FUZZ_SMOKE_SECONDS} ${name})
    set_tests_properties(${entry} PROPERTIES TIMEOUT 300 COST ${SONOPIPE_FUZZ_SMOKE_SECONDS} LABELS fuzz
                         FIXTURES_REQUIRED sonopipe_fuzz_tree
                         ENVIRONMENT "${sonopipe_fuzz_env}${reader_env}")
  endif()
endfunction()

sonopipe_add_fuzzer(frame_header frame_header_fuzzer.cpp sonopipe_daemon)
sonopipe_add_fuzzer(control_request control_request_fuzzer.cpp sonopipe_daemon)
sonopipe_add_fuzzer(config config_fuzzer.cpp sonopipe_daemon)
sonopipe_add_fuzzer(recording recording_fuzzer.cpp sonopipe_tools_common)
sonopipe_add_fuzzer(mat mat_fuzzer.cpp sonopipe_formats)
sonopipe_add_fuzzer(uff uff_fuzzer.cpp sonopipe_formats)
sonopipe_add_fuzzer(shm_descriptor shm_descriptor_fuzzer.cpp sonopipe_shm sonopipe_tools_common)
sonopipe_add_fuzzer(host_path_switches host_path_switches_fuzzer.cpp sonopipe_runtime)

# Random byte damage in valid UFF, MATLAB v7.3 (Verasonics), MATLAB v5 (MUST/PyMUST) and recording
# files, fed to sonopipe-import (and every 10th to sonopipe-run): never a signal, a hang or a stray
# exit status (damaged_files.py).
# 200 files here; the reader child's time limit is 5 s so the files libhdf5 loops on stay cheap.
if(SONOPIPE_PYTHON_EXECUTABLE AND TARGET sonopipe-import AND TARGET sonopipe-run)
  add_test(NAME fuzz_damaged_hdf5_files
           COMMAND ${SONOPIPE_PYTHON_LAUNCHER} ${SONOPIPE_FUZZ_DIR}/damaged_files.py --count 200 --jobs 2)
  set_tests_properties(fuzz_damaged_hdf5_files PROPERTIES TIMEOUT 1200 LABELS fuzz ENVIRONMENT
    "SONOPIPE_READER_SECONDS_PER_STEP=5;SONOPIPE_IMPORT=$<TARGET_FILE:sonopipe-import>;SONOPIPE_RUN=$<TARGET_FILE:sonopipe-run>;SONOPIPE_SIM=$<TARGET_FILE:sonopipe-sim>;SONOPIPE_EXPORT=$<TARGET_FILE:sonopipe-export>")
endif()

if(SONOPIPE_FUZZ)
  get_property(fuzzers GLOBAL PROPERTY SONOPIPE_FUZZERS)
  add_custom_target(sonopipe_fuzzers DEPENDS ${fuzzers})
endif()
