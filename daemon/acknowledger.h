// Delivery acknowledgement for ZeroMQ ingest (docs/wire-protocol.md, "Acknowledgement"): a PUB
// socket on ingest.ack_endpoint on which the daemon tells each sender that asked (FrameHeader
// sender_id/send_index) which of its messages it accepted and refused, as ranges of send indices.
// One topic per sender ("ack/<sender id>"), so a sender's SUB receives its own acknowledgements only.
// Cumulative: published before the ingest dispatches the next frame and after the messages just
// read, and again every kRefresh while the sender was active within kForgetAfter, so a
// subscription that joined late or an acknowledgement lost on the way costs nothing but time.
// Owned and called by the ingest thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>

#include <zmq.hpp>

#include "wire/delivery.h"

namespace sonopipe {

class Acknowledger {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr auto kRefresh = std::chrono::milliseconds(100);  // the standing repeat
  static constexpr auto kForgetAfter = std::chrono::seconds(30);    // a sender silent this long is not repeated
  static constexpr std::size_t kMaxSenders = 1024;                  // least recently active forgotten

  // Binds `endpoint`; `configure` sets socket options (CURVE) before the bind.
  Acknowledger(zmq::context_t& context, const std::string& endpoint,
               const std::function<void(zmq::socket_t&)>& configure = {});

  // What became of a message (senders that asked only): accepted (or a duplicate) or refused.
  void record(const wire::DeliveryTag& tag, bool accepted, Clock::time_point now);
  // Whether the message a resend replaces was accepted by this daemon.
  bool already_accepted(const wire::DeliveryTag& tag) const;
  // Publishes the senders recorded since their last acknowledgement, and every active sender once
  // per kRefresh.
  void publish(Clock::time_point now);

  std::uint64_t published() const { return published_; }
  std::uint64_t instance() const { return instance_; }

 private:
  struct Sender {
    wire::IndexRanges accepted, refused;
    Clock::time_point last_activity{};
    bool changed = false;
  };
  void send(std::uint64_t sender_id, Sender& sender);

  zmq::socket_t socket_;
  std::uint64_t instance_;
  std::unordered_map<std::uint64_t, Sender> senders_;
  Clock::time_point last_refresh_{};
  bool any_changed_ = false;  // a sender recorded since the last publish
  std::uint64_t published_ = 0;
};

}  // namespace sonopipe
