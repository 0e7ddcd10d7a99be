#pragma once

#include <memory>
#include <string>

#include "tools/formats/acquisition_reader.h"

namespace sonopipe::formats {

bool is_uff_file(const std::string& path);  // true when the file's contents are this format
std::unique_ptr<AcquisitionReader> open_uff(const std::string& path, const ImportOptions& options);

}  // namespace sonopipe::formats
