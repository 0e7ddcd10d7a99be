#include "runtime/stream_states.h"

#include <stdexcept>

namespace sonopipe {

StreamStates::StreamStates(std::size_t capacity) : capacity_(capacity) {
  if (capacity_ == 0) throw std::invalid_argument("at least one live stream is needed");
}

void StreamStates::configure(std::vector<std::size_t> bytes, MemoryKind kind, std::shared_ptr<MemoryPool> pool) {
  entries_.clear();
  index_.clear();
  bytes_ = std::move(bytes);
  kind_ = kind;
  pool_ = std::move(pool);
}

bool StreamStates::empty_state() const {
  for (std::size_t bytes : bytes_)
    if (bytes > 0) return false;
  return true;
}

bool StreamStates::would_evict(std::uint32_t stream_id) const {
  return !index_.contains(stream_id) && index_.size() >= capacity_;
}

StreamStates::Entry& StreamStates::acquire(std::uint32_t stream_id, bool& evicted, GpuStream stream) {
  evicted = false;
  if (auto found = index_.find(stream_id); found != index_.end()) {
    entries_.splice(entries_.begin(), entries_, found->second);
    return entries_.front();
  }
  if (index_.size() >= capacity_) {
    // Reuse the least recently used stream's buffers: no allocation once `capacity` streams exist.
    auto last = std::prev(entries_.end());
    index_.erase(last->stream_id);
    entries_.splice(entries_.begin(), entries_, last);
    ++evictions_;
    evicted = true;
  } else {
    Entry fresh;  // built aside: a failed allocation leaves the table as it was
    fresh.buffers.resize(bytes_.size());
    for (std::size_t i = 0; i < bytes_.size(); ++i)
      if (bytes_[i] > 0) fresh.buffers[i].reserve(kind_, bytes_[i], pool_);
    entries_.push_front(std::move(fresh));
  }
  Entry& entry = entries_.front();
  entry.stream_id = stream_id;
  entry.frames.assign(bytes_.size(), 0);
  for (std::size_t i = 0; i < bytes_.size(); ++i)
    if (bytes_[i] > 0) zero_buffer(entry.buffers[i], bytes_[i], stream);  // a new stream starts its history afresh
  index_.emplace(stream_id, entries_.begin());
  return entry;
}

}  // namespace sonopipe
