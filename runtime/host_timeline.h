// A debug timeline of each frame's trip through the daemon's host path (issue 23). It is off unless
// the environment asks for it (the frame path then pays one null-pointer test per point).
//
// SONOPIPE_HOST_TIMELINE=<file>: every frame of the shared ZeroMQ ingest (not shm://, not a
// pipeline's own socket) gets a record (a ring indexed by its sequence number,
// kHostTimelineFrames long) in which ingest and the device lane note when the frame passed each
// point (steady clock, ns: CLOCK_MONOTONIC, comparable across processes of one host); the GPU's
// own instants come from the slot's events, placed on the host clock through an event recorded at
// the lane's start (the GPU's clock drifts against the host's, about 10 us per second on the H100
// host: intervals between two GPU points or two host points are exact, GPU-to-host ones within
// that). The daemon writes the records to <file> (CSV, one line per frame) when it stops.
// sonopipe-bench core --timeline reads it back (docs/host-path.md, "Measuring it").
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sonopipe {

// The points of a frame's trip, in the order it passes them (threads in brackets).
enum class HostPoint : int {
  received,          // [ingest] the whole message is out of ZeroMQ
  admitted,          // [ingest] checked and queued (after any wait for room in the queue)
  popped,            // [submit] taken from the queue
  setup_ready,       // [submit] its setup in place: a committed live change switched to, or the
                     //          stages configured for a new description (from popped: what a
                     //          change or a new description costs the frame's path on the host)
  slot,              // [submit] its slot is free
  staging_begin,     // [submit] the host's part of the upload starts (the driver's copy from
  staging_end,       //          pageable memory, or ours into the slot) ... and ends
  issued,            // [submit] H2D, stages and D2H queued on the slot's stream
  payload_released,  // [submit] the ZeroMQ message let go of
  gpu_start,         // [GPU] the stream reached the H2D
  gpu_h2d_end,       // [GPU] H2D done
  gpu_stages_end,    // [GPU] last stage done
  gpu_done,          // [GPU] D2H done
  done_seen,         // [completion] the host saw the frame done
  published,         // [completion] its results handed to the publisher
  slot_free,         // [completion] the slot free for the next frame
  count
};
constexpr std::size_t kHostPoints = static_cast<std::size_t>(HostPoint::count);
std::string_view host_point_name(HostPoint point);

// One frame's instants (0: not passed). Written by the threads that pass the points.
struct FrameTimes {
  std::atomic<std::uint64_t> sequence{0};
  std::array<std::atomic<std::int64_t>, kHostPoints> at{};
  void mark(HostPoint point, std::int64_t steady_ns) {
    at[static_cast<std::size_t>(point)].store(steady_ns, std::memory_order_relaxed);
  }
};

constexpr std::size_t kHostTimelineFrames = std::size_t(1) << 16;

std::int64_t host_steady_ns();  // CLOCK_MONOTONIC, ns
inline void mark(FrameTimes* times, HostPoint point) {
  if (times) times->mark(point, host_steady_ns());
}

class HostTimeline {
 public:
  HostTimeline(std::string path, std::size_t frames = kHostTimelineFrames);
  // From SONOPIPE_HOST_TIMELINE; null when it is unset or empty.
  static std::unique_ptr<HostTimeline> from_environment();
  // The record of a frame arriving with `sequence`: emptied first unless it is the untouched
  // record of that sequence (a frame of another sequence, or an earlier one of this, had it).
  FrameTimes* frame(std::uint64_t sequence);
  // The record frame `sequence` left (null when another sequence holds its place in the ring).
  const FrameTimes* find(std::uint64_t sequence) const;
  // Writes every record that has a received instant to the path, oldest sequence first. Call when
  // no thread marks any more.
  void write() const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::unique_ptr<FrameTimes[]> records_;
  std::size_t frames_;
};

}  // namespace sonopipe
