#include "tools/common/hdf5_util.h"

#include <mutex>

#include "tools/common/recording.h"

namespace sonopipe::recording::hdf5 {

Id& Id::operator=(Id&& other) noexcept {
  if (this != &other) {
    reset();
    id_ = other.id_;
    closer_ = other.closer_;
    other.id_ = -1;
  }
  return *this;
}

void Id::reset() {
  if (id_ >= 0 && closer_) closer_(id_);
  id_ = -1;
}

void quiet_errors() {
  static std::once_flag once;
  std::call_once(once, [] { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); });
}

namespace {

// Collects the description of the innermost (first) entry of the HDF5 error stack.
herr_t take_first_message(unsigned index, const H5E_error2_t* error, void* data) {
  auto* text = static_cast<std::string*>(data);
  if (index == 0 && error && error->desc) *text = error->desc;
  return 0;
}

std::string hdf5_error_text() {
  std::string text;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, take_first_message, &text);
  H5Eclear2(H5E_DEFAULT);
  return text.empty() ? "HDF5 call failed" : text;
}

Id string_type() {
  Id type(check(H5Tcopy(H5T_C_S1), "H5Tcopy"), H5Tclose);
  check(H5Tset_size(type.get(), H5T_VARIABLE), "H5Tset_size");
  check(H5Tset_cset(type.get(), H5T_CSET_UTF8), "H5Tset_cset");
  return type;
}

Id open_attribute(hid_t object, const std::string& name) {
  return Id(check(H5Aopen(object, name.c_str(), H5P_DEFAULT), "attribute '" + name + "'"), H5Aclose);
}

Id replace_attribute(hid_t object, const std::string& name, hid_t type, hid_t space) {
  if (has_attribute(object, name)) check(H5Adelete(object, name.c_str()), "delete attribute '" + name + "'");
  return Id(check(H5Acreate2(object, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT),
                  "create attribute '" + name + "'"),
            H5Aclose);
}

Id simple_space(hsize_t count) {
  return Id(check(H5Screate_simple(1, &count, nullptr), "H5Screate_simple"), H5Sclose);
}

std::size_t attribute_element_count(hid_t attribute) {
  Id space(check(H5Aget_space(attribute), "H5Aget_space"), H5Sclose);
  const hssize_t count = H5Sget_simple_extent_npoints(space.get());
  return count < 0 ? 0 : static_cast<std::size_t>(count);
}

// Reads a string attribute holding `count` strings, fixed or variable length.
std::vector<std::string> read_strings(hid_t object, const std::string& name) {
  Id attribute = open_attribute(object, name);
  Id stored(check(H5Aget_type(attribute.get()), "H5Aget_type"), H5Tclose);
  if (H5Tget_class(stored.get()) != H5T_STRING)
    throw RecordingError("attribute '" + name + "' is not a string");
  const std::size_t count = attribute_element_count(attribute.get());
  std::vector<std::string> values;
  if (H5Tis_variable_str(stored.get()) > 0) {
    Id type = string_type();
    std::vector<char*> pointers(count, nullptr);
    check(H5Aread(attribute.get(), type.get(), pointers.data()), "read attribute '" + name + "'");
    for (char* p : pointers) values.emplace_back(p ? p : "");
    Id space(check(H5Aget_space(attribute.get()), "H5Aget_space"), H5Sclose);
    H5Dvlen_reclaim(type.get(), space.get(), H5P_DEFAULT, pointers.data());
  } else {
    const std::size_t size = H5Tget_size(stored.get());
    Id type(check(H5Tcopy(H5T_C_S1), "H5Tcopy"), H5Tclose);
    check(H5Tset_size(type.get(), size), "H5Tset_size");
    // Null-padded in memory: a NULLTERM copy of a full-width NULLPAD string (h5py's np.bytes_,
    // MATLAB) would lose its last character to the terminator.
    check(H5Tset_strpad(type.get(), H5T_STR_NULLPAD), "H5Tset_strpad");
    std::vector<char> buffer(size * count);
    check(H5Aread(attribute.get(), type.get(), buffer.data()), "read attribute '" + name + "'");
    for (std::size_t i = 0; i < count; ++i) {
      std::string value(buffer.data() + i * size, size);
      value.resize(value.find('\0') == std::string::npos ? size : value.find('\0'));
      values.push_back(value);
    }
  }
  return values;
}

}  // namespace

hid_t check(hid_t status, const std::string& what) {
  if (status < 0) throw RecordingError(what + ": " + hdf5_error_text());
  return status;
}

bool link_exists(hid_t location, const std::string& path) {
  // H5Lexists needs every intermediate component to exist, so walk them one by one.
  std::size_t start = path.front() == '/' ? 1 : 0;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    const std::string prefix = path.substr(0, end);
    if (H5Lexists(location, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    start = end + 1;
  }
  return true;
}

Id open_group(hid_t location, const std::string& path) {
  return Id(check(H5Gopen2(location, path.c_str(), H5P_DEFAULT), "open group '" + path + "'"), H5Gclose);
}

Id create_group(hid_t location, const std::string& path) {
  Id links(check(H5Pcreate(H5P_LINK_CREATE), "H5Pcreate"), H5Pclose);
  check(H5Pset_create_intermediate_group(links.get(), 1), "H5Pset_create_intermediate_group");
  return Id(check(H5Gcreate2(location, path.c_str(), links.get(), H5P_DEFAULT, H5P_DEFAULT),
                  "create group '" + path + "'"),
            H5Gclose);
}

Id open_or_create_group(hid_t location, const std::string& path) {
  return link_exists(location, path) ? open_group(location, path) : create_group(location, path);
}

std::vector<std::string> child_names(hid_t group) {
  std::vector<std::string> names;
  H5G_info_t info;
  check(H5Gget_info(group, &info), "H5Gget_info");
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t size = H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    check(static_cast<hid_t>(size), "H5Lget_name_by_idx");
    std::string name(static_cast<std::size_t>(size), '\0');
    H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), name.size() + 1, H5P_DEFAULT);
    names.push_back(name);
  }
  return names;
}

