#include "tools/formats/uff_file.h"

#include <algorithm>
#include <filesystem>

#include "tools/formats/isolated_reader.h"

namespace sonopipe::formats::uff {

namespace {

namespace hdf5 = recording::hdf5;

// The most values a metadata array (values()) may hold: 2^24, far above any probe, scan or sequence.
constexpr hsize_t kMaxMetadataValues = hsize_t{1} << 24;
using hdf5::check;
using hdf5::Id;

// MATLAB pads fixed-length strings with NULs; h5py writers may add spaces.
std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\0' || text.back() == ' ')) text.pop_back();
  return text;
}

std::string dims_text(const std::vector<hsize_t>& dims) {
  std::string text = "(";
  for (std::size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + ")";
}

herr_t collect_attribute_name(hid_t, const char* name, const H5A_info_t*, void* data) {
  static_cast<std::vector<std::string>*>(data)->push_back(name);
  return 0;
}

}  // namespace

UffFile::UffFile(const std::string& path) : path_(path) {
  hdf5::quiet_errors();
  if (!std::filesystem::is_regular_file(path)) formats::fail(path, "", "does not exist or is not a file");
  if (H5Fis_hdf5(path.c_str()) <= 0) formats::fail(path, "", "is not an HDF5 file (UFF is HDF5)");
  try {
    file_ = Id(check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "cannot open as HDF5"), H5Fclose);
  } catch (const recording::RecordingError& e) {
    formats::fail(path, "", std::string(e.what()) + " (truncated or damaged file?)");
  }
}

void UffFile::fail(const std::string& object, const std::string& reason) const { formats::fail(path_, object, reason); }

bool UffFile::exists(const std::string& object) const {
  isolation::note_progress(object);  // what a death in libhdf5 is reported against
  return hdf5::link_exists(id(), object);
}

bool UffFile::is_group(const std::string& object) const {
  isolation::note_progress(object);
  if (!exists(object)) return false;
  H5O_info_t info;
  if (H5Oget_info_by_name(id(), object.c_str(), &info, H5P_DEFAULT) < 0) return false;
  return info.type == H5O_TYPE_GROUP;
}

std::string UffFile::string_attribute(const std::string& object, const std::string& name) const {
  isolation::note_progress(object);
  if (!exists(object)) return "";
  const hid_t handle = H5Oopen(id(), object.c_str(), H5P_DEFAULT);
  if (handle < 0) return "";
  Id owned(handle, H5Oclose);
  if (!hdf5::has_attribute(handle, name)) return "";
  try {
    return trimmed(hdf5::read_string_attribute(handle, name));
  } catch (const recording::RecordingError& e) {
    fail(object, "attribute '" + name + "': expected one string (" + e.what() + ")");
  }
}

std::string UffFile::class_of(const std::string& object) const { return string_attribute(object, "class"); }

std::vector<std::string> UffFile::attribute_names(const std::string& object) const {
  isolation::note_progress(object);
  std::vector<std::string> names;
  const hid_t handle = H5Oopen(id(), object.c_str(), H5P_DEFAULT);
  if (handle < 0) return names;
  Id owned(handle, H5Oclose);
  hsize_t index = 0;
  H5Aiterate2(handle, H5_INDEX_NAME, H5_ITER_INC, &index, collect_attribute_name, &names);
  return names;
}

std::vector<double> UffFile::double_list_attribute(const std::string& object, const std::string& name) const {
  isolation::note_progress(object);
  const hid_t handle = H5Oopen(id(), object.c_str(), H5P_DEFAULT);
  if (handle < 0) fail(object, "cannot be opened");
  Id owned(handle, H5Oclose);
  try {
    return hdf5::read_double_list_attribute(handle, name);
  } catch (const recording::RecordingError& e) {
    fail(object, "attribute '" + name + "': expected numbers (" + e.what() + ")");
  }
}

std::vector<std::string> UffFile::children(const std::string& group) const {
  isolation::note_progress(group);
  try {
    Id handle = hdf5::open_group(id(), group);
    std::vector<std::string> names = hdf5::child_names(handle.get());
    std::sort(names.begin(), names.end());
    return names;
  } catch (const recording::RecordingError& e) {
    fail(group, std::string("expected a group (") + e.what() + ")");
  }
}

