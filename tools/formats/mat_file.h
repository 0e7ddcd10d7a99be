// A MATLAB .mat file (v5 or v7.3) read through libmatio, with errors that name the file and the
// variable path ("Receive(3).startSample") in the one-line FormatError of acquisition_reader.h.
// Small variables (structures of parameters) are read whole; large arrays are read one contiguous
// slice at a time (MatArray::read_linear), never the whole array.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

struct matvar_t;
struct _mat_t;

namespace sonopipe::formats::mat {

bool is_mat_file(const std::string& path);  // a readable MAT v5 or v7.3 header
bool is_mat73_file(const std::string& path);  // a MAT header of version 7.3 (HDF5 inside)

// A value inside a variable (borrowed from the owning File's cache): numbers, text, a struct or a
// cell array. Accessors throw FormatError naming `path()`.
class Value {
 public:
  Value(const std::string* file, std::string path, matvar_t* variable)
      : file_(file), path_(std::move(path)), variable_(variable) {}

  const std::string& path() const { return path_; }
  bool is_struct() const;
  bool is_cell() const;
  bool is_text() const;
  bool is_numeric() const;
  std::size_t count() const;               // number of elements (struct array / cell / numbers)
  std::vector<std::size_t> dims() const;   // MATLAB's dimensions, trailing singletons as stored

  // Struct field of element `index` (0-based); field() throws when absent.
  std::optional<Value> find_field(const std::string& name, std::size_t index = 0) const;
  Value field(const std::string& name, std::size_t index = 0) const;
  Value cell(std::size_t index) const;

  std::vector<double> numbers() const;     // any real numeric class, column-major
  double scalar() const;                   // exactly one number
  std::string text() const;                // a char row

  [[noreturn]] void fail(const std::string& reason) const;

 private:
  friend class File;
  std::string element_path(std::size_t index, std::size_t count) const;
  const std::string* file_;
  std::string path_;
  matvar_t* variable_;
};

// A large numeric array whose data stay in the file (a cell element of RcvData, IQData, ...).
class MatArray {
 public:
  enum class Element { int16, float64, float32, complex64, complex128, other };
  Element element() const { return element_; }
  const std::vector<std::size_t>& dims() const { return dims_; }  // MATLAB order, column-major
  const std::string& path() const { return path_; }
  // `count` elements starting at column-major linear index `start` into `out`: real arrays as
  // their own type, complex ones as interleaved (re, im) pairs of their own precision.
  void read_linear(std::size_t start, std::size_t count, void* out) const;

 private:
  friend class File;
  _mat_t* file_handle_ = nullptr;
  const std::string* file_ = nullptr;
  matvar_t* variable_ = nullptr;  // owned by the File's info cache
  std::string path_;
  Element element_ = Element::other;
  std::vector<std::size_t> dims_;
};

class File {
 public:
  explicit File(const std::string& path);  // throws FormatError
  ~File();
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  const std::string& path() const { return path_; }
  std::string version() const;  // "v5", "v7.3" (v4 files are refused when opened)
  std::vector<std::string> variable_names() const;
  bool has(const std::string& name) const;
  // The whole variable (cached; for parameter structures, not for data buffers).
  Value read(const std::string& name);
  std::optional<Value> find(const std::string& name);
  // Element `index` of the cell variable `name` as an array read on demand.
  MatArray cell_array(const std::string& name, std::size_t index);

 private:
  std::string path_;
  _mat_t* handle_ = nullptr;
  std::vector<std::string> names_;
  struct Freer {
    void operator()(matvar_t* variable) const;
  };
  std::vector<std::pair<std::string, std::unique_ptr<matvar_t, Freer>>> read_;
  std::vector<std::pair<std::string, std::unique_ptr<matvar_t, Freer>>> info_;
};

}  // namespace sonopipe::formats::mat
