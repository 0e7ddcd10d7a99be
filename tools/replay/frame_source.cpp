#include "tools/replay/frame_source.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "src/wire/wire.h"

namespace sonopipe::replay {

FrameSource::FrameSource(const std::string& path, const std::vector<std::uint32_t>& streams,
                         std::size_t preload_limit_bytes)
    : reader_(std::make_unique<recording::Reader>(path)) {
  const std::vector<std::uint32_t> available = reader_->streams();
  for (std::uint32_t id : streams)
    if (std::find(available.begin(), available.end(), id) == available.end())
      throw std::invalid_argument("'" + path + "' has no stream " + std::to_string(id));
  for (const recording::FrameRef& ref : reader_->frame_order())
    if (streams.empty() || std::find(streams.begin(), streams.end(), ref.stream_id) != streams.end())
      order_.push_back(ref);
  for (const recording::FrameRef& ref : order_) ++frames_per_stream_[ref.stream_id];
  // Every frame of a stream has one shape: the first frame gives the stream's frame size.
  for (const auto& [stream_id, count] : frames_per_stream_)
    total_bytes_ += count * reader_->read_frame(stream_id, 0).payload.size();
  if (total_bytes_ <= preload_limit_bytes) {
    frames_.reserve(order_.size());
    for (const recording::FrameRef& ref : order_) frames_.push_back(reader_->read_frame(ref.stream_id, ref.index));
  }
}

std::vector<std::int64_t> FrameSource::times_ns() const {
  std::vector<std::int64_t> times;
  for (const recording::FrameRef& ref : order_) times.push_back(ref.acquisition_time_ns);
  return times;
}

OutgoingFrame FrameSource::prepare(std::size_t index, std::size_t loop, std::int64_t recorded_period_ns,
                                   bool keep_headers) {
  const recording::FrameRef& ref = order_.at(index);
  OutgoingFrame out;
  out.stream_id = ref.stream_id;
  recording::Frame streamed;
  const recording::Frame* frame = nullptr;
  if (!frames_.empty()) {
    frame = &frames_[index];
    // Zero copy: ZeroMQ reads the preloaded bytes in place; they outlive the socket.
    out.payload = zmq::message_t(const_cast<std::byte*>(frame->payload.data()), frame->payload.size(), nullptr, nullptr);
  } else {
    streamed = reader_->read_frame(ref.stream_id, ref.index);
    frame = &streamed;
    out.payload = zmq::message_t(streamed.payload.data(), streamed.payload.size());
  }
  FrameMeta meta = frame->meta;
  if (!keep_headers && loop > 0) {
    meta.sequence += loop * frames_per_stream_.at(ref.stream_id);
    meta.acquisition_time_ns += static_cast<std::int64_t>(loop) * recorded_period_ns;
  }
  out.header = wire::frame_header_from_meta(meta).SerializeAsString();
  return out;
}

}  // namespace sonopipe::replay
