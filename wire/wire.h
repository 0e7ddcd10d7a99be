// The door between the wire format (proto/sonopipe/v1) and the plain structs of sdk/.
// Used by the daemon (ingest, publish, control) and by the tools. Nothing past this file sees
// protobuf types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "sdk/frame.h"
#include "sdk/tensor.h"
#include "sonopipe/v1/control.pb.h"
#include "sonopipe/v1/frame.pb.h"
#include "sonopipe/v1/result.pb.h"

namespace sonopipe::wire {

constexpr std::uint32_t kSchemaVersion = 1;  // = sonopipe.v1.SCHEMA_VERSION_CURRENT

// Why an ingest message was refused; each has its own counter and status key.
enum class RejectReason {
  malformed_message,   // not [header][payload] (wrong number of parts)
  unparsable_header,   // header bytes are not a FrameHeader
  unknown_schema,      // schema_version not one we read
  bad_header,          // missing kind/element type/axes, zero or negative sizes, bad frequencies
  size_mismatch,       // payload bytes != product(shape) x element size
  too_large,           // over max_frame_bytes
  non_finite,          // NaN/Inf in a float payload (policy: reject)
  no_pipeline,         // no configured pipeline takes this kind/stream
  stage_error,         // a stage refused the frame's description (shape it cannot handle)
  bad_slot_descriptor, // shm://: a slot's header/payload ranges outside the slot, overlapping, misaligned
};
std::string_view reject_reason_name(RejectReason reason);  // "size_mismatch", ...

struct WireError : std::runtime_error {
  WireError(RejectReason reason_, const std::string& detail)
      : std::runtime_error(detail), reason(reason_) {}
  RejectReason reason;
};

DType dtype_from_proto(v1::ElementType type);      // throws WireError(bad_header)
v1::ElementType dtype_to_proto(DType type);
FrameKind frame_kind_from_proto(v1::FrameKind kind);  // throws WireError(bad_header)
v1::FrameKind frame_kind_to_proto(FrameKind kind);

// FrameHeader -> FrameMeta, checking schema version and header consistency (throws WireError).
FrameMeta frame_meta_from_header(const v1::FrameHeader& header);
v1::FrameHeader frame_header_from_meta(const FrameMeta& meta);

// What one frame header may carry: the header is copied into every result of the frame, so its size
// is capped at the door like the payload's (a larger header is refused as bad_header, unparsed).
struct HeaderLimits {
  static constexpr std::size_t bytes = 1 << 20;           // whole header
  static constexpr int axes = 8;
  static constexpr int vectors = 64;
  static constexpr int vector_values = 1 << 17;           // per vector (geometry of 8192 elements fits)
  static constexpr int attributes = 64;
  static constexpr std::size_t name_bytes = 256;          // axis, vector and attribute names, units
  static constexpr std::size_t attribute_value_bytes = 4096;
};

// A sender's delivery numbering in a frame header (FrameHeader.sender_id/send_index/resend_of;
// wire/delivery.h): all 0 when the sender does not ask for acknowledgement.
struct DeliveryTag {
  std::uint64_t sender_id = 0;
  std::uint64_t send_index = 0;
  std::uint64_t resend_of = 0;  // the send index this frame was first sent with, 0 if first
  bool requested() const { return sender_id != 0 && send_index != 0; }
};

// Parses header bytes and checks them against the payload size, the frame limit and HeaderLimits.
// `delivery` (may be null) receives the header's DeliveryTag as soon as the header parses, so a
// frame refused after that can still be acknowledged as refused.
FrameMeta decode_frame(const void* header_bytes, std::size_t header_size, std::size_t payload_bytes,
                       std::size_t max_frame_bytes, DeliveryTag* delivery = nullptr);

// libprotobuf writes warnings of its own straight to stderr, one per string field with invalid UTF-8
// in every message it parses: a client could flood the daemon's log with them. This routes them
// through spdlog as "protobuf: ...", escaped and at most one line per second (with the count held
// back). Call once, first thing in main().
void route_protobuf_log();

// Array description carried by a result header.
TensorSpec tensor_spec_from_result(const v1::ResultHeader& header);

}  // namespace sonopipe::wire
