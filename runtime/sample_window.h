// Percentiles over the most recent samples of a timing (ms). add() is cheap and never allocates;
// percentiles() copies the window and is meant for status requests, not the hot path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace sonopipe {

struct Percentiles {
  double p50 = 0.0;
  double p99 = 0.0;
  std::uint64_t count = 0;  // samples ever added (the window holds the last `capacity`)
};

class SampleWindow {
 public:
  explicit SampleWindow(std::size_t capacity = 4096);
  SampleWindow(const SampleWindow&) = delete;
  SampleWindow& operator=(const SampleWindow&) = delete;

  void add(double value);
  Percentiles percentiles() const;  // nearest-rank over the window; zeros when empty

 private:
  std::vector<double> ring_;
  std::uint64_t added_ = 0;
  mutable std::mutex mutex_;
};

}  // namespace sonopipe
