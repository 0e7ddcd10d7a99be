# Tool tests: the recording format, and replay/record over real ZeroMQ sockets.
set(sonopipe_test_links_tools sonopipe_tools_common PkgConfig::ZMQ)
