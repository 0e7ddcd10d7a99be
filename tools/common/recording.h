// sonopipe recordings: HDF5 files written by sonopipe-sim and sonopipe-record, read by
// sonopipe-replay, the tests and the Python package. Layout (format_version 1), documented in
// the README:
//
//   /                       attrs: format = "sonopipe-recording", format_version = 1, created_by,
//                           plus free-form attributes (simulator parameters, ...)
//   /streams/<stream_id>/   raw frames of one stream, in arrival order
//       payload             [N, <frame axes...>] native element type (complex64 as compound
//                           {r, i} float32; int16 IQ keeps its trailing 'iq' axis), one frame per chunk
//       header              [N] variable-length bytes: the serialized sonopipe.v1.FrameHeader
//       sequence            [N] uint64
//       acquisition_time_ns [N] int64
//       received_ns         [N] int64 (0 when written by a simulator)
//       attrs: stream_id, kind, element_type, axis_names, axis_units, axis_spacing, axis_origin,
//              unit (for readers without protobuf; the header stays the source of truth)
//   /results/<pipeline>/<output>/  published results, same datasets with ResultHeader as header,
//                           sequence = input_sequence, received_ns = timing.received_ns;
//                           attrs as for streams plus pipeline, output (no stream_id, kind)
//   /truth/<name>           ground truth a simulator wrote (float64, contiguous; names may nest with
//                           '/'), attrs: unit, axis_names, axis_units, axis_spacing, axis_origin,
//                           and "stream_id" when it belongs to one stream's frames (first axis = frame)
//
// Variable-length header bytes are HDF5 vlen sequences of uint8 (h5py: object array of uint8
// arrays). float16 payloads use h5py's binary16 type. A series keeps one shape and element type;
// a frame of another shape is refused with RecordingError. Reader is not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "sdk/frame.h"
#include "sdk/tensor.h"
#include "sonopipe/v1/result.pb.h"

namespace sonopipe::recording {

constexpr int kFormatVersion = 1;

struct RecordingError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Writer {
 public:
  explicit Writer(const std::string& path);  // creates or truncates
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  void set_attribute(const std::string& key, const std::string& value);
  // Raw frame under /streams/<meta.stream_id>/ (all frames of a stream must share one shape).
  void append_frame(const FrameMeta& meta, const void* payload, std::size_t bytes,
                    std::int64_t received_ns = 0);
  // Result under /results/<header.pipeline()>/<header.output()>/.
  void append_result(const v1::ResultHeader& header, const void* payload, std::size_t bytes);
  // Ground truth under /truth/<name>; values as float64, spec gives axes and unit.
  void write_truth(const std::string& name, const TensorSpec& spec, const std::vector<double>& values,
                   std::int64_t stream_id = -1);
  void flush();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct Frame {
  FrameMeta meta;
  std::vector<std::byte> payload;
  std::int64_t received_ns = 0;
};

struct Result {
  v1::ResultHeader header;
  std::vector<std::byte> payload;
};

struct Truth {
  TensorSpec spec;               // dtype float64
  std::vector<double> values;
  std::int64_t stream_id = -1;
};

// Where a frame lives: what replay walks, in acquisition-time order over all streams.
struct FrameRef {
  std::uint32_t stream_id;
  std::size_t index;
  std::int64_t acquisition_time_ns;
};

class Reader {
 public:
  explicit Reader(const std::string& path);  // throws RecordingError (missing, not a recording)
  ~Reader();
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  std::string attribute(const std::string& key) const;  // "" when absent
  std::vector<std::uint32_t> streams() const;
  std::size_t frame_count(std::uint32_t stream_id) const;
  Frame read_frame(std::uint32_t stream_id, std::size_t index) const;
  std::vector<FrameRef> frame_order() const;

  std::vector<std::pair<std::string, std::string>> result_outputs() const;  // (pipeline, output)
  std::size_t result_count(const std::string& pipeline, const std::string& output) const;
  Result read_result(const std::string& pipeline, const std::string& output, std::size_t index) const;

  std::vector<std::string> truth_names() const;
  Truth read_truth(const std::string& name) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sonopipe::recording
