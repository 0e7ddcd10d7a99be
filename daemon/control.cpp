#include "daemon/control.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "daemon/endpoint.h"
#include "wire/log_text.h"
#include "wire/wire.h"

namespace sonopipe {

void fill_parameter(const LiveParameters::Entry& entry, v1::Parameter& out) {
  out.set_name(entry.name);
  out.set_value(entry.value);
  out.set_type(std::string(param_type_name(entry.decl.type)));
  out.set_min(entry.decl.min);
  out.set_max(entry.decl.max);
  out.set_unit(entry.decl.unit);
  for (const std::string& choice : entry.decl.choices) out.add_choices(choice);
  out.set_live(entry.decl.live);
  out.set_generation(entry.generation);
  out.set_doc(entry.decl.doc);
  out.set_default_value(entry.decl.default_value);
}

bool ControlHandler::refused_by_policy(const char* command, bool keyed_client, v1::ControlReply& reply) const {
  if (stop_policy_ == ControlStop::allow || (stop_policy_ == ControlStop::keyed && keyed_client)) return false;
  reply.set_ok(false);
  reply.set_error(stop_policy_ == ControlStop::disabled
                      ? std::string(command) + " is disabled on this daemon (security.control_stop: disabled)"
                      : std::string(command) +
                            " needs a client authenticated with a CURVE key (security.control_stop: keyed)");
  spdlog::warn("control: {} refused ({})", command, control_stop_name(stop_policy_));
  return true;
}

v1::ControlReply ControlHandler::answer(const v1::ControlRequest& request, bool keyed_client,
                                        const std::string& client) const {
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
    if (refused_by_policy("stop", keyed_client, reply)) return reply;
    reply.set_ok(true);
    *reply.mutable_status() = status_();
    spdlog::info("control: stop requested");
    stop_();
  } else if (request.command() == "get" || request.command() == "set" || request.command() == "list") {
    if (!live_) {
      reply.set_ok(false);
      reply.set_error("this daemon has no live parameters");
      return reply;
    }
    if (request.command() == "set" && refused_by_policy("set", keyed_client, reply)) return reply;
    LiveParameters::Outcome outcome;
    if (request.command() == "get") outcome = live_->get(request.parameter());
    else if (request.command() == "list") outcome = live_->list(request.parameter());
    else outcome = live_->set(request.parameter(), request.value(), client.empty() ? "a local client" : "CURVE key " + client);
    reply.set_ok(outcome.ok);
    if (!outcome.ok) {
      reply.set_error(outcome.error);
      if (request.command() == "set") spdlog::warn("control: set refused: {}", log_safe(outcome.error, 256));
    }
    reply.set_generation(outcome.generation);
    for (const LiveParameters::Entry& entry : outcome.entries) fill_parameter(entry, *reply.add_parameters());
  } else if (request.command() == "save") {
    if (!save_) {
      reply.set_ok(false);
      reply.set_error("this daemon cannot write its configuration");
      return reply;
    }
    reply.set_ok(true);
    reply.set_config_yaml(save_());
  } else {
    reply.set_ok(false);
    // The command is the client's text: the reply quotes it capped and escaped.
    reply.set_error("unknown command '" + log_safe(request.command(), 64) +
                    "'; expected status, stop, get, set, list or save");
  }
  return reply;
}

v1::ControlReply ControlHandler::answer_bytes(const void* data, std::size_t size, bool keyed_client,
                                              const std::string& client) const {
  v1::ControlRequest request;
  if (size > static_cast<std::size_t>(kMaxControlRequestBytes) ||
      !request.ParseFromArray(data, static_cast<int>(size))) {
    v1::ControlReply reply;
    reply.set_schema_version(wire::kSchemaVersion);
    reply.set_ok(false);
    reply.set_error("request is not a ControlRequest");
    return reply;
  }
  return answer(request, keyed_client, client);
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
    const v1::ControlReply reply =
        handler_.answer_bytes(message.data(), message.size(), keyed_client, keyed_client ? std::string(user) : std::string());
    socket_.send(zmq::buffer(reply.SerializeAsString()), zmq::send_flags::none);
  }
}

}  // namespace sonopipe
