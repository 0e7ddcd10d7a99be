# tests/src drives the daemon's parts and the real sonopiped binary over ZeroMQ.
set(sonopipe_test_links_src sonopipe_daemon)
