#include "tools/formats/mat_file.h"

#include <matio.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <complex>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <optional>

#include "tools/common/hdf5_util.h"
#include "tools/formats/acquisition_reader.h"
#include "tools/formats/isolated_reader.h"

namespace sonopipe::formats::mat {

namespace {

// libmatio reports through a log callback; its messages become debug lines (our FormatError
// says what went wrong, once, with the variable path).
void matio_log(int, char* message) {
  if (message) spdlog::debug("libmatio: {}", message);
}

void quiet_libraries() {
  static std::once_flag once;
  std::call_once(once, [] { Mat_LogInitFunc("sonopipe", matio_log); });
  recording::hdf5::quiet_errors();  // v7.3 files are read through HDF5, which would print its error stack
}

// Product of dims, or nullopt when it overflows (a hostile header).
std::optional<std::size_t> element_count(const matvar_t* variable) {
  if (!variable || variable->rank <= 0 || !variable->dims) return std::size_t{0};
  std::size_t count = 1;
  for (int d = 0; d < variable->rank; ++d) {
    const std::size_t size = variable->dims[d];
    if (size != 0 && count > std::numeric_limits<std::size_t>::max() / size) return std::nullopt;
    count *= size;
  }
  return count;
}

const char* class_name(matio_classes type) {
  switch (type) {
    case MAT_C_CELL: return "cell";
    case MAT_C_STRUCT: return "struct";
    case MAT_C_CHAR: return "char";
    case MAT_C_DOUBLE: return "double";
    case MAT_C_SINGLE: return "single";
    case MAT_C_INT8: return "int8";
    case MAT_C_UINT8: return "uint8";
    case MAT_C_INT16: return "int16";
    case MAT_C_UINT16: return "uint16";
    case MAT_C_INT32: return "int32";
    case MAT_C_UINT32: return "uint32";
    case MAT_C_INT64: return "int64";
    case MAT_C_UINT64: return "uint64";
    case MAT_C_SPARSE: return "sparse";
    case MAT_C_EMPTY: return "empty";
    default: return "unsupported class";
  }
}

// Parameters (positions, delays, apodizations) hold thousands of values at most; a damaged header
// can claim billions.
constexpr std::size_t kMaxParameterValues = std::size_t{1} << 24;

template <typename T>
void append_numbers(const void* data, std::size_t count, std::vector<double>& out) {
  const T* values = static_cast<const T*>(data);
  for (std::size_t k = 0; k < count; ++k) out.push_back(static_cast<double>(values[k]));
}

}  // namespace

bool is_mat_file(const std::string& path) {
  // The 128-byte header of v5 and v7.3: descriptive text from "MATLAB", then the version and
  // the endian indicator "IM" (or "MI" when written big-endian).
  std::ifstream in(path, std::ios::binary);
  std::array<char, 128> header{};
  if (!in.read(header.data(), header.size())) return false;
  if (std::memcmp(header.data(), "MATLAB ", 7) != 0) return false;
  const bool little = header[126] == 'I' && header[127] == 'M';
  const bool big = header[126] == 'M' && header[127] == 'I';
  return little || big;
}

bool is_mat73_file(const std::string& path) {
  // The header's version field (bytes 124-125): 0x0200 for v7.3, written in the file's byte order.
  std::ifstream in(path, std::ios::binary);
  std::array<char, 128> header{};
  if (!in.read(header.data(), header.size()) || std::memcmp(header.data(), "MATLAB ", 7) != 0) return false;
  const bool little = header[126] == 'I' && header[127] == 'M';
  return little ? (header[124] == 0x00 && header[125] == 0x02) : (header[124] == 0x02 && header[125] == 0x00);
}

// ---------------------------------------------------------------- Value

void Value::fail(const std::string& reason) const { formats::fail(*file_, path_, reason); }

bool Value::is_struct() const { return variable_->class_type == MAT_C_STRUCT; }
bool Value::is_cell() const { return variable_->class_type == MAT_C_CELL; }
bool Value::is_text() const { return variable_->class_type == MAT_C_CHAR; }
bool Value::is_numeric() const {
  switch (variable_->class_type) {
    case MAT_C_DOUBLE: case MAT_C_SINGLE: case MAT_C_INT8: case MAT_C_UINT8: case MAT_C_INT16:
    case MAT_C_UINT16: case MAT_C_INT32: case MAT_C_UINT32: case MAT_C_INT64: case MAT_C_UINT64:
      return true;
    default:
      return false;
  }
}

std::size_t Value::count() const {
  const auto count = element_count(variable_);
  if (!count) fail("dimensions overflow");
  if ((is_struct() || is_cell()) && *count > kMaxParameterValues)
    fail(std::to_string(*count) + " elements, too many for a parameter structure (damaged file?)");
  return *count;
}

std::vector<std::size_t> Value::dims() const {
  std::vector<std::size_t> dims;
  for (int d = 0; d < variable_->rank && variable_->dims; ++d) dims.push_back(variable_->dims[d]);
  return dims;
}

std::string Value::element_path(std::size_t index, std::size_t count) const {
  if (count == 1 && index == 0) return path_;
  return path_ + "(" + std::to_string(index + 1) + ")";
}

std::optional<Value> Value::find_field(const std::string& name, std::size_t index) const {
  if (!is_struct()) fail(std::string("expected a struct, found ") + class_name(variable_->class_type));
  const std::size_t n = count();
  if (index >= n) fail("has " + std::to_string(n) + " elements, element " + std::to_string(index + 1) + " asked for");
  // Looked up here rather than through Mat_VarGetStructFieldByName, which trusts the dimensions
  // of a damaged file and reads past (or through a null) field table.
  const std::size_t fields = Mat_VarGetNumberOfFields(variable_);
  char* const* names = Mat_VarGetStructFieldnames(variable_);
  if (fields == 0 || !names) return std::nullopt;
  std::size_t k = 0;
  while (k < fields && !(names[k] && name == names[k])) ++k;
  if (k == fields) return std::nullopt;
  const std::string field_path = element_path(index, n) + "." + name;
  if (!variable_->data || n > variable_->nbytes / sizeof(matvar_t*) / fields)
    formats::fail(*file_, field_path, "unreadable (damaged structure)");
  matvar_t* field = static_cast<matvar_t**>(variable_->data)[index * fields + k];
  if (!field) formats::fail(*file_, field_path, "unreadable (damaged structure)");
  return Value(file_, field_path, field);
}

Value Value::field(const std::string& name, std::size_t index) const {
  auto value = find_field(name, index);
  if (!value) formats::fail(*file_, element_path(index, count()) + "." + name, "missing");
  return *value;
}

Value Value::cell(std::size_t index) const {
  if (!is_cell()) fail(std::string("expected a cell array, found ") + class_name(variable_->class_type));
  const std::size_t n = count();
  const std::string cell_path = path_ + "{" + std::to_string(index + 1) + "}";
  if (index >= n) formats::fail(*file_, cell_path, "the cell array has " + std::to_string(n) + " elements");
  // Not Mat_VarGetCell: it trusts the dimensions of a damaged file (see find_field).
  if (!variable_->data || n > variable_->nbytes / sizeof(matvar_t*))
    formats::fail(*file_, cell_path, "unreadable (damaged cell array)");
  matvar_t* element = static_cast<matvar_t**>(variable_->data)[index];
  if (!element) formats::fail(*file_, cell_path, "missing or unreadable");
  return Value(file_, cell_path, element);
}

std::vector<double> Value::numbers() const {
  if (!is_numeric()) fail(std::string("expected numbers, found ") + class_name(variable_->class_type));
  if (variable_->isComplex) fail("expected real numbers, found complex");
  const std::size_t n = count();
  std::vector<double> out;
  if (n == 0) return out;
  if (n > kMaxParameterValues) fail(std::to_string(n) + " values, too many for a parameter (damaged file?)");
  if (!variable_->data) fail("data missing or unreadable");
  // matio sizes `data` from the header; a value whose byte count disagrees is damaged.
  if (variable_->nbytes < n * static_cast<std::size_t>(variable_->data_size)) fail("data shorter than its dimensions");
  out.reserve(n);
  switch (variable_->data_type) {
    case MAT_T_DOUBLE: append_numbers<double>(variable_->data, n, out); break;
    case MAT_T_SINGLE: append_numbers<float>(variable_->data, n, out); break;
    case MAT_T_INT8: append_numbers<std::int8_t>(variable_->data, n, out); break;
    case MAT_T_UINT8: append_numbers<std::uint8_t>(variable_->data, n, out); break;
    case MAT_T_INT16: append_numbers<std::int16_t>(variable_->data, n, out); break;
    case MAT_T_UINT16: append_numbers<std::uint16_t>(variable_->data, n, out); break;
    case MAT_T_INT32: append_numbers<std::int32_t>(variable_->data, n, out); break;
    case MAT_T_UINT32: append_numbers<std::uint32_t>(variable_->data, n, out); break;
    case MAT_T_INT64: append_numbers<std::int64_t>(variable_->data, n, out); break;
    case MAT_T_UINT64: append_numbers<std::uint64_t>(variable_->data, n, out); break;
    default: fail("numbers of an unsupported storage type");
  }
  return out;
}

double Value::scalar() const {
  if (is_numeric() && count() != 1) fail("expected one number, found " + std::to_string(count()));
  const std::vector<double> values = numbers();
  if (values.size() != 1) fail("expected one number, found " + std::to_string(values.size()));
  return values.front();
}

std::string Value::text() const {
  if (!is_text()) fail(std::string("expected text (char), found ") + class_name(variable_->class_type));
  const std::size_t n = count();
  std::string out;
  if (n == 0) return out;
  if (n > kMaxParameterValues) fail(std::to_string(n) + " characters, too many for a parameter (damaged file?)");
  if (!variable_->data) fail("text missing or unreadable");
  if (variable_->nbytes < n * static_cast<std::size_t>(variable_->data_size)) fail("text shorter than its dimensions");
  for (std::size_t k = 0; k < n; ++k) {
    unsigned code = 0;
    switch (variable_->data_type) {
      case MAT_T_UINT8: case MAT_T_INT8: case MAT_T_UTF8:
        code = static_cast<const unsigned char*>(variable_->data)[k];
        break;
      case MAT_T_UINT16: case MAT_T_INT16: case MAT_T_UTF16:
        code = static_cast<const std::uint16_t*>(variable_->data)[k];
        break;
      default:
        fail("text of an unsupported storage type");
    }
    out.push_back(code < 128 ? static_cast<char>(code) : '?');
  }
  return out;
}

// ---------------------------------------------------------------- MatArray

void MatArray::read_linear(std::size_t start, std::size_t count, void* out) const {
  std::size_t total = 1;
  for (std::size_t d : dims_) total *= d;
  if (start > total || count > total - start)
    formats::fail(*file_, path_, "slice [" + std::to_string(start) + ", +" + std::to_string(count) +
                                     ") outside its " + std::to_string(total) + " elements");
  if (start > static_cast<std::size_t>(std::numeric_limits<int>::max()) ||
      count > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    formats::fail(*file_, path_, "too large for libmatio's linear reads (more than 2^31 elements)");
  quiet_libraries();
  isolation::note_progress(path_);
  const int first = static_cast<int>(start), edge = static_cast<int>(count);
  int status = 0;
  if (element_ == Element::complex64 || element_ == Element::complex128) {
    const std::size_t size = element_ == Element::complex64 ? sizeof(float) : sizeof(double);
    std::vector<std::byte> real(count * size), imaginary(count * size);
    mat_complex_split_t split{real.data(), imaginary.data()};
    status = Mat_VarReadDataLinear(file_handle_, variable_, &split, first, 1, edge);
    auto* bytes = static_cast<std::byte*>(out);
    for (std::size_t k = 0; k < count; ++k) {
      std::memcpy(bytes + (2 * k) * size, real.data() + k * size, size);
      std::memcpy(bytes + (2 * k + 1) * size, imaginary.data() + k * size, size);
    }
  } else {
    status = Mat_VarReadDataLinear(file_handle_, variable_, out, first, 1, edge);
  }
  if (status != 0) formats::fail(*file_, path_, "data could not be read (truncated or damaged file)");
}

// ---------------------------------------------------------------- File

void File::Freer::operator()(matvar_t* variable) const { Mat_VarFree(variable); }

File::File(const std::string& path) : path_(path) {
  quiet_libraries();
  if (!is_mat_file(path)) fail(path, "", "not a MAT file (no MATLAB v5/v7.3 header)");
  isolation::note_progress("/");
  handle_ = Mat_Open(path.c_str(), MAT_ACC_RDONLY);
  if (!handle_) fail(path, "", "libmatio cannot open it (damaged, or v7.3 without HDF5 support)");
  const mat_ft version = Mat_GetVersion(handle_);
  if (version != MAT_FT_MAT5 && version != MAT_FT_MAT73) {
    Mat_Close(handle_);
    fail(path, "", "MAT version 4 files hold no structures; expected v5 or v7.3");
  }
  size_t count = 0;
  char** names = Mat_GetDir(handle_, &count);
  if (names)
    for (size_t k = 0; k < count; ++k)
      if (names[k]) names_.emplace_back(names[k]);
  // Mat_GetDir leaves v5 files positioned at their end; later reads by name seek themselves.
}

File::~File() {
  read_.clear();
  info_.clear();
  if (handle_) Mat_Close(handle_);
}

std::string File::version() const { return Mat_GetVersion(handle_) == MAT_FT_MAT73 ? "v7.3" : "v5"; }

std::vector<std::string> File::variable_names() const { return names_; }

bool File::has(const std::string& name) const {
  return std::find(names_.begin(), names_.end(), name) != names_.end();
}

std::optional<Value> File::find(const std::string& name) {
  if (!has(name)) return std::nullopt;
  for (auto& [key, variable] : read_)
    if (key == name) return Value(&path_, name, variable.get());
  quiet_libraries();
  isolation::note_progress(name);
  matvar_t* variable = Mat_VarRead(handle_, name.c_str());
  if (!variable) fail(path_, name, "could not be read (damaged, or a class libmatio cannot read)");
  read_.emplace_back(name, std::unique_ptr<matvar_t, Freer>(variable));
  return Value(&path_, name, variable);
}

Value File::read(const std::string& name) {
  auto value = find(name);
  if (!value) fail(path_, name, "missing");
  return *value;
}

MatArray File::cell_array(const std::string& name, std::size_t index) {
  if (!has(name)) fail(path_, name, "missing");
  matvar_t* info = nullptr;
  for (auto& [key, variable] : info_)
    if (key == name) info = variable.get();
  if (!info) {
    quiet_libraries();
    isolation::note_progress(name);
    info = Mat_VarReadInfo(handle_, name.c_str());
    if (!info) fail(path_, name, "could not be read (damaged file)");
    info_.emplace_back(name, std::unique_ptr<matvar_t, Freer>(info));
  }
  Value cell_value = Value(&path_, name, info).cell(index);
  matvar_t* element = cell_value.variable_;
  MatArray array;
  array.file_handle_ = handle_;
  array.file_ = &path_;
  array.variable_ = element;
  array.path_ = cell_value.path();
  array.dims_ = cell_value.dims();
  const auto elements = element_count(element);
  if (!elements) cell_value.fail("dimensions overflow");
  const bool complex = element->isComplex != 0;
  switch (element->class_type) {
    case MAT_C_INT16: array.element_ = complex ? MatArray::Element::other : MatArray::Element::int16; break;
    case MAT_C_DOUBLE: array.element_ = complex ? MatArray::Element::complex128 : MatArray::Element::float64; break;
    case MAT_C_SINGLE: array.element_ = complex ? MatArray::Element::complex64 : MatArray::Element::float32; break;
    default: array.element_ = MatArray::Element::other; break;
  }
  // What the file can hold: zlib (v5 compression, HDF5's deflate) expands at most 1032:1. A
  // larger claim is a damaged header, refused before anyone allocates a frame for it.
  constexpr std::uintmax_t kMaximumExpansion = 1032;
  std::error_code ignored;
  const std::uintmax_t file_bytes = std::filesystem::file_size(path_, ignored);
  // One byte per element at least (MATLAB's v5 stores whole numbers in the narrowest type).
  if (*elements > file_bytes * kMaximumExpansion + 1)
    cell_value.fail(std::to_string(*elements) + " elements, more than a file of " + std::to_string(file_bytes) +
                    " bytes can hold (damaged header)");
  return array;
}

}  // namespace sonopipe::formats::mat
