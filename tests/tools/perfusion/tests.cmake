# tests/tools/**: the perfusion tool's library (NIfTI I/O, validation, map writing). APPEND, so
# that other tools' tests.cmake files in tests/tools/ can add theirs.
list(APPEND sonopipe_test_links_tools sonopipe_perfusion_tool)
