#include "tools/replay/acknowledged_sender.h"

#include <stdexcept>
#include <vector>

#include "tools/common/stop_signal.h"

namespace sonopipe::replay {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPollSlice = std::chrono::milliseconds(50);  // longest wait between looks at stop and peers

}  // namespace

AcknowledgedSender::AcknowledgedSender(zmq::context_t& context, const Options& options)
    : context_(context), options_(options), acks_(context, zmq::socket_type::sub) {
  acks_.set(zmq::sockopt::rcvhwm, 0);  // acknowledgements are small; never drop one here
  acks_.set(zmq::sockopt::linger, 0);
  acks_.set(zmq::sockopt::subscribe, wire::ack_topic(ledger_.sender_id()));
  tools::apply_curve_client(acks_, options.curve);
  tools::attach(acks_, options.ack_endpoint, false);
  open_socket();
  if (!watch_->wait(options.connect_timeout)) {
    if (tools::stop_requested()) {
      interrupted_ = true;
      return;
    }
    throw std::runtime_error("no receiver attached to " + options.endpoint + " within " +
                             std::to_string(options.connect_timeout.count()) +
                             " ms (is the daemon running with ingest.pattern pull?)");
  }
  handshakes_seen_ = watch_->handshakes();
}

void AcknowledgedSender::open_socket() {
  watch_.reset();  // stops monitoring the socket it watched
  socket_ = zmq::socket_t(context_, zmq::socket_type::push);
  socket_.set(zmq::sockopt::sndhwm, options_.send_high_water_mark);
  socket_.set(zmq::sockopt::linger, 0);
  // Queue only on a completed connection: frames are never parked for a daemon that is not there.
  socket_.set(zmq::sockopt::immediate, 1);
  tools::apply_curve_client(socket_, options_.curve);
  watch_.emplace(context_, socket_);
  tools::attach(socket_, options_.endpoint, false);
  handshakes_seen_ = disconnections_seen_ = 0;
}

void AcknowledgedSender::drop_queue_if_disconnected() {
  watch_->update();
  if (watch_->disconnections() == disconnections_seen_) return;
  // Frames ZeroMQ still holds for the dead connection would reach the next daemon before the
  // resends, out of order. They are outstanding in the ledger: with resend they go again, in order,
  // once a daemon attaches; without, they are reported as not delivered.
  open_socket();
}

bool AcknowledgedSender::reconnected() {
  drop_queue_if_disconnected();
  watch_->update();
  if (watch_->handshakes() == handshakes_seen_) return false;
  handshakes_seen_ = watch_->handshakes();
  return true;
}

void AcknowledgedSender::read_acknowledgements(std::chrono::milliseconds wait) {
  zmq::pollitem_t item{acks_.handle(), 0, ZMQ_POLLIN, 0};
  try {
    if (zmq::poll(&item, 1, wait) == 0) return;
  } catch (const zmq::error_t& e) {
    if (e.num() != EINTR) throw;
    return;
  }
  std::vector<zmq::message_t> parts;
  wire::Acknowledgement ack;
  while (tools::receive_message(acks_, parts, true))
    if (parts.size() == 2 && wire::decode_ack(parts[1].data(), parts[1].size(), ack)) ledger_.apply(ack);
}

