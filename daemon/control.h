// The control socket (REP): one ControlRequest, one ControlReply. Commands: "status" (the
// counters), "stop" (replies, then asks the daemon to drain and exit), "get" / "set" / "list" of
// live stage parameters (daemon/live_params.h, docs/live-parameters.md) and "save" (the running
// configuration as YAML). security.control_stop refuses stop and set (disabled, or keyed: only
// clients authenticated by CURVE).
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <string>

#include <zmq.hpp>

#include "sonopipe/v1/control.pb.h"
#include "daemon/config.h"
#include "daemon/live_params.h"

namespace sonopipe {

// A live parameter as the wire reports it (get, set, list, status).
void fill_parameter(const LiveParameters::Entry& entry, v1::Parameter& out);

inline constexpr int kMaxControlRequestBytes = 64 * 1024;  // ZMQ_MAXMSGSIZE of the control socket

// Answers one request; no socket, so tests and the fuzzer drive it directly.
class ControlHandler {
 public:
  // `live`: the daemon's live parameters (get/set/list; none: those commands are refused);
  // `save`: the running configuration as YAML (none: refused).
  ControlHandler(std::function<v1::Status()> status, std::function<void()> stop, ControlStop stop_policy,
                 LiveParameters* live = nullptr, std::function<std::string()> save = {})
      : status_(std::move(status)), stop_(std::move(stop)), stop_policy_(stop_policy), live_(live),
        save_(std::move(save)) {}

  // `keyed_client`: the request came over a CURVE connection that the ZAP handler accepted;
  // `client`: who it is, for the log (the CURVE public key, or empty).
  v1::ControlReply answer(const v1::ControlRequest& request, bool keyed_client, const std::string& client = {}) const;
  // The request's bytes as they came off the socket (anything at all) -> the reply.
  v1::ControlReply answer_bytes(const void* data, std::size_t size, bool keyed_client,
                                const std::string& client = {}) const;

 private:
  bool refused_by_policy(const char* command, bool keyed_client, v1::ControlReply& reply) const;

  std::function<v1::Status()> status_;
  std::function<void()> stop_;
  ControlStop stop_policy_;
  LiveParameters* live_ = nullptr;
  std::function<std::string()> save_;
};

class ControlServer {
 public:
  // `configure` sets socket options (CURVE) before the bind.
  ControlServer(zmq::context_t& context, const std::string& endpoint, ControlHandler handler,
                const std::function<void(zmq::socket_t&)>& configure = {});
  // Answers requests until `quit` is set (checked at least every 100 ms).
  void run(const std::atomic<bool>& quit);

  const ControlHandler& handler() const { return handler_; }

 private:
  zmq::socket_t socket_;
  ControlHandler handler_;
};

}  // namespace sonopipe
