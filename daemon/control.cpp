#include "daemon/control.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "daemon/endpoint.h"
#include "wire/log_text.h"
#include "wire/wire.h"

namespace sonopipe {

v1::ControlReply ControlHandler::answer(const v1::ControlRequest& request, bool keyed_client) const {
  v1::ControlReply reply;
  reply.set_schema_version(wire::kSchemaVersion);
  if (request.schema_version() != wire::kSchemaVersion) {
    reply.set_ok(false);
    reply.set_error("schema_version " + std::to_string(request.schema_version()) + ", this daemon reads " +
                    std::to_string(wire::kSchemaVersion));
  } else if (request.command() == "status") {
    reply.set_ok(true);
    *reply.mutable_status() = status_();
  } else if (request.command() == "stop") {
    if (stop_policy_ == ControlStop::disabled || (stop_policy_ == ControlStop::keyed && !keyed_client)) {
      reply.set_ok(false);
      reply.set_error(stop_policy_ == ControlStop::disabled
                          ? "stop is disabled on this daemon (security.control_stop: disabled)"
                          : "stop needs a client authenticated with a CURVE key (security.control_stop: keyed)");
      spdlog::warn("control: stop refused ({})", control_stop_name(stop_policy_));
      return reply;
    }
    reply.set_ok(true);
    *reply.mutable_status() = status_();
    spdlog::info("control: stop requested");
    stop_();
  } else {
    reply.set_ok(false);
    // The command is the client's text: the reply quotes it capped and escaped.
    reply.set_error("unknown command '" + log_safe(request.command(), 64) + "'; expected status or stop");
  }
  return reply;
}

v1::ControlReply ControlHandler::answer_bytes(const void* data, std::size_t size, bool keyed_client) const {
  v1::ControlRequest request;
  if (size > static_cast<std::size_t>(kMaxControlRequestBytes) ||
      !request.ParseFromArray(data, static_cast<int>(size))) {
    v1::ControlReply reply;
    reply.set_schema_version(wire::kSchemaVersion);
    reply.set_ok(false);
    reply.set_error("request is not a ControlRequest");
    return reply;
  }
  return answer(request, keyed_client);
}

ControlServer::ControlServer(zmq::context_t& context, const std::string& endpoint, ControlHandler handler,
                             const std::function<void(zmq::socket_t&)>& configure)
    : socket_(context, zmq::socket_type::rep), handler_(std::move(handler)) {
  socket_.set(zmq::sockopt::linger, 500);
  // A control request is a few bytes: libzmq drops a peer that sends more than this.
  socket_.set(zmq::sockopt::maxmsgsize, std::int64_t{kMaxControlRequestBytes});
  if (configure) configure(socket_);
  socket_.bind(endpoint);
  spdlog::info("control: bound to {}", endpoint);
  if (reachable_beyond_loopback(endpoint))
    spdlog::warn("control: {} is reachable from other machines, and anyone who reaches it can stop the daemon; "
                 "bind 127.0.0.1 or ipc:// unless this is what you want", endpoint);
}

void ControlServer::run(const std::atomic<bool>& quit) {
  zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
  while (!quit.load()) {
    if (zmq::poll(&item, 1, std::chrono::milliseconds(100)) == 0) continue;
    zmq::message_t message;
    if (!socket_.recv(message, zmq::recv_flags::dontwait)) continue;
    // The ZAP handler names every client it accepted by its public key (ZMQ User-Id); without
    // CURVE the property is empty.
    const char* user = zmq_msg_gets(message.handle(), "User-Id");
    const bool keyed_client = user != nullptr && *user != '\0';
    bool more = message.more();
    while (more) {  // a REP must read the whole request before replying; extra parts are ignored
      zmq::message_t extra;
      if (!socket_.recv(extra, zmq::recv_flags::none)) break;
      more = extra.more();
    }
    const v1::ControlReply reply = handler_.answer_bytes(message.data(), message.size(), keyed_client);
    socket_.send(zmq::buffer(reply.SerializeAsString()), zmq::send_flags::none);
  }
}

}  // namespace sonopipe
