# Command-line programs: every executable that links CLI11::CLI11 (sonopiped and the tools but the
# bench) compiles its own sources at -O1 in a Release build. Those sources are option declarations
# and glue; CLI11 is header-only and about two thirds of such a file's -O3 compile time is CLI11's
# inline code, compiled again in every program (sonopipe-keygen's 32-line main.cpp: 9.7 s at -O3,
# 5.6 s at -O1). The work the programs start lives in libraries, which keep the build type's -O3.
# sonopipe-bench keeps -O3: its timed loops are in the program itself.
set(SONOPIPE_CLI_KEEP_OPTIMIZATION sonopipe-bench)

function(sonopipe_collect_cli_programs dir out)
  set(programs)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    get_target_property(links ${target} LINK_LIBRARIES)
    if(type STREQUAL "EXECUTABLE" AND "CLI11::CLI11" IN_LIST links
       AND NOT target IN_LIST SONOPIPE_CLI_KEEP_OPTIMIZATION)
      list(APPEND programs ${target})
    endif()
  endforeach()
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(subdir IN LISTS subdirs)
    sonopipe_collect_cli_programs(${subdir} sub_programs)
    list(APPEND programs ${sub_programs})
  endforeach()
  set(${out} ${programs} PARENT_SCOPE)
endfunction()

if(NOT SONOPIPE_FUZZ)  # the fuzz tree keeps the flags tests/fuzz/run-fuzzers.sh gives every target
  sonopipe_collect_cli_programs(${PROJECT_SOURCE_DIR} SONOPIPE_CLI_PROGRAMS)
  foreach(program IN LISTS SONOPIPE_CLI_PROGRAMS)
    # The last -O wins over CMAKE_CXX_FLAGS_RELEASE's -O3.
    target_compile_options(${program} PRIVATE $<$<AND:$<CONFIG:Release>,$<COMPILE_LANGUAGE:CXX>>:-O1>)
  endforeach()
  message(STATUS "sonopipe: command-line programs (-O1 in Release): ${SONOPIPE_CLI_PROGRAMS}")
endif()

