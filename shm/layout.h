// The shared pool's layout and the checks on everything a peer process wrote into it.
//
// One pool = one POSIX shared-memory object /dev/shm/sonopipe.<name> (endpoint shm://<name>):
//   [PoolHeader: geometry, robust mutex, futex words, counters, producer and consumer records]
//   [SlotRecord x slot_count]                   (control, 64-byte aligned)
//   [slot data x slot_count, page aligned]      each slot: [message header][payload]
// A message is two byte ranges in its slot, named by a SlotDescriptor: the header (the wire's
// FrameHeader or ResultHeader, opaque here) and the payload. Peers are other processes: every
// descriptor is copied out of shared memory once and checked (check_descriptor) before use, and
// a refusal names its reason so the reader can count it.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sonopipe::shm {

inline constexpr std::uint64_t kMagic = 0x31504853'4f4e4f53ull;  // "SONOSHP1"
// 2: SlotRecord::producer_held; 3: PoolHeader::hold_unclaimed
inline constexpr std::uint32_t kLayoutVersion = 3;
inline constexpr std::size_t kMaxSlots = 64;       // a slot is one bit in the held/pending masks
inline constexpr std::size_t kMaxProducers = 32;
inline constexpr std::size_t kMaxConsumers = 32;   // a consumer is one bit in the masks
inline constexpr std::size_t kPageBytes = 4096;
inline constexpr std::size_t kPayloadAlignment = 64;  // payload offsets: any element type, CUDA copies

enum class Mode : std::uint32_t { lossless = 1, live = 2 };
std::string_view mode_name(Mode mode);  // "lossless", "live"

enum class SlotState : std::uint32_t { free = 0, writing = 1, ready = 2 };
// The same states as Slot::state holds them (a plain std::uint32_t in the shared segment).
constexpr auto kSlotFree = static_cast<std::uint32_t>(SlotState::free);
constexpr auto kSlotWriting = static_cast<std::uint32_t>(SlotState::writing);
constexpr auto kSlotReady = static_cast<std::uint32_t>(SlotState::ready);

// Where a message lies in its slot (offsets from the slot's first byte).
struct SlotDescriptor {
  std::uint64_t header_offset = 0, header_bytes = 0;
  std::uint64_t payload_offset = 0, payload_bytes = 0;
};

enum class DescriptorError {
  none,
  header_outside_slot,   // header range ends past the slot (or overflows)
  payload_outside_slot,  // payload range ends past the slot (or overflows)
  header_too_large,      // more than the pool's header capacity
  payload_misaligned,    // payload offset not a multiple of kPayloadAlignment
  ranges_overlap,        // header and payload share bytes
  empty_header,          // a message without a header
};
inline constexpr std::size_t kDescriptorErrorCount = 7;
std::string_view descriptor_error_name(DescriptorError error);  // "header_outside_slot", ...

// Checks a descriptor copied out of shared memory against the pool's slot geometry.
DescriptorError check_descriptor(const SlotDescriptor& descriptor, std::uint64_t slot_bytes,
                                 std::uint64_t header_capacity);

// Pool geometry chosen by its creator: slot_bytes = header_capacity + payload_capacity, both
// rounded up to whole pages, so every slot's payload (at header_capacity) is page aligned.
struct PoolGeometry {
  std::uint32_t slot_count = 0;
  std::uint64_t header_capacity = 0;
  std::uint64_t payload_capacity = 0;
  std::uint64_t slot_bytes = 0;
  std::uint64_t slots_offset = 0;  // SlotRecord array
  std::uint64_t data_offset = 0;   // first slot's data
  std::uint64_t total_bytes = 0;
};
// Throws std::invalid_argument for counts or sizes out of range (0 slots, > kMaxSlots, sizes that
// overflow).
PoolGeometry make_geometry(std::uint32_t slot_count, std::uint64_t header_capacity, std::uint64_t payload_capacity);

// A process as the pool remembers it: pid plus its start time (clock ticks since boot, from
// /proc/<pid>/stat), so a reused pid is not mistaken for the process that died.
struct ProcessId {
  std::int32_t pid = 0;
  std::uint64_t start_ticks = 0;
};

struct ProducerRecord {
  std::uint32_t active = 0;
  std::uint32_t generation = 0;   // bumped at each registration: acknowledgements of a dead
                                  // producer's frames do not count for its successor
  ProcessId process;
  std::uint64_t committed = 0;    // messages committed
  std::uint64_t delivered = 0;    // taken by every lossless consumer pending at commit (the ack)
  std::uint64_t overwritten = 0;  // live pools: replaced by a newer message before anyone took it
};

struct ConsumerRecord {
  std::uint32_t active = 0;
  Mode mode = Mode::lossless;
  ProcessId process;
  std::uint64_t cursor = 0;   // sequence of the last message taken
  std::uint64_t taken = 0;
  std::uint64_t missed = 0;   // live: messages overwritten before this consumer took them
};

struct SlotRecord {
  std::uint32_t state = 0;               // SlotState
  std::uint32_t producer = 0;            // ProducerRecord index
  std::uint32_t producer_generation = 0;
  std::uint32_t taken = 0;               // a consumer it was pending for has taken it
  ProcessId writer;                      // the process filling it (state writing)
  std::uint64_t sequence = 0;            // commit order, from 1
  std::uint32_t pending = 0;             // consumers that must still take it (bit per consumer)
  std::uint32_t held = 0;                // consumers reading it now
  SlotDescriptor descriptor;
  std::uint32_t acknowledged = 0;        // counted as delivered for its producer
  // Its producer still reads the message (e.g. the daemon sends the same bytes over ZeroMQ): the
  // slot is neither freed nor overwritten until the producer lets go (Producer::release_hold) or dies.
  std::uint32_t producer_held = 0;
};
static_assert(sizeof(SlotRecord) % 8 == 0);

struct alignas(64) PoolHeader {
  // Written last by the creator (release), read first by openers (acquire): 0 = still being made.
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t header_struct_bytes;  // sizeof(PoolHeader): two builds must agree on the layout
  PoolGeometry geometry;
  Mode mode;                          // producers' rule when no slot is free
  // Lossless pools: a message no lossless consumer took waits for the next one (1: the ingest
  // pool, a restarted daemon processes it), or is free once the consumers pending at its commit
  // took it or died (0: the publish pool, a dead recorder does not hold the daemon back).
  std::uint32_t hold_unclaimed;
  std::uint32_t creator_alive;        // 0 after the creator closed it
  ProcessId creator;
  pthread_mutex_t mutex;              // robust, process-shared: everything below
  alignas(64) std::atomic<std::uint32_t> committed_word;  // futex: bumped at every commit
  std::atomic<std::uint32_t> committed_waiters;
  alignas(64) std::atomic<std::uint32_t> freed_word;      // futex: bumped when slots come free
  std::atomic<std::uint32_t> freed_waiters;
  alignas(64) std::uint64_t next_sequence;
  std::uint64_t reclaimed_slots;      // slots taken back from dead producers/consumers
  std::uint64_t dead_producers, dead_consumers;
  ProducerRecord producers[kMaxProducers];
  ConsumerRecord consumers[kMaxConsumers];
};

// The POSIX shared-memory name of an endpoint "shm://<name>": "/sonopipe.<name>". Names are
// 1..200 characters of [A-Za-z0-9._-], not starting with '.'. Throws std::invalid_argument.
std::string object_name(std::string_view endpoint);
bool is_shm_endpoint(std::string_view endpoint);  // starts with "shm://"

}  // namespace sonopipe::shm
