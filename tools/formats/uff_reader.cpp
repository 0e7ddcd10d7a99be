#include "tools/formats/uff_reader.h"

namespace sonopipe::formats {

// Not written yet.
bool is_uff_file(const std::string&) { return false; }
std::unique_ptr<AcquisitionReader> open_uff(const std::string& path, const ImportOptions&) {
  fail(path, "", "this format's reader is not built yet");
}

}  // namespace sonopipe::formats
