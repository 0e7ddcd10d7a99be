// The frames of a recorded acquisition in replay order (a sonopipe recording: acquisition time
// over the chosen streams; UFF and Verasonics files: their frame axis, through
// tools/formats/acquisition_reader.h), held in memory when they fit under a limit (sends then copy
// nothing) or read from the file one by one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "tools/common/recording.h"
#include "tools/formats/acquisition_reader.h"

namespace sonopipe::replay {

struct OutgoingFrame {
  std::uint32_t stream_id = 0;
  std::uint64_t sequence = 0;  // as in the header
  std::string header;      // serialized FrameHeader
  zmq::message_t payload;  // refers to preloaded memory, or owns a copy read from the file
};

class FrameSource {
 public:
  // streams: the stream ids to replay (empty = all). Throws formats::FormatError / std::invalid_argument.
  FrameSource(const std::string& path, const std::vector<std::uint32_t>& streams, std::size_t preload_limit_bytes,
              const formats::ImportOptions& import_options = {});

  std::string description() const { return description_; }  // the detected format, e.g. "uff v1.2.0 (...)"
  std::size_t size() const { return order_.size(); }
  std::vector<std::int64_t> times_ns() const;
  std::size_t total_bytes() const { return total_bytes_; }  // payload bytes of one pass
  bool preloaded() const { return !frames_.empty() || order_.empty(); }

  // Frame `index` of loop `loop`. From the second loop on, sequence numbers continue (advanced by
  // the stream's frame count per loop) and acquisition times advance by `recorded_period_ns` per
  // loop, so the receiver sees one continuous acquisition; keep_headers sends them unchanged.
  OutgoingFrame prepare(std::size_t index, std::size_t loop, std::int64_t recorded_period_ns, bool keep_headers);

 private:
  struct Entry {
    std::size_t index;  // in the reader's replay order
    std::uint32_t stream_id;
    std::int64_t acquisition_time_ns;
  };
  std::unique_ptr<formats::AcquisitionReader> reader_;
  std::string description_;
  std::vector<Entry> order_;
  std::map<std::uint32_t, std::size_t> frames_per_stream_;
  std::vector<recording::Frame> frames_;  // preloaded, in replay order
  std::size_t total_bytes_ = 0;
};

}  // namespace sonopipe::replay
