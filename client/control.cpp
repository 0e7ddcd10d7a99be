// sp_control_get / sp_control_set: live parameters over the daemon's control socket (REQ/REP,
// proto/sonopipe/v1/control.proto), one fresh REQ socket per call so a timeout never leaves one stuck.
#include <cstring>
#include <string>

#include <zmq.hpp>

#include "client/status.h"
#include "sonopipe/v1/control.pb.h"
#include "wire/wire.h"

using sonopipe::client::ClientError;
using sonopipe::client::guarded;
using sonopipe::client::require;

namespace {

zmq::context_t& control_context() {
  static zmq::context_t context(1);
  return context;
}

sonopipe::v1::ControlReply exchange(const char* endpoint, const std::string& command, const char* name,
                                    const char* value, int timeout_ms) {
  require(endpoint, "endpoint");
  require(name, "name");
  if (timeout_ms <= 0) throw ClientError(SP_ERROR_ARGUMENT, "timeout_ms must be > 0");
  sonopipe::v1::ControlRequest request;
  request.set_schema_version(sonopipe::wire::kSchemaVersion);
  request.set_command(command);
  request.set_parameter(name);
  if (value) request.set_value(value);
  zmq::socket_t socket(control_context(), zmq::socket_type::req);
  socket.set(zmq::sockopt::linger, 0);
  try {
    socket.connect(endpoint);
  } catch (const zmq::error_t& e) {
    throw ClientError(SP_ERROR_SOCKET, std::string("cannot connect to ") + endpoint + ": " + e.what());
  }
  socket.send(zmq::buffer(request.SerializeAsString()), zmq::send_flags::none);
  zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, std::chrono::milliseconds(timeout_ms)) == 0)
    throw ClientError(SP_ERROR_TIMEOUT, std::string("no answer from ") + endpoint + " within " +
                                            std::to_string(timeout_ms) + " ms");
  zmq::message_t message;
  if (!socket.recv(message, zmq::recv_flags::none))
    throw ClientError(SP_ERROR_TIMEOUT, std::string("no answer from ") + endpoint);
  sonopipe::v1::ControlReply reply;
  if (!reply.ParseFromArray(message.data(), static_cast<int>(message.size())))
    throw ClientError(SP_ERROR_INTERNAL, "the answer is not a ControlReply");
  if (!reply.ok()) throw ClientError(SP_ERROR_ARGUMENT, reply.error());
  if (reply.parameters_size() != 1) throw ClientError(SP_ERROR_INTERNAL, "the answer names no parameter");
  return reply;
}

}  // namespace

extern "C" {

int sp_control_get(const char* endpoint, const char* name, int timeout_ms, char* value, size_t capacity) {
  return guarded("sp_control_get", [&] {
    require(value, "value");
    const sonopipe::v1::ControlReply reply = exchange(endpoint, "get", name, nullptr, timeout_ms);
    const std::string& text = reply.parameters(0).value();
    if (text.size() + 1 > capacity)
      throw ClientError(SP_ERROR_SIZE_MISMATCH, "the value has " + std::to_string(text.size()) +
                                                    " characters, more than capacity - 1");
    std::memcpy(value, text.c_str(), text.size() + 1);
  });
}

int sp_control_set(const char* endpoint, const char* name, const char* value, int timeout_ms, uint64_t* generation) {
  return guarded("sp_control_set", [&] {
    require(value, "value");
    const sonopipe::v1::ControlReply reply = exchange(endpoint, "set", name, value, timeout_ms);
    if (generation) *generation = reply.generation();
  });
}

}  // extern "C"
