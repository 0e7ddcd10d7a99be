# tests/daemon drives the daemon's parts and the real sonopiped binary over ZeroMQ (and reads
# PyMUST's disk file through the importers' reader for the Doppler chain: tools/formats).
set(sonopipe_test_links_daemon sonopipe_daemon sonopipe_formats)
