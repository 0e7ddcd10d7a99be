// The PUB socket: results as [topic][ResultHeader][payload] on topic "result/<pipeline>/<output>",
// and the heartbeat as [topic "status"][Status]. Safe to call from several threads (one mutex
// around the socket).
#pragma once

#include <functional>
#include <mutex>
#include <string>

#include <zmq.hpp>

#include "runtime/device_lane.h"
#include "sonopipe/v1/result.pb.h"

namespace sonopipe {

inline constexpr const char* kStatusTopic = "status";
std::string result_topic(const std::string& pipeline, const std::string& output);

// The header a result carries (timing.published_ns is filled in by the caller).
v1::ResultHeader result_header(const PublishedResult& result);

class Publisher {
 public:
  // `configure` sets socket options (CURVE) before the bind.
  Publisher(zmq::context_t& context, const std::string& endpoint, int high_water_mark,
            const std::function<void(zmq::socket_t&)>& configure = {});

  // Sends the payload without copying when the result has an owner (see PublishedResult).
  void publish_result(const PublishedResult& result);
  void publish_status(const v1::Status& status);
  // Gives queued messages up to `milliseconds` to leave, then closes the socket.
  void close(int linger_milliseconds);

 private:
  zmq::socket_t socket_;
  std::mutex mutex_;
  std::string header_bytes_;  // reused between results
};

}  // namespace sonopipe
