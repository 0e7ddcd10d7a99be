#include "daemon/publisher.h"

#include "daemon/endpoint.h"

#include <malloc.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "wire/wire.h"

namespace sonopipe {
namespace {

std::int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string result_topic(const std::string& pipeline, const std::string& output) {
  return "result/" + pipeline + "/" + output;
}

v1::ResultHeader result_header(const PublishedResult& result) {
  v1::ResultHeader header;
  header.set_schema_version(wire::kSchemaVersion);
  header.set_pipeline(result.pipeline);
  header.set_output(result.output);
  header.set_stream_id(result.frame.stream_id);
  header.set_input_sequence(result.frame.sequence);
  header.set_acquisition_time_ns(result.frame.acquisition_time_ns);
  header.set_input_kind(wire::frame_kind_to_proto(result.frame.kind));
  header.set_element_type(wire::dtype_to_proto(result.spec.dtype));
  for (const Axis& axis : result.spec.axes) {
    v1::Axis* out = header.add_axes();
    out->set_name(axis.name);
    out->set_size(static_cast<std::uint64_t>(axis.size));
    out->set_spacing(axis.spacing);
    out->set_unit(axis.unit);
    out->set_origin(axis.origin);
  }
  header.set_unit(result.spec.unit);
  v1::Timing* timing = header.mutable_timing();
  timing->set_received_ns(result.timing.received_ns);
  timing->set_compute_start_ns(result.timing.compute_start_ns);
  timing->set_compute_end_ns(result.timing.compute_end_ns);
  header.set_backend(std::string(backend_name(result.backend)));
  // The frame's free-form attributes (probe, sequence, slice layout) travel with its results.
  for (const auto& [key, value] : result.frame.attributes) (*header.mutable_attributes())[key] = value;
  return header;
}

std::size_t queue_messages_for(const PublishLimits& limits, std::size_t message_bytes) {
  // One message more than the queue holds is being written into the connection.
  const std::size_t fit = limits.max_queued_bytes / std::max<std::size_t>(1, message_bytes);
  return std::clamp<std::size_t>(fit > 0 ? fit - 1 : 0, 1, static_cast<std::size_t>(limits.high_water_mark));
}

Publisher::Publisher(zmq::context_t& context, const std::string& endpoint, PublishLimits limits,
                     const std::function<void(zmq::socket_t&)>& configure)
    : socket_(context, zmq::socket_type::pub), limits_(limits),
      queue_messages_(static_cast<std::size_t>(limits.high_water_mark)) {
  socket_.set(zmq::sockopt::sndhwm, limits_.high_water_mark);
  if (configure) configure(socket_);
  else subscribers_ = std::make_unique<SubscriberWatch>(context, socket_, "publish");
  socket_.bind(endpoint);
  spdlog::info("publish: bound to {} (at most {} bytes and {} messages queued per subscriber)", endpoint,
               limits_.max_queued_bytes, limits_.high_water_mark);
  if (reachable_beyond_loopback(endpoint))
    spdlog::warn("publish: {} is reachable from other machines: anyone who reaches it receives every result; "
                 "bind 127.0.0.1 or ipc:// unless this is what you want", endpoint);
}

void Publisher::publish_result(const PublishedResult& result) {
  v1::ResultHeader header = result_header(result);
  std::lock_guard lock(mutex_);
  header.mutable_timing()->set_published_ns(wall_ns());
  header.SerializeToString(&header_bytes_);
  const std::string topic = result_topic(result.pipeline, result.output);
  note_message_bytes(topic.size() + header_bytes_.size() + result.bytes);
  if (subscribers_) subscribers_->before_result(queue_messages_);
  zmq::message_t payload = payload_message(result);
  held_peak_since_trim_ = std::max(held_peak_since_trim_, bytes_held_->load(std::memory_order_relaxed));
  socket_.send(zmq::buffer(topic), zmq::send_flags::sndmore);
  socket_.send(zmq::buffer(header_bytes_), zmq::send_flags::sndmore);
  socket_.send(payload, zmq::send_flags::none);
  // (After a send: the socket has taken in the connections that arrived meanwhile.)
  if (subscribers_ && subscribers_->read_events()) {
    limit_pending_ = true;
    trim_heartbeats_left_ = kTrimHeartbeats;  // (also when one left: the next heartbeats return its memory)
  }
  if (limit_pending_) apply_queue_limit();
}

zmq::message_t Publisher::payload_message(const PublishedResult& result) {
  // Zero copy: the message references the executor's result buffer and holds a reference to it
  // until ZeroMQ has written it to every subscriber (or dropped it), when the free function lets go.
  struct Held {
    std::shared_ptr<const void> owner;
    std::vector<std::byte> copy;  // when the result has no owner
    std::size_t bytes;
    std::shared_ptr<std::atomic<std::size_t>> bytes_held;
  };
  auto* held = new Held{result.owner, {}, result.bytes, bytes_held_};
  const void* data = result.data;
  if (!result.owner) {
    const auto* bytes = static_cast<const std::byte*>(result.data);
    held->copy.assign(bytes, bytes + result.bytes);
    data = held->copy.data();
  }
  bytes_held_->fetch_add(result.bytes, std::memory_order_relaxed);
  return zmq::message_t(const_cast<void*>(data), result.bytes, [](void*, void* hint) {
    auto* done = static_cast<Held*>(hint);
    done->bytes_held->fetch_sub(done->bytes, std::memory_order_relaxed);
    delete done;
  }, held);
}

void Publisher::note_message_bytes(std::size_t bytes) {
  if (bytes <= largest_message_bytes_) return;
  largest_message_bytes_ = bytes;
  const std::size_t messages = queue_messages_for(limits_, bytes);
  if (messages == queue_messages_) return;
  spdlog::info("publish: results of up to {} bytes: at most {} of them queued per subscriber "
               "(publish.max_queued_bytes {})", bytes, messages, limits_.max_queued_bytes);
  queue_messages_ = messages;
  limit_pending_ = true;
}

void Publisher::apply_queue_limit() {
  // libzmq applies ZMQ_SNDHWM to the connections the socket holds now (not to a connection it has
  // not taken in yet: that one gets the bind-time value until the next call).
  socket_.set(zmq::sockopt::sndhwm, static_cast<int>(queue_messages_));
  limit_pending_ = false;
}

void Publisher::return_freed_memory(bool subscriber_left) {
  // glibc keeps freed heap memory for reuse: a stalled subscriber that held hundreds of MB and left
  // would leave the RSS there. After a subscriber left (without a watch: once ZeroMQ let go of
  // kTrimAfterFreedBytes), the next few heartbeats give the free heap back, so that the result
  // buffers the executors release on their next frames are returned too.
  const std::size_t held = bytes_held_->load(std::memory_order_relaxed);
  const bool released = subscribers_ ? subscriber_left : held_peak_since_trim_ >= held + kTrimAfterFreedBytes;
  if (released) trim_heartbeats_left_ = kTrimHeartbeats;
  held_peak_since_trim_ = held;
  if (trim_heartbeats_left_ == 0) return;
  --trim_heartbeats_left_;
  malloc_trim(0);
}

void Publisher::publish_status(const v1::Status& status) {
  std::string bytes = status.SerializeAsString();
  std::lock_guard lock(mutex_);
  socket_.send(zmq::buffer(std::string_view(kStatusTopic)), zmq::send_flags::sndmore);
  socket_.send(zmq::buffer(bytes), zmq::send_flags::none);
  const std::size_t before = subscribers_ ? subscribers_->subscribers().size() : 0;
  if (subscribers_) subscribers_->read_events();
  const bool subscriber_left = subscribers_ && subscribers_->subscribers().size() < before;
  apply_queue_limit();  // reaches subscribers that connected since the last result
  return_freed_memory(subscriber_left);
}

PublishStats Publisher::stats() {
  std::lock_guard lock(mutex_);
  PublishStats stats{.max_queued_bytes = limits_.max_queued_bytes, .queue_messages = queue_messages_,
                     .largest_message_bytes = largest_message_bytes_,
                     .bytes_held = bytes_held_->load(std::memory_order_relaxed),
                     .subscribers_watched = subscribers_ != nullptr};
  if (subscribers_) {
    stats.results_dropped = subscribers_->results_dropped_total();
    stats.subscribers = subscribers_->subscribers();
  }
  return stats;
}

void Publisher::close(int linger_milliseconds) {
  std::lock_guard lock(mutex_);
  socket_.set(zmq::sockopt::linger, linger_milliseconds);
  socket_.close();
}

}  // namespace sonopipe
