// Fuzzes the recording reader's layout checks (sonopipe-replay's input; layout in
// tools/common/recording.h). The input does not become the file's bytes: it is read as a list of
// things a damaged or hostile recording could hold at the reader's paths (groups, datasets of any
// type and shape, attributes of any type, headers that are valid or not), written with libhdf5,
// and the file is then read through recording::Reader (the first frames and results of every
// series, every truth array). Any such file is read or refused with RecordingError, never a crash,
// a hang or another exception.
// (Mutating the file's bytes instead fuzzes libhdf5's own parser, which leaks and hangs on damaged
// object headers and global heaps: see docs/readme/security.md. Not ours to fix.)
#include <unistd.h>

#include <hdf5.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "wire/wire.h"
#include "tests/fuzz/fuzz_input.h"
#include "tools/common/hdf5_util.h"
#include "tools/common/recording.h"

namespace {

namespace hdf5 = sonopipe::recording::hdf5;
constexpr std::size_t kItemsPerSeries = 4;  // enough to walk each series' layout checks
constexpr int kMaxObjects = 24;

using sonopipe::fuzz::Input;

const std::vector<std::string> kSeriesGroups = {"/streams/1", "/streams/7", "/streams/x", "/results/p/o",
                                                "/results/p/q", "/truth", "/truth/nested"};
const std::vector<std::string> kNames = {"payload", "header", "sequence", "acquisition_time_ns", "received_ns",
                                         "displacement"};
const std::vector<std::string> kAttributes = {"format", "format_version", "axis_names", "axis_units",
                                              "axis_spacing", "axis_origin", "unit", "stream_id", "created_by"};

hid_t element_type(Input& in) {
  switch (in.byte() % 9) {
    case 0: return H5Tcopy(H5T_STD_I16LE);
    case 1: return H5Tcopy(H5T_IEEE_F32LE);
    case 2: return H5Tcopy(H5T_IEEE_F64LE);
    case 3: return H5Tcopy(H5T_STD_I64LE);
    case 4: return H5Tcopy(H5T_STD_U64LE);
    case 5: return H5Tcopy(H5T_STD_U8LE);
    case 6: return H5Tvlen_create(H5T_NATIVE_UINT8);
    case 7: {
      const hid_t type = H5Tcopy(H5T_C_S1);
      H5Tset_size(type, H5T_VARIABLE);
      return type;
    }
    default: {
      const hid_t type = H5Tcreate(H5T_COMPOUND, 8);
      H5Tinsert(type, "r", 0, H5T_IEEE_F32LE);
      H5Tinsert(type, "i", 4, H5T_IEEE_F32LE);
      return type;
    }
  }
}

// A FrameHeader (or ResultHeader) whose fields come from the input: valid often enough to reach
// the payload checks.
std::string header_bytes(Input& in) {
  sonopipe::FrameMeta meta;
  meta.stream_id = static_cast<std::uint32_t>(in.byte() % 8);
  meta.sequence = in.byte();
  meta.kind = sonopipe::FrameKind::rf;
  meta.payload.dtype = in.pick(std::vector<sonopipe::DType>{sonopipe::DType::int16, sonopipe::DType::float32,
                                                            sonopipe::DType::complex64, sonopipe::DType::uint8});
  const int axes = in.byte() % 4;
  for (int a = 0; a < axes; ++a) {
    std::string name = "a";
    name += std::to_string(a);  // (gcc 12 -O3 warns, wrongly, about "a" + std::to_string(a))
    meta.payload.axes.push_back({name, 1 + in.byte() % 5});
  }
  if (in.byte() % 2 == 0) {
    sonopipe::v1::ResultHeader result;
    result.set_schema_version(sonopipe::wire::kSchemaVersion);
    result.set_pipeline("p");
    result.set_output("o");
    result.set_element_type(sonopipe::wire::dtype_to_proto(meta.payload.dtype));
    for (const sonopipe::Axis& axis : meta.payload.axes) {
      auto* out = result.add_axes();
      out->set_name(axis.name);
      out->set_size(static_cast<std::uint64_t>(axis.size));
    }
    return result.SerializeAsString();
  }
  std::string bytes = sonopipe::wire::frame_header_from_meta(meta).SerializeAsString();
  if (in.byte() % 4 == 0 && !bytes.empty()) bytes[in.byte() % bytes.size()] ^= static_cast<char>(in.byte());
  return bytes;
}

void write_attribute(Input& in, hid_t object) {
  const std::string name = in.pick(kAttributes);
  if (H5Aexists(object, name.c_str()) > 0) return;
  try {
    switch (in.byte() % 4) {
      case 0: hdf5::write_string_attribute(object, name, in.text(40)); break;
      case 1: hdf5::write_int64_attribute(object, name, static_cast<std::int64_t>(in.number(8))); break;
      case 2: {
        std::vector<double> values(in.byte() % 5);
        for (double& v : values) v = static_cast<double>(static_cast<std::int16_t>(in.number(2)));
        hdf5::write_double_list_attribute(object, name, values);
        break;
      }
      default: {
        std::vector<std::string> values(in.byte() % 5);
        for (std::string& v : values) v = in.text(8);
        hdf5::write_string_list_attribute(object, name, values);
      }
    }
  } catch (const sonopipe::recording::RecordingError&) {
  }
}

void write_dataset(Input& in, hid_t file, const std::string& path) {
  if (H5Lexists(file, path.c_str(), H5P_DEFAULT) > 0) return;
  hdf5::Id type(element_type(in), H5Tclose);
  const int rank = in.byte() % 4;
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  hsize_t elements = 1;
  for (hsize_t& d : dims) {
    d = in.byte() % 8 == 0 ? (hsize_t{1} << (20 + in.byte() % 24)) : in.byte() % 5;  // sometimes huge
    elements *= d;
  }
  hdf5::Id space(rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(rank, dims.data(), nullptr), H5Sclose);
  hdf5::Id links(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(links.get(), 1);
  hdf5::Id dataset(H5Dcreate2(file, path.c_str(), type.get(), space.get(), links.get(), H5P_DEFAULT, H5P_DEFAULT),
                   H5Dclose);
  if (!dataset.valid() || elements > 64) return;  // a huge one stays unwritten (HDF5 stores nothing)
  if (H5Tget_class(type.get()) == H5T_VLEN) {
    std::vector<std::string> headers;
    std::vector<hvl_t> values;
    for (hsize_t i = 0; i < std::max<hsize_t>(elements, 1); ++i) headers.push_back(header_bytes(in));
    for (std::string& h : headers) values.push_back(hvl_t{h.size(), h.data()});
    H5Dwrite(dataset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
  } else if (H5Tget_class(type.get()) != H5T_STRING) {
    std::vector<std::uint8_t> bytes(std::max<hsize_t>(elements, 1) * H5Tget_size(type.get()));
    for (std::uint8_t& b : bytes) b = in.byte();
    H5Dwrite(dataset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data());
  }
  if (in.byte() % 2) write_attribute(in, dataset.get());
}

void write_recording(Input& in, const std::string& path) {
  hdf5::Id file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  if (!file.valid()) return;
  if (in.byte() % 8) {  // mostly a valid recording header, so the reader goes on
    hdf5::write_string_attribute(file.get(), "format", "sonopipe-recording");
    hdf5::write_int64_attribute(file.get(), "format_version", in.byte() % 8 ? 1 : static_cast<std::int64_t>(in.number(8)));
  }
  for (int i = 0; i < kMaxObjects && !in.empty(); ++i) {
    const std::string group = in.pick(kSeriesGroups);
    if (in.byte() % 6 == 0) {
      hdf5::Id links(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
      H5Pset_create_intermediate_group(links.get(), 1);
      const std::string name = group + "/" + in.pick(kNames);
      if (H5Lexists(file.get(), group.c_str(), H5P_DEFAULT) <= 0 || H5Lexists(file.get(), name.c_str(), H5P_DEFAULT) <= 0)
        hdf5::Id(H5Gcreate2(file.get(), name.c_str(), links.get(), H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
    } else {
      write_dataset(in, file.get(), group + "/" + in.pick(kNames));
    }
  }
}

void read_everything(const sonopipe::recording::Reader& reader) {
  (void)reader.attribute("created_by");
  (void)reader.attribute("format_version");
  for (const std::uint32_t stream : reader.streams()) {
    const std::size_t count = reader.frame_count(stream);
    for (std::size_t i = 0; i < count && i < kItemsPerSeries; ++i) (void)reader.read_frame(stream, i);
  }
  (void)reader.frame_order();
  for (const auto& [pipeline, output] : reader.result_outputs()) {
    const std::size_t count = reader.result_count(pipeline, output);
    for (std::size_t i = 0; i < count && i < kItemsPerSeries; ++i) (void)reader.read_result(pipeline, output, i);
  }
  for (const std::string& name : reader.truth_names()) (void)reader.read_truth(name);
}

const std::string& scratch_path() {
  static const std::string path =
      (std::filesystem::temp_directory_path() / ("sonopipe-fuzz-recording-" + std::to_string(::getpid()) + ".h5"))
          .string();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  hdf5::quiet_errors();
  const std::string& path = scratch_path();
  Input input(data, size);
  write_recording(input, path);
  try {
    const sonopipe::recording::Reader reader(path);
    read_everything(reader);
  } catch (const sonopipe::recording::RecordingError&) {
    // refused with a reason: what a damaged file must get
  }
  std::remove(path.c_str());
  return 0;
}
