// The ingest socket: reads [FrameHeader][payload] messages (PULL = lossless, SUB = live), checks
// each one (framing, header, schema, payload size, frame limit, NaN/Inf policy), and hands valid
// frames to the dispatcher. Every refused frame is counted by reason and logged at a limited rate.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>

#include <zmq.hpp>

#include "runtime/frame_queue.h"
#include "daemon/config.h"
#include "wire/line_limiter.h"
#include "daemon/reject_log.h"
#include "daemon/sequence_tracker.h"

namespace sonopipe {

// Header parts are small; the allowance keeps ZMQ_MAXMSGSIZE from cutting a legal header.
constexpr std::size_t kHeaderAllowanceBytes = 1 << 20;
// After a stop and the sweep, how long ingest goes on counting (not handling) what is still ready.
constexpr std::chrono::milliseconds kStopDiscard{500};
// Streams whose sequence numbers ingest remembers (gap counting); the least recently seen is forgotten.
constexpr std::size_t kTrackedStreams = 4096;

// True when every value of a float16/float32/complex64/float64 payload is finite (other types: true).
bool payload_is_finite(DType dtype, const void* data, std::size_t bytes);

class Ingest {
 public:
  // `dispatch` returns false when no pipeline takes the frame.
  using Dispatch = std::function<bool(InputFrame&&)>;

  // `configure` sets socket options (CURVE) before the bind.
  Ingest(zmq::context_t& context, const DaemonConfig& config, Dispatch dispatch, RejectLog& rejects,
         const std::function<void(zmq::socket_t&)>& configure = {});

  // Reads until `stop` is set (checked at least every 100 ms), then handles what ZeroMQ already
  // holds for us like any other frame (up to twice the socket's receive high-water mark, so a
  // sender that never stops cannot keep the daemon reading), and reads and counts, without
  // handling, what is still ready after that (for at most kStopDiscard): frames in ZeroMQ's
  // buffers at a stop are processed or counted, never lost silently. Runs on its own thread.
  void run(const std::atomic<bool>& stop);
  std::uint64_t received() const { return received_.load(std::memory_order_relaxed); }
  std::uint64_t read_at_stop() const { return read_at_stop_.load(std::memory_order_relaxed); }
  std::uint64_t discarded_at_stop() const { return discarded_at_stop_.load(std::memory_order_relaxed); }
  std::uint64_t missing() const { return missing_.load(std::memory_order_relaxed); }

 private:
  void handle(std::vector<zmq::message_t>& parts, std::size_t part_count);  // parts: the first 3 kept
  // Reads and handles the messages ready now while `keep_going()`; returns how many it completed.
  template <typename KeepGoing>
  std::size_t read_ready(KeepGoing keep_going);

  zmq::socket_t socket_;
  const std::size_t max_frame_bytes_;
  const NonFinitePolicy non_finite_;
  Dispatch dispatch_;
  RejectLog& rejects_;
  std::atomic<std::uint64_t> received_{0};
  std::atomic<std::uint64_t> read_at_stop_{0}, discarded_at_stop_{0};
  std::uint64_t stop_sweep_limit_ = 0;  // messages handled after a stop
  std::vector<zmq::message_t> parts_;  // the message being read (ingest thread only)
  std::size_t part_count_ = 0;
  std::atomic<std::uint64_t> missing_{0};                   // sequence gaps, all streams
  SequenceTracker sequences_{kTrackedStreams};  // ingest thread only
  LineLimiter gap_lines_, forgotten_lines_;                         // ingest thread only
};

}  // namespace sonopipe
