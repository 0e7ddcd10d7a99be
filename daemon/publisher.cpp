#include "daemon/publisher.h"

#include "daemon/endpoint.h"

#include <malloc.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "wire/wire.h"
#include "wire/wall_clock.h"

namespace sonopipe {
namespace {

void read_every_line(const void* data, std::size_t bytes) {
  constexpr std::size_t kCacheLine = 64;
  const auto* line = static_cast<const volatile unsigned char*>(data);
  for (std::size_t offset = 0; offset < bytes; offset += kCacheLine) static_cast<void>(line[offset]);
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
  header.set_param_generation(result.param_generation);
  // The frame's free-form attributes (probe, sequence, slice layout) travel with its results.
  for (const auto& [key, value] : result.frame.attributes) (*header.mutable_attributes())[key] = value;
  // What the stage states about this output (e.g. nyquist_velocity_m_per_s) overrides a frame attribute of that name.
  for (const auto& [key, value] : result.spec.attributes) (*header.mutable_attributes())[key] = value;
  return header;
}

Publisher::Publisher(zmq::context_t& context, const std::string& endpoint, PublishLimits limits,
                     const std::function<void(zmq::socket_t&)>& configure)
    : socket_(context, zmq::socket_type::pub), limits_(limits), switches_(host_path_switches_from_environment()),
      copies_(std::make_shared<CopyBlocks>(limits.max_queued_bytes, switches_.copy_huge_pages)) {
  socket_.set(zmq::sockopt::sndhwm, limits_.high_water_mark);
  if (context.get(zmq::ctxopt::io_threads) >= 2) socket_.set(zmq::sockopt::affinity, kPublishIoThread);
  if (configure) {
    configure(socket_);
  } else {
    subscribers_ = std::make_unique<SubscriberWatch>(context, socket_, "publish", limits_.max_queued_bytes,
                                                     static_cast<std::size_t>(limits_.high_water_mark),
                                                     limits_.stall_timeout);
  }
  socket_.bind(endpoint);
  spdlog::info("publish: bound to {} (per subscriber at most {} messages queued{})", endpoint,
               limits_.high_water_mark,
               subscribers_ ? ", cut past a backlog of " + std::to_string(limits_.max_queued_bytes) +
                                  " bytes when stalled, " + std::to_string(kReadingAllowance * limits_.max_queued_bytes) +
                                  " while reading"
                            : std::string(" (security.curve: max_queued_bytes does not apply)"));
  if (reachable_beyond_loopback(endpoint))
    spdlog::warn("publish: {} is reachable from other machines: anyone who reaches it receives every result; "
                 "bind 127.0.0.1 or ipc:// unless this is what you want", endpoint);
}

void Publisher::publish_result(const PublishedResult& result) {
  // A result ZeroMQ sends from the lane's buffer was just written there by a D2H (DMA), so no cache
  // holds it: the I/O thread's copy into the socket would read it from memory. While the I/O thread
  // is still writing earlier results (the host path's bottleneck when results come faster than it
  // writes them), reading this one here first brings it into the shared cache by the time its turn
  // comes. With nothing queued it is sent at once: reading it first would only add to its latency
  // (and leave it in this core's cache for the I/O thread to fetch). docs/host-path.md.
  // (SONOPIPE_PUBLISH_TOUCH=0 turns this off, an experiment.)
  if (switches_.publish_touch && result.backend == Backend::cuda && result.owner && !result.claim &&
      result.bytes <= kTouchMaxBytes && bytes_held_->load(std::memory_order_relaxed) > 0)
    read_every_line(result.data, result.bytes);
  v1::ResultHeader header = result_header(result);
  std::lock_guard lock(mutex_);
  header.mutable_timing()->set_published_ns(wall_clock_ns());
  header.SerializeToString(&header_bytes_);
  const std::string topic = result_topic(result.pipeline, result.output);
  const std::size_t message_bytes = topic.size() + header_bytes_.size() + result.bytes;
  const std::uint64_t sequence = subscribers_ ? subscribers_->before_result(message_bytes) : 0;
  // A result in a shared-memory slot is sent from there only while every subscriber keeps up: a
  // lagging one would keep the slot from the shm subscribers (and the executors) for long.
  const bool copy = switches_.publish_copy == HostPathSwitches::PublishCopy::all || !result.owner ||
                    (result.claim && (!subscribers_ || subscribers_->any_lagging()));
  zmq::message_t payload = payload_message(result, copy, sequence);
  held_peak_since_trim_ = std::max(held_peak_since_trim_, bytes_held_->load(std::memory_order_relaxed));
  socket_.send(zmq::buffer(topic), zmq::send_flags::sndmore);
  socket_.send(zmq::buffer(header_bytes_), zmq::send_flags::sndmore);
  socket_.send(payload, zmq::send_flags::none);
  read_subscriber_events();
}

void Publisher::read_subscriber_events() {
  // A subscriber that left (or was cut) freed its queue: return the memory (return_freed_memory).
  if (subscribers_ && subscribers_->read_events()) trim_until_ = std::chrono::steady_clock::now() + kTrimPeriod;
}

zmq::message_t Publisher::payload_message(const PublishedResult& result, bool copy, std::uint64_t sequence) {
  // Zero copy: the message references the executor's result buffer and holds a reference to it
  // until ZeroMQ has written it to every subscriber (or dropped it), when the free function lets go.
  // A copy goes into a block of copies_ (daemon/copy_blocks.h), which the free function hands back.
  // The free function also tells the subscriber watch that the result is in no queue any more.
  struct Held {
    std::shared_ptr<const void> owner;
    std::shared_ptr<CopyBlocks> copies;  // with `block`: the copy's
    CopyBlocks::Block block{};
    std::vector<std::byte> fresh;  // SONOPIPE_PUBLISH_COPY=fresh
    std::size_t bytes;
    std::shared_ptr<std::atomic<std::size_t>> bytes_held;
    std::shared_ptr<ReleasedResults> released;  // null without a watch
    std::uint64_t sequence;
  };
  auto* held = new Held{.owner = copy ? nullptr : result.owner, .bytes = result.bytes, .bytes_held = bytes_held_,
                        .released = subscribers_ ? subscribers_->releases() : nullptr, .sequence = sequence};
  const void* data = result.data;
  if (copy) {
    try {
      if (switches_.publish_copy == HostPathSwitches::PublishCopy::fresh) {
        const auto* bytes = static_cast<const std::byte*>(result.data);
        held->fresh.assign(bytes, bytes + result.bytes);
        data = held->fresh.data();
      } else {
        held->copies = copies_;
        held->block = copies_->take(result.bytes);
        std::memcpy(held->block.data, result.data, result.bytes);
        data = held->block.data;
      }
    } catch (...) {
      delete held;
      throw;
    }
  }
  bytes_held_->fetch_add(result.bytes, std::memory_order_relaxed);
  return zmq::message_t(const_cast<void*>(data), result.bytes, [](void*, void* hint) {
    auto* done = static_cast<Held*>(hint);
    done->bytes_held->fetch_sub(done->bytes, std::memory_order_relaxed);
    if (done->copies) done->copies->give_back(done->block);
    if (done->released) done->released->released(done->sequence);
    delete done;
  }, held);
}

void Publisher::return_freed_memory() {
  // glibc keeps freed heap memory for reuse: a stalled subscriber that held hundreds of MB and left
  // would leave the RSS there. After a subscriber left or was cut (read_subscriber_events; without a watch: once ZeroMQ
  // let go of kTrimAfterFreedBytes), the heartbeats of the next kTrimPeriod give the free heap
  // back, so that the spare result buffers the executors free a second later are returned too.
  const std::size_t held = bytes_held_->load(std::memory_order_relaxed);
  const auto now = std::chrono::steady_clock::now();
  if (!subscribers_ && held_peak_since_trim_ >= held + kTrimAfterFreedBytes) trim_until_ = now + kTrimPeriod;
  held_peak_since_trim_ = held;
  // Copies stopped (receivers keep up again): the kept blocks go back to the system.
  const std::uint64_t copies = copies_->blocks_taken();
  if (copies == copies_at_last_status_ || now < trim_until_) copies_->drop_kept();
  copies_at_last_status_ = copies;
  if (now < trim_until_) malloc_trim(0);
}

void Publisher::publish_status(const v1::Status& status) {
  std::string bytes = status.SerializeAsString();
  std::lock_guard lock(mutex_);
  socket_.send(zmq::buffer(std::string_view(kStatusTopic)), zmq::send_flags::sndmore);
  socket_.send(zmq::buffer(bytes), zmq::send_flags::none);
  read_subscriber_events();
  return_freed_memory();
}

PublishStats Publisher::stats() {
  std::lock_guard lock(mutex_);
  PublishStats stats{.max_queued_bytes = limits_.max_queued_bytes,
                     .bytes_held = bytes_held_->load(std::memory_order_relaxed),
                     .subscribers_watched = subscribers_ != nullptr};
  if (subscribers_) {
    stats.results_dropped = subscribers_->results_dropped_total();
    stats.subscribers_cut = subscribers_->cut_total();
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
