// Where sonopipe-run reads an input: the one place that picks the reader, so it can change here
// alone. UFF and Verasonics files go through tools/formats (open_acquisition); our recordings are
// read with recording::Reader directly while tools/formats' reader for them is still a stub. Once
// that reader lands, open_input can be open_acquisition for every format.
#pragma once

#include <memory>
#include <string>

#include "tools/formats/acquisition_reader.h"

namespace sonopipe::run {

// Frames in replay order (acquisition time over all streams, as sonopipe-replay sends them).
// Throws formats::FormatError or recording::RecordingError with a one-line message.
std::unique_ptr<formats::AcquisitionReader> open_input(const std::string& path);

}  // namespace sonopipe::run
