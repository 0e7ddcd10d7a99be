// One message from the daemon's PUB socket, checked the same way by every subscriber tool
// (sonopipe-record, sonopipe-igtl): [status][Status], or [topic][ResultHeader][payload] whose topic
// names its header's pipeline and output.
#pragma once

#include <cstddef>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "sonopipe/v1/result.pb.h"

namespace sonopipe::tools {

struct PublishedMessage {
  enum class Kind { status, result, refused };
  Kind kind = Kind::refused;
  std::string topic;
  v1::Status status;        // Kind::status
  v1::ResultHeader header;  // Kind::result; the payload stays parts[2]
  std::string reason;       // Kind::refused: a counter name (malformed_message, unparsable_header, ...)
  std::string detail;       // Kind::refused: one line for the log
};

PublishedMessage decode_published(const std::vector<zmq::message_t>& parts);
// The same checks on a result read in place from the daemon's publish.shm pool: the slot's header
// is [topic '\0' ResultHeader] (docs/shared-memory.md); the payload stays in the slot.
PublishedMessage decode_published_slot(const void* header, std::size_t header_bytes);

}  // namespace sonopipe::tools
