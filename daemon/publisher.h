// The PUB socket: results as [topic][ResultHeader][payload] on topic "result/<pipeline>/<output>",
// and the heartbeat as [topic "status"][Status]. Safe to call from several threads (one mutex
// around the socket).
//
// A subscriber that stops reading costs at most publish.max_queued_bytes: ZeroMQ queues up to
// publish.high_water_mark messages per subscriber, and the subscriber watch (daemon/
// subscriber_watch.h) cuts a stalled subscriber whose backlog passes the byte bound (one that
// keeps reading only past kReadingAllowance x the bound); the results it lost are counted for it. With CURVE the socket's monitor belongs to the CURVE gate: no watch, and a
// queue is bounded by high_water_mark messages only. Result payloads are handed to ZeroMQ without
// copying where they have an owner (see PublishedResult); the others are copied into reused copy
// blocks (daemon/copy_blocks.h). The bytes ZeroMQ still holds are counted (bytes_held), and the
// watch learns which results ZeroMQ let go of (they leave the subscribers' backlogs). After a subscriber left, the
// heartbeats return the freed heap to the system for a while, so a stalled subscriber that left
// leaves the daemon's RSS near where it was before.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "daemon/copy_blocks.h"
#include "daemon/subscriber_watch.h"
#include "runtime/device_lane.h"
#include "runtime/host_path_switches.h"
#include "sonopipe/v1/result.pb.h"

namespace sonopipe {

struct PublishLimits {
  int high_water_mark = 1000;                 // messages per subscriber queue, at most
  std::size_t max_queued_bytes = 128 << 20;   // a stalled subscriber's backlog, at most
  // A lagging subscriber whose connection has not drained for this long is stalled (cut at the
  // bound); one that drains may fall behind by up to kReadingAllowance x the bound.
  std::chrono::steady_clock::duration stall_timeout = std::chrono::milliseconds(100);
};

struct PublishStats {
  std::size_t max_queued_bytes = 0;
  std::size_t bytes_held = 0;             // result bytes ZeroMQ holds (one copy, shared by its queues)
  std::uint64_t results_dropped = 0;      // for subscribers, those that left included
  std::uint64_t subscribers_cut = 0;      // connections shut down for passing the bound
  bool subscribers_watched = false;       // false with security.curve (no per-subscriber counts)
  std::vector<SubscriberInfo> subscribers;
};

// Without a subscriber watch: result bytes ZeroMQ let go of after which the heartbeat hands the
// heap's free memory back to the system.
inline constexpr std::size_t kTrimAfterFreedBytes = std::size_t(32) << 20;
// How long after a subscriber left the heartbeats do so (its memory is freed over the next
// frames: the executors free unused spare result buffers after a second).
inline constexpr std::chrono::seconds kTrimPeriod{5};
// Zero-copy results up to this size are read once before they are sent (Publisher::publish_result):
// a larger one would not stay in the cache until the I/O thread reaches its end.
inline constexpr std::size_t kTouchMaxBytes = std::size_t(32) << 20;

// Copy blocks (daemon/copy_blocks.h) are kept for reuse once ZeroMQ let go of their results, up to
// publish.max_queued_bytes (what one subscriber's backlog may hold anyway: 64 copies of a 2 MB
// result by default). A status heartbeat drops them when no copy was made since the heartbeat
// before, and after a subscriber left.

inline constexpr const char* kStatusTopic = "status";
// ZMQ_AFFINITY bit of the context's I/O thread that carries the subscribers' connections (when the
// context has two or more): not the ingest's (daemon/ingest.h), so reading frames and writing
// results never wait for each other.
inline constexpr std::uint64_t kPublishIoThread = 1u << 1;
std::string result_topic(const std::string& pipeline, const std::string& output);

// The header a result carries (timing.published_ns is filled in by the caller).
v1::ResultHeader result_header(const PublishedResult& result);

class Publisher {
 public:
  // `configure` sets socket options (CURVE) before the bind; a socket it configures gets no
  // subscriber watch (its monitor is the CURVE gate's).
  Publisher(zmq::context_t& context, const std::string& endpoint, PublishLimits limits,
            const std::function<void(zmq::socket_t&)>& configure = {});

  // Sends the payload without copying when the result has an owner (see PublishedResult).
  void publish_result(const PublishedResult& result);
  // Also the heartbeat's upkeep: reads the watch's events, returns freed memory.
  void publish_status(const v1::Status& status);
  PublishStats stats();
  // The blocks results are copied into (tests: reuse).
  const CopyBlocks& copy_blocks() const { return *copies_; }
  // Gives queued messages up to `milliseconds` to leave, then closes the socket.
  void close(int linger_milliseconds);

 private:
  // The payload as a message that references it (or a copy of it: `copy`) and counts its bytes in
  // bytes_held until ZeroMQ lets go of it, when it tells the watch (result `sequence`).
  zmq::message_t payload_message(const PublishedResult& result, bool copy, std::uint64_t sequence);
  void read_subscriber_events();
  void return_freed_memory();

  zmq::socket_t socket_;
  const PublishLimits limits_;
  const HostPathSwitches switches_;  // SONOPIPE_PUBLISH_COPY, _TOUCH, SONOPIPE_COPY_HUGE_PAGES
  std::unique_ptr<SubscriberWatch> subscribers_;  // null with CURVE
  std::mutex mutex_;
  std::string header_bytes_;  // reused between results
  std::shared_ptr<CopyBlocks> copies_;
  std::uint64_t copies_at_last_status_ = 0;
  std::shared_ptr<std::atomic<std::size_t>> bytes_held_ = std::make_shared<std::atomic<std::size_t>>(0);
  std::size_t held_peak_since_trim_ = 0;
  std::chrono::steady_clock::time_point trim_until_;
};

}  // namespace sonopipe
