# tests/shm drives the shared-memory transport across threads and forked processes.
set(sonopipe_test_links_shm sonopipe_shm)
