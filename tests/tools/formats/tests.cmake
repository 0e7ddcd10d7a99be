# tests/tools/formats: the readers of outside formats (sonopipe_formats). APPEND, as the other
# tests.cmake files of tests/tools/ do.
list(APPEND sonopipe_test_links_tools sonopipe_formats)
