#include "runtime/sample_window.h"

#include <algorithm>
#include <cmath>

namespace sonopipe {

SampleWindow::SampleWindow(std::size_t capacity) : ring_(capacity > 0 ? capacity : 1) {}

void SampleWindow::add(double value) {
  std::lock_guard lock(mutex_);
  ring_[added_ % ring_.size()] = value;
  ++added_;
}

Percentiles SampleWindow::percentiles() const {
  std::vector<double> values;
  Percentiles result;
  {
    std::lock_guard lock(mutex_);
    result.count = added_;
    std::size_t held = static_cast<std::size_t>(std::min<std::uint64_t>(added_, ring_.size()));
    values.assign(ring_.begin(), ring_.begin() + static_cast<std::ptrdiff_t>(held));
  }
  if (values.empty()) return result;
  // Nearest rank: the smallest value with at least p of the samples at or below it.
  auto rank = [&](double p) {
    std::size_t index = static_cast<std::size_t>(std::ceil(p * static_cast<double>(values.size())));
    index = std::clamp<std::size_t>(index, 1, values.size()) - 1;
    std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(index), values.end());
    return values[index];
  };
  result.p50 = rank(0.50);
  result.p99 = rank(0.99);
  return result;
}

}  // namespace sonopipe
