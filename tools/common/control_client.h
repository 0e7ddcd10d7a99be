// The client side of the daemon's control socket (proto/sonopipe/v1/control.proto): one
// ControlRequest, one ControlReply, with a timeout so a dead daemon cannot hang a tool.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <zmq.hpp>

#include "sonopipe/v1/control.pb.h"
#include "tools/common/zmq_io.h"

namespace sonopipe::tools {

// "status" or "stop". nullopt when no reply came within the timeout (or the reply is not a
// ControlReply). A fresh REQ socket per call: a timed-out REQ cannot be reused.
std::optional<v1::ControlReply> control_request(zmq::context_t& context, const std::string& endpoint,
                                                const std::string& command, std::chrono::milliseconds timeout,
                                                const CurveClient& curve = {});
// Any request (get / set / list carry a parameter name and a value).
std::optional<v1::ControlReply> control_request(zmq::context_t& context, const std::string& endpoint,
                                                v1::ControlRequest request, std::chrono::milliseconds timeout,
                                                const CurveClient& curve = {});

}  // namespace sonopipe::tools
