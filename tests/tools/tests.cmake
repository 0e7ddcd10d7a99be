# Tool tests: the recording format, the simulators, replay/record over real ZeroMQ sockets, the
# importers, and the OpenIGTLink bridge (its library brings the Debian OpenIGTLink headers for the
# test clients).
list(APPEND sonopipe_test_links_tools sonopipe_tools_common sonopipe_replay sonopipe_record sonopipe_import
     sonopipe_igtl PkgConfig::ZMQ)
