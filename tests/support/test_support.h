// Helpers shared by the tests: seeded random inputs (the seed is logged so a failure can be
// replayed with SONOPIPE_TEST_SEED), the [cuda] skip, paths to test data and built binaries.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <optional>
#include <random>
#include <string>

namespace sonopipe::test {

// A fresh seed per call unless SONOPIPE_TEST_SEED is set; logged through Catch's INFO/WARN.
std::uint64_t fresh_seed();

// True when a CUDA device is usable; otherwise the caller skips (see SONOPIPE_REQUIRE_CUDA).
bool cuda_device_present();

// Exit status of a test program that skipped everything it was asked to run (CTest's
// SKIP_RETURN_CODE of the <name>_cuda entries; the automake convention).
inline constexpr int kSkipReturnCode = 77;

std::string source_path(const std::string& relative);  // path under the repository root
std::string binary_path(const std::string& relative);  // path under the build tree

// Sets an environment variable (nullptr: unsets it) for one scope, then puts back what was there:
// for the switches a part reads from the environment when it is made.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const char* value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> before_;
};

}  // namespace sonopipe::test

// First statement of every [cuda] test. Under CTest a [cuda] case runs only in its program's
// <name>_cuda entry, which tests/support/main.cpp reports as skipped (exit 77) before any case runs
// when there is no device. Run by hand without a device (a program with no test spec), the case
// returns here with a warning.
#define SONOPIPE_REQUIRE_CUDA()                                           \
  do {                                                                    \
    if (!::sonopipe::test::cuda_device_present()) {                       \
      WARN("skipped: no CUDA device (" << Catch::getResultCapture().getCurrentTestName() << ")"); \
      return;                                                             \
    }                                                                     \
  } while (0)
