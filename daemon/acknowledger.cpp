#include "daemon/acknowledger.h"

#include <spdlog/spdlog.h>

#include "daemon/endpoint.h"

namespace sonopipe {

Acknowledger::Acknowledger(zmq::context_t& context, const std::string& endpoint,
                           const std::function<void(zmq::socket_t&)>& configure)
    : socket_(context, zmq::socket_type::pub), instance_(wire::new_sender_id()) {
  // Acknowledgements are cumulative: one that a slow subscriber cannot take is dropped and the
  // next carries it, so a few queued per subscriber are enough.
  socket_.set(zmq::sockopt::sndhwm, 64);
  socket_.set(zmq::sockopt::linger, 0);
  if (configure) configure(socket_);
  socket_.bind(endpoint);
  spdlog::info("ingest: delivery acknowledgements published on {}", endpoint);
  if (reachable_beyond_loopback(endpoint))
    spdlog::warn("ingest: {} (acknowledgements) is reachable from other machines", endpoint);
}

void Acknowledger::record(const wire::DeliveryTag& tag, bool accepted, Clock::time_point now) {
  if (!tag.requested()) return;
  auto found = senders_.find(tag.sender_id);
  if (found == senders_.end()) {
    if (senders_.size() >= kMaxSenders) {
      auto oldest = senders_.begin();
      for (auto it = senders_.begin(); it != senders_.end(); ++it)
        if (it->second.last_activity < oldest->second.last_activity) oldest = it;
      senders_.erase(oldest);
    }
    found = senders_.try_emplace(tag.sender_id).first;
  }
  Sender& sender = found->second;
  (accepted ? sender.accepted : sender.refused).add(tag.send_index);
  sender.last_activity = now;
  sender.changed = true;
  any_changed_ = true;
}

bool Acknowledger::already_accepted(const wire::DeliveryTag& tag) const {
  const auto found = senders_.find(tag.sender_id);
  return found != senders_.end() && tag.resend_of != 0 && found->second.accepted.contains(tag.resend_of);
}

void Acknowledger::send(std::uint64_t sender_id, Sender& sender) {
  const std::string body = wire::encode_ack(wire::Acknowledgement{
      .sender_id = sender_id, .daemon_instance = instance_, .accepted = sender.accepted.ranges(),
      .refused = sender.refused.ranges()});
  const std::string topic = wire::ack_topic(sender_id);
  // Never waits: a PUB drops what a subscriber cannot take (the next acknowledgement carries it).
  socket_.send(zmq::buffer(topic), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
  socket_.send(zmq::buffer(body), zmq::send_flags::dontwait);
  sender.changed = false;
  ++published_;
}

void Acknowledger::publish(Clock::time_point now) {
  const bool refresh = now - last_refresh_ >= kRefresh;
  // Called before every frame's dispatch: nothing to look through unless a sender changed.
  if (!refresh && !any_changed_) return;
  if (refresh) last_refresh_ = now;
  for (auto& [sender_id, sender] : senders_) {
    const bool standing = refresh && now - sender.last_activity < kForgetAfter;
    if (sender.changed || standing) send(sender_id, sender);
  }
  any_changed_ = false;
}

}  // namespace sonopipe
