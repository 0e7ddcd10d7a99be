#include "shm/pool.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>
#include <thread>

#include "shm/signal.h"

namespace sonopipe::shm {
namespace {

std::string system_error(const std::string& what) { return what + ": " + std::strerror(errno); }

bool same_geometry(const PoolGeometry& a, const PoolGeometry& b) {
  return a.slot_count == b.slot_count && a.header_capacity == b.header_capacity &&
         a.payload_capacity == b.payload_capacity && a.slot_bytes == b.slot_bytes &&
         a.slots_offset == b.slots_offset && a.data_offset == b.data_offset && a.total_bytes == b.total_bytes;
}

// An object whose creator has not finished it: too small yet, or its magic not yet written.
struct NotReady : ShmError {
  using ShmError::ShmError;
};

// Everything but the magic, which the creator writes last (publish_header).
void init_header(PoolHeader* header, const PoolGeometry& geometry, const PoolOptions& options) {
  new (header) PoolHeader{};
  header->version = kLayoutVersion;
  header->header_struct_bytes = sizeof(PoolHeader);
  header->geometry = geometry;
  header->mode = options.mode;
  header->hold_unclaimed = options.hold_unclaimed ? 1 : 0;
  pthread_mutexattr_t attributes;
  pthread_mutexattr_init(&attributes);
  pthread_mutexattr_setpshared(&attributes, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attributes, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&header->mutex, &attributes);
  pthread_mutexattr_destroy(&attributes);
}

// The last write of creation: an opener that reads the magic (acquire) sees the rest written.
void publish_header(PoolHeader* header) {
  std::atomic_ref<std::uint64_t>(header->magic).store(kMagic, std::memory_order_release);
}

// The header page's promises, checked before the rest is mapped.
void check_header(const PoolHeader& header, std::uint64_t object_bytes, const std::string& endpoint) {
  if (header.magic != kMagic || header.version != kLayoutVersion || header.header_struct_bytes != sizeof(PoolHeader))
    throw ShmError(endpoint + ": not a sonopipe pool of this version (layout " + std::to_string(header.version) +
                   "); stop what created it and start sonopiped again");
  const PoolGeometry& g = header.geometry;
  PoolGeometry expected;
  try {
    expected = make_geometry(g.slot_count, g.header_capacity, g.payload_capacity);
  } catch (const std::invalid_argument& e) {
    throw ShmError(endpoint + ": pool geometry refused (" + e.what() + ")");
  }
  if (!same_geometry(expected, g) || g.total_bytes > object_bytes)
    throw ShmError(endpoint + ": pool geometry inconsistent with its size; restart sonopiped to recreate it");
  if (header.mode != Mode::lossless && header.mode != Mode::live)
    throw ShmError(endpoint + ": pool mode unknown");
}

}  // namespace

Pool::Pool(std::string endpoint, int fd, void* base, bool creator)
    : endpoint_(std::move(endpoint)), object_(object_name(endpoint_)), fd_(fd), base_(base),
      header_(static_cast<PoolHeader*>(base)), creator_(creator) {
  geometry_ = header_->geometry;  // checked by map(); peers cannot change what we use
  slots_ = reinterpret_cast<SlotRecord*>(static_cast<std::byte*>(base) + geometry_.slots_offset);
  data_ = static_cast<std::byte*>(base) + geometry_.data_offset;
}

std::unique_ptr<Pool> Pool::map(std::string_view endpoint, int fd, bool creator) {
  struct stat info {};
  if (fstat(fd, &info) != 0) {
    const std::string message = system_error(std::string(endpoint) + ": fstat");
    close(fd);
    throw ShmError(message);
  }
  // Its creator sizes the object first and writes the magic last: either missing means "not yet".
  if (static_cast<std::uint64_t>(info.st_size) < sizeof(PoolHeader)) {
    close(fd);
    throw NotReady(std::string(endpoint) + ": pool object too small (" + std::to_string(info.st_size) +
                   " bytes); start sonopiped again to recreate it");
  }
  void* head = mmap(nullptr, sizeof(PoolHeader), PROT_READ, MAP_SHARED, fd, 0);
  if (head == MAP_FAILED) {
    const std::string message = system_error(std::string(endpoint) + ": mmap");
    close(fd);
    throw ShmError(message);
  }
  auto* shared_header = static_cast<PoolHeader*>(head);
  const std::uint64_t magic = std::atomic_ref<std::uint64_t>(shared_header->magic).load(std::memory_order_acquire);
  PoolHeader copy;
  std::memcpy(static_cast<void*>(&copy), head, sizeof(PoolHeader));
  munmap(head, sizeof(PoolHeader));
  if (magic == 0) {
    close(fd);
    throw NotReady(std::string(endpoint) + ": pool header never written (its creator stopped while making it); "
                   "start sonopiped again to recreate it");
  }
  try {
    check_header(copy, static_cast<std::uint64_t>(info.st_size), std::string(endpoint));
  } catch (...) {
    close(fd);
    throw;
  }
  void* base = mmap(nullptr, copy.geometry.total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (base == MAP_FAILED) {
    const std::string message = system_error(std::string(endpoint) + ": mmap");
    close(fd);
    throw ShmError(message);
  }
  std::unique_ptr<Pool> pool(new Pool(std::string(endpoint), fd, base, creator));
  // The geometry used is the one checked: a peer rewriting the header later changes nothing here.
  pool->geometry_ = copy.geometry;
  return pool;
}

std::unique_ptr<Pool> Pool::create(std::string_view endpoint, const PoolOptions& options) {
  const std::string object = object_name(endpoint);
  PoolGeometry geometry;
  try {
    geometry = make_geometry(options.slot_count, options.header_capacity, options.payload_capacity);
  } catch (const std::invalid_argument& e) {
    throw ShmError(std::string(endpoint) + ": " + e.what());
  }
  const mode_t permissions = options.permissions & 0660;  // never for others
  for (int attempt = 0; attempt < 2; ++attempt) {
    int fd = shm_open(object.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, permissions);
    if (fd >= 0) {
      if (fchmod(fd, permissions) != 0 || ftruncate(fd, static_cast<off_t>(geometry.total_bytes)) != 0) {
        const std::string message = system_error(std::string(endpoint) + ": sizing /dev/shm" + object);
        close(fd);
        shm_unlink(object.c_str());
        throw ShmError(message + " (is /dev/shm large enough? " + std::to_string(geometry.total_bytes) +
                       " bytes needed)");
      }
      void* base = mmap(nullptr, geometry.total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
      if (base == MAP_FAILED) {
        const std::string message = system_error(std::string(endpoint) + ": mmap");
        close(fd);
        shm_unlink(object.c_str());
        throw ShmError(message);
      }
      auto* header = static_cast<PoolHeader*>(base);
      init_header(header, geometry, options);
      auto* slots = reinterpret_cast<SlotRecord*>(static_cast<std::byte*>(base) + geometry.slots_offset);
      for (std::uint32_t i = 0; i < geometry.slot_count; ++i) new (&slots[i]) SlotRecord{};
      header->creator = this_process();
      header->creator_alive = 1;
      publish_header(header);  // openers waiting for it (Pool::open) go on from here
      return std::unique_ptr<Pool>(new Pool(std::string(endpoint), fd, base, true));
    }
    if (errno != EEXIST) throw ShmError(system_error(std::string(endpoint) + ": creating /dev/shm" + object));
    // One exists: ours to adopt or replace only when we own it and its creator is gone.
    fd = shm_open(object.c_str(), O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) {
      if (errno == ENOENT) continue;  // removed in between
      throw ShmError(system_error(std::string(endpoint) + ": /dev/shm" + object + " exists and cannot be opened") +
                     "; remove it or run as its owner");
    }
    struct stat info {};
    fstat(fd, &info);
    if (info.st_uid != geteuid()) {
      close(fd);
      throw ShmError(std::string(endpoint) + ": /dev/shm" + object + " belongs to uid " + std::to_string(info.st_uid) +
                     ", not to this user; remove it (rm /dev/shm" + object + ") or run as its owner");
    }
    std::unique_ptr<Pool> old;
    try {
      old = map(endpoint, fd, true);
    } catch (const ShmError&) {
      shm_unlink(object.c_str());  // ours and unreadable as a pool: replace it
      continue;
    }
    bool adopt = false;
    {
      Lock lock(*old);
      PoolHeader& h = old->header();
      if (h.creator_alive && process_alive(h.creator))
        throw ShmError(std::string(endpoint) + ": in use by sonopiped pid " + std::to_string(h.creator.pid) +
                       "; stop it or choose another shm:// name");
      old->reclaim_dead_locked();
      if (same_geometry(h.geometry, geometry) && h.mode == options.mode &&
          h.hold_unclaimed == (options.hold_unclaimed ? 1u : 0u)) {
        h.creator = this_process();
        h.creator_alive = 1;
        adopt = true;
      } else {
        std::size_t attached = 0;
        for (const ProducerRecord& p : h.producers) attached += p.active;
        for (const ConsumerRecord& c : h.consumers) attached += c.active;
        if (attached > 0)
          throw ShmError(std::string(endpoint) + ": left by a previous sonopiped with another geometry and still "
                         "used by " + std::to_string(attached) + " process(es); stop them or choose another name");
      }
    }
    if (adopt) {
      fchmod(old->fd_, permissions);
      old->creator_ = true;
      old->wake_producers();
      return old;
    }
    old->creator_ = false;  // its destructor must not unlink what we replace below
    old.reset();
    shm_unlink(object.c_str());
  }
  throw ShmError(std::string(endpoint) + ": /dev/shm" + object + " keeps reappearing; is another sonopiped starting?");
}

std::unique_ptr<Pool> Pool::open(std::string_view endpoint, std::chrono::milliseconds ready_wait) {
  const std::string object = object_name(endpoint);
  const auto deadline = std::chrono::steady_clock::now() + ready_wait;
  bool seen_unfinished = false;  // a creator was making it: it may replace the object (Pool::create)
  while (true) {
    const int fd = shm_open(object.c_str(), O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) {
      if (errno == ENOENT && seen_unfinished && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      if (errno == ENOENT)
        throw ShmError(std::string(endpoint) + ": no such pool (/dev/shm" + object +
                       "); start sonopiped with this endpoint first (e.g. systemctl start sonopiped)");
      if (errno == EACCES)
        throw ShmError(std::string(endpoint) + ": permission denied on /dev/shm" + object +
                       "; run as the daemon's user or give its group access (shm permissions 0660)");
      throw ShmError(system_error(std::string(endpoint) + ": opening /dev/shm" + object));
    }
    try {
      return map(endpoint, fd, false);
    } catch (const NotReady& e) {
      // Its creator is between shm_open and its last header write (or died there): wait a little.
      seen_unfinished = true;
      if (std::chrono::steady_clock::now() >= deadline)
        throw ShmError(std::string(e.what()) + " (waited " + std::to_string(ready_wait.count()) + " ms)");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
}

Pool::~Pool() {
  if (creator_) {
    bool waiting = false;
    {
      Lock lock(*this);
      header_->creator_alive = 0;
      for (std::uint32_t i = 0; i < geometry_.slot_count; ++i)
        waiting |= slots_[i].state == static_cast<std::uint32_t>(SlotState::ready) && header_->mode == Mode::lossless &&
                   !slots_[i].taken;
    }
    // Undelivered lossless messages stay for the next sonopiped on this name.
    if (!waiting) shm_unlink(object_.c_str());
    wake_producers();
    wake_consumers();
  }
  munmap(base_, geometry_.total_bytes);
  close(fd_);
}

bool Pool::removed() const {
  struct stat info {};
  return fstat(fd_, &info) != 0 || info.st_nlink == 0;
}

Pool::Lock::Lock(Pool& pool) : pool_(pool) {
  const int result = pthread_mutex_lock(&pool.header_->mutex);
  if (result == EOWNERDEAD) {
    // Its holder died inside a critical section: take back what dead processes held, then mark
    // the state consistent again.
    pool.reclaim_dead_locked();
    for (std::uint32_t i = 0; i < pool.geometry_.slot_count; ++i) pool.free_if_done_locked(i);
    pthread_mutex_consistent(&pool.header_->mutex);
  } else if (result != 0) {
    throw ShmError(pool.endpoint_ + ": pool lock failed (" + std::strerror(result) + ")");
  }
}

Pool::Lock::~Lock() { pthread_mutex_unlock(&pool_.header_->mutex); }

bool Pool::free_if_done_locked(std::size_t index) {
  SlotRecord& s = slots_[index];
  if (s.state != static_cast<std::uint32_t>(SlotState::ready) || s.pending != 0 || s.held != 0 || s.producer_held != 0)
    return false;
  // A lossless message no lossless consumer took waits for the next one (unclaimed), where the
  // pool keeps such messages (the ingest pool; not the publish pool).
  if (header_->mode == Mode::lossless && header_->hold_unclaimed && !s.taken) return false;
  s.state = static_cast<std::uint32_t>(SlotState::free);
  return true;
}

void Pool::drop_consumer_locked(std::size_t consumer) {
  const std::uint32_t bit = 1u << consumer;
  for (std::uint32_t i = 0; i < geometry_.slot_count; ++i) {
    slots_[i].held &= ~bit;
    if (slots_[i].pending & bit) {
      slots_[i].pending &= ~bit;
      if (slots_[i].pending == 0) settle_locked(i);
    }
  }
  header_->consumers[consumer].active = 0;
}

std::size_t Pool::reclaim_dead_locked() {
  PoolHeader& h = *header_;
  for (std::size_t p = 0; p < kMaxProducers; ++p) {
    ProducerRecord& record = h.producers[p];
    if (record.active && !process_alive(record.process)) {
      record.active = 0;
      ++h.dead_producers;
    }
  }
  for (std::size_t c = 0; c < kMaxConsumers; ++c) {
    if (h.consumers[c].active && !process_alive(h.consumers[c].process)) {
      drop_consumer_locked(c);
      ++h.dead_consumers;
    }
  }
  std::size_t freed = 0;
  for (std::uint32_t i = 0; i < geometry_.slot_count; ++i) {
    SlotRecord& s = slots_[i];
    // A hold of a producer that died (or whose record went to another) goes with it.
    if (s.producer_held) {
      const ProducerRecord& holder = h.producers[s.producer % kMaxProducers];
      if (!holder.active || holder.generation != s.producer_generation) s.producer_held = 0;
    }
    // A message its producer died writing was never committed (never accepted): the slot is free.
    if (s.state == static_cast<std::uint32_t>(SlotState::writing) && !process_alive(s.writer)) {
      s.state = static_cast<std::uint32_t>(SlotState::free);
      ++freed;
    } else if (free_if_done_locked(i)) {
      ++freed;
    }
  }
  h.reclaimed_slots += freed;
  return freed;
}

void Pool::settle_locked(std::size_t index) {
  SlotRecord& s = slots_[index];
  if (s.pending != 0 || !s.taken || s.acknowledged) return;
  s.acknowledged = 1;
  ProducerRecord& producer = header_->producers[s.producer % kMaxProducers];
  if (producer.generation == s.producer_generation) ++producer.delivered;
}

void Pool::wake_consumers() { futex_wake_all(header_->committed_word, header_->committed_waiters); }
void Pool::wake_producers() { futex_wake_all(header_->freed_word, header_->freed_waiters); }

}  // namespace sonopipe::shm
