# tests/pipeline: the executor, queue and parameter machinery (no sockets).
set(sonopipe_test_links_pipeline sonopipe_stages)
