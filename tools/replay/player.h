// Plays a FrameSource to a ZeroMQ endpoint on a Schedule and reports what it did.
// lossless: PUSH, a send blocks while the receiver's queue is full (nothing is lost; lateness
//           shows how far the receiver held the replay back).
// live:     PUB (an XPUB that refuses instead of silently dropping): a frame the queue cannot
//           take is dropped and counted, as a scanner would drop it.
// Either way the replay starts its clock once a receiver is attached (a completed handshake for
// PUSH, a subscription for PUB), so no frame is lost to a slow joiner.
// Several endpoints (--route): one socket each, stream s to endpoint s mod N (stream_route.h); the
// clock starts once every endpoint has its receiver. Lossless, a busy receiver holds back all.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tools/common/zmq_io.h"
#include "tools/replay/frame_source.h"
#include "tools/replay/replay_schedule.h"

namespace sonopipe::replay {

struct PlayerOptions {
  std::vector<std::string> endpoints;   // one socket each; frames routed by route_of(stream id)
  bool bind = false;                    // bind instead of connect
  bool lossless = false;                // PUSH (blocks) instead of PUB (drops)
  std::size_t loops = 1;                // 0 = until stopped
  bool keep_headers = false;            // send loop > 0 headers unchanged
  double late_threshold_ms = 1.0;       // a send started later than this after its due time is "late"
  std::chrono::milliseconds connect_timeout{10000};
  int send_high_water_mark = 16;        // frames queued per peer before PUSH blocks / PUB drops
  tools::CurveClient curve;             // keys for a daemon with security.curve (connect only)
  // The daemon's ingest.ack_endpoint (lossless, one endpoint): frames are numbered and the daemon's
  // acknowledgements read, so the report names the frames it did not take (acknowledged_sender.h).
  std::string ack_endpoint;
  bool resend = false;                  // with ack_endpoint: send unacknowledged frames again on reconnect
};

// A frame the daemon did not acknowledge.
struct FrameId {
  std::uint32_t stream_id = 0;
  std::uint64_t sequence = 0;
};

struct PlayerReport {
  std::size_t frames_sent = 0;
  std::size_t frames_dropped = 0;       // live mode: queue full
  std::size_t bytes_sent = 0;           // payload bytes
  std::vector<std::size_t> frames_per_endpoint;  // sent, parallel to PlayerOptions::endpoints
  std::size_t loops_completed = 0;
  bool interrupted = false;             // stopped by SIGINT/SIGTERM
  double wait_for_receiver_s = 0;
  double duration_s = 0;                // first send started to last send returned
  double drain_s = 0;                   // last send to every queued byte handed to the OS (lossless)
  double scheduled_duration_s = 0;      // due time of the last frame sent
  // shm://, or ZeroMQ with ack_endpoint (the daemon acknowledges what it took): frames the daemon
  // took, and frames sent that it did not take (e.g. the daemon died with them in ZeroMQ's queues).
  bool acknowledged = false;
  std::uint64_t frames_delivered = 0, frames_not_delivered = 0;
  std::string shm_mode;                 // the pool's mode ("lossless" or "live")
  // ZeroMQ with ack_endpoint: which frames were not delivered, frames the daemon read and refused,
  // frames sent again after a reconnection, frames never sent because the daemon was gone, and how
  // many daemon instances acknowledged (2 after a restart).
  std::vector<FrameId> undelivered;
  std::uint64_t frames_refused = 0, frames_resent = 0, frames_not_sent = 0;
  std::size_t daemon_instances = 0;
  std::vector<std::uint64_t> delivered_per_instance;  // in the order the instances answered
  bool daemon_gone = false;
  // Lateness of each send (start of the send minus its due time), timed modes only.
  std::size_t late_frames = 0;
  double lateness_ms_p50 = 0, lateness_ms_p99 = 0, lateness_ms_max = 0;

  // Rates over the intervals between the first and the last send (n frames span n - 1 intervals).
  double frames_per_s() const {
    return duration_s > 0 && frames_sent > 1 ? static_cast<double>(frames_sent - 1) / duration_s : 0.0;
  }
  double bytes_per_s() const {
    return frames_sent > 1 ? frames_per_s() * static_cast<double>(bytes_sent) / static_cast<double>(frames_sent) : 0.0;
  }
};

// Runs the replay; throws std::runtime_error when no receiver attaches within the timeout. An shm://
// endpoint (one, no --bind/--route/CURVE) writes each frame into a slot of the daemon's pool; the
// pool's mode decides lossless or live, and the report says what the daemon acknowledged.
PlayerReport play(FrameSource& source, const Schedule& schedule, const PlayerOptions& options);

// "stream 0 sequence 40-55, 60; stream 1 sequence 7" (sorted; at most 16 ranges, then a count).
std::string describe_frame_ids(const std::vector<FrameId>& frames);

// The report as printed by sonopipe-replay (several lines, no trailing newline).
std::string describe(const PlayerReport& report, const Schedule& schedule, const PlayerOptions& options,
                     const FrameSource& source);

}  // namespace sonopipe::replay
