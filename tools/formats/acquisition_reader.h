// One reader interface under sonopipe-replay and sonopipe-import: a recorded acquisition in any
// supported format (a sonopipe recording, a USTB UFF file, a Verasonics .mat save) seen as frames
// that carry our FrameMeta (stages/beamform/channel_conventions.h for channel data) and their
// payload bytes, read one at a time so a file larger than memory can be replayed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>

#include "tools/common/recording.h"

namespace sonopipe::formats {

// A file that cannot be read as what it claims to be. what() is one line:
//   "<file>: <object path inside the file>: <what was expected / what was found>".
struct FormatError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
[[noreturn]] void fail(const std::string& file, const std::string& object, const std::string& reason);

enum class FileFormat { sonopipe_recording, uff, verasonics_mat, must_mat, unknown };
const char* file_format_name(FileFormat format);  // "sonopipe", "uff", "verasonics", "must", "unknown"

// Looks at the file's contents (HDF5 root attributes, MAT header), never at its extension alone.
FileFormat detect_format(const std::string& path);

// Choices a source format leaves open; every reader ignores those that do not apply to it.
struct ImportOptions {
  // UFF/.mat: which object to read when a file holds several ("" = the only/first suitable one,
  // e.g. "/channel_data" or "/beamformed_data").
  std::string object;
  // ARFI: group this many consecutive acquisition frames into one frame, 0 = one frame per
  // acquisition frame. The new axis is called "ensemble"; where it goes is the reader's to say
  // (UFF: beamformed [location, ensemble, sample], the ARFI set of stages/arfi/arfi_conventions.h;
  // channel data [ensemble, transmit, element, sample]). A frame count that is not a multiple is
  // refused.
  std::size_t ensemble = 0;
  std::uint32_t stream_id = 0;  // stream id given to imported frames (non-sonopipe formats)
};

class AcquisitionReader {
 public:
  virtual ~AcquisitionReader() = default;
  // E.g. "uff v1.2.0 (channel_data)", "verasonics .mat v7.3", "sonopipe recording v1".
  virtual std::string description() const = 0;
  virtual std::size_t frame_count() const = 0;
  // Frame `index` in replay order: meta (stream id, sequence, acquisition time, kind, axes with
  // spacing/origin/units, frequencies, c, vectors, attributes) and the payload bytes.
  virtual recording::Frame read_frame(std::size_t index) = 0;
  // Stream and acquisition time of frame `index` without its payload (replay's schedule and stream
  // filter). Readers that know these cheaply override it; the default reads the frame.
  struct FrameInfo {
    std::uint32_t stream_id = 0;
    std::int64_t acquisition_time_ns = 0;
  };
  virtual FrameInfo frame_info(std::size_t index) {
    const recording::Frame frame = read_frame(index);
    return {frame.meta.stream_id, frame.meta.acquisition_time_ns};
  }
  // The source's metadata that the import keeps as root attributes of the sonopipe recording
  // (format, version, object paths, fields not mapped onto the frame header).
  virtual std::map<std::string, std::string> source_attributes() const = 0;
};

// Opens `path` as the detected format. Throws FormatError (one line, as above).
std::unique_ptr<AcquisitionReader> open_acquisition(const std::string& path, const ImportOptions& options);

}  // namespace sonopipe::formats
