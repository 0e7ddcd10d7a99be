// What every ingest does with one received [header][payload] message, whatever carried it
// (ZeroMQ socket or shared-memory slot): decode and check the header against the payload, count
// sequence gaps, apply the NaN/Inf policy, hand the frame to the dispatcher. Every refusal is
// counted by reason and logged at a limited rate. One reader thread calls admit().
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "runtime/frame_queue.h"
#include "runtime/host_timeline.h"
#include "daemon/config.h"
#include "wire/line_limiter.h"
#include "daemon/reject_log.h"
#include "daemon/sequence_tracker.h"

namespace sonopipe {

// Streams whose sequence numbers ingest remembers (gap counting); the least recently seen is forgotten.
constexpr std::size_t kTrackedStreams = 4096;

// True when every value of a float16/float32/complex64/float64 payload is finite (other types: true).
bool payload_is_finite(DType dtype, const void* data, std::size_t bytes);

class FrameAdmission {
 public:
  // `dispatch` returns false when no pipeline takes the frame.
  using Dispatch = std::function<bool(InputFrame&&)>;

  // What admit() did with a message: handed to a pipeline, refused (counted by reason), or not
  // handed on because it is a resend of one this daemon already took (a duplicate).
  enum class Verdict { accepted, refused, duplicate };
  // Whether a resent message (DeliveryTag.resend_of) was already accepted (daemon/acknowledger.h).
  using AlreadyAccepted = std::function<bool(const wire::DeliveryTag&)>;

  FrameAdmission(const DaemonConfig& config, Dispatch dispatch, RejectLog& rejects);
  void set_already_accepted(AlreadyAccepted check) { already_accepted_ = std::move(check); }
  // Notes each admitted frame's trip there (SONOPIPE_HOST_TIMELINE); null: nowhere.
  void set_timeline(HostTimeline* timeline) { timeline_ = timeline; }

  // The payload stays where `payload` points (shared with the pipelines until they are done);
  // `pinned`: it lies in page-locked memory the CUDA path may copy from directly. `delivery` (may
  // be null) receives the sender's delivery numbering when the header could be read.
  // `received_steady_ns`: when the message was complete (host_steady_ns; for the timeline).
  Verdict admit(const void* header, std::size_t header_bytes, std::shared_ptr<const std::byte> payload,
                std::size_t payload_bytes, bool pinned, std::int64_t received_ns,
                wire::DeliveryTag* delivery = nullptr, std::int64_t received_steady_ns = 0);
  // A message refused before admit() (wrong part count, bad slot descriptor): counted as received.
  void refuse(wire::RejectReason reason, const std::string& detail);

  std::uint64_t received() const { return received_.load(std::memory_order_relaxed); }
  std::uint64_t missing() const { return missing_.load(std::memory_order_relaxed); }
  std::uint64_t duplicates() const { return duplicates_.load(std::memory_order_relaxed); }

 private:
  const std::size_t max_frame_bytes_;
  const NonFinitePolicy non_finite_;
  Dispatch dispatch_;
  RejectLog& rejects_;
  std::atomic<std::uint64_t> received_{0};
  std::atomic<std::uint64_t> missing_{0};       // sequence gaps, all streams
  std::atomic<std::uint64_t> duplicates_{0};    // resends of frames already accepted, not processed again
  AlreadyAccepted already_accepted_;
  HostTimeline* timeline_ = nullptr;
  LineLimiter duplicate_lines_;                 // reader thread only
  SequenceTracker sequences_{kTrackedStreams};  // reader thread only
  LineLimiter gap_lines_, forgotten_lines_;     // reader thread only
};

}  // namespace sonopipe
