// The writing side of a pool: claim a free slot, write the message into it in place, commit it.
//
// Lossless pools: claim() waits while every slot is in use (back-pressure) up to its deadline.
// Live pools: claim() never waits for consumers: with no free slot it takes back the oldest
// message no one is reading (counted as overwritten for the producer and as missed for the
// consumers that had not taken it). A committed message is delivered once every lossless consumer
// that was attached at commit (or, if none was, the next one to attach) has taken it; counters()
// tells the producer how many of its messages were delivered: the acknowledgement.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "shm/pool.h"

namespace sonopipe::shm {

struct ProducerCounters {
  std::uint64_t committed = 0, delivered = 0, overwritten = 0;
  // Committed but neither delivered nor overwritten (yet): in the pool, or in a daemon that died.
  std::uint64_t undelivered() const { return committed - delivered - overwritten; }
};

class Producer {
 public:
  // A slot being written: header and payload areas in shared memory.
  struct Claim {
    std::uint32_t slot = 0;
    std::span<std::byte> header;   // pool's header capacity
    std::span<std::byte> payload;  // pool's payload capacity, page aligned
  };

  // Opens the pool at `endpoint` and registers this process as a producer (ShmError if it cannot).
  explicit Producer(std::string_view endpoint);
  ~Producer();  // abandons an open claim, unregisters
  Producer(const Producer&) = delete;
  Producer& operator=(const Producer&) = delete;

  // A free slot, or nullopt at the deadline (lossless pools with every slot in use). Throws
  // ShmError when the pool was removed (its daemon was replaced: open a new Producer).
  std::optional<Claim> claim(std::chrono::steady_clock::time_point deadline);
  // Publishes the claimed slot's first `header_bytes` and `payload_bytes` (throws
  // std::invalid_argument when they exceed the capacities; the claim stays open). With `hold` the
  // producer keeps reading the message after the commit: the slot is neither freed nor overwritten
  // until release_hold(claim.slot).
  void commit(const Claim& claim, std::size_t header_bytes, std::size_t payload_bytes, bool hold = false);
  void release_hold(std::uint32_t slot);
  // Gives an uncommitted slot back.
  void abandon(const Claim& claim);

  ProducerCounters counters() const;
  // Waits until every committed message is delivered or overwritten, or the deadline passes;
  // returns whether it was.
  bool wait_delivered(std::chrono::steady_clock::time_point deadline);
  const Pool& pool() const { return *pool_; }
  Mode mode() const { return pool_->header().mode; }

 private:
  std::optional<std::uint32_t> take_free_locked();
  std::unique_ptr<Pool> pool_;
  std::uint32_t record_ = 0, generation_ = 0;
  ProcessId self_;
};

}  // namespace sonopipe::shm
