// At most one log line per second for one kind of event, counting the lines held back so the next
// line can say how many there were: a flood neither goes unexplained nor drowns the log.
#pragma once

#include <chrono>
#include <cstdint>
#include <utility>

namespace sonopipe {

class LineLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  // True when a line may be written now; otherwise counts one held-back line.
  bool allow(Clock::time_point now) {
    if (last_ != Clock::time_point{} && now - last_ < std::chrono::seconds(1)) {
      ++held_back_;
      return false;
    }
    last_ = now;
    return true;
  }

  // Lines held back since the last written one (and starts counting again).
  std::uint64_t take_held_back() { return std::exchange(held_back_, 0); }

 private:
  Clock::time_point last_{};
  std::uint64_t held_back_ = 0;
};

}  // namespace sonopipe
