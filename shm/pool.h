// One mapped pool: creating it (the daemon) or opening it (producers, subscribers), its lock, and
// taking back what dead processes held. Producer and consumer (shm/producer.h, shm/consumer.h)
// work through it; nothing here knows what a message means.
//
// Lifetime: the creator makes /dev/shm/sonopipe.<name> with the given permissions (0600 by
// default: only its user may open it, as strict as the daemon's ipc:// files). When a creator
// finds an object of that name left by a dead creator with the same geometry, it adopts it:
// messages still waiting in it are delivered, producers and subscribers attached keep going. A
// clean close unlinks the object when no message waits for delivery. An object owned by another
// user, or readable by others than the permissions allow, is refused. Every mapping is populated
// when it is made (MAP_POPULATE): no page faults on the per-frame path.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "shm/layout.h"

namespace sonopipe::shm {

// Every failure to create, open or use a pool, with a one-line message that names the fix.
struct ShmError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct PoolOptions {
  std::uint32_t slot_count = 8;
  std::uint64_t header_capacity = 64 * 1024;  // bytes for one message header (rounded to pages)
  std::uint64_t payload_capacity = 0;         // bytes for one payload (rounded to pages)
  Mode mode = Mode::lossless;
  mode_t permissions = 0600;                  // of the /dev/shm object; 0660 lets a group in
  // Lossless: a message no lossless consumer took waits for the next one (PoolHeader::hold_unclaimed).
  bool hold_unclaimed = true;
};

class Pool {
 public:
  static std::unique_ptr<Pool> create(std::string_view endpoint, const PoolOptions& options);
  // Opens a pool by name. One its creator is still making (size or header not yet written) is
  // waited for up to `ready_wait`; one that does not exist is refused at once.
  static std::unique_ptr<Pool> open(std::string_view endpoint,
                                    std::chrono::milliseconds ready_wait = std::chrono::milliseconds(2000));
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  const std::string& endpoint() const { return endpoint_; }
  PoolHeader& header() const { return *header_; }
  const PoolGeometry& geometry() const { return geometry_; }
  SlotRecord& slot(std::size_t index) const { return slots_[index]; }
  std::byte* slot_data(std::size_t index) const { return data_ + index * geometry_.slot_bytes; }
  // The whole mapping (what a CUDA host registration covers).
  void* mapping() const { return base_; }
  std::size_t mapping_bytes() const { return geometry_.total_bytes; }
  bool creator() const { return creator_; }
  // The object was unlinked (its creator closed or replaced it): open the endpoint again.
  bool removed() const;

  // The pool's mutex, held for its scope. A holder that died is repaired after (reclaim_dead).
  class Lock {
   public:
    explicit Lock(Pool& pool);
    ~Lock();
    Lock(const Lock&) = delete;
    Lock& operator=(const Lock&) = delete;

   private:
    Pool& pool_;
  };

  // Under the lock: records of dead processes are freed, slots a dead producer was writing come
  // free, a dead consumer's held and pending marks are dropped (lossless messages nobody took
  // wait for the next lossless consumer). Returns how many slots came free.
  std::size_t reclaim_dead_locked();
  // Under the lock: a ready slot nobody needs any more becomes free (returns whether it did).
  bool free_if_done_locked(std::size_t index);
  // Under the lock, when a slot's pending mask became empty: a message some consumer took counts
  // as delivered for its producer (once).
  void settle_locked(std::size_t index);
  // Bumps the futex words (after the lock is released).
  void wake_consumers();
  void wake_producers();

 private:
  Pool(std::string endpoint, int fd, void* base, bool creator);
  static std::unique_ptr<Pool> map(std::string_view endpoint, int fd, bool creator);
  void drop_consumer_locked(std::size_t consumer);

  std::string endpoint_, object_;
  int fd_ = -1;
  void* base_ = nullptr;
  PoolHeader* header_ = nullptr;
  SlotRecord* slots_ = nullptr;
  std::byte* data_ = nullptr;
  PoolGeometry geometry_;
  bool creator_ = false;
};

// How long waits sleep between checks for dead peers and removed pools.
inline constexpr std::chrono::milliseconds kWaitSlice{50};

}  // namespace sonopipe::shm
