// The control socket (REP): one ControlRequest, one ControlReply. Commands: "status" (the
// counters) and "stop" (replies, then asks the daemon to drain and exit), unless the config's
// security.control_stop refuses it (disabled, or keyed: only clients authenticated by CURVE).
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <string>

#include <zmq.hpp>

#include "sonopipe/v1/control.pb.h"
#include "daemon/config.h"

namespace sonopipe {

inline constexpr int kMaxControlRequestBytes = 64 * 1024;  // ZMQ_MAXMSGSIZE of the control socket

// Answers one request; no socket, so tests and the fuzzer drive it directly.
class ControlHandler {
 public:
  ControlHandler(std::function<v1::Status()> status, std::function<void()> stop, ControlStop stop_policy)
      : status_(std::move(status)), stop_(std::move(stop)), stop_policy_(stop_policy) {}

  // `keyed_client`: the request came over a CURVE connection that the ZAP handler accepted.
  v1::ControlReply answer(const v1::ControlRequest& request, bool keyed_client) const;
  // The request's bytes as they came off the socket (anything at all) -> the reply.
  v1::ControlReply answer_bytes(const void* data, std::size_t size, bool keyed_client) const;

 private:
  std::function<v1::Status()> status_;
  std::function<void()> stop_;
  ControlStop stop_policy_;
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
