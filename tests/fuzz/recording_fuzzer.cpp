// Fuzzes the recording reader (sonopipe-replay's input, HDF5 layout in tools/common/recording.h):
// the input's bytes are written to a file and opened with recording::Reader, which then reads
// everything it offers (the first frames and results of every series, every truth array). Any
// file is either read or refused with RecordingError, never a crash or another exception.
// (libhdf5's own parser is fuzzed along the way; a crash inside it is reported as such.)
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "tools/common/recording.h"

namespace {

constexpr std::size_t kItemsPerSeries = 4;  // enough to walk each series' layout checks

const std::string& scratch_path() {
  static const std::string path =
      (std::filesystem::temp_directory_path() / ("sonopipe-fuzz-recording-" + std::to_string(::getpid()) + ".h5"))
          .string();
  return path;
}

void read_everything(const sonopipe::recording::Reader& reader) {
  (void)reader.attribute("created_by");
  (void)reader.attribute("format_version");
  for (const std::uint32_t stream : reader.streams()) {
    const std::size_t count = reader.frame_count(stream);
    for (std::size_t i = 0; i < count && i < kItemsPerSeries; ++i) (void)reader.read_frame(stream, i);
  }
  (void)reader.frame_order();
  for (const auto& [pipeline, output] : reader.result_outputs()) {
    const std::size_t count = reader.result_count(pipeline, output);
    for (std::size_t i = 0; i < count && i < kItemsPerSeries; ++i) (void)reader.read_result(pipeline, output, i);
  }
  for (const std::string& name : reader.truth_names()) (void)reader.read_truth(name);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = scratch_path();
  if (std::FILE* file = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data, 1, size, file);
    std::fclose(file);
  } else {
    return 0;
  }
  try {
    const sonopipe::recording::Reader reader(path);
    read_everything(reader);
  } catch (const sonopipe::recording::RecordingError&) {
    // refused with a reason: what a damaged file must get
  }
  std::remove(path.c_str());
  return 0;
}
