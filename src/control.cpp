#include "src/control.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "src/endpoint.h"
#include "src/wire/wire.h"

namespace sonopipe {

ControlServer::ControlServer(zmq::context_t& context, const std::string& endpoint,
                             std::function<v1::Status()> status, std::function<void()> stop)
    : socket_(context, zmq::socket_type::rep), status_(std::move(status)), stop_(std::move(stop)) {
  socket_.set(zmq::sockopt::linger, 500);
  // A control request is a few bytes: libzmq drops a peer that sends more than this.
  socket_.set(zmq::sockopt::maxmsgsize, std::int64_t{kMaxControlRequestBytes});
  socket_.bind(endpoint);
  spdlog::info("control: bound to {}", endpoint);
  if (reachable_beyond_loopback(endpoint))
    spdlog::warn("control: {} is reachable from other machines, and anyone who reaches it can stop the daemon; "
                 "bind 127.0.0.1 or ipc:// unless this is what you want", endpoint);
}

v1::ControlReply ControlServer::answer(const v1::ControlRequest& request) {
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
    reply.set_ok(true);
    *reply.mutable_status() = status_();
    spdlog::info("control: stop requested");
    stop_();
  } else {
    reply.set_ok(false);
    reply.set_error("unknown command '" + request.command() + "'; expected status or stop");
  }
  return reply;
}

void ControlServer::run(const std::atomic<bool>& quit) {
  zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
  while (!quit.load()) {
    if (zmq::poll(&item, 1, std::chrono::milliseconds(100)) == 0) continue;
    zmq::message_t message;
    if (!socket_.recv(message, zmq::recv_flags::dontwait)) continue;
    bool more = message.more();
    while (more) {  // a REP must read the whole request before replying; extra parts are ignored
      zmq::message_t extra;
      if (!socket_.recv(extra, zmq::recv_flags::none)) break;
      more = extra.more();
    }
    v1::ControlRequest request;
    v1::ControlReply reply;
    if (!request.ParseFromArray(message.data(), static_cast<int>(message.size()))) {
      reply.set_schema_version(wire::kSchemaVersion);
      reply.set_ok(false);
      reply.set_error("request is not a ControlRequest");
    } else {
      reply = answer(request);
    }
    socket_.send(zmq::buffer(reply.SerializeAsString()), zmq::send_flags::none);
  }
}

}  // namespace sonopipe
