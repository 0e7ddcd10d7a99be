#include "daemon/ingest.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstring>

#include "daemon/endpoint.h"
#include "wire/wire.h"
#include "wire/wall_clock.h"

namespace sonopipe {
Ingest::Ingest(zmq::context_t& context, const DaemonConfig& config, Dispatch dispatch, RejectLog& rejects,
               const std::function<void(zmq::socket_t&)>& configure)
    : socket_(context, config.ingest_pattern == IngestPattern::pull ? zmq::socket_type::pull
                                                                    : zmq::socket_type::sub),
      admission_(config, std::move(dispatch), rejects) {
  // Frames far over the limit are cut by libzmq itself (it drops the sender's connection; the loss
  // shows as a sequence gap, counted and logged in handle()); frames just over it arrive and are
  // refused with reason too_large.
  socket_.set(zmq::sockopt::maxmsgsize,
              static_cast<std::int64_t>(config.max_frame_bytes + kHeaderAllowanceBytes));
  // Few frames wait in the socket: the executor's queue is where frames wait, and a short socket
  // queue makes PUSH senders feel backpressure early instead of buffering gigabytes.
  const std::size_t receive_high_water_mark = std::max<std::size_t>(4, 2 * config.queue_depth);
  socket_.set(zmq::sockopt::rcvhwm, static_cast<int>(receive_high_water_mark));
  stop_sweep_limit_ = 2 * receive_high_water_mark;
  socket_.set(zmq::sockopt::linger, 0);
  // Its connections on the context's first I/O thread, the publisher's on the second
  // (kPublishIoThread): the thread that reads a frame from the kernel never also writes results.
  if (context.get(zmq::ctxopt::io_threads) >= 2) socket_.set(zmq::sockopt::affinity, kIngestIoThread);
  if (config.ingest_pattern == IngestPattern::sub) socket_.set(zmq::sockopt::subscribe, "");
  if (configure) configure(socket_);
  if (config.ingest_bind) socket_.bind(config.ingest_endpoint);
  else socket_.connect(config.ingest_endpoint);
  spdlog::info("ingest: {} {} {}", ingest_pattern_name(config.ingest_pattern),
               config.ingest_bind ? "bound to" : "connected to", config.ingest_endpoint);
  if (config.ingest_bind && reachable_beyond_loopback(config.ingest_endpoint))
    spdlog::warn("ingest: {} is reachable from other machines: anyone who reaches it can send frames; "
                 "bind 127.0.0.1 or ipc:// unless this is what you want", config.ingest_endpoint);
  if (!config.ingest_ack_endpoint.empty()) {
    acknowledger_ = std::make_unique<Acknowledger>(context, config.ingest_ack_endpoint, configure);
    admission_.set_already_accepted(
        [this](const wire::DeliveryTag& tag) { return acknowledger_->already_accepted(tag); });
  }
}

void Ingest::acknowledge() {
  if (!acknowledger_) return;
  acknowledger_->publish(Acknowledger::Clock::now());
  acknowledgements_.store(acknowledger_->published(), std::memory_order_relaxed);
}

void Ingest::run(const std::atomic<bool>& stop) {
  zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
  while (!stop.load()) {
    if (zmq::poll(&item, 1, std::chrono::milliseconds(100)) > 0) read_ready([&] { return !stop.load(); });
    acknowledge();  // what was just read; the standing repeat while idle
  }
  // Messages already in ZeroMQ's buffers were sent before the stop: handle them too, up to a bound.
  std::uint64_t swept = 0;
  auto under_limit = [&] { return swept < stop_sweep_limit_; };
  while (under_limit()) {
    const std::size_t completed = read_ready(under_limit);
    acknowledge();
    if (completed == 0) break;
    swept += completed;
    read_at_stop_.store(swept, std::memory_order_relaxed);
  }
  // Past the bound: count what is still ready (a message cut short by the stop counts too).
  std::uint64_t discarded = parts_.empty() ? 0 : 1;
  const auto until = std::chrono::steady_clock::now() + kStopDiscard;
  for (zmq::message_t part; std::chrono::steady_clock::now() < until && socket_.recv(part, zmq::recv_flags::dontwait);)
    if (!part.more()) ++discarded;
  discarded_at_stop_.store(discarded, std::memory_order_relaxed);
  if (swept > 0 || discarded > 0)
    spdlog::info("ingest: after the stop {} message(s) read from ZeroMQ's buffers and processed, {} more counted "
                 "and discarded", swept, discarded);
}

template <typename KeepGoing>
std::size_t Ingest::read_ready(KeepGoing keep_going) {
  // Drain what is ready without polling again, stopping between parts when asked (a message
  // stopped half-way is completed by the next call). A message is [header][payload]: parts beyond
  // a third are counted and dropped as they arrive, so a message of a million parts is refused
  // without being held in memory.
  std::size_t completed = 0;
  while (keep_going()) {
    zmq::message_t part;
    if (!socket_.recv(part, zmq::recv_flags::dontwait)) break;
    const bool more = part.more();
    if (parts_.size() < 3) parts_.push_back(std::move(part));
    ++part_count_;
    if (more) continue;
    handle(parts_, part_count_);
    parts_.clear();
    part_count_ = 0;
    ++completed;
  }
  return completed;
}

void Ingest::handle(std::vector<zmq::message_t>& parts, std::size_t part_count) {
  // The frames taken so far are acknowledged before this one is dispatched: with overflow: block
  // its dispatch may wait for room in the queue while those frames are processed and published, and
  // a sender whose daemon dies then must not count a frame with a result as not delivered.
  acknowledge();
  const std::int64_t received_ns = wall_clock_ns();
  const std::int64_t received_steady_ns = host_steady_ns();
  if (part_count != 2) {
    admission_.refuse(wire::RejectReason::malformed_message,
                      "message has " + std::to_string(part_count) + " parts, expected [header][payload]");
    return;
  }
  // The payload stays in ZeroMQ's buffer; the pipelines share it until they are done with it.
  auto message = std::make_shared<zmq::message_t>(std::move(parts[1]));
  const std::size_t payload_bytes = message->size();
  wire::DeliveryTag delivery;
  const FrameAdmission::Verdict verdict =
      admission_.admit(parts[0].data(), parts[0].size(),
                       std::shared_ptr<const std::byte>(message, message->data<const std::byte>()), payload_bytes,
                       false, received_ns, &delivery, received_steady_ns);
  if (acknowledger_ && delivery.requested()) {
    // Published before the next frame's dispatch, or when the messages just read are done (run).
    acknowledger_->record(delivery, verdict != FrameAdmission::Verdict::refused, Acknowledger::Clock::now());
  }
}

}  // namespace sonopipe
