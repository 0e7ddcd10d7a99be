#include "daemon/reject_log.h"

#include <spdlog/spdlog.h>

#include "wire/log_text.h"

namespace sonopipe {

void RejectLog::reject(wire::RejectReason reason, const std::string& detail) {
  const auto index = static_cast<std::size_t>(reason);
  counts_[index].fetch_add(1, std::memory_order_relaxed);
  std::lock_guard lock(log_mutex_);
  if (!lines_[index].allow(LineLimiter::Clock::now())) return;
  if (const std::uint64_t held_back = lines_[index].take_held_back(); held_back > 0)
    spdlog::warn("rejected frame ({}): {} (and {} more since the last line)", wire::reject_reason_name(reason),
                 log_safe(detail), held_back);
  else
    spdlog::warn("rejected frame ({}): {}", wire::reject_reason_name(reason), log_safe(detail));
}

std::uint64_t RejectLog::count(wire::RejectReason reason) const {
  return counts_[static_cast<std::size_t>(reason)].load(std::memory_order_relaxed);
}

std::uint64_t RejectLog::total() const {
  std::uint64_t sum = 0;
  for (const auto& c : counts_) sum += c.load(std::memory_order_relaxed);
  return sum;
}

std::map<std::string, std::uint64_t> RejectLog::by_reason() const {
  std::map<std::string, std::uint64_t> result;
  for (std::size_t i = 0; i < kReasons; ++i)
    if (std::uint64_t c = counts_[i].load(std::memory_order_relaxed))
      result[std::string(wire::reject_reason_name(static_cast<wire::RejectReason>(i)))] = c;
  return result;
}

}  // namespace sonopipe
