#include "runtime/host_timeline.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <fstream>

namespace sonopipe {

std::string_view host_point_name(HostPoint point) {
  static constexpr std::array<std::string_view, kHostPoints> names = {
      "received",      "admitted",  "popped",      "setup_ready",    "slot",     "staging_begin",
      "staging_end",   "issued",    "payload_released", "gpu_start", "gpu_h2d_end", "gpu_stages_end",
      "gpu_done",      "done_seen", "published",   "slot_free"};
  return names[static_cast<std::size_t>(point)];
}

std::int64_t host_steady_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

HostTimeline::HostTimeline(std::string path, std::size_t frames)
    : path_(std::move(path)), records_(std::make_unique<FrameTimes[]>(frames)), frames_(frames) {}

std::unique_ptr<HostTimeline> HostTimeline::from_environment() {
  const char* path = std::getenv("SONOPIPE_HOST_TIMELINE");
  if (!path || !*path) return nullptr;
  spdlog::warn("SONOPIPE_HOST_TIMELINE: each frame's host-path timeline is written to {} at the stop", path);
  return std::make_unique<HostTimeline>(path);
}

FrameTimes* HostTimeline::frame(std::uint64_t sequence) {
  FrameTimes& record = records_[sequence % frames_];
  if (record.sequence.load(std::memory_order_relaxed) != sequence ||
      record.at[0].load(std::memory_order_relaxed) != 0) {
    for (auto& at : record.at) at.store(0, std::memory_order_relaxed);
    record.sequence.store(sequence, std::memory_order_relaxed);
  }
  return &record;
}

const FrameTimes* HostTimeline::find(std::uint64_t sequence) const {
  const FrameTimes& record = records_[sequence % frames_];
  return record.sequence.load(std::memory_order_relaxed) == sequence ? &record : nullptr;
}

void HostTimeline::write() const {
  std::vector<const FrameTimes*> written;
  for (std::size_t i = 0; i < frames_; ++i)
    if (records_[i].at[0].load(std::memory_order_relaxed) != 0) written.push_back(&records_[i]);
  std::sort(written.begin(), written.end(), [](const FrameTimes* a, const FrameTimes* b) {
    return a->sequence.load(std::memory_order_relaxed) < b->sequence.load(std::memory_order_relaxed);
  });
  std::ofstream out(path_);
  out << "sequence";
  for (std::size_t p = 0; p < kHostPoints; ++p) out << ',' << host_point_name(static_cast<HostPoint>(p));
  out << '\n';
  for (const FrameTimes* record : written) {
    out << record->sequence.load(std::memory_order_relaxed);
    for (const auto& at : record->at) out << ',' << at.load(std::memory_order_relaxed);
    out << '\n';
  }
  if (!out) spdlog::error("SONOPIPE_HOST_TIMELINE: writing {} failed", path_);
}

}  // namespace sonopipe