std::vector<double> UffFile::values(const std::string& dataset, std::vector<hsize_t>* dims_out) const {
  isolation::note_progress(dataset);
  if (!exists(dataset)) fail(dataset, "missing dataset");
  if (is_group(dataset)) fail(dataset, "expected a real numeric dataset, found a group");
  try {
    Id handle(check(H5Dopen2(id(), dataset.c_str(), H5P_DEFAULT), "open"), H5Dclose);
    Id type(check(H5Dget_type(handle.get()), "H5Dget_type"), H5Tclose);
    const H5T_class_t type_class = H5Tget_class(type.get());
    if (type_class != H5T_FLOAT && type_class != H5T_INTEGER) fail(dataset, "expected a numeric dataset");
    Id space(check(H5Dget_space(handle.get()), "H5Dget_space"), H5Sclose);
    const int rank = check(H5Sget_simple_extent_ndims(space.get()), "H5Sget_simple_extent_ndims");
    std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
    H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
    // Metadata arrays (geometry, axes, delays) hold thousands of values; a hostile file can declare
    // an unwritten dataset of terabytes, refused before anything is allocated for it.
    hsize_t count = 1;
    for (hsize_t d : dims) {
      if (d != 0 && count > kMaxMetadataValues / d) count = kMaxMetadataValues + 1;  // (no overflow)
      else count *= d;
    }
    if (count > kMaxMetadataValues) fail(dataset, "dimensions " + dims_text(dims) + ": too many values for metadata");
    std::vector<double> result(count);
    if (count > 0)
      check(H5Dread(handle.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, result.data()), "read");
    if (dims_out) *dims_out = dims;
    return result;
  } catch (const recording::RecordingError& e) {
    fail(dataset, e.what());
  }
}

double UffFile::scalar(const std::string& dataset) const {
  std::vector<hsize_t> dims;
  const std::vector<double> v = values(dataset, &dims);
  if (v.size() != 1) fail(dataset, "expected a 1x1 scalar, found dimensions " + dims_text(dims));
  return v.front();
}

std::optional<double> UffFile::optional_scalar(const std::string& dataset) const {
  if (!exists(dataset)) return std::nullopt;
  return scalar(dataset);
}

std::string UffFile::text(const std::string& object) const {
  isolation::note_progress(object);
  if (!exists(object)) return "";
  if (is_group(object)) {
    std::string joined;
    for (const std::string& child : children(object)) {
      const std::string part = text(object + "/" + child);
      if (!part.empty()) joined += (joined.empty() ? "" : "; ") + part;
    }
    return joined;
  }
  std::string result;
  try {
    for (double code : values(object))
      if (code > 0 && code < 128) result += static_cast<char>(code);  // MATLAB char codes; ASCII kept
  } catch (const FormatError&) {
    return "";  // a string that is not MATLAB char codes: not ours to interpret
  }
  return result;
}

// ---------------------------------------------------------------------------------------------

DataArray::DataArray(const UffFile& file, const std::string& path, bool real_only) : file_(file), path_(path) {
  isolation::note_progress(path);
  if (!file.exists(path)) file.fail(path, "missing dataset (the object's data)");
  std::string dataset = path;
  if (file.is_group(path)) {
    if (!file.exists(path + "/real"))
      file.fail(path + "/real", "missing dataset: a complex array is a group {real, imag}");
    complex_ = !real_only;
    if (complex_ && !file.exists(path + "/imag"))
      file.fail(path + "/imag", "missing dataset: a complex array is a group {real, imag}");
    dataset = path + "/real";
  }
  auto shape_of = [&](const std::string& name, std::vector<hsize_t>& dims) -> Id {
    try {
      Id handle(check(H5Dopen2(file.id(), name.c_str(), H5P_DEFAULT), "open"), H5Dclose);
      Id space(check(H5Dget_space(handle.get()), "H5Dget_space"), H5Sclose);
      const int rank = check(H5Sget_simple_extent_ndims(space.get()), "H5Sget_simple_extent_ndims");
      dims.resize(static_cast<std::size_t>(rank));
      H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
      return Id(check(H5Dget_type(handle.get()), "H5Dget_type"), H5Tclose);
    } catch (const recording::RecordingError& e) {
      file.fail(name, e.what());
    }
  };
  std::vector<hsize_t> dims;
  Id type = shape_of(dataset, dims);
  if (dims.empty() || dims.size() > 4)
    file.fail(dataset,
              "wrong rank: expected 1 to 4 dimensions (MATLAB [samples x channels x waves x frames], "
              "reversed), found " +
                  std::to_string(dims.size()));
  if (complex_) {
    std::vector<hsize_t> imag_dims;
    Id imag_type = shape_of(path + "/imag", imag_dims);
    if (imag_dims != dims)
      file.fail(path + "/imag", "inconsistent sizes: imag is " + dims_text(imag_dims) + ", real is " + dims_text(dims));
    if (H5Tequal(type.get(), imag_type.get()) <= 0) file.fail(path + "/imag", "real and imag differ in element type");
  }
  rank_ = dims.size();
  std::copy(dims.begin(), dims.end(), dims_.begin() + static_cast<std::ptrdiff_t>(4 - rank_));

  const H5T_class_t type_class = H5Tget_class(type.get());
  const std::size_t size = H5Tget_size(type.get());
  if (type_class == H5T_FLOAT && (size == 4 || size == 8)) {
    stored_type_ = size == 4 ? "float32" : "float64";
    if (complex_) {
      element_type_ = DType::complex64;
      narrowed_ = size == 8;
    } else {
      element_type_ = size == 4 ? DType::float32 : DType::float64;
    }
  } else if (type_class == H5T_INTEGER && size == 2 && H5Tget_sign(type.get()) == H5T_SGN_2) {
    stored_type_ = "int16";
    element_type_ = DType::int16;
  } else {
    file.fail(dataset, "unsupported element type: expected float32 (MATLAB single), float64 or int16");
  }
}

