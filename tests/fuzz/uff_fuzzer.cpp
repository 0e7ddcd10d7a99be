// Fuzzes the USTB UFF reader's structural checks (uff_reader.cpp, uff_file.cpp; sonopipe-import's
// and sonopipe-replay's input). The input does not become the file's bytes: it picks a valid UFF
// file (written by UffWriter: channel data RF or IQ, beamformed data on a linear or sector scan)
// and a list of edits made with libhdf5 to its objects: delete one, replace a dataset by one of
// another type, rank and shape (sometimes huge, then unwritten), replace a group by a dataset,
// set hostile values (NaN, infinities, zero, negative, huge) or rewrite an attribute (class,
// version, name, complex, sonopipe_*). The file is then read through open_uff (its first frames).
// Any such file is read or refused with FormatError, never a crash, a hang or another exception.
// (Mutating the file's bytes instead fuzzes libhdf5's own parser, which crashes, leaks and hangs on
// damaged metadata: see docs/development.md, "Fuzzing". Not ours to fix.)
#include <unistd.h>

#include <hdf5.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_input.h"
#include "tools/common/hdf5_util.h"
#include "tools/formats/acquisition_reader.h"
#include "tools/formats/uff_names.h"
#include "tools/formats/uff_reader.h"
#include "tools/formats/uff_writer.h"

