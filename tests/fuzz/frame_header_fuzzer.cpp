// Fuzzes what ingest does with one [header][payload] message before a pipeline sees it: the header
// decode and every check against the payload size (wire::decode_frame), the NaN/Inf scan, and the
// reject line a refusal would log. Input: 4 bytes of payload size (little endian, at most 64 KiB,
// the payload's bytes are the input's tail repeated), then the header bytes.
#include <cstdint>
#include <cstring>
#include <vector>

#include "daemon/ingest.h"
#include "wire/log_text.h"
#include "wire/wire.h"

namespace {
constexpr std::size_t kMaxPayloadBytes = 64 * 1024;
constexpr std::size_t kMaxFrameBytes = 32 * 1024;  // below the largest payload: too_large is reachable
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  std::uint32_t payload_size = 0;
  std::memcpy(&payload_size, data, 4);
  payload_size %= kMaxPayloadBytes + 1;
  const std::uint8_t* header = data + 4;
  const std::size_t header_size = size - 4;
  std::vector<std::uint8_t> payload(payload_size);
  for (std::size_t i = 0; i < payload.size() && header_size > 0; ++i) payload[i] = header[i % header_size];
  try {
    const sonopipe::FrameMeta meta =
        sonopipe::wire::decode_frame(header, header_size, payload.size(), kMaxFrameBytes);
    // What ingest and the stages read next: the element count, the shape text, the payload scan.
    if (meta.payload.byte_size() != payload.size()) __builtin_trap();
    (void)meta.payload.shape_string();
    (void)sonopipe::payload_is_finite(meta.payload.dtype, payload.data(), payload.size());
    // A result carries the frame's description back out: it must encode again.
    (void)sonopipe::wire::frame_header_from_meta(meta).SerializeAsString();
  } catch (const sonopipe::wire::WireError& e) {
    (void)sonopipe::log_safe(e.what());
  }
  return 0;
}
