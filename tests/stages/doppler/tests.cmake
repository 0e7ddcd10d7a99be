# The rotating-disk test reads a MUST .mat file through the importers' reader (tools/formats).
list(APPEND sonopipe_test_links_stages sonopipe_formats)
# clutter_filter_test's reference SVD is LAPACK's zgesdd (liblapacke-dev).
find_library(SONOPIPE_LAPACKE lapacke REQUIRED)
set(sonopipe_test_program_links_clutter_filter_test ${SONOPIPE_LAPACKE})
