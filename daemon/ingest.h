// The ingest socket: reads [FrameHeader][payload] messages (PULL = lossless, SUB = live), checks
// each one (framing, header, schema, payload size, frame limit, NaN/Inf policy), and hands valid
// frames to the dispatcher. Every refused frame is counted by reason and logged at a limited rate.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>

#include <zmq.hpp>

#include "daemon/acknowledger.h"
#include "daemon/frame_admission.h"

namespace sonopipe {

// Header parts are small; the allowance keeps ZMQ_MAXMSGSIZE from cutting a legal header.
constexpr std::size_t kHeaderAllowanceBytes = 1 << 20;
// ZMQ_AFFINITY bit of the context's I/O thread that carries the ingest sockets' connections (when
// the context has two or more; the publisher takes kPublishIoThread, daemon/publisher.h).
constexpr std::uint64_t kIngestIoThread = 1u << 0;
// After a stop and the sweep, how long ingest goes on counting (not handling) what is still ready.
constexpr std::chrono::milliseconds kStopDiscard{500};
class Ingest {
 public:
  // `dispatch` returns false when no pipeline takes the frame.
  using Dispatch = FrameAdmission::Dispatch;

  // `configure` sets socket options (CURVE) before the bind.
  Ingest(zmq::context_t& context, const DaemonConfig& config, Dispatch dispatch, RejectLog& rejects,
         const std::function<void(zmq::socket_t&)>& configure = {});

  // Reads until `stop` is set (checked at least every 100 ms), then handles what ZeroMQ already
  // holds for us like any other frame (up to twice the socket's receive high-water mark, so a
  // sender that never stops cannot keep the daemon reading), and reads and counts, without
  // handling, what is still ready after that (for at most kStopDiscard): frames in ZeroMQ's
  // buffers at a stop are processed or counted, never lost silently. Runs on its own thread.
  void run(const std::atomic<bool>& stop);
  std::uint64_t received() const { return admission_.received(); }
  void set_timeline(HostTimeline* timeline) { admission_.set_timeline(timeline); }
  std::uint64_t read_at_stop() const { return read_at_stop_.load(std::memory_order_relaxed); }
  std::uint64_t discarded_at_stop() const { return discarded_at_stop_.load(std::memory_order_relaxed); }
  std::uint64_t missing() const { return admission_.missing(); }
  std::uint64_t duplicates() const { return admission_.duplicates(); }
  // Acknowledgement messages published (0 without ingest.ack_endpoint).
  std::uint64_t acknowledgements() const { return acknowledgements_.load(std::memory_order_relaxed); }

 private:
  void handle(std::vector<zmq::message_t>& parts, std::size_t part_count);  // parts: the first 3 kept
  void acknowledge();  // publishes what is due (Acknowledger::publish)
  // Reads and handles the messages ready now while `keep_going()`; returns how many it completed.
  template <typename KeepGoing>
  std::size_t read_ready(KeepGoing keep_going);

  zmq::socket_t socket_;
  FrameAdmission admission_;
  std::unique_ptr<Acknowledger> acknowledger_;  // ingest.ack_endpoint; null without one
  std::atomic<std::uint64_t> acknowledgements_{0};
  std::atomic<std::uint64_t> read_at_stop_{0}, discarded_at_stop_{0};
  std::uint64_t stop_sweep_limit_ = 0;  // messages handled after a stop
  std::vector<zmq::message_t> parts_;  // the message being read (ingest thread only)
  std::size_t part_count_ = 0;
};

}  // namespace sonopipe
