// The wall clock of every timing field on the wire (FrameHeader/ResultHeader `*_ns`): nanoseconds
// since the Unix epoch, so a daemon's timings and a tool's or client's receive time compare on one
// host. Durations and schedules use std::chrono::steady_clock instead.
#pragma once

#include <chrono>
#include <cstdint>

namespace sonopipe {

inline std::int64_t wall_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace sonopipe
