// The control socket (REP): one ControlRequest, one ControlReply. Commands: "status" (the
// counters) and "stop" (replies, then asks the daemon to drain and exit).
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include <zmq.hpp>

#include "sonopipe/v1/control.pb.h"

namespace sonopipe {

inline constexpr int kMaxControlRequestBytes = 64 * 1024;  // ZMQ_MAXMSGSIZE of the control socket

class ControlServer {
 public:
  ControlServer(zmq::context_t& context, const std::string& endpoint,
                std::function<v1::Status()> status, std::function<void()> stop);
  // Answers requests until `quit` is set (checked at least every 100 ms).
  void run(const std::atomic<bool>& quit);

  // The reply to one request (exposed for tests).
  v1::ControlReply answer(const v1::ControlRequest& request);

 private:
  zmq::socket_t socket_;
  std::function<v1::Status()> status_;
  std::function<void()> stop_;
};

}  // namespace sonopipe
