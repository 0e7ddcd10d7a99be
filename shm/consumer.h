// The reading side of a pool: take the next message, read it in place, release it.
//
// A lossless consumer gets every message committed while it is attached (and those no lossless
// consumer took before it came), in commit order; the producers wait for it. A live consumer never
// holds producers back: it takes the oldest message still in the pool that is newer than the last
// one it took, and counts what it missed. Every descriptor is checked before a message is handed
// out (shm/layout.h); a refused one is counted by reason and its slot released.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "shm/pool.h"

namespace sonopipe::shm {

struct Message {
  std::uint32_t slot = 0;
  std::uint64_t sequence = 0;        // commit order in the pool, from 1
  std::int32_t producer_pid = 0;
  const std::byte* header = nullptr;
  std::size_t header_bytes = 0;
  const std::byte* payload = nullptr;  // in the shared mapping, 64-byte aligned
  std::size_t payload_bytes = 0;
};

struct ConsumerCounters {
  std::uint64_t taken = 0;
  std::uint64_t missed = 0;   // live: overwritten before this consumer took them
  std::array<std::uint64_t, kDescriptorErrorCount> refused{};  // by DescriptorError
  std::uint64_t refused_total() const;
};

class Consumer {
 public:
  // Attaches to `pool` (shared with other users in this process, e.g. the daemon that created it).
  Consumer(std::shared_ptr<Pool> pool, Mode mode);
  // Opens the pool at `endpoint` and attaches.
  Consumer(std::string_view endpoint, Mode mode);
  ~Consumer();  // releases what it holds and detaches
  Consumer(const Consumer&) = delete;
  Consumer& operator=(const Consumer&) = delete;

  // The next message, or nullopt at the deadline. The message stays valid (and its slot in use)
  // until release(message.slot). Thread-safe with release() and counters().
  std::optional<Message> take(std::chrono::steady_clock::time_point deadline);
  void release(std::uint32_t slot);
  ConsumerCounters counters() const;
  // Descriptors refused so far (no lock: for a reader that checks after each take()).
  std::uint64_t refused_total() const { return refused_total_.load(std::memory_order_relaxed); }
  Pool& pool() const { return *pool_; }

 private:
  void attach(Mode mode);
  std::shared_ptr<Pool> pool_;
  std::uint32_t record_ = 0;
  Mode mode_ = Mode::lossless;
  std::array<std::uint64_t, kDescriptorErrorCount> refused_{};  // under the pool lock
  std::atomic<std::uint64_t> refused_total_{0};
};

}  // namespace sonopipe::shm
