# tests/client: the C client library against a real sonopiped (the harness of tests/daemon).
set(sonopipe_test_links_client sonopipe_daemon)
# The C program client_test.cpp runs against a real sonopiped: plain C, linked to the client
# library alone, compiled with its installed header's include line (<sonopipe_client.h>).
add_executable(client_program ${CMAKE_CURRENT_LIST_DIR}/client_program.c)
set_target_properties(client_program PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
target_compile_options(client_program PRIVATE -Wall -Wextra -Werror)
target_link_libraries(client_program PRIVATE sonopipe_client m)