namespace {

namespace hdf5 = sonopipe::recording::hdf5;
using sonopipe::fuzz::Input;
constexpr std::size_t kFramesRead = 4;  // enough to walk the per-frame checks
constexpr int kMaxEdits = 8;

void write_valid_file(Input& in, const std::string& path) {
  const int kind = in.byte() % 4;
  const bool double_precision = in.byte() % 2;
  const std::size_t frames = 1 + in.byte() % 3;
  if (kind < 2) {
    sonopipe::formats::UffChannelLayout layout;
    layout.transmits = 2, layout.elements = 4, layout.samples = 8;
    layout.complex = kind == 1;
    layout.sampling_frequency_hz = 20e6;
    layout.modulation_frequency_hz = layout.complex ? 5e6 : 0.0;
    layout.center_frequency_hz = 5e6;
    layout.element_x_m = {-1.5e-4, -0.5e-4, 0.5e-4, 1.5e-4};
    layout.wavefront = {0, 1};
    layout.angle_rad = {-0.1, 0.1};
    layout.source_x_m = {0, 0};
    layout.source_z_m = {0, -0.01};
    sonopipe::formats::UffWriter writer(path, layout, frames, double_precision);
    for (std::size_t f = 0; f < frames; ++f)
      writer.append_frame(std::vector<double>(writer.frame_size(), 1.0),
                          layout.complex ? std::vector<double>(writer.frame_size(), -1.0) : std::vector<double>{},
                          static_cast<std::int64_t>(f) * 1000, f);
    writer.finish({});
  } else {
    sonopipe::formats::UffBeamformedLayout layout;
    layout.sector = kind == 3;
    layout.lateral = {-0.1, 0.0, 0.1};
    layout.axial = {0.01, 0.011, 0.012, 0.013};
    layout.complex = in.byte() % 2;
    layout.sampling_frequency_hz = 20e6;
    layout.center_frequency_hz = 5e6;
    sonopipe::formats::UffWriter writer(path, layout, frames, double_precision);
    for (std::size_t f = 0; f < frames; ++f)
      writer.append_frame(std::vector<double>(writer.frame_size(), 2.0),
                          layout.complex ? std::vector<double>(writer.frame_size(), 3.0) : std::vector<double>{},
                          static_cast<std::int64_t>(f) * 1000, f);
    sonopipe::formats::UffSonopipeAttributes attributes;
    attributes.ensemble = in.byte() % 3;
    writer.finish(attributes);
  }
}

// Every object of the file, by path ("/" first).
std::vector<std::string> object_paths(hid_t file) {
  std::vector<std::string> paths{"/"};
  H5Ovisit(
      file, H5_INDEX_NAME, H5_ITER_NATIVE,
      [](hid_t, const char* name, const H5O_info_t*, void* data) -> herr_t {
        if (std::string(name) != ".") static_cast<std::vector<std::string>*>(data)->push_back(std::string("/") + name);
        return 0;
      },
      &paths);
  return paths;
}

hid_t element_type(Input& in) {
  switch (in.byte() % 7) {
    case 0: return H5Tcopy(H5T_IEEE_F64LE);
    case 1: return H5Tcopy(H5T_IEEE_F32LE);
    case 2: return H5Tcopy(H5T_STD_I16LE);
    case 3: return H5Tcopy(H5T_STD_U8LE);
    case 4: return H5Tcopy(H5T_STD_I64BE);
    case 5: {
      const hid_t type = H5Tcopy(H5T_C_S1);
      H5Tset_size(type, H5T_VARIABLE);
      return type;
    }
    default: {
      const hid_t type = H5Tcreate(H5T_COMPOUND, 16);
      H5Tinsert(type, "real", 0, H5T_IEEE_F64LE);
      H5Tinsert(type, "imag", 8, H5T_IEEE_F64LE);
      return type;
    }
  }
}

double hostile_value(Input& in) {
  switch (in.byte() % 8) {
    case 0: return std::numeric_limits<double>::quiet_NaN();
    case 1: return std::numeric_limits<double>::infinity();
    case 2: return -std::numeric_limits<double>::infinity();
    case 3: return 0.0;
    case 4: return -1.0;
    case 5: return 1e300;
    case 6: return 4294967296.0;
    default: return static_cast<double>(static_cast<std::int16_t>(in.number(2)));
  }
}

void replace_with_dataset(Input& in, hid_t file, const std::string& path) {
  if (path == "/") return;
  H5Ldelete(file, path.c_str(), H5P_DEFAULT);
  hdf5::Id type(element_type(in), H5Tclose);
  const int rank = in.byte() % 5;
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  hsize_t elements = 1;
  for (hsize_t& d : dims) {
    d = in.byte() % 8 == 0 ? (hsize_t{1} << (16 + in.byte() % 24)) : in.byte() % 6;  // sometimes huge
    elements *= d;
  }
  hdf5::Id space(rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(rank, dims.data(), nullptr), H5Sclose);
  hdf5::Id dataset(H5Dcreate2(file, path.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                   H5Dclose);
  if (!dataset.valid() || elements > 256 || H5Tget_class(type.get()) == H5T_STRING) return;  // huge: unwritten
  std::vector<std::uint8_t> bytes(std::max<hsize_t>(elements, 1) * H5Tget_size(type.get()));
  for (std::uint8_t& b : bytes) b = in.byte();
  H5Dwrite(dataset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data());
}

void set_hostile_values(Input& in, hid_t file, const std::string& path) {
  if (H5Oexists_by_name(file, path.c_str(), H5P_DEFAULT) <= 0) return;
  hdf5::Id dataset(H5Dopen2(file, path.c_str(), H5P_DEFAULT), H5Dclose);
  if (!dataset.valid()) return;
  hdf5::Id space(H5Dget_space(dataset.get()), H5Sclose);
  const hssize_t elements = H5Sget_simple_extent_npoints(space.get());
  hdf5::Id type(H5Dget_type(dataset.get()), H5Tclose);
  if (elements <= 0 || elements > 4096 || H5Tget_class(type.get()) != H5T_FLOAT) return;
  std::vector<double> values(static_cast<std::size_t>(elements));
  const double value = hostile_value(in);
  for (double& v : values) v = in.byte() % 2 ? value : 1.0;
  H5Dwrite(dataset.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
}

const std::vector<std::string> kAttributes = {"class", "name", "version", "complex", "sonopipe_stream_id",
                                              "sonopipe_ensemble", "sonopipe_sequence", "sonopipe_acquisition_time_ns"};
const std::vector<std::string> kClasses = {
    sonopipe::formats::uff_names::channel_data_class, sonopipe::formats::uff_names::beamformed_data_class,
    sonopipe::formats::uff_names::linear_scan_class,  sonopipe::formats::uff_names::sector_scan_class,
    sonopipe::formats::uff_names::wave_class,         sonopipe::formats::uff_names::probe_class,
    "double", "single", "uff.unknown", "v1.0.1", "v2.0.0", ""};

void rewrite_attribute(Input& in, hid_t file, const std::string& path) {
  if (H5Oexists_by_name(file, path.c_str(), H5P_DEFAULT) <= 0) return;
  hdf5::Id object(H5Oopen(file, path.c_str(), H5P_DEFAULT), H5Oclose);
  if (!object.valid()) return;
  const std::string name = in.pick(kAttributes);
  if (H5Aexists(object.get(), name.c_str()) > 0) H5Adelete(object.get(), name.c_str());
  try {
    switch (in.byte() % 4) {
      case 0: hdf5::write_string_attribute(object.get(), name, in.pick(kClasses)); break;
      case 1: hdf5::write_string_attribute(object.get(), name, in.text(16)); break;
      case 2: hdf5::write_int64_attribute(object.get(), name, static_cast<std::int64_t>(in.number(8))); break;
      default: {
        std::vector<double> values(in.byte() % 6);
        for (double& v : values) v = hostile_value(in);
        hdf5::write_double_list_attribute(object.get(), name, values);
      }
    }
  } catch (const sonopipe::recording::RecordingError&) {
  }
}

void edit(Input& in, const std::string& path) {
  hdf5::Id file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
  if (!file.valid()) return;
  const std::vector<std::string> paths = object_paths(file.get());
  for (int i = 0; i < kMaxEdits && !in.empty(); ++i) {
    const std::string& target = in.pick(paths);
    switch (in.byte() % 5) {
      case 0:
        if (target != "/") H5Ldelete(file.get(), target.c_str(), H5P_DEFAULT);
        break;
      case 1: replace_with_dataset(in, file.get(), target); break;
      case 2: set_hostile_values(in, file.get(), target); break;
      case 3: rewrite_attribute(in, file.get(), target); break;
      default:
        if (target != "/" && H5Ldelete(file.get(), target.c_str(), H5P_DEFAULT) >= 0)
          hdf5::Id(H5Gcreate2(file.get(), target.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
    }
  }
}

const std::string& scratch_path() {
  static const std::string path =
      (std::filesystem::temp_directory_path() / ("sonopipe-fuzz-uff-" + std::to_string(::getpid()) + ".uff")).string();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  hdf5::quiet_errors();
  const std::string& path = scratch_path();
  Input input(data, size);
  write_valid_file(input, path);
  edit(input, path);
  try {
    sonopipe::formats::ImportOptions options;
    options.ensemble = input.byte() % 3;
    auto reader = sonopipe::formats::open_uff(path, options);
    (void)reader->description();
    (void)reader->source_attributes();
    for (std::size_t f = 0; f < reader->frame_count() && f < kFramesRead; ++f) (void)reader->read_frame(f);
  } catch (const sonopipe::formats::FormatError&) {
    // refused with a reason: what a damaged file must get
  }
  std::remove(path.c_str());
  return 0;
}
