// Fuzzes the control socket's request handling: any bytes a client sends in one message become a
// ControlReply (ControlHandler::answer_bytes, what ControlServer::run does per request), for every
// stop policy and for keyed and unkeyed clients. A reply must always encode.
#include <cstdint>

#include "daemon/control.h"

namespace {

sonopipe::v1::Status fake_status() {
  sonopipe::v1::Status status;
  status.set_frames_received(7);
  return status;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  int stops = 0;
  for (const auto policy : {sonopipe::ControlStop::allow, sonopipe::ControlStop::keyed, sonopipe::ControlStop::disabled}) {
    for (const bool keyed : {false, true}) {
      const sonopipe::ControlHandler handler(fake_status, [&stops] { ++stops; }, policy);
      const sonopipe::v1::ControlReply reply = handler.answer_bytes(data, size, keyed);
      if (!reply.ok() && reply.error().empty()) __builtin_trap();  // a refusal always says why
      (void)reply.SerializeAsString();
    }
  }
  // stop may act only where the policy lets it: allow (twice) and keyed with a key (once).
  if (stops != 0 && stops != 3) __builtin_trap();
  return 0;
}
