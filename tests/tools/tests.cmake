# Tool tests: the recording format, the simulators, and replay/record over real ZeroMQ sockets.
list(APPEND sonopipe_test_links_tools sonopipe_tools_common sonopipe_replay sonopipe_record sonopipe_import PkgConfig::ZMQ)
