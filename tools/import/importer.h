// The conversion behind sonopipe-import: every frame of a recorded acquisition (any format
// open_acquisition reads) appended to a new sonopipe recording, with the source's metadata as root
// attributes. The recording is written under a temporary name beside the target and renamed at the
// end, so a failure leaves no output and no half-written file.
#pragma once

#include <cstddef>
#include <string>

#include "tools/formats/acquisition_reader.h"

namespace sonopipe::import {

struct ImportReport {
  std::string description;  // the detected format, as the reader describes it
  std::size_t frames = 0;
  std::size_t bytes = 0;
};

// Throws formats::FormatError (one line: file, object, expectation) or recording::RecordingError.
ImportReport import_acquisition(const std::string& source_path, const std::string& output_path,
                                const formats::ImportOptions& options);

}  // namespace sonopipe::import