std::size_t DataArray::element_bytes() const {
  return dtype_size(element_type_) * (complex_ && element_type_ == DType::int16 ? 2 : 1);
}

void DataArray::read_part(const std::string& dataset, hsize_t first, hsize_t count, hid_t memory_type,
                          void* out) const {
  isolation::note_progress(dataset);
  try {
    Id handle(check(H5Dopen2(file_.id(), dataset.c_str(), H5P_DEFAULT), "open"), H5Dclose);
    std::vector<hsize_t> start(rank_, 0), counts(dims_.end() - static_cast<std::ptrdiff_t>(rank_), dims_.end());
    if (rank_ == 4) {
      start[0] = first;
      counts[0] = count;
    }
    Id file_space(check(H5Dget_space(handle.get()), "H5Dget_space"), H5Sclose);
    check(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, counts.data(), nullptr),
          "H5Sselect_hyperslab");
    Id memory_space(check(H5Screate_simple(static_cast<int>(rank_), counts.data(), nullptr), "H5Screate_simple"),
                    H5Sclose);
    check(H5Dread(handle.get(), memory_type, memory_space.get(), file_space.get(), H5P_DEFAULT, out), "read");
  } catch (const recording::RecordingError& e) {
    file_.fail(dataset, std::string(e.what()) + " (truncated or damaged file?)");
  }
}

std::vector<std::byte> DataArray::read(hsize_t first, hsize_t count) const {
  if (first + count > dims_[0])
    file_.fail(path_, "frames " + std::to_string(first) + ".." + std::to_string(first + count) + " of " +
                          std::to_string(dims_[0]) + " do not exist");
  const std::size_t elements = count * dims_[1] * dims_[2] * dims_[3];
  std::vector<std::byte> out(elements * element_bytes());
  const std::string real = complex_ || file_.is_group(path_) ? path_ + "/real" : path_;
  if (!complex_) {
    const hid_t memory = element_type_ == DType::int16     ? H5T_NATIVE_INT16
                         : element_type_ == DType::float64 ? H5T_NATIVE_DOUBLE
                                                           : H5T_NATIVE_FLOAT;
    read_part(real, first, count, memory, out.data());
    return out;
  }
  // Interleave (re, im): complex64 as float pairs, int16 as I/Q pairs (the `iq` axis convention).
  auto interleave = [&](auto zero, hid_t memory) {
    using T = decltype(zero);
    std::vector<T> re(elements), im(elements);
    read_part(real, first, count, memory, re.data());
    read_part(path_ + "/imag", first, count, memory, im.data());
    T* pairs = reinterpret_cast<T*>(out.data());
    for (std::size_t i = 0; i < elements; ++i) {
      pairs[2 * i] = re[i];
      pairs[2 * i + 1] = im[i];
    }
  };
  if (element_type_ == DType::int16)
    interleave(std::int16_t{0}, H5T_NATIVE_INT16);
  else
    interleave(0.0f, H5T_NATIVE_FLOAT);
  return out;
}

}  // namespace sonopipe::formats::uff