void write_string_attribute(hid_t object, const std::string& name, const std::string& value) {
  Id type = string_type();
  Id space(check(H5Screate(H5S_SCALAR), "H5Screate"), H5Sclose);
  Id attribute = replace_attribute(object, name, type.get(), space.get());
  const char* pointer = value.c_str();
  check(H5Awrite(attribute.get(), type.get(), &pointer), "write attribute '" + name + "'");
}

void write_string_list_attribute(hid_t object, const std::string& name,
                                 const std::vector<std::string>& values) {
  Id type = string_type();
  Id space = simple_space(values.size());
  Id attribute = replace_attribute(object, name, type.get(), space.get());
  std::vector<const char*> pointers;
  for (const std::string& value : values) pointers.push_back(value.c_str());
  if (!values.empty())
    check(H5Awrite(attribute.get(), type.get(), pointers.data()), "write attribute '" + name + "'");
}

void write_double_list_attribute(hid_t object, const std::string& name, const std::vector<double>& values) {
  Id space = simple_space(values.size());
  Id attribute = replace_attribute(object, name, H5T_IEEE_F64LE, space.get());
  if (!values.empty())
    check(H5Awrite(attribute.get(), H5T_NATIVE_DOUBLE, values.data()), "write attribute '" + name + "'");
}

void write_int64_attribute(hid_t object, const std::string& name, std::int64_t value) {
  Id space(check(H5Screate(H5S_SCALAR), "H5Screate"), H5Sclose);
  Id attribute = replace_attribute(object, name, H5T_STD_I64LE, space.get());
  check(H5Awrite(attribute.get(), H5T_NATIVE_INT64, &value), "write attribute '" + name + "'");
}

bool has_attribute(hid_t object, const std::string& name) {
  return H5Aexists(object, name.c_str()) > 0;
}

std::string read_string_attribute(hid_t object, const std::string& name) {
  std::vector<std::string> values = read_strings(object, name);
  if (values.size() != 1) throw RecordingError("attribute '" + name + "' is not a single string");
  return values.front();
}

std::vector<std::string> read_string_list_attribute(hid_t object, const std::string& name) {
  return read_strings(object, name);
}

std::vector<double> read_double_list_attribute(hid_t object, const std::string& name) {
  Id attribute = open_attribute(object, name);
  std::vector<double> values(attribute_element_count(attribute.get()));
  if (!values.empty())
    check(H5Aread(attribute.get(), H5T_NATIVE_DOUBLE, values.data()), "read attribute '" + name + "'");
  return values;
}

std::int64_t read_int64_attribute(hid_t object, const std::string& name) {
  Id attribute = open_attribute(object, name);
  if (attribute_element_count(attribute.get()) != 1)
    throw RecordingError("attribute '" + name + "' is not a single integer");
  std::int64_t value = 0;
  check(H5Aread(attribute.get(), H5T_NATIVE_INT64, &value), "read attribute '" + name + "'");
  return value;
}

namespace {

// {r, i} compound of two floats of type `part`: what h5py and MATLAB read as complex.
Id complex_type(hid_t part) {
  Id type(check(H5Tcreate(H5T_COMPOUND, 8), "H5Tcreate"), H5Tclose);
  check(H5Tinsert(type.get(), "r", 0, part), "H5Tinsert r");
  check(H5Tinsert(type.get(), "i", 4, part), "H5Tinsert i");
  return type;
}

// IEEE binary16, built the way h5py builds its float16 type so numpy reads it as float16.
Id float16_type() {
  Id type(check(H5Tcopy(H5T_IEEE_F32LE), "H5Tcopy"), H5Tclose);
  check(H5Tset_fields(type.get(), 15, 10, 5, 0, 10), "H5Tset_fields");
  check(H5Tset_size(type.get(), 2), "H5Tset_size");
  check(H5Tset_ebias(type.get(), 15), "H5Tset_ebias");
  return type;
}

Id copy_type(hid_t type) { return Id(check(H5Tcopy(type), "H5Tcopy"), H5Tclose); }

}  // namespace

Id file_type(DType dtype) {
  switch (dtype) {
    case DType::int16: return copy_type(H5T_STD_I16LE);
    case DType::float16: return float16_type();
    case DType::float32: return copy_type(H5T_IEEE_F32LE);
    case DType::complex64: return complex_type(H5T_IEEE_F32LE);
    case DType::float64: return copy_type(H5T_IEEE_F64LE);
    case DType::uint8: return copy_type(H5T_STD_U8LE);
  }
  throw RecordingError("no HDF5 type for this element type");
}

Id memory_type(DType dtype) {
  switch (dtype) {
    case DType::int16: return copy_type(H5T_NATIVE_INT16);
    case DType::float16: return float16_type();  // little-endian hosts only (x86-64, aarch64)
    case DType::float32: return copy_type(H5T_NATIVE_FLOAT);
    case DType::complex64: return complex_type(H5T_NATIVE_FLOAT);
    case DType::float64: return copy_type(H5T_NATIVE_DOUBLE);
    case DType::uint8: return copy_type(H5T_NATIVE_UINT8);
  }
  throw RecordingError("no HDF5 type for this element type");
}

Id variable_bytes_type() {
  return Id(check(H5Tvlen_create(H5T_NATIVE_UINT8), "H5Tvlen_create"), H5Tclose);
}

}  // namespace sonopipe::recording::hdf5
