// Counters of refused ingest frames by reason, with one log line per reason at most every
// second ("... (and 41 more since the last line)"), so a flood of bad frames neither goes
// unexplained nor drowns the log.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "wire/line_limiter.h"
#include "wire/wire.h"

namespace sonopipe {

class RejectLog {
 public:
  static constexpr std::size_t kReasons = static_cast<std::size_t>(wire::RejectReason::stage_error) + 1;

  // Counts one refused frame and logs `detail` unless this reason logged within the last second.
  void reject(wire::RejectReason reason, const std::string& detail);
  std::uint64_t count(wire::RejectReason reason) const;
  std::uint64_t total() const;
  std::map<std::string, std::uint64_t> by_reason() const;  // reasons with a non-zero count

 private:
  std::array<std::atomic<std::uint64_t>, kReasons> counts_{};
  std::array<LineLimiter, kReasons> lines_;  // guarded by log_mutex_
  std::mutex log_mutex_;
};

}  // namespace sonopipe
