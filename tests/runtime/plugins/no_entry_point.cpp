// Test plugin: a shared library without sonopipe's entry points.
extern "C" __attribute__((visibility("default"))) int some_other_library_function() { return 42; }
