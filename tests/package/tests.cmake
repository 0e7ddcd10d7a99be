# tests/package: the installed tree and the Debian package, driven as a user would (install_test.sh,
# deb_test.sh -> run_installed.sh). They install into folders of the build tree, never the system.
add_test(NAME package_install_test COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/install_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
add_test(NAME package_deb_test COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/deb_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR} ${PROJECT_VERSION})
set_tests_properties(package_install_test package_deb_test PROPERTIES TIMEOUT 900 RESOURCE_LOCK package)
