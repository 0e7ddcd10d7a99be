// Timeouts of the C API (milliseconds, negative = wait forever) as steady-clock deadlines.
#pragma once

#include <chrono>

namespace sonopipe::client {

inline std::chrono::steady_clock::time_point deadline_after(int timeout_ms) {
  if (timeout_ms < 0) return std::chrono::steady_clock::time_point::max();
  return std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
}

}  // namespace sonopipe::client
