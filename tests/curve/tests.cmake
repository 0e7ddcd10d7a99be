# tests/curve: the CURVE key files and socket options.
set(sonopipe_test_links_curve sonopipe_daemon)
