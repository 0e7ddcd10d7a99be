#include "shm/producer.h"

#include <algorithm>
#include <stdexcept>

#include "shm/signal.h"

namespace sonopipe::shm {
Producer::Producer(std::string_view endpoint) : pool_(Pool::open(endpoint)), self_(this_process()) {
  Pool::Lock lock(*pool_);
  PoolHeader& h = pool_->header();
  pool_->reclaim_dead_locked();
  for (int pass = 0; pass < 2; ++pass) {
    for (std::uint32_t p = 0; p < kMaxProducers; ++p) {
      ProducerRecord& record = h.producers[p];
      if (record.active) continue;
      record.active = 1;
      record.generation += 1;
      record.process = self_;
      record.committed = record.delivered = record.overwritten = 0;
      record_ = p;
      generation_ = record.generation;
      return;
    }
    pool_->reclaim_dead_locked();
  }
  throw ShmError(std::string(endpoint) + ": " + std::to_string(kMaxProducers) +
                 " producers attached already; close one first");
}

Producer::~Producer() {
  std::uint32_t freed = 0;
  {
    Pool::Lock lock(*pool_);
    for (std::uint32_t i = 0; i < pool_->geometry().slot_count; ++i) {
      SlotRecord& s = pool_->slot(i);
      if (s.producer != record_ || s.producer_generation != generation_) continue;
      if (s.state == kSlotWriting) {
        s.state = kSlotFree;
        ++freed;
      } else if (s.producer_held) {
        s.producer_held = 0;
        freed += pool_->free_if_done_locked(i) ? 1 : 0;
      }
    }
    pool_->header().producers[record_].active = 0;
  }
  if (freed > 0) pool_->wake_producers();
}

std::optional<std::uint32_t> Producer::take_free_locked() {
  PoolHeader& h = pool_->header();
  const std::uint32_t count = pool_->geometry().slot_count;
  std::optional<std::uint32_t> chosen;
  for (std::uint32_t i = 0; i < count && !chosen; ++i)
    if (pool_->slot(i).state == kSlotFree) chosen = i;
  if (!chosen && h.mode == Mode::live) {
    // Newest wins: take back the oldest message nobody is reading.
    std::uint64_t oldest = UINT64_MAX;
    for (std::uint32_t i = 0; i < count; ++i) {
      const SlotRecord& s = pool_->slot(i);
      if (s.state == kSlotReady && s.held == 0 && s.producer_held == 0 && s.sequence < oldest) {
        oldest = s.sequence;
        chosen = i;
      }
    }
    if (chosen) {
      SlotRecord& s = pool_->slot(*chosen);
      for (std::uint32_t c = 0; c < kMaxConsumers; ++c)
        if (s.pending & (1u << c)) ++h.consumers[c].missed;
      if (!s.acknowledged) {
        ProducerRecord& owner = h.producers[s.producer % kMaxProducers];
        if (owner.generation == s.producer_generation) ++owner.overwritten;
      }
    }
  }
  if (!chosen) return std::nullopt;
  SlotRecord& s = pool_->slot(*chosen);
  s.state = kSlotWriting;
  s.writer = self_;
  s.producer = record_;
  s.producer_generation = generation_;
  s.pending = s.held = 0;
  s.taken = s.acknowledged = 0;
  s.producer_held = 0;
  return chosen;
}

std::optional<Producer::Claim> Producer::claim(std::chrono::steady_clock::time_point deadline) {
  PoolHeader& h = pool_->header();
  bool reclaimed = false;
  // A pool its creator closed and removed takes no more messages (nobody would read them).
  if (__atomic_load_n(&h.creator_alive, __ATOMIC_ACQUIRE) == 0 && pool_->removed())
    throw ShmError(pool_->endpoint() + ": the pool was removed (its sonopiped stopped or was replaced); open it again");
  while (true) {
    const std::uint32_t seen = h.freed_word.load(std::memory_order_acquire);
    std::optional<std::uint32_t> slot;
    {
      Pool::Lock lock(*pool_);
      slot = take_free_locked();
      if (!slot && !reclaimed) {
        // Before sleeping once: slots held by processes that died come back.
        reclaimed = true;
        if (pool_->reclaim_dead_locked() > 0) slot = take_free_locked();
      }
    }
    if (slot) {
      const PoolGeometry& g = pool_->geometry();
      return Claim{*slot, {pool_->slot_data(*slot), g.header_capacity},
                   {pool_->slot_data(*slot) + g.header_capacity, g.payload_capacity}};
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return std::nullopt;
    if (pool_->removed())
      throw ShmError(pool_->endpoint() + ": the pool was removed (its sonopiped stopped or was replaced); open it again");
    h.freed_waiters.fetch_add(1);
    futex_wait(h.freed_word, seen, std::min<std::chrono::nanoseconds>(deadline - now, kWaitSlice));
    h.freed_waiters.fetch_sub(1);
    reclaimed = false;
  }
}

void Producer::commit(const Claim& claim, std::size_t header_bytes, std::size_t payload_bytes, bool hold) {
  const PoolGeometry& g = pool_->geometry();
  if (claim.slot >= g.slot_count) throw std::invalid_argument("shm commit: no such slot");
  if (header_bytes == 0 || header_bytes > g.header_capacity || payload_bytes > g.payload_capacity)
    throw std::invalid_argument("shm commit: " + std::to_string(header_bytes) + " header / " +
                                std::to_string(payload_bytes) + " payload bytes exceed the slot (" +
                                std::to_string(g.header_capacity) + " / " + std::to_string(g.payload_capacity) + ")");
  bool freed = false;
  {
    Pool::Lock lock(*pool_);
    PoolHeader& h = pool_->header();
    SlotRecord& s = pool_->slot(claim.slot);
    if (s.state != kSlotWriting || s.producer != record_ || s.producer_generation != generation_)
      throw ShmError(pool_->endpoint() + ": slot " + std::to_string(claim.slot) + " is no longer ours");
    s.descriptor = SlotDescriptor{0, header_bytes, g.header_capacity, payload_bytes};
    s.sequence = ++h.next_sequence;
    // Lossless pools wait for lossless consumers; live pools for every consumer attached now.
    std::uint32_t pending = 0;
    for (std::uint32_t c = 0; c < kMaxConsumers; ++c)
      if (h.consumers[c].active && (h.mode == Mode::live || h.consumers[c].mode == Mode::lossless))
        pending |= 1u << c;
    s.pending = pending;
    s.producer_held = hold ? 1 : 0;
    s.state = kSlotReady;
    ++h.producers[record_].committed;
    // A lossless pool that keeps no unclaimed messages: with no lossless consumer attached the
    // message is done once its producer lets go (free now when it holds none).
    if (h.mode == Mode::lossless && !h.hold_unclaimed && pending == 0) freed = pool_->free_if_done_locked(claim.slot);
  }
  pool_->wake_consumers();
  if (freed) pool_->wake_producers();
}

void Producer::release_hold(std::uint32_t slot) {
  if (slot >= pool_->geometry().slot_count) return;
  bool freed = false;
  {
    Pool::Lock lock(*pool_);
    SlotRecord& s = pool_->slot(slot);
    if (s.state != kSlotReady || s.producer != record_ || s.producer_generation != generation_) return;
    s.producer_held = 0;
    freed = pool_->free_if_done_locked(slot);
  }
  if (freed) pool_->wake_producers();
}

void Producer::abandon(const Claim& claim) {
  {
    if (claim.slot >= pool_->geometry().slot_count) return;
    Pool::Lock lock(*pool_);
    SlotRecord& s = pool_->slot(claim.slot);
    if (s.state != kSlotWriting || s.producer != record_ ||
        s.producer_generation != generation_)
      return;
    s.state = kSlotFree;
  }
  pool_->wake_producers();
}

ProducerCounters Producer::counters() const {
  Pool::Lock lock(*pool_);
  const ProducerRecord& r = pool_->header().producers[record_];
  return {r.committed, r.delivered, r.overwritten};
}

bool Producer::wait_delivered(std::chrono::steady_clock::time_point deadline) {
  PoolHeader& h = pool_->header();
  while (true) {
    const std::uint32_t seen = h.freed_word.load(std::memory_order_acquire);
    if (counters().undelivered() == 0) return true;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline || pool_->removed()) return false;
    h.freed_waiters.fetch_add(1);
    futex_wait(h.freed_word, seen, std::min<std::chrono::nanoseconds>(deadline - now, kWaitSlice));
    h.freed_waiters.fetch_sub(1);
  }
}

}  // namespace sonopipe::shm
