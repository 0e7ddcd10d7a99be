// When each frame of a replay is due. The contract (docs/tools.md, sonopipe-replay):
// - original (default): frame i is due (t_i - t_0) / speed after the start, t = acquisition_time_ns
//   of the recording in acquisition-time order over all streams;
// - fixed rate: frame i is due i / rate_hz after the start, recorded times ignored;
// - max: every frame is due at once (as fast as the socket takes them).
// Loop k starts k loop periods after the start; a loop period is the recorded span plus one mean
// frame interval (so the gap from the last frame to the first of the next loop is a typical one).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sonopipe::replay {

enum class TimingMode { original, fixed_rate, max };

struct Timing {
  TimingMode mode = TimingMode::original;
  double speed = 1.0;    // original mode: 2 = twice as fast as recorded
  double rate_hz = 0.0;  // fixed_rate mode
};

class Schedule {
 public:
  // times_ns: acquisition times in replay order (non-decreasing). Throws std::invalid_argument
  // for a non-positive speed or rate.
  Schedule(const std::vector<std::int64_t>& times_ns, const Timing& timing);

  std::size_t frame_count() const { return times_ns_.size(); }
  // Replay time after the start at which frame `index` of loop `loop` is due.
  std::int64_t due_ns(std::size_t loop, std::size_t index) const;
  std::int64_t loop_period_ns() const { return loop_period_ns_; }          // in replay time
  std::int64_t recorded_period_ns() const { return recorded_period_ns_; }  // in acquisition time
  std::int64_t recorded_span_ns() const;
  bool timed() const { return timing_.mode != TimingMode::max; }
  const Timing& timing() const { return timing_; }

 private:
  std::vector<std::int64_t> times_ns_;
  Timing timing_;
  std::int64_t recorded_period_ns_ = 0;
  std::int64_t loop_period_ns_ = 0;
};

}  // namespace sonopipe::replay
