// Clocks of the tools: the wall clock that daemon timings use (ns since the Unix epoch, so a
// result's timing fields and a tool's receive time compare on one host) and a monotonic clock for
// schedules and durations.
#pragma once

#include <chrono>
#include <cstdint>

namespace sonopipe::tools {

using SteadyClock = std::chrono::steady_clock;

inline std::int64_t wall_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

inline double seconds_since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

}  // namespace sonopipe::tools
