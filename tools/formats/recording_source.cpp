#include "tools/formats/recording_source.h"

namespace sonopipe::formats {

// Not written yet.
bool is_sonopipe_recording(const std::string&) { return false; }
std::unique_ptr<AcquisitionReader> open_recording_source(const std::string& path, const ImportOptions&) {
  fail(path, "", "this format's reader is not built yet");
}

}  // namespace sonopipe::formats
