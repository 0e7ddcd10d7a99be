// The translation unit that builds the test programs' shared precompiled header (tests/CMakeLists.txt,
// SONOPIPE_TEST_PCH); it defines nothing.
