// The PUB socket: results as [topic][ResultHeader][payload] on topic "result/<pipeline>/<output>",
// and the heartbeat as [topic "status"][Status]. Safe to call from several threads (one mutex
// around the socket).
//
// Each subscriber has its own queue in ZeroMQ, bounded in bytes by publish.max_queued_bytes:
// ZeroMQ bounds a queue in messages only (ZMQ_SNDHWM, per subscriber), so the queue holds
// max_queued_bytes / (largest result message so far) messages, less the one being written into
// the connection, at least 1 and at most publish.high_water_mark. The limit is applied to every
// connected subscriber when it falls (a larger result shape) and whenever a subscriber connected
// (libzmq gives a new connection the bind-time high_water_mark until then). A result that finds a
// subscriber's queue full is dropped for that subscriber alone (daemon/subscriber_watch.h counts
// it). Result payloads are handed to ZeroMQ without copying; the bytes ZeroMQ still holds are
// counted (bytes_held). After a subscriber left, the next heartbeats return the freed heap to the
// system, so a stalled subscriber that left leaves the daemon's RSS near where it was before.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "daemon/subscriber_watch.h"
#include "runtime/device_lane.h"
#include "sonopipe/v1/result.pb.h"

namespace sonopipe {

struct PublishLimits {
  int high_water_mark = 1000;          // messages per subscriber queue, at most
  std::size_t max_queued_bytes = 128 << 20;  // bytes per subscriber queue, at most
};

struct PublishStats {
  std::size_t max_queued_bytes = 0;
  std::size_t queue_messages = 0;         // per subscriber queue now
  std::size_t largest_message_bytes = 0;  // of the results so far (0: none yet)
  std::size_t bytes_held = 0;             // result bytes ZeroMQ holds (shared by its queues)
  std::uint64_t results_dropped = 0;      // for subscribers, those that left included
  bool subscribers_watched = false;       // false with security.curve (no per-subscriber counts)
  std::vector<SubscriberInfo> subscribers;
};

// Without a subscriber watch: result bytes ZeroMQ let go of after which the heartbeat hands the
// heap's free memory back to the system.
inline constexpr std::size_t kTrimAfterFreedBytes = std::size_t(32) << 20;
// Heartbeats that do so after a subscriber came or left (its memory is freed over the next frames).
inline constexpr int kTrimHeartbeats = 5;

// Messages per subscriber queue for results of up to `message_bytes` (see above).
std::size_t queue_messages_for(const PublishLimits& limits, std::size_t message_bytes);

inline constexpr const char* kStatusTopic = "status";
std::string result_topic(const std::string& pipeline, const std::string& output);

// The header a result carries (timing.published_ns is filled in by the caller).
v1::ResultHeader result_header(const PublishedResult& result);

class Publisher {
 public:
  // `configure` sets socket options (CURVE) before the bind; a socket it gives a monitor of its own
  // (CURVE) gets no subscriber watch.
  Publisher(zmq::context_t& context, const std::string& endpoint, PublishLimits limits,
            const std::function<void(zmq::socket_t&)>& configure = {});

  // Sends the payload without copying when the result has an owner (see PublishedResult).
  void publish_result(const PublishedResult& result);
  // Also the heartbeat's upkeep: applies the queue limit to new subscribers, returns freed memory.
  void publish_status(const v1::Status& status);
  PublishStats stats();
  // Gives queued messages up to `milliseconds` to leave, then closes the socket.
  void close(int linger_milliseconds);

 private:
  // The payload as a message that references it (or a copy of it when it has no owner) and
  // counts its bytes in bytes_held until ZeroMQ lets go of it.
  zmq::message_t payload_message(const PublishedResult& result);
  void note_message_bytes(std::size_t bytes);  // lowers the queue limit for a larger message
  void apply_queue_limit();                    // to every subscriber connected now
  void return_freed_memory(bool subscriber_left);

  zmq::socket_t socket_;
  const PublishLimits limits_;
  std::unique_ptr<SubscriberWatch> subscribers_;  // null with CURVE
  std::mutex mutex_;
  std::string header_bytes_;  // reused between results
  std::size_t largest_message_bytes_ = 0;
  std::size_t queue_messages_ = 0;
  bool limit_pending_ = false;  // changed, or a subscriber connected, since it was last applied
  std::shared_ptr<std::atomic<std::size_t>> bytes_held_ = std::make_shared<std::atomic<std::size_t>>(0);
  std::size_t held_peak_since_trim_ = 0;
  int trim_heartbeats_left_ = 0;
};

}  // namespace sonopipe
