#include "tools/replay/replay_schedule.h"

#include <cmath>
#include <stdexcept>

namespace sonopipe::replay {

Schedule::Schedule(const std::vector<std::int64_t>& times_ns, const Timing& timing)
    : times_ns_(times_ns), timing_(timing) {
  if (timing.mode == TimingMode::original && !(timing.speed > 0 && std::isfinite(timing.speed)))
    throw std::invalid_argument("speed must be a positive number, got " + std::to_string(timing.speed));
  if (timing.mode == TimingMode::fixed_rate && !(timing.rate_hz > 0 && std::isfinite(timing.rate_hz)))
    throw std::invalid_argument("rate must be a positive number of frames per second, got " +
                                std::to_string(timing.rate_hz));
  for (std::size_t i = 1; i < times_ns_.size(); ++i)
    if (times_ns_[i] < times_ns_[i - 1]) throw std::invalid_argument("acquisition times must be in replay order");
  const std::size_t n = times_ns_.size();
  const std::int64_t span = recorded_span_ns();
  // One loop in acquisition time: the span plus one mean interval.
  if (n > 1 && span > 0) recorded_period_ns_ = span + span / static_cast<std::int64_t>(n - 1);
  switch (timing.mode) {
    case TimingMode::original:
      loop_period_ns_ = std::llround(static_cast<double>(recorded_period_ns_) / timing.speed);
      break;
    case TimingMode::fixed_rate:
      loop_period_ns_ = std::llround(static_cast<double>(n) * 1e9 / timing.rate_hz);
      if (recorded_period_ns_ == 0) recorded_period_ns_ = loop_period_ns_;
      break;
    case TimingMode::max:
      loop_period_ns_ = 0;
      break;
  }
}

std::int64_t Schedule::recorded_span_ns() const {
  return times_ns_.empty() ? 0 : times_ns_.back() - times_ns_.front();
}

std::int64_t Schedule::due_ns(std::size_t loop, std::size_t index) const {
  const std::int64_t loop_start = static_cast<std::int64_t>(loop) * loop_period_ns_;
  switch (timing_.mode) {
    case TimingMode::original:
      return loop_start + std::llround(static_cast<double>(times_ns_[index] - times_ns_.front()) / timing_.speed);
    case TimingMode::fixed_rate:
      return loop_start + std::llround(static_cast<double>(index) * 1e9 / timing_.rate_hz);
    case TimingMode::max:
      return 0;
  }
  return 0;
}

}  // namespace sonopipe::replay
