#include "daemon/publisher.h"

#include "daemon/endpoint.h"

#include <spdlog/spdlog.h>

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

Publisher::Publisher(zmq::context_t& context, const std::string& endpoint, int high_water_mark,
                     const std::function<void(zmq::socket_t&)>& configure)
    : socket_(context, zmq::socket_type::pub) {
  socket_.set(zmq::sockopt::sndhwm, high_water_mark);
  if (configure) configure(socket_);
  socket_.bind(endpoint);
  spdlog::info("publish: bound to {}", endpoint);
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
  socket_.send(zmq::buffer(topic), zmq::send_flags::sndmore);
  socket_.send(zmq::buffer(header_bytes_), zmq::send_flags::sndmore);
  if (!result.owner) {
    socket_.send(zmq::const_buffer(result.data, result.bytes), zmq::send_flags::none);
    return;
  }
  // Zero copy: the message references the executor's result buffer and holds a reference to it
  // until ZeroMQ has written it out (or dropped it), when the free function lets go.
  auto* keep = new std::shared_ptr<const void>(result.owner);
  zmq::message_t payload(const_cast<void*>(result.data), result.bytes,
                         [](void*, void* hint) { delete static_cast<std::shared_ptr<const void>*>(hint); }, keep);
  socket_.send(payload, zmq::send_flags::none);
}

void Publisher::publish_status(const v1::Status& status) {
  std::string bytes = status.SerializeAsString();
  std::lock_guard lock(mutex_);
  socket_.send(zmq::buffer(std::string_view(kStatusTopic)), zmq::send_flags::sndmore);
  socket_.send(zmq::buffer(bytes), zmq::send_flags::none);
}

void Publisher::close(int linger_milliseconds) {
  std::lock_guard lock(mutex_);
  socket_.set(zmq::sockopt::linger, linger_milliseconds);
  socket_.close();
}

}  // namespace sonopipe
