// The conversion behind sonopipe-export: one stream's raw frames or one output's results of a
// sonopipe recording written as a USTB UFF file (tools/formats/uff_writer.h).
//   channel_rf / channel_iq frames [transmit, element, sample]      -> channel_data
//   2-D frames [lateral, axial]                                     -> beamformed_data, 1 UFF frame each
//   3-D frames [lateral, middle, axial] (an ARFI set [location,
//   ensemble, sample], a displacement [location, track, depth])     -> beamformed_data, `middle` UFF
//                                                                      frames each (sonopipe_ensemble)
// A lateral axis in "rad" gives a sector scan, else a linear scan (x in m); an axial axis in "s"
// becomes depth c t / 2. int16 with a last axis "iq" and complex64 are complex data. The output is
// written under a temporary name and renamed at the end.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace sonopipe::exporter {

struct ExportOptions {
  std::string result;                   // "pipeline/output": export these results
  std::optional<std::uint32_t> stream;  // export this stream's raw frames (default: the first stream)
  bool double_precision = false;        // float64 datasets instead of USTB's single
};

struct ExportReport {
  std::string object;  // "/channel_data" or "/beamformed_data"
  std::string source;  // "stream 3" or "result arfi/displacement"
  std::size_t frames = 0, uff_frames = 0;
};

// Throws std::runtime_error (recording::RecordingError, std::invalid_argument) with one line.
ExportReport export_uff(const std::string& recording_path, const std::string& output_path,
                        const ExportOptions& options);

}  // namespace sonopipe::exporter
