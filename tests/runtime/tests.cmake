# tests/runtime: the executors, device lanes, queue and placement (no sockets).
set(sonopipe_test_links_runtime sonopipe_stages)

# Stage plugins for the plugin tests (tests/daemon/plugin_config_test.cpp): the example plugin built in
# this tree, and one library per way a plugin can be refused. Written to build/tests/plugins/.
set(sonopipe_test_plugins log_envelope:${PROJECT_SOURCE_DIR}/examples/plugin-stage/log_envelope.cpp)
foreach(name IN ITEMS abi_mismatch no_entry_point throwing duplicate_name)
  list(APPEND sonopipe_test_plugins ${name}:${CMAKE_CURRENT_LIST_DIR}/plugins/${name}.cpp)
endforeach()
foreach(entry IN LISTS sonopipe_test_plugins)
  string(REPLACE ":" ";" entry "${entry}")
  list(GET entry 0 name)
  list(GET entry 1 source)
  add_library(test_plugin_${name} MODULE ${source})
  set_target_properties(test_plugin_${name} PROPERTIES OUTPUT_NAME ${name} PREFIX lib CXX_VISIBILITY_PRESET hidden
                        LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests/plugins)
  target_link_libraries(test_plugin_${name} PRIVATE sonopipe_stage_sdk)
  add_dependencies(sonopipe_test_support test_plugin_${name})
endforeach()
