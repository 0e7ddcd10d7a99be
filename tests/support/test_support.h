// Helpers shared by the tests: seeded random inputs (the seed is logged so a failure can be
// replayed with SONOPIPE_TEST_SEED), the [cuda] skip, paths to test data and built binaries.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <string>

namespace sonopipe::test {

// A fresh seed per call unless SONOPIPE_TEST_SEED is set; logged through Catch's INFO/WARN.
std::uint64_t fresh_seed();

// True when a CUDA device is usable; otherwise the caller skips (see SONOPIPE_REQUIRE_CUDA).
bool cuda_device_present();

std::string source_path(const std::string& relative);  // path under the repository root
std::string binary_path(const std::string& relative);  // path under the build tree

}  // namespace sonopipe::test

// First statement of every [cuda] test: without a device the test passes with a warning.
#define SONOPIPE_REQUIRE_CUDA()                                           \
  do {                                                                    \
    if (!::sonopipe::test::cuda_device_present()) {                       \
      WARN("skipped: no CUDA device (" << Catch::getResultCapture().getCurrentTestName() << ")"); \
      return;                                                             \
    }                                                                     \
  } while (0)
