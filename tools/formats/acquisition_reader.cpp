#include "tools/formats/acquisition_reader.h"

#include <filesystem>

#include "tools/common/hdf5_util.h"

#include "tools/formats/must_reader.h"
#include "tools/formats/isolated_reader.h"
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

namespace {

// What the HDF5 look at a file (in a child process) found.
enum class Hdf5Answer : int { sonopipe_recording = 1, uff = 2, not_hdf5 = 3, unopenable_hdf5 = 4, other_hdf5 = 5 };

// libhdf5 can crash, loop or exhaust memory on a damaged file (HDF5 verifies few of its own
// structures): every look into an outside HDF5 file runs in a child process (isolated_reader.h),
// the format detection included, and a death there is one FormatError naming the file.
Hdf5Answer look_at_hdf5(const std::string& path) {
  const int answer = isolation::ask_in_child(
      path, "libhdf5", "detecting its format",
      [&] {
        if (is_sonopipe_recording(path)) return static_cast<int>(Hdf5Answer::sonopipe_recording);
        if (is_uff_file(path)) return static_cast<int>(Hdf5Answer::uff);
        recording::hdf5::quiet_errors();
        if (H5Fis_hdf5(path.c_str()) <= 0) return static_cast<int>(Hdf5Answer::not_hdf5);
        const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
        if (file < 0) return static_cast<int>(Hdf5Answer::unopenable_hdf5);
        H5Fclose(file);
        return static_cast<int>(Hdf5Answer::other_hdf5);
      },
      static_cast<int>(Hdf5Answer::unopenable_hdf5));
  return static_cast<Hdf5Answer>(answer);
}

}  // namespace

FileFormat detect_format(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) return FileFormat::unknown;
  // A MAT file is checked first: v7.3 files are HDF5 too (with a 512-byte text user block). Its
  // libmatio look runs in a child process of its own (is_verasonics_mat).
  if (is_verasonics_mat(path)) return FileFormat::verasonics_mat;
  if (is_must_mat(path)) return FileFormat::must_mat;  // MUST/PyMUST RF + param (must_reader.h)
  switch (look_at_hdf5(path)) {
    case Hdf5Answer::sonopipe_recording: return FileFormat::sonopipe_recording;
    case Hdf5Answer::uff: return FileFormat::uff;
    default: return FileFormat::unknown;
  }
}

std::unique_ptr<AcquisitionReader> open_acquisition(const std::string& path, const ImportOptions& options) {
  if (!std::filesystem::is_regular_file(path)) fail(path, "", "does not exist or is not a file");
  if (is_verasonics_mat(path)) return open_verasonics(path, options);
  if (is_must_mat(path)) return open_must(path, options);
  switch (look_at_hdf5(path)) {
    // Our own recordings too: a recording damaged on disk (or not written by us) is outside input.
    case Hdf5Answer::sonopipe_recording:
      return isolation::open_in_child(path, options, open_recording_source, "libhdf5");
    case Hdf5Answer::uff: return isolation::open_in_child(path, options, open_uff, "libhdf5");
    case Hdf5Answer::unopenable_hdf5: fail(path, "", "an HDF5 file that cannot be opened (truncated or damaged?)");
    case Hdf5Answer::not_hdf5:
    case Hdf5Answer::other_hdf5: break;
  }
  fail(path, "", "not a sonopipe recording, UFF file or MAT file (unrecognised contents)");
}

}  // namespace sonopipe::formats
