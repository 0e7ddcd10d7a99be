// The bounded queue between ingest and one pipeline's executor, with its overflow policy:
// `block` makes the producer wait (lossless: the ingest socket stops reading and ZeroMQ's high
// water mark pushes back on the sender), `drop_oldest` discards the oldest queued frame to make
// room (live: the newest data wins) and counts it.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include "sdk/frame.h"

namespace sonopipe {

struct FrameTimes;  // runtime/host_timeline.h

enum class OverflowPolicy { block, drop_oldest };

std::string_view overflow_policy_name(OverflowPolicy policy);  // "block", "drop_oldest"
bool parse_overflow_policy(std::string_view name, OverflowPolicy& out);

// A validated frame on its way to a pipeline. The payload bytes are shared (one frame may feed
// several pipelines) and stay owned by whatever received them (e.g. a ZeroMQ message).
struct InputFrame {
  FrameMeta meta;
  std::shared_ptr<const std::byte> payload;
  std::size_t payload_bytes = 0;
  std::int64_t received_ns = 0;  // wall clock, ns since the Unix epoch
  // The payload lives in pinned host memory: the CUDA path copies it to the device directly
  // instead of staging it through the slot's pinned buffer, and lets go of it (payload.reset())
  // as soon as that copy is done, from a CUDA host function: its owner's release must make no
  // CUDA call (daemon/shm_ingest.cpp: the slot goes back to the producers).
  bool payload_pinned = false;
  // The parameter generation the frame runs with, stated by whoever hands it to a device lane
  // (PipelineExecutor over several devices: the pipeline's generation when it dispatched the frame,
  // so every lane switches on the same frame). The default: the newest the lane has.
  std::uint64_t param_generation = std::numeric_limits<std::uint64_t>::max();
  // Where the frame's trip is noted (SONOPIPE_HOST_TIMELINE, runtime/host_timeline.h); null: nowhere.
  FrameTimes* times = nullptr;
};

class FrameQueue {
 public:
  FrameQueue(std::size_t capacity, OverflowPolicy policy);

  // Enqueues `frame`. With `block` it waits while the queue is full; with `drop_oldest` it drops
  // the oldest queued frame instead. Returns false (frame discarded) once the queue is closed.
  bool push(InputFrame frame);
  // Waits for a frame; returns nullopt once the queue is closed and empty.
  std::optional<InputFrame> pop();
  // No more pushes; pop() drains what is queued, then reports the end.
  void close();

  std::size_t depth() const;
  std::size_t capacity() const { return ring_.size(); }
  std::uint64_t dropped() const;
  OverflowPolicy policy() const { return policy_; }

 private:
  std::vector<std::optional<InputFrame>> ring_;  // fixed capacity, allocated once
  std::size_t head_ = 0, count_ = 0;
  std::uint64_t dropped_ = 0;
  bool closed_ = false;
  OverflowPolicy policy_;
  mutable std::mutex mutex_;
  std::condition_variable not_empty_, not_full_;
};

}  // namespace sonopipe
