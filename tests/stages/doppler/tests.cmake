# The rotating-disk test reads a MUST .mat file through the importers' reader (tools/formats).
list(APPEND sonopipe_test_links_stages sonopipe_formats)
