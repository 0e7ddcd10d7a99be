// Per-stream state of a pipeline's stateful stages (Stage::keeps_state()): each stream id gets its
// own state buffers, so interleaved streams keep separate histories. At most `capacity` streams
// are live; a new stream beyond that takes over the least recently used one's buffers (evicted,
// counted: its next frame starts afresh). Buffers are sized by configure() for one input
// description; a new description forgets every stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

#include "runtime/gpu_resources.h"

namespace sonopipe {

class StreamStates {
 public:
  struct Entry {
    std::uint32_t stream_id = 0;
    std::vector<Buffer> buffers;        // [stage]; empty buffers for stages without state
    std::vector<std::uint64_t> frames;  // [stage] frames run on this state so far
  };

  explicit StreamStates(std::size_t capacity);

  // Forgets every stream; new entries get `bytes[stage]` of `kind` memory, zeroed.
  // `pool`: where device and pinned state buffers come from (null: allocated directly).
  void configure(std::vector<std::size_t> bytes, MemoryKind kind, std::shared_ptr<MemoryPool> pool = nullptr);
  // True when acquire(stream_id) would evict another stream (the caller may need to wait until no
  // work still reads the evicted buffers).
  bool would_evict(std::uint32_t stream_id) const;
  // The state of `stream_id`, made most recently used; created zeroed when new. `evicted` is set
  // when another stream was forgotten to make room.
  // A new stream's buffers are zeroed on `stream` (device memory; null: the CPU), before the work the
  // caller issues there next.
  Entry& acquire(std::uint32_t stream_id, bool& evicted, GpuStream stream = nullptr);

  std::size_t live() const { return index_.size(); }
  const std::vector<std::size_t>& bytes() const { return bytes_; }  // per stage, as configured
  std::size_t capacity() const { return capacity_; }
  std::uint64_t evictions() const { return evictions_; }
  bool empty_state() const;  // true when no stage keeps state (acquire is then not needed)

 private:
  const std::size_t capacity_;
  std::vector<std::size_t> bytes_;
  MemoryKind kind_ = MemoryKind::host;
  std::shared_ptr<MemoryPool> pool_;
  std::list<Entry> entries_;  // most recently used first
  std::unordered_map<std::uint32_t, std::list<Entry>::iterator> index_;
  std::uint64_t evictions_ = 0;
};

}  // namespace sonopipe
