#include "shm/consumer.h"

#include <algorithm>

#include "shm/signal.h"

namespace sonopipe::shm {
std::uint64_t ConsumerCounters::refused_total() const {
  std::uint64_t total = 0;
  for (const std::uint64_t count : refused) total += count;
  return total;
}

Consumer::Consumer(std::shared_ptr<Pool> pool, Mode mode) : pool_(std::move(pool)) { attach(mode); }

Consumer::Consumer(std::string_view endpoint, Mode mode) : pool_(Pool::open(endpoint)) { attach(mode); }

void Consumer::attach(Mode mode) {
  Pool::Lock lock(*pool_);
  PoolHeader& h = pool_->header();
  mode_ = h.mode == Mode::live ? Mode::live : mode;  // nobody holds a live pool's producers back
  pool_->reclaim_dead_locked();  // a dead predecessor's marks go before this one's are set
  for (int pass = 0; pass < 2; ++pass) {
    for (std::uint32_t c = 0; c < kMaxConsumers; ++c) {
      ConsumerRecord& record = h.consumers[c];
      if (record.active) continue;
      record = ConsumerRecord{};
      record.active = 1;
      record.mode = mode_;
      record.process = this_process();
      record.cursor = h.next_sequence;
      record_ = c;
      // A lossless consumer takes over the lossless messages nobody took (e.g. a daemon that died).
      if (h.mode == Mode::lossless && mode_ == Mode::lossless)
        for (std::uint32_t i = 0; i < pool_->geometry().slot_count; ++i) {
          SlotRecord& s = pool_->slot(i);
          if (s.state == kSlotReady && !s.taken) s.pending |= 1u << c;
        }
      return;
    }
    pool_->reclaim_dead_locked();
  }
  throw ShmError(pool_->endpoint() + ": " + std::to_string(kMaxConsumers) + " consumers attached already");
}

Consumer::~Consumer() {
  {
    Pool::Lock lock(*pool_);
    PoolHeader& h = pool_->header();
    const std::uint32_t bit = 1u << record_;
    for (std::uint32_t i = 0; i < pool_->geometry().slot_count; ++i) {
      SlotRecord& s = pool_->slot(i);
      s.held &= ~bit;
      if (s.pending & bit) {
        s.pending &= ~bit;
        if (s.pending == 0) pool_->settle_locked(i);
      }
      pool_->free_if_done_locked(i);
    }
    h.consumers[record_].active = 0;
  }
  pool_->wake_producers();
}

std::optional<Message> Consumer::take(std::chrono::steady_clock::time_point deadline) {
  PoolHeader& h = pool_->header();
  const PoolGeometry& g = pool_->geometry();
  const std::uint32_t bit = 1u << record_;
  const bool observer = h.mode == Mode::lossless && mode_ == Mode::live;
  while (true) {
    const std::uint32_t seen = h.committed_word.load(std::memory_order_acquire);
    std::optional<Message> message;
    bool wake = false;
    {
      Pool::Lock lock(*pool_);
      ConsumerRecord& me = h.consumers[record_];
      while (!message) {
        std::optional<std::uint32_t> chosen;
        std::uint64_t lowest = UINT64_MAX;
        for (std::uint32_t i = 0; i < g.slot_count; ++i) {
          const SlotRecord& s = pool_->slot(i);
          if (s.state != kSlotReady || (s.held & bit)) continue;
          const bool candidate = (s.pending & bit) || (observer && s.sequence > me.cursor);
          if (candidate && s.sequence < lowest) {
            lowest = s.sequence;
            chosen = i;
          }
        }
        if (!chosen) break;
        SlotRecord& s = pool_->slot(*chosen);
        if (observer && me.cursor > 0 && s.sequence > me.cursor + 1) me.missed += s.sequence - me.cursor - 1;
        me.cursor = s.sequence;
        if (s.pending & bit) {
          s.pending &= ~bit;
          s.taken = 1;
          if (s.pending == 0) {
            pool_->settle_locked(*chosen);
            wake = true;
          }
        }
        // The descriptor is copied once, then checked and used: a peer changing it later is harmless.
        const SlotDescriptor descriptor = s.descriptor;
        const DescriptorError error = check_descriptor(descriptor, g.slot_bytes, g.header_capacity);
        if (error != DescriptorError::none) {
          ++refused_[static_cast<std::size_t>(error)];
          refused_total_.fetch_add(1, std::memory_order_relaxed);
          wake |= pool_->free_if_done_locked(*chosen);
          continue;
        }
        s.held |= bit;
        ++me.taken;
        const std::byte* base = pool_->slot_data(*chosen);
        message = Message{*chosen, s.sequence, s.writer.pid, base + descriptor.header_offset, descriptor.header_bytes,
                          base + descriptor.payload_offset, descriptor.payload_bytes};
      }
    }
    if (wake) pool_->wake_producers();
    if (message) return message;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return std::nullopt;
    h.committed_waiters.fetch_add(1);
    futex_wait(h.committed_word, seen, std::min<std::chrono::nanoseconds>(deadline - now, kWaitSlice));
    h.committed_waiters.fetch_sub(1);
  }
}

void Consumer::release(std::uint32_t slot) {
  if (slot >= pool_->geometry().slot_count) return;
  bool freed = false;
  {
    Pool::Lock lock(*pool_);
    pool_->slot(slot).held &= ~(1u << record_);
    freed = pool_->free_if_done_locked(slot);
  }
  if (freed) pool_->wake_producers();
}

ConsumerCounters Consumer::counters() const {
  Pool::Lock lock(*pool_);
  const ConsumerRecord& me = pool_->header().consumers[record_];
  ConsumerCounters counters;
  counters.taken = me.taken;
  counters.missed = me.missed;
  counters.refused = refused_;
  return counters;
}

}  // namespace sonopipe::shm
