#include "tools/common/control_client.h"

#include "wire/wire.h"
#include "tools/common/zmq_io.h"

namespace sonopipe::tools {

std::optional<v1::ControlReply> control_request(zmq::context_t& context, const std::string& endpoint,
                                                const std::string& command, std::chrono::milliseconds timeout,
                                                const CurveClient& curve) {
  zmq::socket_t socket(context, zmq::socket_type::req);
  socket.set(zmq::sockopt::linger, 0);
  socket.set(zmq::sockopt::sndtimeo, static_cast<int>(timeout.count()));
  socket.set(zmq::sockopt::rcvtimeo, static_cast<int>(timeout.count()));
  apply_curve_client(socket, curve);
  socket.connect(endpoint);
  v1::ControlRequest request;
  request.set_schema_version(wire::kSchemaVersion);
  request.set_command(command);
  try {
    if (!socket.send(zmq::buffer(request.SerializeAsString()), zmq::send_flags::none)) return std::nullopt;
    zmq::message_t reply_bytes;
    if (!socket.recv(reply_bytes, zmq::recv_flags::none)) return std::nullopt;
    v1::ControlReply reply;
    if (!reply.ParseFromArray(reply_bytes.data(), static_cast<int>(reply_bytes.size()))) return std::nullopt;
    return reply;
  } catch (const zmq::error_t&) {
    return std::nullopt;  // EINTR and friends: treated as no reply
  }
}

}  // namespace sonopipe::tools
