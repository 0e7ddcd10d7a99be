// A lossless PUSH to one daemon whose ingest acknowledges delivery (ingest.ack_endpoint;
// docs/wire-protocol.md, "Acknowledgement"). Every frame is numbered (wire/delivery.h) and the
// daemon's acknowledgements are read on a SUB, so replay knows which frames the daemon took and
// which it never received (a daemon that died takes ZeroMQ's queued frames with it). Frames are
// queued only on a live connection (ZMQ_IMMEDIATE): while no daemon is attached nothing is sent.
// With `resend`, when a daemon attaches again, every frame not acknowledged is sent again (first,
// in its original order) with resend_of set, so a daemon that had taken it after all does not
// process it twice. When the connection drops, the PUSH socket is made afresh: ZeroMQ would
// otherwise send what it still queued for the dead connection to the next daemon, ahead of the
// resends and out of order (that daemon then counts the resends as duplicates and a false gap).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <zmq.hpp>

#include "tools/common/zmq_io.h"
#include "tools/replay/frame_source.h"
#include "wire/delivery.h"

namespace sonopipe::replay {

class AcknowledgedSender {
 public:
  struct Options {
    std::string endpoint, ack_endpoint;
    int send_high_water_mark = 16;
    tools::CurveClient curve;
    std::chrono::milliseconds connect_timeout{10000};  // first attach; with resend, each return
    bool resend = false;
    // Without resend: how long the daemon may stay away before sending stops (acknowledgements
    // still on their way arrive within it).
    std::chrono::milliseconds gone_after{1000};
  };
  // Re-creates the frame a cookie names, for a resend.
  using Remake = std::function<OutgoingFrame(std::uint64_t cookie)>;
  enum class Outcome { sent, gone, stopped };

  // Connects both sockets and waits for the daemon's handshake; throws std::runtime_error when none
  // comes within connect_timeout. `interrupted()` when a signal came first.
  AcknowledgedSender(zmq::context_t& context, const Options& options);
  bool interrupted() const { return interrupted_; }

  // Sends one frame (waiting while the daemon's queue is full); `cookie` is passed to `remake` for a
  // resend. gone: the daemon left and did not come back in time (the frame was not sent).
  Outcome send(OutgoingFrame& frame, std::uint64_t cookie, const Remake& remake);
  // Waits until every frame sent is acknowledged, the daemon is gone (for good, or, with resend,
  // past connect_timeout), no acknowledgement came for connect_timeout, or a signal.
  void settle(const Remake& remake);
  // Lingers nothing: what was not acknowledged is reported, not silently pushed on.
  void close();

  const wire::DeliveryLedger& ledger() const { return ledger_; }
  std::uint64_t resent() const { return resent_; }
  bool daemon_gone() const { return gone_; }

 private:
  // Header then payload, waiting for room; a reconnection interrupts the wait (so resends go first).
  enum class Wait { sent, reconnected, gone, stopped };
  Wait transmit(const std::string& header, zmq::message_t& payload);
  void read_acknowledgements(std::chrono::milliseconds wait);
  // With resend: sends every outstanding frame again, after a reconnection.
  Outcome resend_outstanding(const Remake& remake);
  bool reconnected();  // a handshake since the last look
  // A disconnection since the last look: the socket and what it queued for the dead connection go
  // (those frames are outstanding in the ledger), and a new socket connects.
  void drop_queue_if_disconnected();
  void open_socket();

  zmq::context_t& context_;
  Options options_;
  zmq::socket_t socket_, acks_;
  std::optional<tools::PeerWatch> watch_;
  wire::DeliveryLedger ledger_;
  std::size_t handshakes_seen_ = 0, disconnections_seen_ = 0;
  std::optional<std::chrono::steady_clock::time_point> away_since_;
  std::uint64_t resent_ = 0;
  bool gone_ = false, interrupted_ = false;
};

}  // namespace sonopipe::replay
