#include "tests/support/test_support.h"

#include <chrono>
#include <cstdlib>
#include <utility>

#include "runtime/gpu_device.h"

namespace sonopipe::test {

std::uint64_t fresh_seed() {
  if (const char* fixed = std::getenv("SONOPIPE_TEST_SEED")) return std::strtoull(fixed, nullptr, 10);
  static std::uint64_t counter = 0;
  auto now = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  std::uint64_t seed = now ^ (0x9E3779B97F4A7C15ull * ++counter);
  seed %= 1000000007ull;
  UNSCOPED_INFO("random seed " << seed << " (replay with SONOPIPE_TEST_SEED=" << seed << ")");
  return seed;
}

bool cuda_device_present() {
  static const bool present = probe_gpu(0).available;
  return present;
}

// The environment overrides the paths compiled in, so that test binaries copied to another
// machine (the GPU device) find the sources and the other binaries there.
std::string source_path(const std::string& relative) {
  const char* root = std::getenv("SONOPIPE_SOURCE_DIR");
  return std::string(root ? root : SONOPIPE_SOURCE_DIR) + "/" + relative;
}

std::string binary_path(const std::string& relative) {
  const char* root = std::getenv("SONOPIPE_BINARY_DIR");
  return std::string(root ? root : SONOPIPE_BINARY_DIR) + "/" + relative;
}

ScopedEnv::ScopedEnv(std::string name, const char* value) : name_(std::move(name)) {
  if (const char* before = std::getenv(name_.c_str())) before_ = before;
  if (value) ::setenv(name_.c_str(), value, 1);
  else ::unsetenv(name_.c_str());
}

ScopedEnv::~ScopedEnv() {
  if (before_) ::setenv(name_.c_str(), before_->c_str(), 1);
  else ::unsetenv(name_.c_str());
}

}  // namespace sonopipe::test
