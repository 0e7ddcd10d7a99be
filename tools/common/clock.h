// Clocks of the tools: the wall clock that daemon timings use (ns since the Unix epoch, so a
// result's timing fields and a tool's receive time compare on one host) and a monotonic clock for
// schedules and durations.
#pragma once

#include <chrono>
#include <cstdint>

#include "wire/wall_clock.h"

namespace sonopipe::tools {

using SteadyClock = std::chrono::steady_clock;

using sonopipe::wall_clock_ns;  // wire/wall_clock.h

inline double seconds_since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

}  // namespace sonopipe::tools
