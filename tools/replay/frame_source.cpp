#include "tools/replay/frame_source.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "wire/wire.h"

namespace sonopipe::replay {

FrameSource::FrameSource(const std::string& path, const std::vector<std::uint32_t>& streams,
                         std::size_t preload_limit_bytes, const formats::ImportOptions& import_options)
    : reader_(formats::open_acquisition(path, import_options)), description_(reader_->description()) {
  std::vector<Entry> all;
  for (std::size_t i = 0; i < reader_->frame_count(); ++i) {
    const formats::AcquisitionReader::FrameInfo info = reader_->frame_info(i);
    all.push_back({i, info.stream_id, info.acquisition_time_ns});
  }
  for (std::uint32_t id : streams)
    if (std::none_of(all.begin(), all.end(), [id](const Entry& e) { return e.stream_id == id; }))
      throw std::invalid_argument("'" + path + "' has no stream " + std::to_string(id));
  for (const Entry& entry : all)
    if (streams.empty() || std::find(streams.begin(), streams.end(), entry.stream_id) != streams.end())
      order_.push_back(entry);
  // Every frame of a stream has one shape: the stream's first frame gives its frame size.
  std::map<std::uint32_t, std::size_t> first_of_stream;
  for (const Entry& entry : order_) {
    ++frames_per_stream_[entry.stream_id];
    first_of_stream.try_emplace(entry.stream_id, entry.index);
  }
  for (const auto& [stream_id, count] : frames_per_stream_)
    total_bytes_ += count * reader_->read_frame(first_of_stream.at(stream_id)).payload.size();
  if (total_bytes_ <= preload_limit_bytes) {
    frames_.reserve(order_.size());
    for (const Entry& entry : order_) frames_.push_back(reader_->read_frame(entry.index));
  }
}

std::vector<std::int64_t> FrameSource::times_ns() const {
  std::vector<std::int64_t> times;
  for (const Entry& entry : order_) times.push_back(entry.acquisition_time_ns);
  return times;
}

OutgoingFrame FrameSource::prepare(std::size_t index, std::size_t loop, std::int64_t recorded_period_ns,
                                   bool keep_headers) {
  const Entry& ref = order_.at(index);
  OutgoingFrame out;
  out.stream_id = ref.stream_id;
  recording::Frame streamed;
  const recording::Frame* frame = nullptr;
  if (!frames_.empty()) {
    frame = &frames_[index];
    // Zero copy: ZeroMQ reads the preloaded bytes in place; they outlive the socket.
    out.payload = zmq::message_t(const_cast<std::byte*>(frame->payload.data()), frame->payload.size(), nullptr, nullptr);
  } else {
    streamed = reader_->read_frame(ref.index);
    frame = &streamed;
    out.payload = zmq::message_t(streamed.payload.data(), streamed.payload.size());
  }
  FrameMeta meta = frame->meta;
  if (!keep_headers && loop > 0) {
    meta.sequence += loop * frames_per_stream_.at(ref.stream_id);
    meta.acquisition_time_ns += static_cast<std::int64_t>(loop) * recorded_period_ns;
  }
  out.sequence = meta.sequence;
  out.header = wire::frame_header_from_meta(meta).SerializeAsString();
  return out;
}

}  // namespace sonopipe::replay
