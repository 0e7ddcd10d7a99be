#include "runtime/placement.h"

#include <algorithm>
#include <stdexcept>

namespace sonopipe {

Placement::Placement(std::size_t lanes, bool stream_affinity, std::size_t max_streams)
    : stream_affinity_(stream_affinity), max_streams_(max_streams), streams_per_lane_(lanes, 0) {
  if (lanes == 0) throw std::invalid_argument("placement needs at least one device");
  if (max_streams == 0) throw std::invalid_argument("placement needs room for at least one stream");
}

std::size_t Placement::lane_for(std::uint32_t stream_id, bool* placed_new_stream) {
  if (placed_new_stream) *placed_new_stream = false;
  if (!stream_affinity_) {
    const std::size_t lane = next_lane_;
    next_lane_ = (next_lane_ + 1) % streams_per_lane_.size();
    return lane;
  }
  if (auto it = affinity_.find(stream_id); it != affinity_.end()) {
    recent_.splice(recent_.begin(), recent_, it->second.recency);
    return it->second.lane;
  }
  if (affinity_.size() == max_streams_) {
    const std::uint32_t oldest = recent_.back();
    --streams_per_lane_[affinity_.at(oldest).lane];
    affinity_.erase(oldest);
    recent_.pop_back();
    ++forgotten_;
  }
  const std::size_t lane = static_cast<std::size_t>(
      std::min_element(streams_per_lane_.begin(), streams_per_lane_.end()) - streams_per_lane_.begin());
  recent_.push_front(stream_id);
  affinity_.emplace(stream_id, Entry{lane, recent_.begin()});
  ++streams_per_lane_[lane];
  if (placed_new_stream) *placed_new_stream = true;
  return lane;
}

}  // namespace sonopipe
