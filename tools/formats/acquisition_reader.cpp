#include "tools/formats/acquisition_reader.h"

#include <filesystem>

#include "tools/common/hdf5_util.h"

#include "tools/formats/must_reader.h"
#include "tools/formats/recording_source.h"
#include "tools/formats/uff_reader.h"
#include "tools/formats/verasonics_reader.h"

namespace sonopipe::formats {

void fail(const std::string& file, const std::string& object, const std::string& reason) {
  throw FormatError(file + ": " + (object.empty() ? "/" : object) + ": " + reason);
}

const char* file_format_name(FileFormat format) {
  switch (format) {
    case FileFormat::sonopipe_recording: return "sonopipe";
    case FileFormat::uff: return "uff";
    case FileFormat::verasonics_mat: return "verasonics";
    case FileFormat::must_mat: return "must";
    case FileFormat::unknown: break;
  }
  return "unknown";
}

FileFormat detect_format(const std::string& path) {
  // A MAT file is checked first: v7.3 files are HDF5 too (with a 512-byte text user block).
  if (is_verasonics_mat(path)) return FileFormat::verasonics_mat;
  if (is_must_mat(path)) return FileFormat::must_mat;  // MUST/PyMUST RF + param (must_reader.h)
  if (is_sonopipe_recording(path)) return FileFormat::sonopipe_recording;
  if (is_uff_file(path)) return FileFormat::uff;
  return FileFormat::unknown;
}

std::unique_ptr<AcquisitionReader> open_acquisition(const std::string& path, const ImportOptions& options) {
  switch (detect_format(path)) {
    case FileFormat::sonopipe_recording: return open_recording_source(path, options);
    case FileFormat::uff: return open_uff(path, options);
    case FileFormat::verasonics_mat: return open_verasonics(path, options);
    case FileFormat::must_mat: return open_must(path, options);
    case FileFormat::unknown: break;
  }
  if (!std::filesystem::is_regular_file(path)) fail(path, "", "does not exist or is not a file");
  recording::hdf5::quiet_errors();
  if (H5Fis_hdf5(path.c_str()) > 0) {
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0) fail(path, "", "an HDF5 file that cannot be opened (truncated or damaged?)");
    H5Fclose(file);
  }
  fail(path, "", "not a sonopipe recording, UFF file or MAT file (unrecognised contents)");
}

}  // namespace sonopipe::formats
