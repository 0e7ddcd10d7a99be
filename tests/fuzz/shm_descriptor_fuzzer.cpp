// Fuzzes what a consumer does with a slot record a hostile producer wrote: pool geometry (slot
// payload and header capacities) and the committed descriptor (header/payload offsets and sizes)
// come from the input. check_descriptor must refuse every range outside the slot, overlapping or
// misaligned; a message handed out must lie inside its slot, and its header goes through the
// recorder's decoder of publish.shm slots (decode_published_slot), which refuses it with a reason or
// decodes a result whose topic names its header. Input: 1 byte geometry choice, 4 x 8 bytes of
// descriptor (big endian), then the slot's bytes.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "shm/consumer.h"
#include "shm/producer.h"
#include "tools/common/published_message.h"
#include "tools/common/zmq_io.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

using namespace sonopipe::shm;

struct Fixture {
  explicit Fixture(std::uint64_t payload_capacity) {
    endpoint = "shm://fuzz-" + std::to_string(getpid()) + "-" + std::to_string(payload_capacity);
    PoolOptions options;
    options.slot_count = 2;
    options.header_capacity = 4096;
    options.payload_capacity = payload_capacity;
    pool = std::shared_ptr<Pool>(Pool::create(endpoint, options));
    consumer = std::make_unique<Consumer>(pool, Mode::lossless);
    producer = std::make_unique<Producer>(endpoint);
  }
  ~Fixture() { shm_unlink(object_name(endpoint).c_str()); }
  std::string endpoint;
  std::shared_ptr<Pool> pool;
  std::unique_ptr<Consumer> consumer;
  std::unique_ptr<Producer> producer;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Fixture small(4096), large(3 * 4096);
  sonopipe::fuzz::Input input(data, size);
  Fixture& f = input.byte() % 2 ? large : small;
  SlotDescriptor d;
  d.header_offset = input.number(8);
  d.header_bytes = input.number(8);
  d.payload_offset = input.number(8);
  d.payload_bytes = input.number(8);
  const PoolGeometry& g = f.pool->geometry();
  const DescriptorError error = check_descriptor(d, g.slot_bytes, g.header_capacity);
  if (error == DescriptorError::none) {
    // What "accepted" promises.
    if (d.header_bytes == 0 || d.header_bytes > g.header_capacity) __builtin_trap();
    if (d.header_offset > g.slot_bytes || d.header_bytes > g.slot_bytes - d.header_offset) __builtin_trap();
    if (d.payload_offset > g.slot_bytes || d.payload_bytes > g.slot_bytes - d.payload_offset) __builtin_trap();
    if (d.payload_offset % kPayloadAlignment != 0) __builtin_trap();
  }
  // The same descriptor through a real pool: committed, then rewritten in shared memory.
  auto claim = f.producer->claim(std::chrono::steady_clock::now());
  if (!claim) __builtin_trap();  // every slot must have come back
  std::byte* bytes = f.pool->slot_data(claim->slot);
  for (std::size_t i = 0; i < g.slot_bytes && !input.empty(); ++i) bytes[i] = std::byte{input.byte()};
  f.producer->commit(*claim, 1, 0);
  f.pool->slot(claim->slot).descriptor = d;
  const auto message = f.consumer->take(std::chrono::steady_clock::now());
  if (message.has_value() != (error == DescriptorError::none)) __builtin_trap();
  if (message) {
    const std::byte* slot = f.pool->slot_data(message->slot);
    if (message->header < slot || message->header + message->header_bytes > slot + g.slot_bytes) __builtin_trap();
    if (message->payload < slot || message->payload + message->payload_bytes > slot + g.slot_bytes) __builtin_trap();
    volatile std::byte sink{};
    for (std::size_t i = 0; i < message->header_bytes; ++i) sink = message->header[i];
    for (std::size_t i = 0; i < message->payload_bytes; i += 64) sink = message->payload[i];
    (void)sink;
    // A copy of exactly the header's bytes, so a read past them is the sanitizer's to see.
    const std::vector<std::byte> header(message->header, message->header + message->header_bytes);
    const auto decoded = sonopipe::tools::decode_published_slot(header.data(), header.size());
    if ((decoded.kind == sonopipe::tools::PublishedMessage::Kind::refused) == decoded.reason.empty()) __builtin_trap();
    if (decoded.kind == sonopipe::tools::PublishedMessage::Kind::result &&
        decoded.topic != sonopipe::tools::result_topic(decoded.header.pipeline(), decoded.header.output()))
      __builtin_trap();
    f.consumer->release(message->slot);
  }
  return 0;
}
