#include "tools/formats/verasonics_reader.h"

namespace sonopipe::formats {

// Not written yet.
bool is_verasonics_mat(const std::string&) { return false; }
std::unique_ptr<AcquisitionReader> open_verasonics(const std::string& path, const ImportOptions&) {
  fail(path, "", "this format's reader is not built yet");
}

}  // namespace sonopipe::formats
