#include "daemon/ingest.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstring>

#include "daemon/endpoint.h"
#include "wire/wire.h"

namespace sonopipe {
namespace {

std::int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch()).count();
}

// IEEE 754: a value is NaN or Inf exactly when its exponent bits are all ones.
template <typename Bits>
bool all_exponents_finite(const void* data, std::size_t count, Bits exponent_mask) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  bool finite = true;
  for (std::size_t i = 0; i < count; ++i) {
    Bits value;
    std::memcpy(&value, bytes + i * sizeof(Bits), sizeof(Bits));  // payloads need not be aligned
    finite &= (value & exponent_mask) != exponent_mask;
  }
  return finite;
}

}  // namespace

bool payload_is_finite(DType dtype, const void* data, std::size_t bytes) {
  switch (dtype) {
    case DType::float16: return all_exponents_finite<std::uint16_t>(data, bytes / 2, 0x7c00u);
    case DType::float32:
    case DType::complex64: return all_exponents_finite<std::uint32_t>(data, bytes / 4, 0x7f800000u);
    case DType::float64: return all_exponents_finite<std::uint64_t>(data, bytes / 8, 0x7ff0000000000000ull);
    default: return true;
  }
}

Ingest::Ingest(zmq::context_t& context, const DaemonConfig& config, Dispatch dispatch, RejectLog& rejects,
               const std::function<void(zmq::socket_t&)>& configure)
    : socket_(context, config.ingest_pattern == IngestPattern::pull ? zmq::socket_type::pull
                                                                    : zmq::socket_type::sub),
      max_frame_bytes_(config.max_frame_bytes), non_finite_(config.non_finite),
      dispatch_(std::move(dispatch)), rejects_(rejects) {
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
  if (config.ingest_pattern == IngestPattern::sub) socket_.set(zmq::sockopt::subscribe, "");
  if (configure) configure(socket_);
  if (config.ingest_bind) socket_.bind(config.ingest_endpoint);
  else socket_.connect(config.ingest_endpoint);
  spdlog::info("ingest: {} {} {}", ingest_pattern_name(config.ingest_pattern),
               config.ingest_bind ? "bound to" : "connected to", config.ingest_endpoint);
  if (config.ingest_bind && reachable_beyond_loopback(config.ingest_endpoint))
    spdlog::warn("ingest: {} is reachable from other machines: anyone who reaches it can send frames; "
                 "bind 127.0.0.1 or ipc:// unless this is what you want", config.ingest_endpoint);
}

void Ingest::run(const std::atomic<bool>& stop) {
  zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
  while (!stop.load()) {
    if (zmq::poll(&item, 1, std::chrono::milliseconds(100)) == 0) continue;
    read_ready([&] { return !stop.load(); });
  }
  // Messages already in ZeroMQ's buffers were sent before the stop: handle them too, up to a bound.
  std::uint64_t swept = 0;
  auto under_limit = [&] { return swept < stop_sweep_limit_; };
  while (under_limit()) {
    const std::size_t completed = read_ready(under_limit);
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
  const std::int64_t received_ns = wall_ns();
  received_.fetch_add(1, std::memory_order_relaxed);
  if (part_count != 2) {
    rejects_.reject(wire::RejectReason::malformed_message,
                    "message has " + std::to_string(part_count) + " parts, expected [header][payload]");
    return;
  }
  InputFrame frame;
  try {
    frame.meta = wire::decode_frame(parts[0].data(), parts[0].size(), parts[1].size(), max_frame_bytes_);
  } catch (const wire::WireError& e) {
    rejects_.reject(e.reason, e.what());
    return;
  }
  // Gaps in a stream's sequence numbers are frames lost before they reached us: by the sender, by
  // a SUB socket's full queue, or by libzmq, which refuses a message over ZMQ_MAXMSGSIZE by
  // dropping the sender's connection (a PUSH sender reconnects and goes on).
  bool forgot = false;
  if (const std::uint64_t lost = sequences_.arrive(frame.meta.stream_id, frame.meta.sequence, forgot); lost > 0) {
    missing_.fetch_add(lost);
    if (gap_lines_.allow(LineLimiter::Clock::now())) {
      const std::uint64_t held_back = gap_lines_.take_held_back();
      spdlog::warn("ingest: stream {}: {} frame(s) missing before sequence {} (lost upstream, or over "
                   "max_frame_bytes + 1 MiB, which libzmq refuses by dropping the connection){}",
                   frame.meta.stream_id, lost, frame.meta.sequence,
                   held_back > 0 ? " (and " + std::to_string(held_back) + " more gaps since the last line)" : "");
    }
  }
  if (forgot && forgotten_lines_.allow(LineLimiter::Clock::now()))
    spdlog::warn("ingest: more than {} streams; the least recently seen is forgotten (its next frame starts afresh)",
                 kTrackedStreams);
  // (Counted before the checks below: a frame refused after its header was read did arrive.)
  if (non_finite_ == NonFinitePolicy::reject &&
      !payload_is_finite(frame.meta.payload.dtype, parts[1].data(), parts[1].size())) {
    rejects_.reject(wire::RejectReason::non_finite,
                    "stream " + std::to_string(frame.meta.stream_id) + " sequence " +
                        std::to_string(frame.meta.sequence) + ": payload holds NaN or Inf (non_finite: reject)");
    return;
  }
  // The payload stays in ZeroMQ's buffer; the pipelines share it until they are done with it.
  auto message = std::make_shared<zmq::message_t>(std::move(parts[1]));
  frame.payload_bytes = message->size();
  frame.payload = std::shared_ptr<const std::byte>(message, message->data<const std::byte>());
  frame.received_ns = received_ns;
  const std::uint32_t stream_id = frame.meta.stream_id;
  const std::string kind(frame_kind_name(frame.meta.kind));
  if (!dispatch_(std::move(frame)))
    rejects_.reject(wire::RejectReason::no_pipeline,
                    "no pipeline takes kind " + kind + " from stream " + std::to_string(stream_id));
}

}  // namespace sonopipe
