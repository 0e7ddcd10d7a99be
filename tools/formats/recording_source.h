#pragma once

#include <memory>
#include <string>

#include "tools/formats/acquisition_reader.h"

namespace sonopipe::formats {

bool is_sonopipe_recording(const std::string& path);  // true when the file's contents are this format
std::unique_ptr<AcquisitionReader> open_recording_source(const std::string& path, const ImportOptions& options);

}  // namespace sonopipe::formats
