# tests/wire: the codec between protobuf and the plain structs, and its header limits.
set(sonopipe_test_links_wire sonopipe_daemon)