AcknowledgedSender::Wait AcknowledgedSender::transmit(const std::string& header, zmq::message_t& payload) {
  while (true) {
    read_acknowledgements(std::chrono::milliseconds(0));
    if (tools::stop_requested()) return Wait::stopped;
    if (options_.resend && reconnected()) return Wait::reconnected;
    drop_queue_if_disconnected();
    // Only once the daemon's handshake has been seen here: ZeroMQ may take a frame as soon as it
    // attaches, and one sent before we noticed would reach a restarted daemon ahead of the
    // resends, then be resent itself (a duplicate).
    if (watch_->connected()) {
      try {
        if (socket_.send(zmq::buffer(header), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
          // ZeroMQ queues a multipart message whole once its first part is in.
          socket_.send(payload, zmq::send_flags::none);
          away_since_.reset();
          return Wait::sent;
        }
      } catch (const zmq::error_t& e) {
        if (e.num() != EINTR) throw;
      }
    }
    const auto now = Clock::now();
    if (watch_->connected()) {
      away_since_.reset();
    } else {
      if (!away_since_) away_since_ = now;
      const auto allowed = options_.resend ? options_.connect_timeout : options_.gone_after;
      if (now - *away_since_ > allowed) {
        gone_ = true;
        return Wait::gone;
      }
    }
    // Wait for room in the queue or an acknowledgement, whichever first (while no daemon is seen
    // attached, for an acknowledgement or the next look at the socket's events).
    zmq::pollitem_t items[2] = {{acks_.handle(), 0, ZMQ_POLLIN, 0}, {socket_.handle(), 0, ZMQ_POLLOUT, 0}};
    try {
      zmq::poll(items, watch_->connected() ? 2 : 1, kPollSlice);
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
    }
  }
}

AcknowledgedSender::Outcome AcknowledgedSender::resend_outstanding(const Remake& remake) {
  // What was not acknowledged went down with the old connection (its socket went with its queue,
  // and nothing was sent on the new one before its handshake was seen); acknowledgements already
  // on their way have been read by now.
  read_acknowledgements(std::chrono::milliseconds(0));
  for (const wire::DeliveryLedger::Frame& lost : ledger_.undelivered()) {
    // Acknowledgements read while the earlier ones went out may have settled this one: sent again
    // as a first send, a daemon could not tell it from a new frame and would process it twice.
    if (!ledger_.is_outstanding(lost.send_index)) continue;
    OutgoingFrame frame = remake(lost.cookie);
    const wire::DeliveryTag tag = ledger_.send(lost.stream_id, lost.sequence, lost.cookie, lost.send_index);
    wire::stamp_delivery(frame.header, tag);
    while (true) {
      const Wait wait = transmit(frame.header, frame.payload);
      if (wait == Wait::sent) break;
      if (wait == Wait::gone) return Outcome::gone;
      if (wait == Wait::stopped) return Outcome::stopped;
      return resend_outstanding(remake);  // reconnected again: start over with what is still outstanding
    }
    ++resent_;
  }
  return Outcome::sent;
}

AcknowledgedSender::Outcome AcknowledgedSender::send(OutgoingFrame& frame, std::uint64_t cookie, const Remake& remake) {
  if (gone_) return Outcome::gone;
  const wire::DeliveryTag tag = ledger_.send(frame.stream_id, frame.sequence, cookie);
  wire::stamp_delivery(frame.header, tag);
  while (true) {
    const Wait wait = transmit(frame.header, frame.payload);
    if (wait == Wait::sent) return Outcome::sent;
    if (wait == Wait::reconnected) {
      // The lost frames first, in their order; this one is not sent yet (take it out of the resend).
      ledger_.withdraw(tag.send_index);
      const Outcome resent = resend_outstanding(remake);
      if (resent != Outcome::sent) return resent;
      const wire::DeliveryTag again = ledger_.send(frame.stream_id, frame.sequence, cookie);
      wire::stamp_delivery(frame.header, again);
      continue;
    }
    ledger_.withdraw(tag.send_index);
    return wait == Wait::gone ? Outcome::gone : Outcome::stopped;
  }
}

void AcknowledgedSender::settle(const Remake& remake) {
  auto last_progress = Clock::now();
  std::size_t outstanding = ledger_.outstanding();
  while (ledger_.outstanding() > 0 && !tools::stop_requested()) {
    read_acknowledgements(kPollSlice);
    const auto now = Clock::now();
    if (ledger_.outstanding() != outstanding) {
      outstanding = ledger_.outstanding();
      last_progress = now;
    }
    if (options_.resend && reconnected()) {
      if (resend_outstanding(remake) != Outcome::sent) return;
      last_progress = now;
      continue;
    }
    drop_queue_if_disconnected();
    if (watch_->connected()) {
      away_since_.reset();
    } else {
      if (!away_since_) away_since_ = now;
      if (now - *away_since_ > (options_.resend ? options_.connect_timeout : options_.gone_after)) {
        gone_ = true;
        return;
      }
    }
    if (now - last_progress > options_.connect_timeout) return;
  }
}

void AcknowledgedSender::close() {
  socket_.close();
  acks_.close();
}

}  // namespace sonopipe::replay
