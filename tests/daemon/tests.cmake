# tests/daemon drives the daemon's parts and the real sonopiped binary over ZeroMQ.
set(sonopipe_test_links_daemon sonopipe_daemon)
